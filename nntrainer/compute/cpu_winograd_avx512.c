/* The AVX-512 code of Winograd's transforms (cpu_winograd.c takes it where
 * the CPU has AVX-512 and nnt_cpu_vec_path allows it): 16 tiles at a time,
 * the same adds, subtracts and products by 0 or +-1 in the same order as
 * the plain C loops there, so the same bits (test_conv_wino runs every
 * case both ways). */
#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/cpu_winograd.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <stdint.h>

#define WINO_AVX512 __attribute__((target("avx512f")))

/* Columns [x0, x0 + 16) of a row (NULL: a row outside the image, zeros),
 * those outside [0, w) zeros: a masked load, which reads nothing outside
 * the row (the address of column x0 is formed as an integer: x0 may lie
 * before the row). */
static WINO_AVX512 __m512 v_cols16(const float *row, long x0, long w) {
  if (!row || x0 >= w || x0 + 16 <= 0)
    return _mm512_setzero_ps();
  long lo = x0 < 0 ? -x0 : 0, hi = w - x0 < 16 ? w - x0 : 16;
  __mmask16 m = (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
  return _mm512_maskz_loadu_ps(m, (const void *)((uintptr_t)row + (uintptr_t)(x0 * 4)));
}

/* A row's 4 slices (NULL: not in the pass), the first tiles of m. */
static WINO_AVX512 void store4(float *const o[4], __mmask16 m, const __m512 v[4]) {
  for (int k = 0; k < 4; k++)
    if (o[k])
      _mm512_mask_storeu_ps(o[k], m, v[k]);
}

/* v_row's arithmetic for up to 16 tiles at once, every tile alike (the
 * padding's zeros come from v_cols16): row r's columns 2q .. 2q + 3 of
 * tile q from columns [x0, x0 + 34); rows[r] NULL outside the image;
 * o[k] NULL for a slice outside the pass; nt tiles stored. The same adds
 * and subtracts in the same order as v_row and the edge tiles' loop (x +
 * sg y with sg +-1 is x + y or x - y, bit for bit): the same V. */
static WINO_AVX512 void v_block16(const float *const rows[4], long x0, long w, unsigned nt,
                                  float *const o[16]) {
  const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const __m512i nx0 = _mm512_set_epi32(16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1);
  const __m512i nx1 = _mm512_set_epi32(17, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1);
  __m512 e[4], d[4], e1[4], d1[4]; /* columns 2q, 2q + 1, 2q + 2, 2q + 3 of row r */
  for (int r = 0; r < 4; r++) {
    __m512 a = v_cols16(rows[r], x0, w), b = v_cols16(rows[r], x0 + 16, w);
    __m512 c = v_cols16(rows[r], x0 + 32, w);
    e[r] = _mm512_permutex2var_ps(a, ev, b);
    d[r] = _mm512_permutex2var_ps(a, od, b);
    e1[r] = _mm512_permutex2var_ps(e[r], nx0, c);
    d1[r] = _mm512_permutex2var_ps(d[r], nx1, c);
  }
  __mmask16 m = (__mmask16)(nt >= 16 ? 0xffffu : (1u << nt) - 1);
  static const int xs[4] = {0, 1, 2, 1}, ys[4] = {2, 2, 1, 3}, plus[4] = {0, 1, 0, 0};
  for (int a = 0; a < 4; a++) {
    if (!o[4 * a] && !o[4 * a + 1] && !o[4 * a + 2] && !o[4 * a + 3])
      continue;
    int x = xs[a], y = ys[a];
    __m512 te = plus[a] ? _mm512_add_ps(e[x], e[y]) : _mm512_sub_ps(e[x], e[y]);
    __m512 td = plus[a] ? _mm512_add_ps(d[x], d[y]) : _mm512_sub_ps(d[x], d[y]);
    __m512 te1 = plus[a] ? _mm512_add_ps(e1[x], e1[y]) : _mm512_sub_ps(e1[x], e1[y]);
    __m512 td1 = plus[a] ? _mm512_add_ps(d1[x], d1[y]) : _mm512_sub_ps(d1[x], d1[y]);
    __m512 out[4] = {_mm512_sub_ps(te, te1), _mm512_add_ps(td, te1), _mm512_sub_ps(te1, td),
                     _mm512_sub_ps(td, td1)};
    store4(o + 4 * a, m, out);
  }
}

/* V of channels [c0, c1) for the chunk's tiles, 16 tiles at a time. */
WINO_AVX512 void nnt_wino_v_part_avx512(void *arg, size_t c0, size_t c1) {
  const wino_job *j = arg;
  const nnt_conv_geom *g = j->g;
  for (size_t c = c0; c < c1; c++)
    for (size_t sg = 0; sg < j->nseg; sg++) {
      size_t i = j->seg[sg].i, ty = j->seg[sg].ty, tx = j->seg[sg].tx, len = j->seg[sg].len;
      size_t tl = j->seg[sg].tl;
      const float *xc = j->x + (i * j->c + c) * g->h * g->w;
      const float *rows[4];
      for (int a = 0; a < 4; a++) {
        long iy = 2 * (long)ty - (long)g->pt + a;
        rows[a] = iy < 0 || iy >= (long)g->h ? NULL : xc + (size_t)iy * g->w;
      }
      for (size_t b = 0; b < len; b += 16) {
        unsigned nt = (unsigned)(len - b < 16 ? len - b : 16);
        float *o[16];
        nnt_wino_slices(j, j->v, j->c, c, tl + b, NULL, 0, o);
        v_block16(rows, 2 * (long)(tx + b) - (long)g->pl, (long)g->w, nt, o);
      }
    }
}

/* y_part (cpu_winograd.c) on AVX-512: at_m_a's adds and subtracts for 16
 * tiles at a time, each output row's even and odd values interleaved by
 * two permutes and stored (the first pass: plus the bias) or added to y
 * where they lie in the output, masked at its right edge. The same bits. */
WINO_AVX512 void nnt_wino_y_part_avx512(void *arg, size_t f0, size_t f1) {
  const wino_job *j = arg;
  const nnt_conv_geom *g = j->g;
  const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  size_t plane = (size_t)g->oh * g->ow;
  for (size_t f = f0; f < f1; f++)
    for (size_t sg = 0; sg < j->nseg; sg++) {
      size_t i = j->seg[sg].i, ty = j->seg[sg].ty, tx = j->seg[sg].tx, len = j->seg[sg].len;
      size_t tl = j->seg[sg].tl;
      float *yf = j->y + (i * j->f + f) * plane;
      __m512 bias = _mm512_set1_ps(j->first && j->bias ? j->bias[f] : 0.0f);
      for (size_t b = 0; b < len; b += 16) {
        size_t nt = len - b < 16 ? len - b : 16;
        float *mk[16];
        nnt_wino_slices(j, j->m, nnt_wino_m_rows(j), nnt_wino_m_row(j, f), tl + b, NULL, 0,
                        mk);
        __mmask16 k = (__mmask16)(nt >= 16 ? 0xffffu : (1u << nt) - 1);
        __m512 v[16];
        for (int q = 0; q < 16; q++)
          v[q] = mk[q] ? _mm512_maskz_loadu_ps(k, mk[q]) : _mm512_setzero_ps();
        __m512 a0 = _mm512_add_ps(_mm512_add_ps(v[0], v[4]), v[8]);
        __m512 a1 = _mm512_add_ps(_mm512_add_ps(v[1], v[5]), v[9]);
        __m512 a2 = _mm512_add_ps(_mm512_add_ps(v[2], v[6]), v[10]);
        __m512 a3 = _mm512_add_ps(_mm512_add_ps(v[3], v[7]), v[11]);
        __m512 b0 = _mm512_sub_ps(_mm512_sub_ps(v[4], v[8]), v[12]);
        __m512 b1 = _mm512_sub_ps(_mm512_sub_ps(v[5], v[9]), v[13]);
        __m512 b2 = _mm512_sub_ps(_mm512_sub_ps(v[6], v[10]), v[14]);
        __m512 b3 = _mm512_sub_ps(_mm512_sub_ps(v[7], v[11]), v[15]);
        __m512 ev[2] = {_mm512_add_ps(_mm512_add_ps(a0, a1), a2),
                        _mm512_add_ps(_mm512_add_ps(b0, b1), b2)};
        __m512 od[2] = {_mm512_sub_ps(_mm512_sub_ps(a1, a2), a3),
                        _mm512_sub_ps(_mm512_sub_ps(b1, b2), b3)};
        size_t ox = 2 * (tx + b), cols = 2 * nt;
        if (cols > g->ow - ox)
          cols = g->ow - ox;
        __mmask16 m0 = (__mmask16)(cols >= 16 ? 0xffffu : (1u << cols) - 1);
        __mmask16 m1 = (__mmask16)(cols >= 32 ? 0xffffu : cols > 16 ? (1u << (cols - 16)) - 1 : 0);
        for (unsigned a = 0; a < 2 && 2 * ty + a < g->oh; a++) {
          float *yr = yf + (2 * ty + a) * g->ow + ox;
          __m512 r0 = _mm512_permutex2var_ps(ev[a], lo, od[a]);
          __m512 r1 = _mm512_permutex2var_ps(ev[a], hi, od[a]);
          if (j->first) {
            r0 = _mm512_add_ps(r0, bias);
            r1 = _mm512_add_ps(r1, bias);
          } else {
            r0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, yr), r0);
            r1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, yr + 16), r1);
          }
          _mm512_mask_storeu_ps(yr, m0, r0);
          _mm512_mask_storeu_ps(yr + 16, m1, r1);
        }
      }
    }
}

