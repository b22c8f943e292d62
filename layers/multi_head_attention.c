/* multi_head_attention (NNTrainer's MultiHeadAttentionLayer): inputs query
 * [b, 1, tq, qw], key [b, 1, tk, kw], value [b, 1, tk, vw] and optionally
 * an additive mask [b, num_heads, tq, tk]. Q, K and V are projected by
 * query_fc / key_fc / value_fc (weight [width, heads * dim] and bias, in
 * NNTrainer's order and names), each head h attends over columns
 * [h * dim, (h + 1) * dim) of the projections with scores scaled by
 * 1 / sqrt(projected_key_dim), and fc maps the heads' outputs side by side
 * to output_shape. Keys as NNTrainer's (num_heads 1, projected_key_dim
 * qw / num_heads, projected_value_dim = projected_key_dim, output_shape qw,
 * dropout_rate 0 (applied above 1e-3), return_attention_weight none,
 * average_attention_weight true) plus causal_mask (ours, the attention
 * layer's key: hide score (i, j) for j > i). The biases take
 * weight_initializer, as NNTrainer's do.
 *
 * Memory: one scratch kept from forward to backward (the projections, the
 * attention weights after softmax and the heads' outputs), one for the
 * forward alone (the dropout mask and the dropped weights) and one for the
 * backward alone (the derivatives of all of those); the backward draws the
 * dropout mask again from the same counter (philox) instead of keeping it. */
#include "layers/attention_core.h"
#include "nntrainer/layer.h"

#include <math.h>

enum { RET_NONE = 0, RET_BEFORE, RET_AFTER };
enum { WQ = 0, BQ, WK, BK, WV, BV, WO, BO };

typedef struct mha_priv {
  unsigned heads;
  unsigned dk_given, dv_given, out_given; /* 0: not given */
  unsigned dk, dv, out;                   /* at finalize: as given or the defaults */
  float rate;
  int ret, avg, avg_set, causal;
  nnt_weight_props wp;
  /* set at finalize */
  unsigned widx[8];            /* weight index of WQ..BO (biases: ~0u when absent) */
  int s_save, s_fwd, s_bwd;    /* scratch indices (s_fwd -1: no dropout) */
  size_t tq, tk;
} mha_priv;

static void mha_init(nnt_layer *l) {
  mha_priv *p = l->priv;
  nnt_weight_props_init(&p->wp);
  p->heads = 1;
  p->avg = 1;
}

static int mha_set(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  mha_priv *p = l->priv;
  if (nnt_streq(key, "num_heads"))
    return nnt_parse_positive_uint(key, value, &p->heads, e);
  if (nnt_streq(key, "projected_key_dim"))
    return nnt_parse_positive_uint(key, value, &p->dk_given, e);
  if (nnt_streq(key, "projected_value_dim"))
    return nnt_parse_positive_uint(key, value, &p->dv_given, e);
  if (nnt_streq(key, "output_shape"))
    return nnt_parse_positive_uint(key, value, &p->out_given, e);
  if (nnt_streq(key, "causal_mask"))
    return nnt_parse_bool(key, value, &p->causal, e);
  if (nnt_streq(key, "average_attention_weight"))
    return nnt_parse_bool(key, value, &p->avg, e);
  if (nnt_streq(key, "dropout_rate"))
    return nnt_parse_rate(key, value, &p->rate, e);
  if (nnt_streq(key, "return_attention_weight")) {
    static const char *names[] = {"none", "before", "after"};
    for (int i = 0; i < 3; i++)
      if (nnt_streq(value, names[i])) {
        p->ret = i;
        return NNT_OK;
      }
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "key 'return_attention_weight': '%s' is not none, before or after", value);
  }
  return nnt_weight_props_set(&p->wp, key, value, e);
}

