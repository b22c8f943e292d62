/* The CPU's forward of a convolution with a stride of 2 and a window 3
 * wide (ResNet's downsampling 3x3 layers), for conv_fwd where
 * nnt_conv_str_take says, on AVX-512. im2col of such a layer copies each
 * input value into up to nine columns, and the product of one image's
 * columns (a plane of 256 or 64 positions) is too narrow for OpenBLAS to
 * run at its best: 0.68-0.78 of a bare sgemm of the same size on an
 * Emerald Rapids (docs/performance.md). Here the filters are applied to
 * the input where it lies.
 *
 * A part is a block of 32 filters (16 where the filters end) over a run
 * of images. The input channels go in chunks whose packed filters
 * ([channel][tap][32], 18 KiB) stay in L1 while every image of the run
 * passes under them; a tile of 8 positions of one output row keeps 8 x 2
 * vector accumulators (its 32 filters), and every tap adds the packed
 * weights times the broadcast input value. Between chunks a tile's sums
 * wait in the part's own region of y, position by position; after the
 * last chunk each image's region is turned into y's layout [filter]
 * [position] with the bias added. Each output is the sum over the taps
 * (channel, row, column) in order from zero, a tap whose input lies in
 * the padding skipped, then the bias: the same bits on every thread
 * count, within rounding of im2col and gemm.
 *
 * The derivative (conv_bwd_x) and the weight gradient (conv_bwd_w) of
 * such layers likewise, below: dX by tiles of one row's positions of one
 * column parity (each takes one or two kernel columns from neighbouring
 * dY columns) with the filters in chunks, dW by blocks of 32 filters and
 * runs of channels whose 3 x 3 taps keep their sums in registers while
 * an image's positions pass. */
#include <string.h>

#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/kernels.h"
#include "nntrainer/compute/cpu_conv_vec.h"

#define STR_F 32     /* filters per block: two vectors of 16 */
#define STR_T 8      /* output positions per tile, of one output row */
#define STR_KW 3     /* the window's width */
#define STR_PACK 4608 /* packed filters of a chunk: 16 channels x 3 x 3 taps x 32 */
/* The derivative's packed filters: 64 filters x 3 x 3 taps x 32 channels
 * (72 KiB). Each dX position takes 1 to 4 of the 9 taps, so a chunk
 * adds less per filter than the forward's; with 16 filters a chunk
 * (18 KiB) res3a_c1's derivative ran at 0.67-0.68 of a bare sgemm, 32:
 * 0.89-0.90, 64: 0.93-0.98 (one thread, docs/performance.md). */
#define STR_DX_PACK (4 * STR_PACK)
#define STR_IMGS 16  /* images per part: a chunk's packing spread over them */
#define STR_MIN_C 16 /* fewer channels go to conv_fwd's direct kernel or im2col */

/* The columns [lo, hi) of an output row where tap column b's input lies
 * inside the row. */
static void str_cols(const nnt_conv_geom *g, unsigned b, unsigned *lo, unsigned *hi) {
  nnt_cpu_valid_cols(g, (long)b - (long)g->pl, lo, hi);
}

int nnt_conv_str_take(const nnt_conv_geom *g, size_t filters) {
  if (!g || (g->cs && g->cs != g->c) || g->sh != 2 || g->sw != 2 || g->kw != STR_KW ||
      g->dh != 1 || g->dw != 1 || g->c < STR_MIN_C || !filters || filters % 16 || !g->kh ||
      (size_t)g->kh * STR_KW * STR_F > STR_PACK || g->ow < STR_T || !g->oh ||
      (size_t)g->oh * g->ow > NNT_CONV_STR_MAX_PLANE)
    return 0;
  /* every tap's input inside the row for every position but the first */
  for (unsigned b = 0; b < STR_KW; b++) {
    unsigned lo, hi;
    str_cols(g, b, &lo, &hi);
    if (lo > 1 || hi != g->ow)
      return 0;
  }
  return 1;
}

int nnt_conv_str_runs(void) { return nnt_blas_cpu_rank() >= NNT_BLAS_AVX512; }

/* The derivative: dX's positions of one row and one column parity, ix =
 * 2 k + px, take the taps of one column parity, b = px + pl (mod 2), from
 * dY's columns k + (px + pl - b) / 2, neighbours; the rows likewise. The
 * dY columns [lo, hi) of phase position k's tap b lie inside dY's row. */
