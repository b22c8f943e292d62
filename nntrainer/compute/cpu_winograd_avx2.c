/* The AVX2 code of F(2x2, 3x3)'s transforms (cpu_winograd.c takes it where
 * the CPU has AVX2 and no AVX-512, or nnt_cpu_vec_path stops at AVX2): 8
 * tiles at a time, the same adds, subtracts and products by 0 or +-1 in
 * the same order as the plain C loops there, so the same bits
 * (test_conv_wino runs every case on each path). The plain C loops run
 * along a tile row, which in ResNet-18's stages 3 and 4 is 4 and 2 tiles
 * long: there they were mostly loop overhead (docs/performance.md). */
#include "nntrainer/compute/cpu_conv_vec.h"
#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/cpu_winograd.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <stdint.h>

#define WINO_AVX2 __attribute__((target("avx2")))

/* Lanes [lo, hi) of 8 set (for maskload). */
static WINO_AVX2 __m256i lanes(long lo, long hi) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i a = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)hi), idx);
  __m256i b = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)lo), idx);
  return _mm256_andnot_si256(b, a);
}

/* Columns [x0, x0 + 8) of a row (NULL: a row outside the image, zeros),
 * those outside [0, w) zeros: a masked load, which reads nothing outside
 * the row (the address of column x0 is formed as an integer: x0 may lie
 * before the row). */
static WINO_AVX2 __m256 cols8(const float *row, long x0, long w) {
  if (!row || x0 >= w || x0 + 8 <= 0)
    return _mm256_setzero_ps();
  const float *at = (const float *)((uintptr_t)row + (uintptr_t)(x0 * 4));
  if (x0 >= 0 && x0 + 8 <= w)
    return _mm256_loadu_ps(at);
  return _mm256_maskload_ps(at, lanes(-x0, w - x0));
}

/* The even and the odd columns of 16 (a then b), in order. */
static WINO_AVX2 void evens_odds(__m256 a, __m256 b, __m256 *e, __m256 *d) {
  *e = _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xd8));
  *d = _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xdd)), 0xd8));
}

/* A row's 4 slices (NULL: not in the pass), the first nt tiles. */
static WINO_AVX2 void store4(float *const o[4], unsigned nt, const __m256 v[4]) {
  for (int k = 0; k < 4; k++)
    if (o[k])
      nnt_cv_storen256(o[k], v[k], nt);
}

/* v_row's arithmetic for up to 8 tiles at once, every tile alike (the
 * padding's zeros come from cols8): row r's columns 2q .. 2q + 3 of tile
 * q from columns [x0, x0 + 18); rows[r] NULL outside the image; o[k] NULL
 * for a slice outside the pass; nt tiles stored. The same adds and
 * subtracts in the same order as v_row and the edge tiles' loop (x + sg y
 * with sg +-1 is x + y or x - y, bit for bit): the same V. */
static WINO_AVX2 void v_block8(const float *const rows[4], long x0, long w, unsigned nt,
                               float *const o[16]) {
  __m256 e[4], d[4], e1[4], d1[4]; /* columns 2q, 2q + 1, 2q + 2, 2q + 3 of row r */
  for (int r = 0; r < 4; r++) {
    /* tiles 4..7 only where there are more than 4 */
    __m256 b = nt > 4 ? cols8(rows[r], x0 + 8, w) : _mm256_setzero_ps();
    __m256 b1 = nt > 4 ? cols8(rows[r], x0 + 10, w) : _mm256_setzero_ps();
    evens_odds(cols8(rows[r], x0, w), b, &e[r], &d[r]);
    evens_odds(cols8(rows[r], x0 + 2, w), b1, &e1[r], &d1[r]);
  }
  static const int xs[4] = {0, 1, 2, 1}, ys[4] = {2, 2, 1, 3}, plus[4] = {0, 1, 0, 0};
  for (int a = 0; a < 4; a++) {
    if (!o[4 * a] && !o[4 * a + 1] && !o[4 * a + 2] && !o[4 * a + 3])
      continue;
    int x = xs[a], y = ys[a];
    __m256 te = plus[a] ? _mm256_add_ps(e[x], e[y]) : _mm256_sub_ps(e[x], e[y]);
    __m256 td = plus[a] ? _mm256_add_ps(d[x], d[y]) : _mm256_sub_ps(d[x], d[y]);
    __m256 te1 = plus[a] ? _mm256_add_ps(e1[x], e1[y]) : _mm256_sub_ps(e1[x], e1[y]);
    __m256 td1 = plus[a] ? _mm256_add_ps(d1[x], d1[y]) : _mm256_sub_ps(d1[x], d1[y]);
    __m256 out[4] = {_mm256_sub_ps(te, te1), _mm256_add_ps(td, te1), _mm256_sub_ps(te1, td),
                     _mm256_sub_ps(td, td1)};
    store4(o + 4 * a, nt, out);
  }
}

