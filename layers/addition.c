/* addition: the element-wise sum of inputs of one shape. */
#include "nntrainer/layer.h"

static int add_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  for (unsigned k = 1; k < ctx->n_in; k++)
    if (!nnt_dim_eq(ctx->in_dim[k], ctx->in_dim[0])) {
      char a[64], b[64];
      return nnt_err_set(e, NNT_ERR_INVAL, "input_layers: input %u is %s but input 0 is %s",
                         k, nnt_dim_str(ctx->in_dim[k], a, sizeof a),
                         nnt_dim_str(ctx->in_dim[0], b, sizeof b));
    }
  ctx->out_dim[0] = ctx->in_dim[0];
  ctx->flags = NNT_LF_INPLACE;
  return NNT_OK;
}

static int add_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  size_t n = nnt_tensor_len(&ctx->out[0]);
  NNT_TRY(ctx->k->copy(ctx->k, n, ctx->in[0].data, ctx->out[0].data));
  for (unsigned k = 1; k < ctx->n_in; k++)
    NNT_TRY(ctx->k->add(ctx->k, n, ctx->out[0].data, ctx->in[k].data, ctx->out[0].data));
  return NNT_OK;
}

static int add_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  size_t n = nnt_tensor_len(&ctx->d_out[0]);
  for (unsigned k = 0; k < ctx->n_in; k++)
    if (ctx->d_in[k].data)
      NNT_TRY(ctx->k->copy(ctx->k, n, ctx->d_out[0].data, ctx->d_in[k].data));
  return NNT_OK;
}

const nnt_layer_ops nnt_layer_addition = {
    .type = "addition",
    .ml_type = 7,
    .finalize = add_finalize,
    .forward = add_forward,
    .calc_derivative = add_derivative,
    .kops = NNT_KOP_BIT(COPY) | NNT_KOP_BIT(ADD),
};
