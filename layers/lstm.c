/* lstm: a long short-term memory layer over a batch-first sequence
 * [batch, 1, T, feature] (NNTrainer's LSTMLayer and its keys, recurrent.h),
 * giving [batch, 1, T or 1, unit or 2 unit]. Weights in NNTrainer's order:
 * weight_ih [feature, 4 unit], weight_hh [unit, 4 unit], then bias_h [4 unit]
 * (integrate_bias) or bias_ih, bias_hh (none with disable_bias); with
 * bidirectional the same again named reverse_*. The step is lstm_core's.
 *
 * Scratch: 0, the hidden states [T][dirs][b][u] (the forward's only: each
 * step reads the previous one and the output is permuted from them); 1, kept
 * for the backward in training only: per position and direction the
 * activated gates (4 b u each, [T][dirs][4][b][u]), then per direction the
 * cell and hidden states at every K-th step ([dirs][T/K][2][b][u], K about
 * sqrt(T): nnt_rnn_seg), then the dropout masks (b u each); 2, the forward's
 * work (z, tmp, two cell states in turn and, where 1 is absent, one step's
 * gates); 3, the backward's: two hidden-state derivatives in turn, the
 * running dc, the step's work and one segment's K cell and hidden states and
 * act(c)s. calc_gradient runs backpropagation through time one segment of K
 * steps at a time, last first: it recomputes the segment's states from the
 * ones kept at its start and its kept gates (the forward's ops: the same
 * bits), then runs its steps back, reading each position's slice of the
 * output's derivative (copy2d) as it comes. So neither the output nor the
 * sequence's states nor its derivatives are held through the backward. Each
 * step writes its dz over its own gates, which it has just read for the last
 * time (a segment's recomputation, which reads them too, runs before), and
 * calc_derivative reads dz there (dx = dz W_ih^T): the sequence's dz is not
 * held twice (docs/memory.md, "Sequence models"). So the backward runs once
 * after each forward; a frozen lstm runs it in calc_derivative. Dropout
 * (dropout_rate) scales the hidden state h of each step, the one the next
 * step reads too, as NNTrainer does, but with a mask of its own for each
 * direction. */
#include "layers/lstm_core.h"
#include <stdio.h>

#include "layers/recurrent.h"

typedef struct lstm_priv {
  nnt_rnn_props rp;
  nnt_weight_props wp;
} lstm_priv;

static void lstm_init(nnt_layer *l) {
  lstm_priv *p = l->priv;
  nnt_rnn_props_init(&p->rp, NNT_ACT_TANH, NNT_ACT_SIGMOID);
  nnt_weight_props_init(&p->wp);
}

static int lstm_set(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  lstm_priv *p = l->priv;
  int rc = nnt_rnn_props_set(&p->rp, key, value, e);
  return rc == NNT_ERR_NOKEY ? nnt_weight_props_set(&p->wp, key, value, e) : rc;
}

/* The kept states: (c, h) before each segment but the first. */
static size_t lstm_ckpts(size_t T) { return T ? (T - 1) / nnt_rnn_seg(T) : 0; }

/* Weights of one direction: 2 + the biases. */
static unsigned lstm_nw(const lstm_priv *p) {
  return 2u + (p->wp.disable_bias ? 0u : p->rp.integrate_bias ? 1u : 2u);
}

/* NNTrainer's fans from a [rows, cols] shape: a single row reads as a
 * vector (fully_connected.c says the same). */
static void add_w(nnt_finalize_ctx *ctx, const lstm_priv *p, const char *pre, const char *name,
                  unsigned rows, unsigned cols, int bias) {
  char n[32];
  snprintf(n, sizeof n, "%s%s", pre, name);
  if (bias)
    nnt_fctx_add_weight(ctx, n, nnt_dim_make(1, 1, 1, cols), p->wp.bias_init, cols, cols, 0,
                        p->wp.bias_decay, 1);
  else
    nnt_fctx_add_weight(ctx, n, nnt_dim_make(1, 1, rows, cols), p->wp.weight_init,
                        rows == 1 ? cols : rows, cols, p->wp.l2norm ? p->wp.l2_constant : 0,
                        p->wp.weight_decay, 1);
}

