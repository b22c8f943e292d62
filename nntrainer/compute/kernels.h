/* The kernel table: every computation a layer or optimizer does goes through
 * one of these entries, so each layer runs on every backend. All matrices are
 * row-major float32. Pointers may alias only where an entry says so. */
#ifndef NNT_KERNELS_H
#define NNT_KERNELS_H

#include <float.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "nntrainer/common.h"

/* Element-wise activation functions. */
typedef enum nnt_act {
  NNT_ACT_NONE = 0, /* identity */
  NNT_ACT_RELU,
  NNT_ACT_LEAKY_RELU, /* slope alpha (NNTrainer: 0.01) */
  NNT_ACT_SIGMOID,
  NNT_ACT_TANH,
  NNT_ACT_SOFTMAX, /* over the last axis; handled by softmax_* entries */
  NNT_ACT_SWISH,   /* x * sigmoid(x) */
  NNT_ACT_GELU,    /* exact: x * Phi(x) */
  NNT_ACT_ELU,     /* alpha (default 1) */
  NNT_ACT_SELU,
  NNT_ACT_SOFTPLUS,
  NNT_ACT_MISH,
  NNT_ACT__COUNT
} nnt_act;

/* Name <-> enum ("relu", "leaky_relu", ..., "none"). Case-insensitive.
 * @return NNT_OK or NNT_ERR_INVAL for an unknown name. */
int nnt_act_from_name(const char *name, nnt_act *out);
const char *nnt_act_name(nnt_act a);
/* 1 when the backward pass needs only the output y (relu, leaky_relu,
 * sigmoid, tanh, softmax, none); 0 when it needs the input x. */
int nnt_act_bwd_needs_output_only(nnt_act a);
/* 1 when the backward pass needs only whether y > 0 (relu, leaky_relu):
 * act_mask's bits then stand in for y (act_bwd_mask). */
int nnt_act_bwd_sign_only(nnt_act a);
/* The 32-bit words of a mask of n bits (act_mask), each in one float slot
 * of a tensor. */
static inline size_t nnt_mask_words(size_t n) { return n / 32 + (n % 32 != 0); }

/* The geometry of a convolution or pooling window over one image. */
typedef struct nnt_conv_geom {
  unsigned c, h, w;          /* input channels and size */
  unsigned kh, kw;           /* window */
  unsigned sh, sw;           /* stride */
  unsigned dh, dw;           /* dilation */
  unsigned pt, pb, pl, pr;   /* padding: top, bottom, left, right */
  unsigned oh, ow;           /* output size */
  unsigned cs;               /* im2col, col2im: channels per image of x and dx
                              * (0: c); c < cs is a block of channels, with x
                              * and dx at the block's first (pooling: 0) */
  unsigned gathered;         /* conv_fwd: x holds only the positions the window
                              * reads, [c][oh][ow] an image (the CPU's
                              * subsampling product takes it; 0: the input) */
} nnt_conv_geom;

/* The floats from one image of x (or dx) to the next in im2col, col2im. */
static inline size_t nnt_conv_img_stride(const nnt_conv_geom *g) {
  return (size_t)(g->cs ? g->cs : g->c) * g->h * g->w;
}

/* The largest m, n, k or leading dimension gemm takes (OpenBLAS's
 * cblas_sgemm takes int); layers refuse larger products at finalize. */
#define NNT_GEMM_DIM_MAX ((size_t)INT_MAX)
/* The rows of gemm_rows' blocks (below): a multiple of every row quantum
 * of the CPU's kernels (nnt_cpu_blas_row_quantum: 8 and 24). */
#define NNT_GEMM_ROW_BLOCK 48

/* conv_wino: the geometry it takes (a 3x3 window, stride 1, dilation 1,
 * padding at most 2 on each side, every channel of the images) and the
 * scratch it needs, in floats, for c channels, f filters and t 2x2 tiles
 * (n images of ceil(oh / 2) x ceil(ow / 2)) where conv2d plans its least:
 * NNT_WINO_MIN_SLICES of the 16 slices of the transformed filters [f, c],
 * of the transformed input and of the products for min(t,
 * NNT_WINO_MIN_TILES) tiles (cpu_winograd.c; more scratch, more slices and
 * tiles at a time). */
#define NNT_WINO_MIN_TILES 64
#define NNT_WINO_MIN_SLICES 8
/* conv_wino without flip keeps each chunk of tiles to one image when an
 * image has at least this many tiles: a call over n images then computes
 * what calls over any groups of them do, bit for bit (conv2d's forward
 * makes one call over the batch where its in-place forward makes one per
 * group). */
#define NNT_WINO_IMAGE_TILES 128
static inline int nnt_wino_geom_ok(const struct nnt_conv_geom *g) {
  return g->kh == 3 && g->kw == 3 && g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 &&
         g->pt <= 2 && g->pb <= 2 && g->pl <= 2 && g->pr <= 2 && (!g->cs || g->cs == g->c) &&
         g->oh + 2 == g->h + g->pt + g->pb && g->ow + 2 == g->w + g->pl + g->pr;
}
/* The CPU's conv_wino takes F(4x4, 3x3) instead (cpu_winograd4.c) where
 * the scratch holds nnt_wino4_scratch (c channels, f filters, t tiles):
 * all 36 slices of the transformed filters, and of the transformed input
 * and the products for min(t, NNT_WINO4_MAX_TILES) tiles, t one image's
 * 4x4 tiles where an image has at least NNT_WINO4_IMAGE_TILES (its chunks
 * then keep to one image, so the bits of a call over n images are again
 * those of calls over any groups of them), else those of whole images, at
 * least NNT_WINO4_MIN_CHUNK (chunks of as many images as the scratch
 * holds, as even as they go over the call's: conv2d's two forwards call
 * over the same groups), except where an image has NNT_WINO_IMAGE_TILES
 * 2x2 tiles or more (F(2, 3) keeps to one image there). */
#define NNT_WINO4_IMAGE_TILES 64
/* conv_wino's flip may carry this (see there). */
#define NNT_WINO_KEEP_U 2
#define NNT_WINO4_MIN_CHUNK 64
#define NNT_WINO4_MAX_TILES 256
size_t nnt_wino4_scratch(size_t c, size_t f, size_t tiles);
/* Below that least conv_wino (not conv_wino_dw) takes passes of
 * NNT_WINO_FEWEST_SLICES slices (each transforming the filters again),
 * slower than im2col and gemm at the same scratch (layers/conv.c
 * deriv_scratch: conv2d no longer asks for it). */
