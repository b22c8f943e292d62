/* The kernel entries the layers and the core added when the table became a
 * backend op set: normalize_rows (the input layer's per-sample
 * normalization) and argmax_match (the accuracy count), against double
 * references; the optimizer updates' skip flag and subnormal flush,
 * clip_scale and flag_nonfinite (the checks a backend with steps runs);
 * the Philox generator's known-answer vectors; bn_affine, bitwise the y
 * of bn_fwd_train from its xhat (the default plan's recomputation), and
 * the batch-norm loops' AVX2 copy bitwise their plain one;
 * and the status every entry returns: NNT_OK on good arguments,
 * NNT_ERR_INVAL on those it can see are wrong. */
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/kernels.h"
#include "nntrainer/philox.h"

static const nnt_kernels *K;
static nnt_rng R;

static float *rnd(size_t n, float lo, float hi) {
  float *x = malloc((n ? n : 1) * sizeof *x);
  tu_fill_uniform(&R, x, n, lo, hi);
  return x;
}

static void expect(const char *what, const float *got, const double *want, size_t n,
                   double tol) {
  for (size_t i = 0; i < n; i++)
    if (!(fabs(got[i] - want[i]) <= tol * fmax(1, fabs(want[i]))))
      fail_msg("%s[%zu]: %.8g, expected %.8g", what, i, got[i], want[i]);
}

static void test_normalize_rows(void **state) {
  (void)state;
  const size_t shapes[][2] = {{1, 1}, {3, 17}, {4, 130}};
  for (size_t t = 0; t < NNT_ARRAY_LEN(shapes); t++) {
    size_t rows = shapes[t][0], cols = shapes[t][1], n = rows * cols;
    float *x = rnd(n, -5, 7), *y = malloc(n * 4), *z = malloc(n * 4);
    if (rows > 2)
      for (size_t c = 0; c < cols; c++)
        x[2 * cols + c] = 3.5f; /* a constant row becomes zeros */
    for (unsigned mode = 0; mode < 4; mode++) {
      assert_int_equal(K->normalize_rows(K, rows, cols, mode, x, y), NNT_OK);
      memcpy(z, x, n * 4);
      assert_int_equal(K->normalize_rows(K, rows, cols, mode, z, z), NNT_OK); /* in place */
      assert_memory_equal(y, z, n * 4);
      for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols, *yr = y + r * cols;
        /* min and max in float (exact): gcc 12 for aarch64 fails on a
         * vectorized fmin/fmax over floats into a double */
        float lof = xr[0], hif = xr[0];
        double v[130];
        for (size_t c = 0; c < cols; c++)
          v[c] = xr[c], lof = fminf(lof, xr[c]), hif = fmaxf(hif, xr[c]);
        double lo = lof, hi = hif;
        if (mode & NNT_NORM_MINMAX)
          for (size_t c = 0; c < cols; c++)
            v[c] = hi > lo ? (v[c] - lo) / (hi - lo) : 0;
        if (mode & NNT_NORM_STANDARD) {
          double mean = 0, var = 0;
          for (size_t c = 0; c < cols; c++)
            mean += v[c] / cols;
          for (size_t c = 0; c < cols; c++)
            var += (v[c] - mean) * (v[c] - mean) / cols;
          for (size_t c = 0; c < cols; c++)
            v[c] = var > 1e-12 ? (v[c] - mean) / sqrt(var) : 0;
        }
        expect("normalize_rows", yr, v, cols, 1e-4);
      }
    }
    free(x), free(y), free(z);
  }
  float one[2] = {1, 2};
  assert_int_equal(K->normalize_rows(K, 1, 2, 4, one, one), NNT_ERR_INVAL);
  assert_int_equal(K->normalize_rows(K, 1, 0, 1, one, one), NNT_ERR_INVAL);
}