static int lstm_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  lstm_priv *p = l->priv;
  unsigned T;
  int rc = nnt_rnn_check_input(&p->rp, ctx, "lstm", &T, e);
  if (rc)
    return rc;
  unsigned u = p->rp.unit, feat = ctx->in_dim[0].w, b = ctx->in_dim[0].b;
  unsigned dirs = p->rp.bidirectional ? 2 : 1;
  if (u > UINT_MAX / 8 || (rc = nnt_check_gemm_dim(4 * (size_t)u, "4 x unit", e)) ||
      (rc = nnt_check_gemm_dim(feat, "input width", e)) ||
      (rc = nnt_check_gemm_dim((size_t)T * feat, "time steps x input width", e)))
    return rc ? rc : nnt_err_set(e, NNT_ERR_INVAL, "key 'unit': %u is too large", u);
  size_t td = (size_t)T * dirs, K = nnt_rnn_seg(T), nck = lstm_ckpts(T);
  size_t kept = 4 * td + 2 * dirs * nck + (p->rp.dropout_rate > 0 ? td : 0);
  if (kept > UINT_MAX || 10 + 3 * K > UINT_MAX)
    return nnt_err_set(e, NNT_ERR_INVAL, "lstm: %u time steps are too many", T);
  ctx->out_dim[0] = nnt_dim_make(b, 1, p->rp.return_sequences ? T : 1, dirs * u);
  for (unsigned d = 0; d < dirs; d++) {
    const char *pre = d ? "reverse_" : "";
    add_w(ctx, p, pre, "weight_ih", feat, 4 * u, 0);
    add_w(ctx, p, pre, "weight_hh", u, 4 * u, 0);
    if (!p->wp.disable_bias && p->rp.integrate_bias)
      add_w(ctx, p, pre, "bias_h", 1, 4 * u, 1);
    else if (!p->wp.disable_bias) {
      add_w(ctx, p, pre, "bias_ih", 1, 4 * u, 1);
      add_w(ctx, p, pre, "bias_hh", 1, 4 * u, 1);
    }
  }
  nnt_fctx_add_scratch(ctx, nnt_dim_make(b, (unsigned)td, 1, u), NNT_SCRATCH_FWD);
  nnt_fctx_add_scratch(ctx, nnt_dim_make(b, (unsigned)kept, 1, u), NNT_SCRATCH_SAVED);
  nnt_fctx_add_scratch(ctx, nnt_dim_make(b, 11, 1, u), NNT_SCRATCH_FWD);
  nnt_fctx_add_scratch(ctx, nnt_dim_make(b, (unsigned)(10 + 3 * K), 1, u), NNT_SCRATCH_BWD);
  ctx->flags = NNT_LF_BWD_READS_INPUT | NNT_LF_DERIV_SKIPS_INPUT;
  return NNT_OK;
}

/* The step configuration of direction d. */
static void lstm_cfg(const lstm_priv *p, const nnt_run_ctx *ctx, const nnt_tensor *w, unsigned d,
                     nnt_lstm_cfg *cfg) {
  unsigned nw = lstm_nw(p), base = d * nw;
  const nnt_tensor *x = &ctx->in[0];
  cfg->b = x->dim.b, cfg->u = p->rp.unit, cfg->feat = x->dim.w;
  cfg->act = p->rp.act, cfg->ract = p->rp.ract;
  cfg->w_ih = w[base].data, cfg->w_hh = w[base + 1].data;
  cfg->bias[0] = nw > 2 ? w[base + 2].data : NULL;
  cfg->bias[1] = nw > 3 ? w[base + 3].data : NULL;
}