/* V of channels [c0, c1) for the chunk's tiles, 8 tiles at a time. */
WINO_AVX2 void nnt_wino_v_part_avx2(void *arg, size_t c0, size_t c1) {
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
      for (size_t b = 0; b < len; b += 8) {
        unsigned nt = (unsigned)(len - b < 8 ? len - b : 8);
        float *o[16];
        nnt_wino_slices(j, j->v, j->c, c, tl + b, NULL, 0, o);
        v_block8(rows, 2 * (long)(tx + b) - (long)g->pl, (long)g->w, nt, o);
      }
    }
}

/* y_part (cpu_winograd.c) on AVX2: at_m_a's adds and subtracts for 8
 * tiles at a time, each output row's even and odd values interleaved and
 * stored (the first pass: plus the bias) or added to y where they lie in
 * the output, masked at its right edge. The same bits. */
WINO_AVX2 void nnt_wino_y_part_avx2(void *arg, size_t f0, size_t f1) {
  const wino_job *j = arg;
  const nnt_conv_geom *g = j->g;
  size_t plane = (size_t)g->oh * g->ow;
  for (size_t f = f0; f < f1; f++)
    for (size_t sg = 0; sg < j->nseg; sg++) {
      size_t i = j->seg[sg].i, ty = j->seg[sg].ty, tx = j->seg[sg].tx, len = j->seg[sg].len;
      size_t tl = j->seg[sg].tl;
      float *yf = j->y + (i * j->f + f) * plane;
      __m256 bias = _mm256_set1_ps(j->first && j->bias ? j->bias[f] : 0.0f);
      for (size_t b = 0; b < len; b += 8) {
        size_t nt = len - b < 8 ? len - b : 8;
        float *mk[16];
        nnt_wino_slices(j, j->m, nnt_wino_m_rows(j), nnt_wino_m_row(j, f), tl + b, NULL, 0,
                        mk);
        __m256i k = lanes(0, (long)nt);
        __m256 v[16];
        for (int q = 0; q < 16; q++)
          v[q] = !mk[q]    ? _mm256_setzero_ps()
                 : nt >= 8 ? _mm256_loadu_ps(mk[q])
                           : _mm256_maskload_ps(mk[q], k);
        __m256 a0 = _mm256_add_ps(_mm256_add_ps(v[0], v[4]), v[8]);
        __m256 a1 = _mm256_add_ps(_mm256_add_ps(v[1], v[5]), v[9]);
        __m256 a2 = _mm256_add_ps(_mm256_add_ps(v[2], v[6]), v[10]);
        __m256 a3 = _mm256_add_ps(_mm256_add_ps(v[3], v[7]), v[11]);
        __m256 b0 = _mm256_sub_ps(_mm256_sub_ps(v[4], v[8]), v[12]);
        __m256 b1 = _mm256_sub_ps(_mm256_sub_ps(v[5], v[9]), v[13]);
        __m256 b2 = _mm256_sub_ps(_mm256_sub_ps(v[6], v[10]), v[14]);
        __m256 b3 = _mm256_sub_ps(_mm256_sub_ps(v[7], v[11]), v[15]);
        __m256 ev[2] = {_mm256_add_ps(_mm256_add_ps(a0, a1), a2),
                        _mm256_add_ps(_mm256_add_ps(b0, b1), b2)};
        __m256 od[2] = {_mm256_sub_ps(_mm256_sub_ps(a1, a2), a3),
                        _mm256_sub_ps(_mm256_sub_ps(b1, b2), b3)};
        size_t ox = 2 * (tx + b), cols = 2 * nt;
        if (cols > g->ow - ox)
          cols = g->ow - ox;
        __m256i m0 = lanes(0, (long)(cols < 8 ? cols : 8));
        __m256i m1 = lanes(0, (long)(cols > 8 ? cols - 8 : 0));
        for (unsigned a = 0; a < 2 && 2 * ty + a < g->oh; a++) {
          float *yr = yf + (2 * ty + a) * g->ow + ox;
          __m256 lo = _mm256_unpacklo_ps(ev[a], od[a]), hi = _mm256_unpackhi_ps(ev[a], od[a]);
          __m256 r0 = _mm256_permute2f128_ps(lo, hi, 0x20);
          __m256 r1 = _mm256_permute2f128_ps(lo, hi, 0x31);
          if (j->first) {
            r0 = _mm256_add_ps(r0, bias);
            r1 = _mm256_add_ps(r1, bias);
          } else if (cols >= 16) {
            r0 = _mm256_add_ps(_mm256_loadu_ps(yr), r0);
            r1 = _mm256_add_ps(_mm256_loadu_ps(yr + 8), r1);
          } else {
            r0 = _mm256_add_ps(_mm256_maskload_ps(yr, m0), r0);
            if (cols > 8)
              r1 = _mm256_add_ps(_mm256_maskload_ps(yr + 8, m1), r1);
          }
          nnt_cv_storen256(yr, r0, (unsigned)(cols < 8 ? cols : 8));
          if (cols > 8)
            nnt_cv_storen256(yr + 8, r1, (unsigned)(cols - 8));
        }
      }
    }
}