/* dyt_part 16 tiles at a time: the two dY rows' even and odd columns by
 * masked loads (columns past the output and a missing second row read as
 * zeros, as dyt_part's copies put them) and permutes, then a_dy_row's
 * products by 0 or +-1 and adds in its order: the same bits. */
static WINO_AVX512 void dyt_block16(const float *r0, const float *r1, long ox, long ow,
                                    unsigned nt, float *const o[16]) {
  const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  __m512 e[2], d[2];
  const float *rows[2] = {r0, r1};
  for (int r = 0; r < 2; r++) {
    __m512 a = v_cols16(rows[r], ox, ow), b = v_cols16(rows[r], ox + 16, ow);
    e[r] = _mm512_permutex2var_ps(a, ev, b);
    d[r] = _mm512_permutex2var_ps(a, od, b);
  }
  static const float sxs[4] = {1.0f, 1.0f, 1.0f, 0.0f}, sgs[4] = {0.0f, 1.0f, -1.0f, -1.0f};
  __mmask16 m = (__mmask16)(nt >= 16 ? 0xffffu : (1u << nt) - 1);
  for (int a = 0; a < 4; a++) {
    if (!o[4 * a] && !o[4 * a + 1] && !o[4 * a + 2] && !o[4 * a + 3])
      continue;
    __m512 sx = _mm512_set1_ps(sxs[a]), sg = _mm512_set1_ps(sgs[a]);
    __m512 h0 = _mm512_add_ps(_mm512_mul_ps(sx, e[0]), _mm512_mul_ps(sg, e[1]));
    __m512 h1 = _mm512_add_ps(_mm512_mul_ps(sx, d[0]), _mm512_mul_ps(sg, d[1]));
    __m512 out[4] = {h0, _mm512_add_ps(h0, h1), _mm512_sub_ps(h0, h1),
                     _mm512_sub_ps(_mm512_setzero_ps(), h1)};
    store4(o + 4 * a, m, out);
  }
}

