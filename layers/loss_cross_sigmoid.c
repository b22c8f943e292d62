/* cross_sigmoid: output = sigmoid(input); loss = the mean over all elements
 * of the sigmoid cross entropy on the logits, max(x,0) - x*t +
 * log(1 + e^-|x|) (NNTrainer's CrossEntropySigmoidLossLayer, which is
 * PyTorch's binary_cross_entropy_with_logits); dX = (sigmoid(x) - label) / N
 * with N every element of the batch. The derivative is computed from the
 * output, which holds sigmoid(x), so the layer may run in place. */
#include "nntrainer/layer.h"

static int xg_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "a loss layer takes one input, not %u", ctx->n_in);
  ctx->out_dim[0] = ctx->in_dim[0];
  ctx->flags = NNT_LF_LOSS | NNT_LF_BWD_READS_OUTPUT | NNT_LF_INPLACE;
  return NNT_OK;
}

static int xg_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  const nnt_tensor *x = &ctx->in[0];
  size_t n = nnt_tensor_len(x);
  /* the loss reads the logits, so it comes before an in-place output */
  if (ctx->label && ctx->label->data && ctx->loss)
    NNT_TRY(ctx->k->xent_sigmoid_fwd(ctx->k, x->dim.b, n / x->dim.b, x->data, ctx->label->data,
                                     ctx->loss->data));
  NNT_TRY(ctx->k->act_fwd(ctx->k, NNT_ACT_SIGMOID, 0, n, x->data, ctx->out[0].data));
  return NNT_OK;
}

static int xg_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  const nnt_tensor *y = &ctx->out[0];
  size_t n = nnt_tensor_len(y);
  NNT_TRY(ctx->k->sub(ctx->k, n, y->data, ctx->label->data, ctx->d_in[0].data));
  NNT_TRY(ctx->k->scale(ctx->k, n, 1.0f / (float)n, ctx->d_in[0].data));
  return NNT_OK;
}

const nnt_layer_ops nnt_layer_cross_sigmoid = {
    .type = "cross_sigmoid",
    .ml_type = 501, /* ML_TRAIN_LAYER_TYPE_LOSS_CROSS_ENTROPY_SIGMOID */
    .finalize = xg_finalize,
    .forward = xg_forward,
    .calc_derivative = xg_derivative,
    .kops = NNT_KOP_BIT(XENT_SIGMOID_FWD) | NNT_KOP_BIT(ACT_FWD) | NNT_KOP_BIT(SUB) |
            NNT_KOP_BIT(SCALE),
};
