/* The CPU's Winograd F(2x2, 3x3) convolution (conv_wino) against a naive
 * double-precision convolution, forward and flipped (the derivative's
 * form), over odd and even sizes, padding 0, 1, 2 and uneven, 1 to 3
 * images, 1 to 17 channels, bias and none, with the least scratch it
 * takes (8 slices per pass, chunks of NNT_WINO_MIN_TILES tiles), with
 * 16 slices in such chunks and with all 16 slices and tiles in one pass;
 * the same bits on 1 and 2 threads; its refusals; and conv2d's forward and derivative through it
 * against the same layer on im2col and gemm (the table without
 * conv_wino), with the path checked to be taken; the weight gradient
 * (conv_wino_dw) the same ways (its largest scratch takes F(4x4, 3x3)
 * where that holds it); and F(4x4, 3x3) (cpu_winograd4.c) for both where
 * they take it. */
#include "fd_harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/kernels.h"
#include "nntrainer/philox.h"

typedef struct wcase {
  unsigned c, h, w, pt, pb, pl, pr, filters, n, bias;
} wcase;

static const wcase CASES[] = {
    {1, 4, 4, 0, 0, 0, 0, 1, 1, 0},     /* one tile */
    {3, 7, 9, 1, 1, 1, 1, 5, 2, 1},     /* odd output, same padding */
    {16, 8, 8, 1, 1, 1, 1, 16, 3, 1},   /* even, 3 images */
    {17, 5, 6, 0, 0, 0, 0, 9, 2, 1},    /* odd rows, even columns, no padding */
    {2, 6, 11, 2, 0, 1, 2, 3, 1, 0},    /* uneven padding, 2 on a side */
    {5, 13, 3, 1, 0, 0, 1, 17, 3, 1},   /* narrow */
    {4, 20, 21, 1, 1, 1, 1, 6, 2, 0},   /* more tiles than a chunk */
    {8, 3, 3, 2, 2, 2, 2, 4, 2, 1},     /* derivative-like padding 2 */
};

static nnt_conv_geom geom(const wcase *d) {
  nnt_conv_geom g = {.c = d->c, .h = d->h, .w = d->w, .kh = 3, .kw = 3, .sh = 1, .sw = 1,
                     .dh = 1, .dw = 1, .pt = d->pt, .pb = d->pb, .pl = d->pl, .pr = d->pr};
  g.oh = d->h + d->pt + d->pb - 2;
  g.ow = d->w + d->pl + d->pr - 2;
  return g;
}

static float *rnd(nnt_rng *r, size_t n) {
  float *x = malloc((n ? n : 1) * sizeof *x);
  tu_fill_uniform(r, x, n, -1.0f, 1.0f);
  return x;
}

/* The bound: |y - exact| <= 1e-5 * max(1, sum of |terms|). Winograd's
 * transforms add and subtract up to 4 input and 9 filter values before the
 * products (|V| <= 4 max|x|, |U| <= 2.25 max|w|) and 9 products' sums
 * after, so its rounding error is a few times im2col's (up to 2.2e-7 of the
 * terms' sum on these cases, printed by the test); 1e-5 leaves a margin of
 * 45 over that and still catches a wrong tap, tile or
 * edge (an error of a whole term). */
#define TOL 1e-5
/* F(4x4, 3x3)'s bound (see test_f4_against_naive). */
#define TOL4 2e-5

/* A case's random weights, bias and input, and two outputs of ylen. */
typedef struct wbufs {
  float *w, *b, *x, *y, *y2;
  size_t ylen;
} wbufs;
static wbufs case_bufs(nnt_rng *r, const wcase *d, const nnt_conv_geom *g) {
  size_t in = (size_t)d->c * d->h * d->w;
  wbufs u = {.ylen = (size_t)d->n * d->filters * g->oh * g->ow};
  u.w = rnd(r, (size_t)d->filters * d->c * 9), u.b = rnd(r, d->filters);
  u.x = rnd(r, d->n * in);
  u.y = malloc(u.ylen * sizeof *u.y), u.y2 = malloc(u.ylen * sizeof *u.y2);
  return u;
}

/* y against a double-precision convolution; flip: W[f][ch] is w[ch][f]
 * turned by 180 degrees. */
static double check_naive_tol(const wcase *d, const nnt_conv_geom *g, int flip, const float *w,
                              const float *b, const float *x, const float *y, const char *what,
                              double tol) {
  size_t plane = (size_t)g->oh * g->ow, in = (size_t)d->c * d->h * d->w;
  double worst = 0;
  for (size_t i = 0; i < d->n; i++)
    for (size_t f = 0; f < d->filters; f++)
      for (unsigned oy = 0; oy < g->oh; oy++)
        for (unsigned ox = 0; ox < g->ow; ox++) {
          double s = d->bias ? b[f] : 0.0, mag = fabs(s);
          for (unsigned c = 0; c < d->c; c++)
            for (unsigned a = 0; a < 3; a++)
              for (unsigned q = 0; q < 3; q++) {
                long iy = (long)oy - d->pt + a, ix = (long)ox - d->pl + q;
                if (iy < 0 || iy >= (long)d->h || ix < 0 || ix >= (long)d->w)
                  continue;
                float wv = flip ? w[(c * d->filters + f) * 9 + (2 - a) * 3 + (2 - q)]
                                : w[(f * d->c + c) * 9 + a * 3 + q];
                double t = (double)wv * x[i * in + (c * d->h + iy) * d->w + ix];
                s += t;
                mag += fabs(t);
              }
          float got = y[(i * d->filters + f) * plane + oy * g->ow + ox];
          double err = fabs(got - s) / (mag > 1 ? mag : 1);
          if (err > worst)
            worst = err;
          if (err > tol)
            fail_msg("%s c%u h%u w%u f%u n%u flip %d: image %zu filter %zu (%u, %u): %g, "
                     "want %g",
                     what, d->c, d->h, d->w, d->filters, d->n, flip, i, f, oy, ox, got, s);
        }
  return worst;
}

static double check_naive(const wcase *d, const nnt_conv_geom *g, int flip, const float *w,
                          const float *b, const float *x, const float *y, const char *what) {
  return check_naive_tol(d, g, flip, w, b, x, y, what, TOL);
}

/* conv_wino's y (made on one thread) again on two threads, then on the
 * transforms' plain C and their AVX2 code where the CPU has it: the same
 * bits each time (y2 is overwritten). */