/* Sizes (floats) of the regions of the saved scratch, per sample. */
static size_t pq_len(const mha_priv *p) { return p->tq * p->heads * p->dk; }
static size_t pk_len(const mha_priv *p) { return p->tk * p->heads * p->dk; }
static size_t pv_len(const mha_priv *p) { return p->tk * p->heads * p->dv; }
static size_t aw_len(const mha_priv *p) { return (size_t)p->heads * p->tq * p->tk; }
static size_t ao_len(const mha_priv *p) { return p->tq * p->heads * p->dv; }
static size_t saved_len(const mha_priv *p) {
  return pq_len(p) + pk_len(p) + pv_len(p) + aw_len(p) + ao_len(p);
}

static int dim_error(nnt_err *e, const char *what, unsigned got, const char *want_what,
                     unsigned want) {
  return nnt_err_set(e, NNT_ERR_INVAL, "multi_head_attention: %s %u does not match %s %u", what,
                     got, want_what, want);
}

static int mha_add_weight(mha_priv *p, nnt_finalize_ctx *ctx, int which, const char *name,
                          unsigned rows, unsigned cols) {
  nnt_dim d = nnt_dim_make(1, 1, rows, cols);
  unsigned fan_in = rows == 1 ? cols : rows;
  p->widx[which] = nnt_fctx_add_weight(ctx, name, d, p->wp.weight_init, fan_in, cols,
                                       p->wp.l2norm ? p->wp.l2_constant : 0,
                                       p->wp.weight_decay, 1);
  return NNT_OK;
}

