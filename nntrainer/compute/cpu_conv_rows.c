/* A stride-1, dilation-1 square convolution along output rows (the
 * forward of conv_fwd and the derivative of conv_bwd_x where
 * nnt_conv_rows_take says: cpu_conv_direct.c asks): a vector holds
 * LANES neighbouring output columns of one output channel, so the output
 * is written in its own layout and no lane is spent on a missing channel
 * (the filter-vector kernel's 16 filters, the channel-vector derivative's
 * blocks of 4 to 8: a one-channel image filled a quarter of them).
 *
 * Both are one computation: out[o][y][x] = sum over i, a, b (in that
 * order) of wp[i][a][b][o] src[i][y + a - offy][x + b - offx], then
 * bias[o] added, with src zero outside its plane.
 * - forward: src = x (i: channels), o: filters, wp = W, (offy, offx) =
 *   the padding (pt, pl);
 * - derivative: src = dY (i: filters), o: channels, wp = W flipped
 *   (wp[f][a][b][c] = W[f][c][k-1-a][k-1-b]), (offy, offx) = (k-1-pt,
 *   k-1-pl): dX[c][y][x] = sum of W[f][c][a'][b'] dY[f][y+pt-a'][x+pl-b'].
 *
 * A call of a tile function computes RB output rows (y0..y0+RB-1) of OB
 * output channels over XV vectors of columns from x0: RB x OB x XV
 * accumulators. Each source row that reaches the block is loaded once per
 * tap column b (masked: the lanes outside the plane read nothing and are
 * zero) and added, times the broadcast weight, into every accumulator row
 * it reaches (the pairs (row, a) are constants: the loops unroll). Rows
 * past the last whole block take RB = 1 tiles. Each output is written by
 * one part alone: the same bits on every thread count. */
#include <stdint.h>
#include <string.h>

#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/kernels.h"
#include "nntrainer/compute/cpu_conv_vec.h"

/* The packed weights of one channel block, on the stack: in_c * k * k
 * (at most NNT_CONV_ROWS_MAX_TAPS) times the block's OB (at most 8). */
#define CR_MAX_OB 8

typedef struct cr_job {
  unsigned in_c, in_h, in_w, out_c, out_h, out_w, k;
  long offy, offx;
  int deriv;
  size_t n;
  const float *w, *bias, *src;
  float *out;
  const struct cr_kind *kind;
  size_t oblocks;
} cr_job;

typedef void (*cr_tile_fn)(const cr_job *j, const float *src, const float *wp, unsigned y0,
                           unsigned x0, unsigned nob, const float *bias, float *out);

/* One tiling: OB channels a block, RB rows a tile (and its RB = 1 tile),
 * XV vectors of LANES columns; tail: RB = 1, for the rows past the last
 * whole tile (NULL where RB is 1). */
typedef struct cr_kind {
  unsigned ob, rb, cols; /* cols = XV * LANES */
  cr_tile_fn tile, tail;
} cr_kind;

/* The lanes [lo, hi) of a vector whose lane 0 is output column x, that
 * read source column x + b - offx inside [0, in_w) and write an output
 * column below out_w. */
static inline void cr_lanes(const cr_job *j, long x, unsigned b, unsigned lanes, unsigned *lo,
                            unsigned *hi) {
  long s = x + (long)b - j->offx, l = s < 0 ? -s : 0, h = (long)j->in_w - s;
  if (h > (long)j->out_w - x)
    h = (long)j->out_w - x;
  if (h > (long)lanes)
    h = (long)lanes;
  *lo = (unsigned)(l < (long)lanes ? l : (long)lanes);
  *hi = h > (long)*lo ? (unsigned)h : *lo;
}

/* A tile: K the kernel's size, RB rows, OB channels, XV vectors. MASK(lo,
 * hi) makes a load mask, LOADM(row, off, mask) loads those lanes from
 * column off of row (zeros elsewhere), STOREN(p, v, nl) stores nl lanes;
 * RRU unrolls the source rows (16: all, for the vector paths' registers;
 * 1 for the portable code, whose RB is 1). */
