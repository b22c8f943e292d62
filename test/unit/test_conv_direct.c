/* The CPU's direct convolution forward (conv_fwd) against a naive
 * double-precision convolution, over geometries with padding, stride,
 * dilation, a partial block of filters, more than one block, a window
 * that leaves the input and no bias; the same bits on 1 and 2 threads; and
 * its refusals. Likewise the direct backward (conv_bwd_x, conv_bwd_w) of
 * stride-1 convolutions, kernels 4 and 5 wide, against naive
 * double-precision derivatives, and the row kernels of 3x3 and 5x5
 * windows that conv_fwd, conv_bwd_x and conv_bwd_w hand their shapes to,
 * and the subsampling 1x1 kernels (ResNet's shortcuts). */
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/compute/kernels.h"
#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/philox.h"

typedef struct dcase {
  unsigned c, h, w, kh, kw, sh, sw, dh, dw, pt, pb, pl, pr, filters, n, bias;
} dcase;

static const dcase CASES[] = {
    {6, 14, 14, 5, 5, 1, 1, 1, 1, 0, 0, 0, 0, 16, 3, 1},  /* LeNet-5's c2 */
    {1, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 16, 2, 1},  /* padding */
    {3, 11, 13, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 21, 2, 0},  /* stride, 2 blocks, no bias */
    {2, 9, 17, 3, 2, 1, 3, 2, 2, 2, 0, 3, 1, 5, 1, 1},    /* dilation, uneven padding */
    {4, 7, 40, 2, 5, 1, 1, 1, 1, 0, 1, 0, 2, 33, 2, 1},   /* wide row, 3 blocks */
    {1, 3, 3, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 16, 1, 1},    /* every window leaves */
    /* 1x1 windows with a stride (the subsampling product, cpu_conv_sub.c):
     * ResNet's shortcut shape with filters a partial block of 6, images
     * two threads split; strides 2 and 3 on odd sizes (positions a partial
     * tile of 16), no bias; 200 channels (two tiles a chunk: an image's
     * last tile shares one with the next image's first); output rows of 19
     * (AVX-512 packs rows longer than a tile in runs, shorter by gathers) */
    {64, 32, 32, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 13, 2, 1},
    {5, 9, 7, 1, 1, 2, 3, 1, 1, 0, 0, 0, 0, 7, 3, 0},
    {200, 12, 11, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 6, 2, 1},
    {3, 40, 38, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 11, 3, 1},
};

static nnt_conv_geom geom(const dcase *d) {
  nnt_conv_geom g = {.c = d->c, .h = d->h, .w = d->w, .kh = d->kh, .kw = d->kw,
                     .sh = d->sh, .sw = d->sw, .dh = d->dh, .dw = d->dw, .pt = d->pt,
                     .pb = d->pb, .pl = d->pl, .pr = d->pr};
  g.oh = (d->h + d->pt + d->pb - (d->kh - 1) * d->dh - 1) / d->sh + 1;
  g.ow = (d->w + d->pl + d->pr - (d->kw - 1) * d->dw - 1) / d->sw + 1;
  return g;
}

static float *rnd(nnt_rng *r, size_t n) {
  float *x = malloc((n ? n : 1) * sizeof *x);
  tu_fill_uniform(r, x, n, -1.0f, 1.0f);
  return x;
}

/* y against a double-precision convolution: within 1e-5 of the sum of
 * the terms' sizes (path: which code path gave it, for the message). */
static void check_naive(const dcase *d, const nnt_conv_geom *gp, const float *w, const float *b,
                        const float *x, const float *y, size_t ci, size_t pi) {
  nnt_conv_geom g = *gp;
  size_t patch = (size_t)d->c * d->kh * d->kw, plane = (size_t)g.oh * g.ow;
  size_t in = (size_t)d->c * d->h * d->w;
  for (size_t i = 0; i < d->n; i++)
    for (size_t f = 0; f < d->filters; f++)
      for (unsigned oy = 0; oy < g.oh; oy++)
        for (unsigned ox = 0; ox < g.ow; ox++) {
          double s = d->bias ? b[f] : 0.0, mag = fabs(s);
          for (unsigned c = 0; c < d->c; c++)
            for (unsigned a = 0; a < d->kh; a++)
              for (unsigned q = 0; q < d->kw; q++) {
                long iy = (long)oy * d->sh - d->pt + (long)a * d->dh;
                long ix = (long)ox * d->sw - d->pl + (long)q * d->dw;
                if (iy < 0 || iy >= (long)d->h || ix < 0 || ix >= (long)d->w)
                  continue;
                double t = (double)w[f * patch + (c * d->kh + a) * d->kw + q] *
                           x[i * in + (c * d->h + iy) * d->w + ix];
                s += t;
                mag += fabs(t);
              }
          float got = y[(i * d->filters + f) * plane + oy * g.ow + ox];
          if (fabs(got - s) > 1e-5 * (mag > 1 ? mag : 1))
            fail_msg("case %zu path %zu: image %zu filter %zu (%u, %u): %g, want %g", ci, pi,
                     i, f, oy, ox, got, s);
        }
}