static void same_bits(const nnt_kernels *k, const wcase *d, const nnt_conv_geom *g, int flip,
                      const float *w, const float *b, const float *x, const float *y,
                      float *y2, float *s, size_t len) {
  size_t ylen = (size_t)d->n * d->filters * g->oh * g->ow;
  tu_two_threads();
  assert_int_equal(
      k->conv_wino(k, g, d->n, d->filters, flip, w, d->bias ? b : NULL, x, y2, s, len), NNT_OK);
  assert_true(tu_one_thread() > 0);
  assert_memory_equal(y, y2, ylen * sizeof *y);
  for (int path = NNT_BLAS_SSE; path <= NNT_BLAS_AVX2; path += NNT_BLAS_AVX2) {
    int was = nnt_cpu_vec_path(path);
    memset(y2, 0, ylen * sizeof *y2);
    assert_int_equal(
        k->conv_wino(k, g, d->n, d->filters, flip, w, d->bias ? b : NULL, x, y2, s, len),
        NNT_OK);
    nnt_cpu_vec_path(was);
    assert_memory_equal(y, y2, ylen * sizeof *y);
  }
}

static void test_against_naive(void **state) {
  (void)state;
  const nnt_kernels *k = nnt_kernels_cpu();
  nnt_rng r;
  nnt_rng_seed(&r, 11);
  double worst = 0;
  unsigned runs = 0, f4 = 0;
  for (size_t ci = 0; ci < NNT_ARRAY_LEN(CASES); ci++) {
    const wcase *d = &CASES[ci];
    nnt_conv_geom g = geom(d);
    size_t tiles = (size_t)d->n * ((g.oh + 1) / 2) * ((g.ow + 1) / 2);
    wbufs u = case_bufs(&r, d, &g);
    float *w = u.w, *b = u.b, *x = u.x, *y = u.y, *y2 = u.y2;
    size_t ylen = u.ylen;
    /* the fewest slices (4 a pass: four passes) with one and two chunks
     * at once, the least conv2d plans (8 slices a pass, so two passes,
     * chunks of up to 64 tiles), 16 slices in such chunks, 16 with every
     * tile, and room for two chunks of every tile at once */
    size_t least = nnt_wino_min_scratch(d->c, d->filters, tiles);
    size_t lens[] = {nnt_wino_scratch(NNT_WINO_FEWEST_SLICES, 1, d->c, d->filters, tiles),
                     nnt_wino_scratch(NNT_WINO_FEWEST_SLICES, 2, d->c, d->filters, tiles),
                     least, 2 * least + 16 * (d->c + d->filters),
                     16 * (d->c * d->filters + (d->c + d->filters) * tiles),
                     16 * (d->c * d->filters + 2 * (d->c + d->filters) * tiles)};
    for (int flip = 0; flip < 2; flip++)
      for (size_t li = 0; li < NNT_ARRAY_LEN(lens); li++) {
        float *s = malloc(lens[li] * sizeof *s);
        tu_fill_uniform(&r, y, ylen, 100.0f, 200.0f); /* written whole */
        assert_int_equal(k->conv_wino(k, &g, d->n, d->filters, flip, w, d->bias ? b : NULL,
                                      x, y, s, lens[li]),
                         NNT_OK);
        /* the largest scratch may take F(4x4, 3x3) (test_f4_whole_images) */
        if (nnt_cpu_wino4_takes(&g, d->filters, lens[li])) {
          check_naive_tol(d, &g, flip, w, b, x, y, "conv_wino F(4, 3)", TOL4);
          f4++;
        } else {
          double e = check_naive(d, &g, flip, w, b, x, y, "conv_wino");
          worst = e > worst ? e : worst;
        }
        same_bits(k, d, &g, flip, w, b, x, y, y2, s, lens[li]);
        free(s);
        runs++;
      }
    free(w), free(b), free(x), free(y), free(y2);
  }
  assert_int_equal(runs, NNT_ARRAY_LEN(CASES) * 12);
  print_message("largest error / terms' magnitude: %.3g (F(4, 3) in %u runs)\n", worst, f4);
}

/* nnt_wino_fb_blocks: the blocks it gives fit the scratch they were
 * given, are as few as fit and as even as they go: a scratch
 * of exactly nnt_wino_fb_scratch(c, t, fb) gives blocks of fb for an f
 * that fb divides, one float less narrower ones, and less than the
 * least block none. */
static void test_fb_blocks(void **state) {
  (void)state;
  static const size_t shapes[][3] = {{512, 512, 128}, {256, 200, 64}, {24, 200, 3}};
  for (size_t si = 0; si < NNT_ARRAY_LEN(shapes); si++) {
    size_t c = shapes[si][0], f = shapes[si][1], t = shapes[si][2], fb = 0, nb = 0;
    for (size_t want = NNT_WINO_FB_MIN; want <= f; want += 8) {
      size_t len = nnt_wino_fb_scratch(c, t, want);
      assert_true(nnt_wino_fb_blocks(c, f, t, len, &fb, &nb));
      assert_true(fb <= want && nb == (f + want - 1) / want);
      assert_true(nb * fb >= f && (nb - 1) * fb < f);
      assert_true(nnt_wino_fb_scratch(c, t, fb) <= len);
      if (f % want == 0)
        assert_int_equal(fb, want);
      if (want > NNT_WINO_FB_MIN && nnt_wino_fb_blocks(c, f, t, len - 1, &fb, &nb))
        assert_true(fb < want);
    }
    assert_false(nnt_wino_fb_blocks(c, f, t, nnt_wino_fb_scratch(c, t, NNT_WINO_FB_MIN) - 1,
                                    &fb, &nb));
  }
  size_t fb, nb; /* too many tiles, none */
  assert_false(nnt_wino_fb_blocks(8, 64, NNT_WINO_FB_MAX_TILES + 1, (size_t)1 << 30, &fb, &nb));
  assert_false(nnt_wino_fb_blocks(8, 64, 0, (size_t)1 << 30, &fb, &nb));
}

/* Filter blocks (cpu_winograd.c conv_wino_fblocks): scratch for the
 * input transform of every tile and U and M of 32 or 40 filters, less
 * than passes of the fewest slices take (so without the blocks the call
 * is refused), forward and flipped, against the naive sums; the same bits
 * on two threads and on each copy of the transforms. */
