/* conv2d and conv1d: im2col then one gemm per image. The filter is
 * [filters, c, kh, kw] (NNTrainer's layout) and the bias [filters]; conv1d
 * is conv2d over the width of a b:c:1:w input. The im2col buffers are
 * scratch tensors planned by the manager: one for forward, one recomputed
 * in the backward pass, so no column buffer lives across the step.
 * A pointwise convolution (1x1 window, stride 1, no padding) has columns
 * equal to the image itself ([c, h*w]): it skips im2col and col2im, runs
 * the same gemms on the input and on dX directly, and asks for no scratch
 * (the same products on the same numbers: results are bitwise those of
 * the general path). */
#include <stdint.h>
#include "nntrainer/layer.h"

typedef struct conv_priv {
  unsigned filters;
  nnt_window_props win;
  nnt_weight_props wp;
  nnt_conv_geom g;
} conv_priv;

static int is_1d(const nnt_layer *l) { return l->ops == &nnt_layer_conv1d; }

/* Whether im2col of one image is the image itself (see above). */
static int is_pointwise(const nnt_conv_geom *g) {
  return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && !g->pt && !g->pb && !g->pl &&
         !g->pr;
}

static void conv_init(nnt_layer *l) {
  conv_priv *p = l->priv;
  nnt_window_props_init(&p->win);
  nnt_weight_props_init(&p->wp);
}

static int conv_set(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  conv_priv *p = l->priv;
  if (nnt_streq(key, "filters")) {
    int rc = nnt_parse_uint(key, value, &p->filters, e);
    if (!rc && !p->filters)
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'filters': must be positive");
    return rc;
  }
  int rc = nnt_window_props_set(&p->win, key, "kernel_size", value, is_1d(l), e);
  if (rc != NNT_ERR_NOKEY)
    return rc;
  return nnt_weight_props_set(&p->wp, key, value, e);
}

static int conv_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  conv_priv *p = l->priv;
  if (!p->filters)
    return nnt_err_set(e, NNT_ERR_INVAL, "filters: required key is missing");
  if (!p->win.k_set)
    return nnt_err_set(e, NNT_ERR_INVAL, "kernel_size: required key is missing");
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "%s takes one input, not %u", l->ops->type, ctx->n_in);
  nnt_dim in = ctx->in_dim[0];
  if (is_1d(l) && in.h != 1) {
    char a[64];
    return nnt_err_set(e, NNT_ERR_INVAL, "conv1d needs an input of height 1, not %s",
                       nnt_dim_str(in, a, sizeof a));
  }
  int rc = nnt_window_geom(&p->win, in, "kernel_size", &p->g, e);
  if (rc)
    return rc;
  nnt_conv_geom *g = &p->g;
  ctx->out_dim[0] = nnt_dim_make(in.b, p->filters, g->oh, g->ow);
  /* the gemms: [filters x patch] by [patch x plane], one per image */
  unsigned patch, plane, fan_out;
  if (nnt_axis_mul((uint64_t)in.c * g->kh, g->kw, &patch) || patch > NNT_GEMM_DIM_MAX)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "kernel_size: a patch of %u channels x %u x %u = %.0f values is more "
                       "than the %zu a matrix product takes",
                       in.c, g->kh, g->kw, (double)in.c * g->kh * g->kw, NNT_GEMM_DIM_MAX);
  if (nnt_axis_mul(g->oh, g->ow, &plane) || plane > NNT_GEMM_DIM_MAX) {
    char a[64];
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "kernel_size, stride, padding: the output plane of %u x %u = %.0f "
                       "positions over the input %s is more than the %zu a matrix product "
                       "takes",
                       g->oh, g->ow, (double)g->oh * g->ow, nnt_dim_str(in, a, sizeof a),
                       NNT_GEMM_DIM_MAX);
  }
  if ((rc = nnt_check_gemm_dim(p->filters, "filters", e)))
    return rc;
  if (nnt_axis_mul((uint64_t)p->filters * g->kh, g->kw, &fan_out))
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "filters: the fan-out %u filters x %u x %u is more than %u",
                       p->filters, g->kh, g->kw, UINT32_MAX);
  nnt_fctx_add_weight(ctx, "filter", nnt_dim_make(p->filters, in.c, g->kh, g->kw),
                      p->wp.weight_init, patch, fan_out,
                      p->wp.l2norm ? p->wp.l2_constant : 0, p->wp.weight_decay, 1);
  if (!p->wp.disable_bias)
    nnt_fctx_add_weight(ctx, "bias", nnt_dim_make(1, p->filters, 1, 1), p->wp.bias_init, patch,
                        p->filters, 0, p->wp.bias_decay, 1);
  if (!is_pointwise(g)) {
    nnt_dim col = nnt_dim_make(1, 1, patch, plane);
    nnt_fctx_add_scratch(ctx, col, NNT_SCRATCH_FWD);
    nnt_fctx_add_scratch(ctx, col, NNT_SCRATCH_BWD);
  }
  ctx->flags = NNT_LF_BWD_READS_INPUT;
  return NNT_OK;
}

