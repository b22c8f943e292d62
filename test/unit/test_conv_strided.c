/* The CPU's strided forward (cpu_conv_str.c: a stride of 2, a window 3
 * wide), which conv_fwd takes on an AVX-512 CPU: against a naive
 * double-precision convolution over ResNet's downsampling shapes and
 * others (a padding of 0, 1 or 2 columns at the left, a window 5 high,
 * rows a partial tile long, a last block of 16 filters, channels a
 * partial chunk, more images than a part's run, no bias); the same bits on
 * 1 and 2 threads and through conv_fwd; and what it refuses. Likewise
 * its derivative (conv_bwd_x) and weight gradient (conv_bwd_w). */
#include "test_util.h"

#include <math.h>
#include <stdlib.h>

#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/kernels.h"
#include "nntrainer/philox.h"

typedef struct scase {
  unsigned c, h, w, kh, pt, pb, pl, pr, filters, n, bias;
} scase;

static const scase CASES[] = {
    {64, 32, 32, 3, 1, 1, 1, 1, 32, 2, 1},   /* res2a_c1, fewer filters and images */
    {128, 16, 16, 3, 1, 1, 1, 1, 48, 17, 0}, /* res3a_c1: a row one tile; 32 + 16 filters */
    {20, 13, 22, 5, 2, 2, 1, 0, 16, 3, 1},   /* 5 high, rows 8 + 3, a chunk of 4 channels */
    {16, 17, 17, 3, 0, 0, 0, 0, 32, 2, 1},   /* no padding */
    {16, 12, 20, 3, 1, 0, 2, 0, 16, 1, 1},   /* a row's first position skips two taps */
};

static nnt_conv_geom geom(const scase *d) {
  nnt_conv_geom g = {.c = d->c, .h = d->h, .w = d->w, .kh = d->kh, .kw = 3, .sh = 2, .sw = 2,
                     .dh = 1, .dw = 1, .pt = d->pt, .pb = d->pb, .pl = d->pl, .pr = d->pr};
  g.oh = (d->h + d->pt + d->pb - d->kh) / 2 + 1;
  g.ow = (d->w + d->pl + d->pr - 3) / 2 + 1;
  return g;
}

/* y against a double-precision convolution: within 1e-5 of the sum of
 * the terms' sizes. */
static void check_naive(const scase *d, const nnt_conv_geom *g, const float *w, const float *b,
                        const float *x, const float *y, size_t ci) {
  size_t patch = (size_t)d->c * d->kh * 3, plane = (size_t)g->oh * g->ow;
  size_t in = (size_t)d->c * d->h * d->w;
  for (size_t i = 0; i < d->n; i++)
    for (size_t f = 0; f < d->filters; f++)
      for (unsigned oy = 0; oy < g->oh; oy++)
        for (unsigned ox = 0; ox < g->ow; ox++) {
          double s = d->bias ? b[f] : 0.0, mag = fabs(s);
          for (unsigned c = 0; c < d->c; c++)
            for (unsigned a = 0; a < d->kh; a++)
              for (unsigned q = 0; q < 3; q++) {
                long iy = 2 * (long)oy - d->pt + a, ix = 2 * (long)ox - d->pl + q;
                if (iy < 0 || iy >= (long)d->h || ix < 0 || ix >= (long)d->w)
                  continue;
                double t = (double)w[f * patch + (c * d->kh + a) * 3 + q] *
                           x[i * in + (c * d->h + iy) * d->w + ix];
                s += t;
                mag += fabs(t);
              }
          float got = y[(i * d->filters + f) * plane + oy * g->ow + ox];
          if (fabs(got - s) > 1e-5 * (mag > 1 ? mag : 1))
            fail_msg("case %zu: image %zu filter %zu (%u, %u): %g, want %g", ci, i, f, oy, ox,
                     got, s);
        }
}

static int have_avx512(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") != 0;
#else
  return 0;
#endif
}