static void test_against_naive(void **state) {
  (void)state;
  const nnt_kernels *k = nnt_kernels_cpu();
  nnt_rng r;
  nnt_rng_seed(&r, 7);
  unsigned split = 0; /* cases whose two-thread run split over both */
  for (size_t ci = 0; ci < sizeof CASES / sizeof CASES[0]; ci++) {
    const dcase *d = &CASES[ci];
    nnt_conv_geom g = geom(d);
    size_t patch = (size_t)d->c * d->kh * d->kw, plane = (size_t)g.oh * g.ow;
    size_t in = (size_t)d->c * d->h * d->w;
    float *w = rnd(&r, d->filters * patch), *b = rnd(&r, d->filters), *x = rnd(&r, d->n * in);
    float *y = malloc(d->n * d->filters * plane * sizeof *y);
    float *y2 = malloc(d->n * d->filters * plane * sizeof *y2);
    /* every code path this CPU can run (AVX-512, AVX2 + FMA, plain C),
     * then conv_fwd's own choice, which the two-thread run must repeat */
    static const int paths[] = {NNT_BLAS_AVX512, NNT_BLAS_AVX2, NNT_BLAS_SSE};
    for (size_t pi = 0; pi < NNT_ARRAY_LEN(paths); pi++)
      if (!nnt_cpu_conv_fwd_path(paths[pi], &g, d->n, d->filters, w, d->bias ? b : NULL, x, y))
        check_naive(d, &g, w, b, x, y, ci, pi);
    assert_int_equal(k->conv_fwd(k, &g, d->n, d->filters, w, d->bias ? b : NULL, x, y), NNT_OK);
    check_naive(d, &g, w, b, x, y, ci, NNT_ARRAY_LEN(paths));
    /* the same bits on two threads (parts are whole outputs) */
    tu_two_threads();
    assert_int_equal(k->conv_fwd(k, &g, d->n, d->filters, w, d->bias ? b : NULL, x, y2), NNT_OK);
    split += tu_one_thread() > 0;
    assert_memory_equal(y, y2, d->n * d->filters * plane * sizeof *y);
    free(w), free(b), free(x), free(y), free(y2);
  }
  print_message("forward: %u of %zu cases split over two threads\n", split,
                sizeof CASES / sizeof CASES[0]);
  assert_true(split >= 1);
}

static void test_refusals(void **state) {
  (void)state;
  const nnt_kernels *k = nnt_kernels_cpu();
  float v[4] = {0};
  /* patch 575 > 512 (at stride 2: the row kernel does not take it) */
  dcase d = {23, 8, 8, 5, 5, 2, 2, 1, 1, 0, 0, 0, 0, 1, 1, 0};
  nnt_conv_geom g = geom(&d);
  assert_int_equal(k->conv_fwd(k, &g, 1, 1, v, NULL, v, v), NNT_ERR_INVAL);
  dcase wide = {1, 1, 300, 1, 3, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0}; /* ow 298 > 256 */
  g = geom(&wide);
  assert_int_equal(k->conv_fwd(k, &g, 1, 1, v, NULL, v, v), NNT_ERR_INVAL);
  dcase one = {2, 4, 4, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0};
  g = geom(&one);
  g.cs = 3; /* a block of channels: not taken */
  assert_int_equal(k->conv_fwd(k, &g, 1, 1, v, NULL, v, v), NNT_ERR_INVAL);
  /* the subsampling 1x1 product: a stride, no padding, at most 512
   * channels; 513 (a patch above 512) is refused by every kernel */
  dcase sub = {4, 6, 6, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 3, 1, 0};
  g = geom(&sub);
  assert_true(nnt_conv_sub_take(&g, 3));
  g.cs = 5;
  assert_false(nnt_conv_sub_take(&g, 3));
  sub.sh = sub.sw = 1; /* pointwise: im2col is the image itself */
  g = geom(&sub);
  assert_false(nnt_conv_sub_take(&g, 3));
  dcase padded = {4, 6, 6, 1, 1, 2, 2, 1, 1, 1, 0, 0, 0, 3, 1, 0};
  g = geom(&padded);
  assert_false(nnt_conv_sub_take(&g, 3));
  dcase many = {513, 4, 4, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 3, 1, 0};
  g = geom(&many);
  assert_false(nnt_conv_sub_take(&g, 3));
  assert_int_equal(nnt_cpu_conv_sub_fwd(NNT_BLAS_SSE, &g, 1, 3, v, NULL, v, v), NNT_ERR_INVAL);
  assert_int_equal(k->conv_fwd(k, &g, 1, 3, v, NULL, v, v), NNT_ERR_INVAL);
}

/* Stride 1, dilation 1: c, h, w, kh, kw, pt, pb, pl, pr, filters, n. */
typedef struct bcase {
  unsigned c, h, w, kh, kw, pt, pb, pl, pr, filters, n;
} bcase;

static const bcase BCASES[] = {
    {6, 14, 14, 5, 5, 0, 0, 0, 0, 16, 3},  /* LeNet-5's c2 */
    {1, 28, 28, 5, 5, 0, 0, 0, 0, 6, 2},   /* LeNet-5's c1: two column tiles */
    {2, 7, 9, 5, 5, 2, 2, 2, 2, 3, 2},     /* same padding, filters not a block */
    {11, 6, 40, 3, 4, 1, 0, 2, 1, 7, 2},   /* two channel blocks, wide rows, uneven */
    {3, 5, 17, 2, 4, 0, 1, 0, 0, 9, 1},    /* 2 x 4, 17 columns */
    {4, 4, 6, 4, 5, 3, 3, 1, 1, 5, 2},     /* 4 x 5, windows past every edge */
    {2, 1, 19, 1, 5, 0, 0, 3, 1, 4, 3},    /* a row (conv1d) */
    {5, 3, 3, 3, 4, 4, 4, 4, 4, 2, 1},     /* padding wider than the kernel */
    {5, 9, 11, 4, 4, 1, 2, 2, 1, 3, 2},    /* 5 channels, 4 wide: a block of 6 on AVX-512 */
};