static int mha_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  mha_priv *p = l->priv;
  if (ctx->n_in < 3 || ctx->n_in > 4)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "multi_head_attention takes 3 or 4 inputs (query, key, value, mask), "
                       "not %u",
                       ctx->n_in);
  nnt_dim q = ctx->in_dim[0], k = ctx->in_dim[1], v = ctx->in_dim[2];
  const char *names[] = {"query", "key", "value", "mask"};
  for (unsigned i = 0; i < 3; i++)
    if (ctx->in_dim[i].c != 1)
      return nnt_err_set(e, NNT_ERR_INVAL, "multi_head_attention: the %s has %u channels, not 1",
                         names[i], ctx->in_dim[i].c);
  if (k.h != v.h)
    return dim_error(e, "key height", k.h, "value height", v.h);
  if (k.b != q.b || v.b != q.b)
    return dim_error(e, "key or value batch", k.b != q.b ? k.b : v.b, "query batch", q.b);
  if (!p->dk_given) {
    if (q.w % p->heads)
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "key 'num_heads': %u does not divide the query width %u (give "
                         "projected_key_dim)",
                         p->heads, q.w);
  }
  unsigned H = p->heads, dk = p->dk_given ? p->dk_given : q.w / H;
  unsigned dv = p->dv_given ? p->dv_given : dk, out = p->out_given ? p->out_given : q.w;
  if ((uint64_t)H * dk > UINT32_MAX || (uint64_t)H * dv > UINT32_MAX)
    return nnt_err_set(e, NNT_ERR_INVAL, "key 'num_heads': %u heads of %u values are too many",
                       H, dk > dv ? dk : dv);
  if (ctx->n_in == 4) {
    nnt_dim m = ctx->in_dim[3];
    if (m.c != H)
      return dim_error(e, "mask channels", m.c, "num_heads", H);
    if (m.h != q.h)
      return dim_error(e, "mask height", m.h, "query height", q.h);
    if (m.w != k.h)
      return dim_error(e, "mask width", m.w, "key height", k.h);
    if (m.b != q.b)
      return dim_error(e, "mask batch", m.b, "query batch", q.b);
  }
  p->tq = q.h, p->tk = k.h;
  size_t dims[] = {(size_t)q.b * q.h, (size_t)q.b * k.h, q.w, k.w, v.w, (size_t)H * dk,
                   (size_t)H * dv, out, k.h};
  for (unsigned i = 0; i < NNT_ARRAY_LEN(dims); i++)
    if (nnt_check_gemm_dim(dims[i], "a multi_head_attention product", e))
      return NNT_ERR_INVAL;
  p->dk = dk, p->dv = dv, p->out = out;
  if ((uint64_t)saved_len(p) + 2 * pq_len(p) + aw_len(p) > UINT32_MAX)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "multi_head_attention: %u x %u attention weights of %u heads are too "
                       "many",
                       q.h, k.h, H);
  int bias = !p->wp.disable_bias;
  for (unsigned i = 0; i < 8; i++)
    p->widx[i] = ~0u;
  mha_add_weight(p, ctx, WQ, "query_fc_weight", q.w, H * dk);
  if (bias)
    mha_add_weight(p, ctx, BQ, "query_fc_bias", 1, H * dk);
  mha_add_weight(p, ctx, WK, "key_fc_weight", k.w, H * dk);
  if (bias)
    mha_add_weight(p, ctx, BK, "key_fc_bias", 1, H * dk);
  mha_add_weight(p, ctx, WV, "value_fc_weight", v.w, H * dv);
  if (bias)
    mha_add_weight(p, ctx, BV, "value_fc_bias", 1, H * dv);
  mha_add_weight(p, ctx, WO, "fc_weight", H * dv, out);
  if (bias)
    mha_add_weight(p, ctx, BO, "fc_bias", 1, out);
  ctx->out_dim[0] = nnt_dim_make(q.b, 1, q.h, out);
  ctx->n_out = 1;
  if (p->ret != RET_NONE) {
    ctx->out_dim[1] = nnt_dim_make(q.b, p->avg ? 1 : H, q.h, k.h);
    ctx->n_out = 2;
  }
  int drop = p->rate > 1e-3f;
  p->s_save = (int)nnt_fctx_add_scratch(ctx, nnt_dim_make(q.b, 1, 1, (unsigned)saved_len(p)),
                                        NNT_SCRATCH_ITER);
  p->s_fwd = -1;
  if (drop)
    p->s_fwd = (int)nnt_fctx_add_scratch(ctx, nnt_dim_make(q.b, 1, 1, (unsigned)(2 * aw_len(p))),
                                         NNT_SCRATCH_FWD);
  /* dO, dA, dPQ, dPK, dPV (and the mask and dropped weights again) */
  size_t bwd = ao_len(p) + aw_len(p) + pq_len(p) + pk_len(p) + pv_len(p) +
               (drop ? 2 * aw_len(p) : 0);
  p->s_bwd = (int)nnt_fctx_add_scratch(ctx, nnt_dim_make(q.b, 1, 1, (unsigned)bwd),
                                       NNT_SCRATCH_BWD);
  ctx->flags = NNT_LF_BWD_READS_INPUT;
  /* A derivative added into a sum (query, key and value from one layer:
   * self-attention) is made in dO's and dA's regions, spent by then, where
   * each fits (mha_derivative); a mask's (input 3) is made earlier. */
  size_t spent = q.b * (ao_len(p) + aw_len(p));
  if (ctx->n_in == 3 && nnt_dim_len(q) <= spent && nnt_dim_len(k) <= spent &&
      nnt_dim_len(v) <= spent)
    ctx->flags |= NNT_LF_DERIV_ADDS;
  return NNT_OK;
}

/* The regions of the scratch tensors, for a batch of nb. */
typedef struct mha_mem {
  float *pq, *pk, *pv, *aw, *ao;       /* saved */
  float *mask, *dropped;               /* the dropout mask, A * mask */
  float *dao, *daw, *dpq, *dpk, *dpv;  /* backward */
} mha_mem;

static mha_mem mha_regions(const mha_priv *p, const nnt_run_ctx *ctx, size_t nb, int bwd) {
  mha_mem m = {0};
  float *s = ctx->scratch[p->s_save].data;
  m.pq = s, m.pk = m.pq + nb * pq_len(p), m.pv = m.pk + nb * pk_len(p);
  m.aw = m.pv + nb * pv_len(p), m.ao = m.aw + nb * aw_len(p);
  float *d = bwd ? ctx->scratch[p->s_bwd].data : NULL;
  if (d) {
    m.dao = d, m.daw = m.dao + nb * ao_len(p), m.dpq = m.daw + nb * aw_len(p);
    m.dpk = m.dpq + nb * pq_len(p), m.dpv = m.dpk + nb * pk_len(p);
  }
  float *f = p->s_fwd < 0 ? NULL : bwd ? m.dpv + nb * pv_len(p) : ctx->scratch[p->s_fwd].data;
  if (f)
    m.mask = f, m.dropped = f + nb * aw_len(p);
  return m;
}