static void test_fblocks_against_naive(void **state) {
  (void)state;
  static const wcase FB[] = {
      {32, 4, 4, 1, 1, 1, 1, 256, 2, 1}, /* ResNet-18's stage 4, narrower */
      {24, 5, 3, 1, 0, 1, 1, 200, 3, 0}, /* odd sizes, uneven padding */
  };
  const nnt_kernels *k = nnt_kernels_cpu();
  nnt_rng r;
  nnt_rng_seed(&r, 19);
  unsigned runs = 0;
  for (size_t ci = 0; ci < NNT_ARRAY_LEN(FB); ci++) {
    const wcase *d = &FB[ci];
    nnt_conv_geom g = geom(d);
    size_t tiles = (size_t)d->n * ((g.oh + 1) / 2) * ((g.ow + 1) / 2);
    wbufs u = case_bufs(&r, d, &g);
    float *w = u.w, *b = u.b, *x = u.x, *y = u.y, *y2 = u.y2;
    size_t ylen = u.ylen;
    size_t fbs[] = {NNT_WINO_FB_MIN, 40};
    for (int flip = 0; flip < 2; flip++)
      for (size_t fi = 0; fi < NNT_ARRAY_LEN(fbs); fi++) {
        size_t len = nnt_wino_fb_scratch(d->c, tiles, fbs[fi]);
        assert_true(len < nnt_wino_scratch(NNT_WINO_FEWEST_SLICES, 1, d->c, d->filters, tiles));
        float *s = malloc(len * sizeof *s);
        tu_fill_uniform(&r, y, ylen, 100.0f, 200.0f); /* written whole */
        assert_int_equal(k->conv_wino(k, &g, d->n, d->filters, flip, w, d->bias ? b : NULL,
                                      x, y, s, len),
                         NNT_OK);
        check_naive(d, &g, flip, w, b, x, y, "conv_wino filter blocks");
        same_bits(k, d, &g, flip, w, b, x, y, y2, s, len);
        /* one float less than the least block: refused */
        assert_int_equal(k->conv_wino(k, &g, d->n, d->filters, flip, w, NULL, x, y2, s,
                                      nnt_wino_fb_scratch(d->c, tiles, NNT_WINO_FB_MIN) - 1),
                         NNT_ERR_INVAL);
        free(s);
        runs++;
      }
    free(w), free(b), free(x), free(y), free(y2);
  }
  assert_int_equal(runs, 8);
}

/* conv_wino_dw's dw against a double-precision sum over images and
 * positions of dY times the input under each tap. */
static double check_dw_tol(const wcase *d, const nnt_conv_geom *g, const float *dy,
                           const float *x, const float *dw, double tol) {
  size_t plane = (size_t)g->oh * g->ow, in = (size_t)d->c * d->h * d->w;
  double worst = 0;
  for (size_t f = 0; f < d->filters; f++)
    for (unsigned c = 0; c < d->c; c++)
      for (unsigned a = 0; a < 3; a++)
        for (unsigned q = 0; q < 3; q++) {
          double s = 0, mag = 0;
          for (size_t i = 0; i < d->n; i++)
            for (unsigned oy = 0; oy < g->oh; oy++)
              for (unsigned ox = 0; ox < g->ow; ox++) {
                long iy = (long)oy - d->pt + a, ix = (long)ox - d->pl + q;
                if (iy < 0 || iy >= (long)d->h || ix < 0 || ix >= (long)d->w)
                  continue;
                double t = (double)dy[(i * d->filters + f) * plane + oy * g->ow + ox] *
                           x[i * in + (c * d->h + iy) * d->w + ix];
                s += t;
                mag += fabs(t);
              }
          float got = dw[((f * d->c + c) * 3 + a) * 3 + q];
          double err = fabs(got - s) / (mag > 1 ? mag : 1);
          worst = err > worst ? err : worst;
          if (err > tol)
            fail_msg("conv_wino_dw c%u h%u w%u f%u n%u: filter %zu channel %u tap (%u, %u): "
                     "%g, want %g",
                     d->c, d->h, d->w, d->filters, d->n, f, c, a, q, got, s);
        }
  return worst;
}

static double check_dw(const wcase *d, const nnt_conv_geom *g, const float *dy, const float *x,
                       const float *dw) {
  return check_dw_tol(d, g, dy, x, dw, TOL);
}

static void test_dw_against_naive(void **state) {
  (void)state;
  const nnt_kernels *k = nnt_kernels_cpu();
  nnt_rng r;
  nnt_rng_seed(&r, 13);
  double worst = 0;
  unsigned runs = 0;
  for (size_t ci = 0; ci < NNT_ARRAY_LEN(CASES); ci++) {
    const wcase *d = &CASES[ci];
    nnt_conv_geom g = geom(d);
    size_t plane = (size_t)g.oh * g.ow, in = (size_t)d->c * d->h * d->w;
    size_t tiles = (size_t)d->n * ((g.oh + 1) / 2) * ((g.ow + 1) / 2);
    size_t wlen = (size_t)d->filters * d->c * 9;
    float *dy = rnd(&r, d->n * d->filters * plane), *x = rnd(&r, d->n * in);
    float *dw = malloc(wlen * sizeof *dw), *dw2 = malloc(wlen * sizeof *dw2);
    size_t least = nnt_wino_min_scratch(d->c, d->filters, tiles);
    size_t lens[] = {least, 2 * least + 16 * (d->c + d->filters),
                     16 * (d->c * d->filters + (d->c + d->filters) * tiles)};
    for (size_t li = 0; li < NNT_ARRAY_LEN(lens); li++) {
      float *s = malloc(lens[li] * sizeof *s);
      tu_fill_uniform(&r, dw, wlen, 100.0f, 200.0f); /* written, not added to */
      assert_int_equal(k->conv_wino_dw(k, &g, d->n, d->filters, dy, x, dw, s, lens[li]),
                       NNT_OK);
      double e = check_dw(d, &g, dy, x, dw);
      worst = e > worst ? e : worst;
      tu_two_threads();
      assert_int_equal(k->conv_wino_dw(k, &g, d->n, d->filters, dy, x, dw2, s, lens[li]),
                       NNT_OK);
      assert_true(tu_one_thread() > 0);
      assert_memory_equal(dw, dw2, wlen * sizeof *dw);
      for (int path = NNT_BLAS_SSE; path <= NNT_BLAS_AVX2; path += NNT_BLAS_AVX2) {
        int was = nnt_cpu_vec_path(path);
        memset(dw2, 0, wlen * sizeof *dw2);
        assert_int_equal(k->conv_wino_dw(k, &g, d->n, d->filters, dy, x, dw2, s, lens[li]),
                         NNT_OK);
        nnt_cpu_vec_path(was);
        assert_memory_equal(dw, dw2, wlen * sizeof *dw);
      }
      free(s);
      runs++;
    }
    free(dy), free(x), free(dw), free(dw2);
  }
  assert_int_equal(runs, NNT_ARRAY_LEN(CASES) * 3);
  print_message("dw: largest error / terms' magnitude: %.3g\n", worst);
}

/* With at least NNT_WINO_IMAGE_TILES tiles an image, one call over n
 * images gives the bits of one call per image (conv2d's forward relies on
 * it: its in-place forward calls per group), on one and on two threads,
 * for chunks of a whole image and of part of one, one region or two. */