static nnt_conv_geom bgeom(const bcase *d) {
  dcase c = {d->c, d->h, d->w, d->kh, d->kw, 1, 1, 1, 1, d->pt, d->pb, d->pl, d->pr,
             d->filters, d->n, 0};
  return geom(&c);
}

/* got against the naive derivatives: dx[i][c][iy][ix] and dw[f][c][a][b],
 * within 1e-5 of the sum of the terms' sizes */
static void check_bwd(const bcase *d, const nnt_conv_geom *g, const float *w, const float *x,
                      const float *dy, const float *dx, const float *dw, size_t ci, size_t pi) {
  size_t taps = (size_t)d->kh * d->kw, patch = d->c * taps, plane = (size_t)g->oh * g->ow;
  size_t in = (size_t)d->c * d->h * d->w;
  double *rx = calloc(d->n * in, sizeof *rx), *mx = calloc(d->n * in, sizeof *mx);
  double *rw = calloc(d->filters * patch, sizeof *rw), *mw = calloc(d->filters * patch, sizeof *mw);
  for (size_t i = 0; i < d->n; i++)
    for (size_t f = 0; f < d->filters; f++)
      for (unsigned oy = 0; oy < g->oh; oy++)
        for (unsigned ox = 0; ox < g->ow; ox++) {
          double gy = dy[(i * d->filters + f) * plane + oy * g->ow + ox];
          for (unsigned c = 0; c < d->c; c++)
            for (unsigned a = 0; a < d->kh; a++)
              for (unsigned b = 0; b < d->kw; b++) {
                long iy = (long)oy - d->pt + a, ix = (long)ox - d->pl + b;
                if (iy < 0 || iy >= (long)d->h || ix < 0 || ix >= (long)d->w)
                  continue;
                size_t xi = i * in + (c * d->h + iy) * d->w + ix;
                size_t wi = f * patch + c * taps + a * d->kw + b;
                rx[xi] += w[wi] * gy, mx[xi] += fabs(w[wi] * gy);
                rw[wi] += x[xi] * gy, mw[wi] += fabs(x[xi] * gy);
              }
        }
  for (size_t q = 0; dx && q < d->n * in; q++)
    if (fabs(dx[q] - rx[q]) > 1e-5 * (mx[q] > 1 ? mx[q] : 1))
      fail_msg("case %zu path %zu: dx[%zu] %g, want %g", ci, pi, q, (double)dx[q], rx[q]);
  for (size_t q = 0; dw && q < d->filters * patch; q++)
    if (fabs(dw[q] - rw[q]) > 1e-5 * (mw[q] > 1 ? mw[q] : 1))
      fail_msg("case %zu path %zu: dw[%zu] %g, want %g", ci, pi, q, (double)dw[q], rw[q]);
  free(rx), free(mx), free(rw), free(mw);
}

static void test_bwd_against_naive(void **state) {
  (void)state;
  const nnt_kernels *k = nnt_kernels_cpu();
  nnt_rng r;
  nnt_rng_seed(&r, 8);
  unsigned split = 0; /* cases whose two-thread run split over both */
  for (size_t ci = 0; ci < NNT_ARRAY_LEN(BCASES); ci++) {
    const bcase *d = &BCASES[ci];
    nnt_conv_geom g = bgeom(d);
    size_t patch = (size_t)d->c * d->kh * d->kw, plane = (size_t)g.oh * g.ow;
    size_t in = (size_t)d->c * d->h * d->w, nx = d->n * in, nw = d->filters * patch;
    float *w = rnd(&r, nw), *x = rnd(&r, nx), *dy = rnd(&r, d->n * d->filters * plane);
    float *dx = malloc(nx * sizeof *dx), *dw = malloc(nw * sizeof *dw);
    float *dx2 = malloc(nx * sizeof *dx2), *dw2 = malloc(nw * sizeof *dw2);
    assert_true(nnt_cpu_conv_bwd_ok(&g, d->filters));
    /* every code path this CPU can run, then the table's choice, which the
     * two-thread run must repeat; outputs are written, not added to */
    static const int paths[] = {NNT_BLAS_AVX512, NNT_BLAS_AVX2, NNT_BLAS_SSE};
    size_t ran = 0;
    for (size_t pi = 0; pi < NNT_ARRAY_LEN(paths); pi++) {
      for (size_t q = 0; q < nx; q++)
        dx[q] = NAN;
      for (size_t q = 0; q < nw; q++)
        dw[q] = NAN;
      int rx = nnt_cpu_conv_bwd_x_path(paths[pi], &g, d->n, d->filters, w, dy, dx);
      int rw = nnt_cpu_conv_bwd_w_path(paths[pi], &g, d->n, d->filters, x, dy, dw);
      assert_int_equal(rx, rw);
      if (!rx)
        check_bwd(d, &g, w, x, dy, dx, dw, ci, pi), ran++;
    }
    assert_true(ran >= 1); /* plain C runs everywhere */
    assert_int_equal(k->conv_bwd_x(k, &g, d->n, d->filters, w, dy, dx), NNT_OK);
    assert_int_equal(k->conv_bwd_w(k, &g, d->n, d->filters, x, dy, dw), NNT_OK);
    check_bwd(d, &g, w, x, dy, dx, dw, ci, NNT_ARRAY_LEN(paths));
    tu_two_threads();
    assert_int_equal(k->conv_bwd_x(k, &g, d->n, d->filters, w, dy, dx2), NNT_OK);
    assert_int_equal(k->conv_bwd_w(k, &g, d->n, d->filters, x, dy, dw2), NNT_OK);
    split += tu_one_thread() > 0;
    assert_memory_equal(dx, dx2, nx * sizeof *dx);
    assert_memory_equal(dw, dw2, nw * sizeof *dw);
    free(w), free(x), free(dy), free(dx), free(dw), free(dx2), free(dw2);
  }
  print_message("backward: %u of %zu cases split over two threads\n", split,
                NNT_ARRAY_LEN(BCASES));
  assert_true(split >= 1);
}

