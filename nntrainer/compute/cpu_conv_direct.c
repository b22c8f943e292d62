/* CPU direct convolution forward (the conv_fwd op; the backward,
 * conv_bwd_x and conv_bwd_w, is below): for a few input
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
#include "nntrainer/compute/cpu_conv_vec.h"

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
NNT_CV_PORTABLE(dc, DC_BLK)
DC_DEF(dc_tile_c, , dc_vec, DC_BLK, 4, 2, dc_zero(), dc_load, dc_set1, dc_madd, dc_store)

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
DC_DEF(dc_tile_avx2, NNT_CV_AVX2, __m256, 8, 6, 3, _mm256_setzero_ps(), _mm256_loadu_ps,
            _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps)
DC_DEF(dc_tile_avx512, NNT_CV_AVX512, __m512, 16, 12, 5, _mm512_setzero_ps(), _mm512_loadu_ps,
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

/* Whether this kernel takes g (the row kernel aside). */
static int dc_takes(const nnt_conv_geom *g) {
  return g && (!g->cs || g->cs == g->c) && g->ow <= 256 &&
         (size_t)g->c * g->kh * g->kw <= NNT_CONV_DIRECT_MAX_PATCH;
}

/* Whether this kernel, not the row kernel that takes g, runs it on the
 * AVX2 path: where the rows' output fills less than 3/4 of its vectors of
 * 8 columns and the filters fill this kernel's blocks. LeNet-5's c2
 * (16 filters, rows of 10 columns: 10 of 16 lanes), one thread on a Zen 2,
 * three alternating runs of nnt_bench_kernels: 34.8-35.4 GFLOP/s on the
 * row kernel, 58.1-59.1 here (0.53 -> 0.86 of a bare sgemm). Where the
 * rows fill their vectors the row kernel stays ahead: the CNN's c2 (32
 * filters, rows of 14) 51.9-54.2 against 46.8-47.6, its c1 (one channel)
 * 23.7-24.1 against 15.6-16.4. On AVX-512 the row kernel was measured at
 * or above 0.8 on all of them (docs/performance.md). Both sum the taps in
 * the same order from zero and add the bias last: without padding, the
 * same bits. */
static int dc_beats_rows(int path, const nnt_conv_geom *g, size_t filters) {
  size_t vec = 8, cols = ((size_t)g->ow + vec - 1) / vec * vec;
  return path == NNT_BLAS_AVX2 && filters % DC_BLK == 0 && 4 * (size_t)g->ow < 3 * cols &&
         dc_takes(g);
}

