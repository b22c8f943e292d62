/* cross_softmax: output = softmax(input) over the last axis; loss = batch
 * mean of -sum(label * log(prob + 1e-20)); dX = (prob - label) / batch
 * (NNTrainer's CrossEntropySoftmaxLossLayer). The derivative reads only the
 * output, so the layer may run in place. Without a label (inference) only
 * the probabilities are computed. */
#include "nntrainer/layer.h"

static int xs_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "a loss layer takes one input, not %u", ctx->n_in);
  ctx->out_dim[0] = ctx->in_dim[0];
  ctx->flags = NNT_LF_LOSS | NNT_LF_BWD_READS_OUTPUT | NNT_LF_INPLACE;
  return NNT_OK;
}

static int xs_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  const nnt_tensor *x = &ctx->in[0];
  size_t cols = x->dim.w, rows = nnt_tensor_len(x) / cols;
  NNT_TRY(ctx->k->softmax_fwd(ctx->k, rows, cols, x->data, ctx->out[0].data));
  if (ctx->label && ctx->label->data && ctx->loss)
    NNT_TRY(ctx->k->xent_softmax_fwd(ctx->k, x->dim.b, nnt_tensor_len(x) / x->dim.b,
                                     ctx->out[0].data, ctx->label->data, ctx->loss->data));
  return NNT_OK;
}

static int xs_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  const nnt_tensor *y = &ctx->out[0];
  NNT_TRY(ctx->k->xent_softmax_bwd(ctx->k, y->dim.b, nnt_tensor_len(y) / y->dim.b, y->data,
                                   ctx->label->data, ctx->d_in[0].data));
  return NNT_OK;
}

const nnt_layer_ops nnt_layer_cross_softmax = {
    .type = "cross_softmax",
    .ml_type = 502, /* ML_TRAIN_LAYER_TYPE_LOSS_CROSS_ENTROPY_SOFTMAX */
    .finalize = xs_finalize,
    .forward = xs_forward,
    .calc_derivative = xs_derivative,
    .kops = NNT_KOP_BIT(SOFTMAX_FWD) | NNT_KOP_BIT(XENT_SOFTMAX_FWD) |
            NNT_KOP_BIT(XENT_SOFTMAX_BWD),
};