#define NNT_WINO_FEWEST_SLICES 4
/* The scratch for passes of k slices with r chunks of min(t,
 * NNT_WINO_MIN_TILES) tiles at once (see cpu_winograd.c wino_plan). */
static inline size_t nnt_wino_scratch(size_t k, size_t r, size_t c, size_t f, size_t t) {
  if (t > NNT_WINO_MIN_TILES)
    t = NNT_WINO_MIN_TILES;
  return k * (c * f + r * (c + f) * t);
}
static inline size_t nnt_wino_min_scratch(size_t c, size_t f, size_t t) {
  return nnt_wino_scratch(NNT_WINO_MIN_SLICES, 1, c, f, t);
}

/* conv_wino in filter blocks (cpu_winograd.c): where U's 16 slices of
 * every filter do not fit but the input transform of all t tiles (at most
 * NNT_WINO_FB_MAX_TILES) and U and M of NNT_WINO_FB_MIN filters do, one
 * pass over the input and the output, fb filters a block. */
#define NNT_WINO_FB_MIN 32
#define NNT_WINO_FB_MAX_TILES 256
static inline size_t nnt_wino_fb_scratch(size_t c, size_t t, size_t fb) {
  return 16 * (c * t + fb * (c + t));
}
/* The blocks of f filters over c channels and t tiles in len floats of
 * scratch: 1 with nb blocks of at most fb filters (as few as fit, then as
 * even as they go), 0 where len has no room for NNT_WINO_FB_MIN filters.
 * The kernel cuts its blocks with it, and a layer sizes its scratch with
 * it. */
static inline int nnt_wino_fb_blocks(size_t c, size_t f, size_t t, size_t len, size_t *fb,
                                     size_t *nb) {
  size_t v = 16 * c * t, per = 16 * (c + t);
  if (!t || t > NNT_WINO_FB_MAX_TILES || v >= len || (len - v) / per < NNT_WINO_FB_MIN)
    return 0;
  size_t most = (len - v) / per;
  *nb = (f + most - 1) / most;
  *fb = (f + *nb - 1) / *nb;
  return 1;
}

/* The largest patch (c * kh * kw) conv_fwd takes. */
#define NNT_CONV_DIRECT_MAX_PATCH 512
/* The most in_c * k * k (source channels by window) of the CPU's row
 * kernel (below). */
#define NNT_CONV_ROWS_MAX_TAPS 1024

/* Whether the CPU's conv_fwd (in_c = g->c, out_c = filters) and
 * conv_bwd_x (in_c = filters, out_c = g->c) take g with the row kernel
 * (cpu_conv_rows.c): stride 1, dilation 1, a 3x3 or 5x5 window, at most
 * NNT_CONV_ROWS_MAX_TAPS, and out_c filling at least 3/4 of its blocks of
 * 8 channels (6 where 6 divide out_c and 8 do not; one channel a block of
 * 1). Where they do, no other limit of those entries applies. */
static inline int nnt_conv_rows_take(const struct nnt_conv_geom *g, size_t in_c, size_t out_c) {
  size_t ob = out_c == 1 ? 1 : out_c % 8 && out_c % 6 == 0 ? 6 : 8;
  return g && (!g->cs || g->cs == g->c) && g->sh == 1 && g->sw == 1 && g->dh == 1 &&
         g->dw == 1 && g->kh == g->kw && (g->kh == 3 || g->kh == 5) && out_c &&
         in_c * g->kh * g->kw <= NNT_CONV_ROWS_MAX_TAPS &&
         4 * out_c >= 3 * ob * ((out_c + ob - 1) / ob);
}
/* The most input channels of the CPU's subsampling 1x1 forward
 * (cpu_conv_sub.c: a packed panel of 16 positions of each on the
 * stack). */
#define NNT_CONV_SUB_MAX_C 512
/* Whether the CPU's conv_fwd takes g with its subsampling 1x1 product
 * (cpu_conv_sub.c): a 1x1 window with a stride (ResNet's shortcuts), no
 * padding, at most NNT_CONV_SUB_MAX_C channels. Where it does, no other
 * limit of conv_fwd applies. */
static inline int nnt_conv_sub_take(const struct nnt_conv_geom *g, size_t filters) {
  return g && (!g->cs || g->cs == g->c) && g->kh == 1 && g->kw == 1 &&
         (g->sh > 1 || g->sw > 1) && !g->pt && !g->pb && !g->pl && !g->pr && g->c &&
         g->c <= NNT_CONV_SUB_MAX_C && filters;
}
/* 1 where a layer should hand what nnt_conv_sub_take takes to conv_fwd on
 * this machine: its widest code path is AVX2 or AVX-512 (measured against
 * im2col and OpenBLAS on both, docs/performance.md; without AVX2, im2col
 * and the BLAS stay). */
int nnt_conv_sub_runs(void);
/* The largest output plane (oh * ow) of the CPU's strided forward
 * (cpu_conv_str.c: a part turns an image's sums over on the stack). */
#define NNT_CONV_STR_MAX_PLANE 512
/* Whether the CPU's conv_fwd takes g with its strided kernel
 * (cpu_conv_str.c): a stride of 2, dilation 1, a window 3 wide (and up to
 * 48 high), at least 16 channels, filters a multiple of 16, output rows
 * at least 8 wide, at most NNT_CONV_STR_MAX_PLANE positions, and padding
 * that only a row's first position reaches (ResNet's downsampling 3x3
 * layers). Where it does, no other limit of conv_fwd applies; and 1 where
 * a layer should hand it those (an AVX-512 CPU: measured against im2col
 * and gemm, docs/performance.md). */
int nnt_conv_str_take(const struct nnt_conv_geom *g, size_t filters);
int nnt_conv_str_runs(void);
/* The largest input plane (h * w) of the CPU's strided derivative (its
 * turn into dX's layout takes half a block of the plane on the stack:
 * 64 KiB, beside its packed filters' 72 KiB). */
