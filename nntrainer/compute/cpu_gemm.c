/* The CPU backend's matrix product: OpenBLAS, split over the compute
 * threads (cpu_pool.c) by rows or by columns of C. */
#include "nntrainer/compute/kernels.h"
#include "nntrainer/compute/cpu_impl.h"

#include <cblas.h>

/* An argument the entry can see is wrong: NNT_ERR_INVAL. */
#define NEED(cond)                                                                        \
  do {                                                                                    \
    if (!(cond))                                                                          \
      return NNT_ERR_INVAL;                                                               \
  } while (0)

/* A product split over the compute threads (cpu_pool.c) by rows or by
 * columns of C, whichever split_rows expects to be faster: parts are
 * multiples of GEMM_ROWS rows or GEMM_COLS columns (OpenBLAS's AVX-512
 * kernels take 16 or 32 columns at a time) of at least GEMM_MIN_PART
 * multiply-adds. */
#define GEMM_COLS 32
#define GEMM_ROWS 8
#define GEMM_MIN_PART NNT_CPU_GEMM_MIN_PART
/* A row part of fewer rows than this runs OpenBLAS's kernels below their
 * pace (measured: see split_rows). */
#define GEMM_ROWS_FULL 64
/* OpenBLAS (0.3.21 on AVX-512, read in its interface/gemm.c and
 * kernel/x86_64/sgemm_direct_skylakex.c) computes a row-major product
 * without transposes, alpha 1 and beta 0, of fewer than 28 * 512 * 512
 * multiply-adds and a multiple of 4 columns on a "direct" path that
 * rounds differently (no blocking over k); its small-matrix kernels take
 * products of at most 10^6 (sgemm_small_kernel_permit_skylakex.c). A part
 * must take the whole product's path:
 * such a product is split only into parts of at least this many, and no
 * product into parts below GEMM_MIN_PART. On kernel paths where a split
 * was measured to change no bit (nnt_cpu_blas_split_exact: AVX-512; by
 * columns at multiples of 32 and by rows at any row) test_pool trains
 * bitwise at one and two threads; elsewhere a split product differs from
 * the whole one in its last bits, as OpenBLAS's own threads make it
 * differ. */
#define GEMM_DIRECT_MNK ((size_t)28 * 512 * 512)

typedef struct gemm_job {
  int ta, tb;
  size_t m, n, k;
  float alpha;
  const float *a;
  size_t lda;
  const float *b;
  size_t ldb;
  float beta;
  float *c;
  size_t ldc;
} gemm_job;

/* columns [c0, c1) of C */
static void gemm_part(void *p, size_t c0, size_t c1) {
  const gemm_job *j = p;
  const float *b = j->b + (j->tb ? c0 * j->ldb : c0);
  cblas_sgemm(CblasRowMajor, j->ta ? CblasTrans : CblasNoTrans,
              j->tb ? CblasTrans : CblasNoTrans, (int)j->m, (int)(c1 - c0), (int)j->k, j->alpha,
              j->a, (int)j->lda, b, (int)j->ldb, j->beta, j->c + c0, (int)j->ldc);
}

/* rows [r0, r1) of C */
static void gemm_rows_part(void *p, size_t r0, size_t r1) {
  const gemm_job *j = p;
  const float *a = j->a + (j->ta ? r0 : r0 * j->lda);
  cblas_sgemm(CblasRowMajor, j->ta ? CblasTrans : CblasNoTrans,
              j->tb ? CblasTrans : CblasNoTrans, (int)(r1 - r0), (int)j->n, (int)j->k, j->alpha, a,
              (int)j->lda, j->b, (int)j->ldb, j->beta, j->c + r0 * j->ldc, (int)j->ldc);
}

/* Whether to split C by rows rather than by columns. Measured at two
 * threads on this Zen 5 (OpenBLAS 0.3.21's Cooperlake kernels) for the
 * products of the benchmark models' convolutions in their three transpose
 * cases: a row split ran 1.7x to 1.95x one thread's speed for every
 * product of 117 or more rows, where a column split ran 0.9x to 1.7x (a
 * derivative's 576 x 1024 x 64 and 1152 x 256 x 128: 0.9x and 1.1x
 * against 1.9x by rows; a forward's 512 x 96 x 4608, whose 96 columns cut
 * into 64 + 32: 1.2x against 1.85x); columns won only where a row part
 * would have 32 rows (64 filters by a 32x32 plane: 1.5x to 1.7x against
 * 1.2x to 1.4x). So: rows, unless a row part would have fewer than
 * GEMM_ROWS_FULL rows, or the rows cannot be split and the columns can,
 * or the row parts are less even than the column parts by a quarter.
 * The choice depends on the shape and the thread count alone: the same
 * split at every run. The parts are those nnt_cpu_pool_for_products
 * cuts. */