static void test_argmax_match(void **state) {
  (void)state;
  /* rows: agree, disagree, a tie (the first largest wins in both), agree */
  const float y[] = {0.1f, 0.7f, 0.2f, 0.5f, 0.4f, 0.1f, 0.3f, 0.3f, 0.1f, 0, 0, 1};
  const float lab[] = {0, 1, 0, 0, 1, 0, 1, 0, 1, 0, 0, 1};
  float count = -1;
  assert_int_equal(K->argmax_match(K, 4, 3, y, lab, &count), NNT_OK);
  assert_true(count == 3.0f);
  assert_int_equal(K->argmax_match(K, 1, 3, y + 3, lab + 3, &count), NNT_OK);
  assert_true(count == 0.0f);
  assert_int_equal(K->argmax_match(K, 0, 3, y, lab, &count), NNT_OK);
  assert_true(count == 0.0f);
  assert_int_equal(K->argmax_match(K, 4, 3, y, lab, NULL), NNT_ERR_INVAL);
  assert_int_equal(K->argmax_match(K, 4, 0, y, lab, &count), NNT_ERR_INVAL);
}

/* Every entry returns NNT_OK on good arguments (the tests above) and
 * NNT_ERR_INVAL on those it can see are wrong. */
static void test_invalid_arguments(void **state) {
  (void)state;
  float a[4] = {1, 2, 3, 4}, c[4], out;
  assert_int_equal(K->dot(K, 4, a, a, NULL), NNT_ERR_INVAL);
  assert_int_equal(K->sum(K, 4, NULL, &out), NNT_ERR_INVAL);
  assert_int_equal(K->sum(K, 0, NULL, &out), NNT_OK);
  assert_true(out == 0.0f);
  assert_int_equal(K->mse_fwd(K, 0, a, a, &out), NNT_ERR_INVAL);
  assert_int_equal(K->xent_softmax_fwd(K, 0, 2, a, a, &out), NNT_ERR_INVAL);
  assert_int_equal(K->xent_sigmoid_fwd(K, 2, 2, a, a, NULL), NNT_ERR_INVAL);
  /* gemm: a leading dimension shorter than a row, a dimension past the limit */
  assert_int_equal(K->gemm(K, 0, 0, 2, 2, 2, 1, a, 1, a, 2, 0, c, 2), NNT_ERR_INVAL);
  assert_int_equal(K->gemm(K, 0, 0, 2, 2, 2, 1, a, 2, a, 2, 0, c, 1), NNT_ERR_INVAL);
  assert_int_equal(K->gemm(K, 0, 0, NNT_GEMM_DIM_MAX + 1, 1, 1, 1, a, 1, a, 1, 0, c, 1),
                   NNT_ERR_INVAL);
  assert_int_equal(K->gemm(K, 0, 0, 2, 2, 2, 1, a, 2, a, 2, 0, c, 2), NNT_OK);
  assert_true(c[0] == 7 && c[3] == 22);
  nnt_conv_geom g = {1, 2, 2, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0};
  assert_int_equal(K->pool_fwd(K, &g, 1, 2, a, &out, &out), NNT_ERR_INVAL);
  assert_int_equal(K->pool_bwd(K, &g, 1, 2, a, a, a), NNT_ERR_INVAL);
}
/* A set skip flag leaves an update undone; stored values below the
 * smallest normal float become 0 (a moment whose gradient stays 0 would
 * otherwise stick at the smallest subnormal: 0.9 of 1 ulp rounds to 1 ulp,
 * and x86 arithmetic on it is slow); clip_scale and flag_nonfinite. */
