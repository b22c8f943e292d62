/* CPU kernels over sliding windows: im2col, col2im, pooling. */
#include <float.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/kernels.h"

/* The output columns [lo, hi) whose input column ox*sw + off lies inside
 * [0, w) (off: a tap's offset less the left padding). */
void nnt_cpu_valid_cols(const nnt_conv_geom *g, long off, unsigned *lo, unsigned *hi) {
  long a = 0, b = g->ow;
  /* ox * sw + off >= 0 */
  if (off < 0)
    a = (-off + g->sw - 1) / g->sw;
  /* ox * sw + off <= w - 1 */
  long last = (long)g->w - 1 - off;
  b = last < 0 ? 0 : last / g->sw + 1;
  if (b > (long)g->ow)
    b = g->ow;
  if (a > b)
    a = b;
  *lo = (unsigned)a;
  *hi = (unsigned)b;
}

/* Whether im2col's rows are the input plane shifted: stride 1 and an
 * output as wide as the input, so output position p = oy * ow + ox reads
 * input p + (a*dh - pt) * w + b*dw - pl wherever that lies inside the
 * plane, and a row's valid values are one run apart from the few padding
 * columns at each end of each output row (which the run covers with
 * values of the neighbouring input rows, then zeroed). */
static int im2col_flat(const nnt_conv_geom *g) {
  return g->sw == 1 && g->sh == 1 && g->ow == g->w;
}

/* col2im of a stride-2 row takes the AVX-512 code
 * (nnt_win_even_add_avx512) from this many columns: 16 (ResNet-18's
 * res2a_c1, 32x32 to 16x16) gain (its derivative 152-155 -> 168-175
 * GFLOP/s, one thread); 8 (res3a_c1) lose, the scalar loop's rows being
 * short (2.15 -> 1.52 and 1.17 -> 1.40 ms for a batch of 32 in cache).
 * im2col's stride-2 rows of a 3x3 window stay scalar: the same permutes
 * made res2a_c1's forward and gradient slower (163 -> 152, 158 -> 145
 * GFLOP/s) though faster alone (1.83 -> 1.35 ms). A 1x1 window's take
 * them (nnt_win_im2col_avx512): the shortcuts' im2col is all of their
 * copying. */
#define WIN_EVEN_MIN 12

/* One row (c, a, b) of im2col_flat: off is b*dw - pl, [lo, hi) its valid
 * output columns (nnt_cpu_valid_cols). */
static void im2col_flat_row(const nnt_conv_geom *g, const float *xc, unsigned a, long off,
                            unsigned lo, unsigned hi, float *row) {
  size_t ow = g->ow;
  long d = (long)a * g->dh - g->pt; /* input row of output row 0 */
  long y0 = d < 0 ? -d : 0, y1 = (long)g->h - d;
  if (y0 > (long)g->oh) /* padding above deeper than the output */
    y0 = g->oh;
  if (y1 > (long)g->oh)
    y1 = g->oh;
  if (y1 < y0)
    y1 = y0;
  size_t oy0 = (size_t)y0, oy1 = (size_t)y1;
  memset(row, 0, oy0 * ow * sizeof(float));
  memset(row + oy1 * ow, 0, (g->oh - oy1) * ow * sizeof(float));
  if (oy1 == oy0)
    return;
  if (hi <= lo) {
    memset(row + oy0 * ow, 0, (oy1 - oy0) * ow * sizeof(float));
    return;
  }
  /* output positions [s, e) read input s + d*w + off on: every one inside
   * the plane (the first and last are valid positions) */
  size_t s = oy0 * ow + lo, e = (oy1 - 1) * ow + hi;
  memcpy(row + s, xc + (size_t)((long)s + d * (long)g->w + off), (e - s) * sizeof(float));
  for (size_t oy = oy0; oy < oy1; oy++) {
    float *r = row + oy * ow;
    for (unsigned ox = 0; ox < lo; ox++)
      r[ox] = 0.0f;
    for (size_t ox = hi; ox < ow; ox++)
      r[ox] = 0.0f;
  }
}

/* im2col of rows [r0, r1) (row (c, a, b): channel c's tap (a, b)) of
 * the n images at x (in floats apart) into col, image i's part of a row at
 * i * plane. A row's tap and valid columns are found once for all the
 * images (their divisions cost more than a small plane's copies: ResNet-18's
 * res4a_c1, 4x4 outputs, took 1.15 ms a group of 11 images when they were
 * found per image). */