static void test_against_naive(void **state) {
  (void)state;
  const nnt_kernels *k = nnt_kernels_cpu();
  nnt_rng r;
  nnt_rng_seed(&r, 11);
  assert_int_equal(nnt_conv_str_runs(), have_avx512());
  unsigned split = 0;
  for (size_t ci = 0; ci < NNT_ARRAY_LEN(CASES); ci++) {
    const scase *d = &CASES[ci];
    nnt_conv_geom g = geom(d);
    assert_true(nnt_conv_str_take(&g, d->filters));
    size_t patch = (size_t)d->c * d->kh * 3, plane = (size_t)g.oh * g.ow;
    size_t in = (size_t)d->c * d->h * d->w, out = d->n * d->filters * plane;
    float *w = malloc(d->filters * patch * sizeof *w), *b = malloc(d->filters * sizeof *b);
    float *x = malloc(d->n * in * sizeof *x), *y = malloc(out * sizeof *y);
    float *y2 = malloc(out * sizeof *y2);
    tu_fill_uniform(&r, w, d->filters * patch, -1.0f, 1.0f);
    tu_fill_uniform(&r, b, d->filters, -1.0f, 1.0f);
    tu_fill_uniform(&r, x, d->n * in, -1.0f, 1.0f);
    const float *bias = d->bias ? b : NULL;
    /* the AVX2 and plain paths do not have it */
    assert_int_equal(nnt_cpu_conv_str_fwd(NNT_BLAS_AVX2, &g, d->n, d->filters, w, bias, x, y),
                     NNT_ERR_INVAL);
    if (!have_avx512()) {
      assert_int_equal(nnt_cpu_conv_str_fwd(NNT_BLAS_AVX512, &g, d->n, d->filters, w, bias, x,
                                            y),
                       NNT_ERR_INVAL);
      free(w), free(b), free(x), free(y), free(y2);
      continue;
    }
    assert_int_equal(nnt_cpu_conv_str_fwd(NNT_BLAS_AVX512, &g, d->n, d->filters, w, bias, x, y),
                     NNT_OK);
    check_naive(d, &g, w, b, x, y, ci);
    /* conv_fwd takes it: the same bits */
    assert_int_equal(k->conv_fwd(k, &g, d->n, d->filters, w, bias, x, y2), NNT_OK);
    assert_memory_equal(y, y2, out * sizeof *y);
    /* and on two threads (parts are whole outputs) */
    tu_two_threads();
    assert_int_equal(k->conv_fwd(k, &g, d->n, d->filters, w, bias, x, y2), NNT_OK);
    split += tu_one_thread() > 0;
    assert_memory_equal(y, y2, out * sizeof *y);
    free(w), free(b), free(x), free(y), free(y2);
  }
  if (have_avx512())
    assert_true(split >= 1);
  else
    print_message("no AVX-512 here: the strided kernel's refusals checked, not its sums\n");
}

static void test_refusals(void **state) {
  (void)state;
  const scase ok = {16, 16, 16, 3, 1, 1, 1, 1, 16, 1, 1};
  nnt_conv_geom g = geom(&ok);
  assert_true(nnt_conv_str_take(&g, 16));
  assert_false(nnt_conv_str_take(NULL, 16));
  assert_false(nnt_conv_str_take(&g, 0));
  assert_false(nnt_conv_str_take(&g, 24)); /* filters not a multiple of 16 */
  nnt_conv_geom t = g;
  t.c = 8; /* fewer than 16 channels: the direct kernel or im2col */
  assert_false(nnt_conv_str_take(&t, 16));
  t = g;
  t.cs = 32; /* a block of channels */
  assert_false(nnt_conv_str_take(&t, 16));
  t = g;
  t.sh = t.sw = 1;
  assert_false(nnt_conv_str_take(&t, 16));
  t = g;
  t.dw = 2;
  assert_false(nnt_conv_str_take(&t, 16));
  scase d = ok;
  d.w = 12; /* rows of 6 positions: less than a tile */
  g = geom(&d);
  assert_false(nnt_conv_str_take(&g, 16));
  d = ok;
  d.pl = 3; /* the first two positions reach the padding */
  g = geom(&d);
  assert_false(nnt_conv_str_take(&g, 16));
  d = ok;
  d.w = 17; /* the last position's window leaves the row at the right */
  g = geom(&d);
  assert_int_equal(g.ow, 9);
  assert_false(nnt_conv_str_take(&g, 16));
  d = ok;
  d.h = d.w = 48; /* 24 x 24 positions: more than NNT_CONV_STR_MAX_PLANE */
  g = geom(&d);
  assert_true((size_t)g.oh * g.ow > NNT_CONV_STR_MAX_PLANE);
  assert_false(nnt_conv_str_take(&g, 16));
  float v[4] = {0};
  assert_int_equal(nnt_cpu_conv_str_fwd(NNT_BLAS_AVX512, &g, 1, 16, v, NULL, v, v),
                   NNT_ERR_INVAL);
}

