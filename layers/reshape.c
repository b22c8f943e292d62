/* reshape: the same values under target_shape (c:h:w), a view. */
#include "nntrainer/layer.h"

typedef struct reshape_priv {
  int set;
  nnt_dim target;
} reshape_priv;

static int reshape_set(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  reshape_priv *p = l->priv;
  if (!nnt_streq(key, "target_shape"))
    return NNT_ERR_NOKEY;
  int rc = nnt_dim_parse(key, value, &p->target, e);
  p->set = !rc;
  return rc;
}

static int reshape_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  reshape_priv *p = l->priv;
  if (!p->set)
    return nnt_err_set(e, NNT_ERR_INVAL, "target_shape: required key is missing");
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "reshape takes one input, not %u", ctx->n_in);
  nnt_dim in = ctx->in_dim[0], out = p->target;
  out.b = in.b;
  char a[64], b[64];
  size_t n_out;
  /* the input's size was checked when it was made; the target's is not yet */
  if (nnt_size_mul(out.c, out.h, &n_out) || nnt_size_mul(n_out, out.w, &n_out))
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "target_shape: %s holds %.4g values per sample, more than fit in "
                       "memory (the input %s holds %zu)",
                       nnt_dim_str(out, a, sizeof a), (double)out.c * out.h * (double)out.w,
                       nnt_dim_str(in, b, sizeof b), nnt_dim_feature_len(in));
  if (n_out != nnt_dim_feature_len(in))
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "target_shape: %s holds %zu values per sample but the input %s holds %zu",
                       nnt_dim_str(out, a, sizeof a), n_out, nnt_dim_str(in, b, sizeof b),
                       nnt_dim_feature_len(in));
  ctx->out_dim[0] = out;
  ctx->flags = NNT_LF_VIEW;
  return NNT_OK;
}

static int reshape_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  NNT_TRY(ctx->k->copy(ctx->k, nnt_tensor_len(&ctx->in[0]), ctx->in[0].data, ctx->out[0].data));
  return NNT_OK;
}

static int reshape_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  NNT_TRY(
      ctx->k->copy(ctx->k, nnt_tensor_len(&ctx->d_out[0]), ctx->d_out[0].data, ctx->d_in[0].data));
  return NNT_OK;
}

const nnt_layer_ops nnt_layer_reshape = {
    .type = "reshape",
    .ml_type = -1, /* NNTrainer's C API has no reshape value */
    .priv_size = sizeof(reshape_priv),
    .set_property = reshape_set,
    .finalize = reshape_finalize,
    .forward = reshape_forward,
    .calc_derivative = reshape_derivative,
    .kops = NNT_KOP_BIT(COPY),
};