static void im2col_rows(const nnt_conv_geom *g, size_t n, size_t r0, size_t r1, const float *x,
                        size_t in, float *col) {
  int flat = im2col_flat(g);
  size_t taps = (size_t)g->kh * g->kw, hw = (size_t)g->h * g->w, ow = g->ow;
  size_t plane = (size_t)g->oh * ow, ld = n * plane;
  unsigned c = (unsigned)(r0 / taps), a = (unsigned)(r0 % taps / g->kw),
           b = (unsigned)(r0 % g->kw);
  for (size_t rr = r0; rr < r1; rr++) {
    long off = (long)b * g->dw - g->pl;
    unsigned lo, hi;
    nnt_cpu_valid_cols(g, off, &lo, &hi);
    for (size_t i = 0; i < n; i++) {
      const float *xc = x + i * in + c * hw;
      float *row = col + rr * ld + i * plane;
      if (flat) {
        im2col_flat_row(g, xc, a, off, lo, hi, row);
        continue;
      }
      for (unsigned oy = 0; oy < g->oh; oy++) {
        long iy = (long)oy * g->sh - g->pt + (long)a * g->dh;
        float *r = row + (size_t)oy * ow;
        if (iy < 0 || iy >= (long)g->h) {
          memset(r, 0, ow * sizeof(float));
          continue;
        }
        const float *xr = xc + (size_t)iy * g->w + off;
        for (unsigned ox = 0; ox < lo; ox++)
          r[ox] = 0.0f;
        if (g->sw == 1)
          memcpy(r + lo, xr + lo, (hi - lo) * sizeof(float));
        else if (g->sw == 2)
          for (unsigned ox = lo; ox < hi; ox++)
            r[ox] = xr[2 * (size_t)ox];
        else
          for (unsigned ox = lo; ox < hi; ox++)
            r[ox] = xr[(size_t)ox * g->sw];
        for (unsigned ox = hi; ox < ow; ox++)
          r[ox] = 0.0f;
      }
    }
    if (++b == g->kw) {
      b = 0;
      if (++a == g->kh)
        a = 0, c++;
    }
  }
}

/* im2col and col2im on the compute threads (cpu_pool.c): im2col split
 * over the rows of col (a channel's taps: 27 rows of a 3-channel 3x3
 * convolution split evenly where its 3 channels would not), col2im over
 * the input channels, whose planes of dx are each one part's alone
 * (col2im adds into a channel only from that channel's rows, in the same
 * order: results unchanged). Parts of at least WIN_MIN_PART values of
 * col. */
#define WIN_MIN_PART 16384

typedef struct win_job {
  const nnt_conv_geom *g;
  size_t n;
  const float *in;
  float *out;
} win_job;

static size_t win_min_channels(const nnt_conv_geom *g, size_t n) {
  size_t per = (size_t)g->kh * g->kw * g->oh * g->ow * n;
  return per >= WIN_MIN_PART ? 1 : (per ? WIN_MIN_PART / per : WIN_MIN_PART);
}

static void im2col_part(void *p, size_t r0, size_t r1) {
  const win_job *j = p;
  const nnt_conv_geom *g = j->g;
  size_t in = nnt_conv_img_stride(g);
  if (nnt_cpu_vec_avx512() ? nnt_win_im2col_avx512(g, j->n, r0, r1, j->in, in, j->out)
                            : nnt_cpu_vec_avx2() &&
                                  nnt_win_im2col_avx2(g, j->n, r0, r1, j->in, in, j->out))
    return;
  im2col_rows(g, j->n, r0, r1, j->in, in, j->out);
}

int nnt_cpu_im2col(const struct nnt_kernels *self, const nnt_conv_geom *g, size_t n,
                   const float *x, float *col) {
  (void)self;
  win_job j = {g, n, x, col};
  size_t per = (size_t)g->oh * g->ow * n; /* values of a row */
  size_t min_rows = per >= WIN_MIN_PART ? 1 : (per ? WIN_MIN_PART / per : WIN_MIN_PART);
  nnt_cpu_pool_for((size_t)g->c * g->kh * g->kw, 1, min_rows, im2col_part, &j);
  return NNT_OK;
}

