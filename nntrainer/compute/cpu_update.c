/* The CPU's optimizer updates (the kernel table's sgd_step and
 * adam_step): the plain loops, their AVX-512 and AVX2 copies, the
 * floating-point mode they run in, and their parts on the compute threads
 * (cpu_pool.c: each part the one-thread loop on a slice of the elements,
 * so every value is computed as on one thread; parts of at least
 * UPD_MIN_PART_SGD elements, UPD_MIN_PART_ADAM for Adam's square roots
 * and divisions). */
#include <math.h>
#include <string.h>

#include "nntrainer/compute/kernels.h"
#include "nntrainer/compute/cpu_impl.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

#define UPD_MIN_PART_SGD 16384
#define UPD_MIN_PART_ADAM 2048

typedef struct upd_job {
  const nnt_kernels *self;
  float lr, b1, b2, eps, wscale;
  const float *g;
  float *m, *v, *w;
} upd_job;

/* The optimizer updates run in the library's floating-point mode
 * (common.h nnt_fp_flush_begin: on x86, MXCSR's FTZ and DAZ for the
 * update's duration on the thread that runs it, restored after), also
 * when called outside a training step: a value below the smallest normal
 * float, read or computed, is 0 in them. What they store passes through
 * nnt_flush_subnormal as well, but an intermediate (lr_t m of a moment
 * decaying toward 0, the square of a tiny gradient) that comes out
 * subnormal costs a microcode assist on x86, some hundred cycles an
 * element: the Fashion-MNIST MLP's step with Adam grew 17% after its
 * first epoch that way (docs/performance.md, "Epoch drift"). */
static inline unsigned fp_flush_begin(void) { return nnt_fp_flush_begin(); }
static inline void fp_flush_end(unsigned csr) { nnt_fp_mode_set(csr); }

int nnt_cpu_update_flushes(void) {
#if defined(__x86_64__) || defined(__i386__)
  return 1;
#else
  return 0;
#endif
}

/* The SGD update, also compiled for AVX-512 and taken when the CPU has it
 * (a test per call, no ifunc, as train_check.c's scan): the SSE loop's
 * instructions, not memory, bounded it (6% of the benchmark MLP's step).
 * The same operations in the same order (C11 contracts no multiply-add):
 * the same bits. */
static inline __attribute__((always_inline)) void sgd_loop(size_t n, float lr, const float *g,
                                                           float *w) {
  for (size_t i = 0; i < n; i++)
    w[i] = nnt_flush_subnormal(w[i] - lr * g[i]);
}
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx512f"))) static void sgd_loop_avx512(size_t n, float lr,
                                                               const float *g, float *w) {
  sgd_loop(n, lr, g, w);
}
#define NNT_HAVE_AVX512_SGD 1
#endif

static int sgd_step1(const nnt_kernels *self, size_t n, float lr, const float *g, float *w,
                     const float *skip) {
  (void)self;
  if (skip && *skip != 0)
    return NNT_OK;
  unsigned csr = fp_flush_begin();
#ifdef NNT_HAVE_AVX512_SGD
  if (__builtin_cpu_supports("avx512f"))
    sgd_loop_avx512(n, lr, g, w);
  else
#endif
    sgd_loop(n, lr, g, w);
  fp_flush_end(csr);
  return NNT_OK;
}

/* The Adam update, in vectors of 16 (AVX-512) or 8 (AVX2) where the CPU
 * has them, the rest (and other CPUs) in the plain loop: every operation
 * of the plain loop in its order (no multiply-add; a vector square root
 * and division round as the scalar ones do): the same bits. The plain
 * loop's square root keeps it scalar (sqrtf sets errno), 10 to 20 times
 * slower than the vectors: the Fashion-MNIST MLP's step with Adam took
 * three times its step with SGD (docs/performance.md). */