#define NNT_CONV_STR_MAX_DX_PLANE 1024
/* Whether the CPU's conv_bwd_x takes g with its strided kernel
 * (cpu_conv_str.c): a stride of 2, dilation 1, a window 3 wide (and up to
 * 48 high), channels a multiple of 16, at least 16 filters, input rows at
 * least 16 wide, at most NNT_CONV_STR_MAX_DX_PLANE input positions, and
 * padding that only the first and the last of a row's input columns of
 * one parity reach. Where it does, no other limit of conv_bwd_x applies;
 * nnt_conv_str_runs says where a layer should hand it those. */
int nnt_conv_str_dx_take(const struct nnt_conv_geom *g, size_t filters);
/* The largest output plane of the CPU's strided weight gradient (dY laid
 * out [position][filter] on the stack: 32 KiB). */
#define NNT_CONV_STR_MAX_DW_PLANE 256
/* Whether the CPU's conv_bwd_w takes g with its strided kernel
 * (cpu_conv_str.c): a 3x3 window with a stride of 2, dilation 1, at least
 * 16 channels, filters a multiple of 16, output rows at least 8 wide and
 * at most NNT_CONV_STR_MAX_DW_PLANE output positions. Where it does, no
 * other limit of conv_bwd_w applies; nnt_conv_str_runs says where a layer
 * should hand it those. */
int nnt_conv_str_dw_take(const struct nnt_conv_geom *g, size_t filters);
/* Whether the CPU's conv_bwd_x takes g with its subsampling derivative
 * (cpu_conv_sub.c): what nnt_conv_sub_take takes, at stride 2 with an
 * input twice the output's rows and columns, whose output rows fill
 * tiles of 16 positions evenly (ResNet's shortcuts); and 1 where a layer
 * should hand it those (an AVX-512 CPU: measured against gemm and col2im,
 * docs/performance.md). */
int nnt_conv_sub_dx_take(const struct nnt_conv_geom *g, size_t filters);
int nnt_conv_sub_dx_runs(void);
/* Whether the CPU's conv_bwd_w takes g with its subsampling weight
 * gradient (cpu_conv_sub.c): what nnt_conv_sub_take takes, with an input
 * plane of at most INT32_MAX / 16 values. Where it does, no other limit
 * of conv_bwd_w applies; nnt_conv_sub_dx_runs says where a layer should
 * hand it those (an AVX-512 CPU: measured against im2col and gemm,
 * docs/performance.md). */
int nnt_conv_sub_dw_take(const struct nnt_conv_geom *g, size_t filters);
/* The narrowest and the widest kernel and the most filters x kh x kw
 * that conv_bwd_x and conv_bwd_w take (beside nnt_conv_rows_take's and
 * nnt_conv_rows_dw_take's). */
#define NNT_CONV_BWD_MIN_KW 4
#define NNT_CONV_BWD_MAX_KW 5
#define NNT_CONV_BWD_MAX_FTAPS 1024

/* The most floats of a band of one image's dY laid out for a block of
 * filters (a band holds at least one output row: at most 128 columns at
 * 32 filters a block), and of one padded input plane, in the CPU's
 * filter-lane weight gradient (both on the stack of each part: 34 KiB).
 * The plane's bound takes a 64x64 image with a 3x3 window (66 x 66 =
 * 4,356 floats): the first layers of conv-BN-ReLU (3 -> 32 channels) and
 * ResNet-18 (3 -> 64, 32x32), which at 1,024 went to im2col and products
 * of 27 columns that one thread ran alone; their gradients 8.2-8.3 ->
 * 6.5-6.8 ms and 3.35-3.45 -> 2.44-2.57 ms at one thread, 5.6-6.5 -> 3.7-3.8
 * and 3.45-3.55 -> 1.87-1.93 at two (docs/performance.md, twenty-fourth
 * round). */
#define NNT_CONV_ROWS_DW_MAX_DY 4096
#define NNT_CONV_ROWS_DW_MAX_PAD 4608
/* The most output positions of a 5x5 window's plane it takes: LeNet-5's
 * c1 (784, one block of 6 filters: one part) ran slower on two threads
 * than on the row-vector kernel, which splits its filters. */
#define NNT_CONV_ROWS_DW_MAX_PLANE5 512

/* Whether the CPU's conv_bwd_w takes g and filters with its filter-lane
 * kernel (cpu_conv_rows_dw.c): stride 1, dilation 1, a 3x3 or 5x5
 * window, an output row whose dY fills at most NNT_CONV_ROWS_DW_MAX_DY
 * floats in blocks of 32 filters (3x3) or 16 (5x5), at most
 * NNT_CONV_ROWS_DW_MAX_PLANE5 positions for 5x5 and a padded input plane
 * of at most NNT_CONV_ROWS_DW_MAX_PAD. Where it does, no other limit of
 * conv_bwd_w applies. */
static inline int nnt_conv_rows_dw_take(const struct nnt_conv_geom *g, size_t filters) {
  return g && filters && (!g->cs || g->cs == g->c) && g->sh == 1 && g->sw == 1 &&
         g->dh == 1 && g->dw == 1 && g->kh == g->kw && (g->kh == 3 || g->kh == 5) &&
         (size_t)g->ow * (g->kh == 3 ? 32 : 16) <= NNT_CONV_ROWS_DW_MAX_DY &&
         (g->kh == 3 || (size_t)g->oh * g->ow <= NNT_CONV_ROWS_DW_MAX_PLANE5) &&
         (size_t)(g->oh + g->kh - 1) * (g->ow + g->kw - 1) <= NNT_CONV_ROWS_DW_MAX_PAD;
}

/* normalize_rows modes (bits). */
enum { NNT_NORM_MINMAX = 1u << 0, NNT_NORM_STANDARD = 1u << 1 };

/* Every entry returns NNT_OK, or an NNT_ERR_* code (NNT_ERR_INVAL for
 * arguments it can see are wrong); none returns a value on the host or
 * touches host state: a scalar result (dot, sum, a loss, a count) is
 * written to one float in the backend's memory. */
