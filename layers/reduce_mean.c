/* reduce_mean (NNTrainer's type 51): the mean over one axis (`axis` 1, 2
 * or 3, NNTrainer's ReduceDimension), which becomes 1 in the output; with
 * no axis, the mean of each sample (output b:1:1:1, as NNTrainer averages
 * over 1, 2, 3). Sums through sum_cols / sum_rows (a call per leading block
 * when the axis is not the last), then a scale; the derivative spreads
 * dy / n back with add_col_vec / add_row_vec. */
#include "nntrainer/layer.h"

typedef struct rm_priv {
  unsigned axis; /* 0: none given */
} rm_priv;

static int rm_set(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  rm_priv *p = l->priv;
  if (nnt_streq(key, "axis")) {
    unsigned a;
    int rc = nnt_parse_uint(key, value, &a, e);
    if (rc)
      return rc;
    if (a < 1 || a > 3)
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'axis': %s is not 1, 2 or 3", value);
    p->axis = a;
    return NNT_OK;
  }
  return NNT_ERR_NOKEY;
}

static int rm_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  rm_priv *p = l->priv;
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "reduce_mean takes one input, not %u", ctx->n_in);
  nnt_dim d = ctx->in_dim[0];
  if (!p->axis)
    d.c = d.h = d.w = 1;
  else if (p->axis == 1)
    d.c = 1;
  else if (p->axis == 2)
    d.h = 1;
  else
    d.w = 1;
  ctx->out_dim[0] = d;
  ctx->flags = 0;
  return NNT_OK;
}

/* The input as blocks of [n, inner] reduced over n: `blocks` of them.
 * inner == 1: one sum_cols over rows of n. */
static void geom(const rm_priv *p, nnt_dim x, size_t *blocks, size_t *n, size_t *inner) {
  size_t b = x.b, c = x.c, h = x.h, w = x.w;
  switch (p->axis) {
  case 1: *blocks = b, *n = c, *inner = h * w; break;
  case 2: *blocks = b * c, *n = h, *inner = w; break;
  case 3: *blocks = b * c * h, *n = w, *inner = 1; break;
  default: *blocks = b, *n = c * h * w, *inner = 1; break;
  }
}

static int rm_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  const nnt_kernels *k = ctx->k;
  size_t blocks, n, inner;
  geom(l->priv, ctx->in[0].dim, &blocks, &n, &inner);
  const float *x = ctx->in[0].data;
  float *y = ctx->out[0].data;
  if (inner == 1)
    NNT_TRY(k->sum_cols(k, blocks, n, x, 0.0f, y));
  else
    for (size_t i = 0; i < blocks; i++)
      NNT_TRY(k->sum_rows(k, n, inner, x + i * n * inner, 0.0f, y + i * inner));
  return k->scale(k, blocks * inner, 1.0f / (float)n, y);
}

static int rm_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  const nnt_kernels *k = ctx->k;
  size_t blocks, n, inner;
  geom(l->priv, ctx->in[0].dim, &blocks, &n, &inner);
  const float *dy = ctx->d_out[0].data;
  float *dx = ctx->d_in[0].data;
  NNT_TRY(k->fill(k, blocks * n * inner, 0.0f, dx));
  if (inner == 1)
    NNT_TRY(k->add_col_vec(k, blocks, n, dy, dx));
  else
    for (size_t i = 0; i < blocks; i++)
      NNT_TRY(k->add_row_vec(k, n, inner, dy + i * inner, dx + i * n * inner));
  return k->scale(k, blocks * n * inner, 1.0f / (float)n, dx);
}

const nnt_layer_ops nnt_layer_reduce_mean = {
    .type = "reduce_mean",
    .ml_type = 51, /* ML_TRAIN_LAYER_TYPE_REDUCE_MEAN */
    .priv_size = sizeof(rm_priv),
    .set_property = rm_set,
    .finalize = rm_finalize,
    .forward = rm_forward,
    .calc_derivative = rm_derivative,
    .kops = NNT_KOP_BIT(SUM_COLS) | NNT_KOP_BIT(SUM_ROWS) | NNT_KOP_BIT(SCALE) |
            NNT_KOP_BIT(FILL) | NNT_KOP_BIT(ADD_COL_VEC) | NNT_KOP_BIT(ADD_ROW_VEC),
};