static inline __attribute__((always_inline)) void adam_loop(size_t n, float lr_t, float b1,
                                                            float b2, float eps,
                                                            const float *g, float *m,
                                                            float *v, float *w) {
  for (size_t i = 0; i < n; i++) {
    m[i] = nnt_flush_subnormal(b1 * m[i] + (1 - b1) * g[i]);
    v[i] = nnt_flush_subnormal(b2 * v[i] + (1 - b2) * g[i] * g[i]);
    w[i] = nnt_flush_subnormal(w[i] - lr_t * m[i] / (sqrtf(v[i]) + eps));
  }
}
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx512f"))) static inline __m512 adam_flush512(__m512 x) {
  __mmask16 normal = _mm512_test_epi32_mask(_mm512_castps_si512(x),
                                            _mm512_set1_epi32(0x7f800000));
  return _mm512_maskz_mov_ps(normal, x);
}
__attribute__((target("avx512f"))) static size_t adam_avx512(size_t n, float lr_t, float b1,
                                                             float b2, float eps,
                                                             const float *g, float *m,
                                                             float *v, float *w) {
  __m512 vb1 = _mm512_set1_ps(b1), vc1 = _mm512_set1_ps(1 - b1), vb2 = _mm512_set1_ps(b2);
  __m512 vc2 = _mm512_set1_ps(1 - b2), vlr = _mm512_set1_ps(lr_t), veps = _mm512_set1_ps(eps);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 gi = _mm512_loadu_ps(g + i);
    __m512 mi = adam_flush512(_mm512_add_ps(_mm512_mul_ps(vb1, _mm512_loadu_ps(m + i)),
                                            _mm512_mul_ps(vc1, gi)));
    __m512 vi = adam_flush512(_mm512_add_ps(_mm512_mul_ps(vb2, _mm512_loadu_ps(v + i)),
                                            _mm512_mul_ps(_mm512_mul_ps(vc2, gi), gi)));
    __m512 step = _mm512_div_ps(_mm512_mul_ps(vlr, mi), _mm512_add_ps(_mm512_sqrt_ps(vi), veps));
    _mm512_storeu_ps(m + i, mi);
    _mm512_storeu_ps(v + i, vi);
    _mm512_storeu_ps(w + i, adam_flush512(_mm512_sub_ps(_mm512_loadu_ps(w + i), step)));
  }
  return i;
}
__attribute__((target("avx2"))) static inline __m256 adam_flush256(__m256 x) {
  __m256i e = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7f800000));
  __m256i zero = _mm256_cmpeq_epi32(e, _mm256_setzero_si256());
  return _mm256_andnot_ps(_mm256_castsi256_ps(zero), x);
}
__attribute__((target("avx2"))) static size_t adam_avx2(size_t n, float lr_t, float b1,
                                                        float b2, float eps, const float *g,
                                                        float *m, float *v, float *w) {
  __m256 vb1 = _mm256_set1_ps(b1), vc1 = _mm256_set1_ps(1 - b1), vb2 = _mm256_set1_ps(b2);
  __m256 vc2 = _mm256_set1_ps(1 - b2), vlr = _mm256_set1_ps(lr_t), veps = _mm256_set1_ps(eps);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 gi = _mm256_loadu_ps(g + i);
    __m256 mi = adam_flush256(_mm256_add_ps(_mm256_mul_ps(vb1, _mm256_loadu_ps(m + i)),
                                            _mm256_mul_ps(vc1, gi)));
    __m256 vi = adam_flush256(_mm256_add_ps(_mm256_mul_ps(vb2, _mm256_loadu_ps(v + i)),
                                            _mm256_mul_ps(_mm256_mul_ps(vc2, gi), gi)));
    __m256 step = _mm256_div_ps(_mm256_mul_ps(vlr, mi), _mm256_add_ps(_mm256_sqrt_ps(vi), veps));
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    _mm256_storeu_ps(w + i, adam_flush256(_mm256_sub_ps(_mm256_loadu_ps(w + i), step)));
  }
  return i;
}
#define NNT_HAVE_VECTOR_ADAM 1
#endif

/* path: NNT_BLAS_AVX512, NNT_BLAS_AVX2 or lower (the plain loop), taken
 * only where the CPU has it. */
void nnt_cpu_adam_path(int path, size_t n, float lr_t, float b1, float b2, float eps,
                       float wscale, const float *g, float *m, float *v, float *w) {
  unsigned csr = fp_flush_begin();
  if (wscale != 1.0f)
    for (size_t i = 0; i < n; i++)
      w[i] *= wscale;
  size_t i = 0;
#ifdef NNT_HAVE_VECTOR_ADAM
  if (path >= NNT_BLAS_AVX512 && __builtin_cpu_supports("avx512f"))
    i = adam_avx512(n, lr_t, b1, b2, eps, g, m, v, w);
  else if (path >= NNT_BLAS_AVX2 && __builtin_cpu_supports("avx2"))
    i = adam_avx2(n, lr_t, b1, b2, eps, g, m, v, w);
#else
  (void)path;
#endif
  adam_loop(n - i, lr_t, b1, b2, eps, g + i, m + i, v + i, w + i);
  fp_flush_end(csr);
}

static int adam_step1(const nnt_kernels *self, size_t n, float lr_t, float b1, float b2,
                      float eps, float wscale, const float *g, float *m, float *v, float *w,
                      const float *skip) {
  (void)self;
  if (skip && *skip != 0)
    return NNT_OK;
  nnt_cpu_adam_path(NNT_BLAS_AVX512, n, lr_t, b1, b2, eps, wscale, g, m, v, w);
  return NNT_OK;
}

static void sgd_part(void *p, size_t b, size_t e) {
  const upd_job *j = p;
  sgd_step1(j->self, e - b, j->lr, j->g + b, j->w + b, NULL);
}

int nnt_cpu_sgd_step(const nnt_kernels *self, size_t n, float lr, const float *g, float *w,
                     const float *skip) {
  if (skip && *skip != 0)
    return NNT_OK;
  upd_job j = {.self = self, .lr = lr, .g = g, .w = w};
  nnt_cpu_pool_for(n, 16, UPD_MIN_PART_SGD, sgd_part, &j);
  return NNT_OK;
}

static void adam_part(void *p, size_t b, size_t e) {
  const upd_job *j = p;
  adam_step1(j->self, e - b, j->lr, j->b1, j->b2, j->eps, j->wscale, j->g + b, j->m + b,
             j->v + b, j->w + b, NULL);
}

int nnt_cpu_adam_step(const nnt_kernels *self, size_t n, float lr_t, float b1, float b2,
                      float eps, float wscale, const float *g, float *m, float *v, float *w,
                      const float *skip) {
  if (skip && *skip != 0)
    return NNT_OK;
  upd_job j = {.self = self, .lr = lr_t, .b1 = b1, .b2 = b2, .eps = eps, .wscale = wscale,
               .g = g, .m = m, .v = v, .w = w};
  nnt_cpu_pool_for(n, 16, UPD_MIN_PART_ADAM, adam_part, &j);
  return NNT_OK;
}