static void test_batch_as_groups(void **state) {
  (void)state;
  const nnt_kernels *k = nnt_kernels_cpu();
  nnt_rng r;
  nnt_rng_seed(&r, 12);
  /* 24x24 (12x12 = 144 tiles an image) and 32x20 (16x10 = 160) */
  const wcase shapes[] = {{24, 24, 24, 1, 1, 1, 1, 24, 4, 1}, {26, 32, 20, 1, 1, 1, 1, 30, 3, 0}};
  for (size_t si = 0; si < NNT_ARRAY_LEN(shapes); si++) {
    const wcase *d = &shapes[si];
    nnt_conv_geom g = geom(d);
    size_t plane = (size_t)g.oh * g.ow, in = (size_t)d->c * d->h * d->w;
    size_t tpi = (size_t)((g.oh + 1) / 2) * ((g.ow + 1) / 2);
    assert_true(tpi >= NNT_WINO_IMAGE_TILES);
    size_t ylen = d->n * d->filters * plane, wlen = (size_t)d->filters * d->c * 9;
    float *w = rnd(&r, wlen), *b = rnd(&r, d->filters), *x = rnd(&r, d->n * in);
    float *y = malloc(ylen * sizeof *y), *y1 = malloc(ylen * sizeof *y1);
    /* chunks of part of an image (one region, two), of a whole one (two) */
    size_t cf = (size_t)d->c * d->filters, cpf = d->c + d->filters;
    size_t lens[] = {16 * (cf + cpf * 64), 16 * (cf + 2 * cpf * 64),
                     16 * (cf + 2 * cpf * tpi)};
    for (size_t li = 0; li < NNT_ARRAY_LEN(lens); li++)
      for (int threads = 1; threads <= 2; threads++) {
        float *sc = malloc(lens[li] * sizeof *sc);
        if (threads == 2)
          tu_two_threads();
        assert_int_equal(k->conv_wino(k, &g, d->n, d->filters, 0, w, d->bias ? b : NULL, x, y,
                                      sc, lens[li]),
                         NNT_OK);
        for (unsigned i = 0; i < d->n; i++)
          assert_int_equal(k->conv_wino(k, &g, 1, d->filters, 0, w, d->bias ? b : NULL,
                                        x + i * in, y1 + i * d->filters * plane, sc, lens[li]),
                           NNT_OK);
        if (threads == 2)
          assert_true(tu_one_thread() > 0);
        assert_memory_equal(y, y1, ylen * sizeof *y);
        free(sc);
      }
    free(w), free(b), free(x), free(y), free(y1);
  }
}

/* F(4x4, 3x3), which conv_wino takes where an image has at least
 * NNT_WINO4_IMAGE_TILES 4x4 tiles and the scratch holds its transforms
 * for one image (or NNT_WINO4_MAX_TILES tiles of one): against the naive
 * convolution, forward and flipped, odd sizes, uneven padding, bias and
 * none, an image larger than a chunk; the op's own result bitwise; the
 * same bits on two threads, per image as over the batch and on each copy
 * of its loops; and a scratch
 * one float short of it taking F(2x2, 3x3). Its transforms hold 4 and 8
 * (A^T) and 1/24 (G), so its rounding is larger than F(2, 3)'s: up to
 * 3.0e-6 of the terms' sum on these cases (printed), against a bound of
 * 2e-5, which a wrong tap or edge (a whole term) still exceeds. */

static void test_f4_against_naive(void **state) {
  (void)state;
  const nnt_kernels *k = nnt_kernels_cpu();
  nnt_rng r;
  nnt_rng_seed(&r, 13);
  const wcase shapes[] = {
      {24, 32, 32, 1, 1, 1, 1, 24, 2, 1}, /* 8x8 tiles: ResNet-18's stage 1 in small */
      {5, 33, 31, 1, 1, 1, 1, 7, 2, 0},   /* 9x8 tiles, partial edge tiles */
      {3, 30, 34, 2, 0, 1, 2, 4, 1, 1},   /* uneven padding, 2 on a side */
      {4, 70, 66, 1, 1, 1, 1, 3, 2, 1},   /* 18x17 tiles: chunks of part of an image */
  };
  double worst = 0;
  for (size_t si = 0; si < NNT_ARRAY_LEN(shapes); si++) {
    const wcase *d = &shapes[si];
    nnt_conv_geom g = geom(d);
    size_t plane = (size_t)g.oh * g.ow, in = (size_t)d->c * d->h * d->w;
    size_t tpi = (size_t)((g.oh + 3) / 4) * ((g.ow + 3) / 4);
    assert_true(tpi >= NNT_WINO4_IMAGE_TILES);
    size_t ylen = d->n * d->filters * plane, wlen = (size_t)d->filters * d->c * 9;
    float *w = rnd(&r, wlen), *b = rnd(&r, d->filters), *x = rnd(&r, d->n * in);
    float *y = malloc(ylen * sizeof *y), *y1 = malloc(ylen * sizeof *y1);
    size_t len = nnt_wino4_scratch(d->c, d->filters, tpi);
    float *sc = malloc(len * sizeof *sc);
    for (int flip = 0; flip < 2; flip++) {
      nnt_conv_geom gf = g; /* flipped: the filters are [c][filters] */
      assert_true(nnt_cpu_wino4_takes(&gf, d->filters, len));
      assert_false(nnt_cpu_wino4_takes(&gf, d->filters, len - 1));
      tu_fill_uniform(&r, y, ylen, 100.0f, 200.0f); /* written whole */
      assert_int_equal(
          k->conv_wino(k, &gf, d->n, d->filters, flip, w, d->bias ? b : NULL, x, y, sc, len),
          NNT_OK);
      double e = check_naive_tol(d, &gf, flip, w, b, x, y, "conv_wino F(4, 3)", TOL4);
      worst = e > worst ? e : worst;
      /* the op itself gives these bits */
      assert_int_equal(nnt_cpu_conv_wino4(k, &gf, d->n, d->filters, flip, w,
                                          d->bias ? b : NULL, x, y1, sc, len),
                       NNT_OK);
      assert_memory_equal(y, y1, ylen * sizeof *y);
      /* two threads, and one call per image */
      tu_two_threads();
      memset(y1, 0, ylen * sizeof *y1);
      for (unsigned i = 0; i < d->n; i++)
        assert_int_equal(k->conv_wino(k, &gf, 1, d->filters, flip, w, d->bias ? b : NULL,
                                      x + i * in, y1 + i * d->filters * plane, sc, len),
                         NNT_OK);
      assert_true(tu_one_thread() > 0);
      assert_memory_equal(y, y1, ylen * sizeof *y);
      /* the plain C copy of its loops, then the AVX2 one where the CPU has
       * it, give the bits of the widest path this CPU takes */
      for (int path = NNT_BLAS_SSE; path <= NNT_BLAS_AVX2; path += NNT_BLAS_AVX2) {
        int was = nnt_cpu_vec_path(path);
        assert_int_equal(k->conv_wino(k, &gf, d->n, d->filters, flip, w, d->bias ? b : NULL,
                                      x, y1, sc, len),
                         NNT_OK);
        nnt_cpu_vec_path(was);
        assert_memory_equal(y, y1, ylen * sizeof *y);
      }
      /* a float short: F(2, 3) in the same scratch, other bits */
      assert_int_equal(k->conv_wino(k, &gf, d->n, d->filters, flip, w, d->bias ? b : NULL, x,
                                    y1, sc, len - 1),
                       NNT_OK);
      check_naive(d, &gf, flip, w, b, x, y1, "conv_wino F(2, 3)");
      assert_true(memcmp(y, y1, ylen * sizeof *y) != 0);
    }
    assert_int_equal(nnt_cpu_conv_wino4(k, &g, d->n, d->filters, 0, w, NULL, x, y, sc,
                                        nnt_wino4_scratch(d->c, d->filters, tpi) - 1),
                     NNT_ERR_INVAL);
    free(w), free(b), free(x), free(y), free(y1), free(sc);
  }
  print_message("F(4, 3): largest error / terms' magnitude: %.3g\n", worst);
}

