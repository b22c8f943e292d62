/* batch_normalization: per-channel statistics of the batch in training, the
 * moving statistics in inference. momentum is the fraction of the running
 * statistic kept; the running variance takes the biased batch variance.
 * Weights, in NNTrainer's order: moving_mean, moving_variance, gamma, beta.
 * The backward pass reads only xhat and 1/std, kept in scratch tensors, so
 * the layer runs in place; its output can be computed again from xhat
 * (forward_saved). */
#include <stdio.h>
#include "nntrainer/layer.h"

typedef struct bn_priv {
  float epsilon, momentum;
  int axis; /* 1 channel, 2 height, 3 width; 0: channel, or width if c == 1 */
  nnt_init mm_init, mv_init, gamma_init, beta_init;
  size_t outer, ch, inner;
} bn_priv;

static void bn_init(nnt_layer *l) {
  bn_priv *p = l->priv;
  p->epsilon = 1e-3f;
  p->momentum = 0.99f;
  p->mm_init = NNT_INIT_ZEROS;
  p->mv_init = NNT_INIT_ONES;
  p->gamma_init = NNT_INIT_ONES;
  p->beta_init = NNT_INIT_ZEROS;
}

static int bn_set(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  bn_priv *p = l->priv;
  int rc;
  if (nnt_streq(key, "epsilon")) {
    if ((rc = nnt_parse_float(key, value, &p->epsilon, e)))
      return rc;
    return p->epsilon > 0 ? NNT_OK
                          : nnt_err_set(e, NNT_ERR_INVAL, "key 'epsilon': must be positive");
  }
  if (nnt_streq(key, "momentum")) {
    if ((rc = nnt_parse_float(key, value, &p->momentum, e)))
      return rc;
    return p->momentum >= 0 && p->momentum <= 1
               ? NNT_OK
               : nnt_err_set(e, NNT_ERR_INVAL, "key 'momentum': %s is not in [0, 1]", value);
  }
  if (nnt_streq(key, "axis")) {
    unsigned a;
    if ((rc = nnt_parse_uint(key, value, &a, e)))
      return rc;
    if (a < 1 || a > 3)
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'axis': %s is not 1, 2 or 3", value);
    p->axis = (int)a;
    return NNT_OK;
  }
  if (nnt_streq(key, "moving_mean_initializer"))
    return nnt_parse_init(key, value, &p->mm_init, e);
  if (nnt_streq(key, "moving_variance_initializer"))
    return nnt_parse_init(key, value, &p->mv_init, e);
  if (nnt_streq(key, "gamma_initializer"))
    return nnt_parse_init(key, value, &p->gamma_init, e);
  if (nnt_streq(key, "beta_initializer"))
    return nnt_parse_init(key, value, &p->beta_init, e);
  return NNT_ERR_NOKEY;
}

static int bn_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  bn_priv *p = l->priv;
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "batch_normalization takes one input, not %u",
                       ctx->n_in);
  nnt_dim d = ctx->in_dim[0];
  int axis = p->axis ? p->axis : (d.c > 1 ? 1 : 3);
  size_t dims[4] = {d.b, d.c, d.h, d.w};
  p->outer = 1, p->inner = 1, p->ch = dims[axis];
  for (int i = 0; i < axis; i++)
    p->outer *= dims[i];
  for (int i = axis + 1; i < 4; i++)
    p->inner *= dims[i];
  ctx->out_dim[0] = d;
  nnt_dim cd = nnt_dim_make(1, 1, 1, (unsigned)p->ch);
  if (axis == 1)
    cd = nnt_dim_make(1, (unsigned)p->ch, 1, 1);
  unsigned ch = (unsigned)p->ch;
  nnt_fctx_add_weight(ctx, "moving_mean", cd, p->mm_init, ch, ch, 0, 0, 0);
  nnt_fctx_add_weight(ctx, "moving_variance", cd, p->mv_init, ch, ch, 0, 0, 0);
  nnt_fctx_add_weight(ctx, "gamma", cd, p->gamma_init, ch, ch, 0, 0, 1);
  nnt_fctx_add_weight(ctx, "beta", cd, p->beta_init, ch, ch, 0, 0, 1);
  nnt_fctx_add_scratch(ctx, d, NNT_SCRATCH_SAVED);                      /* xhat */
  nnt_fctx_add_scratch(ctx, nnt_dim_make(1, 1, 1, ch), NNT_SCRATCH_ITER); /* 1/std */
  nnt_fctx_add_scratch(ctx, nnt_dim_make(1, 1, 2, ch), NNT_SCRATCH_FWD);  /* mean, var */
  /* the means of dy and dy xhat, from calc_gradient to calc_derivative */
  nnt_fctx_add_scratch(ctx, nnt_dim_make(1, 1, 2, ch), NNT_SCRATCH_BWD);
  ctx->flags = NNT_LF_INPLACE;
  return NNT_OK;
}

