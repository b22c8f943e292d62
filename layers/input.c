/* input: the model's input, optionally normalized or standardized per sample
 * (normalization: scaled to [0, 1] by the sample's min and max;
 * standardization: zero mean and unit population standard deviation). A
 * constant sample becomes zeros. NNTrainer differs: its normalization takes
 * the min and max over the whole batch, and its standardization divides by
 * l2norm / feature_len rather than the standard deviation; per sample and by
 * the standard deviation is what the names promise and does not depend on
 * which samples share a batch. The kernel table's normalize_rows computes
 * both, in that order. Runs in place (a view without either); no backward
 * work. */
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
  /* unchanged values: its output is its input (a view; the copy below
   * then copies nothing), so a model reading the batch where the caller
   * keeps it (plan.c borrows_inputs) writes nothing there */
  input_priv *p = l->priv;
  ctx->flags = p->normalization || p->standardization ? NNT_LF_INPLACE : NNT_LF_VIEW;
  return NNT_OK;
}

static int input_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  input_priv *p = l->priv;
  const nnt_tensor *in = &ctx->in[0];
  nnt_tensor *out = &ctx->out[0];
  size_t len = nnt_dim_feature_len(in->dim), b = in->dim.b;
  unsigned mode = (p->normalization ? NNT_NORM_MINMAX : 0) |
                  (p->standardization ? NNT_NORM_STANDARD : 0);
  if (!mode)
    return ctx->k->copy(ctx->k, nnt_tensor_len(in), in->data, out->data);
  return ctx->k->normalize_rows(ctx->k, b, len, mode, in->data, out->data);
}

static int input_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  /* only reached when an input layer sits inside a graph: pass through */
  NNT_TRY(
      ctx->k->copy(ctx->k, nnt_tensor_len(&ctx->d_out[0]), ctx->d_out[0].data, ctx->d_in[0].data));
  return NNT_OK;
}

const nnt_layer_ops nnt_layer_input = {
    .type = "input",
    .ml_type = 0, /* ML_TRAIN_LAYER_TYPE_INPUT */
    .priv_size = sizeof(input_priv),
    .set_property = input_set,
    .finalize = input_finalize,
    .forward = input_forward,
    .calc_derivative = input_derivative,
    .kops = NNT_KOP_BIT(COPY) | NNT_KOP_BIT(NORMALIZE_ROWS),
};
