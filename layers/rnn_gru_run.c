/* The drivers of rnn, gru, rnncell and grucell (rnn_gru_run.h): properties,
 * weights and scratch at finalize, and the loop over time.
 *
 * A sequence layer keeps its states time-major, [T, B, U], so that every
 * step's B rows are one contiguous block for the element-wise ops; the
 * input x [B, T, F] is read in place, step t's rows F * T floats apart
 * (gemm's lda). The output is the states permuted to [B, T, U]
 * (return_sequences) or the last step's block.
 *
 * Scratch: the states (sequence layers), the gate blocks the kind keeps for
 * its backward, the dropout mask (dropout_rate > 0), all from forward to
 * backward; and for the backward alone the pre-activations' derivatives of
 * every step [T, B, G*U] (none where they go over the kept gates: dz_over),
 * one step's state derivative [B, U] (the output's slice for that step,
 * copied in as the backward reaches it, plus what the next step sends back)
 * and G + 2 [B, U] blocks of work. A cell is the same with T = 1. A kind
 * that can make its state again from its kept gates (kind.state: gru) keeps
 * the states for the forward only, and with its gates the state at every
 * K-th step (K^2 >= T); the backward then runs one segment of K steps at a
 * time, last first, computing the segment's states again from the one kept
 * before it (K more blocks of its scratch), as lstm.c does. calc_gradient
 * runs the backward through time, leaving every step's gate derivatives;
 * calc_derivative turns them into dX (and, in a cell, d of the previous
 * state), running the backward itself when calc_gradient did not run (no
 * weight gradient: a frozen layer). So the backward runs once after each
 * forward.
 *
 * Dropout (dropout_rate) multiplies each new state by a mask drawn from
 * the counter-based generator, and the masked state is what the next step
 * reads, as in NNTrainer; unlike NNTrainer, the backward carries the mask
 * through that recurrent path too and takes the activation's derivative at
 * the unmasked value, so it is the derivative of the forward. */
#include "layers/rnn_gru_run.h"

#include <limits.h>

void nnt_rg_init(nnt_layer *l) {
  nnt_rg_props *p = &((nnt_rg_priv *)l->priv)->p;
  nnt_rnn_props_init(&p->r, NNT_ACT_TANH, NNT_ACT_SIGMOID);
  p->reset_after = 1;
  nnt_weight_props_init(&p->wp);
}

int nnt_rg_set(nnt_layer *l, const nnt_rg_kind *kd, const char *key, const char *value,
               nnt_err *e) {
  nnt_rg_props *p = &((nnt_rg_priv *)l->priv)->p;
  if ((kd->keys & NNT_RG_K_RESET) && nnt_streq(key, "reset_after"))
    return nnt_parse_bool(key, value, &p->reset_after, e);
  /* recurrent.h's keys that this type does not have are unknown here */
  if (nnt_streq(key, "bidirectional") || nnt_streq(key, "max_timestep") ||
      (!(kd->keys & NNT_RG_K_RECURRENT) && nnt_streq(key, "recurrent_activation")) ||
      (!(kd->keys & NNT_RG_K_RETURN_SEQ) && nnt_streq(key, "return_sequences")))
    return NNT_ERR_NOKEY;
  int rc = nnt_rnn_props_set(&p->r, key, value, e);
  return rc == NNT_ERR_NOKEY ? nnt_weight_props_set(&p->wp, key, value, e) : rc;
}

/* A weight [rows, cols] (a bias: rows 0, [cols]), with its fans as
 * NNTrainer reads them off the shape (as fully_connected does): a single
 * row reads as a vector of cols. */
static void add_weight(nnt_finalize_ctx *ctx, const nnt_rg_props *p, const char *name,
                       unsigned rows, unsigned cols) {
  int bias = rows == 0;
  unsigned r = bias ? 1 : rows;
  nnt_fctx_add_weight(ctx, name, nnt_dim_make(1, 1, r, cols),
                      bias ? p->wp.bias_init : p->wp.weight_init, r == 1 ? cols : r, cols,
                      !bias && p->wp.l2norm ? p->wp.l2_constant : 0,
                      bias ? p->wp.bias_decay : p->wp.weight_decay, 1);
}

