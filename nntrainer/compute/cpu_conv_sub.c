/* The CPU's forward of a 1x1 convolution with a stride (a subsampling
 * 1x1: ResNet's shortcuts) as a product of our own, for conv_fwd where
 * nnt_conv_sub_take says. im2col of such a layer copies every sh-th row's
 * every sw-th value into columns that OpenBLAS then copies again into its
 * own panels; here the subsampled values go straight into the panels the
 * micro-kernel reads, and the input's rows for the next panels are
 * fetched while the products run (ResNet-18's shortcuts on one thread of
 * a Zen 2: 0.54-0.83 of a bare sgemm of the same size -> 0.71-0.90,
 * docs/performance.md).
 *
 * y[i] = W x sub(x[i]) is a sum of tiles of SUB_MR filters by SUB_NR
 * output positions: for every input channel k in order, SUB_MR weights
 * (W's rows, read where they lie) broadcast times a packed row of SUB_NR
 * subsampled input values, added into the tile's accumulators from zero;
 * the bias added last. A part is an image, its outputs written by it
 * alone: the same bits on any number of threads, within rounding of
 * im2col and gemm. The code is chosen by the CPU's features (AVX2 with
 * FMA, else portable C). */
#include <string.h>

#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/kernels.h"
#include "nntrainer/compute/cpu_conv_vec.h"

#define SUB_MR 6
#define SUB_NR 16

/* t[SUB_MR][SUB_NR] = the sum over k < kn, in order, of a[r][k] *
 * b[k][SUB_NR]. */
typedef void (*sub_mk_fn)(size_t kn, const float *const *a, const float *b, float *t);

static void sub_mk_c(size_t kn, const float *const *a, const float *b, float *t) {
  float acc[SUB_MR][SUB_NR] = {{0}};
  for (size_t k = 0; k < kn; k++, b += SUB_NR)
    for (unsigned r = 0; r < SUB_MR; r++) {
      float x = a[r][k];
      for (unsigned j = 0; j < SUB_NR; j++)
        acc[r][j] += x * b[j];
    }
  memcpy(t, acc, sizeof acc);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SUB_FMA2(r)                                                                             \
  do {                                                                                          \
    __m256 x = _mm256_broadcast_ss(a##r + o);                                                   \
    c##r##0 = _mm256_fmadd_ps(x, b0, c##r##0);                                                  \
    c##r##1 = _mm256_fmadd_ps(x, b1, c##r##1);                                                  \
  } while (0)
NNT_CV_AVX2 static void sub_mk_avx2(size_t kn, const float *const *a, const float *b,
                                    float *t) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
  for (size_t o = 0; o < kn; o++, b += SUB_NR) {
    __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    SUB_FMA2(0);
    SUB_FMA2(1);
    SUB_FMA2(2);
    SUB_FMA2(3);
    SUB_FMA2(4);
    SUB_FMA2(5);
  }
  _mm256_storeu_ps(t, c00), _mm256_storeu_ps(t + 8, c01);
  _mm256_storeu_ps(t + 16, c10), _mm256_storeu_ps(t + 24, c11);
  _mm256_storeu_ps(t + 32, c20), _mm256_storeu_ps(t + 40, c21);
  _mm256_storeu_ps(t + 48, c30), _mm256_storeu_ps(t + 56, c31);
  _mm256_storeu_ps(t + 64, c40), _mm256_storeu_ps(t + 72, c41);
  _mm256_storeu_ps(t + 80, c50), _mm256_storeu_ps(t + 88, c51);
}
#endif

/* The micro-kernel of a path, or NULL when this CPU cannot run it. */
static sub_mk_fn sub_mk_of(int path) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (path >= NNT_BLAS_AVX2)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? sub_mk_avx2 : NULL;
#else
  if (path >= NNT_BLAS_AVX2)
    return NULL;
#endif
  return sub_mk_c;
}

typedef struct sub_job {
  const nnt_conv_geom *g;
  size_t n, filters, plane, in_len;
  const float *w, *bias, *x;
  float *y;
  sub_mk_fn mk;
} sub_job;

