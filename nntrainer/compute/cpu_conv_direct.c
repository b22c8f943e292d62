/* CPU direct convolution forward (the conv_fwd op): for a few input
 * channels the im2col copies of the gemm path cost more than the product
 * (LeNet-5's c2 copies 10 floats at a time), so the filters are applied to
 * the input where it lies. A block of DC_BLK filters is packed per part as
 * [patch][DC_BLK]; a tile of output positions of one row keeps one
 * accumulator vector per (position, DC_BLK/lanes) and every tap adds
 * weights x the broadcast input value. Positions whose window leaves the
 * input (padding) take a one-position tile that skips those taps. Each
 * output is the sum over taps in order (channel, row, column), then the
 * bias added: the same on every thread count (parts are (image, filter
 * block) pairs, each written by one part alone), within rounding of the
 * gemm path's sums. The code is chosen at run time by the CPU's features
 * (AVX-512, AVX2 with FMA, else portable C). */
#include <stdint.h>
#include <string.h>

#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/kernels.h"

#define DC_BLK 16 /* filters per block */

typedef struct dc_job {
  const nnt_conv_geom *g;
  size_t filters, blocks, patch;
  const float *w, *bias, *x;
  float *y;
  void (*row)(const struct dc_job *j, const float *xi, const float *wp, unsigned oy,
              float *out);
} dc_job;

/* The positions [lo, hi) of an output row whose whole window lies inside
 * the input's columns. */
static void dc_interior(const nnt_conv_geom *g, unsigned *lo, unsigned *hi) {
  unsigned l0, h0, l1, h1;
  nnt_cpu_valid_cols(g, -(long)g->pl, &l0, &h0);
  nnt_cpu_valid_cols(g, (long)(g->kw - 1) * g->dw - (long)g->pl, &l1, &h1);
  *lo = l0 > l1 ? l0 : l1;
  *hi = h0 < h1 ? h0 : h1;
  if (*hi < *lo)
    *hi = *lo;
}

/* One output row oy of one image xi and filter block (packed weights wp):
 * out[t * DC_BLK + f] for every position t of the row. A tile of T
 * positions from ox0; check: test each tap's column (edge positions). */
#define DC_TILE_DEF(NAME, ATTR, VEC, LANES, T, ZERO, LOAD, SET1, FMA, STORE)                 \
  ATTR static inline void NAME(const nnt_conv_geom *g, const float *xi, const float *wp,     \
                               long iy0, unsigned ox0, unsigned nt, int check, float *out) { \
    enum { NV = DC_BLK / (LANES) };                                                          \
    VEC acc[T][NV];                                                                          \
    _Pragma("GCC unroll 16") for (unsigned t = 0; t < (T); t++)                              \
        _Pragma("GCC unroll 4") for (unsigned v = 0; v < NV; v++) acc[t][v] = ZERO;          \
    size_t hw = (size_t)g->h * g->w;                                                         \
    const float *wt = wp;                                                                    \
    for (unsigned c = 0; c < g->c; c++)                                                      \
      for (unsigned a = 0; a < g->kh; a++) {                                                 \
        long iy = iy0 + (long)a * g->dh;                                                     \
        if (iy < 0 || iy >= (long)g->h) {                                                    \
          wt += (size_t)g->kw * DC_BLK;                                                      \
          continue;                                                                          \
        }                                                                                    \
        const float *xr = xi + c * hw + (size_t)iy * g->w;                                   \
        for (unsigned b = 0; b < g->kw; b++, wt += DC_BLK) {                                 \
          long ix = (long)ox0 * g->sw + (long)b * g->dw - (long)g->pl;                       \
          if (check && (ix < 0 || ix >= (long)g->w))                                         \
            continue;                                                                        \
          VEC wv[NV];                                                                        \
          _Pragma("GCC unroll 4") for (unsigned v = 0; v < NV; v++) wv[v] =                  \
              LOAD(wt + v * (LANES));                                                        \
          const float *xp = xr + ix;                                                         \
          _Pragma("GCC unroll 16") for (unsigned t = 0; t < (T); t++) {                      \
            VEC xb = SET1(xp[(size_t)t * g->sw]);                                            \
            _Pragma("GCC unroll 4") for (unsigned v = 0; v < NV; v++) acc[t][v] =            \
                FMA(wv[v], xb, acc[t][v]);                                                   \
          }                                                                                  \
        }                                                                                    \
      }                                                                                      \
    _Pragma("GCC unroll 16") for (unsigned t = 0; t < (T); t++) if (t < nt)                  \
        _Pragma("GCC unroll 4") for (unsigned v = 0; v < NV; v++)                            \
            STORE(out + (size_t)t * DC_BLK + v * (LANES), acc[t][v]);                        \
  }

