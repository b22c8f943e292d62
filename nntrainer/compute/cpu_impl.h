/* Private: CPU kernel functions defined outside cpu_kernels.c and gathered
 * into its table. */
#ifndef NNT_CPU_IMPL_H
#define NNT_CPU_IMPL_H

#include <stddef.h>
#include "nntrainer/common.h"
#include "nntrainer/compute/kernels.h"

struct nnt_kernels;
struct nnt_conv_geom;

/* Partial sums for reductions: NNT_LANES independent sums break the chain
 * of dependent additions (a loop gcc vectorizes, several times faster
 * than one running sum), and their fixed order keeps results
 * reproducible. */
#define NNT_LANES 8

/* The sum of p[0..n) in double: sum l takes p[i + l] of the whole blocks
 * of NNT_LANES, sum 0 the tail, added in order 0..NNT_LANES-1. */
static inline double nnt_cpu_dsum(const float *p, size_t n) {
  double acc[NNT_LANES] = {0};
  size_t i = 0;
  for (; i + NNT_LANES <= n; i += NNT_LANES)
    for (int l = 0; l < NNT_LANES; l++)
      acc[l] += p[i + l];
  for (; i < n; i++)
    acc[0] += p[i];
  double s = 0;
  for (int l = 0; l < NNT_LANES; l++)
    s += acc[l];
  return s;
}

/* A batch-normalization op's arguments (the ones it reads or writes; see
 * kernels.h), for its parts over channels and for nnt_cpu_bn_path. */
typedef struct nnt_cpu_bn_args {
  size_t outer, ch, inner;
  const float *x, *gamma, *beta, *mean_in, *var_in, *dy, *xhat_in, *invstd_in;
  float eps;
  float *mean, *var, *invstd, *xhat, *y, *dx, *dgamma, *dbeta;
  double *part, *chan; /* the split over images' sums (cpu_norm.c) */
  /* the backward: the means of dy and dy xhat ([2][ch]) given (dx only)
   * or to be written (the sums' results) */
  const float *means_in;
  float *means_out;
} nnt_cpu_bn_args;
enum { NNT_BN_FWD_TRAIN, NNT_BN_FWD_INFER, NNT_BN_BWD, NNT_BN_AFFINE, NNT_BN_FWD_STATS };
/* Op BN_* on one code path: NNT_BLAS_AVX2 or (below) plain C; NNT_ERR_INVAL
 * when this CPU cannot run it (the tests compare the paths; the kernels
 * take the widest). */
int nnt_cpu_bn_path(int path, int op, nnt_cpu_bn_args *a);
/* The widest code path the hand-vectorized loops (Winograd's transforms)
 * may take from now on (NNT_BLAS_AVX512, the default, or lower: plain C),
 * process-wide; returns the one before. For the tests, which compare the
 * paths' bits. nnt_cpu_vec_avx512: whether they take AVX-512 (the CPU has
 * it and the path allows it). */
int nnt_cpu_vec_path(int path);
int nnt_cpu_vec_avx512(void);
/* Likewise for AVX2 (cpu_winograd4.c's transform loops). */
int nnt_cpu_vec_avx2(void);
/* The 3x3 taps of filter f for channels [c0, c0 + nc) of w (nf filters,
 * c channels; flip: w is [c][nf][3][3] turned by 180 degrees, as
 * conv_wino's) into g[q * ld + cc], tap q of channel c0 + cc: both
 * Winograd files' filter transforms read them so. */
void nnt_cpu_wino_taps(const float *w, int flip, size_t f, size_t nf, size_t c, size_t c0,
                       size_t nc, size_t ld, float *g);
/* The Winograd products M[k] = U[k] V[k] ([f, c] x [c, t], k in [k0, k1),
 * slices laid out one after another), rows [f0, f1) of each, as
 * one-thread OpenBLAS sgemms. */
void nnt_cpu_wino_products(size_t f, size_t f0, size_t f1, size_t t, size_t c, const float *u,
                           const float *v, float *m, size_t k0, size_t k1);