/* dyt_part (cpu_winograd.c) on AVX-512. */
WINO_AVX512 void nnt_wino_dyt_part_avx512(void *arg, size_t f0, size_t f1) {
  const wino_job *j = arg;
  const nnt_conv_geom *g = j->g;
  size_t plane = (size_t)g->oh * g->ow;
  for (size_t f = f0; f < f1; f++)
    for (size_t sg = 0; sg < j->nseg; sg++) {
      size_t i = j->seg[sg].i, ty = j->seg[sg].ty, tx = j->seg[sg].tx, len = j->seg[sg].len;
      size_t tl = j->seg[sg].tl;
      const float *r0 = j->dy + (i * j->f + f) * plane + 2 * ty * g->ow;
      const float *r1 = 2 * ty + 1 < g->oh ? r0 + g->ow : NULL;
      for (size_t b = 0; b < len; b += 16) {
        unsigned nt = (unsigned)(len - b < 16 ? len - b : 16);
        float *o[16];
        nnt_wino_slices(j, j->m, j->f, f, tl + b, NULL, 0, o);
        dyt_block16(r0, r1, 2 * (long)(tx + b), (long)g->ow, nt, o);
      }
    }
}

/* nnt_cpu_wino_taps 16 channels at a time: tap q of 16 channels in one
 * gather (the channels 9 floats apart, or 9 filters' apart with flip),
 * one store. Data movement only: the same values. */
WINO_AVX512 void nnt_wino_taps_avx512(const float *w, int flip, size_t f, size_t nf, size_t c,
                                      size_t c0, size_t nc, size_t ld, float *g) {
  int step = flip ? (int)(nf * 9) : 9;
  __m512i at = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
      _mm512_set1_epi32(step));
  for (size_t cc = 0; cc < nc; cc += 16) {
    __mmask16 m = (__mmask16)(nc - cc < 16 ? (1u << (nc - cc)) - 1 : 0xffff);
    const float *src = flip ? w + ((c0 + cc) * nf + f) * 9 : w + (f * c + c0 + cc) * 9;
    for (int q = 0; q < 9; q++) {
      __m512 v =
          _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, at, src + (flip ? 8 - q : q), 4);
      _mm512_mask_storeu_ps(g + q * ld + cc, m, v);
    }
  }
}
#else
typedef int nnt_wino_avx512_none; /* not an empty translation unit */
#endif