int nnt_cpu_conv_fwd_path(int path, const nnt_conv_geom *g, size_t n, size_t filters,
                          const float *w, const float *bias, const float *x, float *y) {
  if (nnt_conv_sub_take(g, filters))
    return nnt_cpu_conv_sub_fwd(path, g, n, filters, w, bias, x, y);
  if (!g || g->gathered) /* only the subsampling product reads a gathered input */
    return NNT_ERR_INVAL;
  if (path >= NNT_BLAS_AVX512 && nnt_conv_str_take(g, filters))
    return nnt_cpu_conv_str_fwd(path, g, n, filters, w, bias, x, y);
  if (nnt_conv_rows_take(g, g ? g->c : 0, filters) && !dc_beats_rows(path, g, filters))
    return nnt_cpu_conv_rows(path, g, n, filters, 0, w, bias, x, y);
  dc_row_fn row = dc_row_of(path);
  if (!row || !dc_takes(g))
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

/* ---- The backward of a stride-1, dilation-1 convolution without im2col
 * or col2im (conv_bwd_x, conv_bwd_w): for a few input channels the copies
 * and the col2im sums cost more than the thin products (LeNet-5's c2: a
 * gemm of depth 16 makes 150 x 100 columns that col2im folds back). Both
 * run along rows: a vector holds up to LANES neighbouring columns, a load
 * takes the lanes [lo, hi) of a row and zeros the others (masked: the
 * lanes outside are never read).
 *
 * conv_bwd_x, dX: a part is an (image, block of DB_CB input channels)
 * pair; the filters' weights of the block are packed as [f][a][b][DB_CB]
 * (zeros past the last channel) and one accumulator per channel of the
 * block adds, for every filter and tap, the weight times the row of dY
 * that the tap shifts over the input row: dX[c][iy][ix] = sum over f, a, b
 * (in that order) of W[f][c][a][b] dY[f][iy + pt - a][ix + pl - b], the
 * kernel rows and tiles whose output lies outside skipped.
 *
 * conv_bwd_w, dW: a part is a (block of filters, input channel) pair
 * (blocks of up to 4 filters on AVX-512, 2 on AVX2 and in C: as many
 * accumulators as the registers hold);
 * per kernel row a, one accumulator per (filter, kernel column) adds over
 * images, output rows and column tiles the dY row times the input row the
 * tap shifts under it; the lanes are summed at the end. Each output is
 * written by one part alone: the same bits on every thread count. */
#define DB_CB 8 /* input channels per dX block */
#define DB_LANES_C 16

typedef struct db_job {
  const nnt_conv_geom *g;
  size_t n, filters, cblocks, fblocks;
  const float *w, *x, *dy;
  float *out;
  /* dX of a block of 8 channels, and of 4 and 6 where the path has them
   * (NULL: 8's); the weights packed for the width taken */
  void (*dx)(const struct db_job *j, size_t i, unsigned c0, unsigned nc, const float *wp);
  void (*dxn[2])(const struct db_job *j, size_t i, unsigned c0, unsigned nc, const float *wp);
  void (*dw)(const struct db_job *j, size_t f0, unsigned nf, unsigned c);
} db_job;

/* The lanes [lo, hi) of a tile of nl lanes whose lane 0 is column off of a
 * row of len values: lo >= hi when none. */
static inline void db_range(long off, long len, unsigned nl, unsigned *lo, unsigned *hi) {
  long l = off < 0 ? -off : 0, h = len - off;
  if (h > (long)nl)
    h = (long)nl;
  *lo = (unsigned)l;
  *hi = h > l ? (unsigned)h : (unsigned)l;
}

/* The kernels for a kernel width KW (a constant: the taps' loops unroll
 * and the accumulators stay in registers). MASK(lo, hi) makes a load mask,
 * LOADM(row, off, mask) loads those lanes of row from column off (zeros
 * elsewhere), STOREN(p, v, nl) stores the first nl lanes. */
#define DB_DX_DEF(NAME, ATTR, VEC, LANES, MTYPE, MASK, ZERO, SET1, FMA, LOADM, STOREN, KW, CB) \
  ATTR static void NAME##_##KW##_##CB(const db_job *j, size_t i, unsigned c0, unsigned nc,  \
                                       const float *wp) {                                          \
    const nnt_conv_geom *g = j->g;                                                         \
    size_t plane = (size_t)g->oh * g->ow, hw = (size_t)g->h * g->w;                        \
    const float *dy = j->dy + i * j->filters * plane;                                      \
    float *dx = j->out + (i * g->c + c0) * hw;                                             \
    for (unsigned ix0 = 0; ix0 < g->w; ix0 += (LANES)) {                                   \
      unsigned nl = g->w - ix0 < (LANES) ? g->w - ix0 : (LANES), lo[KW], hi[KW];           \
      long off[KW];                                                                        \
      MTYPE m[KW];                                                                         \
      _Pragma("GCC unroll 8") for (unsigned b = 0; b < (KW); b++) {                        \
        off[b] = (long)ix0 + (long)g->pl - (long)b;                                        \
        db_range(off[b], g->ow, nl, &lo[b], &hi[b]);                                       \
        m[b] = MASK(lo[b], hi[b]);                                                         \
      }                                                                                    \
      for (unsigned iy = 0; iy < g->h; iy++) {                                             \
        /* the kernel rows a whose output row iy + pt - a exists */                        \
        long top = (long)iy + (long)g->pt;                                                 \
        unsigned a0 = top >= (long)g->oh ? (unsigned)(top - (long)g->oh + 1) : 0;          \
        unsigned a1 = top + 1 < (long)g->kh ? (unsigned)(top + 1) : g->kh;                 \
        VEC acc[(CB)];                                                                    \
        _Pragma("GCC unroll 8") for (unsigned q = 0; q < (CB); q++) acc[q] = ZERO;        \
        for (size_t f = 0; f < j->filters; f++)                                            \
          for (unsigned a = a0; a < a1; a++) {                                             \
            const float *row = dy + f * plane + (size_t)(top - (long)a) * g->ow;           \
            const float *wt = wp + ((f * g->kh + a) * (KW)) * (CB);                       \
            _Pragma("GCC unroll 8") for (unsigned b = 0; b < (KW); b++) {                  \
              if (lo[b] >= hi[b])                                                          \
                continue;                                                                  \
              VEC v = LOADM(row, off[b], m[b]);                                            \
              _Pragma("GCC unroll 8") for (unsigned q = 0; q < (CB); q++) acc[q] =        \
                  FMA(SET1(wt[b * (CB) + q]), v, acc[q]);                                 \
            }                                                                              \
          }                                                                                \
        _Pragma("GCC unroll 8") for (unsigned q = 0; q < (CB); q++) if (q < nc)           \
            STOREN(dx + q * hw + (size_t)iy * g->w + ix0, acc[q], nl);                     \
      }                                                                                    \
    }                                                                                      \
  }