/* F(4x4, 3x3) over images of fewer than NNT_WINO4_IMAGE_TILES tiles: chunks
 * of whole images, as many as the scratch holds (NNT_WINO4_MIN_CHUNK tiles
 * or more), as even as they go over the call's images. Against the naive
 * convolution, forward and flipped; the op's bits; the same bits on two
 * threads, on each copy of its loops and from calls over groups of a
 * chunk's images (conv2d's forwards call over the same groups); a float
 * short taking F(2x2, 3x3); and no F(4, 3) where an image has
 * NNT_WINO_IMAGE_TILES 2x2 tiles (F(2, 3) keeps to one image there), what
 * scratch there may be. */
static void test_f4_whole_images(void **state) {
  (void)state;
  const nnt_kernels *k = nnt_kernels_cpu();
  nnt_rng r;
  nnt_rng_seed(&r, 15);
  const wcase shapes[] = {
      {24, 16, 16, 1, 1, 1, 1, 24, 9, 1}, /* 4x4 tiles an image (ResNet-18's stage 2 in small) */
      {5, 7, 10, 0, 1, 1, 0, 3, 23, 0},   /* 2x3 tiles, partial ones: 11 images a chunk */
  };
  double worst = 0;
  for (size_t si = 0; si < NNT_ARRAY_LEN(shapes); si++) {
    const wcase *d = &shapes[si];
    nnt_conv_geom g = geom(d);
    size_t plane = (size_t)g.oh * g.ow, in = (size_t)d->c * d->h * d->w;
    size_t tpi = (size_t)((g.oh + 3) / 4) * ((g.ow + 3) / 4);
    size_t imgs = (NNT_WINO4_MIN_CHUNK + tpi - 1) / tpi, nch = (d->n + imgs - 1) / imgs;
    size_t grp = (d->n + nch - 1) / nch; /* the call's chunks */
    assert_true(tpi < NNT_WINO4_IMAGE_TILES && nch > 1);
    size_t ylen = d->n * d->filters * plane, wlen = (size_t)d->filters * d->c * 9;
    float *w = rnd(&r, wlen), *b = rnd(&r, d->filters), *x = rnd(&r, d->n * in);
    float *y = malloc(ylen * sizeof *y), *y1 = malloc(ylen * sizeof *y1);
    size_t len = nnt_wino4_scratch(d->c, d->filters, imgs * tpi);
    float *sc = malloc(len * sizeof *sc);
    for (int flip = 0; flip < 2; flip++) {
      const float *bias = d->bias ? b : NULL;
      assert_true(nnt_cpu_wino4_takes(&g, d->filters, len));
      assert_false(nnt_cpu_wino4_takes(&g, d->filters, len - 1));
      tu_fill_uniform(&r, y, ylen, 100.0f, 200.0f); /* written whole */
      assert_int_equal(k->conv_wino(k, &g, d->n, d->filters, flip, w, bias, x, y, sc, len),
                       NNT_OK);
      double e = check_naive_tol(d, &g, flip, w, b, x, y, "conv_wino F(4, 3) images", TOL4);
      worst = e > worst ? e : worst;
      assert_int_equal(
          nnt_cpu_conv_wino4(k, &g, d->n, d->filters, flip, w, bias, x, y1, sc, len), NNT_OK);
      assert_memory_equal(y, y1, ylen * sizeof *y);
      tu_two_threads();
      memset(y1, 0, ylen * sizeof *y1);
      for (size_t i = 0; i < d->n; i += grp) { /* calls over the chunks' groups */
        size_t n = d->n - i < grp ? d->n - i : grp;
        assert_int_equal(k->conv_wino(k, &g, n, d->filters, flip, w, bias, x + i * in,
                                      y1 + i * d->filters * plane, sc, len),
                         NNT_OK);
      }
      assert_true(tu_one_thread() > 0);
      assert_memory_equal(y, y1, ylen * sizeof *y);
      for (int path = NNT_BLAS_SSE; path <= NNT_BLAS_AVX2; path += NNT_BLAS_AVX2) {
        int was = nnt_cpu_vec_path(path);
        assert_int_equal(k->conv_wino(k, &g, d->n, d->filters, flip, w, bias, x, y1, sc, len),
                         NNT_OK);
        nnt_cpu_vec_path(was);
        assert_memory_equal(y, y1, ylen * sizeof *y);
      }
      assert_int_equal(k->conv_wino(k, &g, d->n, d->filters, flip, w, bias, x, y1, sc, len - 1),
                       NNT_OK);
      check_naive(d, &g, flip, w, b, x, y1, "conv_wino F(2, 3)");
      assert_true(memcmp(y, y1, ylen * sizeof *y) != 0);
    }
    free(w), free(b), free(x), free(y), free(y1), free(sc);
  }
  /* 22x22 outputs: 121 2x2 tiles an image but 36 4x4 ones; 26x26: 169 */
  const unsigned sides[] = {22, 26};
  for (size_t i = 0; i < NNT_ARRAY_LEN(sides); i++) {
    wcase d = {24, sides[i], sides[i], 1, 1, 1, 1, 24, 4, 0};
    nnt_conv_geom g = geom(&d);
    size_t tpi2 = (size_t)((g.oh + 1) / 2) * ((g.ow + 1) / 2);
    int want = tpi2 < NNT_WINO_IMAGE_TILES;
    assert_int_equal(nnt_cpu_wino4_takes(&g, d.filters, nnt_wino4_scratch(24, 24, 256)), want);
  }
  print_message("F(4, 3) whole images: largest error / terms' magnitude: %.3g\n", worst);
}