static void str_dx_cols(const nnt_conv_geom *g, unsigned px, unsigned b, unsigned nk,
                        unsigned *lo, unsigned *hi) {
  long s = ((long)px + (long)g->pl - (long)b) / 2; /* exact: the parities match */
  long l = s < 0 ? -s : 0, h = (long)g->ow - s;
  *lo = (unsigned)l;
  *hi = h > (long)nk ? nk : h < l ? (unsigned)l : (unsigned)h;
}

int nnt_conv_str_dx_take(const nnt_conv_geom *g, size_t filters) {
  if (!g || (g->cs && g->cs != g->c) || g->sh != 2 || g->sw != 2 || g->kw != STR_KW ||
      g->dh != 1 || g->dw != 1 || g->c % 16 || !g->c || filters < STR_MIN_C || !g->kh ||
      (size_t)g->kh * STR_KW * STR_F > STR_PACK || g->w < 2 * STR_T || !g->h ||
      (size_t)g->h * g->w > NNT_CONV_STR_MAX_DX_PLANE || !g->oh || !g->ow)
    return 0;
  /* every tap inside dY's row for every phase position but the first and
   * the last */
  for (unsigned px = 0; px < 2; px++) {
    unsigned nk = (g->w - px + 1) / 2;
    for (unsigned b = (px + g->pl) % 2; b < STR_KW; b += 2) {
      unsigned lo, hi;
      str_dx_cols(g, px, b, nk, &lo, &hi);
      if (lo > 1 || hi + 1 < nk)
        return 0;
    }
  }
  return 1;
}

/* The weight gradient: dW[f][c][a][b] = the sum over images and output
 * positions (in that order) of dY[f][p] X[c][2 oy + a - pt][2 ox + b - pl],
 * X zero outside its plane. */
