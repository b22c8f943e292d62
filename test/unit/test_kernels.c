/* Each CPU kernel against a naive double-precision reference, on random
 * shapes with odd sizes. */
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/compute/kernels.h"

static const nnt_kernels *K;
static nnt_rng R;

static float *rnd(size_t n) {
  float *x = malloc((n ? n : 1) * sizeof *x);
  tu_fill_uniform(&R, x, n, -2, 2);
  return x;
}

static void expect(const char *what, const float *got, const double *want, size_t n, double tol) {
  for (size_t i = 0; i < n; i++)
    if (fabs(got[i] - want[i]) > tol * fmax(1, fabs(want[i])))
      fail_msg("%s[%zu]: %.7g, expected %.7g", what, i, got[i], want[i]);
}

static void test_gemm(void **state) {
  (void)state;
  const size_t sizes[] = {1, 3, 17, 33, 130};
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++)
      for (size_t si = 0; si < 5; si++) {
        size_t m = sizes[si], n = sizes[(si + 2) % 5], k = sizes[(si + 4) % 5];
        size_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 2;
        float *a = rnd((ta ? k : m) * lda), *b = rnd((tb ? n : k) * ldb), *c = rnd(m * ldc);
        double *want = malloc(m * ldc * sizeof *want);
        float alpha = 0.7f, beta = 0.3f;
        for (size_t i = 0; i < m; i++)
          for (size_t j = 0; j < ldc; j++) {
            if (j >= n) {
              want[i * ldc + j] = c[i * ldc + j]; /* untouched padding */
              continue;
            }
            double s = 0;
            for (size_t p = 0; p < k; p++)
              s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) *
                   (tb ? b[j * ldb + p] : b[p * ldb + j]);
            want[i * ldc + j] = alpha * s + beta * c[i * ldc + j];
          }
        K->gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        expect("gemm", c, want, m * ldc, 1e-4);
        free(a), free(b), free(c), free(want);
      }
}

static void test_elementwise(void **state) {
  (void)state;
  const size_t n = 1031;
  float *a = rnd(n), *b = rnd(n), *y = rnd(n);
  double *w = malloc(n * sizeof *w);
  K->add(n, a, b, y);
  for (size_t i = 0; i < n; i++)
    w[i] = (double)a[i] + b[i];
  expect("add", y, w, n, 1e-6);
  K->sub(n, a, b, y);
  for (size_t i = 0; i < n; i++)
    w[i] = (double)a[i] - b[i];
  expect("sub", y, w, n, 1e-6);
  K->mul(n, a, b, y);
  for (size_t i = 0; i < n; i++)
    w[i] = (double)a[i] * b[i];
  expect("mul", y, w, n, 1e-6);
  memcpy(y, b, n * 4);
  K->axpy(n, 0.5f, a, y);
  for (size_t i = 0; i < n; i++)
    w[i] = b[i] + 0.5 * a[i];
  expect("axpy", y, w, n, 1e-6);
  K->scale(n, -3, y);
  for (size_t i = 0; i < n; i++)
    w[i] *= -3;
  expect("scale", y, w, n, 1e-6);
  double d = 0, s = 0;
  for (size_t i = 0; i < n; i++)
    d += (double)a[i] * b[i], s += a[i];
  assert_true(fabs(K->dot(n, a, b) - d) < 1e-3);
  assert_true(fabs(K->sum(n, a) - s) < 1e-3);
  K->fill(n, 2.5f, y);
  for (size_t i = 0; i < n; i++)
    w[i] = 2.5;
  expect("fill", y, w, n, 0);
  K->copy(n, a, y);
  assert_memory_equal(a, y, n * 4);
  /* rows */
  size_t rows = 7, cols = 13;
  float *bias = rnd(cols), *x = rnd(rows * cols), *out = rnd(cols);
  memcpy(y, x, rows * cols * 4);
  K->add_row_vec(rows, cols, bias, y);
  for (size_t i = 0; i < rows * cols; i++)
    w[i] = (double)x[i] + bias[i % cols];
  expect("add_row_vec", y, w, rows * cols, 1e-6);
  float keep = out[0];
  K->sum_rows(rows, cols, x, 1.0f, out);
  double cs = keep;
  for (size_t r = 0; r < rows; r++)
    cs += x[r * cols];
  assert_true(fabs(out[0] - cs) < 1e-4);
  free(a), free(b), free(y), free(w), free(bias), free(x), free(out);
}

