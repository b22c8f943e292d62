/* positional_encoding: y = x + P, where P [h, w] is NNTrainer's sinusoid
 * table (P[i][j] = sin(i / 10000^(2 floor(j/2) / w)) for even j, cos for
 * odd j) added to every sample and channel of a b:c:h:w input; h is the
 * time axis and may not exceed max_timestep. The table is computed by the
 * pos_encoding op into a scratch tensor that lives within the forward (h
 * rows, not max_timestep: only those are read), so it is planned like any
 * other tensor and never saved in the weight file (NNTrainer does not save
 * it either). The derivative passes through; the layer may run in place. */
#include "nntrainer/layer.h"

typedef struct pe_priv {
  unsigned max_timestep; /* 0: not given */
} pe_priv;

static int pe_set(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  pe_priv *p = l->priv;
  if (nnt_streq(key, "max_timestep"))
    return nnt_parse_positive_uint(key, value, &p->max_timestep, e);
  return NNT_ERR_NOKEY;
}

static int pe_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  pe_priv *p = l->priv;
  if (!p->max_timestep)
    return nnt_err_set(e, NNT_ERR_INVAL, "max_timestep: required key is missing");
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "positional_encoding takes one input, not %u",
                       ctx->n_in);
  nnt_dim in = ctx->in_dim[0];
  if (in.h > p->max_timestep)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "key 'max_timestep': the input has %u time steps (its height), more "
                       "than max_timestep %u", in.h, p->max_timestep);
  ctx->out_dim[0] = in;
  nnt_fctx_add_scratch(ctx, nnt_dim_make(1, 1, in.h, in.w), NNT_SCRATCH_FWD);
  ctx->flags = NNT_LF_INPLACE;
  return NNT_OK;
}

static int pe_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  const nnt_tensor *x = &ctx->in[0];
  nnt_tensor *y = &ctx->out[0], *t = &ctx->scratch[0];
  size_t cols = (size_t)x->dim.h * x->dim.w, n = nnt_tensor_len(x);
  NNT_TRY(ctx->k->pos_encoding(ctx->k, x->dim.h, x->dim.w, t->data));
  NNT_TRY(ctx->k->copy(ctx->k, n, x->data, y->data)); /* nothing when in place */
  return ctx->k->add_row_vec(ctx->k, n / cols, cols, t->data, y->data);
}

static int pe_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  return ctx->k->copy(ctx->k, nnt_tensor_len(&ctx->d_out[0]), ctx->d_out[0].data,
                      ctx->d_in[0].data);
}

const nnt_layer_ops nnt_layer_positional_encoding = {
    .type = "positional_encoding",
    .ml_type = 28, /* ML_TRAIN_LAYER_TYPE_POSITIONAL_ENCODING */
    .priv_size = sizeof(pe_priv),
    .set_property = pe_set,
    .finalize = pe_finalize,
    .forward = pe_forward,
    .calc_derivative = pe_derivative,
    .kops = NNT_KOP_BIT(POS_ENCODING) | NNT_KOP_BIT(COPY) | NNT_KOP_BIT(ADD_ROW_VEC),
};
