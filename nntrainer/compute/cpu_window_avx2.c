/* The AVX2 code of the 1x1 stride-2 window's im2col and col2im_set
 * (ResNet-18's shortcuts), which cpu_window.c takes where the CPU has AVX2
 * and no AVX-512 (or nnt_cpu_vec_path stops at AVX2): as
 * cpu_window_avx512.c's im2col_even1 and set_even1, 8 outputs at a time,
 * partial stores as plain 4-, 2- and 1-lane stores (a masked store is
 * microcoded on AMD's Zen 2). Every value is copied as is, and each of
 * dX's is its column value + 0.0f, as the plain loops add it onto a zero:
 * the same bits (test_windows runs every geometry on each path). */
#include "nntrainer/compute/cpu_conv_vec.h"
#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define WIN_AVX2 __attribute__((target("avx2")))

/* Lanes [0, n) of 8 set (for maskload). */
static WIN_AVX2 __m256i first_lanes(size_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 8 ? n : 8)), idx);
}

/* n (<= 8) values from p, zeros past them; plain loads where 8 are there. */
static WIN_AVX2 __m256 load_first(const float *p, size_t n) {
  return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, first_lanes(n));
}

/* A 1x1 window with stride 2 across, no padding and an output row of at
 * least 4: row c of the columns is channel c's even values of every sh-th
 * input row. */
static int even1_ok(const nnt_conv_geom *g) {
  return g->kh == 1 && g->kw == 1 && g->sw == 2 && g->pt == 0 && g->pl == 0 && g->ow >= 4 &&
         2 * (size_t)g->ow <= g->w + 1 && (size_t)(g->oh - 1) * g->sh < g->h;
}

WIN_AVX2 int nnt_win_im2col_avx2(const nnt_conv_geom *g, size_t n, size_t r0, size_t r1,
                                 const float *x, size_t in, float *col) {
  if (!even1_ok(g))
    return 0;
  size_t hw = (size_t)g->h * g->w, plane = (size_t)g->oh * g->ow, ld = n * plane;
  for (size_t i = 0; i < n; i++)
    for (size_t c = r0; c < r1; c++) {
      const float *xc = x + i * in + c * hw;
      float *row = col + i * plane + c * ld;
      for (size_t oy = 0; oy < g->oh; oy++) {
        const float *xr = xc + oy * g->sh * g->w;
        float *r = row + oy * g->ow;
        for (size_t ox = 0; ox < g->ow; ox += 8) {
          size_t k = g->ow - ox < 8 ? g->ow - ox : 8, v = 2 * k - 1; /* inputs read */
          __m256 a = load_first(xr + 2 * ox, v);
          __m256 b = v > 8 ? load_first(xr + 2 * ox + 8, v - 8) : _mm256_setzero_ps();
          /* the even values: (a0 a2 b0 b2 | a4 a6 b4 b6), then a's before b's */
          __m256 e = _mm256_shuffle_ps(a, b, 0x88);
          e = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xd8));
          nnt_cv_storen256(r + ox, e, (unsigned)k);
        }
      }
    }
  return 1;
}

/* col2im_set of a 1x1 window with stride 2 across and no padding: each
 * input row written once, an output row's values (each + 0.0f) in its
 * even lanes and zeros between, a row no window reaches all zeros. */
WIN_AVX2 int nnt_win_col2im_set_avx2(const nnt_conv_geom *g, size_t n, size_t c0, size_t c1,
                                     const float *col, float *dx, size_t in) {
  if (g->kh != 1 || g->kw != 1 || g->sw != 2 || g->pt || g->pl || !g->oh || !g->ow ||
      2 * (size_t)g->ow < g->w || 2 * (size_t)(g->ow - 1) >= g->w ||
      (size_t)(g->oh - 1) * g->sh >= g->h)
    return 0;
  const __m256 zero = _mm256_setzero_ps();
  size_t w = g->w, hw = (size_t)g->h * w, plane = (size_t)g->oh * g->ow, ld = n * plane;
  for (size_t i = 0; i < n; i++)
    for (size_t c = c0; c < c1; c++) {
      const float *src = col + c * ld + i * plane;
      float *d = dx + i * in + c * hw;
      for (size_t iy = 0; iy < g->h; iy++, d += w) {
        if (iy % g->sh || iy / g->sh >= g->oh) { /* no window's row */
          for (size_t x = 0; x < w; x += 8)
            nnt_cv_storen256(d + x, zero, (unsigned)(w - x < 8 ? w - x : 8));
          continue;
        }
        const float *r = src + iy / g->sh * g->ow;
        for (size_t ox = 0; ox < g->ow; ox += 8) {
          size_t k = g->ow - ox < 8 ? g->ow - ox : 8, left = w - 2 * ox;
          __m256 v = _mm256_add_ps(load_first(r + ox, k), zero);
          __m256 lo = _mm256_unpacklo_ps(v, zero), hi = _mm256_unpackhi_ps(v, zero);
          nnt_cv_storen256(d + 2 * ox, _mm256_permute2f128_ps(lo, hi, 0x20),
                           (unsigned)(left < 8 ? left : 8));
          if (left > 8)
            nnt_cv_storen256(d + 2 * ox + 8, _mm256_permute2f128_ps(lo, hi, 0x31),
                             (unsigned)(left - 8 < 8 ? left - 8 : 8));
        }
      }
    }
  return 1;
}
#else
typedef int nnt_win_avx2_none; /* not an empty translation unit */
#endif
