/* The weight gradient of a stride-1, dilation-1 square convolution with
 * the filters in the lanes (conv_bwd_w where nnt_conv_rows_dw_take says:
 * cpu_conv_direct.c asks): dW[f][c][a][b] = sum over images, output rows
 * y and columns x (in that order) of dY[f][y][x] X[c][y + a - pt][x + b -
 * pl], X zero outside its plane.
 *
 * The row-vector gradient (cpu_conv_direct.c, dW by kernel rows) holds
 * output columns in its lanes: LeNet-5's c2 fills 10 of 16, and each
 * (filter block, channel) part streams its images' dY and X once per
 * kernel row. Here a part is a block of input channels; for each block of
 * FBW = OV x LANES filters and each image it lays that image's dY out as
 * [position][filter] (zeros past the last filter) and each channel's
 * plane with its padding around it, so that every position adds, for
 * every tap (a, b) of AR kernel rows, the broadcast input value times the
 * position's filter vectors: AR x K x OV accumulators, saved between
 * images in the part's own buffer (the same sums in the same order: the
 * bits do not depend on the images' split, and each output is written by
 * one part alone). */
#include <stdint.h>
#include <string.h>

#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/kernels.h"
#include "nntrainer/compute/cpu_conv_vec.h"

#define RW_MAX_CB 8 /* input channels a part */

typedef struct rw_job {
  const nnt_conv_geom *g;
  size_t n, filters;
  const float *x, *dy;
  float *dw;
  const struct rw_kind *kind;
} rw_job;

/* One image's taps of kernel rows [a0, a0 + AR) of one channel over the
 * output rows [y0, y1): xp the padded plane (pw floats a row), dt those
 * rows' dY as [position][FBW], acc the saved accumulators [AR][K][OV] of
 * LANES floats. */
typedef void (*rw_fn)(const rw_job *j, const float *xp, unsigned pw, const float *dt,
                      unsigned a0, unsigned y0, unsigned y1, float *acc);

typedef struct rw_kind {
  unsigned lanes, ov, ar;
  rw_fn fn[2]; /* K = 3, 5 */
  int vec_lay; /* dY laid out 8 x 8 at a time by AVX2 (lay8_avx2) */
} rw_kind;

#define RW_DEF(NAME, ATTR, VEC, LANES, ZERO, LOAD, STORE, SET1, FMA, K, AR, OV)                   \
  ATTR static void NAME(const rw_job *j, const float *xp, unsigned pw, const float *dt,          \
                        unsigned a0, unsigned y0, unsigned y1, float *acc) {                      \
    const nnt_conv_geom *g = j->g;                                                                \
    unsigned nr = (K)-a0 < (AR) ? (K)-a0 : (AR);                                                  \
    VEC s[AR][K][OV];                                                                             \
    _Pragma("GCC unroll 8") for (unsigned r = 0; r < (AR); r++)                                  \
        _Pragma("GCC unroll 8") for (unsigned b = 0; b < (K); b++)                               \
            _Pragma("GCC unroll 4") for (unsigned v = 0; v < (OV); v++) s[r][b][v] =             \
                LOAD(acc + ((r * (K) + b) * (OV) + v) * (LANES));                                 \
    for (unsigned y = y0; y < y1; y++) {                                                          \
      const float *xr = xp + (size_t)(y + a0) * pw;                                               \
      const float *dr = dt + (size_t)(y - y0) * g->ow * (OV) * (LANES);                           \
      for (unsigned x = 0; x < g->ow; x++, xr++, dr += (OV) * (LANES)) {                          \
        VEC d[OV];                                                                                \
        _Pragma("GCC unroll 4") for (unsigned v = 0; v < (OV); v++) d[v] =                       \
            LOAD(dr + v * (LANES));                                                               \
        _Pragma("GCC unroll 8") for (unsigned r = 0; r < (AR); r++) if (r < nr)                  \
            _Pragma("GCC unroll 8") for (unsigned b = 0; b < (K); b++) {                         \
          VEC t = SET1(xr[(size_t)r * pw + b]);                                                   \
          _Pragma("GCC unroll 4") for (unsigned v = 0; v < (OV); v++) s[r][b][v] =               \
              FMA(t, d[v], s[r][b][v]);                                                           \
        }                                                                                         \
      }                                                                                           \
    }                                                                                             \
    _Pragma("GCC unroll 8") for (unsigned r = 0; r < (AR); r++)                                  \
        _Pragma("GCC unroll 8") for (unsigned b = 0; b < (K); b++)                               \
            _Pragma("GCC unroll 4") for (unsigned v = 0; v < (OV); v++)                          \
                STORE(acc + ((r * (K) + b) * (OV) + v) * (LANES), s[r][b][v]);                    \
  }

/* The portable vectors: RW_LANES_C floats, products rounded before the
 * add (within rounding of the other paths). */
