/* The CPU's loops that are written for the vectorizer or compiled for
 * AVX-512 too, against plain scalar references, bit for bit: the ReLU
 * masks (act_mask, act_bwd_mask, without branches) on lengths around the
 * 32-bit words and the parts of the compute threads, inputs with zeros of
 * both signs, NaN, infinities and subnormals, on 1 and 2 threads, a
 * mask's bits past n zero, other activations refused; the SGD update
 * (subnormal results flushed to +0); Adam on each code path; the
 * non-finite scan
 * (nnt_first_nonfinite) with one NaN or infinity at every position of
 * lengths around the vector widths, and on the compute threads (long
 * tensors, scanned a run a thread) at the runs' edges, found there and
 * named at its first position. */
#include "test_util.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/compute/kernels.h"
#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/model_impl.h"
#include "nntrainer/philox.h"

static const size_t LENS[] = {1, 5, 31, 32, 33, 64, 95, 1000, 40000, 70001};

/* uniform values with every kind of special one sprinkled in */
static void fill(nnt_rng *r, float *x, size_t n) {
  static const float special[] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 1e-40f, -1e-40f};
  tu_fill_uniform(r, x, n, -1.0f, 1.0f);
  for (size_t i = 0; i < n; i += 7)
    x[i] = special[(i / 7) % NNT_ARRAY_LEN(special)];
}

static uint32_t bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static void check(const nnt_kernels *k, const float *y, const float *dy, size_t n, float *mask,
                  float *dx) {
  const uint32_t *m = (const uint32_t *)(const void *)mask;
  assert_int_equal(k->act_mask(k, n, y, mask), NNT_OK);
  for (size_t i = 0; i < nnt_mask_words(n) * 32; i++) {
    unsigned got = (m[i / 32] >> (i % 32)) & 1u, want = i < n && y[i] > 0;
    if (got != want)
      fail_msg("n %zu: mask bit %zu is %u, want %u (y %g)", n, i, got, want,
               i < n ? (double)y[i] : 0.0);
  }
  static const nnt_act acts[] = {NNT_ACT_RELU, NNT_ACT_LEAKY_RELU};
  for (size_t a = 0; a < NNT_ARRAY_LEN(acts); a++) {
    float alpha = 0.1f;
    assert_int_equal(k->act_bwd_mask(k, acts[a], alpha, n, mask, dy, dx), NNT_OK);
    for (size_t i = 0; i < n; i++) {
      float want = y[i] > 0 ? dy[i] : acts[a] == NNT_ACT_RELU ? 0.0f : alpha * dy[i];
      if (bits(dx[i]) != bits(want))
        fail_msg("n %zu act %zu: dx[%zu] %g (0x%08x), want %g (0x%08x)", n, a, i,
                 (double)dx[i], bits(dx[i]), (double)want, bits(want));
    }
  }
}

static void test_against_select(void **state) {
  (void)state;
  const nnt_kernels *k = nnt_kernels_cpu();
  nnt_rng r;
  nnt_rng_seed(&r, 11);
  nnt_err e = {0};
  for (size_t li = 0; li < NNT_ARRAY_LEN(LENS); li++) {
    size_t n = LENS[li];
    float *y = malloc(n * sizeof *y), *dy = malloc(n * sizeof *dy);
    float *mask = malloc(nnt_mask_words(n) * sizeof *mask), *dx = malloc(n * sizeof *dx);
    fill(&r, y, n);
    fill(&r, dy, n);
    for (unsigned t = 1; t <= 2; t++) {
      assert_int_equal(nnt_cpu_set_threads(t, &e), NNT_OK);
      check(k, y, dy, n, mask, dx);
    }
    assert_int_equal(nnt_cpu_set_threads(1, &e), NNT_OK);
    free(y), free(dy), free(mask), free(dx);
  }
}

static void test_refusals(void **state) {
  (void)state;
  const nnt_kernels *k = nnt_kernels_cpu();
  float v[2] = {0};
  assert_int_equal(k->act_bwd_mask(k, NNT_ACT_SIGMOID, 0.0f, 1, v, v, v), NNT_ERR_INVAL);
  assert_int_equal(k->act_bwd_mask(k, NNT_ACT_TANH, 0.0f, 1, v, v, v), NNT_ERR_INVAL);
}