/* The derivative (nnt_cpu_conv_str_dx, conv_bwd_x's choice on AVX-512):
 * ResNet's res3a_c1 shape with fewer filters; a window 5 high with blocks
 * of 32 + 16 channels, filters a chunk and a part (64 + 16) and more
 * images than a part's run; no padding (a row's last column of one parity
 * reaches past dY, an odd plane); two columns of padding; the largest
 * plane; an odd plane with one block of 16 channels (the turn into dX's
 * layout in halves). Blocks of 32 channels turn by 16 x 16 squares where
 * each half of the plane is whole squares (the first and the fifth case)
 * and one value at a time elsewhere (the fourth: 240 positions). */
static const scase DCASES[] = {
    {128, 16, 16, 3, 1, 1, 1, 1, 40, 3, 0},
    {48, 11, 22, 5, 2, 2, 1, 0, 80, 17, 0},
    {16, 9, 17, 3, 0, 0, 0, 0, 16, 2, 0},
    {32, 12, 20, 3, 1, 0, 2, 0, 16, 1, 0},
    {32, 32, 32, 3, 1, 1, 1, 1, 64, 2, 0}, /* res2a_c1's plane, 1,024 positions */
    {16, 31, 31, 3, 1, 1, 1, 1, 16, 1, 0}, /* an odd plane (961), a block of 16 */
};

static void check_dx(const scase *d, const nnt_conv_geom *g, const float *w, const float *dy,
                     const float *dx, size_t ci) {
  size_t patch = (size_t)d->c * d->kh * 3, plane = (size_t)g->oh * g->ow;
  for (size_t i = 0; i < d->n; i++)
    for (unsigned c = 0; c < d->c; c++)
      for (unsigned iy = 0; iy < d->h; iy++)
        for (unsigned ix = 0; ix < d->w; ix++) {
          double s = 0.0, mag = 0.0;
          for (size_t f = 0; f < d->filters; f++)
            for (unsigned a = 0; a < d->kh; a++)
              for (unsigned q = 0; q < 3; q++) {
                long ry = (long)iy + d->pt - a, rx = (long)ix + d->pl - q;
                if (ry < 0 || rx < 0 || ry % 2 || rx % 2 || ry / 2 >= g->oh || rx / 2 >= g->ow)
                  continue;
                double t = (double)w[f * patch + (c * d->kh + a) * 3 + q] *
                           dy[(i * d->filters + f) * plane + (ry / 2) * g->ow + rx / 2];
                s += t;
                mag += fabs(t);
              }
          float got = dx[((i * d->c + c) * d->h + iy) * d->w + ix];
          if (fabs(got - s) > 1e-5 * (mag > 1 ? mag : 1))
            fail_msg("case %zu: image %zu channel %u (%u, %u): %g, want %g", ci, i, c, iy, ix,
                     got, s);
        }
}

static void test_dx_against_naive(void **state) {
  (void)state;
  const nnt_kernels *k = nnt_kernels_cpu();
  nnt_rng r;
  nnt_rng_seed(&r, 13);
  unsigned split = 0;
  for (size_t ci = 0; ci < NNT_ARRAY_LEN(DCASES); ci++) {
    const scase *d = &DCASES[ci];
    nnt_conv_geom g = geom(d);
    assert_true(nnt_conv_str_dx_take(&g, d->filters));
    size_t patch = (size_t)d->c * d->kh * 3, plane = (size_t)g.oh * g.ow;
    size_t in = d->n * d->c * d->h * d->w, out = d->n * d->filters * plane;
    float *w = malloc(d->filters * patch * sizeof *w), *dy = malloc(out * sizeof *dy);
    float *dx = malloc(in * sizeof *dx), *dx2 = malloc(in * sizeof *dx2);
    tu_fill_uniform(&r, w, d->filters * patch, -1.0f, 1.0f);
    tu_fill_uniform(&r, dy, out, -1.0f, 1.0f);
    tu_fill_uniform(&r, dx, in, 5.0f, 6.0f); /* written over, every value */
    assert_int_equal(nnt_cpu_conv_str_dx(NNT_BLAS_AVX2, &g, d->n, d->filters, w, dy, dx),
                     NNT_ERR_INVAL);
    if (!have_avx512()) {
      assert_int_equal(nnt_cpu_conv_str_dx(NNT_BLAS_AVX512, &g, d->n, d->filters, w, dy, dx),
                       NNT_ERR_INVAL);
      free(w), free(dy), free(dx), free(dx2);
      continue;
    }
    assert_int_equal(nnt_cpu_conv_str_dx(NNT_BLAS_AVX512, &g, d->n, d->filters, w, dy, dx),
                     NNT_OK);
    check_dx(d, &g, w, dy, dx, ci);
    assert_int_equal(k->conv_bwd_x(k, &g, d->n, d->filters, w, dy, dx2), NNT_OK);
    assert_memory_equal(dx, dx2, in * sizeof *dx);
    tu_two_threads();
    assert_int_equal(k->conv_bwd_x(k, &g, d->n, d->filters, w, dy, dx2), NNT_OK);
    split += tu_one_thread() > 0;
    assert_memory_equal(dx, dx2, in * sizeof *dx);
    free(w), free(dy), free(dx), free(dx2);
  }
  if (have_avx512())
    assert_true(split >= 1);
}