/* Packed panels on the stack: at most SUB_PACK floats (32 KiB). */
#define SUB_PACK 8192

/* The rows of A from row r0 of mr: row r at base + (r0 + r) * rs, the
 * rows past mr repeating the last (computed, not stored). */
static void sub_rows(const float *base, size_t r0, unsigned mr, size_t rs, const float **a) {
  for (unsigned r = 0; r < SUB_MR; r++)
    a[r] = base + (r0 + (r < mr ? r : mr - 1)) * rs;
}

/* dst[k] = src[k] for k < n <= SUB_NR (a whole row: a copy of fixed size,
 * which compilers make plain moves; a variable memcpy became rep movsq,
 * slow for 64 bytes). */
static inline void sub_copy(float *dst, const float *src, size_t n) {
  if (n == SUB_NR) {
    memcpy(dst, src, SUB_NR * sizeof *dst);
    return;
  }
  for (size_t k = 0; k < n; k++)
    dst[k] = src[k];
}

/* dst[k] = src[k * s] for k < n. */
static inline void sub_take(const float *src, size_t s, size_t n, float *dst) {
  if (s == 2)
    for (size_t k = 0; k < n; k++)
      dst[k] = src[2 * k];
  else
    for (size_t k = 0; k < n; k++)
      dst[k] = src[k * s];
}

/* Positions [p0, p0 + np) of image xi (all g->c channels) packed as tiles
 * [tile][c][SUB_NR]: a channel's positions read along its rows; the
 * columns of a last tile past np zero. */
static void sub_pack_x(const nnt_conv_geom *g, const float *xi, size_t p0, size_t np, float *b) {
  size_t hw = (size_t)g->h * g->w, c = g->c, pad = (SUB_NR - np % SUB_NR) % SUB_NR;
  for (size_t ch = 0; ch < c; ch++) {
    const float *xc = xi + ch * hw;
    size_t oh = p0 / g->ow, ow = p0 % g->ow;
    for (size_t q = 0; q < np;) {
      size_t run = SUB_NR - q % SUB_NR;
      if (run > g->ow - ow)
        run = g->ow - ow;
      if (run > np - q)
        run = np - q;
      sub_take(xc + oh * g->sh * g->w + ow * g->sw, g->sw, run,
               b + q / SUB_NR * c * SUB_NR + ch * SUB_NR + q % SUB_NR);
      q += run, ow += run;
      if (ow == g->ow)
        ow = 0, oh++;
    }
    for (size_t q = np; q < np + pad; q++)
      b[q / SUB_NR * c * SUB_NR + ch * SUB_NR + q % SUB_NR] = 0.0f;
  }
}

/* The lines of the input rows that the next chunk reads (output rows
 * [oh0, oh1) of image xi), fetched a few at a time while this chunk's
 * products run: the packing then finds them in cache instead of waiting
 * on memory for each channel's rows in turn. */
typedef struct sub_pf {
  const nnt_conv_geom *g;
  const float *xi;
  size_t oh0, oh1, per_row, ch, oh, line, each;
} sub_pf;

/* xi NULL: nothing to fetch. calls: how many sub_pf_some share them. */
static void sub_pf_start(sub_pf *f, const nnt_conv_geom *g, const float *xi, size_t p0,
                         size_t np, size_t calls) {
  *f = (sub_pf){.g = g, .xi = xi, .per_row = ((size_t)g->w * sizeof(float) + 63) / 64};
  if (!np || !xi) {
    f->ch = g->c;
    return;
  }
  f->oh0 = f->oh = p0 / g->ow, f->oh1 = (p0 + np - 1) / g->ow + 1;
  size_t lines = g->c * (f->oh1 - f->oh0) * f->per_row;
  f->each = (lines + calls - 1) / calls;
}