/* w - lr * g with a result below the smallest normal float made +0 */
static void test_sgd(void **state) {
  (void)state;
  const nnt_kernels *k = nnt_kernels_cpu();
  nnt_rng r;
  nnt_rng_seed(&r, 12);
  for (size_t li = 0; li < NNT_ARRAY_LEN(LENS); li++) {
    size_t n = LENS[li];
    float *w = malloc(n * sizeof *w), *g = malloc(n * sizeof *g), *want = malloc(n * sizeof *w);
    tu_fill_uniform(&r, w, n, -1.0f, 1.0f);
    tu_fill_uniform(&r, g, n, -1.0f, 1.0f);
    const float lr = 0.01f;
    for (size_t i = 0; i < n; i += 5) /* results that are subnormal, or exactly 0 */
      w[i] = lr * g[i] + (i % 2 ? 1e-39f : 0.0f);
    for (size_t i = 0; i < n; i++) {
      float v = w[i] - lr * g[i];
      want[i] = fpclassify(v) == FP_SUBNORMAL || v == 0 ? 0.0f : v;
    }
    assert_int_equal(k->sgd_step(k, n, lr, g, w, NULL), NNT_OK);
    for (size_t i = 0; i < n; i++)
      if (bits(w[i]) != bits(want[i]))
        fail_msg("n %zu: w[%zu] %g, want %g", n, i, (double)w[i], (double)want[i]);
    free(w), free(g), free(want);
  }
}

/* Adam on each code path against the plain loop's arithmetic written out
 * here, bit for bit: moments and weights whose results are subnormal
 * (made +0), subnormal inputs and intermediates (0 where the CPU's
 * updates flush them, nnt_cpu_update_flushes), zeros, a NaN and an
 * infinity in the gradient, AdamW's decay, lengths around the vectors' 8
 * and 16; and the kernel table's adam_step (the widest path, on the
 * compute threads) the same. */
static int g_fz; /* take subnormal operands and results as 0 (signed) */
static float fz(float x) { return g_fz && fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x; }
static float stored(float x) { return fpclassify(x) == FP_SUBNORMAL || x == 0 ? 0.0f : x; }

static void adam_want(size_t n, float lr, float b1, float b2, float eps, float ws,
                      const float *g, float *m, float *v, float *w) {
  for (size_t i = 0; i < n; i++) {
    float gi = fz(g[i]), wi = fz(w[i]);
    if (ws != 1.0f)
      w[i] = wi = fz(wi * ws);
    float mi = fz(fz(b1 * fz(m[i])) + fz((1 - b1) * gi));
    m[i] = stored(mi);
    float vi = fz(fz(b2 * fz(v[i])) + fz(fz((1 - b2) * gi) * gi));
    v[i] = stored(vi);
    float step = fz(fz(lr * m[i]) / fz(fz(sqrtf(v[i])) + eps));
    w[i] = stored(fz(wi - step));
  }
}

static void test_adam(void **state) {
  (void)state;
  const nnt_kernels *k = nnt_kernels_cpu();
  static const int paths[] = {NNT_BLAS_AVX512, NNT_BLAS_AVX2, NNT_BLAS_SSE, -1};
  nnt_rng r;
  nnt_rng_seed(&r, 13);
  g_fz = nnt_cpu_update_flushes();
  for (size_t li = 0; li < NNT_ARRAY_LEN(LENS); li++) {
    size_t n = LENS[li], sz = n * sizeof(float);
    float *g = malloc(sz), *m0 = malloc(sz), *v0 = malloc(sz), *w0 = malloc(sz);
    float *m = malloc(sz), *v = malloc(sz), *w = malloc(sz);
    float *mw = malloc(sz), *vw = malloc(sz), *ww = malloc(sz);
    tu_fill_uniform(&r, g, n, -1.0f, 1.0f);
    tu_fill_uniform(&r, m0, n, -0.1f, 0.1f);
    tu_fill_uniform(&r, v0, n, 0.0f, 0.01f);
    tu_fill_uniform(&r, w0, n, -1.0f, 1.0f);
    for (size_t i = 0; i < n; i += 3) { /* a moment decaying into the subnormals */
      g[i] = 0.0f;
      m0[i] = i % 2 ? 1.1e-38f : -1.3e-38f;
      v0[i] = 1.2e-38f;
    }
    for (size_t i = 1; i < n; i += 11) /* w - step just subnormal, or 0 */
      g[i] = 1e-30f, m0[i] = 0.0f, w0[i] = i % 2 ? 0.0f : 1e-39f;
    for (size_t i = 2; i < n; i += 13) /* a subnormal gradient, or a tiny one whose */
      g[i] = i % 2 ? 3e-39f : 2e-20f, m0[i] = 1e-36f; /* square and lr_t m are */
    if (n > 40)
      g[17] = NAN, g[38] = INFINITY;
    for (int ws = 0; ws < 2; ws++) {
      float wscale = ws ? 0.999f : 1.0f;
      memcpy(mw, m0, sz), memcpy(vw, v0, sz), memcpy(ww, w0, sz);
      adam_want(n, 1e-3f, 0.9f, 0.999f, 1e-7f, wscale, g, mw, vw, ww);
      for (size_t p = 0; p < NNT_ARRAY_LEN(paths); p++) {
        memcpy(m, m0, sz), memcpy(v, v0, sz), memcpy(w, w0, sz);
        if (paths[p] >= 0)
          nnt_cpu_adam_path(paths[p], n, 1e-3f, 0.9f, 0.999f, 1e-7f, wscale, g, m, v, w);
        else
          assert_int_equal(k->adam_step(k, n, 1e-3f, 0.9f, 0.999f, 1e-7f, wscale, g, m, v, w,
                                        NULL),
                           NNT_OK);
        for (size_t i = 0; i < n; i++)
          if (bits(m[i]) != bits(mw[i]) || bits(v[i]) != bits(vw[i]) ||
              bits(w[i]) != bits(ww[i]))
            fail_msg("n %zu path %d wscale %g: [%zu] m %a v %a w %a, want %a %a %a", n,
                     paths[p], (double)wscale, i, (double)m[i], (double)v[i], (double)w[i],
                     (double)mw[i], (double)vw[i], (double)ww[i]);
      }
    }
    free(g), free(m0), free(v0), free(w0), free(m), free(v), free(w);
    free(mw), free(vw), free(ww);
  }
}

