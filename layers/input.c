/* input: the model's input, optionally normalized or standardized per sample
 * (normalization: scaled to [0, 1] by the sample's min and max;
 * standardization: zero mean and unit population standard deviation). A
 * constant sample becomes zeros. NNTrainer differs: its normalization takes
 * the min and max over the whole batch, and its standardization divides by
 * l2norm / feature_len rather than the standard deviation; per sample and by
 * the standard deviation is what the names promise and does not depend on
 * which samples share a batch. Runs in place; no backward work. */
#include <math.h>
#include "nntrainer/layer.h"

typedef struct input_priv {
  int normalization, standardization;
} input_priv;

static int input_set(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  input_priv *p = l->priv;
  if (nnt_streq(key, "normalization"))
    return nnt_parse_bool(key, value, &p->normalization, e);
  if (nnt_streq(key, "standardization"))
    return nnt_parse_bool(key, value, &p->standardization, e);
  return NNT_ERR_NOKEY;
}

static int input_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "an input layer takes one input, not %u", ctx->n_in);
  ctx->out_dim[0] = ctx->in_dim[0];
  ctx->flags = NNT_LF_INPLACE;
  return NNT_OK;
}

static void input_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  input_priv *p = l->priv;
  const nnt_tensor *in = &ctx->in[0];
  nnt_tensor *out = &ctx->out[0];
  size_t len = nnt_dim_feature_len(in->dim), b = in->dim.b;
  ctx->k->copy(nnt_tensor_len(in), in->data, out->data);
  for (size_t s = 0; s < b && (p->normalization || p->standardization); s++) {
    float *x = out->data + s * len;
    if (p->normalization) {
      float lo = x[0], hi = x[0];
      for (size_t i = 1; i < len; i++)
        lo = x[i] < lo ? x[i] : lo, hi = x[i] > hi ? x[i] : hi;
      float range = hi - lo;
      for (size_t i = 0; i < len; i++)
        x[i] = range > 0 ? (x[i] - lo) / range : 0;
    }
    if (p->standardization) {
      float mean = ctx->k->sum(len, x) / (float)len;
      double var = 0;
      for (size_t i = 0; i < len; i++)
        var += (double)(x[i] - mean) * (x[i] - mean);
      float sd = (float)sqrt(var / len);
      for (size_t i = 0; i < len; i++)
        x[i] = sd > 0 ? (x[i] - mean) / sd : 0;
    }
  }
}

static void input_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  /* only reached when an input layer sits inside a graph: pass through */
  ctx->k->copy(nnt_tensor_len(&ctx->d_out[0]), ctx->d_out[0].data, ctx->d_in[0].data);
}

const nnt_layer_ops nnt_layer_input = {
    .type = "input",
    .ml_type = 0, /* ML_TRAIN_LAYER_TYPE_INPUT */
    .priv_size = sizeof(input_priv),
    .set_property = input_set,
    .finalize = input_finalize,
    .forward = input_forward,
    .calc_derivative = input_derivative,
    .kops = NNT_KOP_BIT(COPY) | NNT_KOP_BIT(SUM),
};