/* col2im of the columns (image i's part of a row at i * plane) of the n
 * images onto channels [c0, c1) of their dx (in floats apart); even: a
 * stride-2 geometry whose rows take nnt_win_even_add_avx512 (the same
 * adds in the same order). A row's valid columns are found once for all
 * the images (as im2col_rows), and each image's values of dx take their
 * adds in the order of the rows, as one image at a time did. Always
 * inlined, and called with even a constant: each caller gets its own loop
 * (a flag tested inside one loop made the scalar one 5-15% slower). */
static inline __attribute__((always_inline)) void col2im_rows(const nnt_conv_geom *g, size_t n,
                                                              size_t c0, size_t c1,
                                                              const float *col, float *dx,
                                                              size_t in, int even) {
  size_t plane = (size_t)g->oh * g->ow, ld = n * plane;
  for (unsigned c = (unsigned)c0; c < c1; c++)
    for (unsigned a = 0; a < g->kh; a++)
      for (unsigned b = 0; b < g->kw; b++) {
        const float *row = col + (((size_t)c * g->kh + a) * g->kw + b) * ld;
        long off = (long)b * g->dw - g->pl;
        unsigned lo, hi;
        nnt_cpu_valid_cols(g, off, &lo, &hi);
        for (size_t i = 0; i < n; i++)
          for (unsigned oy = 0; oy < g->oh; oy++) {
            long iy = (long)oy * g->sh - g->pt + (long)a * g->dh;
            if (iy < 0 || iy >= (long)g->h)
              continue;
            float *xr = dx + i * in + ((size_t)c * g->h + (size_t)iy) * g->w + off;
            const float *r = row + i * plane + (size_t)oy * g->ow;
            if (even) {
              if (hi > lo)
                nnt_win_even_add_avx512(xr + 2 * (size_t)lo, r + lo, hi - lo);
            } else if (g->sw == 1) {
              for (unsigned ox = lo; ox < hi; ox++)
                xr[ox] += r[ox];
            } else if (g->sw == 2) {
              for (unsigned ox = lo; ox < hi; ox++)
                xr[2 * (size_t)ox] += r[ox];
            } else {
              for (unsigned ox = lo; ox < hi; ox++)
                xr[(size_t)ox * g->sw] += r[ox];
            }
          }
      }
}

static void col2im_part(void *p, size_t c0, size_t c1) {
  const win_job *j = p;
  const nnt_conv_geom *g = j->g;
  size_t in = nnt_conv_img_stride(g);
  int avx512 = nnt_cpu_vec_avx512(), even = avx512 && g->sw == 2 && g->ow >= WIN_EVEN_MIN;
  if (avx512 && nnt_win_col2im_avx512(g, j->n, c0, c1, j->in, j->out, in))
    return;
  if (even)
    col2im_rows(g, j->n, c0, c1, j->in, j->out, in, 1);
  else
    col2im_rows(g, j->n, c0, c1, j->in, j->out, in, 0);
}

/* col2im or col2im_set (part) over the input channels on the threads. */
static int col2im_run(const nnt_conv_geom *g, size_t n, const float *col, float *dx,
                      nnt_pool_fn part) {
  win_job j = {g, n, col, dx};
  nnt_cpu_pool_for(g->c, 1, win_min_channels(g, n), part, &j);
  return NNT_OK;
}

int nnt_cpu_col2im(const struct nnt_kernels *self, const nnt_conv_geom *g, size_t n,
                   const float *col, float *dx) {
  (void)self;
  return col2im_run(g, n, col, dx, col2im_part);
}

/* col2im_set: each part zeroes its channels' planes of the n images and
 * then folds their rows into them as col2im_part does, while those planes
 * are still in the cache (the same adds in the same order onto zeros:
 * bitwise a fill and then col2im, which wrote all of dx and then read
 * back what it adds into). */
static void col2im_set_part(void *p, size_t c0, size_t c1) {
  const win_job *j = p;
  const nnt_conv_geom *g = j->g;
  size_t hw = (size_t)g->h * g->w, in = nnt_conv_img_stride(g);
  if (nnt_cpu_vec_avx512() ? nnt_win_col2im_set_avx512(g, j->n, c0, c1, j->in, j->out, in)
                            : nnt_cpu_vec_avx2() &&
                                  nnt_win_col2im_set_avx2(g, j->n, c0, c1, j->in, j->out, in))
    return;
  for (size_t i = 0; i < j->n; i++)
    memset(j->out + i * in + c0 * hw, 0, (c1 - c0) * hw * sizeof(float));
  col2im_part(p, c0, c1);
}