/* A value below the smallest normal float becomes 0. The optimizer
 * updates apply it to what they store (Adam's moments, every updated
 * weight): a moment whose gradient stays 0 decays geometrically
 * (m *= beta1), and rounding keeps it at the smallest subnormal forever
 * (0.9 of one ulp rounds to one ulp), where every operation on it is many
 * times slower on x86 (a weight decayed by weight decay or L2 the same);
 * flushed, it ends at 0 instead. What it drops is below 1.2e-38. */
static inline float nnt_flush_subnormal(float x) {
  /* on the bits, without a branch, so the update loops stay vectorized:
   * a zero exponent field (zero or subnormal) gives +0 */
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  u &= -(uint32_t)((u & 0x7f800000u) != 0);
  memcpy(&x, &u, sizeof x);
  return x;
}

typedef struct nnt_kernels {
  const char *name;
  /* The backend instance's own state, for its entries: each entry gets the
   * table it was called through as its first argument (self) and finds its
   * device, queue and buffers from self->ctx. NULL for a stateless table
   * (the CPU's). */
  void *ctx;
  /* fn(arg, b, e) over disjoint ranges [b, e) that together cover [0,
   * n), maybe at once on the backend's host threads (the CPU's compute
   * threads, one range each), returning when every range has run; an op
   * that fn calls runs whole on the thread that calls it, as on one
   * thread. For work whose every unit (a convolution's image) is too small
   * to split well: each unit's ops are then those one thread runs, so the
   * results are bitwise those of a loop over [0, n). Optional: NULL where
   * a backend has no host threads; nnt_kernels_parallel then runs
   * fn(arg, 0, n). */
  void (*parallel)(const struct nnt_kernels *self, size_t n,
                   void (*fn)(void *arg, size_t b, size_t e), void *arg);
  /* Called before a run (training, evaluation, inference) computes: what
   * the backend must have before its first op, or an error. NULL: nothing. */
  int (*prepare)(const struct nnt_kernels *self, nnt_err *e);

  /* C = alpha * op(A) * op(B) + beta * C; op(A) is m x k, op(B) is k x n.
   * Every dimension and leading dimension is at most NNT_GEMM_DIM_MAX. */
  int (*gemm)(const struct nnt_kernels *self, int trans_a, int trans_b, size_t m, size_t n,
              size_t k, float alpha, const float *a, size_t lda, const float *b, size_t ldb,
              float beta, float *c, size_t ldc);
  /* gemm whose rows keep their bits: rows [r0, r1) of C, for r0 a multiple
   * of NNT_GEMM_ROW_BLOCK and a block of at least nnt_gemm_rows_least
   * rows (the last block of the product may be shorter), come out bitwise
   * as the same rows of the product over all of op(A)'s rows, at any
   * thread count, where the backend can promise it (the CPU's:
   * nnt_cpu_blas_row_quantum). A layer whose gradient is handed over a
   * block of rows at a time makes the whole gradient with it too.
   * Optional: NULL runs gemm. */
  int (*gemm_rows)(const struct nnt_kernels *self, int trans_a, int trans_b, size_t m, size_t n,
                   size_t k, float alpha, const float *a, size_t lda, const float *b,
                   size_t ldb, float beta, float *c, size_t ldc);

  int (*fill)(const struct nnt_kernels *self, size_t n, float v, float *y);
  int (*copy)(const struct nnt_kernels *self, size_t n, const float *x,
              float *y); /* may alias exactly */
  int (*scale)(const struct nnt_kernels *self, size_t n, float a, float *y);       /* y *= a */
  int (*axpy)(const struct nnt_kernels *self, size_t n, float a, const float *x,
              float *y); /* y += a*x */
  /* y = a op b; y may alias a or b exactly */
  int (*add)(const struct nnt_kernels *self, size_t n, const float *a, const float *b,
             float *y); /* y = a+b */
  int (*sub)(const struct nnt_kernels *self, size_t n, const float *a, const float *b,
             float *y); /* y = a-b */
  int (*mul)(const struct nnt_kernels *self, size_t n, const float *a, const float *b,
             float *y); /* y = a*b */
  /* *out = x . y and *out = sum(x): one float in the backend's memory,
   * accumulated in double in index order. */
  int (*dot)(const struct nnt_kernels *self, size_t n, const float *x, const float *y, float *out);
  int (*sum)(const struct nnt_kernels *self, size_t n, const float *x, float *out);

  /* y[r][c] += bias[c] */
  int (*add_row_vec)(const struct nnt_kernels *self, size_t rows, size_t cols, const float *bias,
                     float *y);
  /* y[r][c] += v[r] */
  int (*add_col_vec)(const struct nnt_kernels *self, size_t rows, size_t cols, const float *v,
                     float *y);
  /* out[r] = beta * out[r] + sum_c x[r][c] */
  int (*sum_cols)(const struct nnt_kernels *self, size_t rows, size_t cols, const float *x,
                  float beta, float *out);
  /* out[c] = beta * out[c] + sum_r x[r][c] */
  int (*sum_rows)(const struct nnt_kernels *self, size_t rows, size_t cols, const float *x,
                  float beta, float *out);

  /* Activations, element-wise; y may alias x. alpha is the parameter of
   * leaky_relu / elu (ignored by others). */
  int (*act_fwd)(const struct nnt_kernels *self, nnt_act a, float alpha, size_t n, const float *x,
                 float *y);
  /* dx = dy * f'(x). x or y may be NULL when nnt_act_bwd_needs_output_only
   * says the other is enough. dx may alias dy. */
  int (*act_bwd)(const struct nnt_kernels *self, nnt_act a, float alpha, size_t n, const float *x,
                  const float *y, const float *dy, float *dx);
  /* A bit per element for a backward that needs only whether y > 0
   * (nnt_act_bwd_sign_only): bit i % 32 of word i / 32 of mask
   * (nnt_mask_words(n) 32-bit words in float slots) is y[i] > 0 (0 for
   * NaN), the last word's unused bits 0. act_bwd_mask gives act_bwd's dx
   * bit for bit from those bits instead of y: dy where the bit is set,
   * else 0 (relu) or alpha * dy (leaky_relu). dx may alias dy. */
  int (*act_mask)(const struct nnt_kernels *self, size_t n, const float *y, float *mask);
  int (*act_bwd_mask)(const struct nnt_kernels *self, nnt_act a, float alpha, size_t n,
                      const float *mask, const float *dy, float *dx);

  /* Softmax over rows of length cols; y may alias x. */
  int (*softmax_fwd)(const struct nnt_kernels *self, size_t rows, size_t cols, const float *x,
                     float *y);
  /* dx = y * (dy - sum(dy * y)) per row; dx may alias dy. */
  int (*softmax_bwd)(const struct nnt_kernels *self, size_t rows, size_t cols, const float *y,
                      const float *dy, float *dx);
  /* Per row of length cols (y may alias x exactly): mode NNT_NORM_MINMAX
   * scales the row to [0, 1] by its min and max; NNT_NORM_STANDARD makes
   * it zero mean and unit population standard deviation (mean = the float
   * of the double sum, over cols in float; variance accumulated in
   * double); both: min-max first. A constant row becomes zeros. */
  int (*normalize_rows)(const struct nnt_kernels *self, size_t rows, size_t cols, unsigned mode,
                        const float *x, float *y);

  /* Losses. Each *_fwd writes the loss value into *loss, one float in the
   * backend's memory; each *_bwd writes the derivative of that value with
   * respect to the layer input (logits for the cross entropies). `rows` is
   * the batch, `cols` the features of one sample. */
  /* -sum(label * log(prob + 1e-20)) / rows */
  int (*xent_softmax_fwd)(const struct nnt_kernels *self, size_t rows, size_t cols,
                          const float *prob, const float *label, float *loss);
  /* dx = (prob - label) / rows */
  int (*xent_softmax_bwd)(const struct nnt_kernels *self, size_t rows, size_t cols,
                          const float *prob, const float *label, float *dx);
  /* Sigmoid cross entropy on logits x, mean over all elements. */
  int (*xent_sigmoid_fwd)(const struct nnt_kernels *self, size_t rows, size_t cols, const float *x,
                          const float *label, float *loss);
  int (*xent_sigmoid_bwd)(const struct nnt_kernels *self, size_t rows, size_t cols, const float *x,
                           const float *label, float *dx);
  /* mean((y - label)^2) over all elements */
  int (*mse_fwd)(const struct nnt_kernels *self, size_t n, const float *y, const float *label,
                 float *loss);
  int (*mse_bwd)(const struct nnt_kernels *self, size_t n, const float *y, const float *label,
                 float *dx);
  /* *count = the number of rows whose first largest value in y and in
   * label sit in the same column, as a float (exact up to 2^24 rows), one
   * float in the backend's memory: the correct predictions of a batch. */
  int (*argmax_match)(const struct nnt_kernels *self, size_t rows, size_t cols, const float *y,
                      const float *label, float *count);

  /* Dropout: mask[i] = (u_i < rate) ? 0 : 1/(1-rate), where u_i is
   * nnt_philox_uniform_at(key, stream, i) (nntrainer/philox.h): a pure
   * function of (key, stream, i), so any backend draws the same mask. */
  int (*dropout_mask)(const struct nnt_kernels *self, size_t n, float rate, uint64_t key,
                      uint64_t stream, float *mask);

  /* Batch normalization over a tensor viewed as [outer, ch, inner], one
   * statistic per ch. Training: writes the batch mean and 1/sqrt(var + eps)
   * (biased variance) per ch, xhat, and y = gamma * xhat + beta (y may alias
   * x; xhat may alias y, which then ends as y: each element's xhat is
   * written before its y). */
  int (*bn_fwd_train)(const struct nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                      const float *x, const float *gamma, const float *beta, float eps, float *mean,
                      float *var, float *invstd, float *xhat, float *y);
  /* Inference: y = gamma * (x - mean) / sqrt(var + eps) + beta. */
  int (*bn_fwd_infer)(const struct nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                      const float *x, const float *mean, const float *var, const float *gamma,
                      const float *beta, float eps, float *y);
  /* dgamma = sum(dy xhat), dbeta = sum(dy) (either may be NULL);
   * dx = gamma invstd (dy - mean(dy) - xhat mean(dy xhat)) (dx may be NULL,
   * may alias dy). */
  int (*bn_bwd)(const struct nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                const float *dy, const float *xhat, const float *invstd, const float *gamma,
                float *dx, float *dgamma, float *dbeta);

  /* Permute the last three axes of b tensors of dims d[3] (c, h, w):
   * output axis i is input axis perm[i] (0-based). */
  int (*permute3)(const struct nnt_kernels *self, size_t b, const unsigned d[3],
                  const unsigned perm[3], const float *x, float *y);
  /* Nearest upsampling of [rows, h, w] by (kh, kw); the backward sums each
   * (kh x kw) block of dy into dx. */
  int (*upsample_nearest_fwd)(const struct nnt_kernels *self, size_t rows, size_t h, size_t w,
                              size_t kh, size_t kw, const float *x, float *y);
  int (*upsample_nearest_bwd)(const struct nnt_kernels *self, size_t rows, size_t h, size_t w,
                              size_t kh, size_t kw, const float *dy, float *dx);

  /* Convolution geometry shared by im2col, col2im and pooling. */
  /* col [c*kh*kw, n*oh*ow] from n images x [n, c, h, w] (zeros in the
   * padding): the columns of the images side by side, image i's in
   * columns [i*oh*ow, (i+1)*oh*ow), so one gemm covers all n. Image i
   * starts at x + i * nnt_conv_img_stride(g): with g->cs > c, x points at
   * channel c0 of [n, cs, h, w] and col holds channels [c0, c0 + c). */
  int (*im2col)(const struct nnt_kernels *self, const struct nnt_conv_geom *g, size_t n,
                const float *x, float *col);
  /* dx [n, c, h, w] += the columns [c*kh*kw, n*oh*ow] folded back (the
   * adjoint of im2col); image i at dx + i * nnt_conv_img_stride(g), as
   * im2col's x. */
  int (*col2im)(const struct nnt_kernels *self, const struct nnt_conv_geom *g, size_t n,
                const float *col, float *dx);
  /* Pooling over windows of g for n images of c channels; mode 0 max,
   * 1 average (the window size divides, padding included). idx keeps each
   * max's position for the backward (-1: the window was all padding). */
  int (*pool_fwd)(const struct nnt_kernels *self, const struct nnt_conv_geom *g, size_t n, int mode,
                  const float *x, float *y, float *idx);
  /* dx = the routed (max) or spread (average) dy; dx is overwritten. */
  int (*pool_bwd)(const struct nnt_kernels *self, const struct nnt_conv_geom *g, size_t n, int mode,
                  const float *dy, const float *idx, float *dx);

  /* Optimizer updates. g is read-only. When skip is not NULL and *skip
   * (one float of backend memory) is not 0, nothing changes: the update
   * of a step whose check found a value that is not finite (on a backend
   * that runs a step before the host sees its results). */
  int (*sgd_step)(const struct nnt_kernels *self, size_t n, float lr, const float *g, float *w,
                  const float *skip);
  /* m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; w = w * wscale (AdamW's
   * decay; 1: none), then w -= lr_t * m / (sqrt(v) + eps). lr_t carries
   * the bias corrections. Stored m, v and w (and sgd_step's w) pass
   * through nnt_flush_subnormal. A backend may also take subnormal inputs
   * and intermediate results as 0 (the CPU's on x86 does: flush-to-zero
   * and denormals-are-zero, which spare it a slow path per such value). */
  int (*adam_step)(const struct nnt_kernels *self, size_t n, float lr_t, float b1, float b2,
                   float eps, float wscale, const float *g, float *m, float *v, float *w,
                   const float *skip);
  /* When one of x[0..n) is NaN or infinite: *flag = 1 and, when any is
   * not NULL, *any = 1 (both one float of backend memory); otherwise both
   * stay as they are. */
  int (*flag_nonfinite)(const struct nnt_kernels *self, size_t n, const float *x, float *flag,
                        float *any);
  /* Gradient clipping by a norm the backend holds: with s = sqrt(*sumsq)
   * (one float of backend memory), y *= max_norm / s when s > max_norm. */
  int (*clip_scale)(const struct nnt_kernels *self, size_t n, float max_norm,
                    const float *sumsq, float *y);
  /* The causal mask of attention: for each of mats matrices [rows, cols]
   * (row-major, one after the other), y[i][j] = v where j > i (the strict
   * upper triangle); the rest stays as it is. */
  int (*mask_upper)(const struct nnt_kernels *self, size_t mats, size_t rows, size_t cols,
                    float v, float *y);

  /* Rows of a table by index (embedding). Row r of idx's rows values
   * names row i = (the value truncated toward zero, NNTrainer's cast) of
   * table [n, cols]; y[r] = table[i], or zeros when i == mask (mask >= n:
   * no row is masked). A value outside [0, n) (NaN included) reads nothing:
   * its row of y becomes NaN, so a later check names the layer, and a
   * backend that computes before it returns (the CPU) returns
   * NNT_ERR_INVAL after writing every row. n < 2^31. */
  int (*gather_rows)(const struct nnt_kernels *self, size_t rows, size_t cols, size_t n,
                     const float *idx, const float *table, size_t mask, float *y);
  /* Its adjoint: dtable [n, cols] is overwritten with, for each row i, the
   * sum of dy[r] over the r (in increasing order, so every backend adds in
   * the same order, without atomics) whose index is i; a masked or out of
   * range index adds nothing. */
  int (*scatter_add_rows)(const struct nnt_kernels *self, size_t rows, size_t cols, size_t n,
                          const float *idx, const float *dy, size_t mask, float *dtable);
  /* Layer normalization of rows of length cols: per row the mean and
   * invstd = 1 / sqrt(var + eps) (biased variance; sums in double on the
   * CPU), written to mean and invstd unless NULL, and y = (x - mean) invstd
   * gamma[c] + beta[c]. y must not alias x. */
  int (*ln_fwd)(const struct nnt_kernels *self, size_t rows, size_t cols, const float *x,
                const float *gamma, const float *beta, float eps, float *mean, float *invstd,
                float *y);
  /* Its backward from x and the saved mean and invstd (xhat = (x - mean)
   * invstd is recomputed, not kept): dgamma[c] = sum_r dy xhat and
   * dbeta[c] = sum_r dy (either may be NULL); dx = invstd (g - mean_c(g) -
   * xhat mean_c(g xhat)) with g = gamma dy (dx may be NULL; no alias). */
  int (*ln_bwd)(const struct nnt_kernels *self, size_t rows, size_t cols, const float *x,
                const float *dy, const float *mean, const float *invstd, const float *gamma,
                float *dx, float *dgamma, float *dbeta);
  /* NNTrainer's sinusoid table [t, d]: value (i, j) = sin(a) for even j and
   * cos(a) for odd j, a = i / 10000^(2 floor(j / 2) / d), in float as
   * NNTrainer computes it (powf, sinf, cosf on the CPU; a device's own
   * functions elsewhere, within about 1e-5 for small i). */
  int (*pos_encoding)(const struct nnt_kernels *self, size_t t, size_t d, float *table);
  /* y = a / b; y may alias a or b exactly */
  int (*div)(const struct nnt_kernels *self, size_t n, const float *a, const float *b, float *y);
  /* Batch normalization's output again from its saved xhat: y = gamma *
   * xhat + beta, bit for bit what bn_fwd_train wrote (the backward pass
   * recomputes it instead of keeping it; a backend whose supports says no
   * keeps it). */
  int (*bn_affine)(const struct nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                   const float *xhat, const float *gamma, const float *beta, float *y);
  /* Convolution forward without im2col: y[i][f] = W[f] * window(x[i]) (+
   * bias[f]; bias may be NULL) for n images x of g (g->cs 0 or g->c), W
   * [filters, c*kh*kw], y [n][filters][oh*ow]; within rounding of im2col
   * then gemm. A patch c*kh*kw of at most NNT_CONV_DIRECT_MAX_PATCH and an
   * output width of at most 256 (NNT_ERR_INVAL otherwise), or what
   * nnt_conv_rows_take, nnt_conv_sub_take or (on an AVX-512 CPU)
   * nnt_conv_str_take says. Optional: a
   * backend without it leaves the entry NULL and its supports says no;
   * conv2d then takes the im2col path. */
  int (*conv_fwd)(const struct nnt_kernels *self, const struct nnt_conv_geom *g, size_t n,
                  size_t filters, const float *w, const float *bias, const float *x, float *y);
  /* The backward of a convolution without im2col or col2im, for g with
   * stride 1 and dilation 1 (g->cs 0 or g->c), a kernel NNT_CONV_BWD_MIN_KW
   * to NNT_CONV_BWD_MAX_KW wide, input and output rows at most 256 wide and
   * filters * kh * kw at most NNT_CONV_BWD_MAX_FTAPS (NNT_ERR_INVAL
   * otherwise; conv_bwd_x also what nnt_conv_rows_take, nnt_conv_sub_dx_take
   * and, on an AVX-512 CPU, nnt_conv_str_dx_take say; conv_bwd_w also what
   * nnt_conv_rows_dw_take and, on AVX-512, nnt_conv_str_dw_take and
   * nnt_conv_sub_dw_take say), W, x,
   * dY as for conv_fwd. conv_bwd_x: dx[i] = the derivative of conv_fwd's y[i] with
   * respect to x[i] given dy (written, not added); conv_bwd_w: dw [filters,
   * c*kh*kw] = the sum over the n images of the derivative with respect to
   * W (written). Within rounding of col2im and im2col with gemm. Optional,
   * as conv_fwd. */
  int (*conv_bwd_x)(const struct nnt_kernels *self, const struct nnt_conv_geom *g, size_t n,
                    size_t filters, const float *w, const float *dy, float *dx);
  int (*conv_bwd_w)(const struct nnt_kernels *self, const struct nnt_conv_geom *g, size_t n,
                    size_t filters, const float *x, const float *dy, float *dw);
  /* Winograd F(2x2, 3x3) convolution (the CPU's takes F(4x4, 3x3) where
   * NNT_WINO4_IMAGE_TILES says): y[i][f] = W[f] * window(x[i]) (+
   * bias[f]; bias may be NULL) for n images of g (nnt_wino_geom_ok), y
   * [n][filters][oh*ow] written whole; within rounding of im2col then
   * gemm (the transforms round differently). flip 0: W is w [filters][c][3][3];
   * flip 1: w is [c][filters][3][3] and W[f][ch] is w[ch][f] turned by 180
   * degrees (conv2d's derivative: dX = this of dY). scratch: scratch_len
   * floats of the caller's, at least nnt_wino_min_scratch (NNT_ERR_INVAL
   * otherwise). flip | NNT_WINO_KEEP_U: the caller vouches that the
   * scratch holds what the op's previous call (over n > 0 images) left
   * there, with the same g, filters, flip, w and scratch_len (a later group
   * of images of one forward): a backend may take the transformed filters
   * from it instead of making them again (the CPU's F(4x4, 3x3), which
   * keeps them whole), for the same bits. Optional, like conv_fwd: NULL
   * where a backend has none. */
  int (*conv_wino)(const struct nnt_kernels *self, const struct nnt_conv_geom *g, size_t n,
                   size_t filters, int flip, const float *w, const float *bias, const float *x,
                   float *y, float *scratch, size_t scratch_len);
  /* conv_wino's weight gradient: dw [filters][c][3][3] = the sum over the
   * n images of dY[i][f] correlated with window(x[i][c]) (written, not
   * added to), dy [n][filters][oh*ow]; within rounding of im2col then
   * gemm. Geometry and scratch as conv_wino's; the CPU's takes F(4x4,
   * 3x3) where the scratch holds its 36 slices of dU and of 64 tiles
   * (cpu_impl.h nnt_cpu_wino4_dw_takes). Optional, like it. */
  int (*conv_wino_dw)(const struct nnt_kernels *self, const struct nnt_conv_geom *g, size_t n,
                      size_t filters, const float *dy, const float *x, float *dw,
                      float *scratch, size_t scratch_len);
  /* A matrix between two layouts: y[r ldy + c] = x[r ldx + c] for r < rows,
   * c < cols; nothing else of y is written. With rows > 1, cols is at most
   * ldx and ldy. x and y do not overlap. */
  int (*copy2d)(const struct nnt_kernels *self, size_t rows, size_t cols, const float *x,
                size_t ldx, float *y, size_t ldy);
  /* col2im writing instead of adding: dx [n, c, h, w] (image i at dx + i *
   * nnt_conv_img_stride(g)) = the columns folded back, zeros where no
   * window reaches; bitwise a fill with 0 and then col2im, in one pass
   * over dx instead of two. Optional, like conv_fwd: conv2d then fills
   * and adds. */
  int (*col2im_set)(const struct nnt_kernels *self, const struct nnt_conv_geom *g, size_t n,
                    const float *col, float *dx);
  /* bn_bwd in two calls that sum dy and dy xhat once: with dx NULL it
   * writes dgamma and dbeta as bn_bwd does (either may be NULL) and the
   * per-channel means that its dx uses, mean(dy) into means[0, ch) and
   * mean(dy xhat) into means[ch, 2 ch); with dx it reads those means and
   * writes dx only, bitwise bn_bwd's (dx may alias dy). Batch norm's
   * calc_gradient and calc_derivative share the means this way. Optional,
   * like conv_fwd: NULL where a backend has none (bn_bwd in each call). */
  int (*bn_bwd_means)(const struct nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                      const float *dy, const float *xhat, const float *invstd,
                      const float *gamma, float *dx, float *dgamma, float *dbeta, float *means);
  /* conv_bwd_x's dx[i] added into what dx holds (a fan-out's summed
   * derivative, NNT_LF_DERIV_ADDS): each value the bits of an add of
   * what conv_bwd_x would write into it, so that no temporary of dx's size
   * is needed. Optional, like conv_fwd; the CPU's takes what
   * nnt_conv_sub_dx_take takes, on an AVX-512 CPU (NNT_ERR_INVAL
   * otherwise). */
  int (*conv_bwd_x_add)(const struct nnt_kernels *self, const struct nnt_conv_geom *g, size_t n,
                        size_t filters, const float *w, const float *dy, float *dx);
  /* Batch normalization's training output from statistics a bn_fwd_train
   * over a larger batch wrote: y = gamma * ((x - mean) * invstd) + beta,
   * each element bit for bit what bn_fwd_train gave it there (y may alias
   * x). Optional: an addition's input computed again image by image
   * (rerun.c) needs it. */
  int (*bn_fwd_stats)(const struct nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                      const float *x, const float *mean, const float *invstd, const float *gamma,
                      const float *beta, float *y);
} nnt_kernels;