static void test_bwd_refusals(void **state) {
  (void)state;
  const nnt_kernels *k = nnt_kernels_cpu();
  float v[4] = {0};
  const dcase bad[] = {
      {1, 8, 8, 3, 3, 2, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0},   /* stride 2 */
      {1, 8, 8, 3, 3, 1, 1, 2, 1, 0, 0, 0, 0, 1, 1, 0},   /* dilation 2 */
      {1, 8, 8, 3, 6, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0},   /* 6 wide */
      {1, 8, 8, 3, 2, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0},   /* 2 wide */
      {1, 8, 8, 5, 4, 1, 1, 1, 1, 0, 0, 0, 0, 52, 1, 0},  /* 52 x 20 taps > 1024 */
      {1, 1, 300, 1, 3, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0}, /* 298 > 256 columns */
  };
  for (size_t i = 0; i < NNT_ARRAY_LEN(bad); i++) {
    nnt_conv_geom g = geom(&bad[i]);
    assert_false(nnt_cpu_conv_bwd_ok(&g, bad[i].filters));
    assert_int_equal(k->conv_bwd_x(k, &g, 1, bad[i].filters, v, v, v), NNT_ERR_INVAL);
    assert_int_equal(k->conv_bwd_w(k, &g, 1, bad[i].filters, v, v, v), NNT_ERR_INVAL);
  }
  dcase one = {2, 4, 4, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0};
  nnt_conv_geom g = geom(&one);
  g.cs = 3; /* a block of channels: not taken */
  assert_int_equal(k->conv_bwd_x(k, &g, 1, 1, v, v, v), NNT_ERR_INVAL);
  assert_int_equal(k->conv_bwd_w(k, &g, 1, 1, v, v, v), NNT_ERR_INVAL);
}

/* Whether this CPU runs a code path (NNT_BLAS_AVX512, _AVX2, _SSE). */
static int cpu_runs(int path) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (path >= NNT_BLAS_AVX512)
    return __builtin_cpu_supports("avx512f");
  if (path >= NNT_BLAS_AVX2)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return 1;
#else
  return path < NNT_BLAS_AVX2;
#endif
}

/* The filter-lane weight gradient (nnt_cpu_conv_rows_dw) of a case on
 * one path where it takes the case and this CPU runs the path (else a
 * refusal), against the naive sums, and the same bits on two threads. */
static void rows_dw_check(const bcase *d, const nnt_conv_geom *g, const float *w,
                          const float *x, const float *dy, size_t ci, size_t pi, int path) {
  size_t nw = d->filters * d->c * d->kh * d->kw;
  float *dw = malloc(nw * sizeof *dw), *dw2 = malloc(nw * sizeof *dw2);
  for (size_t q = 0; q < nw; q++)
    dw[q] = NAN;
  int rc = nnt_cpu_conv_rows_dw(path, g, d->n, d->filters, x, dy, dw);
  if (!nnt_conv_rows_dw_take(g, d->filters) || !cpu_runs(path)) {
    assert_int_equal(rc, NNT_ERR_INVAL);
  } else {
    assert_int_equal(rc, NNT_OK);
    check_bwd(d, g, w, x, dy, NULL, dw, ci, pi);
    tu_two_threads();
    assert_int_equal(nnt_cpu_conv_rows_dw(path, g, d->n, d->filters, x, dy, dw2), NNT_OK);
    tu_one_thread();
    assert_memory_equal(dw, dw2, nw * sizeof *dw);
  }
  free(dw), free(dw2);
}

/* Cases for the weight gradient alone: 3x3 with 16 filters (one vector)
 * and 37 (a block of 32 and one of 5), 5x5 with 17 (16 and 1), 19
 * channels (more than a part's 8), a 1-wide plane; planes whose dY is laid
 * out in bands of rows (the Fashion-MNIST CNN's c1 on every path: one
 * channel, parts by filter blocks; 5x5 at 22x22, 484 positions, where a
 * block holds 16 filters). */
static const bcase DWCASES[] = {
    {3, 9, 10, 3, 3, 1, 1, 1, 1, 16, 2},
    {2, 6, 7, 3, 3, 0, 2, 1, 0, 37, 3},
    {19, 8, 6, 5, 5, 2, 2, 2, 2, 17, 2},
    {4, 12, 1, 3, 3, 1, 1, 1, 1, 9, 2},
    {1, 22, 22, 5, 5, 2, 2, 2, 2, 6, 2},
    {1, 28, 28, 3, 3, 1, 1, 1, 1, 16, 3},
    /* padded planes past 1,024 floats: ResNet-18's conv0 (34 x 34) and
     * conv-BN-ReLU's c1 (66 x 66, near the bound of 4,608) */
    {3, 32, 32, 3, 3, 1, 1, 1, 1, 64, 2},
    {3, 64, 64, 3, 3, 1, 1, 1, 1, 32, 1},
};