static nnt_attn_shape mha_shape(const mha_priv *p, size_t nb) {
  return (nnt_attn_shape){.nb = nb, .nh = p->heads, .tq = p->tq, .tk = p->tk, .dk = p->dk,
                          .dv = p->dv, .ldq = (size_t)p->heads * p->dk,
                          .ldk = (size_t)p->heads * p->dk, .ldv = (size_t)p->heads * p->dv,
                          .ldo = (size_t)p->heads * p->dv,
                          .scale = 1.0f / sqrtf((float)p->dk)};
}

/* y = x W + b over rows. */
static int project(const nnt_run_ctx *ctx, const mha_priv *p, int w, int b, size_t rows,
                   const float *x, size_t in, size_t n, float *y) {
  NNT_TRY(ctx->k->gemm(ctx->k, 0, 0, rows, n, in, 1.0f, x, in, ctx->w[p->widx[w]].data, n, 0.0f,
                       y, n));
  if (p->widx[b] != ~0u)
    NNT_TRY(ctx->k->add_row_vec(ctx->k, rows, n, ctx->w[p->widx[b]].data, y));
  return NNT_OK;
}

/* The returned attention weights: a copy, or the mean over the heads. */
static int give_weights(const nnt_run_ctx *ctx, const mha_priv *p, size_t nb, const float *a) {
  const nnt_kernels *k = ctx->k;
  float *r = ctx->out[1].data;
  size_t per = p->tq * p->tk;
  if (!p->avg)
    return k->copy(k, nb * aw_len(p), a, r);
  for (size_t b = 0; b < nb; b++)
    NNT_TRY(k->sum_rows(k, p->heads, per, a + b * aw_len(p), 0.0f, r + b * per));
  return k->scale(k, nb * per, 1.0f / (float)p->heads, r);
}

static int mha_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  mha_priv *p = l->priv;
  const nnt_kernels *k = ctx->k;
  size_t nb = ctx->in[0].dim.b, H = p->heads;
  mha_mem m = mha_regions(p, ctx, nb, 0);
  nnt_attn_shape s = mha_shape(p, nb);
  NNT_TRY(project(ctx, p, WQ, BQ, nb * p->tq, ctx->in[0].data, ctx->in[0].dim.w, H * p->dk, m.pq));
  NNT_TRY(project(ctx, p, WK, BK, nb * p->tk, ctx->in[1].data, ctx->in[1].dim.w, H * p->dk, m.pk));
  NNT_TRY(project(ctx, p, WV, BV, nb * p->tk, ctx->in[2].data, ctx->in[2].dim.w, H * p->dv, m.pv));
  NNT_TRY(nnt_attn_scores(k, &s, m.pq, m.pk, m.aw));
  size_t n_aw = nb * aw_len(p);
  if (ctx->n_in == 4)
    NNT_TRY(k->add(k, n_aw, m.aw, ctx->in[3].data, m.aw));
  if (p->causal)
    NNT_TRY(k->mask_upper(k, nb * H, p->tq, p->tk, NNT_ATTN_MASKED, m.aw));
  NNT_TRY(k->softmax_fwd(k, nb * H * p->tq, p->tk, m.aw, m.aw));
  int give = ctx->n_out > 1 && ctx->out[1].data;
  if (give && p->ret == RET_BEFORE)
    NNT_TRY(give_weights(ctx, p, nb, m.aw));
  const float *a = m.aw;
  if (ctx->training && m.mask) {
    NNT_TRY(k->dropout_mask(k, n_aw, p->rate, ctx->seed, ctx->stream, m.mask));
    NNT_TRY(k->mul(k, n_aw, m.aw, m.mask, m.dropped));
    a = m.dropped;
  }
  if (give && p->ret == RET_AFTER)
    NNT_TRY(give_weights(ctx, p, nb, a));
  NNT_TRY(nnt_attn_apply(k, &s, a, m.pv, m.ao));
  return project(ctx, p, WO, BO, nb * p->tq, m.ao, H * p->dv, p->out, ctx->out[0].data);
}