/* k->parallel where the backend has it, else fn(arg, 0, n). */
static inline void nnt_kernels_parallel(const nnt_kernels *k, size_t n,
                                        void (*fn)(void *arg, size_t b, size_t e), void *arg) {
  if (k->parallel)
    k->parallel(k, n, fn, arg);
  else if (n)
    fn(arg, 0, n);
}

/* The CPU backend (OpenBLAS + plain loops). */
const nnt_kernels *nnt_kernels_cpu(void);

/* OpenBLAS threads (cpu_blas.c). n == 0: the online cores, or one under a
 * process memory limit (RLIMIT_AS or RLIMIT_DATA; a notice says so). Under
 * such a limit the new threads' 136 MiB each (OpenBLAS's work buffer and a
 * stack) must fit: otherwise NNT_ERR_NOMEM and the threads stay as they
 * were; they map their buffers before this returns. */
int nnt_cpu_set_threads(unsigned n, nnt_err *e);
/* Before a run computes (the table's prepare entry): under a process
 * memory limit, that OpenBLAS's work buffer for the calling thread fits
 * (NNT_ERR_NOMEM if not, where OpenBLAS would wait forever), and have it
 * mapped now. Without a limit it does nothing. */
int nnt_cpu_prepare(nnt_err *e);
/* The CPU backend's compute threads (cpu_pool.c): every model holds them
 * from create to destroy; the last release joins and frees the workers.
 * Start makes the workers (the thread count less one) when a model holds
 * them and there are none: NNT_ERR_NOMEM when they cannot be allocated or
 * started, or do not fit a process memory limit. The table's prepare
 * entry calls it. Threads: the workers running, plus the caller. */
