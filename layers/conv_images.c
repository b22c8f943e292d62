/* conv2d's whole images on the compute threads (conv_impl.h, conv.c):
 * for layers whose one image's products are too small to split well. */
#include <stdatomic.h>

#include "layers/conv_impl.h"

/* Images of a batch whose ops each run whole on one thread
 * (k->parallel): image b0 + i of the call at range index i, its columns
 * (im2col) in slot i of the forward's scratch. rc keeps the first error. */
typedef struct img_job {
  const conv_priv *p;
  nnt_run_ctx *ctx;
  const nnt_kernels *k;
  size_t patch, plane, in_len, out_len; /* floats: a column, a plane, an image in and out */
  unsigned b0;
  atomic_int rc;
} img_job;

static void img_job_fail(img_job *j, int rc) { conv_job_fail(&j->rc, rc); }

/* One image's forward: im2col (a pointwise layer's columns are the image
 * itself), the product, the bias: nb = 1's ops. */
static void fwd_images(void *arg, size_t i0, size_t i1) {
  img_job *j = arg;
  const nnt_kernels *k = j->k;
  const nnt_conv_geom *g = &j->p->g;
  size_t patch = j->patch, plane = j->plane, in_len = j->in_len, out_len = j->out_len;
  for (size_t i = i0; i < i1 && !atomic_load(&j->rc); i++) {
    const float *x = j->ctx->in[0].data + (j->b0 + i) * in_len;
    float *y = j->ctx->out[0].data + (j->b0 + i) * out_len;
    int rc = NNT_OK;
    if (!is_pointwise(g)) {
      float *col = j->ctx->scratch[0].data + i * patch * plane;
      rc = k->im2col(k, g, 1, x, col);
      x = col;
    }
    if (!rc)
      rc = k->gemm(k, 0, 0, j->p->filters, plane, patch, 1.0f, j->ctx->w[0].data, patch, x, plane,
                   0.0f, y, plane);
    if (!rc && j->ctx->n_w > 1)
      rc = k->add_col_vec(k, j->p->filters, plane, j->ctx->w[1].data, y);
    img_job_fail(j, rc);
  }
}

int nnt_conv_group_fwd(const conv_priv *p, nnt_run_ctx *ctx, unsigned b, unsigned n, float *col,
                       float *gy) {
  const nnt_conv_geom *g = &p->g;
  const nnt_kernels *k = ctx->k;
  size_t patch = (size_t)g->c * g->kh * g->kw, plane = (size_t)g->oh * g->ow;
  float *y = ctx->out[0].data + (size_t)b * p->filters * plane;
  const float *x = ctx->in[0].data + (size_t)b * nnt_conv_img_stride(g);
  if (p->nb == 1)
    gy = y;
  if (!is_pointwise(g)) {
    NNT_TRY(k->im2col(k, g, n, x, col));
    x = col;
  }
  NNT_TRY(k->gemm(k, 0, 0, p->filters, n * plane, patch, 1.0f, ctx->w[0].data, patch, x,
                  n * plane, 0.0f, gy, n * plane));
  if (ctx->n_w > 1)
    NNT_TRY(k->add_col_vec(k, p->filters, n * plane, ctx->w[1].data, gy));
  if (p->nb > 1)
    NNT_TRY(nnt_conv_swap_outer(k, p->filters, n, plane, gy, y));
  return NNT_OK;
}

/* Groups [i0, i1) of a call: group b0 / nb + i in slot i. */
static void fwd_groups(void *arg, size_t i0, size_t i1) {
  img_job *j = arg;
  const conv_priv *p = j->p;
  unsigned batch = j->ctx->in[0].dim.b;
  size_t cols = (size_t)p->nb * j->plane;
  for (size_t i = i0; i < i1 && !atomic_load(&j->rc); i++) {
    unsigned b = j->b0 + (unsigned)i * p->nb, n = batch - b < p->nb ? batch - b : p->nb;
    img_job_fail(j, nnt_conv_group_fwd(p, j->ctx, b, n,
                                       j->ctx->scratch[0].data + i * j->patch * cols,
                                       j->ctx->scratch[2].data + i * p->filters * cols));
  }
}

int nnt_conv_fwd_groups(const conv_priv *p, nnt_run_ctx *ctx, unsigned batch) {
  const nnt_conv_geom *g = &p->g;
  size_t plane = (size_t)g->oh * g->ow;
  img_job j = {p, ctx, ctx->k, (size_t)g->c * g->kh * g->kw, plane, nnt_conv_img_stride(g),
               p->filters * plane, 0, NNT_OK};
  unsigned groups = (batch + p->nb - 1) / p->nb;
  for (unsigned gi = 0; gi < groups && !atomic_load(&j.rc); gi += p->pgr) {
    j.b0 = gi * p->nb;
    if (groups - gi == 1) /* alone: its ops over the threads */
      fwd_groups(&j, 0, 1);
    else
      nnt_kernels_parallel(ctx->k, groups - gi < p->pgr ? groups - gi : p->pgr, fwd_groups, &j);
  }
  return atomic_load(&j.rc);
}

/* fn over the batch in calls of per images (the last may be smaller). */
static int per_images(const conv_priv *p, nnt_run_ctx *ctx, unsigned batch, unsigned per,
                      void (*fn)(void *, size_t, size_t)) {
  const nnt_conv_geom *g = &p->g;
  size_t plane = (size_t)g->oh * g->ow;
  img_job j = {p, ctx, ctx->k, (size_t)g->c * g->kh * g->kw, plane, nnt_conv_img_stride(g),
               p->filters * plane, 0, NNT_OK};
  for (; j.b0 < batch && !atomic_load(&j.rc); j.b0 += per)
    nnt_kernels_parallel(ctx->k, batch - j.b0 < per ? batch - j.b0 : per, fn, &j);
  return atomic_load(&j.rc);
}

/* One image's derivative: dcol = W^T dY (a pointwise layer's dcol is dX;
 * else, pnb > 1: one block, no gathered dY, dcol in its slot of the
 * backward's scratch), folded into dX. */
static void deriv_images(void *arg, size_t i0, size_t i1) {
  img_job *j = arg;
  const nnt_kernels *k = j->k;
  const nnt_conv_geom *g = &j->p->g;
  size_t patch = j->patch, plane = j->plane, in_len = j->in_len;
  int pw = is_pointwise(g);
  for (size_t i = i0; i < i1 && !atomic_load(&j->rc); i++) {
    float *dx = j->ctx->d_in[0].data + (j->b0 + i) * in_len;
    float *col = pw ? dx : j->ctx->scratch[1].data + i * patch * plane;
    int rc = k->gemm(k, 1, 0, patch, plane, j->p->filters, 1.0f, j->ctx->w[0].data, patch,
                     j->ctx->d_out[0].data + (j->b0 + i) * j->out_len, plane, 0.0f, col, plane);
    if (!rc && !pw)
      rc = nnt_conv_fold(k, g, 1, col, dx, in_len);
    img_job_fail(j, rc);
  }
}

int nnt_conv_fwd_images(const conv_priv *p, nnt_run_ctx *ctx, unsigned batch, unsigned per) {
  return per_images(p, ctx, batch, per, fwd_images);
}

int nnt_conv_deriv_images(const conv_priv *p, nnt_run_ctx *ctx, unsigned batch, unsigned per) {
  return per_images(p, ctx, batch, per, deriv_images);
}