#define CR_PRAGMA(x) _Pragma(#x)
#define CR_UNROLL(n) CR_PRAGMA(GCC unroll n)
#define CR_TILE_DEF(NAME, ATTR, VEC, LANES, MTYPE, MASK, ZERO, SET1, FMA, ADD, LOADM, STOREN,     \
                    K, RB, OB, XV, RRU)                                                           \
  ATTR static void NAME(const cr_job *j, const float *src, const float *wp, unsigned y0,         \
                        unsigned x0, unsigned nob, const float *bias, float *out) {              \
    size_t ip = (size_t)j->in_h * j->in_w, op = (size_t)j->out_h * j->out_w;                     \
    MTYPE m[XV][K];                                                                               \
    long off[XV][K];                                                                              \
    unsigned nl[XV];                                                                              \
    _Pragma("GCC unroll 4") for (unsigned t = 0; t < (XV); t++) {                                \
      long x = (long)x0 + (long)t * (LANES);                                                      \
      long r = (long)j->out_w - x;                                                                \
      nl[t] = r <= 0 ? 0 : r < (LANES) ? (unsigned)r : (LANES);                                   \
      _Pragma("GCC unroll 8") for (unsigned b = 0; b < (K); b++) {                               \
        unsigned lo, hi;                                                                          \
        cr_lanes(j, x, b, (LANES), &lo, &hi);                                                     \
        off[t][b] = x + (long)b - j->offx;                                                        \
        m[t][b] = MASK(lo, hi);                                                                   \
      }                                                                                           \
    }                                                                                             \
    VEC acc[RB][OB][XV];                                                                          \
    _Pragma("GCC unroll 8") for (unsigned q = 0; q < (RB); q++)                                  \
        _Pragma("GCC unroll 8") for (unsigned o = 0; o < (OB); o++)                              \
            _Pragma("GCC unroll 4") for (unsigned t = 0; t < (XV); t++) acc[q][o][t] = ZERO;     \
    for (unsigned i = 0; i < j->in_c; i++) {                                                      \
      const float *plane = src + i * ip, *wi = wp + (size_t)i * (K) * (K) * (OB);                 \
      CR_UNROLL(RRU) for (unsigned rr = 0; rr < (RB) + (K)-1; rr++) {                             \
        long sy = (long)y0 + (long)rr - j->offy;                                                  \
        if (sy < 0 || sy >= (long)j->in_h)                                                        \
          continue;                                                                               \
        const float *row = plane + (size_t)sy * j->in_w;                                          \
        _Pragma("GCC unroll 8") for (unsigned b = 0; b < (K); b++) {                             \
          VEC v[XV];                                                                              \
          _Pragma("GCC unroll 4") for (unsigned t = 0; t < (XV); t++) v[t] =                     \
              LOADM(row, off[t][b], m[t][b]);                                                     \
          _Pragma("GCC unroll 8") for (unsigned q = 0; q < (RB); q++) {                          \
            /* the accumulator row q takes this source row as tap a */                           \
            int a = (int)rr - (int)q;                                                             \
            if (a < 0 || a >= (K))                                                                \
              continue;                                                                           \
            _Pragma("GCC unroll 8") for (unsigned o = 0; o < (OB); o++) {                        \
              VEC w = SET1(wi[((unsigned)a * (K) + b) * (OB) + o]);                               \
              _Pragma("GCC unroll 4") for (unsigned t = 0; t < (XV); t++) acc[q][o][t] =         \
                  FMA(w, v[t], acc[q][o][t]);                                                     \
            }                                                                                     \
          }                                                                                       \
        }                                                                                         \
      }                                                                                           \
    }                                                                                             \
    _Pragma("GCC unroll 8") for (unsigned q = 0; q < (RB); q++)                                  \
        _Pragma("GCC unroll 8") for (unsigned o = 0; o < (OB); o++) if (o < nob)                 \
            _Pragma("GCC unroll 4") for (unsigned t = 0; t < (XV); t++) if (nl[t]) {             \
      float *p = out + o * op + (size_t)(y0 + q) * j->out_w + x0 + t * (LANES);                   \
      STOREN(p, bias ? ADD(acc[q][o][t], SET1(bias[o])) : acc[q][o][t], nl[t]);                  \
    }                                                                                             \
  }

/* One tile function of a vector path (its operations ARGS, one macro: a
 * level of expansion first). */
#define CR_TILE_(...) CR_TILE_DEF(__VA_ARGS__)
#define CR_TILE(NAME, ATTR, ARGS, K, RB, OB, XV, RRU) \
  CR_TILE_(NAME, ATTR, ARGS, K, RB, OB, XV, RRU)

/* The portable vectors: CR_LANES_C plain floats (the compiler's own
 * vectors where it makes them), a mask a lane range; products rounded
 * before the add (within rounding of the other paths). Blocks of 8 and 1
 * channels, one row a tile (6 channels take a block of 8): the source
 * rows' loop not unrolled, to keep the code small. */
#define CR_LANES_C 8
NNT_CV_PORTABLE(cr, CR_LANES_C)
#define CR_C_ARGS cr_vec, CR_LANES_C, cr_rng, cr_mask, cr_zero(), cr_set1, cr_madd, cr_add, \
                  cr_loadm, cr_storen