#define RW_LANES_C 8
NNT_CV_PORTABLE(rw, RW_LANES_C)
RW_DEF(rw_c_3, , rw_vec, RW_LANES_C, rw_zero(), rw_load, rw_store, rw_set1, rw_madd, 3, 1, 1)
RW_DEF(rw_c_5, , rw_vec, RW_LANES_C, rw_zero(), rw_load, rw_store, rw_set1, rw_madd, 5, 1, 1)
static const rw_kind rw_c = {RW_LANES_C, 1, 1, {rw_c_3, rw_c_5}, 0};

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* AVX-512: 32 registers, 18 accumulators for 3x3 (32 filters a block), 25
 * for 5x5 (16); AVX2: 16 registers, 9 for 3x3 and 10 for 5x5 (two kernel
 * rows a pass), 8 filters a block. */
RW_DEF(rw_512_3, NNT_CV_AVX512, __m512, 16, _mm512_setzero_ps(), _mm512_loadu_ps, _mm512_storeu_ps,
       _mm512_set1_ps, _mm512_fmadd_ps, 3, 3, 2)
RW_DEF(rw_512_3n, NNT_CV_AVX512, __m512, 16, _mm512_setzero_ps(), _mm512_loadu_ps, _mm512_storeu_ps,
       _mm512_set1_ps, _mm512_fmadd_ps, 3, 3, 1)
RW_DEF(rw_512_5, NNT_CV_AVX512, __m512, 16, _mm512_setzero_ps(), _mm512_loadu_ps, _mm512_storeu_ps,
       _mm512_set1_ps, _mm512_fmadd_ps, 5, 5, 1)
static const rw_kind rw_512[2] = {{16, 2, 3, {rw_512_3, NULL}, 1}, {16, 1, 5, {NULL, rw_512_5}, 1}};
static const rw_kind rw_512n = {16, 1, 3, {rw_512_3n, NULL}, 1}; /* 3x3, at most 16 filters */
RW_DEF(rw_256_3, NNT_CV_AVX2, __m256, 8, _mm256_setzero_ps(), _mm256_loadu_ps, _mm256_storeu_ps,
       _mm256_set1_ps, _mm256_fmadd_ps, 3, 3, 1)
RW_DEF(rw_256_5, NNT_CV_AVX2, __m256, 8, _mm256_setzero_ps(), _mm256_loadu_ps, _mm256_storeu_ps,
       _mm256_set1_ps, _mm256_fmadd_ps, 5, 2, 1)
static const rw_kind rw_256[2] = {{8, 1, 3, {rw_256_3, NULL}, 1}, {8, 1, 2, {NULL, rw_256_5}, 1}};

/* dY rows f8..f8+7 of an image (plane floats apart) into lanes [f8, f8 +
 * 8) of dt's positions [0, q1) (fbw floats a position), q1 a multiple of
 * 8: an 8 x 8 transpose at a time (the scalar copy, one value at a time
 * into a lane, took as long as the Fashion-MNIST CNN's c1 products). */