/* Whether the backward writes each step's pre-activation derivatives over
 * that step's kept gates (the kind writes them after its last read of
 * them, and a step keeps G blocks: gru). A step's gates are read by its
 * own backward only, so a 64-step gru does not hold its derivatives
 * beside them. */
static int dz_over(const nnt_rg_props *p, const nnt_rg_kind *kd) {
  return kd->d_after_gates && kd->saved(p) == kd->gates;
}

/* The backward's pointers: d (every step's pre-activation derivatives),
 * dh (the running step's state derivative), work (G + 1 blocks), nxt (a
 * block: dhprev, which a cell's calc_derivative reads), then seg (K
 * blocks: a segment's states). */
typedef struct bwd_at {
  float *d, *dh, *work, *nxt, *seg;
} bwd_at;

static bwd_at bwd_layout(const nnt_rg_priv *q, const nnt_rg_kind *kd, const nnt_run_ctx *ctx) {
  size_t bu = (size_t)q->B * q->p.r.unit, gbu = kd->gates * bu;
  float *b0 = ctx->scratch[q->s_bwd].data;
  int over = dz_over(&q->p, kd);
  bwd_at a;
  a.d = over ? ctx->scratch[q->s_gates].data : b0;
  a.dh = over ? b0 : b0 + q->T * gbu;
  a.work = a.dh + bu;
  a.nxt = a.work + (kd->gates + 1) * bu;
  a.seg = a.nxt + bu;
  return a;
}

/* The weights and every scratch but the states, for T steps. */
static int common_finalize(nnt_rg_priv *q, const nnt_rg_kind *kd, nnt_finalize_ctx *ctx,
                           unsigned T, nnt_err *e) {
  const nnt_rg_props *p = &q->p;
  unsigned U = p->r.unit, G = kd->gates, B = ctx->batch, F = ctx->in_dim[0].w;
  size_t gu = (size_t)G * U;
  int rc = nnt_check_gemm_dim(gu, "unit times gates", e);
  if (!rc)
    rc = nnt_check_gemm_dim((size_t)T * F, "time steps times features", e);
  if (!rc)
    rc = nnt_check_gemm_dim(B, "batch_size", e);
  if (rc)
    return rc;
  if (gu > UINT_MAX)
    return nnt_err_set(e, NNT_ERR_INVAL, "unit %u is too large for %u gates", U, G);
  q->T = T, q->B = B, q->F = F;
  add_weight(ctx, p, "weight_ih", F, (unsigned)gu);
  add_weight(ctx, p, "weight_hh", U, (unsigned)gu);
  if (!p->wp.disable_bias && p->r.integrate_bias)
    add_weight(ctx, p, "bias_h", 0, (unsigned)gu);
  if (!p->wp.disable_bias && !p->r.integrate_bias) {
    add_weight(ctx, p, "bias_ih", 0, (unsigned)gu);
    add_weight(ctx, p, "bias_hh", 0, (unsigned)gu);
  }
  /* [B, U] blocks: the kept gates; the backward's (derivatives of the
   * pre-activations and of the states, then work) */
  size_t saved = (size_t)T * kd->saved(p) + q->nck;
  size_t bwd = (size_t)T * (dz_over(p, kd) ? 0 : G) + G + 3 + q->K;
  if (bwd > UINT_MAX || saved > UINT_MAX)
    return nnt_err_set(e, NNT_ERR_INVAL, "%u time steps are too many for the backward", T);
  q->s_gates = q->s_mask = -1;
  if (saved)
    q->s_gates =
        (int)nnt_fctx_add_scratch(ctx, nnt_dim_make(1, (unsigned)saved, B, U), NNT_SCRATCH_ITER);
  if (p->r.dropout_rate > 0)
    q->s_mask = (int)nnt_fctx_add_scratch(ctx, nnt_dim_make(1, T, B, U), NNT_SCRATCH_ITER);
  q->s_bwd = (int)nnt_fctx_add_scratch(ctx, nnt_dim_make(1, (unsigned)bwd, B, U), NNT_SCRATCH_BWD);
  return NNT_OK;
}