static inline void sub_pf_some(sub_pf *f) {
  const nnt_conv_geom *g = f->g;
  for (size_t k = 0; k < f->each && f->ch < g->c; k++) {
    const float *row = f->xi + (f->ch * g->h + f->oh * g->sh) * g->w;
    __builtin_prefetch((const char *)row + f->line * 64, 0, 3);
    if (++f->line < f->per_row)
      continue;
    f->line = 0;
    if (++f->oh < f->oh1)
      continue;
    f->oh = f->oh0, f->ch++;
  }
}

static void sub_fwd_part(void *arg, size_t i0, size_t i1) {
  const sub_job *j = arg;
  const nnt_conv_geom *g = j->g;
  size_t c = g->c, pc = SUB_PACK / (c * SUB_NR) * SUB_NR;
  float b[SUB_PACK], t[SUB_MR * SUB_NR];
  const float *a[SUB_MR];
  for (size_t i = i0; i < i1; i++) {
    float *yi = j->y + i * j->filters * j->plane;
    for (size_t p0 = 0; p0 < j->plane; p0 += pc) {
      size_t np = j->plane - p0 < pc ? j->plane - p0 : pc;
      sub_pack_x(g, j->x + i * j->in_len, p0, np, b);
      sub_pf pf; /* the next chunk: of this image, else of the next */
      size_t n2 = p0 + np < j->plane ? i : i + 1, p2 = n2 == i ? p0 + np : 0;
      size_t np2 = j->plane - p2 < pc ? j->plane - p2 : pc;
      sub_pf_start(&pf, g, n2 < i1 ? j->x + n2 * j->in_len : NULL, p2, np2,
                   (np + SUB_NR - 1) / SUB_NR * ((j->filters + SUB_MR - 1) / SUB_MR));
      for (size_t q0 = 0; q0 < np; q0 += SUB_NR) {
        size_t nq = np - q0 < SUB_NR ? np - q0 : SUB_NR;
        for (size_t f0 = 0; f0 < j->filters; f0 += SUB_MR) {
          unsigned mr = j->filters - f0 < SUB_MR ? (unsigned)(j->filters - f0) : SUB_MR;
          sub_rows(j->w, f0, mr, c, a);
          j->mk(c, a, b + q0 * c, t);
          sub_pf_some(&pf);
          for (unsigned r = 0; r < mr; r++) {
            float *yr = yi + (f0 + r) * j->plane + p0 + q0;
            const float *tr = t + r * SUB_NR;
            float bias = j->bias ? j->bias[f0 + r] : 0.0f;
            if (j->bias)
              for (size_t q = 0; q < nq; q++)
                yr[q] = tr[q] + bias;
            else
              sub_copy(yr, tr, nq);
          }
        }
      }
    }
  }
}

/* Parts of at least about 64K multiply-adds. */
static size_t sub_min_part(size_t per) { return per >= 65536 ? 1 : 65536 / (per + 1) + 1; }

static int sub_job_init(int path, const nnt_conv_geom *g, size_t n, size_t filters,
                        sub_job *j) {
  sub_mk_fn mk = sub_mk_of(path);
  if (!mk || !nnt_conv_sub_take(g, filters))
    return NNT_ERR_INVAL;
  *j = (sub_job){.g = g,
                 .n = n,
                 .filters = filters,
                 .plane = (size_t)g->oh * g->ow,
                 .in_len = nnt_conv_img_stride(g),
                 .mk = mk};
  return NNT_OK;
}

int nnt_cpu_conv_sub_fwd(int path, const nnt_conv_geom *g, size_t n, size_t filters,
                         const float *w, const float *bias, const float *x, float *y) {
  sub_job j;
  int rc = sub_job_init(path, g, n, filters, &j);
  if (rc || !n || !j.plane)
    return rc;
  j.w = w, j.bias = bias, j.x = x, j.y = y;
  nnt_cpu_pool_for(n, 1, sub_min_part(j.plane * filters * g->c), sub_fwd_part, &j);
  return NNT_OK;
}

int nnt_conv_sub_runs(void) {
  return nnt_blas_cpu_rank() == NNT_BLAS_AVX2; /* AVX2 with FMA: sub_mk_avx2 runs */
}
