/* activation: element-wise functions and softmax over the last axis (width).
 * Runs in place when the backward needs only the output (relu, leaky_relu,
 * sigmoid, tanh, softmax, none); the others keep their input for the
 * backward. leaky_relu's slope is NNTrainer's fixed 0.01, elu's alpha 1.0.
 * relu and leaky_relu whose output nothing else reads in the backward pass
 * keep one bit per element instead (whether y > 0, all their backward
 * needs), so that output's memory is free once its consumers ran. */
#include "nntrainer/layer.h"

#define LEAKY_SLOPE 0.01f
#define ELU_ALPHA 1.0f

typedef struct act_priv {
  int set;
} act_priv;

static int act_set(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  act_priv *p = l->priv;
  if (!nnt_streq(key, "activation"))
    return NNT_ERR_NOKEY;
  if (nnt_act_from_name(value, &l->activation))
    return nnt_err_set(e, NNT_ERR_INVAL, "key 'activation': unknown activation '%s'", value);
  l->has_activation = 1;
  p->set = 1;
  return NNT_OK;
}

static int act_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  act_priv *p = l->priv;
  if (!p->set)
    return nnt_err_set(e, NNT_ERR_INVAL, "activation: required key is missing");
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "an activation layer takes one input, not %u",
                       ctx->n_in);
  ctx->out_dim[0] = ctx->in_dim[0];
  if (nnt_act_bwd_needs_output_only(l->activation))
    ctx->flags = NNT_LF_BWD_READS_OUTPUT | NNT_LF_INPLACE;
  else
    ctx->flags = NNT_LF_BWD_READS_INPUT;
  return NNT_OK;
}

/* Compile found the output kept for this layer alone: a mask of
 * nnt_mask_words(n) words replaces it (scratch 0; its presence is the
 * mode). */
static void act_keep_less(nnt_layer *l, nnt_finalize_ctx *ctx) {
  size_t words = nnt_mask_words(nnt_dim_len(ctx->out_dim[0]));
  if (!nnt_act_bwd_sign_only(l->activation) || ctx->n_scratch || words > UINT32_MAX)
    return;
  ctx->flags &= ~(unsigned)NNT_LF_BWD_READS_OUTPUT;
  nnt_fctx_add_scratch(ctx, nnt_dim_make(1, 1, 1, (unsigned)words), NNT_SCRATCH_SAVED);
}

static float act_alpha(nnt_act a) { return a == NNT_ACT_LEAKY_RELU ? LEAKY_SLOPE : ELU_ALPHA; }

static int act_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  const nnt_tensor *x = &ctx->in[0];
  nnt_tensor *y = &ctx->out[0];
  if (l->activation == NNT_ACT_SOFTMAX)
    NNT_TRY(ctx->k->softmax_fwd(ctx->k, nnt_tensor_len(x) / x->dim.w, x->dim.w, x->data, y->data));
  else
    NNT_TRY(ctx->k->act_fwd(ctx->k, l->activation, act_alpha(l->activation), nnt_tensor_len(x),
                            x->data, y->data));
  /* the mask, where the backward will read it (NULL data: it will not) */
  if (ctx->n_scratch && ctx->scratch[0].data)
    NNT_TRY(ctx->k->act_mask(ctx->k, nnt_tensor_len(y), y->data, ctx->scratch[0].data));
  return NNT_OK;
}

static int act_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  const nnt_tensor *y = &ctx->out[0], *dy = &ctx->d_out[0];
  nnt_tensor *dx = &ctx->d_in[0];
  if (ctx->n_scratch)
    NNT_TRY(ctx->k->act_bwd_mask(ctx->k, l->activation, act_alpha(l->activation),
                                 nnt_tensor_len(dy), ctx->scratch[0].data, dy->data, dx->data));
  else if (l->activation == NNT_ACT_SOFTMAX)
    NNT_TRY(ctx->k->softmax_bwd(ctx->k, nnt_tensor_len(y) / y->dim.w, y->dim.w, y->data, dy->data,
                                dx->data));
  else
    NNT_TRY(ctx->k->act_bwd(ctx->k, l->activation, act_alpha(l->activation), nnt_tensor_len(y),
                            ctx->in[0].data, y->data, dy->data, dx->data));
  return NNT_OK;
}

const nnt_layer_ops nnt_layer_activation = {
    .type = "activation",
    .ml_type = 6, /* ML_TRAIN_LAYER_TYPE_ACTIVATION */
    .priv_size = sizeof(act_priv),
    .set_property = act_set,
    .finalize = act_finalize,
    .forward = act_forward,
    .calc_derivative = act_derivative,
    .keep_less = act_keep_less,
    .kops = NNT_KOP_BIT(ACT_FWD) | NNT_KOP_BIT(ACT_BWD) | NNT_KOP_BIT(ACT_MASK) |
            NNT_KOP_BIT(ACT_BWD_MASK) | NNT_KOP_BIT(SOFTMAX_FWD) | NNT_KOP_BIT(SOFTMAX_BWD),
};