/* dR (the returned weights' derivative) into da: its copy, or 1/heads of
 * it for each head. */
static int take_weights(const nnt_run_ctx *ctx, const mha_priv *p, size_t nb, float *da) {
  const nnt_kernels *k = ctx->k;
  const float *dr = ctx->n_out > 1 ? ctx->d_out[1].data : NULL;
  if (!dr)
    return NNT_OK;
  size_t per = p->tq * p->tk;
  if (!p->avg)
    return k->axpy(k, nb * aw_len(p), 1.0f, dr, da);
  for (size_t b = 0; b < nb; b++)
    for (size_t h = 0; h < p->heads; h++)
      NNT_TRY(k->axpy(k, per, 1.0f / (float)p->heads, dr + b * per, da + (b * p->heads + h) * per));
  return NNT_OK;
}

/* The backward down to the projections' derivatives dPQ, dPK, dPV (and the
 * mask's), which calc_gradient and calc_derivative both need: computed by
 * calc_gradient, or by calc_derivative where calc_gradient does not run. */
static int mha_common(const mha_priv *p, nnt_run_ctx *ctx) {
  const nnt_kernels *k = ctx->k;
  size_t nb = ctx->in[0].dim.b, H = p->heads, n_aw = nb * aw_len(p);
  mha_mem m = mha_regions(p, ctx, nb, 1);
  nnt_attn_shape s = mha_shape(p, nb);
  /* dO of the heads = dY fc_weight^T */
  NNT_TRY(k->gemm(k, 0, 1, nb * p->tq, H * p->dv, p->out, 1.0f, ctx->d_out[0].data, p->out,
                  ctx->w[p->widx[WO]].data, p->out, 0.0f, m.dao, H * p->dv));
  const float *a = m.aw;
  if (m.mask) { /* the forward's mask again: same key, stream and counters */
    NNT_TRY(k->dropout_mask(k, n_aw, p->rate, ctx->seed, ctx->stream, m.mask));
    NNT_TRY(k->mul(k, n_aw, m.aw, m.mask, m.dropped));
    a = m.dropped;
  }
  NNT_TRY(nnt_attn_bwd_apply(k, &s, m.dao, a, m.pv, m.daw, m.dpv, 0.0f));
  if (p->ret == RET_AFTER)
    NNT_TRY(take_weights(ctx, p, nb, m.daw));
  if (m.mask)
    NNT_TRY(k->mul(k, n_aw, m.daw, m.mask, m.daw));
  if (p->ret == RET_BEFORE)
    NNT_TRY(take_weights(ctx, p, nb, m.daw));
  NNT_TRY(k->softmax_bwd(k, nb * H * p->tq, p->tk, m.aw, m.daw, m.daw));
  if (ctx->n_in == 4 && ctx->d_in[3].data)
    NNT_TRY(k->copy(k, n_aw, m.daw, ctx->d_in[3].data));
  return nnt_attn_bwd_scores(k, &s, m.daw, m.pq, m.pk, m.dpq, m.dpk, 0.0f);
}

/* dW = X^T dP and db = the column sums of dP for one projection. */
static int proj_grad(const nnt_run_ctx *ctx, const mha_priv *p, int w, int b, size_t rows,
                     const float *x, size_t in, size_t n, const float *dp) {
  if (ctx->gw[p->widx[w]].data)
    NNT_TRY(ctx->k->gemm(ctx->k, 1, 0, in, n, rows, 1.0f, x, in, dp, n, 0.0f,
                         ctx->gw[p->widx[w]].data, n));
  if (p->widx[b] != ~0u && ctx->gw[p->widx[b]].data)
    NNT_TRY(ctx->k->sum_rows(ctx->k, rows, n, dp, 0.0f, ctx->gw[p->widx[b]].data));
  return NNT_OK;
}