CR_TILE(cr_c_8_3, , CR_C_ARGS, 3, 1, 8, 1, 1)
CR_TILE(cr_c_1_3, , CR_C_ARGS, 3, 1, 1, 1, 1)
CR_TILE(cr_c_8_5, , CR_C_ARGS, 5, 1, 8, 1, 1)
CR_TILE(cr_c_1_5, , CR_C_ARGS, 5, 1, 1, 1, 1)
static const cr_kind cr_c_kinds[2][3] = {
    {{8, 1, 8, cr_c_8_3, NULL}, {8, 1, 8, cr_c_8_3, NULL}, {1, 1, 8, cr_c_1_3, NULL}},
    {{8, 1, 8, cr_c_8_5, NULL}, {8, 1, 8, cr_c_8_5, NULL}, {1, 1, 8, cr_c_1_5, NULL}}};

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* 32 vector registers: 24 accumulators for 8 and 6 channels, 16 for one
 * (8 rows of two vectors); 16 on AVX2: 8, 12 and 8. */
#define CR_512_ARGS __m512, 16, __mmask16, nnt_cv_mask512, _mm512_setzero_ps(), _mm512_set1_ps, \
                    _mm512_fmadd_ps, _mm512_add_ps, nnt_cv_loadm512, nnt_cv_storen512
#define CR_256_ARGS __m256, 8, __m256i, nnt_cv_mask256, _mm256_setzero_ps(), _mm256_set1_ps, \
                    _mm256_fmadd_ps, _mm256_add_ps, nnt_cv_loadm256, nnt_cv_storen256
/* Blocks of 8, 6 and 1 channels for K = 3 and 5: RB rows a tile (and a
 * one-row tail where RB > 1), one vector of columns, two for one channel. */