int nnt_cpu_col2im_set(const struct nnt_kernels *self, const nnt_conv_geom *g, size_t n,
                       const float *col, float *dx) {
  (void)self;
  return col2im_run(g, n, col, dx, col2im_set_part);
}

/* Max pooling 2x2, stride 2, no padding or dilation: the same comparisons in
 * the same order as the general loop, without its bounds checks. Every
 * window must lie inside the input, compared in 64 bits: a huge bottom or
 * right padding gives an output whose doubled size wraps in 32. */
int nnt_cpu_pool_is_max2x2(const nnt_conv_geom *g) {
  return g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && g->pt == 0 && g->pl == 0 &&
         g->dh == 1 && g->dw == 1 && 2 * (uint64_t)g->oh <= g->h &&
         2 * (uint64_t)g->ow <= g->w;
}

/* Whether max2x2_fwd may run: also every index of a plane must fit an int
 * (converted to float it is then the general loop's index, bit for bit). */
static int max2x2_fast(const nnt_conv_geom *g) {
  return nnt_cpu_pool_is_max2x2(g) && (uint64_t)g->h * g->w <= INT_MAX;
}

/* One output row of max2x2_fwd: r0 and r1 are the two input rows, base the
 * plane index of r0[0]. The window's four values in the general loop's order
 * with strict ">" selects (ties and NaN keep the earlier pick), the index in
 * 32-bit integers converted once: a loop gcc vectorizes (strided loads,
 * compares and blends), unlike one with 64-bit indices converted to float
 * per candidate. */
static void max2x2_row(unsigned ow, int w, int base, const float *restrict r0,
                       const float *restrict r1, float *restrict y, float *restrict idx) {
  for (unsigned ox = 0; ox < ow; ox++) {
    int i0 = base + 2 * (int)ox;
    float v0 = r0[2 * ox], v1 = r0[2 * ox + 1], v2 = r1[2 * ox], v3 = r1[2 * ox + 1];
    float best = -FLT_MAX;
    int pick = -1;
    pick = v0 > best ? i0 : pick;
    best = v0 > best ? v0 : best;
    pick = v1 > best ? i0 + 1 : pick;
    best = v1 > best ? v1 : best;
    pick = v2 > best ? i0 + w : pick;
    best = v2 > best ? v2 : best;
    pick = v3 > best ? i0 + w + 1 : pick;
    best = v3 > best ? v3 : best;
    y[ox] = pick < 0 ? 0.0f : best;
    idx[ox] = (float)pick;
  }
}

/* The caller checked max2x2_fast. */
static void max2x2_fwd(const nnt_conv_geom *g, size_t p0, size_t p1, const float *x, float *y,
                       float *idx) {
  size_t in_plane = (size_t)g->h * g->w, out_plane = (size_t)g->oh * g->ow;
  for (size_t p = p0; p < p1; p++) {
    const float *xp = x + p * in_plane;
    float *yp = y + p * out_plane, *ip = idx + p * out_plane;
    for (unsigned oy = 0; oy < g->oh; oy++) {
      size_t r0 = 2 * (size_t)oy * g->w;
      max2x2_row(g->ow, (int)g->w, (int)r0, xp + r0, xp + r0 + g->w, yp + (size_t)oy * g->ow,
                 ip + (size_t)oy * g->ow);
    }
  }
}

/* Pooling on the compute threads (cpu_pool.c): split over the planes
 * (image, channel), each written by one part alone. Parts of at least
 * POOL_MIN_PART input values. */
#define POOL_MIN_PART 16384

typedef struct pool_job {
  const nnt_conv_geom *g;
  int mode;
  const float *x, *idx;
  float *y, *idx_out;
} pool_job;

static size_t pool_min_planes(const nnt_conv_geom *g) {
  size_t per = (size_t)g->h * g->w;
  return per >= POOL_MIN_PART ? 1 : (per ? POOL_MIN_PART / per : POOL_MIN_PART);
}