/* conv_wino_dw's F(4x4, 3x3), which it takes where the scratch holds the
 * 36 slices of dU and of a chunk of min(tiles, NNT_WINO_MIN_TILES) tiles:
 * against the naive sum, over images of 64 tiles and of a few (chunks
 * spanning images), odd sizes, uneven padding, more tiles than a chunk;
 * the op itself bitwise, the same bits on two threads and on each copy of
 * its loops; a float short taking F(2x2, 3x3) (other bits) and the op
 * refusing it. Up to 2.9e-7 of the terms' sum on these cases (printed),
 * against TOL4. */
static void test_f4_dw_against_naive(void **state) {
  (void)state;
  const nnt_kernels *k = nnt_kernels_cpu();
  nnt_rng r;
  nnt_rng_seed(&r, 14);
  const wcase shapes[] = {
      {24, 32, 32, 1, 1, 1, 1, 24, 2, 0}, /* 8x8 tiles an image */
      {5, 33, 31, 1, 1, 1, 1, 7, 2, 0},   /* 9x8 tiles, partial edge tiles */
      {3, 30, 34, 2, 0, 1, 2, 4, 1, 0},   /* uneven padding, 2 on a side */
      {6, 16, 16, 1, 1, 1, 1, 5, 9, 0},   /* 4x4 tiles an image: chunks span images */
      {4, 7, 10, 0, 1, 1, 0, 3, 20, 0},   /* 2x3 tiles, partial ones, 120 in all */
  };
  double worst = 0;
  for (size_t si = 0; si < NNT_ARRAY_LEN(shapes); si++) {
    const wcase *d = &shapes[si];
    nnt_conv_geom g = geom(d);
    size_t plane = (size_t)g.oh * g.ow, in = (size_t)d->c * d->h * d->w;
    size_t tiles = d->n * (size_t)((g.oh + 3) / 4) * ((g.ow + 3) / 4);
    size_t wlen = (size_t)d->filters * d->c * 9;
    float *dy = rnd(&r, d->n * d->filters * plane), *x = rnd(&r, d->n * in);
    float *dw = malloc(wlen * sizeof *dw), *dw1 = malloc(wlen * sizeof *dw1);
    size_t len = 36 * ((size_t)d->c * d->filters +
                       (size_t)(d->c + d->filters) * (tiles < 64 ? tiles : 64));
    float *sc = malloc(len * sizeof *sc);
    assert_true(nnt_cpu_wino4_dw_takes(&g, d->n, d->filters, len));
    assert_false(nnt_cpu_wino4_dw_takes(&g, d->n, d->filters, len - 1));
    tu_fill_uniform(&r, dw, wlen, 100.0f, 200.0f); /* written, not added to */
    assert_int_equal(k->conv_wino_dw(k, &g, d->n, d->filters, dy, x, dw, sc, len), NNT_OK);
    double e = check_dw_tol(d, &g, dy, x, dw, TOL4);
    worst = e > worst ? e : worst;
    assert_int_equal(nnt_cpu_conv_wino4_dw(k, &g, d->n, d->filters, dy, x, dw1, sc, len),
                     NNT_OK);
    assert_memory_equal(dw, dw1, wlen * sizeof *dw);
    tu_two_threads();
    memset(dw1, 0, wlen * sizeof *dw1);
    assert_int_equal(k->conv_wino_dw(k, &g, d->n, d->filters, dy, x, dw1, sc, len), NNT_OK);
    assert_true(tu_one_thread() > 0);
    assert_memory_equal(dw, dw1, wlen * sizeof *dw);
    for (int path = NNT_BLAS_SSE; path <= NNT_BLAS_AVX2; path += NNT_BLAS_AVX2) {
      int was = nnt_cpu_vec_path(path);
      assert_int_equal(k->conv_wino_dw(k, &g, d->n, d->filters, dy, x, dw1, sc, len), NNT_OK);
      nnt_cpu_vec_path(was);
      assert_memory_equal(dw, dw1, wlen * sizeof *dw);
    }
    /* a float short: F(2, 3) where that fits, other bits; the op refuses */
    size_t tiles2 = d->n * (size_t)((g.oh + 1) / 2) * ((g.ow + 1) / 2);
    if (len - 1 >= nnt_wino_min_scratch(d->c, d->filters, tiles2)) {
      assert_int_equal(k->conv_wino_dw(k, &g, d->n, d->filters, dy, x, dw1, sc, len - 1),
                       NNT_OK);
      check_dw(d, &g, dy, x, dw1);
      assert_true(memcmp(dw, dw1, wlen * sizeof *dw) != 0);
    }
    assert_int_equal(nnt_cpu_conv_wino4_dw(k, &g, d->n, d->filters, dy, x, dw1, sc, len - 1),
                     NNT_ERR_INVAL);
    free(dy), free(x), free(dw), free(dw1), free(sc);
  }
  print_message("F(4, 3) dw: largest error / terms' magnitude: %.3g\n", worst);
}

static void test_refusals(void **state) {
  (void)state;
  const nnt_kernels *k = nnt_kernels_cpu();
  float v[4096] = {0};
  wcase d = {2, 6, 6, 1, 1, 1, 1, 3, 1, 0};
  nnt_conv_geom g = geom(&d);
  size_t least = nnt_wino_min_scratch(2, 3, 9);
  assert_int_equal(least, 8 * (2 * 3 + 5 * 9)); /* 8 slices of U, V, M for the 9 tiles */
  /* below it, passes of 4 slices down to their least (the weight
   * gradient's least stays 8 slices) */
  size_t fewest = nnt_wino_scratch(NNT_WINO_FEWEST_SLICES, 1, 2, 3, 9);
  assert_int_equal(fewest, 4 * (2 * 3 + 5 * 9));
  assert_int_equal(k->conv_wino(k, &g, 1, 3, 0, v, NULL, v, v, v, least), NNT_OK);
  assert_int_equal(k->conv_wino(k, &g, 1, 3, 0, v, NULL, v, v, v, least - 1), NNT_OK);
  assert_int_equal(k->conv_wino(k, &g, 1, 3, 0, v, NULL, v, v, v, fewest), NNT_OK);
  assert_int_equal(k->conv_wino(k, &g, 1, 3, 0, v, NULL, v, v, v, fewest - 1), NNT_ERR_INVAL);
  nnt_conv_geom s2 = g;
  s2.sh = 2, s2.oh = 3;
  assert_int_equal(k->conv_wino(k, &s2, 1, 3, 0, v, NULL, v, v, v, 4096), NNT_ERR_INVAL);
  nnt_conv_geom k5 = g;
  k5.kh = k5.kw = 5, k5.oh = k5.ow = 4;
  assert_int_equal(k->conv_wino(k, &k5, 1, 3, 0, v, NULL, v, v, v, 4096), NNT_ERR_INVAL);
  nnt_conv_geom dil = g;
  dil.dw = 2, dil.ow = 4;
  assert_int_equal(k->conv_wino(k, &dil, 1, 3, 0, v, NULL, v, v, v, 4096), NNT_ERR_INVAL);
  nnt_conv_geom p3 = g;
  p3.pt = 3, p3.oh = 9;
  assert_int_equal(k->conv_wino(k, &p3, 1, 3, 0, v, NULL, v, v, v, 4096), NNT_ERR_INVAL);
  nnt_conv_geom blk = g;
  blk.cs = 3; /* a block of channels: not taken */
  assert_int_equal(k->conv_wino(k, &blk, 1, 3, 0, v, NULL, v, v, v, 4096), NNT_ERR_INVAL);
  nnt_conv_geom bad = g;
  bad.oh = 5; /* not the window's output size */
  assert_int_equal(k->conv_wino(k, &bad, 1, 3, 0, v, NULL, v, v, v, 4096), NNT_ERR_INVAL);
  /* the weight gradient: the same geometry and scratch */
  assert_int_equal(k->conv_wino_dw(k, &g, 1, 3, v, v, v + 2048, v, least), NNT_OK);
  assert_int_equal(k->conv_wino_dw(k, &g, 1, 3, v, v, v + 2048, v, least), NNT_OK);
  assert_int_equal(k->conv_wino_dw(k, &g, 1, 3, v, v, v + 2048, v, least - 1), NNT_ERR_INVAL);
  assert_int_equal(k->conv_wino_dw(k, &s2, 1, 3, v, v, v + 2048, v, 2048), NNT_ERR_INVAL);
  assert_int_equal(k->conv_wino_dw(k, &blk, 1, 3, v, v, v + 2048, v, 2048), NNT_ERR_INVAL);
  /* no image: dw is zeros */
  float z[3 * 2 * 9];
  memset(z, 0x7f, sizeof z);
  assert_int_equal(k->conv_wino_dw(k, &g, 0, 3, v, v, z, v, least), NNT_OK);
  for (size_t q = 0; q < NNT_ARRAY_LEN(z); q++)
    assert_true(z[q] == 0.0f);
}

