/* layer_normalization: each sample normalized over the last axes named by
 * `axis` (NNTrainer's key, a list: 3 the width, 2,3 height and width,
 * 1,2,3 the whole sample; other sets are refused), y = (x - mean) /
 * sqrt(var + epsilon) * gamma + beta with the biased variance; gamma and
 * beta ("gamma", "beta", NNTrainer's names and order) have the shape of the
 * normalized axes. What the backward keeps: the input (which the next
 * layer's memory does not replace) and two floats per normalized row, the
 * mean and 1/sqrt(var + eps); the normalized input is recomputed from them,
 * not stored (NNTrainer keeps a copy of x - mean). */
#include "nntrainer/layer.h"

typedef struct ln_priv {
  unsigned first_axis; /* the normalized axes are first_axis..3; 0: not given */
  float epsilon;
  nnt_init gamma_init, beta_init;
  float weight_decay, bias_decay;
} ln_priv;

static void ln_init(nnt_layer *l) {
  ln_priv *p = l->priv;
  p->epsilon = 0.001f;
  p->gamma_init = NNT_INIT_ONES;
  p->beta_init = NNT_INIT_ZEROS;
}

/* axis: a list of 0..3 (NNTrainer's Axis), sorted and unique there; the
 * set must be first..3 for some first >= 1. */
static int set_axes(ln_priv *p, const char *key, const char *value, nnt_err *e) {
  unsigned a[8], n = 0, seen = 0;
  int rc = nnt_parse_uint_list(key, value, a, 8, &n, e);
  if (rc)
    return rc;
  for (unsigned i = 0; i < n; i++) {
    if (a[i] > 3)
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'axis': %u is not an axis (0 to 3)", a[i]);
    seen |= 1u << a[i];
  }
  static const unsigned suffix[] = {0x8, 0xc, 0xe};
  for (unsigned k = 0; k < 3; k++)
    if (seen == suffix[k]) {
      p->first_axis = 3 - k;
      return NNT_OK;
    }
  return nnt_err_set(e, NNT_ERR_INVAL,
                     "key 'axis': '%s' is not supported: normalize over the last axes "
                     "(3; 2,3; or 1,2,3)", value);
}

static int ln_set(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  ln_priv *p = l->priv;
  int rc;
  if (nnt_streq(key, "axis"))
    return set_axes(p, key, value, e);
  if (nnt_streq(key, "epsilon")) {
    if ((rc = nnt_parse_float(key, value, &p->epsilon, e)))
      return rc;
    return p->epsilon > 0 ? NNT_OK
                          : nnt_err_set(e, NNT_ERR_INVAL, "key 'epsilon': %s must be positive",
                                        value);
  }
  if (nnt_streq(key, "gamma_initializer"))
    return nnt_parse_init(key, value, &p->gamma_init, e);
  if (nnt_streq(key, "beta_initializer"))
    return nnt_parse_init(key, value, &p->beta_init, e);
  if (nnt_streq(key, "weight_decay"))
    return nnt_parse_nonneg_float(key, value, &p->weight_decay, e);
  if (nnt_streq(key, "bias_decay"))
    return nnt_parse_nonneg_float(key, value, &p->bias_decay, e);
  return NNT_ERR_NOKEY;
}

/* The normalized shape (1:c:h:w with the other axes 1) and the rows. */
static nnt_dim norm_dim(const ln_priv *p, nnt_dim in) {
  return nnt_dim_make(1, p->first_axis <= 1 ? in.c : 1, p->first_axis <= 2 ? in.h : 1, in.w);
}

static int ln_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  ln_priv *p = l->priv;
  if (!p->first_axis)
    return nnt_err_set(e, NNT_ERR_INVAL, "axis: required key is missing (NNTrainer requires "
                       "it: 3 normalizes over the width)");
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "layer_normalization takes one input, not %u",
                       ctx->n_in);
  nnt_dim in = ctx->in_dim[0], nd = norm_dim(p, in);
  size_t cols = nnt_dim_len(nd), rows = nnt_dim_len(in) / cols;
  ctx->out_dim[0] = in;
  unsigned fan = cols > UINT32_MAX ? UINT32_MAX : (unsigned)cols;
  nnt_fctx_add_weight(ctx, "gamma", nd, p->gamma_init, fan, fan, 0, p->weight_decay, 1);
  nnt_fctx_add_weight(ctx, "beta", nd, p->beta_init, fan, fan, 0, p->bias_decay, 1);
  /* the mean and 1/sqrt(var + eps) of each row, for the backward only */
  if (rows > UINT32_MAX / 2)
    return nnt_err_set(e, NNT_ERR_INVAL, "the input has %zu rows, too many", rows);
  nnt_fctx_add_scratch(ctx, nnt_dim_make(1, 1, 2, (unsigned)rows), NNT_SCRATCH_SAVED);
  ctx->flags = NNT_LF_BWD_READS_INPUT;
  return NNT_OK;
}

static void shape(const ln_priv *p, const nnt_tensor *x, size_t *rows, size_t *cols) {
  *cols = nnt_dim_len(norm_dim(p, x->dim));
  *rows = nnt_tensor_len(x) / *cols;
}

static int ln_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  ln_priv *p = l->priv;
  size_t rows, cols;
  shape(p, &ctx->in[0], &rows, &cols);
  float *st = ctx->scratch[0].data; /* NULL where no backward runs */
  return ctx->k->ln_fwd(ctx->k, rows, cols, ctx->in[0].data, ctx->w[0].data, ctx->w[1].data,
                        p->epsilon, st, st ? st + rows : NULL, ctx->out[0].data);
}

static int ln_gradient(nnt_layer *l, nnt_run_ctx *ctx) {
  ln_priv *p = l->priv;
  size_t rows, cols;
  shape(p, &ctx->in[0], &rows, &cols);
  const float *st = ctx->scratch[0].data;
  if (!ctx->gw[0].data && !ctx->gw[1].data)
    return NNT_OK;
  return ctx->k->ln_bwd(ctx->k, rows, cols, ctx->in[0].data, ctx->d_out[0].data, st, st + rows,
                        ctx->w[0].data, NULL, ctx->gw[0].data, ctx->gw[1].data);
}

static int ln_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  ln_priv *p = l->priv;
  size_t rows, cols;
  shape(p, &ctx->in[0], &rows, &cols);
  const float *st = ctx->scratch[0].data;
  return ctx->k->ln_bwd(ctx->k, rows, cols, ctx->in[0].data, ctx->d_out[0].data, st, st + rows,
                        ctx->w[0].data, ctx->d_in[0].data, NULL, NULL);
}

const nnt_layer_ops nnt_layer_layer_normalization = {
    .type = "layer_normalization",
    .ml_type = 27, /* ML_TRAIN_LAYER_TYPE_LAYER_NORMALIZATION */
    .priv_size = sizeof(ln_priv),
    .init = ln_init,
    .set_property = ln_set,
    .finalize = ln_finalize,
    .forward = ln_forward,
    .calc_gradient = ln_gradient,
    .calc_derivative = ln_derivative,
    .kops = NNT_KOP_BIT(LN_FWD) | NNT_KOP_BIT(LN_BWD),
};