int nnt_rg_seq_finalize(nnt_layer *l, const nnt_rg_kind *kd, nnt_finalize_ctx *ctx, nnt_err *e) {
  nnt_rg_priv *q = l->priv;
  unsigned T;
  int rc = nnt_rnn_check_input(&q->p.r, ctx, kd->type, &T, e);
  if (rc)
    return rc;
  unsigned U = q->p.r.unit;
  ctx->out_dim[0] = nnt_dim_make(ctx->batch, 1, q->p.r.return_sequences ? T : 1, U);
  q->K = q->nck = 0;
  if (kd->state && kd->saved(&q->p)) {
    q->K = (unsigned)nnt_rnn_seg(T);
    q->nck = (T - 1) / q->K;
  }
  q->s_hs = (int)nnt_fctx_add_scratch(ctx, nnt_dim_make(1, T, ctx->batch, U),
                                      q->K ? NNT_SCRATCH_FWD : NNT_SCRATCH_ITER);
  ctx->flags = NNT_LF_BWD_READS_INPUT;
  return common_finalize(q, kd, ctx, T, e);
}

int nnt_rg_cell_finalize(nnt_layer *l, const nnt_rg_kind *kd, nnt_finalize_ctx *ctx,
                         nnt_err *e) {
  nnt_rg_priv *q = l->priv;
  if (!q->p.r.unit)
    return nnt_err_set(e, NNT_ERR_INVAL, "unit: required key is missing");
  if (ctx->n_in != 2)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "%s takes two inputs (the input and the previous hidden state), not %u",
                       kd->type, ctx->n_in);
  nnt_dim x = ctx->in_dim[0], h = ctx->in_dim[1];
  unsigned U = q->p.r.unit;
  if (x.c != 1 || x.h != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "%s takes one time step, 1:1:features, not %u:%u:%u",
                       kd->type, x.c, x.h, x.w);
  if (h.c != 1 || h.h != 1 || h.w != U)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "%s: the previous hidden state is %u:%u:%u, not 1:1:%u (unit)", kd->type,
                       h.c, h.h, h.w, U);
  ctx->out_dim[0] = nnt_dim_make(ctx->batch, 1, 1, U);
  q->s_hs = -1;
  q->K = q->nck = 0;
  int rc = common_finalize(q, kd, ctx, 1, e);
  ctx->flags = NNT_LF_BWD_READS_INPUT;
  if (q->s_gates < 0) /* the kind's backward reads the new state itself */
    ctx->flags |= NNT_LF_BWD_READS_OUTPUT;
  return rc;
}

static void weights_of(const nnt_run_ctx *ctx, int grads, nnt_rg_w *w) {
  memset(w, 0, sizeof *w);
  w->wih = ctx->w[0].data, w->whh = ctx->w[1].data;
  if (ctx->n_w == 3)
    w->bh = ctx->w[2].data;
  if (ctx->n_w == 4)
    w->bih = ctx->w[2].data, w->bhh = ctx->w[3].data;
  if (!grads)
    return;
  w->gwih = ctx->gw[0].data, w->gwhh = ctx->gw[1].data;
  if (ctx->n_w == 3)
    w->gbh = ctx->gw[2].data;
  if (ctx->n_w == 4)
    w->gbih = ctx->gw[2].data, w->gbhh = ctx->gw[3].data;
}

/* The step at time t (0 for a cell) as forward and backward share it, hs
 * the states; masked: dropout applies (a training forward, or the
 * backward after one). */