static int conv_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  conv_priv *p = l->priv;
  const nnt_conv_geom *g = &p->g;
  size_t patch = (size_t)g->c * g->kh * g->kw, plane = (size_t)g->oh * g->ow;
  size_t in_len = nnt_dim_feature_len(ctx->in[0].dim), out_len = p->filters * plane;
  int pw = is_pointwise(g);
  for (unsigned b = 0; b < ctx->in[0].dim.b; b++) {
    float *y = ctx->out[0].data + b * out_len, *col = ctx->in[0].data + b * in_len;
    if (!pw) {
      col = ctx->scratch[0].data;
      NNT_TRY(ctx->k->im2col(ctx->k, g, ctx->in[0].data + b * in_len, col));
    }
    NNT_TRY(ctx->k->gemm(ctx->k, 0, 0, p->filters, plane, patch, 1.0f, ctx->w[0].data, patch, col,
                         plane, 0.0f, y, plane));
    if (ctx->n_w > 1)
      NNT_TRY(ctx->k->add_col_vec(ctx->k, p->filters, plane, ctx->w[1].data, y));
  }
  return NNT_OK;
}

/* dW = sum over images of dY col^T; db = sums of dY. */
static int conv_gradient(nnt_layer *l, nnt_run_ctx *ctx) {
  conv_priv *p = l->priv;
  const nnt_conv_geom *g = &p->g;
  size_t patch = (size_t)g->c * g->kh * g->kw, plane = (size_t)g->oh * g->ow;
  size_t in_len = nnt_dim_feature_len(ctx->in[0].dim), out_len = p->filters * plane;
  int pw = is_pointwise(g);
  for (unsigned b = 0; b < ctx->in[0].dim.b; b++) {
    const float *dy = ctx->d_out[0].data + b * out_len;
    float beta = b ? 1.0f : 0.0f;
    if (ctx->gw[0].data) {
      const float *col = ctx->in[0].data + b * in_len;
      if (!pw) {
        NNT_TRY(ctx->k->im2col(ctx->k, g, col, ctx->scratch[1].data));
        col = ctx->scratch[1].data;
      }
      NNT_TRY(ctx->k->gemm(ctx->k, 0, 1, p->filters, patch, plane, 1.0f, dy, plane, col, plane,
                           beta, ctx->gw[0].data, patch));
    }
    if (ctx->n_w > 1 && ctx->gw[1].data)
      NNT_TRY(ctx->k->sum_cols(ctx->k, p->filters, plane, dy, beta, ctx->gw[1].data));
  }
  return NNT_OK;
}

/* dcol = W^T dY, folded back into dX (pointwise: dcol is dX). */
static int conv_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  conv_priv *p = l->priv;
  const nnt_conv_geom *g = &p->g;
  size_t patch = (size_t)g->c * g->kh * g->kw, plane = (size_t)g->oh * g->ow;
  size_t in_len = nnt_dim_feature_len(ctx->d_in[0].dim), out_len = p->filters * plane;
  if (is_pointwise(g)) {
    for (unsigned b = 0; b < ctx->d_in[0].dim.b; b++)
      NNT_TRY(ctx->k->gemm(ctx->k, 1, 0, patch, plane, p->filters, 1.0f, ctx->w[0].data, patch,
                           ctx->d_out[0].data + b * out_len, plane, 0.0f,
                           ctx->d_in[0].data + b * in_len, plane));
    return NNT_OK;
  }
  float *col = ctx->scratch[1].data;
  NNT_TRY(ctx->k->fill(ctx->k, nnt_tensor_len(&ctx->d_in[0]), 0.0f, ctx->d_in[0].data));
  for (unsigned b = 0; b < ctx->d_in[0].dim.b; b++) {
    NNT_TRY(ctx->k->gemm(ctx->k, 1, 0, patch, plane, p->filters, 1.0f, ctx->w[0].data, patch,
                         ctx->d_out[0].data + b * out_len, plane, 0.0f, col, plane));
    NNT_TRY(ctx->k->col2im(ctx->k, g, col, ctx->d_in[0].data + b * in_len));
  }
  return NNT_OK;
}

const nnt_layer_ops nnt_layer_conv2d = {
    .type = "conv2d",
    .ml_type = 3,
    .priv_size = sizeof(conv_priv),
    .init = conv_init,
    .set_property = conv_set,
    .finalize = conv_finalize,
    .forward = conv_forward,
    .calc_gradient = conv_gradient,
    .calc_derivative = conv_derivative,
    .kops = NNT_KOP_BIT(IM2COL) | NNT_KOP_BIT(COL2IM) | NNT_KOP_BIT(GEMM) |
            NNT_KOP_BIT(ADD_COL_VEC) | NNT_KOP_BIT(SUM_COLS) | NNT_KOP_BIT(FILL),
};

const nnt_layer_ops nnt_layer_conv1d = {
    .type = "conv1d",
    .ml_type = 19,
    .priv_size = sizeof(conv_priv),
    .init = conv_init,
    .set_property = conv_set,
    .finalize = conv_finalize,
    .forward = conv_forward,
    .calc_gradient = conv_gradient,
    .calc_derivative = conv_derivative,
    .kops = NNT_KOP_BIT(IM2COL) | NNT_KOP_BIT(COL2IM) | NNT_KOP_BIT(GEMM) |
            NNT_KOP_BIT(ADD_COL_VEC) | NNT_KOP_BIT(SUM_COLS) | NNT_KOP_BIT(FILL),
};
