/* flatten: b:c:h:w -> b:1:1:(c*h*w), a view of its input. */
#include "nntrainer/layer.h"

static int flatten_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "flatten takes one input, not %u", ctx->n_in);
  nnt_dim d = ctx->in_dim[0];
  unsigned w;
  if (nnt_axis_mul((uint64_t)d.c * d.h, d.w, &w)) {
    char a[64];
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "flatten: the output width would be %u x %u x %u = %.0f (input %s), "
                       "more than %u",
                       d.c, d.h, d.w, (double)d.c * d.h * d.w, nnt_dim_str(d, a, sizeof a),
                       UINT32_MAX);
  }
  ctx->out_dim[0] = nnt_dim_make(d.b, 1, 1, w);
  ctx->flags = NNT_LF_VIEW;
  return NNT_OK;
}

/* Copies when the plan gave separate buffers; nothing when they alias. */
static int flatten_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  NNT_TRY(ctx->k->copy(ctx->k, nnt_tensor_len(&ctx->in[0]), ctx->in[0].data, ctx->out[0].data));
  return NNT_OK;
}

static int flatten_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  NNT_TRY(
      ctx->k->copy(ctx->k, nnt_tensor_len(&ctx->d_out[0]), ctx->d_out[0].data, ctx->d_in[0].data));
  return NNT_OK;
}

const nnt_layer_ops nnt_layer_flatten = {
    .type = "flatten",
    .ml_type = 5, /* ML_TRAIN_LAYER_TYPE_FLATTEN */
    .finalize = flatten_finalize,
    .forward = flatten_forward,
    .calc_derivative = flatten_derivative,
    .kops = NNT_KOP_BIT(COPY),
};