static nnt_rg_step step_at(const nnt_rg_priv *q, const nnt_rg_kind *kd, const nnt_run_ctx *ctx,
                           const nnt_rg_w *w, unsigned t, float *hs, int masked) {
  size_t bu = (size_t)q->B * q->p.r.unit;
  unsigned saved = kd->saved(&q->p);
  nnt_rg_step s = {.k = ctx->k, .p = &q->p, .w = w, .B = q->B, .F = q->F};
  s.x = (const float *)ctx->in[0].data + (size_t)t * q->F;
  s.ldx = (size_t)q->T * q->F;
  s.h = hs ? hs + t * bu : NULL; /* none in a segmented backward: set there */
  s.hprev = q->s_hs < 0 ? ctx->in[1].data : t && hs ? hs + (t - 1) * bu : NULL;
  s.gates = saved ? (float *)ctx->scratch[q->s_gates].data + (size_t)t * saved * bu : s.h;
  if (q->s_mask >= 0 && masked)
    s.mask = (const float *)ctx->scratch[q->s_mask].data + t * bu;
  return s;
}

/* The states kept every K-th step, after the gates in their scratch. */
static float *kept_states(const nnt_rg_priv *q, const nnt_rg_kind *kd, const nnt_run_ctx *ctx) {
  return (float *)ctx->scratch[q->s_gates].data +
         (size_t)q->T * kd->saved(&q->p) * q->B * q->p.r.unit;
}

/* The states: the sequence layer's scratch, or a cell's output. */
static float *states(const nnt_rg_priv *q, const nnt_run_ctx *ctx) {
  return q->s_hs < 0 ? ctx->out[0].data : ctx->scratch[q->s_hs].data;
}

static int forward(nnt_rg_priv *q, const nnt_rg_kind *kd, nnt_run_ctx *ctx) {
  nnt_rg_w w;
  weights_of(ctx, 0, &w);
  if (q->s_mask >= 0 && ctx->training)
    NNT_TRY(ctx->k->dropout_mask(ctx->k, nnt_tensor_len(&ctx->scratch[q->s_mask]),
                                 q->p.r.dropout_rate, ctx->seed, ctx->stream,
                                 ctx->scratch[q->s_mask].data));
  size_t bu = (size_t)q->B * q->p.r.unit;
  float *ck = q->nck && ctx->training ? kept_states(q, kd, ctx) : NULL;
  for (unsigned t = 0; t < q->T; t++) {
    nnt_rg_step s = step_at(q, kd, ctx, &w, t, states(q, ctx), ctx->training);
    NNT_TRY(kd->fwd(&s));
    if (ck && (t + 1) % q->K == 0 && t + 1 < q->T) /* the next segment's start */
      NNT_TRY(ctx->k->copy(ctx->k, bu, s.h, ck + ((t + 1) / q->K - 1) * bu));
  }
  return NNT_OK;
}

/* What reaches the state of step t from the output, into dh [B, U]: a
 * cell's whole d_out, a sequence's slice for that step. */
static int dh_from_output(const nnt_rg_priv *q, const nnt_run_ctx *ctx, unsigned t, float *dh) {
  if (q->s_hs < 0)
    return ctx->k->copy(ctx->k, (size_t)q->B * q->p.r.unit, ctx->d_out[0].data, dh);
  return nnt_rnn_dh_in(ctx->k, ctx->d_out[0].data, q->T, 1, q->B, q->p.r.unit,
                       q->p.r.return_sequences, t, 0, dh);
}

/* The backward through time: every step's pre-activation derivatives
 * (and a cell's dhprev) into the backward scratch, and with grads the
 * weight gradients (overwritten). */