void nnt_cpu_pool_hold(void);
void nnt_cpu_pool_release(void);
int nnt_cpu_pool_start(nnt_err *e);
unsigned nnt_cpu_pool_threads(void);
/* 1 when workers exist and the products are split over them. */
int nnt_cpu_pool_products(void);
/* How many ops have been split over the workers in this process. */
unsigned long nnt_cpu_pool_jobs(void);
/* The BLAS the CPU backend calls, in words: "OpenBLAS 0.3.21, Haswell
 * kernels, 2 threads" (the kernel path OpenBLAS chose for this CPU). */
void nnt_cpu_blas_describe(char *buf, size_t n);

/* OpenBLAS's kernels chosen by the CPU's features (cpu_blas_core.c). The
 * vector width of a kernel path: */
enum { NNT_BLAS_SSE = 0, NNT_BLAS_AVX = 1, NNT_BLAS_AVX2 = 2, NNT_BLAS_AVX512 = 3 };
/* The width of OpenBLAS's core named core (NNT_BLAS_SSE for a name it does
 * not know, NULL included). */
int nnt_blas_core_rank(const char *core);
/* The widest width this process's CPU and OS allow (NNT_BLAS_SSE off x86). */
int nnt_blas_cpu_rank(void);
/* The core OpenBLAS should use instead of current on a CPU of cpu_rank, or
 * NULL to keep current: when the user named one (user_core, the value of
 * OPENBLAS_CORETYPE) or current is as wide as the CPU allows. */