#define DB_DW_DEF(NAME, ATTR, VEC, LANES, MTYPE, MASK, FB, ZERO, FMA, LOADM, HSUM, KW)      \
  ATTR static void NAME##_##KW(const db_job *j, size_t f0, unsigned nf, unsigned c) {      \
    const nnt_conv_geom *g = j->g;                                                         \
    size_t plane = (size_t)g->oh * g->ow, hw = (size_t)g->h * g->w, taps = g->kh * (KW);   \
    for (unsigned a = 0; a < g->kh; a++) {                                                 \
      VEC acc[FB][KW];                                                                     \
      _Pragma("GCC unroll 8") for (unsigned p = 0; p < (FB); p++)                          \
          _Pragma("GCC unroll 8") for (unsigned b = 0; b < (KW); b++) acc[p][b] = ZERO;    \
      /* the output rows whose input row oy - pt + a exists */                             \
      long s = (long)a - (long)g->pt;                                                      \
      unsigned y0 = s < 0 ? (unsigned)-s : 0;                                              \
      long y1l = (long)g->h - s;                                                           \
      unsigned y1 = y1l < (long)g->oh ? (y1l > 0 ? (unsigned)y1l : 0) : g->oh;             \
      /* a tile of columns at a time: its masks stay in registers */                       \
      for (unsigned ox0 = 0; ox0 < g->ow; ox0 += (LANES)) {                                \
        unsigned nl = g->ow - ox0 < (LANES) ? g->ow - ox0 : (LANES), lo[KW], hi[KW];       \
        long off[KW];                                                                      \
        MTYPE m[KW], md = MASK(0, nl);                                                     \
        _Pragma("GCC unroll 8") for (unsigned b = 0; b < (KW); b++) {                      \
          off[b] = (long)ox0 - (long)g->pl + (long)b;                                      \
          db_range(off[b], g->w, nl, &lo[b], &hi[b]);                                      \
          m[b] = MASK(lo[b], hi[b]);                                                       \
        }                                                                                  \
        for (size_t i = 0; i < j->n; i++) {                                                \
          const float *x = j->x + (i * g->c + c) * hw;                                     \
          const float *dy = j->dy + (i * j->filters + f0) * plane + ox0;                   \
          for (unsigned oy = y0; oy < y1; oy++) {                                          \
            const float *xr = x + (size_t)((long)oy + s) * g->w;                           \
            const float *dr = dy + (size_t)oy * g->ow;                                     \
            VEC d[FB];                                                                     \
            _Pragma("GCC unroll 8") for (unsigned p = 0; p < (FB); p++) d[p] =             \
                p < nf ? LOADM(dr + p * plane, 0, md) : ZERO;                              \
            _Pragma("GCC unroll 8") for (unsigned b = 0; b < (KW); b++) {                  \
              if (lo[b] >= hi[b])                                                          \
                continue;                                                                  \
              VEC xv = LOADM(xr, off[b], m[b]);                                            \
              _Pragma("GCC unroll 8") for (unsigned p = 0; p < (FB); p++) acc[p][b] =      \
                  FMA(d[p], xv, acc[p][b]);                                                \
            }                                                                              \
          }                                                                                \
        }                                                                                  \
      }                                                                                    \
      /* constant indices: the accumulators stay in registers */                          \
      _Pragma("GCC unroll 8") for (unsigned p = 0; p < (FB); p++) if (p < nf)              \
          _Pragma("GCC unroll 8") for (unsigned b = 0; b < (KW); b++)                      \
              j->out[((f0 + p) * g->c + c) * taps + (size_t)a * (KW) + b] =                \
                  HSUM(acc[p][b]);                                                         \
    }                                                                                      \
  }