static void test_rows_dw(void **state) {
  (void)state;
  nnt_rng r;
  nnt_rng_seed(&r, 10);
  static const int paths[] = {NNT_BLAS_AVX512, NNT_BLAS_AVX2, NNT_BLAS_SSE};
  const nnt_kernels *k = nnt_kernels_cpu();
  for (size_t ci = 0; ci < NNT_ARRAY_LEN(DWCASES); ci++) {
    const bcase *d = &DWCASES[ci];
    nnt_conv_geom g = bgeom(d);
    assert_true(nnt_conv_rows_dw_take(&g, d->filters));
    size_t nx = d->n * d->c * d->h * d->w, ny = d->n * d->filters * g.oh * g.ow;
    size_t nw = d->filters * d->c * d->kh * d->kw;
    float *w = rnd(&r, nw), *x = rnd(&r, nx), *dy = rnd(&r, ny), *dw = malloc(nw * sizeof *dw);
    for (size_t pi = 0; pi < NNT_ARRAY_LEN(paths); pi++)
      rows_dw_check(d, &g, w, x, dy, ci, pi, paths[pi]);
    /* conv_bwd_w takes it */
    assert_int_equal(k->conv_bwd_w(k, &g, d->n, d->filters, x, dy, dw), NNT_OK);
    check_bwd(d, &g, w, x, dy, NULL, dw, ci, NNT_ARRAY_LEN(paths));
    free(w), free(x), free(dy), free(dw);
  }
  /* refusals: a row whose dY takes more than 4096 floats at 32 filters,
   * a 5x5 plane of more than 512 positions (LeNet-5's c1), a padded plane
   * of more than 4608 floats (70 x 70; its rows' dY 2,176 floats), a 4x4
   * window */
  const bcase bad[] = {
      {1, 3, 300, 3, 3, 0, 0, 0, 0, 1, 1},
      {1, 28, 28, 5, 5, 2, 2, 2, 2, 6, 1},
      {1, 1, 516, 5, 5, 2, 2, 0, 0, 1, 1}, /* 512 positions, padded 5 x 516 */
      {1, 68, 68, 3, 3, 1, 1, 1, 1, 1, 1},
      {1, 8, 8, 4, 4, 0, 0, 0, 0, 1, 1},
  };
  float v[4] = {0};
  for (size_t i = 0; i < NNT_ARRAY_LEN(bad); i++) {
    nnt_conv_geom g = bgeom(&bad[i]);
    assert_false(nnt_conv_rows_dw_take(&g, bad[i].filters));
    assert_int_equal(nnt_cpu_conv_rows_dw(NNT_BLAS_SSE, &g, 1, 1, v, v, v), NNT_ERR_INVAL);
  }
}

/* The row kernel (nnt_cpu_conv_rows), forward and derivative, on every
 * path against the naive sums: channel blocks of 1, 6 and 8 (full and
 * partial), rows past the last whole tile, one and two column vectors
 * (partial), padding wider than the window, a plane smaller than it. */
static const bcase RCASES[] = {
    {1, 28, 28, 3, 3, 1, 1, 1, 1, 16, 2},  /* the Fashion-MNIST CNN's c1 */
    {16, 14, 14, 3, 3, 1, 1, 1, 1, 32, 2}, /* its c2 */
    {1, 28, 28, 5, 5, 0, 0, 0, 0, 6, 2},   /* LeNet-5's c1 */
    {6, 14, 14, 5, 5, 0, 0, 0, 0, 16, 3},  /* LeNet-5's c2 */
    {7, 13, 37, 3, 3, 1, 1, 1, 1, 13, 2},  /* 3 wide vectors; 13 filters, 7 channels */
    {6, 11, 9, 5, 5, 2, 1, 0, 2, 1, 2},    /* one filter (blocks of 1), uneven padding */
    {12, 3, 3, 3, 3, 4, 4, 4, 4, 6, 1},    /* padding wider than the window */
    {1, 2, 4, 5, 5, 2, 2, 3, 1, 7, 2},     /* a plane smaller than the window */
    {12, 7, 33, 5, 5, 2, 2, 2, 2, 12, 1},  /* 12 channels: blocks of 6 */
};

