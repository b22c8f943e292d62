/* The AVX-512 code of im2col and col2im (cpu_window.c takes it where the
 * CPU has AVX-512 and nnt_cpu_vec_path allows it), for the two shapes
 * whose plain C loops cost more than the products around them in
 * ResNet-18 (docs/performance.md):
 * - an output plane of at most 16 positions (stage 4's 4x4, and the 8x8
 *   to 4x4 downsampling into it): a row of the columns is one vector, a
 *   tap's positions a fixed pattern of the channel's plane (a permute of
 *   it where the plane fits in a vector, else a gather), instead of a
 *   loop of a few values per output row with its bounds;
 * - col2im with stride 2 across (the other downsampling convolutions):
 *   a row's values are moved to the even lanes of two vectors by permutes
 *   and added there, instead of a scalar loop;
 * - im2col of a 1x1 window with stride 2 across (ResNet-18's shortcuts,
 *   8 or more outputs a row): the even values moved out of two vectors
 *   by one permute. Six alternating runs each, one thread, batch 32:
 *   res2a_sc's forward 1.88 -> 1.72 ms and gradient 2.16 -> 1.91 ms,
 *   res3a_sc's 1.68 -> 1.58 and 1.74 -> 1.66 (medians).
 * Every value is copied as is, and col2im adds into each input value in
 * the same order as the plain C loops (tap by tap, one add per tap): the
 * same bits (test_windows runs every geometry both ways). */
#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <stdint.h>

#define WIN_AVX512 __attribute__((target("avx512f")))

/* The most taps the small-plane path keeps patterns for (on the stack). */
#define WIN_MAX_TAPS 49

/* Tap t's pattern over an output plane of at most 16 positions: lane p
 * (position oy * ow + ox) reads input value idx[p] of the channel's plane,
 * valid in the lanes of m (inside the plane and the image). */
typedef struct win_small {
  unsigned taps;
  __mmask16 out, in; /* the output plane's lanes; the input plane's (<= 16) */
  int32_t idx[WIN_MAX_TAPS][16];
  __mmask16 m[WIN_MAX_TAPS];
} win_small;

static int small_ok(const nnt_conv_geom *g) {
  return (size_t)g->oh * g->ow <= 16 && g->oh && g->ow && (size_t)g->kh * g->kw <= WIN_MAX_TAPS;
}

static void small_make(const nnt_conv_geom *g, win_small *s) {
  unsigned plane = g->oh * g->ow;
  size_t hw = (size_t)g->h * g->w;
  s->taps = g->kh * g->kw;
  s->out = (__mmask16)((1u << plane) - 1);
  s->in = hw <= 16 ? (__mmask16)((1u << hw) - 1) : 0;
  for (unsigned t = 0; t < s->taps; t++) {
    unsigned a = t / g->kw, b = t % g->kw, m = 0;
    for (unsigned p = 0; p < 16; p++) {
      s->idx[t][p] = 0;
      if (p >= plane)
        continue;
      long iy = (long)(p / g->ow) * g->sh - (long)g->pt + (long)a * g->dh;
      long ix = (long)(p % g->ow) * g->sw - (long)g->pl + (long)b * g->dw;
      if (iy < 0 || ix < 0 || iy >= (long)g->h || ix >= (long)g->w)
        continue;
      s->idx[t][p] = (int32_t)(iy * (long)g->w + ix);
      m |= 1u << p;
    }
    s->m[t] = (__mmask16)m;
  }
}

/* Rows [r0, r1) of n images' columns (image i's x at x + i * in, its
 * columns at col + i * plane, rows n * plane apart), small_ok. */
static WIN_AVX512 void im2col_small(const nnt_conv_geom *g, size_t n, size_t r0, size_t r1,
                                    const float *x, size_t in, float *col) {
  win_small s;
  small_make(g, &s);
  size_t hw = (size_t)g->h * g->w, plane = (size_t)g->oh * g->ow, ld = n * plane;
  for (size_t i = 0; i < n; i++)
    for (size_t rr = r0; rr < r1; rr++) {
      size_t c = rr / s.taps, t = rr % s.taps;
      const float *xc = x + i * in + c * hw;
      __m512i idx = _mm512_loadu_si512((const void *)s.idx[t]);
      __m512 v = s.in ? _mm512_maskz_permutexvar_ps(s.m[t], idx, _mm512_maskz_loadu_ps(s.in, xc))
                      : _mm512_mask_i32gather_ps(_mm512_setzero_ps(), s.m[t], idx, xc, 4);
      _mm512_mask_storeu_ps(col + i * plane + rr * ld, s.out, v);
    }
}

/* Channels [c0, c1) of n images' dx from their columns (laid out as
 * im2col_small's, image i's dx at dx + i * in), small_ok: each
 * tap adds its row in turn. A plane of at most 16 values stays in a
 * vector (tap t's row moved to the input lanes it adds to: the inverse of
 * its pattern, which no two positions share); a larger one is gathered,
 * added to and scattered back per tap. */
