/* CPU batch-normalization kernels. The loops (cpu_norm_loops.h) are
 * compiled three times on x86-64, for the baseline ISA, for AVX2 and for
 * AVX-512, and each op runs the widest copy this CPU has: the same
 * arithmetic (the C, or for the backward's sums on AVX2 and AVX-512 the
 * same adds in intrinsics), so the same bits (test_kernels_ops checks the
 * paths against each other),
 * about 1.6x faster on AVX2 than on the baseline (docs/performance.md).
 * Work is split over channels on one thread's pool-less runs and for
 * large batch norms, over images on two or more compute threads
 * (cpu_pool.c; bn_run below): either way every sum over a channel adds
 * the same per-image sums in image order, so a split changes no result. */
#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/kernels.h"

#include <math.h>
#include <stdlib.h>

/* y of one element: bn_fwd_train and bn_affine share it, so that the
 * output recomputed from xhat is bitwise the first (C11: no contraction
 * into a fused multiply-add, -ffp-contract=off). */
static inline float bn_affine1(float g, float h, float b) { return g * h + b; }

typedef nnt_cpu_bn_args bn_job;

/* Parts of at least this many values (a channel's outer * inner). */
#define BN_MIN_PART 16384

static size_t bn_min_channels(const bn_job *j) {
  size_t per = j->outer * j->inner;
  return per >= BN_MIN_PART ? 1 : (per ? BN_MIN_PART / per : BN_MIN_PART);
}

#define NL(name) name##_c
#include "nntrainer/compute/cpu_norm_loops.h"
#undef NL

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define BN_HAVE_AVX2 1
#include <immintrin.h>
#pragma GCC push_options
#pragma GCC target("avx2")
#define NL(name) name##_avx2
#define BN_LOOPS_AVX2 1
#include "nntrainer/compute/cpu_norm_loops.h"
#undef BN_LOOPS_AVX2
#undef NL
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f")
#define NL(name) name##_avx512
#define BN_LOOPS_AVX512 1
#include "nntrainer/compute/cpu_norm_loops.h"
#undef BN_LOOPS_AVX512
#undef NL
#pragma GCC pop_options
#endif

/* The copy of the loops for path: 0 plain C, 1 AVX2, 2 AVX-512; -1 when
 * this CPU cannot run it. */
static int bn_copy(int path) {
  if (path < NNT_BLAS_AVX2)
    return 0;
#ifdef BN_HAVE_AVX2
  __builtin_cpu_init();
  if (path >= NNT_BLAS_AVX512)
    return __builtin_cpu_supports("avx512f") ? 2 : -1;
  return __builtin_cpu_supports("avx2") ? 1 : -1;
#else
  return -1;
#endif
}

/* The part function of op on path, or NULL when this CPU cannot run it. */
static nnt_pool_fn bn_part(int path, int op) {
  static const nnt_pool_fn fns[][5] = {
      {fwd_train_part_c, fwd_infer_part_c, bwd_part_c, affine_part_c, stats_part_c},
#ifdef BN_HAVE_AVX2
      {fwd_train_part_avx2, fwd_infer_part_avx2, bwd_part_avx2, affine_part_avx2,
       stats_part_avx2},
      {fwd_train_part_avx512, fwd_infer_part_avx512, bwd_part_avx512, affine_part_avx512,
       stats_part_avx512},
#endif
  };
  int k = bn_copy(path);
  return k < 0 ? NULL : fns[k][op];
}

/* The split over images, on two or more threads: each thread keeps to its
 * own images, as the convolutions, activations and pooling around it do
 * (split by channels, every channel's values on both cores: on a VM whose
 * cores share no cache most of them crossed between the cores;
 * docs/performance.md). The sums over a channel are made per image in
 * parallel and added here in image order, as the split over channels adds
 * them: the same bits. They are kept on this thread's stack: the forward
 * takes at most BN_IMG_PAIRS (image, channel) pairs, the backward half as
 * many (two sums each); larger ones split over channels. */