static void test_first_nonfinite(void **state) {
  (void)state;
  static const size_t lens[] = {1, 7, 8, 15, 16, 17, 31, 32, 33, 64, 100};
  static const float bad[] = {NAN, -NAN, INFINITY, -INFINITY};
  float x[100];
  for (size_t li = 0; li < NNT_ARRAY_LEN(lens); li++) {
    size_t n = lens[li];
    for (size_t i = 0; i < n; i++) /* the largest finite values, zeros, subnormals */
      x[i] = i % 4 == 0 ? FLT_MAX : i % 4 == 1 ? -FLT_MAX : i % 4 == 2 ? -0.0f : 1e-40f;
    assert_int_equal(nnt_first_nonfinite(x, n), n);
    for (size_t at = 0; at < n; at++)
      for (size_t b = 0; b < NNT_ARRAY_LEN(bad); b++) {
        float keep = x[at];
        x[at] = bad[b];
        if (nnt_first_nonfinite(x, n) != at)
          fail_msg("n %zu: %g at %zu found at %zu", n, (double)bad[b], at,
                   nnt_first_nonfinite(x, n));
        x[at] = keep;
      }
  }
}

/* Long enough to be scanned over two threads (train_check.c's SCAN_PART,
 * 16384 values a run at least): a value that is not finite in either
 * thread's run, at its edges, and two of them (the first is named). */
static void test_first_nonfinite_threads(void **state) {
  (void)state;
  static const size_t lens[] = {32768, 32769, 70001};
  tu_two_threads();
  for (size_t li = 0; li < NNT_ARRAY_LEN(lens); li++) {
    size_t n = lens[li], h = n / 2;
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++)
      x[i] = i % 3 == 0 ? FLT_MAX : i % 3 == 1 ? -0.0f : 1e-40f;
    unsigned long jobs = nnt_cpu_pool_jobs();
    assert_int_equal(nnt_first_nonfinite(x, n), n);
    assert_true(nnt_cpu_pool_jobs() > jobs); /* it was split */
    const size_t at[] = {0, 1, h - 1, h, h + 1, n - 2, n - 1};
    for (size_t a = 0; a < NNT_ARRAY_LEN(at); a++) {
      float keep = x[at[a]];
      x[at[a]] = a % 2 ? NAN : -INFINITY;
      if (nnt_first_nonfinite(x, n) != at[a])
        fail_msg("n %zu: bad value at %zu found at %zu", n, at[a], nnt_first_nonfinite(x, n));
      x[at[a]] = keep;
    }
    x[n - 1] = NAN; /* two: the first is named */
    x[h - 1] = INFINITY;
    assert_int_equal(nnt_first_nonfinite(x, n), h - 1);
    free(x);
  }
  tu_one_thread();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_against_select),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_sgd),
      cmocka_unit_test(test_adam),
      cmocka_unit_test(test_first_nonfinite),
      cmocka_unit_test(test_first_nonfinite_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
