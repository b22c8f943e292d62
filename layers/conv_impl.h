/* conv2d's and conv1d's state (conv.c) and their whole-image jobs on the
 * compute threads (conv_images.c). */
#ifndef NNT_CONV_IMPL_H
#define NNT_CONV_IMPL_H

#include <stdatomic.h>

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
  unsigned dsc; /* the derivative's own scratch (nnt_conv_deriv_scratch); ~0u: none */
  unsigned dnb; /* images per group in that scratch */
  unsigned dwino; /* that scratch holds conv_wino's filter blocks (nnt_conv_deriv_scratch) */
  unsigned fwd4; /* the forward's groups and scratch are F(4x4, 3x3)'s (wino4_tiles) */
  unsigned lean; /* the forward's scratch holds conv_wino's and not one image's columns */
  unsigned pnb;  /* nb = 1: images whose columns the forward's scratch holds (CONV_PAR_IMAGES) */
  unsigned pgr;  /* nb > 1: groups whose columns and outputs it holds (CONV_PAR_GROUPS) */
  unsigned gparts; /* the weight gradient's parts (conv_chan_parts; 1 on a GPU) */
  unsigned hsc; /* the weight gradient's scratch in CONV_HALVES parts (below); ~0u: none */
  unsigned hnb; /* images per product there */
  unsigned hdw; /* each part there one conv_bwd_w (conv_sub_dw): no columns */
} conv_priv;

/* A backward block's columns (bc x kh x kw) where the room allows more:
 * wider blocks only took more scratch (ResNet-18's res4a_c1 gradient
 * 95-96 GFLOP/s at 576 and at 1152 columns, one thread), narrower ones
 * ran slower (94.4 and 82.4 GFLOP/s for its gradient and derivative at
 * 288; docs/performance.md). */
#define CONV_BWD_BLOCK_COLS 576
/* The forward and the derivative take conv_wino (a 3x3 window, stride 1)
 * for at least CONV_WINO_MIN_C input channels and filters when the column
 * scratch holds what it needs: measured (docs/performance.md), 24->24 and
 * 32->32 at 32x32 gain 1.5x, 16->32 at 14x14 (the Fashion-MNIST CNN's c2)
 * loses (84 against 119 GFLOP/s), 32->16 there is even. */
#define CONV_WINO_MIN_C 24
/* The forward runs conv_wino once per group of wnb images (the groups the
 * in-place forward stages too): with fewer tiles than this per group its
 * 16 products are too narrow to beat im2col's one (ResNet-18's stage 2,
 * 64 tiles an image: 182 GFLOP/s against 212 on im2col, one thread; 4
 * images a group: 259-270, docs/performance.md). */
#define CONV_WINO_FWD_MIN_TILES 256
/* ... except for a wide layer (at least CONV_WINO_WIDE_C channels and
 * filters), whose products [filters, channels] x [channels, tiles] reuse
 * each filter enough at NNT_WINO_MIN_TILES tiles: ResNet-18's stage 4
 * (512 channels, 4 tiles an image, 128 a batch of 32): 247-266 GFLOP/s on
 * Winograd against 168-186 on im2col, one thread; 229 at 64 tiles
 * (docs/performance.md). */
#define CONV_WINO_WIDE_C 256
/* Whether the layer is wide (CONV_WINO_WIDE_C), and the fewest tiles a
 * forward conv_wino call may take. */
static inline int conv_wino_wide(const conv_priv *p) {
  return p->g.c >= CONV_WINO_WIDE_C && p->filters >= CONV_WINO_WIDE_C;
}
static inline size_t conv_wino_fwd_min_tiles(const conv_priv *p) {
  return conv_wino_wide(p) ? NNT_WINO_MIN_TILES : CONV_WINO_FWD_MIN_TILES;
}

/* conv_scratch.c, for conv_finalize: the backward's groups and channel
 * blocks for room floats of scratch (bnb, bc); the forward's Winograd
 * scratch in floats (0: im2col's columns; sets wnb and fwd4), frozen: a
 * frozen layer on the CPU; the backward's (0: its blocks' columns); the
 * derivative's own (0: none; sets dnb and dwino). */
void nnt_conv_backward_blocks(conv_priv *p, size_t room);
size_t nnt_conv_wino_fwd_scratch(conv_priv *p, nnt_dim in, int frozen);
size_t nnt_conv_wino_bwd_scratch(const conv_priv *p, nnt_dim in);
size_t nnt_conv_deriv_scratch(conv_priv *p, nnt_dim in, int trainable);