#define BN_IMG_PAIRS 4096
enum { IMG_SUM, IMG_SQDEV, IMG_NORM, IMG_INFER, IMG_DYSUM, IMG_DX, IMG_AFFINE };

static nnt_pool_fn bn_img_part(int path, int which) {
  static const nnt_pool_fn fns[][7] = {
      {sum_img_part_c, sqdev_img_part_c, norm_img_part_c, infer_img_part_c, dysum_img_part_c,
       dx_img_part_c, affine_img_part_c},
#ifdef BN_HAVE_AVX2
      {sum_img_part_avx2, sqdev_img_part_avx2, norm_img_part_avx2, infer_img_part_avx2,
       dysum_img_part_avx2, dx_img_part_avx2, affine_img_part_avx2},
      {sum_img_part_avx512, sqdev_img_part_avx512, norm_img_part_avx512, infer_img_part_avx512,
       dysum_img_part_avx512, dx_img_part_avx512, affine_img_part_avx512},
#endif
  };
  int k = bn_copy(path);
  return k < 0 ? NULL : fns[k][which]; /* bn_part checked the CPU */
}

static int by_images(const bn_job *j, int op) {
  size_t pairs = j->outer * j->ch;
  if (j->outer < 2 || pairs * j->inner < 2 * BN_MIN_PART || nnt_cpu_pool_threads() < 2)
    return 0;
  return op == NNT_BN_FWD_TRAIN ? pairs <= BN_IMG_PAIRS
         : op == NNT_BN_BWD     ? 2 * pairs <= BN_IMG_PAIRS
                                : 1;
}

static void img_for(int path, int which, bn_job *j) {
  size_t per = j->ch * j->inner;
  nnt_cpu_pool_for(j->outer, 1, per >= BN_MIN_PART ? 1 : BN_MIN_PART / per,
                   bn_img_part(path, which), j);
}

static int bn_run(int path, int op, bn_job *j) {
  nnt_pool_fn fn = op >= 0 && op <= NNT_BN_FWD_STATS ? bn_part(path, op) : NULL;
  if (!fn)
    return NNT_ERR_INVAL;
  if (!by_images(j, op) || op == NNT_BN_FWD_STATS) {
    nnt_cpu_pool_for(j->ch, 1, bn_min_channels(j), fn, j);
    return NNT_OK;
  }
  size_t outer = j->outer, ch = j->ch;
  double n = (double)outer * j->inner;
  double part[BN_IMG_PAIRS], chan[BN_IMG_PAIRS / 2];
  j->part = part;
  j->chan = chan;
  if (op == NNT_BN_FWD_TRAIN) {
    img_for(path, IMG_SUM, j);
    for (size_t c = 0; c < ch; c++) {
      double s = 0;
      for (size_t o = 0; o < outer; o++)
        s += part[o * ch + c];
      chan[c] = s / n;
    }
    img_for(path, IMG_SQDEV, j);
    for (size_t c = 0; c < ch; c++) {
      double s2 = 0;
      for (size_t o = 0; o < outer; o++)
        s2 += part[o * ch + c];
      double v = s2 / n;
      j->mean[c] = (float)chan[c];
      j->var[c] = (float)v;
      j->invstd[c] = (float)(1.0 / sqrt(v + j->eps));
    }
    img_for(path, IMG_NORM, j);
  } else if (op == NNT_BN_BWD) {
    float means[BN_IMG_PAIRS / 2]; /* 2 ch: by_images took 2 outer ch <= BN_IMG_PAIRS */
    const float *given = j->means_in;
    if (!given) {
      img_for(path, IMG_DYSUM, j);
      for (size_t c = 0; c < ch; c++) {
        double sdy = 0, sdyx = 0;
        for (size_t o = 0; o < outer; o++) {
          sdy += part[2 * (o * ch + c)];
          sdyx += part[2 * (o * ch + c) + 1];
        }
        if (j->dgamma)
          j->dgamma[c] = (float)sdyx;
        if (j->dbeta)
          j->dbeta[c] = (float)sdy;
        means[c] = (float)(sdy / n), means[ch + c] = (float)(sdyx / n);
        if (j->means_out)
          j->means_out[c] = means[c], j->means_out[ch + c] = means[ch + c];
      }
      j->means_in = means;
    }
    if (j->dx)
      img_for(path, IMG_DX, j);
    j->means_in = given;
  } else {
    img_for(path, op == NNT_BN_FWD_INFER ? IMG_INFER : IMG_AFFINE, j);
  }
  j->part = j->chan = NULL;
  return NNT_OK;
}