/* The CPU's table with conv_wino and conv_wino_dw counting their calls,
 * and without them. */
static unsigned wino_calls[3]; /* conv_wino flip 0, flip 1, conv_wino_dw */
static unsigned wino4_calls[3]; /* those that take F(4x4, 3x3) */
static int counting_wino(const nnt_kernels *self, const nnt_conv_geom *g, size_t n,
                         size_t filters, int flip, const float *w, const float *bias,
                         const float *x, float *y, float *s, size_t sl) {
  wino_calls[flip ? 1 : 0]++;
  wino4_calls[flip ? 1 : 0] += nnt_cpu_wino4_takes(g, filters, sl) != 0;
  return nnt_kernels_cpu()->conv_wino(self, g, n, filters, flip, w, bias, x, y, s, sl);
}

static int counting_wino_dw(const nnt_kernels *self, const nnt_conv_geom *g, size_t n,
                            size_t filters, const float *dy, const float *x, float *dw,
                            float *s, size_t sl) {
  wino_calls[2]++;
  wino4_calls[2] += nnt_cpu_wino4_dw_takes(g, n, filters, sl) != 0;
  return nnt_kernels_cpu()->conv_wino_dw(self, g, n, filters, dy, x, dw, s, sl);
}

/* conv2d through conv_wino (forward and derivative) and conv_wino_dw
 * (weight gradient) against the same layer on im2col and gemm: shapes
 * where the layer takes them (at least 24 channels and filters, 3x3,
 * stride 1, padding 0 or 1; the forward only with at least 256 tiles in
 * its image groups, which it raises to that where an image has fewer, or
 * 64 for a wide layer),
 * and two where it does not for the backward
 * or at all; calls: how many of the three run Winograd, f4: how many of
 * those take F(4x4, 3x3) in the scratch the layer planned. Where the
 * output fits in the input, the forward in place too (bitwise the same). */