/* A row: interior tiles of T1 positions, then of T2, the last of each
 * placed to end at the interior's end where the interior is wide enough
 * (overlapping positions are computed again, by the same operations in
 * the same order: the same values), then single positions. */
#define DC_ROW_DEF(NAME, ATTR, T1, T2)                                                       \
  ATTR static void NAME##_row(const dc_job *j, const float *xi, const float *wp, unsigned oy, \
                              float *out) {                                                  \
    const nnt_conv_geom *g = j->g;                                                           \
    long iy0 = (long)oy * g->sh - (long)g->pt;                                               \
    unsigned lo, hi, ox = 0;                                                                 \
    dc_interior(g, &lo, &hi);                                                                \
    for (; ox < lo; ox++)                                                                    \
      NAME##_1(g, xi, wp, iy0, ox, 1, 1, out + (size_t)ox * DC_BLK);                         \
    for (; ox + (T1) <= hi; ox += (T1))                                                      \
      NAME##_t1(g, xi, wp, iy0, ox, (T1), 0, out + (size_t)ox * DC_BLK);                     \
    if (ox < hi && hi - lo >= (T1)) {                                                        \
      NAME##_t1(g, xi, wp, iy0, hi - (T1), (T1), 0, out + (size_t)(hi - (T1)) * DC_BLK);     \
      ox = hi;                                                                               \
    }                                                                                        \
    for (; ox + (T2) <= hi; ox += (T2))                                                      \
      NAME##_t2(g, xi, wp, iy0, ox, (T2), 0, out + (size_t)ox * DC_BLK);                     \
    if (ox < hi && hi - lo >= (T2)) {                                                        \
      NAME##_t2(g, xi, wp, iy0, hi - (T2), (T2), 0, out + (size_t)(hi - (T2)) * DC_BLK);     \
      ox = hi;                                                                               \
    }                                                                                        \
    for (; ox < g->ow; ox++)                                                                 \
      NAME##_1(g, xi, wp, iy0, ox, 1, ox >= hi, out + (size_t)ox * DC_BLK);                  \
  }
