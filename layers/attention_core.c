/* Scaled dot-product attention per (batch, head) through the kernel
 * table's gemm (attention_core.h says how heads are laid out). */
#include "layers/attention_core.h"
#include "nntrainer/layer.h"

/* Offsets of head (b, h) in Q, K, V, O and the scores. */
#define QOFF(s, b, h) ((b) * (s)->tq * (s)->ldq + (h) * (s)->dk)
#define KOFF(s, b, h) ((b) * (s)->tk * (s)->ldk + (h) * (s)->dk)
#define VOFF(s, b, h) ((b) * (s)->tk * (s)->ldv + (h) * (s)->dv)
#define OOFF(s, b, h) ((b) * (s)->tq * (s)->ldo + (h) * (s)->dv)
#define AOFF(s, b, h) (((b) * (s)->nh + (h)) * (s)->tq * (s)->tk)

int nnt_attn_scores(const nnt_kernels *k, const nnt_attn_shape *s, const float *q,
                    const float *key, float *a) {
  for (size_t b = 0; b < s->nb; b++)
    for (size_t h = 0; h < s->nh; h++)
      NNT_TRY(k->gemm(k, 0, 1, s->tq, s->tk, s->dk, s->scale, q + QOFF(s, b, h), s->ldq,
                        key + KOFF(s, b, h), s->ldk, 0.0f, a + AOFF(s, b, h), s->tk));
  return NNT_OK;
}

int nnt_attn_apply(const nnt_kernels *k, const nnt_attn_shape *s, const float *a,
                   const float *v, float *o) {
  for (size_t b = 0; b < s->nb; b++)
    for (size_t h = 0; h < s->nh; h++)
      NNT_TRY(k->gemm(k, 0, 0, s->tq, s->dv, s->tk, 1.0f, a + AOFF(s, b, h), s->tk,
                        v + VOFF(s, b, h), s->ldv, 0.0f, o + OOFF(s, b, h), s->ldo));
  return NNT_OK;
}

int nnt_attn_bwd_apply(const nnt_kernels *k, const nnt_attn_shape *s, const float *d_o,
                       const float *a, const float *v, float *da, float *dv, float beta_v) {
  for (size_t b = 0; b < s->nb; b++)
    for (size_t h = 0; h < s->nh; h++) {
      NNT_TRY(k->gemm(k, 0, 1, s->tq, s->tk, s->dv, 1.0f, d_o + OOFF(s, b, h), s->ldo,
                        v + VOFF(s, b, h), s->ldv, 0.0f, da + AOFF(s, b, h), s->tk));
      if (dv)
        NNT_TRY(k->gemm(k, 1, 0, s->tk, s->dv, s->tq, 1.0f, a + AOFF(s, b, h), s->tk,
                          d_o + OOFF(s, b, h), s->ldo, beta_v, dv + VOFF(s, b, h), s->ldv));
    }
  return NNT_OK;
}

int nnt_attn_bwd_scores(const nnt_kernels *k, const nnt_attn_shape *s, const float *ds,
                        const float *q, const float *key, float *dq, float *dkey,
                        float beta_k) {
  for (size_t b = 0; b < s->nb; b++)
    for (size_t h = 0; h < s->nh; h++) {
      if (dq)
        NNT_TRY(k->gemm(k, 0, 0, s->tq, s->dk, s->tk, s->scale, ds + AOFF(s, b, h), s->tk,
                          key + KOFF(s, b, h), s->ldk, 0.0f, dq + QOFF(s, b, h), s->ldq));
      if (dkey)
        NNT_TRY(k->gemm(k, 1, 0, s->tk, s->dk, s->tq, s->scale, ds + AOFF(s, b, h), s->tk,
                          q + QOFF(s, b, h), s->ldq, beta_k, dkey + KOFF(s, b, h), s->ldk));
    }
  return NNT_OK;
}