#define FB_CASE 13 /* the derivative's filter blocks (below) */
static void test_layer(void **state) {
  (void)state;
  static const struct {
    const char *filters, *padding;
    unsigned c, h, w, n, calls, f4; /* f4: of those, how many on F(4x4, 3x3) */
  } L[] = {
      /* 256 tiles an image (32x32): all three; ResNet-18's stage 1 */
      {"24", "1", 24, 32, 32, 2, 3, 3}, {"25", "1", 24, 31, 32, 1, 3, 3},
      /* 16 tiles an image (8x8): the forward over groups of 16 images
       * (256 tiles; 20 images: one group), not im2col's 3 */
      {"24", "1", 24, 8, 8, 16, 3, 0},  {"24", "1", 24, 8, 8, 20, 3, 0},
      /* fewer tiles: the derivative and the gradient */
      {"24", "1", 24, 16, 16, 2, 2, 0}, {"25", "0", 24, 15, 17, 1, 2, 0},
      {"24", "same", 26, 16, 15, 1, 2, 1}, {"28", "1,0", 24, 14, 16, 2, 2, 0},
      /* (the first's gradient on F(4x4, 3x3): its column block holds it) */
      /* test_conv_fd's finite-difference shape */
      {"24", "1,1,0,1", 24, 8, 8, 1, 2, 0},
      /* the backward's column block (1 channel of 8 images) is less than
       * conv_wino's least scratch: im2col for the gradient and the
       * derivative, and the forward's 8 images have 32 tiles */
      {"24", "0,1", 32, 4, 4, 8, 0, 0},
      /* fewer than CONV_WINO_MIN_C channels and filters: im2col */
      {"16", "1", 16, 8, 8, 2, 0, 0},
      /* wide (256 channels and filters; ResNet-18's stage 4 has 512): the
       * forward over the batch's 128 tiles of 4x4 images, its scratch
       * (3 MiB) within the layer's own tensors; the backward's column
       * blocks stay below conv_wino's least, so the gradient keeps im2col
       * and the derivative runs im2col in its own scratch (2 groups of 16
       * images, 1.25 MiB beside a 2.25 MiB gradient; checked below against
       * the backward's blocks). At 8 images (32 tiles) none. */
      {"256", "1", 256, 4, 4, 32, 1, 0},
      {"256", "1", 256, 4, 4, 8, 0, 0},
      /* at 16 images the derivative's own scratch (as large as the
       * 2.25 MiB gradient) holds conv_wino's filter blocks: the input
       * transform of its 64 tiles and 64 filters' U and M a block
       * (ResNet-18's stage 4: 128 tiles, blocks of 128) */
      {"256", "1", 256, 4, 4, 16, 1, 0},
      /* 16 tiles of 4x4 an image (16x16), channels = filters: the forward
       * over groups of 5 images (as even as 4 or more go into 18) and the
       * backward on F(4x4, 3x3), their scratch within 1.5 and 1.25 times
       * the input (ResNet-18's stage 2 in small) */
      {"24", "1", 24, 16, 16, 18, 3, 3},
  };
  nnt_kernels with = *nnt_kernels_cpu(), without = with;
  unsigned inplace = 0, owns = 0;
  with.conv_wino = counting_wino;
  with.conv_wino_dw = counting_wino_dw;
  without.conv_wino = NULL;
  without.conv_wino_dw = NULL;
  for (size_t i = 0; i < NNT_ARRAY_LEN(L); i++) {
    const char *props[] = {"filters", L[i].filters, "kernel_size", "3", "padding",
                           L[i].padding, NULL};
    fd_harness h;
    fd_setup(&h, "conv2d", props, nnt_dim_make(L[i].n, L[i].c, L[i].h, L[i].w), 0);
    size_t ylen = nnt_tensor_len(&h.out), xlen = nnt_tensor_len(&h.din);
    size_t wlen = nnt_tensor_len(&h.gw[0]), blen = nnt_tensor_len(&h.gw[1]);
    float *y = malloc(ylen * sizeof *y), *dx = malloc(xlen * sizeof *dx);
    float *dw = malloc(wlen * sizeof *dw), *db = malloc(blen * sizeof *db);
    nnt_rng r;
    nnt_rng_seed(&r, 5 + i);
    tu_fill_uniform(&r, h.dout.data, ylen, -1.0f, 1.0f);
    memset(wino_calls, 0, sizeof wino_calls);
    memset(wino4_calls, 0, sizeof wino4_calls);
    h.ctx.k = &with;
    assert_int_equal(h.l->ops->forward(h.l, &h.ctx), NNT_OK);
    memcpy(y, h.out.data, ylen * sizeof *y);
    assert_int_equal(h.l->ops->calc_gradient(h.l, &h.ctx), NNT_OK);
    memcpy(dw, h.gw[0].data, wlen * sizeof *dw);
    memcpy(db, h.gw[1].data, blen * sizeof *db);
    assert_int_equal(h.l->ops->calc_derivative(h.l, &h.ctx), NNT_OK);
    memcpy(dx, h.din.data, xlen * sizeof *dx);
    /* in place where the layer allows it (an image's output no larger
     * than its input, no backward): the same groups through conv_wino,
     * so bitwise the same output */
    size_t xlen_all = nnt_tensor_len(&h.in);
    if (ylen <= xlen_all) {
      float *buf = malloc(xlen_all * sizeof *buf), *x0 = h.in.data, *y0 = h.out.data;
      memcpy(buf, x0, xlen_all * sizeof *buf);
      h.in.data = h.out.data = buf;
      assert_int_equal(h.l->ops->forward(h.l, &h.ctx), NNT_OK);
      assert_memory_equal(buf, y, ylen * sizeof *y);
      h.in.data = x0, h.out.data = y0;
      free(buf);
      inplace++;
    }
    unsigned phases = !!wino_calls[0] + !!wino_calls[1] + !!wino_calls[2];
    if (phases != L[i].calls)
      fail_msg("case %zu: %u of forward, derivative, gradient through Winograd, not %u", i,
               phases, L[i].calls);
    if (i == FB_CASE && !wino_calls[1])
      fail_msg("case %zu: the derivative not through Winograd", i);
    unsigned phases4 = !!wino4_calls[0] + !!wino4_calls[1] + !!wino4_calls[2];
    if (phases4 != L[i].f4)
      fail_msg("case %zu: %u of them on F(4x4, 3x3), not %u", i, phases4, L[i].f4);
    h.ctx.k = &without;
    assert_int_equal(h.l->ops->forward(h.l, &h.ctx), NNT_OK);
    assert_int_equal(h.l->ops->calc_gradient(h.l, &h.ctx), NNT_OK);
    assert_int_equal(h.l->ops->calc_derivative(h.l, &h.ctx), NNT_OK);
    /* each within TOL of the other relative to a bound on its terms' sum
     * (inputs, weights and dY are at most 1 in size: 9 c terms for y, 9
     * filters for dX, every position of every image for dW and db) */
    size_t pos = ylen / (size_t)atoi(L[i].filters); /* images x plane */
    for (size_t q = 0; q < wlen; q++)
      if (fabs(dw[q] - h.gw[0].data[q]) > TOL * (1 + fabs(h.gw[0].data[q])) * pos)
        fail_msg("case %zu: dw[%zu] %g, im2col %g", i, q, dw[q], h.gw[0].data[q]);
    for (size_t q = 0; q < blen; q++)
      if (fabs(db[q] - h.gw[1].data[q]) > TOL * (1 + fabs(h.gw[1].data[q])) * pos)
        fail_msg("case %zu: db[%zu] %g, im2col %g", i, q, db[q], h.gw[1].data[q]);
    for (size_t q = 0; q < ylen; q++)
      if (fabs(y[q] - h.out.data[q]) > TOL * (1 + fabs(h.out.data[q])) * L[i].c * 9)
        fail_msg("case %zu: y[%zu] %g, im2col %g", i, q, y[q], h.out.data[q]);
    for (size_t q = 0; q < xlen; q++)
      if (fabs(dx[q] - h.din.data[q]) > TOL * (1 + fabs(h.din.data[q])) * atoi(L[i].filters) * 9)
        fail_msg("case %zu: dx[%zu] %g, im2col %g", i, q, dx[q], h.din.data[q]);
    for (unsigned c = 0; c < h.fc.n_scratch; c++)
      if (h.fc.scratch_life[c] == NNT_SCRATCH_DERIV) {
        /* the derivative in its own scratch against the backward's column
         * blocks (the path where that scratch is not planned) */
        float *own = h.ctx.scratch[c].data;
        h.ctx.scratch[c].data = NULL;
        assert_int_equal(h.l->ops->calc_derivative(h.l, &h.ctx), NNT_OK);
        h.ctx.scratch[c].data = own;
        for (size_t q = 0; q < xlen; q++)
          if (fabs(dx[q] - h.din.data[q]) >
              TOL * (1 + fabs(h.din.data[q])) * atoi(L[i].filters) * 9)
            fail_msg("case %zu: dx[%zu] %g, blocks %g", i, q, dx[q], h.din.data[q]);
        owns++;
      }
    free(y), free(dx), free(dw), free(db);
    fd_teardown(&h);
  }
  assert_int_equal(owns, 2); /* cases 11 and 13 */
  assert_int_equal(inplace, 13); /* all but cases 1 and 7 (more filters than channels) */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_against_naive), cmocka_unit_test(test_fblocks_against_naive),
      cmocka_unit_test(test_fb_blocks),
      cmocka_unit_test(test_dw_against_naive),
      cmocka_unit_test(test_batch_as_groups), cmocka_unit_test(test_f4_against_naive),
      cmocka_unit_test(test_f4_whole_images), cmocka_unit_test(test_f4_dw_against_naive),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_layer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
