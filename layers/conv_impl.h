/* conv2d's and conv1d's state (conv.c) and their whole-image jobs on the
 * compute threads (conv_images.c). */
#ifndef NNT_CONV_IMPL_H
#define NNT_CONV_IMPL_H

#include "nntrainer/layer.h"

typedef struct conv_priv {
  unsigned filters;
  nnt_window_props win;
  nnt_weight_props wp;
  nnt_conv_geom g;
  unsigned nb;  /* images per forward gemm (1: no permute scratch) */
  unsigned wnb; /* images per forward conv_wino call where it runs per group (>= nb) */
  unsigned bnb; /* images per backward group (1: dY not gathered) */
  unsigned bc;  /* input channels per backward block (g.c: one block) */
  unsigned dsc; /* the derivative's own scratch (deriv_scratch); ~0u: none */
  unsigned dnb; /* images per group in that scratch */
  unsigned fwd4; /* the forward's groups and scratch are F(4x4, 3x3)'s (wino4_tiles) */
  unsigned pnb;  /* nb = 1: images whose columns the forward's scratch holds (CONV_PAR_IMAGES) */
} conv_priv;

/* Whether im2col of one image is the image itself (conv.c). */
static inline int is_pointwise(const nnt_conv_geom *g) {
  return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && !g->pt && !g->pb && !g->pl &&
         !g->pr;
}

/* dX of n whole images (in_len floats apart from dx) = the columns col
 * folded back: col2im_set where the backend has it, else a fill and
 * col2im (the same bits). */
static inline int nnt_conv_fold(const nnt_kernels *k, const nnt_conv_geom *g, size_t n,
                                const float *col, float *dx, size_t in_len) {
  if (k->col2im_set)
    return k->col2im_set(k, g, n, col, dx);
  int rc = k->fill(k, n * in_len, 0.0f, dx);
  return rc ? rc : k->col2im(k, g, n, col, dx);
}

/* The forward of the batch's images (nb = 1: im2col into slot i of
 * scratch 0 unless pointwise, the product, the bias), and the derivative
 * (pointwise: dX = W^T dY; else dcol into slot i of scratch 1, folded
 * into dX), each image whole on one thread (k->parallel), per images a
 * call; the first failing op's code. */
int nnt_conv_fwd_images(const conv_priv *p, nnt_run_ctx *ctx, unsigned batch, unsigned per);
int nnt_conv_deriv_images(const conv_priv *p, nnt_run_ctx *ctx, unsigned batch, unsigned per);

#endif