static WIN_AVX512 void col2im_small(const nnt_conv_geom *g, size_t n, size_t c0, size_t c1,
                                    const float *col, float *dx, size_t in) {
  win_small s;
  small_make(g, &s);
  size_t hw = (size_t)g->h * g->w, plane = (size_t)g->oh * g->ow, ld = n * plane;
  int32_t inv[WIN_MAX_TAPS][16];
  __mmask16 im[WIN_MAX_TAPS];
  if (s.in)
    for (unsigned t = 0; t < s.taps; t++) {
      unsigned m = 0;
      for (unsigned q = 0; q < 16; q++)
        inv[t][q] = 0;
      for (unsigned p = 0; p < 16; p++)
        if (s.m[t] >> p & 1) {
          inv[t][s.idx[t][p]] = (int32_t)p;
          m |= 1u << s.idx[t][p];
        }
      im[t] = (__mmask16)m;
    }
  for (size_t i = 0; i < n; i++)
    for (size_t c = c0; c < c1; c++) {
      float *dc = dx + i * in + c * hw;
      const float *rows = col + i * plane + c * s.taps * ld;
      if (s.in) {
        __m512 d = _mm512_maskz_loadu_ps(s.in, dc);
        for (unsigned t = 0; t < s.taps; t++) {
          __m512 r = _mm512_maskz_loadu_ps(s.out, rows + t * ld);
          __m512i iv = _mm512_loadu_si512((const void *)inv[t]);
          d = _mm512_mask_add_ps(d, im[t], d, _mm512_permutexvar_ps(iv, r));
        }
        _mm512_mask_storeu_ps(dc, s.in, d);
        continue;
      }
      for (unsigned t = 0; t < s.taps; t++) {
        __m512i idx = _mm512_loadu_si512((const void *)s.idx[t]);
        __m512 r = _mm512_maskz_loadu_ps(s.out, rows + t * ld);
        __m512 d = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), s.m[t], idx, dc, 4);
        _mm512_mask_i32scatter_ps(dc, s.m[t], idx, _mm512_add_ps(d, r), 4);
      }
    }
}

/* The lanes of the two vectors over src[0, 32) that hold src[0 .. 2n - 2]
 * (n <= 16 outputs: their even values and the odd ones between). */
static inline void even_masks(size_t n, __mmask16 *lo, __mmask16 *hi) {
  size_t v = 2 * n - 1;
  *lo = (__mmask16)(v >= 16 ? 0xffffu : (1u << v) - 1);
  *hi = (__mmask16)(v > 16 ? (1u << (v - 16)) - 1 : 0);
}

/* A 1x1 window with stride 2 across, no padding, dilation 1 and an
 * output row of at least 8: row c of the columns is channel c's even
 * values of every sh-th input row, moved out of two vectors by a permute
 * (16 at a time; a shorter tail takes the lanes it has). */
static int even1_ok(const nnt_conv_geom *g) {
  return g->kh == 1 && g->kw == 1 && g->sw == 2 && g->pt == 0 && g->pl == 0 && g->ow >= 8 &&
         2 * (size_t)g->ow <= g->w + 1 && (size_t)(g->oh - 1) * g->sh < g->h;
}

static WIN_AVX512 void im2col_even1(const nnt_conv_geom *g, size_t n, size_t r0, size_t r1,
                                    const float *x, size_t in, float *col) {
  const __m512i idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  size_t hw = (size_t)g->h * g->w, plane = (size_t)g->oh * g->ow, ld = n * plane;
  for (size_t i = 0; i < n; i++)
    for (size_t c = r0; c < r1; c++) {
      const float *xc = x + i * in + c * hw;
      float *row = col + i * plane + c * ld;
      for (size_t oy = 0; oy < g->oh; oy++) {
        const float *xr = xc + oy * g->sh * g->w;
        float *r = row + oy * g->ow;
        for (size_t ox = 0; ox < g->ow; ox += 16) {
          size_t k = g->ow - ox < 16 ? g->ow - ox : 16;
          __mmask16 lo, hi; /* the inputs read */
          even_masks(k, &lo, &hi);
          __m512 a = _mm512_maskz_loadu_ps(lo, xr + 2 * ox);
          __m512 b = _mm512_maskz_loadu_ps(hi, xr + 2 * ox + 16);
          _mm512_mask_storeu_ps(r + ox, (__mmask16)((1u << k) - 1),
                                _mm512_permutex2var_ps(a, idx, b));
        }
      }
    }
}

int nnt_win_im2col_avx512(const nnt_conv_geom *g, size_t n, size_t r0, size_t r1,
                          const float *x, size_t in, float *col) {
  if (even1_ok(g)) {
    im2col_even1(g, n, r0, r1, x, in, col);
    return 1;
  }
  if (!small_ok(g))
    return 0;
  im2col_small(g, n, r0, r1, x, in, col);
  return 1;
}

int nnt_win_col2im_avx512(const nnt_conv_geom *g, size_t n, size_t c0, size_t c1,
                          const float *col, float *dx, size_t in) {
  if (!small_ok(g))
    return 0;
  col2im_small(g, n, c0, c1, col, dx, in);
  return 1;
}

