/* activation: element-wise functions and softmax over the last axis (width).
 * Runs in place when the backward needs only the output (relu, leaky_relu,
 * sigmoid, tanh, softmax, none); the others keep their input for the
 * backward. leaky_relu's slope is NNTrainer's fixed 0.01, elu's alpha 1.0. */
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

static float act_alpha(nnt_act a) { return a == NNT_ACT_LEAKY_RELU ? LEAKY_SLOPE : ELU_ALPHA; }

static int act_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  const nnt_tensor *x = &ctx->in[0];
  nnt_tensor *y = &ctx->out[0];
  if (l->activation == NNT_ACT_SOFTMAX)
    NNT_TRY(ctx->k->softmax_fwd(ctx->k, nnt_tensor_len(x) / x->dim.w, x->dim.w, x->data, y->data));
  else
    NNT_TRY(ctx->k->act_fwd(ctx->k, l->activation, act_alpha(l->activation), nnt_tensor_len(x),
                            x->data, y->data));
  return NNT_OK;
}

static int act_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  const nnt_tensor *y = &ctx->out[0], *dy = &ctx->d_out[0];
  nnt_tensor *dx = &ctx->d_in[0];
  if (l->activation == NNT_ACT_SOFTMAX)
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
    .kops = NNT_KOP_BIT(ACT_FWD) | NNT_KOP_BIT(ACT_BWD) | NNT_KOP_BIT(SOFTMAX_FWD) |
            NNT_KOP_BIT(SOFTMAX_BWD),
};