/* The forward takes conv_fwd for at most CONV_DIRECT_MAX_C input
 * channels, a patch of at least CONV_DIRECT_MIN_PATCH values and at least
 * CONV_DIRECT_MIN_FILTERS filters: chosen by measurement
 * (docs/performance.md; LeNet-5's c2 gains, its c1, the Fashion-MNIST
 * CNN's c1 and conv-BN-ReLU's c1 lose). */
#define CONV_DIRECT_MAX_C 8
#define CONV_DIRECT_MIN_PATCH 64
#define CONV_DIRECT_MIN_FILTERS 16

/* The forward and the derivative also take conv_fwd and conv_bwd_x where
 * the CPU's row kernel does (nnt_conv_rows_take) and the layer has at most
 * CONV_ROWS_MAX_C input channels (more go to Winograd or im2col): measured
 * against im2col and gemm on LeNet-5's, the Fashion-MNIST CNN's and
 * conv-BN-ReLU's first layers and the second ones of the first two
 * (docs/performance.md, seventeenth round). */
#define CONV_ROWS_MAX_C 16
static inline int conv_rows_dw(const conv_priv *p) {
  return p->g.c <= CONV_ROWS_MAX_C && nnt_conv_rows_dw_take(&p->g, p->filters);
}
static inline int conv_rows(const conv_priv *p, int deriv) {
  const nnt_conv_geom *g = &p->g;
  return g->c <= CONV_ROWS_MAX_C && (deriv ? nnt_conv_rows_take(g, p->filters, g->c)
                                           : nnt_conv_rows_take(g, g->c, p->filters));
}

/* A subsampling 1x1 layer (ResNet's shortcuts) runs its forward on the
 * CPU's own product in conv_fwd where that takes it on this machine
 * (nnt_conv_sub_runs); its weight gradient on im2col and gemm, and its
 * derivative on gemm and col2im, but where conv_sub_dw and conv_sub_dx
 * say (our products measured no faster on AVX2, docs/performance.md). */
static inline int conv_sub(const conv_priv *p) {
  return nnt_conv_sub_take(&p->g, p->filters) && nnt_conv_sub_runs();
}
/* Its derivative runs on the CPU's own product (conv_bwd_x) where
 * nnt_conv_sub_dx_runs: on AVX-512 CPUs. */
static inline int conv_sub_dx(const conv_priv *p) {
  return nnt_conv_sub_dx_take(&p->g, p->filters) && nnt_conv_sub_dx_runs();
}
/* And its weight gradient (conv_bwd_w) there too: in the halves below,
 * each half one call (hdw). */
static inline int conv_sub_dw(const conv_priv *p) {
  return nnt_conv_sub_dw_take(&p->g, p->filters) && nnt_conv_sub_dx_runs();
}

/* A downsampling 3x3 layer (stride 2) runs its forward, derivative and
 * weight gradient on the CPU's direct kernels in conv_fwd, conv_bwd_x and
 * conv_bwd_w where those take it on this machine (nnt_conv_str_runs:
 * AVX-512; measured against im2col, gemm and col2im,
 * docs/performance.md). */
static inline int conv_str(const conv_priv *p) {
  return nnt_conv_str_take(&p->g, p->filters) && nnt_conv_str_runs();
}
static inline int conv_str_dx(const conv_priv *p) {
  return nnt_conv_str_dx_take(&p->g, p->filters) && nnt_conv_str_runs();
}
static inline int conv_str_dw(const conv_priv *p) {
  return nnt_conv_str_dw_take(&p->g, p->filters) && nnt_conv_str_runs();
}

/* The weight gradient runs a group of images in CONV_CHAN_PARTS parts,
 * each a run of the channels in blocks of bc / CONV_CHAN_PARTS, where a
 * part's block has at least CONV_CHAN_MIN_COLS columns (taps each
 * channel); else in blocks of bc split inside each op
 * (conv_backward.c). Measured (docs/performance.md, eighteenth round):
 * ResNet-18's shortcuts (32 to 64 columns a part) ran slower in parts on
 * one thread and no faster on two. */
#define CONV_CHAN_PARTS 2
#define CONV_CHAN_MIN_COLS 96
static inline unsigned conv_chan_parts(unsigned bc, unsigned taps) {
  return bc / CONV_CHAN_PARTS * taps < CONV_CHAN_MIN_COLS ? 1 : CONV_CHAN_PARTS;
}