/* im2col and col2im's AVX-512 code (cpu_window_avx512.c; the same bits as
 * cpu_window.c's loops), where nnt_cpu_vec_avx512: the first two do rows
 * [r0, r1) or channels [c0, c1) of n images (x or dx in images in floats
 * apart, the columns as nnt_cpu_im2col lays them out) and return 0, doing
 * nothing, for a geometry they do not take; the last adds one row's
 * stride-2 columns, dst[2i] += src[i] for i < n, touching dst no further
 * than [0, 2n - 1). */
int nnt_win_im2col_avx512(const struct nnt_conv_geom *g, size_t n, size_t r0, size_t r1,
                          const float *x, size_t in, float *col);
int nnt_win_col2im_avx512(const struct nnt_conv_geom *g, size_t n, size_t c0, size_t c1,
                          const float *col, float *dx, size_t in);
void nnt_win_even_add_avx512(float *dst, const float *src, size_t n);
/* col2im_set's of a 1x1 window with stride 2 across and no padding, for
 * channels [c0, c1) of n images as nnt_win_col2im_avx512; 0 (nothing
 * done) for another geometry. */
int nnt_win_col2im_set_avx512(const struct nnt_conv_geom *g, size_t n, size_t c0, size_t c1,
                              const float *col, float *dx, size_t in);
/* The 1x1 stride-2 window's im2col and col2im_set on AVX2
 * (cpu_window_avx2.c), as the AVX-512 ones: 0 (nothing done) for another
 * geometry. Only where nnt_cpu_vec_avx2. */
int nnt_win_im2col_avx2(const struct nnt_conv_geom *g, size_t n, size_t r0, size_t r1,
                        const float *x, size_t in, float *col);
int nnt_win_col2im_set_avx2(const struct nnt_conv_geom *g, size_t n, size_t c0, size_t c1,
                            const float *col, float *dx, size_t in);
int nnt_cpu_bn_fwd_train(const struct nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                         const float *x, const float *gamma, const float *beta, float eps,
                         float *mean, float *var, float *invstd, float *xhat, float *y);
int nnt_cpu_bn_fwd_infer(const struct nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                         const float *x, const float *mean, const float *var, const float *gamma,
                         const float *beta, float eps, float *y);
int nnt_cpu_bn_affine(const struct nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                      const float *xhat, const float *gamma, const float *beta, float *y);
int nnt_cpu_bn_fwd_stats(const struct nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                         const float *x, const float *mean, const float *invstd,
                         const float *gamma, const float *beta, float *y);
int nnt_cpu_bn_bwd(const struct nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                   const float *dy, const float *xhat, const float *invstd, const float *gamma,
                   float *dx, float *dgamma, float *dbeta);
int nnt_cpu_bn_bwd_means(const struct nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                         const float *dy, const float *xhat, const float *invstd,
                         const float *gamma, float *dx, float *dgamma, float *dbeta,
                         float *means);

int nnt_cpu_copy2d(const struct nnt_kernels *self, size_t rows, size_t cols, const float *x,
                   size_t ldx, float *y, size_t ldy);
int nnt_cpu_permute3(const struct nnt_kernels *self, size_t b, const unsigned d[3],
                     const unsigned perm[3], const float *x, float *y);
int nnt_cpu_upsample_nearest_fwd(const struct nnt_kernels *self, size_t rows, size_t h, size_t w,
                                 size_t kh, size_t kw, const float *x, float *y);
int nnt_cpu_upsample_nearest_bwd(const struct nnt_kernels *self, size_t rows, size_t h, size_t w,
                                 size_t kh, size_t kw, const float *dy, float *dx);

struct nnt_conv_geom;
/* The output columns [lo, hi) whose input column ox * sw + off lies inside
 * [0, w) (cpu_window.c; the direct convolution uses it too). */
void nnt_cpu_valid_cols(const struct nnt_conv_geom *g, long off, unsigned *lo, unsigned *hi);
int nnt_cpu_im2col(const struct nnt_kernels *self, const struct nnt_conv_geom *g, size_t n,
                   const float *x, float *col);
int nnt_cpu_conv_fwd(const struct nnt_kernels *self, const struct nnt_conv_geom *g, size_t n,
                     size_t filters, const float *w, const float *bias, const float *x,
                     float *y);
/* conv_fwd on one code path: NNT_BLAS_AVX512, NNT_BLAS_AVX2 or (below)
 * plain C; NNT_ERR_INVAL when this CPU cannot run it (the tests run every
 * path the CPU has; conv_fwd takes the widest). */