int nnt_conv_str_dw_take(const nnt_conv_geom *g, size_t filters) {
  return g && (!g->cs || g->cs == g->c) && g->sh == 2 && g->sw == 2 && g->kw == STR_KW &&
         g->kh == STR_KW && g->dh == 1 && g->dw == 1 && g->c >= STR_MIN_C && filters &&
         filters % 16 == 0 && g->oh && g->ow >= STR_T &&
         (size_t)g->oh * g->ow <= NNT_CONV_STR_MAX_DW_PLANE;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* A job of any of the three: parts are (block of 32 output channels, run
 * of images or of input channels), runs of them a block. */
typedef struct str_job {
  const nnt_conv_geom *g;
  size_t n, filters, runs, plane, patch, hw, in_len;
  unsigned chunk; /* the forward's input channels, the derivative's filters, a chunk */
  unsigned lm;    /* the forward: bit b, the tap columns b that a row's first position skips */
  const float *w, *bias, *x, *dy;
  float *out; /* y, dx or dw */
} str_job;

/* A tile: the sums of nt positions (nt <= STR_T) of one output row, from input
 * column ix0 (tap column 0 of the first position) of rows iy0 + a, over
 * the chunk's nc channels from xc (hw floats apart), with the packed
 * weights wp ([channel][a][b][nv * 16]). io: the tile's sums [position]
 * [nv * 16], read first unless first, then written. lm as str_job's, for
 * the tile's first position. */
NNT_CV_AVX512 static inline __attribute__((always_inline)) void
str_tile(const str_job *j, unsigned nv, unsigned nt, const float *xc, long iy0, long ix0,
         unsigned lm, unsigned nc, const float *wp, float *io, int first) {
  const nnt_conv_geom *g = j->g;
  size_t nf = (size_t)nv * 16;
  __m512 acc[STR_T][2];
  _Pragma("GCC unroll 8") for (unsigned t = 0; t < STR_T; t++) {
    _Pragma("GCC unroll 2") for (unsigned v = 0; v < nv; v++) acc[t][v] =
        first || t >= nt ? _mm512_setzero_ps() : _mm512_loadu_ps(io + t * nf + v * 16);
  }
  const float *wt = wp;
  for (unsigned c = 0; c < nc; c++)
    for (unsigned a = 0; a < g->kh; a++, wt += STR_KW * nf) {
      long iy = iy0 + (long)a;
      if (iy < 0 || iy >= (long)g->h)
        continue;
      const float *xr = xc + c * j->hw + (size_t)iy * g->w;
      _Pragma("GCC unroll 3") for (unsigned b = 0; b < STR_KW; b++) {
        __m512 w0 = _mm512_loadu_ps(wt + b * nf),
               w1 = nv > 1 ? _mm512_loadu_ps(wt + b * nf + 16) : w0;
        _Pragma("GCC unroll 8") for (unsigned t = 0; t < STR_T; t++) {
          if (t >= nt || (t == 0 && (lm >> b & 1u)))
            continue; /* past the tile, or its input lies in the padding */
          __m512 xb = _mm512_set1_ps(xr[ix0 + 2 * (long)t + (long)b]);
          acc[t][0] = _mm512_fmadd_ps(w0, xb, acc[t][0]);
          if (nv > 1)
            acc[t][1] = _mm512_fmadd_ps(w1, xb, acc[t][1]);
        }
      }
    }
  _Pragma("GCC unroll 8") for (unsigned t = 0; t < STR_T; t++) if (t < nt)
      _Pragma("GCC unroll 2") for (unsigned v = 0; v < nv; v++)
          _mm512_storeu_ps(io + t * nf + v * 16, acc[t][v]);
}

/* The tiles, for 2 and 1 vectors of filters, whole (STR_T positions) and
 * cut short. */
#define STR_TILE_FN(NAME, NV, NT)                                                             \
  NNT_CV_AVX512 static void NAME(const str_job *j, unsigned nt, const float *xc, long iy0,   \
                                 long ix0, unsigned lm, unsigned nc, const float *wp,        \
                                 float *io, int first) {                                     \
    (void)nt;                                                                                \
    str_tile(j, NV, NT, xc, iy0, ix0, lm, nc, wp, io, first);                                \
  }
STR_TILE_FN(str_tile2, 2, STR_T)
STR_TILE_FN(str_tile2_cut, 2, nt)
STR_TILE_FN(str_tile1, 1, STR_T)
STR_TILE_FN(str_tile1_cut, 1, nt)

/* Parts u = (filter block, run of STR_IMGS images). */
NNT_CV_AVX512 static void str_part(void *arg, size_t u0, size_t u1) {
  const str_job *j = arg;
  const nnt_conv_geom *g = j->g;
  float wp[STR_PACK];
  float tmp[NNT_CONV_STR_MAX_PLANE * STR_F];
  size_t taps = (size_t)g->kh * STR_KW;
  for (size_t u = u0; u < u1; u++) {
    size_t f0 = u / j->runs * STR_F, i0 = u % j->runs * STR_IMGS;
    size_t i1 = j->n - i0 < STR_IMGS ? j->n : i0 + STR_IMGS;
    size_t nf = j->filters - f0 < STR_F ? j->filters - f0 : STR_F;
    unsigned nv = (unsigned)(nf / 16);
    for (size_t c0 = 0; c0 < g->c; c0 += j->chunk) {
      unsigned nc = g->c - c0 < j->chunk ? (unsigned)(g->c - c0) : j->chunk;
      /* wp[(c * taps + q) * nf + f] = W[f0 + f][c0 + c][q] */
      for (size_t f = 0; f < nf; f++) {
        const float *wf = j->w + (f0 + f) * j->patch + c0 * taps;
        for (size_t q = 0; q < nc * taps; q++)
          wp[q * nf + f] = wf[q];
      }
      for (size_t i = i0; i < i1; i++) {
        const float *xc = j->x + i * j->in_len + c0 * j->hw;
        float *io = j->out + (i * j->filters + f0) * j->plane;
        for (unsigned oy = 0; oy < g->oh; oy++) {
          long iy0 = 2 * (long)oy - (long)g->pt;
          for (unsigned ox = 0; ox < g->ow; ox += STR_T) {
            unsigned nt = g->ow - ox < STR_T ? g->ow - ox : STR_T, lm = ox ? 0 : j->lm;
            long ix0 = 2 * (long)ox - (long)g->pl;
            float *t = io + ((size_t)oy * g->ow + ox) * nf;
            if (nv > 1 && nt == STR_T)
              str_tile2(j, nt, xc, iy0, ix0, lm, nc, wp, t, c0 == 0);
            else if (nv > 1)
              str_tile2_cut(j, nt, xc, iy0, ix0, lm, nc, wp, t, c0 == 0);
            else if (nt == STR_T)
              str_tile1(j, nt, xc, iy0, ix0, lm, nc, wp, t, c0 == 0);
            else
              str_tile1_cut(j, nt, xc, iy0, ix0, lm, nc, wp, t, c0 == 0);
          }
        }
      }
    }
    /* each image's region from [position][filter] to [filter][position] */
    for (size_t i = i0; i < i1; i++) {
      float *io = j->out + (i * j->filters + f0) * j->plane;
      memcpy(tmp, io, nf * j->plane * sizeof *tmp);
      for (size_t f = 0; f < nf; f++) {
        float b = j->bias ? j->bias[f0 + f] : 0.0f, *yf = io + f * j->plane;
        if (j->bias)
          for (size_t p = 0; p < j->plane; p++)
            yf[p] = tmp[p * nf + f] + b;
        else
          for (size_t p = 0; p < j->plane; p++)
            yf[p] = tmp[p * nf + f];
      }
    }
  }
}

/* A derivative tile: the sums of nt phase positions k0 + t (nt <= STR_T)
 * of dX row iy, columns 2 (k0 + t) + px, over the chunk's nf filters of
 * dY from dyc (plane floats apart), with the packed weights wp
 * ([filter][a][b][nv * 16]). The taps that reach dY (at most 2 x 2: a
 * row and a column parity each) go outside, the filters inside: each sum
 * adds, tap by tap, every filter in order. io: the tile's first
 * position's sums ([position][nv * 16], positions 2 apart), read first
 * unless first, then written. lm, rm: bit b, the taps b that the first,
 * the last position skips. */
NNT_CV_AVX512 static inline __attribute__((always_inline)) void
str_dx_tile(const str_job *j, unsigned nv, unsigned nt, const float *dyc, unsigned iy,
            unsigned px, long k0, unsigned lm, unsigned rm, unsigned nf, const float *wp,
            float *io, int first) {
  const nnt_conv_geom *g = j->g;
  size_t vf = (size_t)nv * 16, fs = (size_t)g->kh * STR_KW * vf;
  __m512 acc[STR_T][2];
  _Pragma("GCC unroll 8") for (unsigned t = 0; t < STR_T; t++) {
    _Pragma("GCC unroll 2") for (unsigned v = 0; v < nv; v++) acc[t][v] =
        first || t >= nt ? _mm512_setzero_ps() : _mm512_loadu_ps(io + 2 * t * vf + v * 16);
  }
  for (unsigned a = 0; a < g->kh; a++) {
    long ry = (long)iy + (long)g->pt - (long)a;
    if (ry < 0 || ry % 2 || ry / 2 >= (long)g->oh)
      continue;
    for (unsigned b = (px + g->pl) % 2; b < STR_KW; b += 2) {
      long s = k0 + ((long)px + (long)g->pl - (long)b) / 2; /* dY's column of position 0 */
      const float *dr = dyc + (size_t)(ry / 2) * g->ow + s;
      const float *wt = wp + (a * STR_KW + b) * vf;
      int s0 = lm >> b & 1u, sl = rm >> b & 1u; /* outside dY's row */
      for (unsigned f = 0; f < nf; f++, dr += j->plane, wt += fs) {
        __m512 w0 = _mm512_loadu_ps(wt), w1 = nv > 1 ? _mm512_loadu_ps(wt + 16) : w0;
        _Pragma("GCC unroll 8") for (unsigned t = 0; t < STR_T; t++) {
          if (t >= nt || (t == 0 && s0) || (t + 1 == nt && sl))
            continue; /* past the tile, or outside dY's row */
          __m512 yb = _mm512_set1_ps(dr[t]);
          acc[t][0] = _mm512_fmadd_ps(w0, yb, acc[t][0]);
          if (nv > 1)
            acc[t][1] = _mm512_fmadd_ps(w1, yb, acc[t][1]);
        }
      }
    }
  }
  _Pragma("GCC unroll 8") for (unsigned t = 0; t < STR_T; t++) if (t < nt)
      _Pragma("GCC unroll 2") for (unsigned v = 0; v < nv; v++)
          _mm512_storeu_ps(io + 2 * t * vf + v * 16, acc[t][v]);
}

#define STR_DX_TILE_FN(NAME, NV, NT)                                                          \
  NNT_CV_AVX512 static void NAME(const str_job *j, unsigned nt, const float *dyc,          \
                                 unsigned iy, unsigned px, long k0, unsigned lm, unsigned rm, \
                                 unsigned nf, const float *wp, float *io, int first) {       \
    (void)nt;                                                                                \
    str_dx_tile(j, NV, NT, dyc, iy, px, k0, lm, rm, nf, wp, io, first);                      \
  }
STR_DX_TILE_FN(str_dx_tile2, 2, STR_T)
STR_DX_TILE_FN(str_dx_tile2_cut, 2, nt)
STR_DX_TILE_FN(str_dx_tile1, 1, STR_T)
STR_DX_TILE_FN(str_dx_tile1_cut, 1, nt)

/* The skip masks of phase px's positions at the ends of a row: lm for
 * k = 0, rm for k = nk - 1. */
static void str_dx_masks(const nnt_conv_geom *g, unsigned px, unsigned *lm, unsigned *rm) {
  unsigned nk = (g->w - px + 1) / 2;
  *lm = *rm = 0;
  for (unsigned b = (px + g->pl) % 2; b < STR_KW; b += 2) {
    unsigned lo, hi;
    str_dx_cols(g, px, b, nk, &lo, &hi);
    *lm |= (unsigned)(lo > 0) << b;
    *rm |= (unsigned)(hi < nk) << b;
  }
}

/* 16 rows of 16 floats (src, ss floats apart) into 16 rows of 16 (dst,
 * ds floats apart), turned: dst row c holds src's column c. */
NNT_CV_AVX512 static inline void str_turn16(const float *src, size_t ss, float *dst,
                                            size_t ds) {
  __m512 r[16], t[16];
  for (unsigned i = 0; i < 16; i++)
    r[i] = _mm512_loadu_ps(src + i * ss);
  /* each 128-bit lane L of a pair: rows i and i + 1 at columns 4 L .. 4 L + 3 */
  for (unsigned i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  /* r[i + e], i a multiple of 4: lane L holds rows i .. i + 3 at column 4 L + e */
  for (unsigned i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  /* column 4 L + e: lane L of r[e], r[4 + e], r[8 + e], r[12 + e] */
  for (unsigned e = 0; e < 4; e++) {
    __m512 a = _mm512_shuffle_f32x4(r[e], r[4 + e], 0x88),
           b = _mm512_shuffle_f32x4(r[e], r[4 + e], 0xdd);
    __m512 c = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], 0x88),
           d = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], 0xdd);
    _mm512_storeu_ps(dst + e * ds, _mm512_shuffle_f32x4(a, c, 0x88));
    _mm512_storeu_ps(dst + (4 + e) * ds, _mm512_shuffle_f32x4(b, d, 0x88));
    _mm512_storeu_ps(dst + (8 + e) * ds, _mm512_shuffle_f32x4(a, c, 0xdd));
    _mm512_storeu_ps(dst + (12 + e) * ds, _mm512_shuffle_f32x4(b, d, 0xdd));
  }
}