/* set_even1: rows of w values from a row of ow (2 ow - 1 <= w <= 2 ow). */
WIN_AVX512 static void set_even1(const nnt_conv_geom *g, size_t n, size_t c0, size_t c1,
                                 const float *col, float *dx, size_t in) {
  const __m512i dlo = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  const __m512i dhi = _mm512_set_epi32(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
  const __m512 zero = _mm512_setzero_ps();
  size_t w = g->w, hw = (size_t)g->h * w, plane = (size_t)g->oh * g->ow, ld = n * plane;
  for (size_t i = 0; i < n; i++)
    for (size_t c = c0; c < c1; c++) {
      const float *src = col + c * ld + i * plane;
      float *d = dx + i * in + c * hw;
      for (size_t iy = 0; iy < g->h; iy++, d += w) {
        if (iy % g->sh || iy / g->sh >= g->oh) { /* no window's row */
          for (size_t x = 0; x < w; x += 16)
            _mm512_mask_storeu_ps(d + x, (__mmask16)(w - x >= 16 ? 0xffffu : (1u << (w - x)) - 1),
                                  zero);
          continue;
        }
        const float *r = src + iy / g->sh * g->ow;
        for (size_t ox = 0; ox < g->ow; ox += 16) {
          size_t k = g->ow - ox < 16 ? g->ow - ox : 16, left = w - 2 * ox;
          __m512 v =
              _mm512_add_ps(_mm512_maskz_loadu_ps((__mmask16)((1u << k) - 1), r + ox), zero);
          __mmask16 lo = (__mmask16)(left >= 16 ? 0xffffu : (1u << left) - 1);
          __mmask16 hi =
              (__mmask16)(left >= 32 ? 0xffffu : left > 16 ? (1u << (left - 16)) - 1 : 0);
          _mm512_mask_storeu_ps(d + 2 * ox, lo, _mm512_maskz_permutexvar_ps(0x5555, dlo, v));
          if (hi)
            _mm512_mask_storeu_ps(d + 2 * ox + 16, hi, _mm512_maskz_permutexvar_ps(0x5555, dhi, v));
        }
      }
    }
}

WIN_AVX512 void nnt_win_even_add_avx512(float *dst, const float *src, size_t n) {
  const __m512i dlo = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  const __m512i dhi = _mm512_set_epi32(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
  for (size_t i = 0; i < n; i += 16) {
    size_t k = n - i < 16 ? n - i : 16;
    __mmask16 lo, hi;
    even_masks(k, &lo, &hi);
    float *d = dst + 2 * i;
    __m512 r = _mm512_maskz_loadu_ps((__mmask16)((1u << k) - 1), src + i);
    __m512 a = _mm512_maskz_loadu_ps(lo, d), b = _mm512_maskz_loadu_ps(hi, d + 16);
    a = _mm512_mask_add_ps(a, lo & 0x5555, a, _mm512_permutexvar_ps(dlo, r));
    b = _mm512_mask_add_ps(b, hi & 0x5555, b, _mm512_permutexvar_ps(dhi, r));
    _mm512_mask_storeu_ps(d, lo, a);
    _mm512_mask_storeu_ps(d + 16, hi, b);
  }
}
/* col2im_set of a 1x1 window with stride 2 across and no padding (the
 * shortcuts' derivative): each input row is written once, an output row's
 * values (each + 0.0f, as the plain loops add it onto a zero) in its even
 * lanes and zeros between, a row no window reaches all zeros. */
int nnt_win_col2im_set_avx512(const nnt_conv_geom *g, size_t n, size_t c0, size_t c1,
                              const float *col, float *dx, size_t in) {
  if (g->kh != 1 || g->kw != 1 || g->sw != 2 || g->pt || g->pl || !g->oh || !g->ow ||
      2 * (size_t)g->ow < g->w || 2 * (size_t)(g->ow - 1) >= g->w ||
      (size_t)(g->oh - 1) * g->sh >= g->h)
    return 0;
  set_even1(g, n, c0, c1, col, dx, in);
  return 1;
}

#else
/* No AVX-512 code in this build (nnt_cpu_vec_avx512 is 0): never called. */
int nnt_win_im2col_avx512(const nnt_conv_geom *g, size_t n, size_t r0, size_t r1,
                          const float *x, size_t in, float *col) {
  (void)g, (void)n, (void)r0, (void)r1, (void)x, (void)in, (void)col;
  return 0;
}
int nnt_win_col2im_avx512(const nnt_conv_geom *g, size_t n, size_t c0, size_t c1,
                          const float *col, float *dx, size_t in) {
  (void)g, (void)n, (void)c0, (void)c1, (void)col, (void)dx, (void)in;
  return 0;
}
void nnt_win_even_add_avx512(float *dst, const float *src, size_t n) {
  for (size_t i = 0; i < n; i++)
    dst[2 * i] += src[i];
}
int nnt_win_col2im_set_avx512(const struct nnt_conv_geom *g, size_t n, size_t c0, size_t c1,
                              const float *col, float *dx, size_t in) {
  (void)g, (void)n, (void)c0, (void)c1, (void)col, (void)dx, (void)in;
  return 0;
}
#endif