static void test_update_guards(void **state) {
  (void)state;
  const size_t n = 33;
  float g[33], w[33], m[33] = {0}, v[33] = {0};
  for (size_t i = 0; i < n; i++)
    g[i] = (float)i / 8 - 2, w[i] = 1 - (float)i / 16;
  float skip = 1, w0 = w[0];
  assert_int_equal(K->sgd_step(K, n, 0.5f, g, w, &skip), NNT_OK);
  assert_int_equal(K->adam_step(K, n, 0.1f, 0.9f, 0.999f, 1e-7f, 0.5f, g, m, v, w, &skip),
                   NNT_OK);
  assert_true(w[0] == w0 && m[0] == 0 && v[0] == 0);
  skip = 0; /* a clear flag: AdamW's scale (lr 0 leaves only it) and the moments move */
  K->adam_step(K, n, 0.0f, 0.9f, 0.999f, 1e-7f, 0.5f, g, m, v, w, &skip);
  assert_true(w[0] == w0 * 0.5f && m[0] != 0);
  float mm[2] = {1e-3f, -1e-3f}, vv[2] = {1e-6f, 1e-6f}, ww[2] = {0.5f, -0.5f};
  const float zero[2] = {0, 0};
  for (int t = 0; t < 100000; t++)
    K->adam_step(K, 2, 1e-3f, 0.9f, 0.999f, 1e-7f, 1.0f, zero, mm, vv, ww, NULL);
  assert_true(mm[0] == 0 && mm[1] == 0 && vv[0] == 0 && vv[1] == 0);
  assert_true(fpclassify(ww[0]) == FP_NORMAL && fpclassify(ww[1]) == FP_NORMAL);
  /* AdamW's decay of a weight whose gradient stays 0 ends at 0 too */
  for (int t = 0; t < 100000; t++)
    K->adam_step(K, 2, 1e-3f, 0.9f, 0.999f, 1e-7f, 0.999f, zero, mm, vv, ww, NULL);
  assert_true(ww[0] == 0 && ww[1] == 0);
  float sw[1] = {1e-37f}, sg[1] = {2e-38f}; /* a normal gradient: a subnormal one may */
  K->sgd_step(K, 1, 4.75f, sg, sw, NULL);    /* read as 0 (kernels.h); 1e-37 - 9.5e-38 */
  assert_true(sw[0] == 0);                   /* is subnormal */
  /* clip_scale: by max_norm / sqrt(*sumsq) when that norm is larger */
  float y2[2] = {3, -4}, sq = 25;
  assert_int_equal(K->clip_scale(K, 2, 10, &sq, y2), NNT_OK);
  assert_true(y2[0] == 3 && y2[1] == -4);
  assert_int_equal(K->clip_scale(K, 2, 2.5f, &sq, y2), NNT_OK);
  assert_true(y2[0] == 1.5f && y2[1] == -2);
  /* flag_nonfinite: sets both flags on a NaN or inf, leaves them otherwise */
  float flag = 0, any = 0;
  assert_int_equal(K->flag_nonfinite(K, n, g, &flag, &any), NNT_OK);
  assert_true(flag == 0 && any == 0);
  g[n - 1] = INFINITY;
  assert_int_equal(K->flag_nonfinite(K, n, g, &flag, &any), NNT_OK);
  assert_true(flag == 1 && any == 1);
  flag = 0, g[n - 1] = NAN;
  assert_int_equal(K->flag_nonfinite(K, n, g, &flag, NULL), NNT_OK);
  assert_true(flag == 1);
}

/* Philox-4x32-10 against the known answers published with Random123
 * (kat_vectors: counter and key all zeros, all ones, and the digits of
 * pi), and the uniform values it gives: in [0, 1), mean near 1/2. */