/* An image's block of dX from [position][channel] (np x nc) to
 * [channel][position] where it lies, through tmp of (np + 1) / 2 x nc
 * floats: the first half of the positions is saved; the lower half of
 * the channels, which then lands on what was saved, is written from tmp
 * and from the positions still in place; the upper half's values of
 * those positions go into tmp's slots already read; then the upper half
 * is written from tmp alone. With 32 channels and whole blocks of 16
 * positions in each half, by 16 x 16 turns in registers: one value at a
 * time, the turn took an eighth of res2a_c1's derivative. */
NNT_CV_AVX512 static void str_dx_turn(float *io, size_t np, size_t nc, float *tmp) {
  size_t h = (np + 1) / 2, lc = nc / 2;
  memcpy(tmp, io, h * nc * sizeof *tmp);
  if (nc == 32 && np % 32 == 0) {
    for (size_t q = 0; q < np; q += 16)
      str_turn16(q < h ? tmp + q * nc : io + q * nc, nc, io + q, np);
    for (size_t q = h; q < np; q++)
      memcpy(tmp + (q - h) * nc, io + q * nc + lc, lc * sizeof *tmp);
    for (size_t q = 0; q < np; q += 16)
      str_turn16(q < h ? tmp + q * nc + lc : tmp + (q - h) * nc, nc, io + lc * np + q, np);
    return;
  }
  for (size_t c = 0; c < lc; c++) {
    float *y = io + c * np; /* below h * nc: over saved positions only */
    for (size_t q = 0; q < h; q++)
      y[q] = tmp[q * nc + c];
    for (size_t q = h; q < np; q++)
      y[q] = io[q * nc + c];
  }
  for (size_t q = h; q < np; q++) /* the upper channels of the upper positions */
    for (size_t c = lc; c < nc; c++)
      tmp[(q - h) * nc + (c - lc)] = io[q * nc + c];
  for (size_t c = lc; c < nc; c++) {
    float *y = io + c * np;
    for (size_t q = 0; q < h; q++)
      y[q] = tmp[q * nc + c];
    for (size_t q = h; q < np; q++)
      y[q] = tmp[(q - h) * nc + (c - lc)];
  }
}