#define CR_512_K(K)                                                                           \
  CR_TILE(cr_512_8_##K, NNT_CV_AVX512, CR_512_ARGS, K, 3, 8, 1, 16)                               \
  CR_TILE(cr_512_8t_##K, NNT_CV_AVX512, CR_512_ARGS, K, 1, 8, 1, 16)                              \
  CR_TILE(cr_512_6_##K, NNT_CV_AVX512, CR_512_ARGS, K, 4, 6, 1, 16)                               \
  CR_TILE(cr_512_6t_##K, NNT_CV_AVX512, CR_512_ARGS, K, 1, 6, 1, 16)                              \
  CR_TILE(cr_512_1_##K, NNT_CV_AVX512, CR_512_ARGS, K, 8, 1, 2, 16)                               \
  CR_TILE(cr_512_1t_##K, NNT_CV_AVX512, CR_512_ARGS, K, 1, 1, 2, 16)
#define CR_256_K(K)                                                                           \
  CR_TILE(cr_256_8_##K, NNT_CV_AVX2, CR_256_ARGS, K, 1, 8, 1, 16)                                 \
  CR_TILE(cr_256_6_##K, NNT_CV_AVX2, CR_256_ARGS, K, 2, 6, 1, 16)                                 \
  CR_TILE(cr_256_6t_##K, NNT_CV_AVX2, CR_256_ARGS, K, 1, 6, 1, 16)                                \
  CR_TILE(cr_256_1_##K, NNT_CV_AVX2, CR_256_ARGS, K, 4, 1, 2, 16)                                 \
  CR_TILE(cr_256_1t_##K, NNT_CV_AVX2, CR_256_ARGS, K, 1, 1, 2, 16)
CR_512_K(3)
CR_512_K(5)
CR_256_K(3)
CR_256_K(5)
static const cr_kind cr_512_kinds[2][3] = {
    {{8, 3, 16, cr_512_8_3, cr_512_8t_3}, {6, 4, 16, cr_512_6_3, cr_512_6t_3},
     {1, 8, 32, cr_512_1_3, cr_512_1t_3}},
    {{8, 3, 16, cr_512_8_5, cr_512_8t_5}, {6, 4, 16, cr_512_6_5, cr_512_6t_5},
     {1, 8, 32, cr_512_1_5, cr_512_1t_5}}};
static const cr_kind cr_256_kinds[2][3] = {
    {{8, 1, 8, cr_256_8_3, NULL}, {6, 2, 8, cr_256_6_3, cr_256_6t_3},
     {1, 4, 16, cr_256_1_3, cr_256_1t_3}},
    {{8, 1, 8, cr_256_8_5, NULL}, {6, 2, 8, cr_256_6_5, cr_256_6t_5},
     {1, 4, 16, cr_256_1_5, cr_256_1t_5}}};
#endif

/* The tilings of a path for kernel size k (3 or 5), or NULL when this CPU
 * cannot run the path. */
static const cr_kind *cr_kinds_of(int path, unsigned k) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  unsigned ki = k == 5;
  __builtin_cpu_init();
  if (path >= NNT_BLAS_AVX512)
    return __builtin_cpu_supports("avx512f") ? cr_512_kinds[ki] : NULL;
  if (path >= NNT_BLAS_AVX2)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? cr_256_kinds[ki]
                                                                           : NULL;
#else
  if (path >= NNT_BLAS_AVX2)
    return NULL;
#endif
  return cr_c_kinds[k == 5];
}

/* Parts are (channel block, image) pairs, the images of a block
 * consecutive: its weights are packed as [i][a][b][OB] (zeros past the
 * last channel) when the block changes, once or twice a thread. */
static void cr_part(void *p, size_t u0, size_t u1) {
  const cr_job *j = p;
  const cr_kind *kd = j->kind;
  unsigned k = j->k, ob = kd->ob;
  size_t taps = (size_t)k * k, ip = (size_t)j->in_h * j->in_w, op = (size_t)j->out_h * j->out_w;
  float wp[NNT_CONV_ROWS_MAX_TAPS * CR_MAX_OB];
  size_t packed = SIZE_MAX;
  for (size_t u = u0; u < u1; u++) {
    size_t blk = u / j->n, img = u % j->n, o0 = blk * ob;
    unsigned nob = (unsigned)(j->out_c - o0 < ob ? j->out_c - o0 : ob);
    if (packed != blk) {
      for (size_t i = 0; i < j->in_c; i++)
        for (size_t t = 0; t < taps; t++)
          for (unsigned o = 0; o < ob; o++) {
            float v = 0.0f;
            if (o < nob)
              v = j->deriv ? j->w[(i * j->out_c + o0 + o) * taps + taps - 1 - t]
                           : j->w[((o0 + o) * j->in_c + i) * taps + t];
            wp[(i * taps + t) * ob + o] = v;
          }
      packed = blk;
    }
    const float *src = j->src + img * j->in_c * ip;
    float *out = j->out + (img * j->out_c + o0) * op;
    const float *bias = j->bias ? j->bias + o0 : NULL;
    unsigned y = 0;
    for (; y + kd->rb <= j->out_h; y += kd->rb)
      for (unsigned x = 0; x < j->out_w; x += kd->cols)
        kd->tile(j, src, wp, y, x, nob, bias, out);
    for (; y < j->out_h; y++)
      for (unsigned x = 0; x < j->out_w; x += kd->cols)
        kd->tail(j, src, wp, y, x, nob, bias, out);
  }
}

/* The channel block for out_c channels (nnt_conv_rows_take's). */
static unsigned cr_block(size_t out_c) {
  return out_c == 1 ? 1 : out_c % 8 && out_c % 6 == 0 ? 6 : 8;
}

int nnt_cpu_conv_rows(int path, const nnt_conv_geom *g, size_t n, size_t filters, int deriv,
                      const float *w, const float *bias, const float *src, float *out) {
  if (!g || !nnt_conv_rows_take(g, deriv ? filters : g->c, deriv ? g->c : filters))
    return NNT_ERR_INVAL;
  const cr_kind *kinds = cr_kinds_of(path, g->kh);
  if (!kinds)
    return NNT_ERR_INVAL;
  unsigned k = g->kh;
  cr_job j = {.k = k, .deriv = deriv, .n = n, .w = w, .bias = bias, .src = src, .out = out};
  if (deriv) {
    j.in_c = (unsigned)filters, j.in_h = g->oh, j.in_w = g->ow;
    j.out_c = g->c, j.out_h = g->h, j.out_w = g->w;
    j.offy = (long)k - 1 - (long)g->pt, j.offx = (long)k - 1 - (long)g->pl;
  } else {
    j.in_c = g->c, j.in_h = g->h, j.in_w = g->w;
    j.out_c = (unsigned)filters, j.out_h = g->oh, j.out_w = g->ow;
    j.offy = g->pt, j.offx = g->pl;
  }
  unsigned want = cr_block(j.out_c);
  j.kind = &kinds[want == 8 ? 0 : want == 6 ? 1 : 2];
  unsigned ob = j.kind->ob; /* the portable code packs 6 channels in 8 */
  if (!n || !j.out_c || !j.out_h || !j.out_w)
    return NNT_OK;
  j.oblocks = (j.out_c + ob - 1) / ob;
  /* parts of at least about 64K multiply-adds */
  size_t per = (size_t)j.in_c * k * k * ob * j.out_h * j.out_w;
  size_t min = per >= 65536 ? 1 : 65536 / (per + 1) + 1;
  nnt_cpu_pool_for(n * j.oblocks, 1, min, cr_part, &j);
  return NNT_OK;
}
