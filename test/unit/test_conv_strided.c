/* The CPU's strided forward (cpu_conv_str.c: a stride of 2, a window 3
 * wide), which conv_fwd takes on an AVX-512 CPU: against a naive
 * double-precision convolution over ResNet's downsampling shapes and
 * others (a padding of 0, 1 or 2 columns at the left, a window 5 high,
 * rows a partial tile long, a last block of 16 filters, channels a
 * partial chunk, more images than a part's run, no bias); the same bits on
 * 1 and 2 threads and through conv_fwd; and what it refuses. */
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_against_naive),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