NNT_CV_AVX2 static void lay8_avx2(const float *dy, size_t plane, size_t q1, unsigned fbw,
                                  float *dt) {
  for (size_t q = 0; q < q1; q += 8) {
    __m256 r[8], t[8], u[8];
    for (unsigned i = 0; i < 8; i++)
      r[i] = _mm256_loadu_ps(dy + i * plane + q);
    for (unsigned i = 0; i < 8; i += 2) {
      t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (unsigned i = 0; i < 8; i += 4) {
      u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
      u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
      u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
      u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (unsigned i = 0; i < 4; i++) {
      _mm256_storeu_ps(dt + (q + i) * fbw, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
      _mm256_storeu_ps(dt + (q + i + 4) * fbw, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
    }
  }
}
#endif

/* Positions [q0, q0 + nq) of an image's dY of filters [f0, f0 + nf) (dy:
 * filter f0's plane, plane floats a filter) as [position][fbw] into dt,
 * zeros past the nf filters. */
static void lay_dy(const rw_kind *kd, const float *dy, size_t plane, size_t q0, size_t nq,
                   size_t nf, unsigned fbw, float *dt) {
  dy += q0;
  for (size_t f = 0; f < fbw; f++) {
    size_t q = 0;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (kd->vec_lay && f % 8 == 0 && f + 8 <= nf) {
      q = nq / 8 * 8;
      lay8_avx2(dy + f * plane, plane, q, fbw, dt + f);
      for (size_t g8 = f; g8 < f + 8; g8++)
        for (size_t r = q; r < nq; r++)
          dt[r * fbw + g8] = dy[g8 * plane + r];
      f += 7;
      continue;
    }
#else
    (void)kd;
#endif
    for (; q < nq; q++)
      dt[q * fbw + f] = f < nf ? dy[f * plane + q] : 0.0f;
  }
}

/* The kind of a path for a k x k window and the filters, or NULL where
 * this CPU cannot run the path. */
static const rw_kind *rw_kind_of(int path, unsigned k, size_t filters) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  unsigned ki = k == 5;
  __builtin_cpu_init();
  if (path >= NNT_BLAS_AVX512)
    return !__builtin_cpu_supports("avx512f") ? NULL
           : !ki && filters <= 16             ? &rw_512n
                                              : &rw_512[ki];
  if (path >= NNT_BLAS_AVX2)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? &rw_256[ki] : NULL;
#else
  (void)k, (void)filters;
  if (path >= NNT_BLAS_AVX2)
    return NULL;
#endif
  return &rw_c;
}

/* The channel's plane xc with its padding around it into xp (ph rows of
 * pw): each row's values copied whole, zeros around them (a test per
 * value took as long as the products on the Fashion-MNIST CNN's c2). */
static void pad_plane(const nnt_conv_geom *g, const float *xc, unsigned pw, unsigned ph,
                      float *xp) {
  unsigned lo = g->pl < pw ? g->pl : pw, n = g->w < pw - lo ? g->w : pw - lo;
  for (unsigned r = 0; r < ph; r++) {
    long sy = (long)r - (long)g->pt;
    float *row = xp + (size_t)r * pw;
    if (sy < 0 || sy >= (long)g->h) {
      memset(row, 0, pw * sizeof *row);
      continue;
    }
    memset(row, 0, lo * sizeof *row);
    memcpy(row + lo, xc + (size_t)sy * g->w, n * sizeof *row);
    memset(row + lo + n, 0, (pw - lo - n) * sizeof *row);
  }
}

/* A part: units [u0, u1), a unit a (filter block, channel) pair, filter
 * block major, RW_MAX_CB channels of a block at a time; each image's dY
 * laid out in bands of output rows that fill at most
 * NNT_CONV_ROWS_DW_MAX_DY floats (the sums keep their order). */
static void rw_part(void *p, size_t u0, size_t u1) {
  const rw_job *j = p;
  const nnt_conv_geom *g = j->g;
  const rw_kind *kd = j->kind;
  unsigned k = g->kh, fbw = kd->ov * kd->lanes, pw = g->ow + k - 1, ph = g->oh + k - 1;
  unsigned band = NNT_CONV_ROWS_DW_MAX_DY / (g->ow * fbw);
  size_t plane = (size_t)g->oh * g->ow, hw = (size_t)g->h * g->w, taps = (size_t)k * k;
  size_t per = taps * fbw; /* accumulator floats of one channel */
  rw_fn fn = kd->fn[k == 5];
  float dt[NNT_CONV_ROWS_DW_MAX_DY], xp[NNT_CONV_ROWS_DW_MAX_PAD];
  float acc[RW_MAX_CB * 25 * 16];
  for (size_t u = u0; u < u1;) {
    size_t f0 = u / g->c * fbw;
    unsigned c0 = (unsigned)(u % g->c), nc = g->c - c0 < RW_MAX_CB ? g->c - c0 : RW_MAX_CB;
    if (nc > u1 - u)
      nc = (unsigned)(u1 - u);
    size_t nf = j->filters - f0 < fbw ? j->filters - f0 : fbw;
    memset(acc, 0, nc * per * sizeof *acc);
    for (size_t i = 0; i < j->n; i++)
      for (unsigned y0 = 0; y0 < g->oh; y0 += band) {
        unsigned y1 = g->oh - y0 < band ? g->oh : y0 + band;
        lay_dy(kd, j->dy + (i * j->filters + f0) * plane, plane, (size_t)y0 * g->ow,
               (size_t)(y1 - y0) * g->ow, nf, fbw, dt);
        for (unsigned c = 0; c < nc; c++) {
          const float *xc = j->x + (i * g->c + c0 + c) * hw;
          pad_plane(g, xc, pw, ph, xp);
          for (unsigned a0 = 0; a0 < k; a0 += kd->ar)
            fn(j, xp, pw, dt, a0, y0, y1, acc + c * per + (size_t)a0 * k * fbw);
        }
      }
    /* acc[c][a][b][filter] -> dW[f0 + filter][c0 + c][a][b] */
    for (unsigned c = 0; c < nc; c++)
      for (size_t t = 0; t < taps; t++)
        for (size_t f = 0; f < nf; f++)
          j->dw[((f0 + f) * g->c + c0 + c) * taps + t] = acc[c * per + t * fbw + f];
    u += nc;
  }
}

int nnt_cpu_conv_rows_dw(int path, const nnt_conv_geom *g, size_t n, size_t filters,
                         const float *x, const float *dy, float *dw) {
  if (!g || !nnt_conv_rows_dw_take(g, filters))
    return NNT_ERR_INVAL;
  const rw_kind *kd = rw_kind_of(path, g->kh, filters);
  if (!kd)
    return NNT_ERR_INVAL;
  rw_job j = {.g = g, .n = n, .filters = filters, .x = x, .dy = dy, .dw = dw, .kind = kd};
  if (!g->c)
    return NNT_OK;
  /* (filter block, channel) units, parts of half of them (at most
   * RW_MAX_CB): a part lays out each image's dY of its blocks once per
   * RW_MAX_CB channels, and a layer of one channel (the Fashion-MNIST
   * CNN's c1) still splits by its filter blocks */
  unsigned fbw = kd->ov * kd->lanes;
  size_t units = (filters + fbw - 1) / fbw * g->c, half = (units + 1) / 2;
  nnt_cpu_pool_for(units, 1, half < RW_MAX_CB ? half : RW_MAX_CB, rw_part, &j);
  return NNT_OK;
}