/* Parts u = (block of 32 channels, run of STR_IMGS images). */
NNT_CV_AVX512 static void str_dx_part(void *arg, size_t u0, size_t u1) {
  const str_job *j = arg;
  const nnt_conv_geom *g = j->g;
  float wp[STR_DX_PACK];
  float tmp[(NNT_CONV_STR_MAX_DX_PLANE + 1) / 2 * STR_F];
  size_t taps = (size_t)g->kh * STR_KW;
  unsigned lm[2], rm[2];
  for (unsigned px = 0; px < 2; px++)
    str_dx_masks(g, px, &lm[px], &rm[px]);
  for (size_t u = u0; u < u1; u++) {
    size_t c0 = u / j->runs * STR_F, i0 = u % j->runs * STR_IMGS;
    size_t i1 = j->n - i0 < STR_IMGS ? j->n : i0 + STR_IMGS;
    size_t nc = g->c - c0 < STR_F ? g->c - c0 : STR_F;
    unsigned nv = (unsigned)(nc / 16);
    for (size_t f0 = 0; f0 < j->filters; f0 += j->chunk) {
      unsigned nf = j->filters - f0 < j->chunk ? (unsigned)(j->filters - f0) : j->chunk;
      /* wp[(f * taps + q) * nc + c] = W[f0 + f][c0 + c][q] */
      for (size_t f = 0; f < nf; f++)
        for (size_t c = 0; c < nc; c++) {
          const float *wc = j->w + (f0 + f) * j->patch + (c0 + c) * taps;
          for (size_t q = 0; q < taps; q++)
            wp[(f * taps + q) * nc + c] = wc[q];
        }
      for (size_t i = i0; i < i1; i++) {
        const float *dyc = j->dy + (i * j->filters + f0) * j->plane;
        float *io = j->out + i * j->in_len + c0 * j->hw;
        for (unsigned iy = 0; iy < g->h; iy++)
          for (unsigned px = 0; px < 2; px++) {
            unsigned nk = (g->w - px + 1) / 2;
            for (unsigned k0 = 0; k0 < nk; k0 += STR_T) {
              unsigned nt = nk - k0 < STR_T ? nk - k0 : STR_T;
              unsigned l = k0 ? 0 : lm[px], r = k0 + nt == nk ? rm[px] : 0;
              float *t = io + ((size_t)iy * g->w + 2 * k0 + px) * nc;
              if (nv > 1 && nt == STR_T)
                str_dx_tile2(j, nt, dyc, iy, px, k0, l, r, nf, wp, t, f0 == 0);
              else if (nv > 1)
                str_dx_tile2_cut(j, nt, dyc, iy, px, k0, l, r, nf, wp, t, f0 == 0);
              else if (nt == STR_T)
                str_dx_tile1(j, nt, dyc, iy, px, k0, l, r, nf, wp, t, f0 == 0);
              else
                str_dx_tile1_cut(j, nt, dyc, iy, px, k0, l, r, nf, wp, t, f0 == 0);
            }
          }
      }
    }
    for (size_t i = i0; i < i1; i++)
      str_dx_turn(j->out + i * j->in_len + c0 * j->hw, j->hw, nc, tmp);
  }
}