/* The weight gradient of a subsampling 1x1 layer (ResNet's shortcuts,
 * whose products are too narrow to split well: conv_chan_parts 1) in
 * CONV_HALVES fixed parts of the batch, each on one thread (k->parallel)
 * in its own region of a scratch of its own (hsc): groups of hnb images
 * (their products CONV_HALF_COLS deep or more), their columns and, where
 * hnb > 1, their gathered dY (with hdw: no region, the half's images in
 * one conv_bwd_w); part 0 sums into dW, the others into their own partial
 * dW, added into dW in order after. The parts are the same at
 * any thread count: so are the bits. Against the channel blocks split
 * inside each op, on two threads of an Emerald Rapids (ratios to a bare
 * sgemm): ResNet-18's res2a_sc 0.55-0.72 -> 0.74-1.01, res3a_sc
 * 0.51-0.65 -> 0.74-0.89, res4a_sc 0.51-0.63 -> 0.71-0.86; on one thread
 * within the runs' spread but res4a_sc's, 0.75-0.79 -> 0.69-0.75
 * (docs/performance.md, thirty-fourth round; groups of 64 or 128 columns
 * measured the same). */
#define CONV_HALVES 2
#define CONV_HALF_COLS 256
/* The floats of a part's region of that scratch (hnb images' columns,
 * and their dY where hnb > 1); the partial dW of parts 1 and up follow
 * the CONV_HALVES regions. */
static inline size_t conv_half_region(const conv_priv *p) {
  size_t plane = (size_t)p->g.oh * p->g.ow;
  if (p->hdw)
    return 0;
  return ((size_t)p->g.c + (p->hnb > 1 ? p->filters : 0)) * p->hnb * plane;
}

/* A job's first failing op's code kept in *first (its parts run on
 * several threads). */
static inline void conv_job_fail(atomic_int *first, int rc) {
  int none = NNT_OK;
  if (rc)
    atomic_compare_exchange_strong(first, &none, rc);
}

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

/* conv.c's helpers that the backward (conv_backward.c) shares: [n][a][c]
 * <-> [a][n][c] (images and filters swap: permute3's 1,0,2); whether
 * conv_wino (or conv_wino_dw: have, the table has it) computes y (filters)
 * from x (c channels, geometry g) of batch images with the scratch s in
 * passes of slices; the derivative's geometry as a convolution of dY. */
int nnt_conv_swap_outer(const nnt_kernels *k, unsigned n, unsigned a, size_t c, const float *x,
                        float *y);
int nnt_conv_use_wino(int have, const nnt_conv_geom *g, size_t c, size_t filters,
                      unsigned batch, const nnt_tensor *s, unsigned slices);
nnt_conv_geom nnt_conv_wino_dgeom(const conv_priv *p);
/* The layer's calc_gradient and calc_derivative (conv_backward.c). */
int nnt_conv_gradient(nnt_layer *l, nnt_run_ctx *ctx);
int nnt_conv_derivative(nnt_layer *l, nnt_run_ctx *ctx);

/* The forward of the batch's images (nb = 1: im2col into slot i of
 * scratch 0 unless pointwise, the product, the bias), and the derivative
 * (pointwise: dX = W^T dY; else dcol into slot i of scratch 1, folded
 * into dX), each image whole on one thread (k->parallel), per images a
 * call; the first failing op's code. */
int nnt_conv_fwd_images(const conv_priv *p, nnt_run_ctx *ctx, unsigned batch, unsigned per);
/* The forward of the n images from image b as one group of im2col (into
 * col unless pointwise), product (into gy where nb > 1, else y), bias
 * and the permute into y (nb > 1); and the forward of the batch in its
 * groups of nb images, pgr groups at a time, each whole on one thread
 * (k->parallel) in its own slot of scratch 0 and 2, a last lone group
 * split over the threads as conv_forward's loop splits every group. */
int nnt_conv_group_fwd(const conv_priv *p, nnt_run_ctx *ctx, unsigned b, unsigned n, float *col,
                       float *gy);
int nnt_conv_fwd_groups(const conv_priv *p, nnt_run_ctx *ctx, unsigned batch);
int nnt_conv_deriv_images(const conv_priv *p, nnt_run_ctx *ctx, unsigned batch, unsigned per);

#endif