const char *nnt_blas_core_choice(const char *current, int cpu_rank, const char *user_core);
/* Have OpenBLAS use its kernels of core (a name OPENBLAS_CORETYPE takes),
 * whatever it picked: 0 when it runs them now, -1 when it cannot switch
 * (not a DYNAMIC_ARCH OpenBLAS, an unknown name). Process-wide: no product
 * may run meanwhile. */
int nnt_blas_switch_core(const char *core);
/* Switch OpenBLAS to the core nnt_blas_core_choice gives, once per process
 * (nnt_cpu_prepare, nnt_cpu_set_threads and nnt_cpu_blas_describe call it). */
void nnt_cpu_blas_choose_core(void);
/* The fewest multiply-adds of a part of a product the compute threads
 * split (cpu_gemm.c): above OpenBLAS's small-matrix size, 10^6. */
#define NNT_CPU_GEMM_MIN_PART ((size_t)1000001)
/* The fewest rows (a multiple of NNT_GEMM_ROW_BLOCK) a block of an
 * m x n x k product needs for gemm_rows to give it the whole product's
 * bits: a whole above OpenBLAS's small-matrix size needs blocks above it
 * too (below it OpenBLAS 0.3.21's AVX-512 kernels take their small-matrix
 * kernel, which rounds otherwise: on an Emerald Rapids, 465 of 8,192
 * values of a 256 x 32 x 256 product in blocks of 48 rows, test_pool). */
