/* The CPU's direct convolution forward (conv_fwd) against a naive
 * double-precision convolution, over geometries with padding, stride,
 * dilation, a partial block of filters, more than one block, a window
 * that leaves the input and no bias; the same bits on 1 and 2 threads; and
 * its refusals. */
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
    nnt_err e = {0};
    assert_int_equal(nnt_cpu_set_threads(2, &e), NNT_OK);
    assert_int_equal(k->conv_fwd(k, &g, d->n, d->filters, w, d->bias ? b : NULL, x, y2), NNT_OK);
    assert_int_equal(nnt_cpu_set_threads(1, &e), NNT_OK);
    assert_memory_equal(y, y2, d->n * d->filters * plane * sizeof *y);
    free(w), free(b), free(x), free(y), free(y2);
  }
}

static void test_refusals(void **state) {
  (void)state;
  const nnt_kernels *k = nnt_kernels_cpu();
  float v[4] = {0};
  dcase d = {23, 8, 8, 5, 5, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0}; /* patch 575 > 512 */
  nnt_conv_geom g = geom(&d);
  assert_int_equal(k->conv_fwd(k, &g, 1, 1, v, NULL, v, v), NNT_ERR_INVAL);
  dcase wide = {1, 1, 300, 1, 3, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0}; /* ow 298 > 256 */
  g = geom(&wide);
  assert_int_equal(k->conv_fwd(k, &g, 1, 1, v, NULL, v, v), NNT_ERR_INVAL);
  dcase one = {2, 4, 4, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0};
  g = geom(&one);
  g.cs = 3; /* a block of channels: not taken */
  assert_int_equal(k->conv_fwd(k, &g, 1, 1, v, NULL, v, v), NNT_ERR_INVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_against_naive),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