/* The weight gradient's parts: runs of STR_DW_C channels. */
#define STR_DW_C 32

/* One output position's taps into s (the filters' sums [a][b][2]): d its
 * dY [nv * 16], xr the three input rows (rok: each inside the plane),
 * ix0 the column of tap b = 0. check: test each tap (edge rows and
 * positions); a tap whose input lies in the padding adds nothing. */
#define STR_DW_POS(CHECK)                                                                    \
  do {                                                                                       \
    __m512 d0 = _mm512_loadu_ps(d), d1 = nv > 1 ? _mm512_loadu_ps(d + 16) : d0;              \
    _Pragma("GCC unroll 3") for (unsigned a = 0; a < 3; a++) {                               \
      if ((CHECK) && !rok[a])                                                                \
        continue;                                                                            \
      _Pragma("GCC unroll 3") for (unsigned b = 0; b < 3; b++) {                             \
        long ix = ix0 + (long)b;                                                             \
        if ((CHECK) && (ix < 0 || ix >= (long)g->w))                                         \
          continue;                                                                          \
        __m512 xb = _mm512_set1_ps(xr[a][ix]);                                               \
        s[a][b][0] = _mm512_fmadd_ps(d0, xb, s[a][b][0]);                                    \
        if (nv > 1)                                                                          \
          s[a][b][1] = _mm512_fmadd_ps(d1, xb, s[a][b][1]);                                  \
      }                                                                                      \
    }                                                                                        \
  } while (0)