static void test_dx_refusals(void **state) {
  (void)state;
  const scase ok = {16, 16, 16, 3, 1, 1, 1, 1, 16, 1, 0};
  nnt_conv_geom g = geom(&ok);
  assert_true(nnt_conv_str_dx_take(&g, 16));
  assert_false(nnt_conv_str_dx_take(NULL, 16));
  assert_false(nnt_conv_str_dx_take(&g, 8)); /* fewer than 16 filters */
  nnt_conv_geom t = g;
  t.c = 24; /* channels not a multiple of 16 */
  assert_false(nnt_conv_str_dx_take(&t, 16));
  t = g;
  t.cs = 32;
  assert_false(nnt_conv_str_dx_take(&t, 16));
  t = g;
  t.sh = t.sw = 1;
  assert_false(nnt_conv_str_dx_take(&t, 16));
  scase d = ok;
  d.h = d.w = 8; /* rows of 8 columns: 4 of each parity, less than a tile */
  g = geom(&d);
  assert_false(nnt_conv_str_dx_take(&g, 16));
  d = ok;
  d.h = d.w = 48; /* 2,304 input positions: more than NNT_CONV_STR_MAX_DX_PLANE */
  g = geom(&d);
  assert_false(nnt_conv_str_dx_take(&g, 16));
  t = geom(&ok);
  t.dh = 2;
  assert_false(nnt_conv_str_dx_take(&t, 16));
  float v[4] = {0};
  assert_int_equal(nnt_cpu_conv_str_dx(NNT_BLAS_AVX512, &g, 1, 16, v, v, v), NNT_ERR_INVAL);
}

/* The weight gradient (nnt_cpu_conv_str_dw, conv_bwd_w's choice on
 * AVX-512): res2a_c1's plane with channels a run and a part (32 + 8) and
 * filters 32 + 16; res3a_c1's plane; uneven padding, odd sizes; none. */
static const scase WCASES[] = {
    {40, 32, 32, 3, 1, 1, 1, 1, 48, 3, 0},
    {32, 16, 16, 3, 1, 1, 1, 1, 32, 2, 0},
    {16, 13, 22, 3, 1, 1, 1, 0, 16, 2, 0},
    {16, 17, 17, 3, 0, 0, 0, 0, 16, 1, 0},
};

static void check_dw(const scase *d, const nnt_conv_geom *g, const float *x, const float *dy,
                     const float *dw, size_t ci) {
  size_t patch = (size_t)d->c * 9, plane = (size_t)g->oh * g->ow;
  size_t in = (size_t)d->c * d->h * d->w;
  for (size_t f = 0; f < d->filters; f++)
    for (unsigned c = 0; c < d->c; c++)
      for (unsigned q = 0; q < 9; q++) {
        double s = 0.0, mag = 0.0;
        for (size_t i = 0; i < d->n; i++)
          for (unsigned oy = 0; oy < g->oh; oy++)
            for (unsigned ox = 0; ox < g->ow; ox++) {
              long iy = 2 * (long)oy - d->pt + q / 3, ix = 2 * (long)ox - d->pl + q % 3;
              if (iy < 0 || iy >= (long)d->h || ix < 0 || ix >= (long)d->w)
                continue;
              double t = (double)dy[(i * d->filters + f) * plane + oy * g->ow + ox] *
                         x[i * in + (c * d->h + iy) * d->w + ix];
              s += t;
              mag += fabs(t);
            }
        float got = dw[f * patch + c * 9 + q];
        if (fabs(got - s) > 1e-5 * (mag > 1 ? mag : 1))
          fail_msg("case %zu: filter %zu channel %u tap %u: %g, want %g", ci, f, c, q, got, s);
      }
}