/* Widths NNT_CONV_BWD_MIN_KW (4) and NNT_CONV_BWD_MAX_KW (5), and the
 * table of them (narrower windows take im2col, or the row kernels for
 * 3x3: cpu_conv_rows.c); FB5 filters per dW part (as many accumulators as
 * the registers hold). */
#define DB_DEF(NAME, ATTR, VEC, LANES, MTYPE, MASK, FB5, ZERO, SET1, FMA, LOADM, STOREN, HSUM,   \
               NARROW)                                                                       \
  DB_DX_DEF(NAME##_dx, ATTR, VEC, LANES, MTYPE, MASK, ZERO, SET1, FMA, LOADM, STOREN, 4, 8)  \
  DB_DX_DEF(NAME##_dx, ATTR, VEC, LANES, MTYPE, MASK, ZERO, SET1, FMA, LOADM, STOREN, 5, 8)  \
  DB_DW_DEF(NAME##_dw, ATTR, VEC, LANES, MTYPE, MASK, FB5, ZERO, FMA, LOADM, HSUM, 4)        \
  DB_DW_DEF(NAME##_dw, ATTR, VEC, LANES, MTYPE, MASK, FB5, ZERO, FMA, LOADM, HSUM, 5)        \
  static const db_kernels NAME = {                                                           \
      {NULL, NULL, NULL, NAME##_dx_4_8, NAME##_dx_5_8},                                      \
      {NULL, NULL, NULL, NAME##_dw_4, NAME##_dw_5},                                          \
      {0, 0, 0, FB5, FB5},                                                                   \
      NARROW};

typedef struct db_kernels {
  void (*dx[NNT_CONV_BWD_MAX_KW])(const db_job *, size_t, unsigned, unsigned, const float *);
  void (*dw[NNT_CONV_BWD_MAX_KW])(const db_job *, size_t, unsigned, unsigned);
  unsigned fb[NNT_CONV_BWD_MAX_KW]; /* filters per dW part, by width */
  /* dX of 4 and of 6 channels a block, by width (NULL: the 8's) */
  void (*dxn[2][NNT_CONV_BWD_MAX_KW])(const db_job *, size_t, unsigned, unsigned,
                                      const float *);
} db_kernels;

/* The portable vectors: DB_LANES_C plain floats; a mask is a lane range. */
NNT_CV_PORTABLE(db, DB_LANES_C)
static inline float db_hsum(db_vec v) {
  float s = 0;
  for (unsigned i = 0; i < DB_LANES_C; i++)
    s += v.v[i];
  return s;
}
#define DB_NONE {{0}}
DB_DEF(db_c, , db_vec, DB_LANES_C, db_rng, db_mask, 2, db_zero(), db_set1, db_madd, db_loadm,
       db_storen, db_hsum, DB_NONE)

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
NNT_CV_AVX512 static inline float db_hsum512(__m512 v) { return _mm512_reduce_add_ps(v); }
NNT_CV_AVX2 static inline float db_hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
DB_DEF(db_avx2, NNT_CV_AVX2, __m256, 8, __m256i, nnt_cv_mask256, 2, _mm256_setzero_ps(),
       _mm256_set1_ps, _mm256_fmadd_ps, nnt_cv_loadm256, nnt_cv_storen256, db_hsum256, DB_NONE)
/* On AVX-512, blocks of 4 and 6 channels for the widths conv2d takes
 * conv_bwd_x for (4 and 5: layers/conv.c), which have 4 to 8 channels: a
 * block of 8 accumulators for LeNet-5's 6 channels spent a quarter of
 * its FMAs on zeros (its c2 derivative 48 -> 63 GFLOP/s on one thread with
 * blocks of 6, docs/performance.md). Each channel's sum is the same. */
#define DB_512_NARROW(KW, CB)                                                                 \
  DB_DX_DEF(db_avx512_dx, NNT_CV_AVX512, __m512, 16, __mmask16, nnt_cv_mask512,             \
            _mm512_setzero_ps(), _mm512_set1_ps, _mm512_fmadd_ps, nnt_cv_loadm512,            \
            nnt_cv_storen512, KW, CB)
DB_512_NARROW(4, 4)
DB_512_NARROW(5, 4)
DB_512_NARROW(4, 6)
DB_512_NARROW(5, 6)
#define DB_512_DXN                                                                             \
  {{NULL, NULL, NULL, db_avx512_dx_4_4, db_avx512_dx_5_4},                                     \
   {NULL, NULL, NULL, db_avx512_dx_4_6, db_avx512_dx_5_6}}
DB_DEF(db_avx512, NNT_CV_AVX512, __m512, 16, __mmask16, nnt_cv_mask512, 4, _mm512_setzero_ps(),
       _mm512_set1_ps, _mm512_fmadd_ps, nnt_cv_loadm512, nnt_cv_storen512, db_hsum512, DB_512_DXN)
#endif

/* The kernels of a path (NNT_BLAS_AVX512, NNT_BLAS_AVX2, or below: plain
 * C), or NULL when this CPU cannot run it. */
static const db_kernels *db_of(int path) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (path >= NNT_BLAS_AVX512)
    return __builtin_cpu_supports("avx512f") ? &db_avx512 : NULL;
  if (path >= NNT_BLAS_AVX2)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? &db_avx2 : NULL;
#else
  if (path >= NNT_BLAS_AVX2)
    return NULL;
#endif
  return &db_c;
}

/* dX parts: (image, channel block) pairs; the block's weights packed on
 * the stack when the block changes. */
static void db_dx_part(void *p, size_t u0, size_t u1) {
  const db_job *j = p;
  const nnt_conv_geom *g = j->g;
  size_t taps = (size_t)g->kh * g->kw, patch = g->c * taps;
  float wp[NNT_CONV_BWD_MAX_FTAPS * DB_CB];
  size_t packed = SIZE_MAX;
  for (size_t u = u0; u < u1; u++) {
    size_t i = u / j->cblocks, cb = u % j->cblocks;
    unsigned c0 = (unsigned)(cb * DB_CB), nc = g->c - c0 < DB_CB ? g->c - c0 : DB_CB;
    /* the narrowest block kernel that holds nc channels */
    unsigned width = nc <= 4 && j->dxn[0] ? 4 : nc <= 6 && j->dxn[1] ? 6 : DB_CB;
    if (packed != cb) {
      for (size_t f = 0; f < j->filters; f++)
        for (size_t t = 0; t < taps; t++)
          for (unsigned q = 0; q < width; q++)
            wp[(f * taps + t) * width + q] = q < nc ? j->w[f * patch + (c0 + q) * taps + t] : 0;
      packed = cb;
    }
    (width == 4 ? j->dxn[0] : width == 6 ? j->dxn[1] : j->dx)(j, i, c0, nc, wp);
  }
}

/* dW parts: (filter block, channel) pairs. */
static void db_dw_part(void *p, size_t u0, size_t u1) {
  const db_job *j = p;
  size_t fbw = (j->filters + j->fblocks - 1) / j->fblocks;
  for (size_t u = u0; u < u1; u++) {
    size_t fb = u / j->g->c, f0 = fb * fbw;
    unsigned c = (unsigned)(u % j->g->c);
    unsigned nf = (unsigned)(j->filters - f0 < fbw ? j->filters - f0 : fbw);
    j->dw(j, f0, nf, c);
  }
}

int nnt_cpu_conv_bwd_ok(const nnt_conv_geom *g, size_t filters) {
  return g && (!g->cs || g->cs == g->c) && g->sh == 1 && g->sw == 1 && g->dh == 1 &&
         g->dw == 1 && g->kw >= NNT_CONV_BWD_MIN_KW && g->kw <= NNT_CONV_BWD_MAX_KW &&
         g->ow <= 256 && g->w <= 256 &&
         filters * g->kh * g->kw <= NNT_CONV_BWD_MAX_FTAPS;
}

int nnt_cpu_conv_bwd_x_path(int path, const nnt_conv_geom *g, size_t n, size_t filters,
                            const float *w, const float *dy, float *dx) {
  if (nnt_conv_sub_dx_take(g, filters))
    return nnt_cpu_conv_sub_dx(path, g, n, filters, w, dy, dx, 0);
  if (path >= NNT_BLAS_AVX512 && nnt_conv_str_dx_take(g, filters))
    return nnt_cpu_conv_str_dx(path, g, n, filters, w, dy, dx);
  if (nnt_conv_rows_take(g, filters, g ? g->c : 0))
    return nnt_cpu_conv_rows(path, g, n, filters, 1, w, NULL, dy, dx);
  db_job j = {.g = g, .n = n, .filters = filters, .w = w, .dy = dy, .out = dx};
  const db_kernels *kk = db_of(path);
  if (!nnt_cpu_conv_bwd_ok(g, filters) || !kk)
    return NNT_ERR_INVAL;
  j.dx = kk->dx[g->kw - 1];
  j.dxn[0] = kk->dxn[0][g->kw - 1];
  j.dxn[1] = kk->dxn[1][g->kw - 1];
  if (!n || !g->c || !g->h || !g->w)
    return NNT_OK;
  j.cblocks = (g->c + DB_CB - 1) / DB_CB;
  size_t per = filters * g->kh * g->kw * DB_CB * g->h * g->w;
  size_t min = per >= 65536 ? 1 : 65536 / (per + 1) + 1;
  nnt_cpu_pool_for(n * j.cblocks, 1, min, db_dx_part, &j);
  return NNT_OK;
}

int nnt_cpu_conv_bwd_w_path(int path, const nnt_conv_geom *g, size_t n, size_t filters,
                            const float *x, const float *dy, float *dw) {
  if (nnt_conv_rows_dw_take(g, filters))
    return nnt_cpu_conv_rows_dw(path, g, n, filters, x, dy, dw);
  if (path >= NNT_BLAS_AVX512 && nnt_conv_str_dw_take(g, filters))
    return nnt_cpu_conv_str_dw(path, g, n, filters, x, dy, dw);
  if (path >= NNT_BLAS_AVX512 && nnt_conv_sub_dw_take(g, filters))
    return nnt_cpu_conv_sub_dw(path, g, n, filters, x, dy, dw);
  db_job j = {.g = g, .n = n, .filters = filters, .x = x, .dy = dy, .out = dw};
  const db_kernels *kk = db_of(path);
  if (!nnt_cpu_conv_bwd_ok(g, filters) || !kk)
    return NNT_ERR_INVAL;
  unsigned fb = kk->fb[g->kw - 1];
  j.dw = kk->dw[g->kw - 1];
  if (!filters || !g->c)
    return NNT_OK;
  j.fblocks = (filters + fb - 1) / fb;
  size_t per = n * fb * g->kh * g->kw * g->oh * g->ow;
  size_t min = per >= 65536 ? 1 : 65536 / (per + 1) + 1;
  nnt_cpu_pool_for(j.fblocks * g->c, 1, min, db_dw_part, &j);
  return NNT_OK;
}

int nnt_cpu_conv_bwd_x(const struct nnt_kernels *self, const nnt_conv_geom *g, size_t n,
                       size_t filters, const float *w, const float *dy, float *dx) {
  (void)self;
  static const int paths[] = {NNT_BLAS_AVX512, NNT_BLAS_AVX2, NNT_BLAS_SSE};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    int rc = nnt_cpu_conv_bwd_x_path(paths[i], g, n, filters, w, dy, dx);
    if (rc != NNT_ERR_INVAL || i + 1 == sizeof paths / sizeof paths[0])
      return rc;
  }
  return NNT_ERR_INVAL;
}

int nnt_cpu_conv_bwd_x_add(const struct nnt_kernels *self, const nnt_conv_geom *g, size_t n,
                           size_t filters, const float *w, const float *dy, float *dx) {
  (void)self;
  return nnt_cpu_conv_sub_dx(NNT_BLAS_AVX512, g, n, filters, w, dy, dx, 1);
}

int nnt_cpu_conv_bwd_w(const struct nnt_kernels *self, const nnt_conv_geom *g, size_t n,
                       size_t filters, const float *x, const float *dy, float *dw) {
  (void)self;
  static const int paths[] = {NNT_BLAS_AVX512, NNT_BLAS_AVX2, NNT_BLAS_SSE};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    int rc = nnt_cpu_conv_bwd_w_path(paths[i], g, n, filters, x, dy, dw);
    if (rc != NNT_ERR_INVAL || i + 1 == sizeof paths / sizeof paths[0])
      return rc;
  }
  return NNT_ERR_INVAL;
}