/* One channel's 3 x 3 taps over one image: acc [a][b][nv * 16] (the
 * filters' sums, loaded and stored), dt the image's dY as [position]
 * [nv * 16], xc the channel's plane, [lo, hi) the positions of a row
 * whose three columns lie inside. Positions in order. */
NNT_CV_AVX512 static inline __attribute__((always_inline)) void
str_dw_chan(const str_job *j, unsigned nv, const float *dt, const float *xc, unsigned lo,
            unsigned hi, float *acc) {
  const nnt_conv_geom *g = j->g;
  size_t vf = (size_t)nv * 16;
  __m512 s[3][3][2];
  _Pragma("GCC unroll 3") for (unsigned a = 0; a < 3; a++)
      _Pragma("GCC unroll 3") for (unsigned b = 0; b < 3; b++)
          _Pragma("GCC unroll 2") for (unsigned v = 0; v < nv; v++) s[a][b][v] =
              _mm512_loadu_ps(acc + (a * 3 + b) * vf + v * 16);
  for (unsigned oy = 0; oy < g->oh; oy++) {
    long iy0 = 2 * (long)oy - (long)g->pt;
    int rok[3], all = 1;
    const float *xr[3];
    _Pragma("GCC unroll 3") for (unsigned a = 0; a < 3; a++) {
      long iy = iy0 + (long)a;
      rok[a] = iy >= 0 && iy < (long)g->h;
      all &= rok[a];
      xr[a] = xc + (rok[a] ? (size_t)iy * g->w : 0);
    }
    const float *d = dt + (size_t)oy * g->ow * vf;
    unsigned ox = 0;
    if (all) {
      for (; ox < lo; ox++, d += vf) {
        long ix0 = 2 * (long)ox - (long)g->pl;
        STR_DW_POS(1);
      }
      for (; ox < hi; ox++, d += vf) {
        long ix0 = 2 * (long)ox - (long)g->pl;
        STR_DW_POS(0);
      }
    }
    for (; ox < g->ow; ox++, d += vf) {
      long ix0 = 2 * (long)ox - (long)g->pl;
      STR_DW_POS(1);
    }
  }
  _Pragma("GCC unroll 3") for (unsigned a = 0; a < 3; a++)
      _Pragma("GCC unroll 3") for (unsigned b = 0; b < 3; b++)
          _Pragma("GCC unroll 2") for (unsigned v = 0; v < nv; v++)
              _mm512_storeu_ps(acc + (a * 3 + b) * vf + v * 16, s[a][b][v]);
}

NNT_CV_AVX512 static void str_dw_chan2(const str_job *j, const float *dt, const float *xc,
                                       unsigned lo, unsigned hi, float *acc) {
  str_dw_chan(j, 2, dt, xc, lo, hi, acc);
}
NNT_CV_AVX512 static void str_dw_chan1(const str_job *j, const float *dt, const float *xc,
                                       unsigned lo, unsigned hi, float *acc) {
  str_dw_chan(j, 1, dt, xc, lo, hi, acc);
}

NNT_CV_AVX512 static void str_dw_part(void *arg, size_t u0, size_t u1) {
  const str_job *j = arg;
  const nnt_conv_geom *g = j->g;
  float dt[NNT_CONV_STR_MAX_DW_PLANE * STR_F];
  float acc[STR_DW_C * 9 * STR_F];
  /* dY's filters a vector apart (plane * 15 < 2^31: at most 256 positions) */
  __m512i lanes = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
                                                       13, 14, 15),
                                     _mm512_set1_epi32((int)j->plane));
  unsigned lo = 0, hi = g->ow; /* the positions whose three columns lie inside */
  for (unsigned b = 0; b < STR_KW; b++) {
    unsigned l, h;
    str_cols(g, b, &l, &h);
    lo = l > lo ? l : lo;
    hi = h < hi ? h : hi;
  }
  for (size_t u = u0; u < u1; u++) {
    size_t f0 = u / j->runs * STR_F, c0 = u % j->runs * STR_DW_C;
    size_t nf = j->filters - f0 < STR_F ? j->filters - f0 : STR_F;
    size_t nc = g->c - c0 < STR_DW_C ? g->c - c0 : STR_DW_C;
    memset(acc, 0, nc * 9 * nf * sizeof *acc);
    for (size_t i = 0; i < j->n; i++) {
      const float *dyi = j->dy + (i * j->filters + f0) * j->plane;
      for (size_t v = 0; v < nf / 16; v++) /* dY as [position][filter] */
        for (size_t p = 0; p < j->plane; p++)
          _mm512_storeu_ps(dt + p * nf + v * 16,
                           _mm512_i32gather_ps(lanes, dyi + v * 16 * j->plane + p, 4));
      for (size_t c = 0; c < nc; c++) {
        const float *xc = j->x + i * j->in_len + (c0 + c) * j->hw;
        if (nf > 16)
          str_dw_chan2(j, dt, xc, lo, hi, acc + c * 9 * nf);
        else
          str_dw_chan1(j, dt, xc, lo, hi, acc + c * 9 * nf);
      }
    }
    for (size_t f = 0; f < nf; f++)
      for (size_t c = 0; c < nc; c++)
        for (size_t q = 0; q < 9; q++)
          j->out[(f0 + f) * j->patch + (c0 + c) * 9 + q] = acc[(c * 9 + q) * nf + f];
  }
}
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* Whether this CPU runs the kernels' path and takes says yes; then the
 * job's common part (runs of images), and its parts (blocks of out_c). */
