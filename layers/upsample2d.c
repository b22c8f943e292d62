/* upsample2d: nearest-neighbour upsampling of h and w by kernel_size. */
#include "nntrainer/layer.h"

typedef struct up_priv {
  unsigned kh, kw;
} up_priv;

/* Defaults: upsample nearest, kernel_size 2,2; NNTrainer has neither and
 * requires both. */
static void up_init(nnt_layer *l) {
  up_priv *p = l->priv;
  p->kh = p->kw = 2;
}

static void up_log_defaults(const nnt_layer *l) {
  if (!nnt_layer_has_key(l, "upsample"))
    nnt_layer_notice_default(l, "upsample", "nearest", "NNTrainer has no default: give it");
  if (!nnt_layer_has_key(l, "kernel_size"))
    nnt_layer_notice_default(l, "kernel_size", "2,2", "NNTrainer has no default: give it");
}

static int up_set(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  up_priv *p = l->priv;
  if (nnt_streq(key, "upsample")) {
    if (!nnt_streq(value, "nearest"))
      return nnt_err_set(e, NNT_ERR_NOT_SUPPORTED,
                         "key 'upsample': '%s' is not supported (nearest is)", value);
    return NNT_OK;
  }
  if (nnt_streq(key, "kernel_size")) {
    unsigned v[2], n;
    int rc = nnt_parse_uint_list(key, value, v, 2, &n, e);
    if (rc)
      return rc;
    if (!v[0] || (n == 2 && !v[1]))
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'kernel_size': '%s' must be positive", value);
    p->kh = v[0];
    p->kw = n == 2 ? v[1] : v[0];
    return NNT_OK;
  }
  return NNT_ERR_NOKEY;
}

static int up_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  up_priv *p = l->priv;
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "upsample2d takes one input, not %u", ctx->n_in);
  nnt_dim d = ctx->in_dim[0];
  unsigned oh, ow;
  if (nnt_axis_mul(d.h, p->kh, &oh) || nnt_axis_mul(d.w, p->kw, &ow))
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "kernel_size: the output would be %llu x %llu (input %u x %u, "
                       "kernel_size %u,%u), more than %u on an axis",
                       (unsigned long long)d.h * p->kh, (unsigned long long)d.w * p->kw, d.h,
                       d.w, p->kh, p->kw, UINT32_MAX);
  ctx->out_dim[0] = nnt_dim_make(d.b, d.c, oh, ow);
  ctx->flags = 0;
  return NNT_OK;
}

static int up_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  up_priv *p = l->priv;
  nnt_dim d = ctx->in[0].dim;
  NNT_TRY(ctx->k->upsample_nearest_fwd(ctx->k, (size_t)d.b * d.c, d.h, d.w, p->kh, p->kw,
                                       ctx->in[0].data, ctx->out[0].data));
  return NNT_OK;
}

static int up_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  up_priv *p = l->priv;
  nnt_dim d = ctx->d_in[0].dim;
  NNT_TRY(ctx->k->upsample_nearest_bwd(ctx->k, (size_t)d.b * d.c, d.h, d.w, p->kh, p->kw,
                                       ctx->d_out[0].data, ctx->d_in[0].data));
  return NNT_OK;
}

const nnt_layer_ops nnt_layer_upsample2d = {
    .type = "upsample2d",
    .ml_type = -1,
    .priv_size = sizeof(up_priv),
    .init = up_init,
    .set_property = up_set,
    .finalize = up_finalize,
    .forward = up_forward,
    .calc_derivative = up_derivative,
    .log_defaults = up_log_defaults,
    .kops = NNT_KOP_BIT(UPSAMPLE_NEAREST_FWD) | NNT_KOP_BIT(UPSAMPLE_NEAREST_BWD),
};