static void test_dw_against_naive(void **state) {
  (void)state;
  const nnt_kernels *k = nnt_kernels_cpu();
  nnt_rng r;
  nnt_rng_seed(&r, 17);
  unsigned split = 0;
  for (size_t ci = 0; ci < NNT_ARRAY_LEN(WCASES); ci++) {
    const scase *d = &WCASES[ci];
    nnt_conv_geom g = geom(d);
    assert_true(nnt_conv_str_dw_take(&g, d->filters));
    size_t wl = d->filters * (size_t)d->c * 9, plane = (size_t)g.oh * g.ow;
    size_t in = d->n * d->c * d->h * d->w, out = d->n * d->filters * plane;
    float *x = malloc(in * sizeof *x), *dy = malloc(out * sizeof *dy);
    float *dw = malloc(wl * sizeof *dw), *dw2 = malloc(wl * sizeof *dw2);
    tu_fill_uniform(&r, x, in, -1.0f, 1.0f);
    tu_fill_uniform(&r, dy, out, -1.0f, 1.0f);
    tu_fill_uniform(&r, dw, wl, 5.0f, 6.0f); /* written over, every value */
    assert_int_equal(nnt_cpu_conv_str_dw(NNT_BLAS_AVX2, &g, d->n, d->filters, x, dy, dw),
                     NNT_ERR_INVAL);
    if (!have_avx512()) {
      assert_int_equal(nnt_cpu_conv_str_dw(NNT_BLAS_AVX512, &g, d->n, d->filters, x, dy, dw),
                       NNT_ERR_INVAL);
      free(x), free(dy), free(dw), free(dw2);
      continue;
    }
    assert_int_equal(nnt_cpu_conv_str_dw(NNT_BLAS_AVX512, &g, d->n, d->filters, x, dy, dw),
                     NNT_OK);
    check_dw(d, &g, x, dy, dw, ci);
    assert_int_equal(k->conv_bwd_w(k, &g, d->n, d->filters, x, dy, dw2), NNT_OK);
    assert_memory_equal(dw, dw2, wl * sizeof *dw);
    tu_two_threads();
    assert_int_equal(k->conv_bwd_w(k, &g, d->n, d->filters, x, dy, dw2), NNT_OK);
    split += tu_one_thread() > 0;
    assert_memory_equal(dw, dw2, wl * sizeof *dw);
    free(x), free(dy), free(dw), free(dw2);
  }
  if (have_avx512())
    assert_true(split >= 1);
}

static void test_dw_refusals(void **state) {
  (void)state;
  const scase ok = {16, 16, 16, 3, 1, 1, 1, 1, 16, 1, 0};
  nnt_conv_geom g = geom(&ok);
  assert_true(nnt_conv_str_dw_take(&g, 16));
  assert_false(nnt_conv_str_dw_take(NULL, 16));
  assert_false(nnt_conv_str_dw_take(&g, 24)); /* filters not a multiple of 16 */
  nnt_conv_geom t = g;
  t.c = 8;
  assert_false(nnt_conv_str_dw_take(&t, 16));
  t = g;
  t.kh = 5; /* a window 3 high only */
  assert_false(nnt_conv_str_dw_take(&t, 16));
  t = g;
  t.sh = t.sw = 1;
  assert_false(nnt_conv_str_dw_take(&t, 16));
  scase d = ok;
  d.h = d.w = 8; /* rows of 4 positions */
  g = geom(&d);
  assert_false(nnt_conv_str_dw_take(&g, 16));
  d = ok;
  d.h = d.w = 48; /* 576 positions: more than NNT_CONV_STR_MAX_DW_PLANE */
  g = geom(&d);
  assert_false(nnt_conv_str_dw_take(&g, 16));
  float v[4] = {0};
  assert_int_equal(nnt_cpu_conv_str_dw(NNT_BLAS_AVX512, &g, 1, 16, v, v, v), NNT_ERR_INVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_against_naive),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_dx_against_naive),
      cmocka_unit_test(test_dx_refusals),
      cmocka_unit_test(test_dw_against_naive),
      cmocka_unit_test(test_dw_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
