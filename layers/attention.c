/* attention (NNTrainer's AttentionLayer): inputs query [b, c, tq, d],
 * value [b, c, tk, d] and optionally key (value's shape; absent: the value
 * stands for it), output softmax(Q K^T) V of query's shape. Keys:
 * scaled_dot_product (scores times 1 / sqrt(key width), default false) and
 * causal_mask (score (i, j) hidden for j > i, default false), NNTrainer's
 * both. Each (b, c) is one matrix product (attention_core.c). The
 * attention weights are a scratch kept to the backward, which also reads
 * the inputs; the scores' derivative is a backward-only scratch. */
#include "layers/attention_core.h"
#include "nntrainer/layer.h"

#include <math.h>

typedef struct attn_priv {
  int scaled, causal;
} attn_priv;

static int attn_set(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  attn_priv *p = l->priv;
  if (nnt_streq(key, "scaled_dot_product"))
    return nnt_parse_bool(key, value, &p->scaled, e);
  if (nnt_streq(key, "causal_mask"))
    return nnt_parse_bool(key, value, &p->causal, e);
  return NNT_ERR_NOKEY;
}

static int attn_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  if (ctx->n_in < 2 || ctx->n_in > 3)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "attention takes 2 or 3 inputs (query, value, key), not %u", ctx->n_in);
  nnt_dim q = ctx->in_dim[0], v = ctx->in_dim[1];
  if (q.w != v.w || q.b != v.b || q.c != v.c)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "attention: query %u:%u:%u:%u and value %u:%u:%u:%u must have the same "
                       "batch, channels and width",
                       q.b, q.c, q.h, q.w, v.b, v.c, v.h, v.w);
  if (ctx->n_in == 3) {
    nnt_dim k = ctx->in_dim[2];
    if (k.b != v.b || k.c != v.c || k.h != v.h || k.w != v.w)
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "attention: key %u:%u:%u:%u must have value's shape %u:%u:%u:%u", k.b,
                         k.c, k.h, k.w, v.b, v.c, v.h, v.w);
  }
  int rc = nnt_check_gemm_dim(q.h, "query height", e);
  if (!rc)
    rc = nnt_check_gemm_dim(v.h, "value height", e);
  if (!rc)
    rc = nnt_check_gemm_dim(q.w, "query width", e);
  if (rc)
    return rc;
  if ((uint64_t)q.h * v.h > UINT32_MAX)
    return nnt_err_set(e, NNT_ERR_INVAL, "attention: %u x %u attention weights per matrix are "
                                         "too many", q.h, v.h);
  ctx->out_dim[0] = q;
  nnt_dim wdim = nnt_dim_make(q.b, q.c, q.h, v.h);
  nnt_fctx_add_scratch(ctx, wdim, NNT_SCRATCH_ITER); /* the attention weights */
  nnt_fctx_add_scratch(ctx, wdim, NNT_SCRATCH_BWD);  /* their derivative */
  ctx->flags = NNT_LF_BWD_READS_INPUT;
  return NNT_OK;
}

static nnt_attn_shape attn_shape(const attn_priv *p, const nnt_run_ctx *ctx) {
  nnt_dim q = ctx->in[0].dim, v = ctx->in[1].dim;
  nnt_attn_shape s = {.nb = (size_t)q.b * q.c, .nh = 1, .tq = q.h, .tk = v.h,
                      .dk = q.w, .dv = v.w, .ldq = q.w, .ldk = q.w, .ldv = v.w, .ldo = v.w};
  s.scale = p->scaled ? 1.0f / sqrtf((float)q.w) : 1.0f;
  return s;
}

static const float *key_of(const nnt_run_ctx *ctx) {
  return ctx->n_in == 3 ? ctx->in[2].data : ctx->in[1].data;
}

static int attn_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  attn_priv *p = l->priv;
  nnt_attn_shape s = attn_shape(p, ctx);
  float *a = ctx->scratch[0].data;
  NNT_TRY(nnt_attn_scores(ctx->k, &s, ctx->in[0].data, key_of(ctx), a));
  if (p->causal)
    NNT_TRY(ctx->k->mask_upper(ctx->k, s.nb, s.tq, s.tk, NNT_ATTN_MASKED, a));
  NNT_TRY(ctx->k->softmax_fwd(ctx->k, s.nb * s.tq, s.tk, a, a));
  return nnt_attn_apply(ctx->k, &s, a, ctx->in[1].data, ctx->out[0].data);
}

/* dV = A^T dY (+ dS^T Q when the value is the key); dQ = dS K; dK = dS^T Q,
 * with dS the softmax's derivative of dY V^T (zero where the mask hid a
 * score, as the weight there is 0), times the scale. */
static int attn_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  attn_priv *p = l->priv;
  nnt_attn_shape s = attn_shape(p, ctx);
  const float *a = ctx->scratch[0].data;
  float *da = ctx->scratch[1].data;
  float *dv = ctx->d_in[1].data;
  float *dkey = ctx->n_in == 3 ? ctx->d_in[2].data : dv;
  NNT_TRY(nnt_attn_bwd_apply(ctx->k, &s, ctx->d_out[0].data, a, ctx->in[1].data, da, dv, 0.0f));
  NNT_TRY(ctx->k->softmax_bwd(ctx->k, s.nb * s.tq, s.tk, a, da, da));
  return nnt_attn_bwd_scores(ctx->k, &s, da, ctx->in[0].data, key_of(ctx), ctx->d_in[0].data,
                             dkey, ctx->n_in == 3 ? 0.0f : 1.0f);
}

const nnt_layer_ops nnt_layer_attention = {
    .type = "attention",
    .ml_type = 24, /* ML_TRAIN_LAYER_TYPE_ATTENTION */
    .priv_size = sizeof(attn_priv),
    .set_property = attn_set,
    .finalize = attn_finalize,
    .forward = attn_forward,
    .calc_derivative = attn_derivative,
    .kops = NNT_KOP_BIT(GEMM) | NNT_KOP_BIT(MASK_UPPER) | NNT_KOP_BIT(SOFTMAX_FWD) |
            NNT_KOP_BIT(SOFTMAX_BWD),
};