/* The widest path this CPU runs. */
static int bn_best(void) {
  return bn_copy(NNT_BLAS_AVX512) > 0 ? NNT_BLAS_AVX512
         : bn_copy(NNT_BLAS_AVX2) > 0 ? NNT_BLAS_AVX2
                                      : NNT_BLAS_SSE;
}

int nnt_cpu_bn_path(int path, int op, nnt_cpu_bn_args *a) { return bn_run(path, op, a); }

int nnt_cpu_bn_fwd_train(const struct nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                         const float *x, const float *gamma, const float *beta, float eps,
                         float *mean, float *var, float *invstd, float *xhat, float *y) {
  (void)self;
  bn_job j = {.outer = outer, .ch = ch, .inner = inner, .x = x, .gamma = gamma, .beta = beta,
              .eps = eps, .mean = mean, .var = var, .invstd = invstd, .xhat = xhat, .y = y};
  return bn_run(bn_best(), NNT_BN_FWD_TRAIN, &j);
}

int nnt_cpu_bn_fwd_infer(const struct nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                         const float *x, const float *mean, const float *var, const float *gamma,
                         const float *beta, float eps, float *y) {
  (void)self;
  bn_job j = {.outer = outer, .ch = ch, .inner = inner, .x = x, .gamma = gamma, .beta = beta,
              .mean_in = mean, .var_in = var, .eps = eps, .y = y};
  return bn_run(bn_best(), NNT_BN_FWD_INFER, &j);
}

int nnt_cpu_bn_bwd(const struct nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                   const float *dy, const float *xhat, const float *invstd, const float *gamma,
                   float *dx, float *dgamma, float *dbeta) {
  (void)self;
  bn_job j = {.outer = outer, .ch = ch, .inner = inner, .dy = dy, .xhat_in = xhat,
              .invstd_in = invstd, .gamma = gamma, .dx = dx, .dgamma = dgamma, .dbeta = dbeta};
  return bn_run(bn_best(), NNT_BN_BWD, &j);
}

/* bn_bwd in two calls (kernels.h): with dx NULL the sums, dgamma, dbeta
 * and the means; with dx the means read and dx written. */
int nnt_cpu_bn_bwd_means(const struct nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                         const float *dy, const float *xhat, const float *invstd,
                         const float *gamma, float *dx, float *dgamma, float *dbeta,
                         float *means) {
  (void)self;
  if (!means)
    return NNT_ERR_INVAL;
  bn_job j = {.outer = outer, .ch = ch, .inner = inner, .dy = dy, .xhat_in = xhat,
              .invstd_in = invstd, .gamma = gamma, .dx = dx};
  if (dx)
    j.means_in = means;
  else
    j.dgamma = dgamma, j.dbeta = dbeta, j.means_out = means;
  return bn_run(bn_best(), NNT_BN_BWD, &j);
}

int nnt_cpu_bn_fwd_stats(const struct nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                         const float *x, const float *mean, const float *invstd,
                         const float *gamma, const float *beta, float *y) {
  (void)self;
  bn_job j = {.outer = outer, .ch = ch, .inner = inner, .x = x, .gamma = gamma, .beta = beta,
              .mean_in = mean, .invstd_in = invstd, .y = y};
  return bn_run(bn_best(), NNT_BN_FWD_STATS, &j);
}

int nnt_cpu_bn_affine(const struct nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                      const float *xhat, const float *gamma, const float *beta, float *y) {
  (void)self;
  bn_job j = {.outer = outer, .ch = ch, .inner = inner, .xhat_in = xhat, .gamma = gamma,
              .beta = beta, .y = y};
  return bn_run(bn_best(), NNT_BN_AFFINE, &j);
}