static int lstm_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  lstm_priv *p = l->priv;
  const nnt_kernels *k = ctx->k;
  const nnt_tensor *x = &ctx->in[0];
  size_t b = x->dim.b, T = x->dim.h, feat = x->dim.w, u = p->rp.unit, bu = b * u;
  unsigned dirs = p->rp.bidirectional ? 2 : 1;
  float *H = ctx->scratch[0].data, *S = ctx->scratch[1].data, *F = ctx->scratch[2].data;
  size_t K = nnt_rnn_seg(T), nck = lstm_ckpts(T);
  float *ck = S ? S + T * dirs * 4 * bu : NULL; /* the kept states */
  const float *masks = NULL;
  if (ctx->training && S && p->rp.dropout_rate > 0) {
    float *m = ck + dirs * nck * 2 * bu;
    NNT_TRY(k->dropout_mask(k, T * dirs * bu, p->rp.dropout_rate, ctx->seed, ctx->stream, m));
    masks = m;
  }
  for (unsigned d = 0; d < dirs; d++) {
    nnt_lstm_cfg cfg;
    lstm_cfg(p, ctx, ctx->w, d, &cfg);
    for (size_t s = 0; s < T; s++) {
      size_t at = nnt_rnn_pos(T, d, s) * dirs + d, pv = s ? nnt_rnn_prev(T, d, s) * dirs + d : 0;
      /* two cell states in turn; the gates kept, or one step's */
      nnt_lstm_fwd_io io = {.x = x->data + nnt_rnn_pos(T, d, s) * feat, .ldx = T * feat,
                            .z = F, .tmp = F + 4 * bu, .h = H + at * bu,
                            .gates = S ? S + at * 4 * bu : F + 5 * bu,
                            .c = F + (9 + (s & 1)) * bu};
      io.h_prev = s ? H + pv * bu : NULL;
      io.c_prev = s ? F + (9 + ((s - 1) & 1)) * bu : NULL;
      io.mask = masks ? masks + at * bu : NULL;
      NNT_TRY(nnt_lstm_step_fwd(k, &cfg, &io));
      if (S && (s + 1) % K == 0 && s + 1 < T) { /* the next segment's start */
        float *to = ck + (d * nck + (s + 1) / K - 1) * 2 * bu;
        NNT_TRY(k->copy(k, bu, io.c, to));
        NNT_TRY(k->copy(k, bu, io.h, to + bu));
      }
    }
  }
  return nnt_rnn_out_fwd(k, T, dirs, b, u, p->rp.return_sequences, H, ctx->out[0].data);
}

/* Backpropagation through time: every position's dz over its gates in
 * scratch 1, and with dw the weight gradients. */
