/* identity: output = input, a view. */
#include "nntrainer/layer.h"

static int id_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "identity takes one input, not %u", ctx->n_in);
  ctx->out_dim[0] = ctx->in_dim[0];
  ctx->flags = NNT_LF_VIEW;
  return NNT_OK;
}

static int id_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  NNT_TRY(ctx->k->copy(ctx->k, nnt_tensor_len(&ctx->in[0]), ctx->in[0].data, ctx->out[0].data));
  return NNT_OK;
}

static int id_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  NNT_TRY(
      ctx->k->copy(ctx->k, nnt_tensor_len(&ctx->d_out[0]), ctx->d_out[0].data, ctx->d_in[0].data));
  return NNT_OK;
}

const nnt_layer_ops nnt_layer_identity = {
    .type = "identity",
    .ml_type = 29,
    .finalize = id_finalize,
    .forward = id_forward,
    .calc_derivative = id_derivative,
    .kops = NNT_KOP_BIT(COPY),
};