static int mha_gradient(nnt_layer *l, nnt_run_ctx *ctx) {
  mha_priv *p = l->priv;
  size_t nb = ctx->in[0].dim.b, H = p->heads;
  NNT_TRY(mha_common(p, ctx));
  mha_mem m = mha_regions(p, ctx, nb, 1);
  NNT_TRY(proj_grad(ctx, p, WQ, BQ, nb * p->tq, ctx->in[0].data, ctx->in[0].dim.w, H * p->dk,
                    m.dpq));
  NNT_TRY(proj_grad(ctx, p, WK, BK, nb * p->tk, ctx->in[1].data, ctx->in[1].dim.w, H * p->dk,
                    m.dpk));
  NNT_TRY(proj_grad(ctx, p, WV, BV, nb * p->tk, ctx->in[2].data, ctx->in[2].dim.w, H * p->dv,
                    m.dpv));
  return proj_grad(ctx, p, WO, BO, nb * p->tq, m.ao, H * p->dv, p->out, ctx->d_out[0].data);
}

static int mha_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  mha_priv *p = l->priv;
  size_t nb = ctx->in[0].dim.b;
  if (!ctx->gw[p->widx[WQ]].data) /* calc_gradient did not run */
    NNT_TRY(mha_common(p, ctx));
  mha_mem m = mha_regions(p, ctx, nb, 1);
  const float *dp[3] = {m.dpq, m.dpk, m.dpv};
  const int wi[3] = {WQ, WK, WV};
  const size_t rows[3] = {nb * p->tq, nb * p->tk, nb * p->tk};
  const size_t n[3] = {(size_t)p->heads * p->dk, (size_t)p->heads * p->dk,
                       (size_t)p->heads * p->dv};
  for (int i = 0; i < 3; i++) {
    size_t in = ctx->in[i].dim.w;
    float *dx = ctx->d_in[i].data, *to = ctx->d_add >> i & 1 ? m.dao : dx;
    if (!dx)
      continue;
    NNT_TRY(ctx->k->gemm(ctx->k, 0, 1, rows[i], in, n[i], 1.0f, dp[i], n[i],
                         ctx->w[p->widx[wi[i]]].data, n[i], 0.0f, to, in));
    if (to != dx) /* the sum's next term, as train.c adds one */
      NNT_TRY(ctx->k->add(ctx->k, rows[i] * in, dx, to, dx));
  }
  return NNT_OK;
}

/* As NNTrainer's, the biases take weight_initializer and weight_decay:
 * bias_initializer and bias_decay are said to be ignored. */
static void mha_log_defaults(const nnt_layer *l) {
  const mha_priv *p = l->priv;
  if (p->wp.bias_init != NNT_INIT_ZEROS || p->wp.bias_decay != 0)
    nnt_log(NNT_LOG_WARNING,
            "layer '%s' (multi_head_attention): keys 'bias_initializer' and 'bias_decay' are "
            "ignored: the biases take weight_initializer and weight_decay, as NNTrainer's",
            l->name);
}

const nnt_layer_ops nnt_layer_multi_head_attention = {
    .type = "multi_head_attention",
    .ml_type = 26, /* ML_TRAIN_LAYER_TYPE_MULTI_HEAD_ATTENTION */
    .priv_size = sizeof(mha_priv),
    .init = mha_init,
    .set_property = mha_set,
    .log_defaults = mha_log_defaults,
    .finalize = mha_finalize,
    .forward = mha_forward,
    .calc_gradient = mha_gradient,
    .calc_derivative = mha_derivative,
    .kops = NNT_KOP_BIT(GEMM) | NNT_KOP_BIT(ADD_ROW_VEC) | NNT_KOP_BIT(SUM_ROWS) |
            NNT_KOP_BIT(ADD) | NNT_KOP_BIT(MASK_UPPER) | NNT_KOP_BIT(SOFTMAX_FWD) |
            NNT_KOP_BIT(SOFTMAX_BWD) | NNT_KOP_BIT(DROPOUT_MASK) | NNT_KOP_BIT(MUL) |
            NNT_KOP_BIT(COPY) | NNT_KOP_BIT(SCALE) | NNT_KOP_BIT(AXPY),
};