/* dyt_part 8 tiles at a time: the two dY rows' even and odd columns by
 * masked loads (columns past the output and a missing second row read as
 * zeros, as dyt_part's copies put them), then a_dy_row's products by 0
 * or +-1 and adds in its order, and its negation: the same bits. */
static WINO_AVX2 void dyt_block8(const float *r0, const float *r1, long ox, long ow,
                                 unsigned nt, float *const o[16]) {
  __m256 e[2], d[2];
  const float *rows[2] = {r0, r1};
  for (int r = 0; r < 2; r++) {
    __m256 b = nt > 4 ? cols8(rows[r], ox + 8, ow) : _mm256_setzero_ps();
    evens_odds(cols8(rows[r], ox, ow), b, &e[r], &d[r]);
  }
  static const float sxs[4] = {1.0f, 1.0f, 1.0f, 0.0f}, sgs[4] = {0.0f, 1.0f, -1.0f, -1.0f};
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int a = 0; a < 4; a++) {
    if (!o[4 * a] && !o[4 * a + 1] && !o[4 * a + 2] && !o[4 * a + 3])
      continue;
    __m256 sx = _mm256_set1_ps(sxs[a]), sg = _mm256_set1_ps(sgs[a]);
    __m256 h0 = _mm256_add_ps(_mm256_mul_ps(sx, e[0]), _mm256_mul_ps(sg, e[1]));
    __m256 h1 = _mm256_add_ps(_mm256_mul_ps(sx, d[0]), _mm256_mul_ps(sg, d[1]));
    __m256 out[4] = {h0, _mm256_add_ps(h0, h1), _mm256_sub_ps(h0, h1),
                     _mm256_xor_ps(h1, sign)};
    store4(o + 4 * a, nt, out);
  }
}

/* dyt_part (cpu_winograd.c) on AVX2. */
WINO_AVX2 void nnt_wino_dyt_part_avx2(void *arg, size_t f0, size_t f1) {
  const wino_job *j = arg;
  const nnt_conv_geom *g = j->g;
  size_t plane = (size_t)g->oh * g->ow;
  for (size_t f = f0; f < f1; f++)
    for (size_t sg = 0; sg < j->nseg; sg++) {
      size_t i = j->seg[sg].i, ty = j->seg[sg].ty, tx = j->seg[sg].tx, len = j->seg[sg].len;
      size_t tl = j->seg[sg].tl;
      const float *r0 = j->dy + (i * j->f + f) * plane + 2 * ty * g->ow;
      const float *r1 = 2 * ty + 1 < g->oh ? r0 + g->ow : NULL;
      for (size_t b = 0; b < len; b += 8) {
        unsigned nt = (unsigned)(len - b < 8 ? len - b : 8);
        float *o[16];
        nnt_wino_slices(j, j->m, j->f, f, tl + b, NULL, 0, o);
        dyt_block8(r0, r1, 2 * (long)(tx + b), (long)g->ow, nt, o);
      }
    }
}
#else
typedef int nnt_wino_avx2_none; /* not an empty translation unit */
#endif