static int str_init(int path, int takes, const nnt_conv_geom *g, size_t n, size_t filters,
                    str_job *j) {
  __builtin_cpu_init();
  if (path < NNT_BLAS_AVX512 || !__builtin_cpu_supports("avx512f") || !takes)
    return NNT_ERR_INVAL;
  *j = (str_job){.g = g,
                 .n = n,
                 .filters = filters,
                 .runs = (n + STR_IMGS - 1) / STR_IMGS,
                 .plane = (size_t)g->oh * g->ow,
                 .patch = (size_t)g->c * g->kh * g->kw,
                 .hw = (size_t)g->h * g->w,
                 .in_len = nnt_conv_img_stride(g)};
  return NNT_OK;
}
#define STR_BLOCKS(c) (((c) + STR_F - 1) / STR_F)
#endif

int nnt_cpu_conv_str_fwd(int path, const nnt_conv_geom *g, size_t n, size_t filters,
                         const float *w, const float *bias, const float *x, float *y) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  str_job j;
  int rc = str_init(path, nnt_conv_str_take(g, filters), g, n, filters, &j);
  if (rc || !n)
    return rc;
  j.chunk = (unsigned)(STR_PACK / ((size_t)g->kh * STR_KW * STR_F));
  if (j.chunk > g->c)
    j.chunk = g->c;
  for (unsigned b = 0; b < STR_KW; b++) {
    unsigned lo, hi;
    str_cols(g, b, &lo, &hi);
    j.lm |= (unsigned)(lo > 0) << b;
  }
  j.w = w, j.bias = bias, j.x = x, j.out = y;
  nnt_cpu_pool_for(STR_BLOCKS(filters) * j.runs, 1, 1, str_part, &j);
  return NNT_OK;
#else
  (void)path, (void)g, (void)n, (void)filters, (void)w, (void)bias, (void)x, (void)y;
  return NNT_ERR_INVAL;
#endif
}

int nnt_cpu_conv_str_dx(int path, const nnt_conv_geom *g, size_t n, size_t filters,
                        const float *w, const float *dy, float *dx) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  str_job j;
  int rc = str_init(path, nnt_conv_str_dx_take(g, filters), g, n, filters, &j);
  if (rc || !n)
    return rc;
  j.chunk = (unsigned)(STR_DX_PACK / ((size_t)g->kh * STR_KW * STR_F));
  j.w = w, j.dy = dy, j.out = dx;
  nnt_cpu_pool_for(STR_BLOCKS(g->c) * j.runs, 1, 1, str_dx_part, &j);
  return NNT_OK;
#else
  (void)path, (void)g, (void)n, (void)filters, (void)w, (void)dy, (void)dx;
  return NNT_ERR_INVAL;
#endif
}

int nnt_cpu_conv_str_dw(int path, const nnt_conv_geom *g, size_t n, size_t filters,
                        const float *x, const float *dy, float *dw) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  str_job j;
  int rc = str_init(path, nnt_conv_str_dw_take(g, filters), g, n, filters, &j);
  if (rc)
    return rc;
  j.runs = (g->c + STR_DW_C - 1) / STR_DW_C; /* of channels: every image in each part */
  j.x = x, j.dy = dy, j.out = dw;
  nnt_cpu_pool_for(STR_BLOCKS(filters) * j.runs, 1, 1, str_dw_part, &j);
  return NNT_OK;
#else
  (void)path, (void)g, (void)n, (void)filters, (void)x, (void)dy, (void)dw;
  return NNT_ERR_INVAL;
#endif
}