int nnt_cpu_conv_fwd_path(int path, const struct nnt_conv_geom *g, size_t n, size_t filters,
                          const float *w, const float *bias, const float *x, float *y);
/* The direct backward of a stride-1, dilation-1 convolution
 * (cpu_conv_direct.c): conv_bwd_x and conv_bwd_w, and each on one code
 * path as nnt_cpu_conv_fwd_path; nnt_cpu_conv_bwd_ok: 1 when g and the
 * filter count are ones they take. */
int nnt_cpu_conv_bwd_ok(const struct nnt_conv_geom *g, size_t filters);
int nnt_cpu_conv_bwd_x(const struct nnt_kernels *self, const struct nnt_conv_geom *g, size_t n,
                       size_t filters, const float *w, const float *dy, float *dx);
int nnt_cpu_conv_bwd_w(const struct nnt_kernels *self, const struct nnt_conv_geom *g, size_t n,
                       size_t filters, const float *x, const float *dy, float *dw);
int nnt_cpu_conv_bwd_x_path(int path, const struct nnt_conv_geom *g, size_t n, size_t filters,
                            const float *w, const float *dy, float *dx);
int nnt_cpu_conv_bwd_w_path(int path, const struct nnt_conv_geom *g, size_t n, size_t filters,
                            const float *x, const float *dy, float *dw);
/* The subsampling 1x1 convolution's forward (cpu_conv_sub.c) on one code
 * path (as nnt_cpu_conv_fwd_path): conv_fwd's y; NNT_ERR_INVAL where
 * nnt_conv_sub_take says no or the CPU cannot run the path. conv_fwd takes
 * it where nnt_conv_sub_take says yes. */
int nnt_cpu_conv_sub_fwd(int path, const struct nnt_conv_geom *g, size_t n, size_t filters,
                         const float *w, const float *bias, const float *x, float *y);
/* The strided forward (cpu_conv_str.c), conv_fwd's y, on the AVX-512
 * path; NNT_ERR_INVAL on another path, where nnt_conv_str_take says no or
 * the CPU has no AVX-512. conv_fwd takes it there where
 * nnt_conv_str_take says yes. */
int nnt_cpu_conv_str_fwd(int path, const struct nnt_conv_geom *g, size_t n, size_t filters,
                         const float *w, const float *bias, const float *x, float *y);
/* Its derivative (conv_bwd_x's dx, every value written) likewise, where
 * nnt_conv_str_dx_take says. */
int nnt_cpu_conv_str_dx(int path, const struct nnt_conv_geom *g, size_t n, size_t filters,
                        const float *w, const float *dy, float *dx);
/* Its weight gradient (conv_bwd_w's dw, written) likewise, where
 * nnt_conv_str_dw_take says. */
int nnt_cpu_conv_str_dw(int path, const struct nnt_conv_geom *g, size_t n, size_t filters,
                        const float *x, const float *dy, float *dw);
/* Its derivative (conv_bwd_x's dx, every value written; add: added into
 * dx, conv_bwd_x_add's) on the AVX-512 path; NNT_ERR_INVAL on another
 * path, where nnt_conv_sub_dx_take says no or the CPU has no AVX-512.
 * conv_bwd_x takes it where nnt_conv_sub_dx_take says yes. */
int nnt_cpu_conv_sub_dx(int path, const struct nnt_conv_geom *g, size_t n, size_t filters,
                        const float *w, const float *dy, float *dx, int add);
/* The kernel table's sgd_step and adam_step (cpu_update.c). */
int nnt_cpu_sgd_step(const struct nnt_kernels *self, size_t n, float lr, const float *g,
                     float *w, const float *skip);
int nnt_cpu_adam_step(const struct nnt_kernels *self, size_t n, float lr_t, float b1,
                      float b2, float eps, float wscale, const float *g, float *m, float *v,
                      float *w, const float *skip);
/* 1 where the CPU's optimizer updates run with subnormal inputs and
 * results taken as 0 (x86: MXCSR's FTZ and DAZ for their duration;
 * cpu_update.c). */
int nnt_cpu_update_flushes(void);
/* The CPU's Adam update (adam_step's arithmetic, skip aside) on one code
 * path: NNT_BLAS_AVX512, NNT_BLAS_AVX2 (vectors, where the CPU has them)
 * or lower (the plain loop); every path gives the same bits. */