static inline size_t nnt_gemm_rows_least(size_t m, size_t n, size_t k) {
  size_t nk = n * k, rows = NNT_GEMM_ROW_BLOCK;
  if (nk && m * nk >= NNT_CPU_GEMM_MIN_PART) {
    size_t need = (NNT_CPU_GEMM_MIN_PART + nk - 1) / nk;
    rows = (need + NNT_GEMM_ROW_BLOCK - 1) / NNT_GEMM_ROW_BLOCK * NNT_GEMM_ROW_BLOCK;
  }
  return rows;
}

/* 1 when OpenBLAS's kernels now give a product's columns the same bits
 * whatever columns it is given (its AVX-512 paths, measured): the compute
 * threads' split products are then bitwise the whole product. */
int nnt_cpu_blas_split_exact(void);
/* The rows at whose multiples a product over OpenBLAS's present kernels
 * may be cut by rows of C, every row keeping the bits it has in the
 * whole product (one call, one thread), measured on 0.3.21: 8 on its
 * AVX-512 (SkylakeX, Cooperlake, SapphireRapids), AVX (Sandybridge) and
 * SSE (Prescott, Nehalem) kernels, 24 on its AVX2 ones (Haswell, Zen),
 * which compute rows in runs of 24 (a cut elsewhere moves the remainder
 * rows onto other kernels); 0 on any other core (not measured). A cut
 * by columns changes bits on the AVX2 kernels at any multiple. */
size_t nnt_cpu_blas_row_quantum(void);
/* The core OpenBLAS had picked itself when it was switched, else NULL. */
const char *nnt_cpu_blas_first_core(void);

#endif
