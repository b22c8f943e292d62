/* cross_sigmoid: output = sigmoid(input); loss = mean over all elements of
 * the sigmoid cross entropy on the logits; dX = (sigmoid(x) - label) / N.
 * The backward reads the input (logits), so it does not run in place. */
#include "nntrainer/layer.h"

static int xg_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "a loss layer takes one input, not %u", ctx->n_in);
  ctx->out_dim[0] = ctx->in_dim[0];
  ctx->flags = NNT_LF_LOSS | NNT_LF_BWD_READS_INPUT;
  return NNT_OK;
}

static void xg_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  const nnt_tensor *x = &ctx->in[0];
  size_t n = nnt_tensor_len(x);
  ctx->k->act_fwd(NNT_ACT_SIGMOID, 0, n, x->data, ctx->out[0].data);
  if (ctx->label && ctx->label->data)
    ctx->loss = ctx->k->xent_sigmoid_fwd(x->dim.b, n / x->dim.b, x->data, ctx->label->data);
}

static void xg_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  const nnt_tensor *x = &ctx->in[0];
  size_t n = nnt_tensor_len(x);
  ctx->k->xent_sigmoid_bwd(x->dim.b, n / x->dim.b, x->data, ctx->label->data,
                           ctx->d_in[0].data);
}

const nnt_layer_ops nnt_layer_cross_sigmoid = {
    .type = "cross_sigmoid",
    .ml_type = 501,
    .finalize = xg_finalize,
    .forward = xg_forward,
    .calc_derivative = xg_derivative,
};