static void test_rows_against_naive(void **state) {
  (void)state;
  nnt_rng r;
  nnt_rng_seed(&r, 9);
  unsigned split = 0;
  static const int paths[] = {NNT_BLAS_AVX512, NNT_BLAS_AVX2, NNT_BLAS_SSE};
  for (size_t ci = 0; ci < NNT_ARRAY_LEN(RCASES); ci++) {
    const bcase *d = &RCASES[ci];
    nnt_conv_geom g = bgeom(d);
    dcase dc = {d->c, d->h, d->w, d->kh, d->kw, 1, 1, 1, 1, d->pt, d->pb, d->pl, d->pr,
                d->filters, d->n, 1};
    size_t patch = (size_t)d->c * d->kh * d->kw, plane = (size_t)g.oh * g.ow;
    size_t nx = d->n * d->c * d->h * d->w, ny = d->n * d->filters * plane;
    size_t nw = d->filters * patch;
    float *w = rnd(&r, nw), *b = rnd(&r, d->filters), *x = rnd(&r, nx), *dy = rnd(&r, ny);
    float *y = malloc(ny * sizeof *y), *dx = malloc(nx * sizeof *dx);
    float *y2 = malloc(ny * sizeof *y2), *dx2 = malloc(nx * sizeof *dx2);
    assert_true(nnt_conv_rows_take(&g, d->c, d->filters));
    assert_true(nnt_conv_rows_take(&g, d->filters, d->c));
    size_t ran = 0;
    for (size_t pi = 0; pi < NNT_ARRAY_LEN(paths); pi++) {
      for (size_t q = 0; q < ny; q++)
        y[q] = NAN;
      for (size_t q = 0; q < nx; q++)
        dx[q] = NAN;
      int rf = nnt_cpu_conv_rows(paths[pi], &g, d->n, d->filters, 0, w, b, x, y);
      int rd = nnt_cpu_conv_rows(paths[pi], &g, d->n, d->filters, 1, w, NULL, dy, dx);
      assert_int_equal(rf, rd);
      if (rf)
        continue;
      check_naive(&dc, &g, w, b, x, y, ci, pi);
      check_bwd(d, &g, w, x, dy, dx, NULL, ci, pi);
      ran++;
      rows_dw_check(d, &g, w, x, dy, ci, pi, paths[pi]);
      /* the same bits on two threads */
      tu_two_threads();
      assert_int_equal(nnt_cpu_conv_rows(paths[pi], &g, d->n, d->filters, 0, w, b, x, y2), 0);
      assert_int_equal(nnt_cpu_conv_rows(paths[pi], &g, d->n, d->filters, 1, w, NULL, dy, dx2),
                       0);
      split += tu_one_thread() > 0;
      assert_memory_equal(y, y2, ny * sizeof *y);
      assert_memory_equal(dx, dx2, nx * sizeof *dx);
    }
    assert_true(ran >= 1); /* plain C runs everywhere */
    free(w), free(b), free(x), free(dy), free(y), free(dx), free(y2), free(dx2);
  }
  print_message("rows: %u runs split over two threads\n", split);
  assert_true(split >= 1);
  /* refusals: stride, dilation, a non-square or 4-wide window, more than
   * 1024 taps of source channels, 3 and 5 output channels (blocks of 8
   * under 3/4 full), a block of channels */
  const dcase bad[] = {
      {1, 8, 8, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, 1, 1, 0},
      {1, 8, 8, 3, 3, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 0},
      {1, 8, 8, 3, 5, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0},
      {1, 8, 8, 4, 4, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0},
      {114, 8, 8, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0},
      {1, 8, 8, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 3, 1, 0},
      {1, 8, 8, 5, 5, 1, 1, 1, 1, 0, 0, 0, 0, 5, 1, 0},
  };
  float v[4] = {0};
  for (size_t i = 0; i < NNT_ARRAY_LEN(bad); i++) {
    nnt_conv_geom g = geom(&bad[i]);
    assert_false(nnt_conv_rows_take(&g, bad[i].c, bad[i].filters));
    assert_int_equal(nnt_cpu_conv_rows(NNT_BLAS_SSE, &g, 1, bad[i].filters, 0, v, NULL, v, v),
                     NNT_ERR_INVAL);
  }
  dcase one = {2, 4, 4, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0};
  nnt_conv_geom g = geom(&one);
  g.cs = 3;
  assert_int_equal(nnt_cpu_conv_rows(NNT_BLAS_SSE, &g, 1, 1, 0, v, NULL, v, v), NNT_ERR_INVAL);
}

/* LeNet-5's c2 on the AVX2 path: conv_fwd hands it to the filter-vector
 * kernel rather than the row kernel (its rows of 10 fill 10 of 16 lanes),
 * and the two sum the same taps in the same order: the same bits as the
 * row kernel's, on one thread and on two. */
static void test_rows_or_direct_same_bits(void **state) {
  (void)state;
  const dcase *d = &CASES[0]; /* LeNet-5's c2: no padding */
  nnt_conv_geom g = geom(d);
  size_t patch = (size_t)d->c * d->kh * d->kw, plane = (size_t)g.oh * g.ow;
  size_t in = (size_t)d->c * d->h * d->w, ny = d->n * d->filters * plane;
  nnt_rng r;
  nnt_rng_seed(&r, 21);
  float *w = rnd(&r, d->filters * patch), *b = rnd(&r, d->filters), *x = rnd(&r, d->n * in);
  float *y = malloc(ny * sizeof *y), *y2 = malloc(ny * sizeof *y2);
  if (!nnt_cpu_conv_rows(NNT_BLAS_AVX2, &g, d->n, d->filters, 0, w, b, x, y)) {
    for (unsigned t = 1; t <= 2; t++) {
      if (t == 2)
        tu_two_threads();
      memset(y2, 0xff, ny * sizeof *y2);
      assert_int_equal(nnt_cpu_conv_fwd_path(NNT_BLAS_AVX2, &g, d->n, d->filters, w, b, x, y2),
                       NNT_OK);
      if (t == 2)
        tu_one_thread();
      assert_memory_equal(y, y2, ny * sizeof *y);
    }
  } else {
    print_message("no AVX2 on this CPU: nothing to compare\n");
  }
  free(w), free(b), free(x), free(y), free(y2);
}

/* The subsampling 1x1 product gives the same bits on AVX-512 (8 filters by
 * two tiles, its own packing) as on AVX2 (6 filters by one tile): each
 * output is the same chain of fused multiply-adds over the channels. */