static void pool_fwd_part(void *pj, size_t p0, size_t p1) {
  const pool_job *j = pj;
  const nnt_conv_geom *g = j->g;
  int mode = j->mode;
  const float *x = j->x;
  float *y = j->y, *idx = j->idx_out;
  if (mode == 0 && max2x2_fast(g)) {
    max2x2_fwd(g, p0, p1, x, y, idx);
    return;
  }
  size_t in_plane = (size_t)g->h * g->w, out_plane = (size_t)g->oh * g->ow;
  float inv = 1.0f / (float)(g->kh * g->kw);
  for (size_t p = p0; p < p1; p++) {
    const float *xp = x + p * in_plane;
    for (unsigned oy = 0; oy < g->oh; oy++)
      for (unsigned ox = 0; ox < g->ow; ox++) {
        float best = -FLT_MAX, sum = 0;
        long at = -1;
        for (unsigned a = 0; a < g->kh; a++) {
          long iy = (long)oy * g->sh - g->pt + (long)a * g->dh;
          if (iy < 0 || iy >= (long)g->h)
            continue;
          for (unsigned b = 0; b < g->kw; b++) {
            long ix = (long)ox * g->sw - g->pl + (long)b * g->dw;
            if (ix < 0 || ix >= (long)g->w)
              continue;
            float v = xp[iy * g->w + ix];
            sum += v;
            if (v > best) {
              best = v;
              at = iy * (long)g->w + ix;
            }
          }
        }
        size_t o = p * out_plane + (size_t)oy * g->ow + ox;
        if (mode == 0) {
          y[o] = at < 0 ? 0.0f : best;
          idx[o] = (float)at;
        } else {
          y[o] = sum * inv;
        }
      }
  }
}

int nnt_cpu_pool_fwd(const struct nnt_kernels *self, const nnt_conv_geom *g, size_t n, int mode,
                     const float *x, float *y, float *idx) {
  (void)self;
  if (!g || (mode != 0 && mode != 1))
    return NNT_ERR_INVAL;
  pool_job j = {.g = g, .mode = mode, .x = x, .y = y, .idx_out = idx};
  nnt_cpu_pool_for(n * g->c, 1, pool_min_planes(g), pool_fwd_part, &j);
  return NNT_OK;
}

static void pool_bwd_part(void *pj, size_t p0, size_t p1) {
  const pool_job *j = pj;
  const nnt_conv_geom *g = j->g;
  int mode = j->mode;
  const float *dy = j->x, *idx = j->idx;
  float *dx = j->y;
  size_t in_plane = (size_t)g->h * g->w, out_plane = (size_t)g->oh * g->ow;
  float inv = 1.0f / (float)(g->kh * g->kw);
  memset(dx + p0 * in_plane, 0, (p1 - p0) * in_plane * sizeof(float));
  for (size_t p = p0; p < p1; p++) {
    float *dp = dx + p * in_plane;
    for (unsigned oy = 0; oy < g->oh; oy++)
      for (unsigned ox = 0; ox < g->ow; ox++) {
        size_t o = p * out_plane + (size_t)oy * g->ow + ox;
        if (mode == 0) {
          if (idx[o] >= 0)
            dp[(size_t)idx[o]] += dy[o];
          continue;
        }
        float v = dy[o] * inv;
        for (unsigned a = 0; a < g->kh; a++) {
          long iy = (long)oy * g->sh - g->pt + (long)a * g->dh;
          if (iy < 0 || iy >= (long)g->h)
            continue;
          for (unsigned b = 0; b < g->kw; b++) {
            long ix = (long)ox * g->sw - g->pl + (long)b * g->dw;
            if (ix >= 0 && ix < (long)g->w)
              dp[iy * g->w + ix] += v;
          }
        }
      }
  }
}

int nnt_cpu_pool_bwd(const struct nnt_kernels *self, const nnt_conv_geom *g, size_t n, int mode,
                     const float *dy, const float *idx, float *dx) {
  (void)self;
  if (!g || (mode != 0 && mode != 1))
    return NNT_ERR_INVAL;
  pool_job j = {.g = g, .mode = mode, .x = dy, .idx = idx, .y = dx};
  nnt_cpu_pool_for(n * g->c, 1, pool_min_planes(g), pool_bwd_part, &j);
  return NNT_OK;
}
