/* fully_connected: Y = X W + b on the last axis (width) of a b:c:h:w input,
 * giving b:c:h:unit; W is [in, unit] row-major ("weight"), b is [unit]
 * ("bias", absent with disable_bias). Every (b, c, h) row is one row of the
 * product. The backward reads X (for dW).
 * LoRA (NNTrainer's lora_rank, lora_alpha): Y += s (X A) B with "loraA"
 * [in, rank] (zeros) and "loraB" [rank, unit] (lecun_normal) after the
 * weight and bias, s = lora_alpha / lora_rank (1 without lora_alpha); the
 * weight and bias are then frozen (no gradient, no optimizer state) and only
 * A and B train. X A is kept for dB; lora_rank 0 is the plain layer. */
#include "nntrainer/layer.h"

typedef struct fc_priv {
  unsigned unit;
  nnt_weight_props wp;
  unsigned lora_rank, lora_alpha; /* 0: not given */
  unsigned bias_w, lora_w;        /* at finalize: weight indices (~0u: none) */
} fc_priv;

static void fc_init(nnt_layer *l) {
  fc_priv *p = l->priv;
  nnt_weight_props_init(&p->wp);
}

static int fc_set(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  fc_priv *p = l->priv;
  if (nnt_streq(key, "unit"))
    return nnt_parse_positive_uint(key, value, &p->unit, e);
  if (nnt_streq(key, "lora_rank"))
    return nnt_parse_uint(key, value, &p->lora_rank, e);
  if (nnt_streq(key, "lora_alpha"))
    return nnt_parse_positive_uint(key, value, &p->lora_alpha, e);
  return nnt_weight_props_set(&p->wp, key, value, e);
}

static int fc_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  fc_priv *p = l->priv;
  if (!p->unit)
    return nnt_err_set(e, NNT_ERR_INVAL, "unit: required key is missing");
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "fully_connected takes one input, not %u", ctx->n_in);
  nnt_dim in = ctx->in_dim[0], out = in;
  out.w = p->unit;
  /* every (b, c, h) row is a row of the gemm; the input's length was
   * checked, so this product fits */
  size_t rows = (size_t)in.b * in.c * in.h;
  int rc = nnt_check_gemm_dim(p->unit, "unit", e);
  if (!rc)
    rc = nnt_check_gemm_dim(in.w, "input width", e);
  if (!rc && rows > NNT_GEMM_DIM_MAX)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "the input has %zu rows (batch_size %u x %u x %u), more than the %zu "
                       "a matrix product takes",
                       rows, in.b, in.c, in.h, NNT_GEMM_DIM_MAX);
  if (rc)
    return rc;
  ctx->out_dim[0] = out;
  /* Fans as NNTrainer derives them from the tensor shape: [in, unit] gives
   * (in, unit) unless in == 1, where the shape reads as a vector of unit
   * values and both fans are unit, as they are for the bias. */
  unsigned fan_in = in.w == 1 ? p->unit : in.w, r = p->lora_rank;
  if (r > in.w || r > p->unit)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "key 'lora_rank': %u is more than the input width %u or unit %u", r, in.w,
                       p->unit);
  float l2 = p->wp.l2norm ? p->wp.l2_constant : 0;
  nnt_fctx_add_weight(ctx, "weight", nnt_dim_make(1, 1, in.w, p->unit), p->wp.weight_init,
                      fan_in, p->unit, l2, p->wp.weight_decay, !r);
  p->bias_w = p->lora_w = ~0u;
  if (!p->wp.disable_bias)
    p->bias_w = nnt_fctx_add_weight(ctx, "bias", nnt_dim_make(1, 1, 1, p->unit), p->wp.bias_init,
                                    p->unit, p->unit, 0, p->wp.bias_decay, !r);
  if (r) {
    p->lora_w = nnt_fctx_add_weight(ctx, "loraA", nnt_dim_make(1, 1, in.w, r), NNT_INIT_ZEROS,
                                    in.w, r, l2, p->wp.weight_decay, 1);
    nnt_fctx_add_weight(ctx, "loraB", nnt_dim_make(1, 1, r, p->unit), NNT_INIT_LECUN_NORMAL, r,
                        p->unit, l2, p->wp.weight_decay, 1);
    nnt_dim t = nnt_dim_make(in.b, in.c, in.h, r);
    nnt_fctx_add_scratch(ctx, t, NNT_SCRATCH_ITER); /* X A, for dB */
    nnt_fctx_add_scratch(ctx, t, NNT_SCRATCH_BWD);  /* s dY B^T */
  }
  ctx->flags = NNT_LF_BWD_READS_INPUT | NNT_LF_DERIV_SKIPS_INPUT;
  /* dW = X^T dY by rows of W (input features): see fc_gradient */
  ctx->grad_tiles = r ? 0u : 1u;
  return NNT_OK;
}

static float lora_scale(const fc_priv *p) {
  return p->lora_alpha ? (float)p->lora_alpha / (float)p->lora_rank : 1.0f;
}

/* dT = s dY B^T, the derivative of X A (a backward scratch). */
static int lora_dt(const fc_priv *p, nnt_run_ctx *ctx, size_t rows, size_t n) {
  size_t r = p->lora_rank;
  return ctx->k->gemm(ctx->k, 0, 1, rows, r, n, lora_scale(p), ctx->d_out[0].data, n,
                      ctx->w[p->lora_w + 1].data, n, 0.0f, ctx->scratch[1].data, r);
}