static int bptt(nnt_rg_priv *q, const nnt_rg_kind *kd, nnt_run_ctx *ctx, int grads) {
  const nnt_kernels *k = ctx->k;
  unsigned T = q->T, U = q->p.r.unit;
  size_t bu = (size_t)q->B * U, gbu = kd->gates * bu;
  bwd_at a = bwd_layout(q, kd, ctx);
  float *d = a.d, *dh = a.dh, *work = a.work, *nxt = a.nxt;
  nnt_rg_w w;
  weights_of(ctx, grads, &w);
  for (unsigned i = 0; grads && i < ctx->n_w; i++)
    NNT_TRY(k->fill(k, nnt_tensor_len(&ctx->gw[i]), 0.0f, ctx->gw[i].data));
  NNT_TRY(dh_from_output(q, ctx, T - 1, dh));
  /* segments of K steps (one of T where the states are all kept) */
  unsigned K = q->K ? q->K : T;
  const float *ck = q->K ? kept_states(q, kd, ctx) : NULL;
  float *hs = q->K ? NULL : states(q, ctx);
  for (unsigned j = (T + K - 1) / K; j-- > 0;) {
    unsigned s0 = j * K, s1 = s0 + K < T ? s0 + K : T;
    const float *h0 = j ? ck + (size_t)(j - 1) * bu : NULL;
    /* the segment's states again, but its last (no step of it reads that) */
    for (unsigned t = s0; q->K && t + 1 < s1; t++) {
      nnt_rg_step s = step_at(q, kd, ctx, &w, t, NULL, 1);
      s.hprev = t > s0 ? a.seg + (size_t)(t - 1 - s0) * bu : h0;
      s.h = a.seg + (size_t)(t - s0) * bu;
      NNT_TRY(kd->state(&s));
    }
    for (unsigned t = s1; t-- > s0;) {
      nnt_rg_step s = step_at(q, kd, ctx, &w, t, hs, 1);
      if (q->K)
        s.hprev = t > s0 ? a.seg + (size_t)(t - 1 - s0) * bu : h0;
      s.dh = dh, s.d = d + t * gbu, s.work = work;
      s.dhprev = s.hprev ? nxt : NULL;
      NNT_TRY(kd->bwd(&s));
      if (t) { /* the previous step's: from the output, and what this one sent */
        NNT_TRY(dh_from_output(q, ctx, t - 1, dh));
        NNT_TRY(k->add(k, bu, dh, nxt, dh));
      }
    }
  }
  return NNT_OK;
}

/* dX from the pre-activation derivatives; a cell's d of the previous
 * state, which bptt left in the work block after the gates'. */
static int derivative(nnt_rg_priv *q, const nnt_rg_kind *kd, nnt_run_ctx *ctx) {
  if (!ctx->gw[0].data) /* calc_gradient did not run */
    NNT_TRY(bptt(q, kd, ctx, 0));
  size_t bu = (size_t)q->B * q->p.r.unit, gu = (size_t)kd->gates * q->p.r.unit;
  bwd_at a = bwd_layout(q, kd, ctx);
  const float *wih = ctx->w[0].data;
  if (ctx->d_in[0].data)
    NNT_TRY(nnt_rnn_dx(ctx->k, q->T, 1, q->B, q->F, gu, a.d, &wih, ctx->d_in[0].data));
  if (q->s_hs < 0 && ctx->d_in[1].data)
    NNT_TRY(ctx->k->copy(ctx->k, bu, a.nxt, ctx->d_in[1].data));
  return NNT_OK;
}

int nnt_rg_seq_forward(nnt_layer *l, const nnt_rg_kind *kd, nnt_run_ctx *ctx) {
  nnt_rg_priv *q = l->priv;
  NNT_TRY(forward(q, kd, ctx));
  return nnt_rnn_out_fwd(ctx->k, q->T, 1, q->B, q->p.r.unit, q->p.r.return_sequences,
                         ctx->scratch[q->s_hs].data, ctx->out[0].data);
}

int nnt_rg_seq_gradient(nnt_layer *l, const nnt_rg_kind *kd, nnt_run_ctx *ctx) {
  return bptt(l->priv, kd, ctx, 1);
}

int nnt_rg_seq_derivative(nnt_layer *l, const nnt_rg_kind *kd, nnt_run_ctx *ctx) {
  return derivative(l->priv, kd, ctx);
}

int nnt_rg_cell_forward(nnt_layer *l, const nnt_rg_kind *kd, nnt_run_ctx *ctx) {
  return forward(l->priv, kd, ctx);
}

int nnt_rg_cell_gradient(nnt_layer *l, const nnt_rg_kind *kd, nnt_run_ctx *ctx) {
  return bptt(l->priv, kd, ctx, 1);
}

int nnt_rg_cell_derivative(nnt_layer *l, const nnt_rg_kind *kd, nnt_run_ctx *ctx) {
  return derivative(l->priv, kd, ctx);
}