static int lstm_bptt(lstm_priv *p, nnt_run_ctx *ctx, int dw) {
  const nnt_kernels *k = ctx->k;
  const nnt_tensor *x = &ctx->in[0];
  size_t b = x->dim.b, T = x->dim.h, feat = x->dim.w, u = p->rp.unit, bu = b * u;
  unsigned dirs = p->rp.bidirectional ? 2 : 1, nw = lstm_nw(p);
  int seq = p->rp.return_sequences;
  size_t K = nnt_rnn_seg(T), nck = lstm_ckpts(T);
  float *S = ctx->scratch[1].data, *ck = S + T * dirs * 4 * bu;
  const float *masks = p->rp.dropout_rate > 0 ? ck + dirs * nck * 2 * bu : NULL;
  /* scratch 3: dh twice, dc, the step's work, the segment's states and
   * act(c) of each of its steps */
  float *W = ctx->scratch[3].data, *dh[2] = {W, W + bu}, *dc = W + 2 * bu, *work = W + 3 * bu;
  float *Cs = W + 10 * bu, *Hs = Cs + K * bu, *As = Hs + K * bu;
  const float *dy = ctx->d_out[0].data;
  for (unsigned d = 0; d < dirs; d++) {
    nnt_lstm_cfg cfg;
    lstm_cfg(p, ctx, ctx->w, d, &cfg);
    unsigned base = d * nw, cur = 0;
    NNT_TRY(nnt_rnn_dh_in(k, dy, T, dirs, b, u, seq, nnt_rnn_pos(T, d, T - 1), d, dh[0]));
    for (size_t j = (T + K - 1) / K; j-- > 0;) {
      size_t s0 = j * K, s1 = s0 + K < T ? s0 + K : T;
      const float *c0 = j ? ck + (d * nck + j - 1) * 2 * bu : NULL, *h0 = c0 ? c0 + bu : NULL;
      /* the segment's states again (and act(c), which each step's
       * backward reads) */
      for (size_t s = s0; s < s1; s++) {
        size_t at = nnt_rnn_pos(T, d, s) * dirs + d;
        NNT_TRY(nnt_lstm_cell(k, &cfg, S + at * 4 * bu, s > s0 ? Cs + (s - 1 - s0) * bu : c0,
                              masks ? masks + at * bu : NULL, As + (s - s0) * bu,
                              Cs + (s - s0) * bu, Hs + (s - s0) * bu));
      }
      for (size_t s = s1; s-- > s0;) {
        size_t at = nnt_rnn_pos(T, d, s) * dirs + d;
        nnt_lstm_bwd_io io = {.x = x->data + nnt_rnn_pos(T, d, s) * feat, .ldx = T * feat,
                              .gates = S + at * 4 * bu, .c = Cs + (s - s0) * bu,
                              .act_c = As + (s - s0) * bu,
                              .dh = dh[cur], .dz = S + at * 4 * bu, .work = work,
                              .beta_dh = 1.0f, .acc = s != T - 1};
        io.c_prev = s > s0 ? Cs + (s - 1 - s0) * bu : c0;
        io.h_prev = s > s0 ? Hs + (s - 1 - s0) * bu : h0;
        io.mask = masks ? masks + at * bu : NULL;
        io.dc = s != T - 1 ? dc : NULL;
        io.dc_prev = s ? dc : NULL;
        if (s) { /* the previous position's: from the output, and this step adds */
          NNT_TRY(nnt_rnn_dh_in(k, dy, T, dirs, b, u, seq, nnt_rnn_prev(T, d, s), d, dh[!cur]));
          io.dh_prev = dh[!cur];
        }
        if (dw) {
          io.g_ih = ctx->gw[base].data, io.g_hh = ctx->gw[base + 1].data;
          io.g_bias = nw > 2 ? ctx->gw[base + 2].data : NULL;
        }
        NNT_TRY(nnt_lstm_step_bwd(k, &cfg, &io));
        cur = !cur;
      }
    }
    /* bias_ih and bias_hh enter z alike: the same gradient */
    if (dw && nw > 3)
      NNT_TRY(k->copy(k, 4 * u, ctx->gw[base + 2].data, ctx->gw[base + 3].data));
  }
  return NNT_OK;
}

static int lstm_gradient(nnt_layer *l, nnt_run_ctx *ctx) {
  return lstm_bptt(l->priv, ctx, 1);
}

static int lstm_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  lstm_priv *p = l->priv;
  const nnt_tensor *x = &ctx->in[0];
  size_t b = x->dim.b, T = x->dim.h, feat = x->dim.w, u = p->rp.unit;
  unsigned dirs = p->rp.bidirectional ? 2 : 1, nw = lstm_nw(p);
  if (!ctx->gw[0].data) /* frozen: calc_gradient did not run */
    NNT_TRY(lstm_bptt(p, ctx, 0));
  const float *w[2] = {ctx->w[0].data, dirs > 1 ? ctx->w[nw].data : NULL};
  return nnt_rnn_dx(ctx->k, T, dirs, b, feat, 4 * u, ctx->scratch[1].data, w, ctx->d_in[0].data);
}

const nnt_layer_ops nnt_layer_lstm = {
    .type = "lstm",
    .ml_type = 12, /* ML_TRAIN_LAYER_TYPE_LSTM */
    .priv_size = sizeof(lstm_priv),
    .init = lstm_init,
    .set_property = lstm_set,
    .finalize = lstm_finalize,
    .forward = lstm_forward,
    .calc_gradient = lstm_gradient,
    .calc_derivative = lstm_derivative,
    .kops = NNT_LSTM_CORE_KOPS | NNT_RNN_KOPS | NNT_KOP_BIT(DROPOUT_MASK) | NNT_KOP_BIT(COPY) |
            NNT_KOP_BIT(COPY2D),
};