void nnt_cpu_adam_path(int path, size_t n, float lr_t, float b1, float b2, float eps,
                       float wscale, const float *g, float *m, float *v, float *w);
/* Its weight gradient (conv_bwd_w's dw, written) on the AVX-512 path;
 * NNT_ERR_INVAL on another path, where nnt_conv_sub_dw_take says no or the
 * CPU has no AVX-512. */
int nnt_cpu_conv_sub_dw(int path, const struct nnt_conv_geom *g, size_t n, size_t filters,
                        const float *x, const float *dy, float *dw);
int nnt_cpu_conv_bwd_x_add(const struct nnt_kernels *self, const struct nnt_conv_geom *g,
                           size_t n, size_t filters, const float *w, const float *dy, float *dx);
/* A stride-1, dilation-1 convolution of a 3x3 or 5x5 window along output
 * rows (cpu_conv_rows.c) on one code path (as nnt_cpu_conv_fwd_path):
 * deriv 0, conv_fwd's y from x (and bias, or NULL); deriv 1, conv_bwd_x's
 * dx from dy (bias unused); NNT_ERR_INVAL where nnt_conv_rows_take says
 * no or the CPU cannot run the path. conv_fwd and conv_bwd_x take it
 * where nnt_conv_rows_take says yes. */
int nnt_cpu_conv_rows(int path, const struct nnt_conv_geom *g, size_t n, size_t filters,
                      int deriv, const float *w, const float *bias, const float *src,
                      float *out);
/* conv_bwd_w with the filters in the lanes (cpu_conv_rows_dw.c) on one
 * code path; NNT_ERR_INVAL where nnt_conv_rows_dw_take says no or the CPU
 * cannot run the path. conv_bwd_w takes it where that says yes. */
int nnt_cpu_conv_rows_dw(int path, const struct nnt_conv_geom *g, size_t n, size_t filters,
                         const float *x, const float *dy, float *dw);
int nnt_cpu_conv_wino(const struct nnt_kernels *self, const struct nnt_conv_geom *g, size_t n,
                      size_t filters, int flip, const float *w, const float *bias,
                      const float *x, float *y, float *scratch, size_t scratch_len);
/* conv_wino's F(4x4, 3x3) (cpu_winograd4.c), and whether it takes g with
 * filters and scratch_len floats of scratch (see NNT_WINO4_IMAGE_TILES). */
int nnt_cpu_wino4_takes(const struct nnt_conv_geom *g, size_t filters, size_t scratch_len);
int nnt_cpu_conv_wino4(const struct nnt_kernels *self, const struct nnt_conv_geom *g, size_t n,
                       size_t filters, int flip, const float *w, const float *bias,
                       const float *x, float *y, float *scratch, size_t scratch_len);
/* conv_wino_dw's F(4x4, 3x3) (cpu_winograd4.c): it takes g where the
 * scratch holds the 36 slices of dU [filters][c] and those of a chunk of
 * min(tiles, NNT_WINO_MIN_TILES) or more tiles beside them. */
int nnt_cpu_wino4_dw_takes(const struct nnt_conv_geom *g, size_t n, size_t filters,
                           size_t scratch_len);
int nnt_cpu_conv_wino4_dw(const struct nnt_kernels *self, const struct nnt_conv_geom *g,
                          size_t n, size_t filters, const float *dy, const float *x, float *dw,
                          float *scratch, size_t scratch_len);
int nnt_cpu_conv_wino_dw(const struct nnt_kernels *self, const struct nnt_conv_geom *g,
                         size_t n, size_t filters, const float *dy, const float *x, float *dw,
                         float *scratch, size_t scratch_len);
int nnt_cpu_col2im(const struct nnt_kernels *self, const struct nnt_conv_geom *g, size_t n,
                   const float *col, float *dx);
int nnt_cpu_col2im_set(const struct nnt_kernels *self, const struct nnt_conv_geom *g, size_t n,
                       const float *col, float *dx);
int nnt_cpu_pool_fwd(const struct nnt_kernels *self, const struct nnt_conv_geom *g, size_t n,
                     int mode, const float *x, float *y, float *idx);