static double ref_act(nnt_act a, double x) {
  double sp = log1p(exp(x)), sg = 1 / (1 + exp(-x));
  switch (a) {
  case NNT_ACT_RELU: return x > 0 ? x : 0;
  case NNT_ACT_LEAKY_RELU: return x > 0 ? x : 0.01 * x;
  case NNT_ACT_SIGMOID: return sg;
  case NNT_ACT_TANH: return tanh(x);
  case NNT_ACT_SWISH: return x * sg;
  case NNT_ACT_GELU: return 0.5 * x * (1 + erf(x / sqrt(2)));
  case NNT_ACT_ELU: return x > 0 ? x : exp(x) - 1;
  case NNT_ACT_SELU: return 1.0507009873554805 * (x > 0 ? x : 1.6732632423543772 * (exp(x) - 1));
  case NNT_ACT_SOFTPLUS: return sp;
  case NNT_ACT_MISH: return x * tanh(sp);
  default: return x;
  }
}

static void test_activations(void **state) {
  (void)state;
  const size_t n = 333;
  float *x = rnd(n), *y = malloc(n * 4);
  double *w = malloc(n * sizeof *w);
  x[0] = 40, x[1] = -40; /* saturation must stay finite */
  for (int a = NNT_ACT_NONE; a < NNT_ACT__COUNT; a++) {
    if (a == NNT_ACT_SOFTMAX)
      continue;
    float alpha = a == NNT_ACT_LEAKY_RELU ? 0.01f : 1.0f;
    K->act_fwd((nnt_act)a, alpha, n, x, y);
    for (size_t i = 0; i < n; i++)
      w[i] = ref_act((nnt_act)a, x[i]);
    expect(nnt_act_name((nnt_act)a), y, w, n, 1e-5);
  }
  /* softmax rows sum to one, and match the reference */
  size_t rows = 3, cols = 111;
  K->softmax_fwd(rows, cols, x, y);
  for (size_t r = 0; r < rows; r++) {
    double mx = -1e30, s = 0;
    for (size_t c = 0; c < cols; c++)
      mx = fmax(mx, x[r * cols + c]);
    for (size_t c = 0; c < cols; c++)
      s += exp(x[r * cols + c] - mx);
    for (size_t c = 0; c < cols; c++)
      w[r * cols + c] = exp(x[r * cols + c] - mx) / s;
  }
  expect("softmax", y, w, rows * cols, 1e-5);
  nnt_act a;
  assert_int_equal(nnt_act_from_name("Leaky_ReLU", &a), NNT_OK);
  assert_int_equal(a, NNT_ACT_LEAKY_RELU);
  assert_int_equal(nnt_act_from_name("sparkle", &a), NNT_ERR_INVAL);
  free(x), free(y), free(w);
}

static void test_losses_and_updates(void **state) {
  (void)state;
  size_t rows = 5, cols = 7, n = rows * cols;
  float *p = malloc(n * 4), *lab = calloc(n, 4), *dx = malloc(n * 4), *x = rnd(n);
  K->softmax_fwd(rows, cols, x, p);
  double want = 0;
  for (size_t r = 0; r < rows; r++) {
    lab[r * cols + r % cols] = 1;
    want -= log(p[r * cols + r % cols] + 1e-20);
  }
  assert_true(fabs(K->xent_softmax_fwd(rows, cols, p, lab) - want / rows) < 1e-5);
  K->xent_softmax_bwd(rows, cols, p, lab, dx);
  assert_true(fabs(dx[0] - (p[0] - lab[0]) / rows) < 1e-7);
  double m = 0;
  for (size_t i = 0; i < n; i++)
    m += ((double)x[i] - lab[i]) * (x[i] - lab[i]);
  assert_true(fabs(K->mse_fwd(n, x, lab) - m / n) < 1e-5);
  /* adam step, one element by hand */
  float w = 1, g = 0.5f, mm = 0, v = 0;
  K->adam_step(1, 0.1f, 0.9f, 0.999f, 1e-7f, &g, &mm, &v, &w);
  double em = 0.05, ev = 0.001 * 0.25;
  assert_true(fabs(mm - em) < 1e-4 * em && fabs(v - ev) < 1e-4 * ev);
  assert_true(fabs(w - (1 - 0.1 * em / (sqrt(ev) + 1e-7))) < 1e-4);
  K->sgd_step(1, 0.1f, &g, &w);
  /* dropout keeps about 1 - rate, scaled */
  float *mask = malloc(10000 * 4);
  nnt_rng r;
  nnt_rng_seed(&r, 1);
  K->dropout_mask(10000, 0.25f, &r, mask);
  size_t kept = 0;
  for (size_t i = 0; i < 10000; i++) {
    kept += mask[i] != 0;
    assert_true(mask[i] == 0 || fabsf(mask[i] - 1 / 0.75f) < 1e-6);
  }
  assert_in_range(kept, 7200, 7800);
  free(p), free(lab), free(dx), free(x), free(mask);
}

int main(void) {
  K = nnt_kernels_cpu();
  nnt_rng_seed(&R, 2024);
  nnt_cpu_set_threads(1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemm), cmocka_unit_test(test_elementwise),
      cmocka_unit_test(test_activations), cmocka_unit_test(test_losses_and_updates)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
