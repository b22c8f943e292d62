/* dropout: in training, zero each value with probability dropout_rate and
 * scale the rest by 1/(1-rate) (NNTrainer's inverted dropout); in inference,
 * the identity. The mask is a scratch tensor kept from forward to backward:
 * dX = dY * mask. The mask is drawn from the counter-based generator at
 * (the model's seed, the run context's stream), so a step's mask depends
 * on the seed, the iteration and the node alone. Not in place: the kernel
 * table's mul does not promise aliasing, and the backward needs only the
 * mask anyway. */
#include "nntrainer/layer.h"

typedef struct dropout_priv {
  float rate;
} dropout_priv;

static int dropout_set(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  dropout_priv *p = l->priv;
  if (!nnt_streq(key, "dropout_rate"))
    return NNT_ERR_NOKEY;
  return nnt_parse_rate(key, value, &p->rate, e);
}

static int dropout_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "dropout takes one input, not %u", ctx->n_in);
  ctx->out_dim[0] = ctx->in_dim[0];
  nnt_fctx_add_scratch(ctx, ctx->in_dim[0], NNT_SCRATCH_ITER);
  ctx->flags = 0;
  return NNT_OK;
}

static int dropout_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  dropout_priv *p = l->priv;
  size_t n = nnt_tensor_len(&ctx->in[0]);
  if (!ctx->training || p->rate == 0) {
    NNT_TRY(ctx->k->copy(ctx->k, n, ctx->in[0].data, ctx->out[0].data));
    if (ctx->training)
      NNT_TRY(ctx->k->fill(ctx->k, n, 1.0f, ctx->scratch[0].data));
    return NNT_OK;
  }
  NNT_TRY(ctx->k->dropout_mask(ctx->k, n, p->rate, ctx->seed, ctx->stream, ctx->scratch[0].data));
  NNT_TRY(ctx->k->mul(ctx->k, n, ctx->in[0].data, ctx->scratch[0].data, ctx->out[0].data));
  return NNT_OK;
}

static int dropout_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  size_t n = nnt_tensor_len(&ctx->d_out[0]);
  NNT_TRY(ctx->k->mul(ctx->k, n, ctx->d_out[0].data, ctx->scratch[0].data, ctx->d_in[0].data));
  return NNT_OK;
}

const nnt_layer_ops nnt_layer_dropout = {
    .type = "dropout",
    .ml_type = 16, /* ML_TRAIN_LAYER_TYPE_DROPOUT */
    .priv_size = sizeof(dropout_priv),
    .set_property = dropout_set,
    .finalize = dropout_finalize,
    .forward = dropout_forward,
    .calc_derivative = dropout_derivative,
    .kops = NNT_KOP_BIT(DROPOUT_MASK) | NNT_KOP_BIT(MUL) | NNT_KOP_BIT(COPY) | NNT_KOP_BIT(FILL),
};
