/* mse: output = input; loss = mean((y - label)^2); dX = 2 (y - label) / N. */
#include "nntrainer/layer.h"

static int mse_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "a loss layer takes one input, not %u", ctx->n_in);
  ctx->out_dim[0] = ctx->in_dim[0];
  ctx->flags = NNT_LF_LOSS | NNT_LF_BWD_READS_OUTPUT | NNT_LF_INPLACE;
  return NNT_OK;
}

static int mse_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  size_t n = nnt_tensor_len(&ctx->in[0]);
  NNT_TRY(ctx->k->copy(ctx->k, n, ctx->in[0].data, ctx->out[0].data));
  if (ctx->label && ctx->label->data && ctx->loss)
    NNT_TRY(ctx->k->mse_fwd(ctx->k, n, ctx->out[0].data, ctx->label->data, ctx->loss->data));
  return NNT_OK;
}

static int mse_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  NNT_TRY(ctx->k->mse_bwd(ctx->k, nnt_tensor_len(&ctx->out[0]), ctx->out[0].data, ctx->label->data,
                          ctx->d_in[0].data));
  return NNT_OK;
}

const nnt_layer_ops nnt_layer_mse = {
    .type = "mse",
    .ml_type = 500, /* ML_TRAIN_LAYER_TYPE_LOSS_MSE */
    .finalize = mse_finalize,
    .forward = mse_forward,
    .calc_derivative = mse_derivative,
    .kops = NNT_KOP_BIT(MSE_FWD) | NNT_KOP_BIT(MSE_BWD) | NNT_KOP_BIT(COPY),
};
