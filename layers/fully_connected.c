/* fully_connected: Y = X W + b on the last axis (width) of a b:c:h:w input,
 * giving b:c:h:unit; W is [in, unit] row-major ("weight"), b is [unit]
 * ("bias", absent with disable_bias). Every (b, c, h) row is one row of the
 * product. The backward reads X (for dW). */
#include "nntrainer/layer.h"

typedef struct fc_priv {
  unsigned unit;
  nnt_weight_props wp;
} fc_priv;

static void fc_init(nnt_layer *l) {
  fc_priv *p = l->priv;
  nnt_weight_props_init(&p->wp);
}

static int fc_set(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  fc_priv *p = l->priv;
  if (nnt_streq(key, "unit")) {
    unsigned u;
    int rc = nnt_parse_uint(key, value, &u, e);
    if (rc)
      return rc;
    if (!u)
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'unit': value '%s' must be positive", value);
    p->unit = u;
    return NNT_OK;
  }
  return nnt_weight_props_set(&p->wp, key, value, e);
}

static int fc_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  fc_priv *p = l->priv;
  if (!p->unit)
    return nnt_err_set(e, NNT_ERR_INVAL, "unit: required key is missing");
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "fully_connected takes one input, not %u", ctx->n_in);
  nnt_dim in = ctx->in_dim[0], out = in;
  out.w = p->unit;
  /* every (b, c, h) row is a row of the gemm; the input's length was
   * checked, so this product fits */
  size_t rows = (size_t)in.b * in.c * in.h;
  int rc = nnt_check_gemm_dim(p->unit, "unit", e);
  if (!rc)
    rc = nnt_check_gemm_dim(in.w, "input width", e);
  if (!rc && rows > NNT_GEMM_DIM_MAX)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "the input has %zu rows (batch_size %u x %u x %u), more than the %zu "
                       "a matrix product takes",
                       rows, in.b, in.c, in.h, NNT_GEMM_DIM_MAX);
  if (rc)
    return rc;
  ctx->out_dim[0] = out;
  /* Fans as NNTrainer derives them from the tensor shape: [in, unit] gives
   * (in, unit) unless in == 1, where the shape reads as a vector of unit
   * values and both fans are unit, as they are for the bias. */
  unsigned fan_in = in.w == 1 ? p->unit : in.w;
  nnt_fctx_add_weight(ctx, "weight", nnt_dim_make(1, 1, in.w, p->unit), p->wp.weight_init,
                      fan_in, p->unit, p->wp.l2norm ? p->wp.l2_constant : 0,
                      p->wp.weight_decay, 1);
  if (!p->wp.disable_bias)
    nnt_fctx_add_weight(ctx, "bias", nnt_dim_make(1, 1, 1, p->unit), p->wp.bias_init, p->unit,
                        p->unit, 0, p->wp.bias_decay, 1);
  ctx->flags = NNT_LF_BWD_READS_INPUT;
  return NNT_OK;
}

static int fc_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  const nnt_tensor *x = &ctx->in[0];
  nnt_tensor *y = &ctx->out[0];
  size_t rows = nnt_tensor_len(x) / x->dim.w, k = x->dim.w, n = y->dim.w;
  NNT_TRY(ctx->k->gemm(ctx->k, 0, 0, rows, n, k, 1.0f, x->data, k, ctx->w[0].data, n, 0.0f, y->data,
                       n));
  if (ctx->n_w > 1)
    NNT_TRY(ctx->k->add_row_vec(ctx->k, rows, n, ctx->w[1].data, y->data));
  return NNT_OK;
}

static int fc_gradient(nnt_layer *l, nnt_run_ctx *ctx) {
  const nnt_tensor *x = &ctx->in[0], *dy = &ctx->d_out[0];
  size_t rows = nnt_tensor_len(x) / x->dim.w, k = x->dim.w, n = dy->dim.w;
  if (ctx->gw[0].data)
    NNT_TRY(ctx->k->gemm(ctx->k, 1, 0, k, n, rows, 1.0f, x->data, k, dy->data, n, 0.0f,
                         ctx->gw[0].data, n));
  if (ctx->n_w > 1 && ctx->gw[1].data)
    NNT_TRY(ctx->k->sum_rows(ctx->k, rows, n, dy->data, 0.0f, ctx->gw[1].data));
  return NNT_OK;
}

static int fc_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  const nnt_tensor *dy = &ctx->d_out[0];
  nnt_tensor *dx = &ctx->d_in[0];
  size_t k = dx->dim.w, rows = nnt_tensor_len(dx) / k, n = dy->dim.w;
  NNT_TRY(ctx->k->gemm(ctx->k, 0, 1, rows, k, n, 1.0f, dy->data, n, ctx->w[0].data, n, 0.0f,
                       dx->data, k));
  return NNT_OK;
}

const nnt_layer_ops nnt_layer_fully_connected = {
    .type = "fully_connected",
    .ml_type = 1, /* ML_TRAIN_LAYER_TYPE_FC */
    .priv_size = sizeof(fc_priv),
    .init = fc_init,
    .set_property = fc_set,
    .finalize = fc_finalize,
    .forward = fc_forward,
    .calc_gradient = fc_gradient,
    .calc_derivative = fc_derivative,
    .kops = NNT_KOP_BIT(GEMM) | NNT_KOP_BIT(ADD_ROW_VEC) | NNT_KOP_BIT(SUM_ROWS),
};
