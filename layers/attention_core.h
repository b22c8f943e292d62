/* Scaled dot-product attention over per-(batch, head) views of projected
 * tensors, shared by the attention and multi_head_attention layers. Every
 * product is one gemm of the kernel table with offsets and leading
 * dimensions, so nothing is transposed or copied: head h of batch b of Q
 * starts at q + b * tq * ldq + h * dk (K: k + b * tk * ldk + h * dk, V and
 * O the same with dv), and its scores at a + (b * nh + h) * tq * tk. */
#ifndef NNT_ATTENTION_CORE_H
#define NNT_ATTENTION_CORE_H

#include "nntrainer/compute/kernels.h"

/* What NNTrainer adds to the scores a causal mask hides (exp of it is 0). */
#define NNT_ATTN_MASKED (-1e10f)

typedef struct nnt_attn_shape {
  size_t nb, nh;          /* batches (samples x channels) and heads */
  size_t tq, tk;          /* query and key/value lengths */
  size_t dk, dv;          /* per-head widths of Q, K and of V, O */
  size_t ldq, ldk, ldv, ldo; /* row strides of Q, K, V, O and their derivatives */
  float scale;            /* the scores' factor (1 / sqrt(dk), or 1) */
} nnt_attn_shape;

/* a = scale * Q K^T per head. */
int nnt_attn_scores(const nnt_kernels *k, const nnt_attn_shape *s, const float *q,
                    const float *key, float *a);
/* o = A V per head. */
int nnt_attn_apply(const nnt_kernels *k, const nnt_attn_shape *s, const float *a,
                   const float *v, float *o);
/* da = dO V^T; dv = beta_v * dv + A^T dO (dv NULL: not computed). */
int nnt_attn_bwd_apply(const nnt_kernels *k, const nnt_attn_shape *s, const float *d_o,
                       const float *a, const float *v, float *da, float *dv, float beta_v);
/* dq = scale * dS K; dkey = beta_k * dkey + scale * dS^T Q (either NULL:
 * not computed). */
int nnt_attn_bwd_scores(const nnt_kernels *k, const nnt_attn_shape *s, const float *ds,
                        const float *q, const float *key, float *dq, float *dkey,
                        float beta_k);

#endif