static void test_philox(void **state) {
  (void)state;
  static const struct {
    uint64_t key, hi, lo;
    uint32_t want[4];
  } kat[] = {
      {0, 0, 0, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {~0ull, ~0ull, ~0ull, {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {0x299f31d0a4093822ull, 0x0370734413198a2eull, 0x85a308d3243f6a88ull,
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (size_t k = 0; k < sizeof kat / sizeof kat[0]; k++) {
    nnt_philox_out o = nnt_philox(kat[k].key, kat[k].hi, kat[k].lo);
    for (int i = 0; i < 4; i++)
      assert_int_equal(o.v[i], kat[k].want[i]);
  }
  double sum = 0;
  for (uint64_t i = 0; i < 100000; i++) {
    float u = nnt_philox_uniform_at(42, 7, i);
    assert_true(u >= 0.0f && u < 1.0f);
    sum += u;
  }
  assert_true(fabs(sum / 100000 - 0.5) < 0.01);
  /* another stream or key gives other values */
  assert_true(nnt_philox_uniform_at(42, 8, 0) != nnt_philox_uniform_at(42, 7, 0) ||
              nnt_philox_uniform_at(42, 8, 1) != nnt_philox_uniform_at(42, 7, 1));
}

/* mask_upper: in each matrix the strict upper triangle only, also where
 * rows and cols differ; the other values are untouched. */
static void test_mask_upper(void **state) {
  (void)state;
  float y[2 * 3 * 4];
  for (int i = 0; i < 24; i++)
    y[i] = (float)i;
  assert_int_equal(K->mask_upper(K, 2, 3, 4, -7.0f, y), NNT_OK);
  for (int m = 0; m < 2; m++)
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 4; j++) {
        int at = (m * 3 + i) * 4 + j;
        assert_true(y[at] == (j > i ? -7.0f : (float)at));
      }
}

/* bn_affine(xhat) is bn_fwd_train's y bit for bit, in place or not. */
static void test_bn_affine(void **state) {
  (void)state;
  const size_t shapes[][3] = {{1, 1, 1}, {2, 3, 17}, {4, 5, 64}, {3, 7, 1}};
  for (size_t t = 0; t < NNT_ARRAY_LEN(shapes); t++) {
    size_t outer = shapes[t][0], ch = shapes[t][1], inner = shapes[t][2];
    size_t n = outer * ch * inner;
    float *x = rnd(n, -3, 5), *g = rnd(ch, -2, 2), *b = rnd(ch, -1, 1);
    float *y = malloc(n * 4), *xhat = malloc(n * 4), *z = malloc(n * 4), *st = malloc(3 * ch * 4);
    assert_int_equal(K->bn_fwd_train(K, outer, ch, inner, x, g, b, 1e-3f, st, st + ch,
                                     st + 2 * ch, xhat, y),
                     NNT_OK);
    assert_int_equal(K->bn_affine(K, outer, ch, inner, xhat, g, b, z), NNT_OK);
    assert_memory_equal(z, y, n * 4);
    assert_int_equal(K->bn_affine(K, outer, ch, inner, xhat, g, b, xhat), NNT_OK);
    assert_memory_equal(xhat, y, n * 4);
    free(x), free(g), free(b), free(y), free(xhat), free(z), free(st);
  }
}

/* Every batch-norm op on the AVX2 path writes the bits of the plain path
 * (shapes with tails past the 8 lanes, one value per channel, and enough
 * per channel to split), or the path is refused on a CPU without AVX2. */
/* Every code path (plain C, AVX2, AVX-512: those this CPU has), on one
 * thread (split over channels) and on two (split over images where a
 * shape is large enough: the sums per image added in image order), gives
 * the same bits for all five ops (bn_fwd_stats: each image alone). */
static void test_bn_paths(void **state) {
  (void)state;
  /* the last four split over images at two threads: 2 x 2 x 9000, 8 x 6 x
   * 1024, 64 x 40 x 16 (the backward's 2560 pairs over channels: more than
   * its half of BN_IMG_PAIRS) and 3 x 1 x 20000 */
  const size_t shapes[][3] = {{1, 1, 1},    {2, 3, 17},    {4, 5, 67},   {3, 7, 1},
                              {2, 2, 9000}, {8, 6, 1024}, {64, 40, 16}, {3, 1, 20000}};
  static const int paths[] = {NNT_BLAS_SSE, NNT_BLAS_AVX2, NNT_BLAS_AVX512};
  const int has[] = {1, __builtin_cpu_supports("avx2"), __builtin_cpu_supports("avx512f")};
  enum { RUNS = 6 }; /* the three paths on one thread, then on two */
  for (size_t t = 0; t < NNT_ARRAY_LEN(shapes); t++) {
    size_t outer = shapes[t][0], ch = shapes[t][1], inner = shapes[t][2];
    size_t n = outer * ch * inner, len = 5 * ch + 5 * n;
    float *x = rnd(n, -3, 5), *dy = rnd(n, -1, 1), *g = rnd(ch, -2, 2), *b = rnd(ch, -1, 1);
    float *mv = rnd(2 * ch, 0.5f, 2), *out[RUNS] = {0};
    unsigned long split = 0;
    for (int p = 0; p < RUNS; p++) {
      int path = paths[p % 3];
      if (p == 3)
        tu_two_threads();
      /* per run: mean var invstd dgamma dbeta, xhat, y, dx, infer y, affine y */
      float *o = out[p] = malloc(len * 4), *xh = o + 5 * ch, *y = xh + n;
      nnt_cpu_bn_args a = {.outer = outer, .ch = ch, .inner = inner, .x = x, .gamma = g,
                           .beta = b, .eps = 1e-3f, .mean = o, .var = o + ch,
                           .invstd = o + 2 * ch, .xhat = xh, .y = y};
      int rc = nnt_cpu_bn_path(path, NNT_BN_FWD_TRAIN, &a);
      if (!has[p % 3]) {
        assert_int_equal(rc, NNT_ERR_INVAL);
        free(o);
        out[p] = NULL;
      } else {
        assert_int_equal(rc, NNT_OK);
        nnt_cpu_bn_args d = {.outer = outer, .ch = ch, .inner = inner, .dy = dy,
                             .xhat_in = xh, .invstd_in = o + 2 * ch, .gamma = g, .dx = y + n,
                             .dgamma = o + 3 * ch, .dbeta = o + 4 * ch};
        assert_int_equal(nnt_cpu_bn_path(path, NNT_BN_BWD, &d), NNT_OK);
        /* the same backward in two calls that share the means (bn_bwd_means):
         * the sums' call, then dx's from the means: the same bits */
        float *m2 = malloc(2 * ch * 4), *s2 = malloc((2 * ch + n) * 4);
        nnt_cpu_bn_args d2 = d, d3 = d;
        d2.dx = NULL, d2.dgamma = s2, d2.dbeta = s2 + ch, d2.means_out = m2;
        assert_int_equal(nnt_cpu_bn_path(path, NNT_BN_BWD, &d2), NNT_OK);
        d3.dgamma = d3.dbeta = NULL, d3.means_in = m2, d3.dx = s2 + 2 * ch;
        assert_int_equal(nnt_cpu_bn_path(path, NNT_BN_BWD, &d3), NNT_OK);
        assert_ptr_equal(d3.means_in, m2);
        assert_memory_equal(s2, o + 3 * ch, 2 * ch * 4);
        assert_memory_equal(s2 + 2 * ch, y + n, n * 4);
        free(m2), free(s2);
        nnt_cpu_bn_args f = {.outer = outer, .ch = ch, .inner = inner, .x = x, .gamma = g,
                             .beta = b, .mean_in = mv, .var_in = mv + ch, .eps = 1e-3f,
                             .y = y + 2 * n};
        assert_int_equal(nnt_cpu_bn_path(path, NNT_BN_FWD_INFER, &f), NNT_OK);
        nnt_cpu_bn_args e = {.outer = outer, .ch = ch, .inner = inner, .xhat_in = xh,
                             .gamma = g, .beta = b, .y = y + 3 * n};
        assert_int_equal(nnt_cpu_bn_path(path, NNT_BN_AFFINE, &e), NNT_OK);
        assert_memory_equal(y + 3 * n, y, n * 4);
        /* each image again from the batch's mean and 1/std (bn_fwd_stats,
         * in place as a rerun runs it): the batch's y, bit for bit */
        for (size_t im = 0; im < outer; im++) {
          float *yi = y + 3 * n + im * ch * inner;
          memcpy(yi, x + im * ch * inner, ch * inner * 4);
          nnt_cpu_bn_args st = {.outer = 1, .ch = ch, .inner = inner, .x = yi, .gamma = g,
                                .beta = b, .mean_in = o, .invstd_in = o + 2 * ch, .y = yi};
          assert_int_equal(nnt_cpu_bn_path(path, NNT_BN_FWD_STATS, &st), NNT_OK);
        }
        assert_memory_equal(y + 3 * n, y, n * 4);
      }
      if (p == RUNS - 1)
        split = tu_one_thread();
    }
    for (int p = 1; p < RUNS; p++)
      if (out[p])
        assert_memory_equal(out[p], out[0], len * 4 - n * 4);
    /* the large shapes ran on both threads */
    assert_true(t < 4 || split > 0);
    assert_int_equal(nnt_cpu_bn_path(NNT_BLAS_SSE, 9, &(nnt_cpu_bn_args){0}), NNT_ERR_INVAL);
    free(x), free(dy), free(g), free(b), free(mv);
    for (int p = 0; p < RUNS; p++)
      free(out[p]);
  }
}

int main(void) {
  K = nnt_kernels_cpu();
  nnt_rng_seed(&R, 2025);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_normalize_rows),
      cmocka_unit_test(test_argmax_match),
      cmocka_unit_test(test_invalid_arguments),
      cmocka_unit_test(test_update_guards),
      cmocka_unit_test(test_philox),
      cmocka_unit_test(test_mask_upper),
      cmocka_unit_test(test_bn_affine),
      cmocka_unit_test(test_bn_paths),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