static int fc_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  const nnt_tensor *x = &ctx->in[0];
  nnt_tensor *y = &ctx->out[0];
  size_t rows = nnt_tensor_len(x) / x->dim.w, k = x->dim.w, n = y->dim.w;
  fc_priv *p = l->priv;
  NNT_TRY(ctx->k->gemm(ctx->k, 0, 0, rows, n, k, 1.0f, x->data, k, ctx->w[0].data, n, 0.0f, y->data,
                       n));
  if (p->bias_w != ~0u)
    NNT_TRY(ctx->k->add_row_vec(ctx->k, rows, n, ctx->w[p->bias_w].data, y->data));
  if (p->lora_rank) {
    size_t r = p->lora_rank;
    float *t = ctx->scratch[0].data;
    NNT_TRY(ctx->k->gemm(ctx->k, 0, 0, rows, r, k, 1.0f, x->data, k, ctx->w[p->lora_w].data, r,
                         0.0f, t, r));
    NNT_TRY(ctx->k->gemm(ctx->k, 0, 0, rows, n, r, lora_scale(p), t, r,
                         ctx->w[p->lora_w + 1].data, n, 1.0f, y->data, n));
  }
  return NNT_OK;
}

/* dW's rows [r0, r0 + nr) = X's columns [r0, r0 + nr) times dY, on
 * gemm_rows where the backend has it: the whole gradient then has the
 * bits of its blocks (fused updates, nntrainer/schedule.c fused_rows) */
static int weight_rows(const nnt_run_ctx *ctx, size_t r0, size_t nr, size_t rows, size_t k,
                       size_t n) {
  const nnt_kernels *kt = ctx->k;
  return (kt->gemm_rows ? kt->gemm_rows : kt->gemm)(kt, 1, 0, nr, n, rows, 1.0f,
                                                    ctx->in[0].data + r0, k, ctx->d_out[0].data,
                                                    n, 0.0f, ctx->gw[0].data, n);
}

static int fc_gradient(nnt_layer *l, nnt_run_ctx *ctx) {
  const nnt_tensor *x = &ctx->in[0], *dy = &ctx->d_out[0];
  size_t rows = nnt_tensor_len(x) / x->dim.w, k = x->dim.w, n = dy->dim.w;
  fc_priv *p = l->priv;
  if (p->bias_w != ~0u && ctx->gw[p->bias_w].data)
    NNT_TRY(ctx->k->sum_rows(ctx->k, rows, n, dy->data, 0.0f, ctx->gw[p->bias_w].data));
  if (nnt_grad_tiled(ctx, 0)) {
    /* rows [r0, r0 + t) of dW are X's columns [r0, r0 + t) times dY, each
     * block handed over for its update before the next overwrites it */
    size_t t = ctx->gw[0].dim.h;
    for (size_t r0 = 0; r0 < k; r0 += t) {
      size_t nr = k - r0 < t ? k - r0 : t;
      NNT_TRY(weight_rows(ctx, r0, nr, rows, k, n));
      NNT_TRY(ctx->grad_rows(ctx, 0, r0 * n, nr * n, ctx->gw[0].data));
    }
  } else if (ctx->gw[0].data) {
    NNT_TRY(weight_rows(ctx, 0, k, rows, k, n));
  }
  if (p->lora_rank) {
    size_t r = p->lora_rank;
    /* dB = s (X A)^T dY; dA = X^T dT */
    if (ctx->gw[p->lora_w + 1].data)
      NNT_TRY(ctx->k->gemm(ctx->k, 1, 0, r, n, rows, lora_scale(p), ctx->scratch[0].data, r,
                           dy->data, n, 0.0f, ctx->gw[p->lora_w + 1].data, n));
    if (ctx->gw[p->lora_w].data) {
      NNT_TRY(lora_dt(p, ctx, rows, n));
      NNT_TRY(ctx->k->gemm(ctx->k, 1, 0, k, r, rows, 1.0f, x->data, k, ctx->scratch[1].data, r,
                           0.0f, ctx->gw[p->lora_w].data, r));
    }
  }
  return NNT_OK;
}

static int fc_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  const nnt_tensor *dy = &ctx->d_out[0];
  nnt_tensor *dx = &ctx->d_in[0];
  size_t k = dx->dim.w, rows = nnt_tensor_len(dx) / k, n = dy->dim.w;
  NNT_TRY(ctx->k->gemm(ctx->k, 0, 1, rows, k, n, 1.0f, dy->data, n, ctx->w[0].data, n, 0.0f,
                       dx->data, k));
  fc_priv *p = l->priv;
  if (p->lora_rank) { /* dX += dT A^T */
    size_t r = p->lora_rank;
    NNT_TRY(lora_dt(p, ctx, rows, n));
    NNT_TRY(ctx->k->gemm(ctx->k, 0, 1, rows, k, r, 1.0f, ctx->scratch[1].data, r,
                         ctx->w[p->lora_w].data, r, 1.0f, dx->data, k));
  }
  return NNT_OK;
}

const nnt_layer_ops nnt_layer_fully_connected = {
    .type = "fully_connected",
    .ml_type = 1, /* ML_TRAIN_LAYER_TYPE_FC */
    .priv_size = sizeof(fc_priv),
    .init = fc_init,
    .set_property = fc_set,
    .finalize = fc_finalize,
    .forward = fc_forward,
    .calc_gradient = fc_gradient,
    .calc_derivative = fc_derivative,
    .kops = NNT_KOP_BIT(GEMM) | NNT_KOP_BIT(ADD_ROW_VEC) | NNT_KOP_BIT(SUM_ROWS),
    .opt_kops = NNT_KOP_BIT(GEMM_ROWS),
};