static void test_sub_paths_same_bits(void **state) {
  (void)state;
  if (!cpu_runs(NNT_BLAS_AVX512)) {
    print_message("no AVX-512 on this CPU: nothing to compare\n");
    return;
  }
  nnt_rng r;
  nnt_rng_seed(&r, 33);
  unsigned compared = 0;
  for (size_t ci = 0; ci < NNT_ARRAY_LEN(CASES); ci++) {
    const dcase *d = &CASES[ci];
    nnt_conv_geom g = geom(d);
    if (!nnt_conv_sub_take(&g, d->filters))
      continue;
    size_t in = (size_t)d->c * d->h * d->w, ny = d->n * d->filters * (size_t)g.oh * g.ow;
    float *w = rnd(&r, d->filters * d->c), *b = rnd(&r, d->filters), *x = rnd(&r, d->n * in);
    float *y = malloc(ny * sizeof *y), *y2 = malloc(ny * sizeof *y2);
    const float *bias = d->bias ? b : NULL;
    assert_int_equal(nnt_cpu_conv_sub_fwd(NNT_BLAS_AVX512, &g, d->n, d->filters, w, bias, x, y),
                     NNT_OK);
    assert_int_equal(nnt_cpu_conv_sub_fwd(NNT_BLAS_AVX2, &g, d->n, d->filters, w, bias, x, y2),
                     NNT_OK);
    assert_memory_equal(y, y2, ny * sizeof *y);
    compared++;
    free(w), free(b), free(x), free(y), free(y2);
  }
  assert_int_equal(compared, 4);
}

/* The subsampling derivative (nnt_cpu_conv_sub_dx, conv_bwd_x's choice for
 * a stride-2 1x1 window on AVX-512) against naive sums, every dX value
 * written (zeros off the even rows' even columns), the same bits on two
 * threads; and the shapes it refuses. */
static void test_sub_dx(void **state) {
  (void)state;
  const nnt_kernels *k = nnt_kernels_cpu();
  /* output rows of 16 (a tile a row), 8 and 4 (rows a tile; stage 4's
   * pairs across images, an odd tile count), filters and channels not
   * blocks of 8 */
  static const dcase sub[] = {
      {13, 32, 32, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 20, 3, 0},
      {9, 16, 16, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 11, 2, 0},
      {10, 8, 8, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 17, 3, 0},
      {3, 64, 64, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 5, 1, 0},
  };
  nnt_rng r;
  nnt_rng_seed(&r, 34);
  int avx512 = cpu_runs(NNT_BLAS_AVX512);
  for (size_t ci = 0; ci < NNT_ARRAY_LEN(sub); ci++) {
    const dcase *d = &sub[ci];
    nnt_conv_geom g = geom(d);
    assert_true(nnt_conv_sub_dx_take(&g, d->filters));
    size_t plane = (size_t)g.oh * g.ow, hw = (size_t)d->h * d->w, nx = d->n * d->c * hw;
    float *w = rnd(&r, d->filters * d->c), *dy = rnd(&r, d->n * d->filters * plane);
    float *dx = malloc(nx * sizeof *dx), *dx2 = malloc(nx * sizeof *dx2);
    assert_int_equal(nnt_cpu_conv_sub_dx(NNT_BLAS_AVX2, &g, d->n, d->filters, w, dy, dx, 0),
                     NNT_ERR_INVAL);
    if (!avx512) {
      free(w), free(dy), free(dx), free(dx2);
      continue;
    }
    for (size_t q = 0; q < nx; q++)
      dx[q] = NAN;
    assert_int_equal(k->conv_bwd_x(k, &g, d->n, d->filters, w, dy, dx), NNT_OK);
    for (size_t i = 0; i < d->n; i++)
      for (size_t c = 0; c < d->c; c++)
        for (size_t iy = 0; iy < d->h; iy++)
          for (size_t ix = 0; ix < d->w; ix++) {
            double want = 0, size = 0;
            for (size_t f = 0; iy % 2 == 0 && ix % 2 == 0 && f < d->filters; f++) {
              double t = (double)w[f * d->c + c] *
                         dy[(i * d->filters + f) * plane + iy / 2 * g.ow + ix / 2];
              want += t, size += fabs(t);
            }
            float got = dx[(i * d->c + c) * hw + iy * d->w + ix];
            if (!(fabs(got - want) <= 1e-5 * (size > 1 ? size : 1)))
              fail_msg("case %zu: dx[%zu][%zu][%zu][%zu] %g, want %g", ci, i, c, iy, ix,
                       (double)got, want);
          }
    tu_two_threads();
    assert_int_equal(k->conv_bwd_x(k, &g, d->n, d->filters, w, dy, dx2), NNT_OK);
    tu_one_thread();
    assert_memory_equal(dx, dx2, nx * sizeof *dx);
    /* added into a sum (conv_bwd_x_add): the bits of that dx added into
     * it, on one thread and two, a -0 on an odd row and on an even row's
     * odd column included (adding 0 makes it +0) */
    float *sum = rnd(&r, nx), *want = malloc(nx * sizeof *want);
    sum[1] = sum[d->w] = sum[nx - 1] = -0.0f;
    for (size_t q = 0; q < nx; q++)
      want[q] = sum[q] + dx[q];
    for (int t = 1; t <= 2; t++) {
      memcpy(dx2, sum, nx * sizeof *dx2);
      if (t == 2)
        tu_two_threads();
      assert_int_equal(k->conv_bwd_x_add(k, &g, d->n, d->filters, w, dy, dx2), NNT_OK);
      tu_one_thread();
      assert_memory_equal(dx2, want, nx * sizeof *dx2);
    }
    free(sum), free(want);
    free(w), free(dy), free(dx), free(dx2);
  }
  /* an odd input (h != 2 oh), a stride of 3, planes not of whole tiles */
  static const dcase no[] = {
      {4, 33, 32, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 3, 1, 0},
      {4, 48, 48, 1, 1, 3, 3, 1, 1, 0, 0, 0, 0, 3, 1, 0},
      {4, 12, 12, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 3, 1, 0},
      {4, 40, 40, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 3, 1, 0},
  };
  float v[8] = {0};
  for (size_t ci = 0; ci < NNT_ARRAY_LEN(no); ci++) {
    nnt_conv_geom g = geom(&no[ci]);
    assert_false(nnt_conv_sub_dx_take(&g, no[ci].filters));
    assert_int_equal(k->conv_bwd_x_add(k, &g, 1, no[ci].filters, v, v, v), NNT_ERR_INVAL);
  }
  nnt_conv_geom g = geom(&sub[2]); /* taken, but not without AVX-512 */
  if (!avx512)
    assert_int_equal(k->conv_bwd_x_add(k, &g, 1, sub[2].filters, v, v, v), NNT_ERR_INVAL);
}