static int split_rows(size_t m, size_t n, size_t rmin, size_t cmin) {
  size_t r = nnt_cpu_pool_largest_part(m, GEMM_ROWS, rmin);
  size_t c = nnt_cpu_pool_largest_part(n, GEMM_COLS, cmin);
  if (r == m || c == n) /* one cannot be split */
    return c == n && r < m;
  /* the largest parts' shares of C: r / m and c / n */
  return r >= GEMM_ROWS_FULL && 4 * r * n <= 5 * c * m;
}

/* beta == 0 overwrites C without reading it (OpenBLAS does the same, so a
 * NaN left in a reused buffer does not leak through). Empty products are
 * handled here so OpenBLAS never sees a zero leading dimension.
 * keep_rows (gemm_rows): where a split may change bits
 * (nnt_cpu_blas_split_exact is 0), C is cut by rows only, at multiples
 * of nnt_cpu_blas_row_quantum, so that every row has the bits of one
 * whole product on one thread, and so has a block of rows asked for at
 * a multiple of NNT_GEMM_ROW_BLOCK. */
static int gemm(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a,
                size_t lda, const float *b, size_t ldb, float beta, float *c, size_t ldc,
                int keep_rows) {
  if (!m || !n)
    return NNT_OK;
  NEED(c && m <= NNT_GEMM_DIM_MAX && n <= NNT_GEMM_DIM_MAX && ldc >= n &&
       ldc <= NNT_GEMM_DIM_MAX);
  if (!k) {
    for (size_t i = 0; i < m; i++) {
      if (beta == 0)
        for (size_t j = 0; j < n; j++)
          c[i * ldc + j] = 0;
      else
        for (size_t j = 0; j < n; j++)
          c[i * ldc + j] *= beta;
    }
    return NNT_OK;
  }
  NEED(a && b && k <= NNT_GEMM_DIM_MAX && lda >= (ta ? m : k) && ldb >= (tb ? k : n) &&
       lda <= NNT_GEMM_DIM_MAX && ldb <= NNT_GEMM_DIM_MAX);
  gemm_job j = {ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc};
  /* each part the same products over the same k, in the same order
   * (bitwise the whole product's on the kernels above) when it keeps
   * GEMM_MIN_PART multiply-adds, and GEMM_DIRECT_MNK where a part could
   * take the direct path the whole does not. A whole that takes it
   * (fewer multiply-adds, a multiple of 4 columns) splits into parts
   * that take it too (rows keep n; column parts are multiples of
   * GEMM_COLS, the last one n less those): measured bitwise on the
   * AVX-512 kernels at every row multiple of 8 and column multiple of 16
   * for the direct products of conv2d's groups (ResNet-18's res3a_sc
   * forward, 256 x 192 x 128, the Fashion-MNIST CNN's 32 x 196 x 144),
   * while a 96 x 200 x 500 one, not direct, split into direct parts
   * differed. */
  int plain = !ta && !tb && alpha == 1.0f && beta == 0.0f;
  int direct = plain && n % 4 == 0 && m * n * k < GEMM_DIRECT_MNK;
  size_t min_part = plain && !direct ? GEMM_DIRECT_MNK : GEMM_MIN_PART;
  size_t cols = (min_part + m * k - 1) / (m * k), rows = (min_part + n * k - 1) / (n * k);
  size_t quantum = keep_rows && !nnt_cpu_blas_split_exact() ? nnt_cpu_blas_row_quantum() : 0;
  if (quantum)
    nnt_cpu_pool_for_products(m, quantum, rows, gemm_rows_part, &j);
  else if (split_rows(m, n, rows, cols))
    nnt_cpu_pool_for_products(m, GEMM_ROWS, rows, gemm_rows_part, &j);
  else
    nnt_cpu_pool_for_products(n, GEMM_COLS, cols, gemm_part, &j);
  return NNT_OK;
}

int nnt_cpu_gemm(const struct nnt_kernels *self, int ta, int tb, size_t m, size_t n, size_t k,
                 float alpha, const float *a, size_t lda, const float *b, size_t ldb, float beta,
                 float *c, size_t ldc) {
  (void)self;
  return gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, 0);
}

int nnt_cpu_gemm_rows(const struct nnt_kernels *self, int ta, int tb, size_t m, size_t n,
                      size_t k, float alpha, const float *a, size_t lda, const float *b,
                      size_t ldb, float beta, float *c, size_t ldc) {
  (void)self;
  return gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, 1);
}