/* 1 when pool_fwd may take the 2x2 stride-2 max path for g. */
int nnt_cpu_pool_is_max2x2(const struct nnt_conv_geom *g);
int nnt_cpu_pool_bwd(const struct nnt_kernels *self, const struct nnt_conv_geom *g, size_t n,
                     int mode, const float *dy, const float *idx, float *dx);

int nnt_cpu_gather_rows(const struct nnt_kernels *self, size_t rows, size_t cols, size_t n,
                        const float *idx, const float *table, size_t mask, float *y);
int nnt_cpu_scatter_add_rows(const struct nnt_kernels *self, size_t rows, size_t cols, size_t n,
                             const float *idx, const float *dy, size_t mask, float *dtable);

int nnt_cpu_ln_fwd(const struct nnt_kernels *self, size_t rows, size_t cols, const float *x,
                   const float *gamma, const float *beta, float eps, float *mean, float *invstd,
                   float *y);
int nnt_cpu_ln_bwd(const struct nnt_kernels *self, size_t rows, size_t cols, const float *x,
                   const float *dy, const float *mean, const float *invstd, const float *gamma,
                   float *dx, float *dgamma, float *dbeta);
int nnt_cpu_pos_encoding(const struct nnt_kernels *self, size_t t, size_t d, float *table);
int nnt_cpu_div(const struct nnt_kernels *self, size_t n, const float *a, const float *b,
                float *y);
/* The compute threads (cpu_pool.c). fn(arg, begin, end) computes the
 * outputs of [begin, end); nnt_cpu_pool_for runs it over [0, n) split
 * into contiguous parts (boundaries at multiples of align, parts of at
 * least min_part, up to 4 per thread, each run by whichever thread takes
 * it first, the caller included), or whole on the
 * calling thread when there are no workers, n is below 2 * min_part, or
 * the workers are busy. _products: the parts call OpenBLAS (run on the
 * calling thread alone under a process memory limit). */
/* act_mask and act_bwd_mask on one thread, over [0, n) (cpu_act_mask.c). */
int nnt_cpu_act_mask1(size_t n, const float *y, float *mask);
int nnt_cpu_act_bwd_mask1(nnt_act a, float alpha, size_t n, const float *mask, const float *dy,
                          float *dx);
typedef void (*nnt_pool_fn)(void *arg, size_t begin, size_t end);
void nnt_cpu_pool_for(size_t n, size_t align, size_t min_part, nnt_pool_fn fn, void *arg);
void nnt_cpu_pool_for_products(size_t n, size_t align, size_t min_part, nnt_pool_fn fn,
                               void *arg);
/* The kernel table's parallel (cpu_pool.c). */
void nnt_cpu_parallel(const struct nnt_kernels *self, size_t n, nnt_pool_fn fn, void *arg);
/* The kernel table's gemm (cpu_gemm.c). */
int nnt_cpu_gemm(const struct nnt_kernels *self, int ta, int tb, size_t m, size_t n, size_t k,
                 float alpha, const float *a, size_t lda, const float *b, size_t ldb, float beta,
                 float *c, size_t ldc);
/* The kernel table's gemm_rows (cpu_gemm.c). */
int nnt_cpu_gemm_rows(const struct nnt_kernels *self, int ta, int tb, size_t m, size_t n,
                      size_t k, float alpha, const float *a, size_t lda, const float *b,
                      size_t ldb, float beta, float *c, size_t ldc);
/* The largest part nnt_cpu_pool_for_products would cut [0, n) into now
 * (n when it would not split it). */
size_t nnt_cpu_pool_largest_part(size_t n, size_t align, size_t min_part);
/* For nnt_cpu_set_threads: stop joins the running workers (OpenBLAS gets
 * its own count back); want records the count asked for, the next start
 * makes n - 1 workers. */
void nnt_cpu_pool_stop(void);
void nnt_cpu_pool_want(unsigned n);
/* Under a process memory limit (*limited set), room for nw more threads'
 * stacks, else NNT_ERR_NOMEM with a message (cpu_blas.c). */
int nnt_cpu_room_for_workers(unsigned nw, int *limited, nnt_err *e);

/* The CPU's op table (nnt_kernels_cpu returns it). */
extern const struct nnt_kernels nnt_cpu_kernel_table;

#endif