/* The subsampling weight gradient (conv_bwd_w on what nnt_conv_sub_dw_take
 * takes, AVX-512): against sums in double, every value written, the same
 * bits on one thread and two. Channels not a panel's 32 (13, 40, 33),
 * filters not tiles of 12, planes of one block an image (256), several
 * images a block (64, 16; a last block of fewer), an image in several
 * blocks (576), strides 3 and 2 over odd sizes, and a one-row input. */
static void test_sub_dw(void **state) {
  (void)state;
  const nnt_kernels *k = nnt_kernels_cpu();
  static const dcase sub[] = {
      {13, 32, 32, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 20, 3, 0},
      {40, 16, 16, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 13, 5, 0},
      {33, 8, 8, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 7, 17, 0},
      {5, 48, 48, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 9, 2, 0},
      {16, 15, 17, 1, 1, 3, 2, 1, 1, 0, 0, 0, 0, 24, 3, 0},
      {8, 1, 40, 1, 1, 1, 2, 1, 1, 0, 0, 0, 0, 5, 4, 0},
  };
  nnt_rng r;
  nnt_rng_seed(&r, 35);
  int avx512 = cpu_runs(NNT_BLAS_AVX512);
  for (size_t ci = 0; ci < NNT_ARRAY_LEN(sub); ci++) {
    const dcase *d = &sub[ci];
    nnt_conv_geom g = geom(d);
    assert_true(nnt_conv_sub_dw_take(&g, d->filters));
    size_t plane = (size_t)g.oh * g.ow, hw = (size_t)d->h * d->w, nw = d->filters * d->c;
    float *x = rnd(&r, d->n * d->c * hw), *dy = rnd(&r, d->n * d->filters * plane);
    float *dw = malloc(nw * sizeof *dw), *dw2 = malloc(nw * sizeof *dw2);
    assert_int_equal(nnt_cpu_conv_sub_dw(NNT_BLAS_AVX2, &g, d->n, d->filters, x, dy, dw),
                     NNT_ERR_INVAL);
    if (!avx512) {
      free(x), free(dy), free(dw), free(dw2);
      continue;
    }
    for (size_t q = 0; q < nw; q++)
      dw[q] = NAN;
    assert_int_equal(k->conv_bwd_w(k, &g, d->n, d->filters, x, dy, dw), NNT_OK);
    for (size_t f = 0; f < d->filters; f++)
      for (size_t c = 0; c < d->c; c++) {
        double want = 0, size = 0;
        for (size_t i = 0; i < d->n; i++)
          for (size_t p = 0; p < plane; p++) {
            size_t iy = p / g.ow * g.sh, ix = p % g.ow * g.sw;
            double t = (double)dy[(i * d->filters + f) * plane + p] *
                       x[(i * d->c + c) * hw + iy * d->w + ix];
            want += t, size += fabs(t);
          }
        float got = dw[f * d->c + c];
        if (!(fabs(got - want) <= 1e-5 * (size > 1 ? size : 1)))
          fail_msg("case %zu: dw[%zu][%zu] %g, want %g", ci, f, c, (double)got, want);
      }
    tu_two_threads();
    assert_int_equal(k->conv_bwd_w(k, &g, d->n, d->filters, x, dy, dw2), NNT_OK);
    tu_one_thread();
    assert_memory_equal(dw, dw2, nw * sizeof *dw);
    free(x), free(dy), free(dw), free(dw2);
  }
  /* no image: zeros; padding or a wider window: not taken */
  nnt_conv_geom g = geom(&sub[0]); /* 13 channels: a dW of 1 x 13 */
  float v[16], dw0[16];
  for (unsigned c = 0; c < 16; c++)
    v[c] = 0.5f, dw0[c] = NAN;
  if (avx512) {
    assert_int_equal(k->conv_bwd_w(k, &g, 0, 1, v, v, dw0), NNT_OK);
    for (unsigned c = 0; c < 16; c++)
      assert_true(c < g.c ? dw0[c] == 0.0f : isnan(dw0[c]));
  }
  static const dcase no[] = {
      {4, 16, 16, 1, 1, 2, 2, 1, 1, 1, 1, 1, 1, 3, 1, 0},
      {4, 16, 16, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, 3, 1, 0},
      {4, 16, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 3, 1, 0},
  };
  for (size_t ci = 0; ci < NNT_ARRAY_LEN(no); ci++) {
    nnt_conv_geom gn = geom(&no[ci]);
    assert_false(nnt_conv_sub_dw_take(&gn, no[ci].filters));
    assert_int_equal(nnt_cpu_conv_sub_dw(NNT_BLAS_AVX512, &gn, 1, 3, v, v, v), NNT_ERR_INVAL);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_against_naive),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_bwd_against_naive),
      cmocka_unit_test(test_bwd_refusals),
      cmocka_unit_test(test_rows_against_naive),
      cmocka_unit_test(test_rows_dw),
      cmocka_unit_test(test_rows_or_direct_same_bits),
      cmocka_unit_test(test_sub_paths_same_bits),
      cmocka_unit_test(test_sub_dx),
      cmocka_unit_test(test_sub_dw),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