#define DC_DEF(NAME, ATTR, VEC, LANES, T1, T2, ZERO, LOAD, SET1, FMA, STORE)                   \
  DC_TILE_DEF(NAME##_t1, ATTR, VEC, LANES, T1, ZERO, LOAD, SET1, FMA, STORE)                 \
  DC_TILE_DEF(NAME##_t2, ATTR, VEC, LANES, T2, ZERO, LOAD, SET1, FMA, STORE)                 \
  DC_TILE_DEF(NAME##_1, ATTR, VEC, LANES, 1, ZERO, LOAD, SET1, FMA, STORE)                   \
  DC_ROW_DEF(NAME, ATTR, T1, T2)

/* The portable tile: plain floats, one "vector" of DC_BLK lanes. */
typedef struct dc_vec {
  float v[DC_BLK];
} dc_vec;
static inline dc_vec dc_zero(void) {
  dc_vec r;
  memset(&r, 0, sizeof r);
  return r;
}
static inline dc_vec dc_load(const float *p) {
  dc_vec r;
  memcpy(r.v, p, sizeof r.v);
  return r;
}
static inline dc_vec dc_set1(float x) {
  dc_vec r;
  for (unsigned i = 0; i < DC_BLK; i++)
    r.v[i] = x;
  return r;
}
static inline dc_vec dc_madd(dc_vec w, dc_vec x, dc_vec acc) {
  for (unsigned i = 0; i < DC_BLK; i++)
    acc.v[i] += w.v[i] * x.v[i];
  return acc;
}
static inline void dc_store(float *p, dc_vec v) { memcpy(p, v.v, sizeof v.v); }
DC_DEF(dc_tile_c, , dc_vec, DC_BLK, 4, 2, dc_zero(), dc_load, dc_set1, dc_madd, dc_store)

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define DC_AVX2 __attribute__((target("avx2,fma")))
#define DC_AVX512 __attribute__((target("avx512f")))
DC_DEF(dc_tile_avx2, DC_AVX2, __m256, 8, 6, 3, _mm256_setzero_ps(), _mm256_loadu_ps,
            _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps)
DC_DEF(dc_tile_avx512, DC_AVX512, __m512, 16, 12, 5, _mm512_setzero_ps(), _mm512_loadu_ps,
            _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps)
#endif

typedef void (*dc_row_fn)(const dc_job *, const float *, const float *, unsigned, float *);

/* The row function of a path (NNT_BLAS_AVX512, NNT_BLAS_AVX2, or below:
 * plain C), or NULL when this CPU cannot run it. */
static dc_row_fn dc_row_of(int path) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (path >= NNT_BLAS_AVX512)
    return __builtin_cpu_supports("avx512f") ? dc_tile_avx512_row : NULL;
  if (path >= NNT_BLAS_AVX2)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? dc_tile_avx2_row
                                                                           : NULL;
#else
  if (path >= NNT_BLAS_AVX2)
    return NULL;
#endif
  return dc_tile_c_row;
}

/* Parts are (image, filter block) pairs. */
static void dc_part(void *p, size_t u0, size_t u1) {
  const dc_job *j = p;
  const nnt_conv_geom *g = j->g;
  size_t plane = (size_t)g->oh * g->ow, in = (size_t)g->c * g->h * g->w;
  float wp[NNT_CONV_DIRECT_MAX_PATCH * DC_BLK];
  float out[DC_BLK * 256]; /* one output row, at most 256 wide, [ox][f] */
  size_t packed = SIZE_MAX;
  for (size_t u = u0; u < u1; u++) {
    size_t i = u / j->blocks, fb = u % j->blocks, f0 = fb * DC_BLK;
    size_t nf = j->filters - f0 < DC_BLK ? j->filters - f0 : DC_BLK;
    if (packed != fb) {
      for (size_t q = 0; q < j->patch; q++)
        for (size_t f = 0; f < DC_BLK; f++)
          wp[q * DC_BLK + f] = f < nf ? j->w[(f0 + f) * j->patch + q] : 0.0f;
      packed = fb;
    }
    const float *xi = j->x + i * in;
    float *yi = j->y + (i * j->filters + f0) * plane;
    for (unsigned oy = 0; oy < g->oh; oy++) {
      j->row(j, xi, wp, oy, out);
      for (size_t f = 0; f < nf; f++) {
        float b = j->bias ? j->bias[f0 + f] : 0.0f, *yr = yi + f * plane + (size_t)oy * g->ow;
        if (j->bias)
          for (unsigned ox = 0; ox < g->ow; ox++)
            yr[ox] = out[(size_t)ox * DC_BLK + f] + b;
        else
          for (unsigned ox = 0; ox < g->ow; ox++)
            yr[ox] = out[(size_t)ox * DC_BLK + f];
      }
    }
  }
}

int nnt_cpu_conv_fwd(const struct nnt_kernels *self, const nnt_conv_geom *g, size_t n,
                     size_t filters, const float *w, const float *bias, const float *x,
                     float *y) {
  (void)self;
  static const int paths[] = {NNT_BLAS_AVX512, NNT_BLAS_AVX2, NNT_BLAS_SSE};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
    if (dc_row_of(paths[i]))
      return nnt_cpu_conv_fwd_path(paths[i], g, n, filters, w, bias, x, y);
  return NNT_ERR_INVAL;
}

int nnt_cpu_conv_fwd_path(int path, const nnt_conv_geom *g, size_t n, size_t filters,
                          const float *w, const float *bias, const float *x, float *y) {
  dc_row_fn row = dc_row_of(path);
  if (!row || !g || (g->cs && g->cs != g->c) || g->ow > 256 ||
      (size_t)g->c * g->kh * g->kw > NNT_CONV_DIRECT_MAX_PATCH)
    return NNT_ERR_INVAL;
  dc_job j = {.g = g,
              .filters = filters,
              .blocks = (filters + DC_BLK - 1) / DC_BLK,
              .patch = (size_t)g->c * g->kh * g->kw,
              .w = w,
              .bias = bias,
              .x = x,
              .y = y,
              .row = row};
  if (!n || !filters || !g->oh || !g->ow)
    return NNT_OK;
  /* parts of at least about 64K multiply-adds */
  size_t per = j.patch * DC_BLK * g->oh * g->ow, min = per >= 65536 ? 1 : 65536 / (per + 1) + 1;
  nnt_cpu_pool_for(n * j.blocks, 1, min, dc_part, &j);
  return NNT_OK;
}
