/* multiout: one input copied to as many outputs as its consumers name
 * (name(0), name(1), ...). Plain fan-out needs no multiout: a layer read by
 * several layers gets their derivatives summed in the backward pass. */
#include "nntrainer/layer.h"

static int mo_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "multiout takes one input, not %u", ctx->n_in);
  ctx->n_out = ctx->n_out_refs ? ctx->n_out_refs : 1;
  for (unsigned o = 0; o < ctx->n_out; o++)
    ctx->out_dim[o] = ctx->in_dim[0];
  ctx->flags = 0;
  return NNT_OK;
}

static int mo_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  for (unsigned o = 0; o < ctx->n_out; o++)
    NNT_TRY(ctx->k->copy(ctx->k, nnt_tensor_len(&ctx->in[0]), ctx->in[0].data, ctx->out[o].data));
  return NNT_OK;
}

static int mo_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  size_t n = nnt_tensor_len(&ctx->d_in[0]);
  int first = 1;
  for (unsigned o = 0; o < ctx->n_out; o++) {
    if (!ctx->d_out[o].data)
      continue;
    if (first)
      NNT_TRY(ctx->k->copy(ctx->k, n, ctx->d_out[o].data, ctx->d_in[0].data));
    else
      NNT_TRY(ctx->k->add(ctx->k, n, ctx->d_in[0].data, ctx->d_out[o].data, ctx->d_in[0].data));
    first = 0;
  }
  if (first)
    NNT_TRY(ctx->k->fill(ctx->k, n, 0, ctx->d_in[0].data));
  return NNT_OK;
}

const nnt_layer_ops nnt_layer_multiout = {
    .type = "multiout",
    .ml_type = 9,
    .finalize = mo_finalize,
    .forward = mo_forward,
    .calc_derivative = mo_derivative,
    .kops = NNT_KOP_BIT(COPY) | NNT_KOP_BIT(ADD) | NNT_KOP_BIT(FILL),
};