static int bn_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  bn_priv *p = l->priv;
  const nnt_kernels *k = ctx->k;
  float *mm = ctx->w[0].data, *mv = ctx->w[1].data, *g = ctx->w[2].data, *b = ctx->w[3].data;
  if (!ctx->training) {
    NNT_TRY(k->bn_fwd_infer(k, p->outer, p->ch, p->inner, ctx->in[0].data, mm, mv, g, b, p->epsilon,
                            ctx->out[0].data));
    return NNT_OK;
  }
  /* xhat is planned only where this layer's backward runs (a frozen
   * layer's training forward has none to keep it for): elsewhere the
   * kernel writes each xhat value over its output element, which then
   * takes its y (the same arithmetic: y is bitwise what it is with xhat
   * kept) */
  if (ctx->whole) /* images again: the batch's mean and 1/std */
    return k->bn_fwd_stats(k, nnt_tensor_len(&ctx->in[0]) / (p->ch * p->inner), p->ch, p->inner,
                           ctx->in[0].data,
                           ctx->whole->scratch[2].data, ctx->whole->scratch[1].data, g, b,
                           ctx->out[0].data);
  float *stats = ctx->scratch[2].data;
  float *xhat = ctx->scratch[0].data ? ctx->scratch[0].data : ctx->out[0].data;
  NNT_TRY(k->bn_fwd_train(k, p->outer, p->ch, p->inner, ctx->in[0].data, g, b, p->epsilon, stats,
                          stats + p->ch, ctx->scratch[1].data, xhat, ctx->out[0].data));
  if (ctx->recompute) /* the moving statistics moved in the first forward */
    return NNT_OK;
  NNT_TRY(k->scale(k, p->ch, p->momentum, mm));
  NNT_TRY(k->axpy(k, p->ch, 1 - p->momentum, stats, mm));
  NNT_TRY(k->scale(k, p->ch, p->momentum, mv));
  NNT_TRY(k->axpy(k, p->ch, 1 - p->momentum, stats + p->ch, mv));
  return NNT_OK;
}

/* The output again from the kept xhat (the default plan recomputes it in
 * the backward pass instead of keeping it, recompute.c). */
static int bn_forward_saved(nnt_layer *l, nnt_run_ctx *ctx) {
  bn_priv *p = l->priv;
  NNT_TRY(ctx->k->bn_affine(ctx->k, p->outer, p->ch, p->inner, ctx->scratch[0].data,
                            ctx->w[2].data, ctx->w[3].data, ctx->out[0].data));
  return NNT_OK;
}

/* The sums over dy and dy xhat that both backward steps need are made
 * once where the backend has bn_bwd_means: calc_gradient keeps their means
 * in BWD scratch, and calc_derivative, when it follows it in the same
 * iteration (ctx->grad_done), reads them instead of summing again (the
 * same bits). */
static int bn_gradient(nnt_layer *l, nnt_run_ctx *ctx) {
  bn_priv *p = l->priv;
  const nnt_kernels *k = ctx->k;
  if (k->bn_bwd_means && ctx->scratch[3].data)
    return k->bn_bwd_means(k, p->outer, p->ch, p->inner, ctx->d_out[0].data,
                           ctx->scratch[0].data, ctx->scratch[1].data, ctx->w[2].data, NULL,
                           ctx->gw[2].data, ctx->gw[3].data, ctx->scratch[3].data);
  return k->bn_bwd(k, p->outer, p->ch, p->inner, ctx->d_out[0].data, ctx->scratch[0].data,
                   ctx->scratch[1].data, ctx->w[2].data, NULL, ctx->gw[2].data,
                   ctx->gw[3].data);
}

static int bn_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  bn_priv *p = l->priv;
  const nnt_kernels *k = ctx->k;
  if (k->bn_bwd_means && ctx->grad_done && ctx->scratch[3].data)
    return k->bn_bwd_means(k, p->outer, p->ch, p->inner, ctx->d_out[0].data,
                           ctx->scratch[0].data, ctx->scratch[1].data, ctx->w[2].data,
                           ctx->d_in[0].data, NULL, NULL, ctx->scratch[3].data);
  return k->bn_bwd(k, p->outer, p->ch, p->inner, ctx->d_out[0].data, ctx->scratch[0].data,
                   ctx->scratch[1].data, ctx->w[2].data, ctx->d_in[0].data, NULL, NULL);
}

const nnt_layer_ops nnt_layer_batch_normalization = {
    .type = "batch_normalization",
    .ml_type = 2,
    .priv_size = sizeof(bn_priv),
    .init = bn_init,
    .set_property = bn_set,
    .finalize = bn_finalize,
    .forward = bn_forward,
    .calc_gradient = bn_gradient,
    .calc_derivative = bn_derivative,
    .kops = NNT_KOP_BIT(BN_FWD_TRAIN) | NNT_KOP_BIT(BN_FWD_INFER) | NNT_KOP_BIT(BN_BWD) |
            NNT_KOP_BIT(SCALE) | NNT_KOP_BIT(AXPY),
    .forward_saved = bn_forward_saved,
    .saved_kops = NNT_KOP_BIT(BN_AFFINE),
    .opt_kops = NNT_KOP_BIT(BN_BWD_MEANS) | NNT_KOP_BIT(BN_FWD_STATS),
    .whole_scratch = 1u << 1 | 1u << 2, /* 1/std; the mean (and variance) */
};
