/* Each CPU kernel against a naive double-precision reference, on random
 * shapes with odd sizes (1, 3, 17, 33, 130, ...), including the aliasing and
 * overwrite promises of kernels.h.
 *
 * Tolerances: a float32 kernel that sums k terms differs from the exact sum
 * by about k * 6e-8 relative to the sum of magnitudes; every check below is
 * relative to max(1, |reference|) and uses 1e-5 for single roundings and
 * pointwise functions (a few ulps of float libm), 1e-4 for sums of up to a
 * few hundred terms (gemm with k = 130). */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/kernels.h"
#include "nntrainer/philox.h"

static const nnt_kernels *K;
static nnt_rng R;

static const size_t SIZES[] = {1, 3, 17, 33, 130};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])

static float *rnd(size_t n, float lo, float hi) { return tu_rand(&R, n, lo, hi); }

/* The scalar entries write one float; each must return NNT_OK. */
static float dot1(size_t n, const float *a, const float *b) {
  float v = NAN;
  assert_int_equal(K->dot(K, n, a, b, &v), NNT_OK);
  return v;
}
static float sum1(size_t n, const float *a) {
  float v = NAN;
  assert_int_equal(K->sum(K, n, a, &v), NNT_OK);
  return v;
}
static float xent_softmax1(size_t rows, size_t cols, const float *p, const float *lab) {
  float v = NAN;
  assert_int_equal(K->xent_softmax_fwd(K, rows, cols, p, lab, &v), NNT_OK);
  return v;
}
static float xent_sigmoid1(size_t rows, size_t cols, const float *x, const float *lab) {
  float v = NAN;
  assert_int_equal(K->xent_sigmoid_fwd(K, rows, cols, x, lab, &v), NNT_OK);
  return v;
}
static float mse1(size_t n, const float *y, const float *lab) {
  float v = NAN;
  assert_int_equal(K->mse_fwd(K, n, y, lab, &v), NNT_OK);
  return v;
}

/* ---- gemm ---------------------------------------------------------------- */

static void gemm_case(int ta, int tb, size_t m, size_t n, size_t k, float alpha, float beta,
                      size_t pad) {
  size_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + (pad ? 1 : 0), ldc = n + pad + 2;
  size_t arows = ta ? k : m, brows = tb ? n : k;
  float *a = rnd(arows * lda, -2, 2), *b = rnd(brows * ldb, -2, 2), *c = rnd(m * ldc, -2, 2);
  double *want = tu_dzeros(m * ldc);
  if (beta == 0)
    for (size_t i = 0; i < m; i++)
      for (size_t j = 0; j < n; j++)
        c[i * ldc + j] = NAN; /* beta 0 must not read C */
  for (size_t i = 0; i < m; i++)
    for (size_t j = 0; j < ldc; j++) {
      if (j >= n) {
        want[i * ldc + j] = c[i * ldc + j]; /* the gap between rows is untouched */
        continue;
      }
      double s = 0;
      for (size_t p = 0; p < k; p++)
        s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) *
             (tb ? b[j * ldb + p] : b[p * ldb + j]);
      want[i * ldc + j] = alpha * s + (beta == 0 ? 0 : beta * (double)c[i * ldc + j]);
    }
  K->gemm(K, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  char what[96];
  snprintf(what, sizeof what, "gemm ta=%d tb=%d m=%zu n=%zu k=%zu", ta, tb, m, n, k);
  tu_expect_vs(what, c, want, m * ldc, 1e-4);
  free(a), free(b), free(c), free(want);
}

static void test_gemm(void **state) {
  (void)state;
  const float ab[][2] = {{1, 0}, {0.7f, 0.3f}, {-1.5f, 1}, {2, 0}};
  unsigned t = 0;
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++)
      for (size_t i = 0; i < NSIZES; i++)
        for (size_t j = 0; j < NSIZES; j++)
          for (size_t l = 0; l < NSIZES; l += 2, t++)
            gemm_case(ta, tb, SIZES[i], SIZES[j], SIZES[l], ab[t % 4][0], ab[t % 4][1],
                      t % 3 == 0 ? 0 : 3);
}

static void test_gemm_empty(void **state) {
  (void)state;
  /* k == 0: C = beta C, and beta == 0 clears it (NaN included) */
  float c[6] = {1, 2, 3, 4, 5, 6}, a[1] = {9}, b[1] = {9};
  K->gemm(K, 0, 0, 2, 3, 0, 1.0f, a, 0, b, 3, 0.5f, c, 3);
  for (int i = 0; i < 6; i++)
    assert_true(c[i] == 0.5f * (i + 1));
  c[0] = NAN; /* (cmocka's float asserts let NaN through, hence ==) */
  K->gemm(K, 0, 1, 2, 2, 0, 1.0f, a, 0, b, 0, 0.0f, c, 3);
  assert_true(c[0] == 0.0f && c[1] == 0.0f && c[3] == 0.0f && c[4] == 0.0f);
  assert_true(c[2] == 1.5f); /* outside the 2 x 2 block */
  /* m == 0 or n == 0: nothing is touched */
  K->gemm(K, 0, 0, 0, 3, 2, 1.0f, a, 2, b, 3, 0.0f, c, 3);
  K->gemm(K, 0, 0, 2, 0, 2, 1.0f, a, 2, b, 1, 0.0f, c, 3);
  assert_true(c[2] == 1.5f && c[5] == 3.0f);
}

/* ---- vectors ------------------------------------------------------------- */

static void test_vector_ops(void **state) {
  (void)state;
  const size_t ns[] = {1, 3, 17, 33, 130, 1031};
  for (size_t t = 0; t < NNT_ARRAY_LEN(ns); t++) {
    size_t n = ns[t];
    float *a = rnd(n, -2, 2), *b = rnd(n, -2, 2), *y = rnd(n, -2, 2);
    double *w = tu_dzeros(n);
    K->add(K, n, a, b, y);
    for (size_t i = 0; i < n; i++)
      w[i] = (double)a[i] + b[i];
    tu_expect_vs("add", y, w, n, 1e-6);
    K->sub(K, n, a, b, y);
    for (size_t i = 0; i < n; i++)
      w[i] = (double)a[i] - b[i];
    tu_expect_vs("sub", y, w, n, 1e-6);
    K->mul(K, n, a, b, y);
    for (size_t i = 0; i < n; i++)
      w[i] = (double)a[i] * b[i];
    tu_expect_vs("mul", y, w, n, 1e-6);
    /* exact aliasing of the output with an input */
    float *a2 = tu_dup(a, n);
    K->add(K, n, a2, b, a2);
    for (size_t i = 0; i < n; i++)
      w[i] = (double)a[i] + b[i];
    tu_expect_vs("add y=a", a2, w, n, 1e-6);
    memcpy(a2, a, n * 4);
    K->mul(K, n, b, a2, a2);
    for (size_t i = 0; i < n; i++)
      w[i] = (double)a[i] * b[i];
    tu_expect_vs("mul y=b", a2, w, n, 1e-6);
    memcpy(y, b, n * 4);
    K->axpy(K, n, 0.5f, a, y);
    for (size_t i = 0; i < n; i++)
      w[i] = b[i] + 0.5 * a[i];
    tu_expect_vs("axpy", y, w, n, 1e-6);
    K->scale(K, n, -3, y);
    for (size_t i = 0; i < n; i++)
      w[i] *= -3;
    tu_expect_vs("scale", y, w, n, 1e-6);
    double d = 0, s = 0, mag = 0;
    for (size_t i = 0; i < n; i++)
      d += (double)a[i] * b[i], s += a[i], mag += fabs(a[i]) * 2;
    /* a sum's error scales with the magnitudes summed, not with the sum */
    assert_true(fabs(dot1(n, a, b) - d) <= 1e-6 * mag + 1e-6);
    assert_true(fabs(sum1(n, a) - s) <= 1e-6 * mag + 1e-6);
    K->fill(K, n, 2.5f, y);
    for (size_t i = 0; i < n; i++)
      assert_true(y[i] == 2.5f);
    K->copy(K, n, a, y);
    assert_memory_equal(a, y, n * 4);
    K->copy(K, n, y, y); /* exact alias: unchanged */
    assert_memory_equal(a, y, n * 4);
    free(a), free(b), free(y), free(a2), free(w);
  }
}

static void test_row_col_ops(void **state) {
  (void)state;
  const size_t shapes[][2] = {{1, 1}, {3, 17}, {33, 1}, {17, 130}, {130, 3}};
  for (size_t t = 0; t < NNT_ARRAY_LEN(shapes); t++) {
    size_t rows = shapes[t][0], cols = shapes[t][1], n = rows * cols;
    float *x = rnd(n, -2, 2), *y = tu_dup(x, n), *rv = rnd(cols, -1, 1), *cv = rnd(rows, -1, 1);
    double *w = tu_dzeros(n);
    K->add_row_vec(K, rows, cols, rv, y);
    for (size_t i = 0; i < n; i++)
      w[i] = (double)x[i] + rv[i % cols];
    tu_expect_vs("add_row_vec", y, w, n, 1e-6);
    memcpy(y, x, n * 4);
    K->add_col_vec(K, rows, cols, cv, y);
    for (size_t i = 0; i < n; i++)
      w[i] = (double)x[i] + cv[i / cols];
    tu_expect_vs("add_col_vec", y, w, n, 1e-6);
    for (int pass = 0; pass < 2; pass++) {
      float beta = pass ? 0.5f : 0.0f;
      /* sum_rows: out[c] = beta out[c] + sum_r x[r][c] */
      float *out = rnd(cols, -1, 1);
      double *ws = tu_dzeros(cols);
      for (size_t c = 0; c < cols; c++) {
        ws[c] = pass ? beta * (double)out[c] : 0;
        if (!pass)
          out[c] = NAN; /* beta 0 must not read out */
        for (size_t r = 0; r < rows; r++)
          ws[c] += x[r * cols + c];
      }
      K->sum_rows(K, rows, cols, x, beta, out);
      tu_expect_vs("sum_rows", out, ws, cols, 1e-5);
      free(out), free(ws);
      /* sum_cols: out[r] = beta out[r] + sum_c x[r][c] */
      out = rnd(rows, -1, 1);
      ws = tu_dzeros(rows);
      for (size_t r = 0; r < rows; r++) {
        ws[r] = pass ? beta * (double)out[r] : 0;
        if (!pass)
          out[r] = NAN;
        for (size_t c = 0; c < cols; c++)
          ws[r] += x[r * cols + c];
      }
      float *out0 = tu_dup(out, rows);
      K->sum_cols(K, rows, cols, x, beta, out);
      tu_expect_vs("sum_cols", out, ws, rows, 1e-5);
      { /* the plain C loop gives the AVX-512 code's bits, where the CPU has
         * it (each row's sums in the same order) */
        int was = nnt_cpu_vec_path(NNT_BLAS_SSE);
        K->sum_cols(K, rows, cols, x, beta, out0);
        nnt_cpu_vec_path(was);
        assert_memory_equal(out0, out, rows * sizeof *out);
      }
      free(out0);
      free(out), free(ws);
    }
    free(x), free(y), free(rv), free(cv), free(w);
  }
}

/* ---- activations ----------------------------------------------------------- */

#define SELU_A 1.6732632423543772
#define SELU_S 1.0507009873554805

static double ref_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double ref_softplus(double x) { return x > 30 ? x + log1p(exp(-x)) : log1p(exp(x)); }

static double ref_act(nnt_act a, double x) {
  switch (a) {
  case NNT_ACT_RELU: return x > 0 ? x : 0;
  case NNT_ACT_LEAKY_RELU: return x > 0 ? x : 0.01 * x;
  case NNT_ACT_SIGMOID: return ref_sigmoid(x);
  case NNT_ACT_TANH: return tanh(x);
  case NNT_ACT_SWISH: return x * ref_sigmoid(x);
  case NNT_ACT_GELU: return 0.5 * x * (1 + erf(x / sqrt(2)));
  case NNT_ACT_ELU: return x > 0 ? x : expm1(x);
  case NNT_ACT_SELU: return SELU_S * (x > 0 ? x : SELU_A * expm1(x));
  case NNT_ACT_SOFTPLUS: return ref_softplus(x);
  case NNT_ACT_MISH: return x * tanh(ref_softplus(x));
  default: return x;
  }
}

static double ref_act_prime(nnt_act a, double x) {
  double s = ref_sigmoid(x), t;
  switch (a) {
  case NNT_ACT_RELU: return x > 0 ? 1 : 0;
  case NNT_ACT_LEAKY_RELU: return x > 0 ? 1 : 0.01;
  case NNT_ACT_SIGMOID: return s * (1 - s);
  case NNT_ACT_TANH: t = tanh(x); return 1 - t * t;
  case NNT_ACT_SWISH: return s + x * s * (1 - s);
  case NNT_ACT_GELU: return 0.5 * (1 + erf(x / sqrt(2))) + x * exp(-0.5 * x * x) / sqrt(2 * M_PI);
  case NNT_ACT_ELU: return x > 0 ? 1 : exp(x);
  case NNT_ACT_SELU: return SELU_S * (x > 0 ? 1 : SELU_A * exp(x));
  case NNT_ACT_SOFTPLUS: return s;
  case NNT_ACT_MISH: t = tanh(ref_softplus(x)); return t + x * (1 - t * t) * s;
  default: return 1;
  }
}

/* Random values in [-6, 6) with the extremes where naive formulas overflow. */
static float *act_inputs(size_t n) {
  static const float edge[] = {0, 1e-3f, -1e-3f, 20, -20, 40, -40, 90, -90, 0.5f, -0.5f};
  float *x = rnd(n, -6, 6);
  for (size_t i = 0; i < NNT_ARRAY_LEN(edge) && i < n; i++)
    x[i] = edge[i];
  return x;
}

static void test_act_fwd(void **state) {
  (void)state;
  const size_t n = 333;
  float *x = act_inputs(n), *y = malloc(n * 4);
  double *w = tu_dzeros(n);
  for (int a = NNT_ACT_NONE; a < NNT_ACT__COUNT; a++) {
    if (a == NNT_ACT_SOFTMAX)
      continue;
    float alpha = a == NNT_ACT_LEAKY_RELU ? 0.01f : 1.0f;
    K->act_fwd(K, (nnt_act)a, alpha, n, x, y);
    for (size_t i = 0; i < n; i++)
      w[i] = ref_act((nnt_act)a, x[i]);
    tu_expect_vs(nnt_act_name((nnt_act)a), y, w, n, 1e-5);
    float *z = tu_dup(x, n); /* y may alias x */
    K->act_fwd(K, (nnt_act)a, alpha, n, z, z);
    assert_memory_equal(z, y, n * 4);
    free(z);
  }
  free(x), free(y), free(w);
}

static void test_act_bwd(void **state) {
  (void)state;
  const size_t n = 257;
  float *x = act_inputs(n), *y = malloc(n * 4), *dy = rnd(n, -1, 1), *dx = malloc(n * 4);
  double *w = tu_dzeros(n);
  for (int a = NNT_ACT_NONE; a < NNT_ACT__COUNT; a++) {
    if (a == NNT_ACT_SOFTMAX)
      continue;
    nnt_act act = (nnt_act)a;
    float alpha = a == NNT_ACT_LEAKY_RELU ? 0.01f : 1.0f;
    K->act_fwd(K, act, alpha, n, x, y);
    /* the kernel gets only what nnt_act_bwd_needs_output_only promises */
    int out_only = nnt_act_bwd_needs_output_only(act);
    const float *xa = out_only ? NULL : x, *ya = out_only ? y : NULL;
    K->act_bwd(K, act, alpha, n, xa, ya, dy, dx);
    for (size_t i = 0; i < n; i++)
      w[i] = dy[i] * ref_act_prime(act, x[i]);
    char what[64];
    snprintf(what, sizeof what, "%s'", nnt_act_name(act));
    tu_expect_vs(what, dx, w, n, 1e-5);
    float *d2 = tu_dup(dy, n); /* dx may alias dy */
    K->act_bwd(K, act, alpha, n, xa, ya, d2, d2);
    assert_memory_equal(d2, dx, n * 4);
    free(d2);
  }
  free(x), free(y), free(dy), free(dx), free(w);
}

static void test_act_names(void **state) {
  (void)state;
  nnt_act a;
  for (int i = 0; i < NNT_ACT__COUNT; i++) {
    assert_int_equal(nnt_act_from_name(nnt_act_name((nnt_act)i), &a), NNT_OK);
    assert_int_equal(a, i);
  }
  assert_int_equal(nnt_act_from_name("Leaky_ReLU", &a), NNT_OK);
  assert_int_equal(a, NNT_ACT_LEAKY_RELU);
  assert_int_equal(nnt_act_from_name("sparkle", &a), NNT_ERR_INVAL);
  assert_int_equal(nnt_act_from_name(NULL, &a), NNT_ERR_INVAL);
  assert_true(nnt_act_bwd_needs_output_only(NNT_ACT_SOFTMAX));
  assert_true(nnt_act_bwd_needs_output_only(NNT_ACT_RELU));
  assert_false(nnt_act_bwd_needs_output_only(NNT_ACT_GELU));
  assert_false(nnt_act_bwd_needs_output_only(NNT_ACT_MISH));
}

static void test_softmax(void **state) {
  (void)state;
  const size_t shapes[][2] = {{1, 1}, {3, 17}, {5, 130}, {33, 3}};
  for (size_t t = 0; t < NNT_ARRAY_LEN(shapes); t++) {
    size_t rows = shapes[t][0], cols = shapes[t][1], n = rows * cols;
    float *x = rnd(n, -5, 5), *y = malloc(n * 4), *dy = rnd(n, -1, 1), *dx = malloc(n * 4);
    for (size_t c = 0; c < cols; c++)
      x[c] += 1000; /* the first row overflows expf without the max shift */
    if (cols > 1)
      x[cols - 1] += 200; /* ... and so does a shift by anything but the max */
    double *w = tu_dzeros(n);
    for (size_t r = 0; r < rows; r++) {
      /* the max of floats in float: gcc 12 for aarch64 fails (an internal
       * compiler error) on a vectorized fmax over floats into a double */
      float mxf = -INFINITY;
      for (size_t c = 0; c < cols; c++)
        mxf = fmaxf(mxf, x[r * cols + c]);
      double mx = mxf, s = 0;
      for (size_t c = 0; c < cols; c++)
        s += exp(x[r * cols + c] - mx);
      for (size_t c = 0; c < cols; c++)
        w[r * cols + c] = exp(x[r * cols + c] - mx) / s;
    }
    K->softmax_fwd(K, rows, cols, x, y);
    tu_expect_vs("softmax", y, w, n, 1e-5);
    float *z = tu_dup(x, n);
    K->softmax_fwd(K, rows, cols, z, z);
    tu_expect_vs("softmax y=x", z, w, n, 1e-5);
    /* backward: dx = y (dy - sum(dy y)) per row */
    for (size_t r = 0; r < rows; r++) {
      double s = 0;
      for (size_t c = 0; c < cols; c++)
        s += (double)dy[r * cols + c] * y[r * cols + c];
      for (size_t c = 0; c < cols; c++)
        w[r * cols + c] = y[r * cols + c] * (dy[r * cols + c] - s);
    }
    K->softmax_bwd(K, rows, cols, y, dy, dx);
    tu_expect_vs("softmax'", dx, w, n, 1e-5);
    K->softmax_bwd(K, rows, cols, y, dy, dy);
    tu_expect_vs("softmax' dx=dy", dy, w, n, 1e-5);
    free(x), free(y), free(dy), free(dx), free(z), free(w);
  }
}

/* ---- losses ---------------------------------------------------------------- */

static void test_xent_softmax(void **state) {
  (void)state;
  const size_t shapes[][2] = {{1, 1}, {5, 7}, {3, 130}, {17, 3}};
  for (size_t t = 0; t < NNT_ARRAY_LEN(shapes); t++) {
    size_t rows = shapes[t][0], cols = shapes[t][1], n = rows * cols;
    float *x = rnd(n, -4, 4), *p = malloc(n * 4), *lab = rnd(n, 0, 1), *dx = malloc(n * 4);
    K->softmax_fwd(K, rows, cols, x, p);
    /* soft labels summing to one in even rows, one-hot in odd ones */
    for (size_t r = 0; r < rows; r++) {
      double s = 0;
      for (size_t c = 0; c < cols; c++)
        s += lab[r * cols + c];
      for (size_t c = 0; c < cols; c++)
        lab[r * cols + c] = r % 2 ? (c == r % cols) : (float)(lab[r * cols + c] / s);
    }
    if (cols > 1) {
      p[0] = 0; /* a zero probability: log(0 + 1e-20) stays finite */
      lab[0] = 0.25f;
    }
    double want = 0;
    for (size_t i = 0; i < n; i++)
      want -= lab[i] * log((double)p[i] + 1e-20);
    tu_expect1("xent_softmax", xent_softmax1(rows, cols, p, lab), want / rows, 1e-5);
    double *w = tu_dzeros(n);
    for (size_t i = 0; i < n; i++)
      w[i] = ((double)p[i] - lab[i]) / rows;
    K->xent_softmax_bwd(K, rows, cols, p, lab, dx);
    tu_expect_vs("xent_softmax'", dx, w, n, 1e-6);
    free(x), free(p), free(lab), free(dx), free(w);
  }
}

static void test_xent_sigmoid_mse(void **state) {
  (void)state;
  const size_t shapes[][2] = {{1, 1}, {4, 5}, {3, 130}};
  for (size_t t = 0; t < NNT_ARRAY_LEN(shapes); t++) {
    size_t rows = shapes[t][0], cols = shapes[t][1], n = rows * cols;
    float *x = rnd(n, -8, 8), *lab = rnd(n, 0, 1), *dx = malloc(n * 4);
    if (n > 4)
      x[0] = 60, x[1] = -60, x[2] = 800, x[3] = -800; /* naive log(1+e^x) overflows */
    double want = 0, *w = tu_dzeros(n);
    for (size_t i = 0; i < n; i++) {
      double xi = x[i];
      want += fmax(xi, 0) - xi * lab[i] + log1p(exp(-fabs(xi)));
      w[i] = (ref_sigmoid(xi) - lab[i]) / n;
    }
    float got = xent_sigmoid1(rows, cols, x, lab);
    assert_true(isfinite(got));
    tu_expect1("xent_sigmoid", got, want / n, 1e-5);
    K->xent_sigmoid_bwd(K, rows, cols, x, lab, dx);
    tu_expect_vs("xent_sigmoid'", dx, w, n, 1e-6);
    /* mse: mean of squares, derivative 2 (y - label) / N */
    want = 0;
    for (size_t i = 0; i < n; i++) {
      double d = (double)x[i] - lab[i];
      want += d * d;
      w[i] = 2 * d / n;
    }
    tu_expect1("mse", mse1(n, x, lab), want / n, 1e-5);
    K->mse_bwd(K, n, x, lab, dx);
    tu_expect_vs("mse'", dx, w, n, 1e-6);
    free(x), free(lab), free(dx), free(w);
  }
}

/* ---- dropout and optimizer updates ------------------------------------------ */

static void test_dropout_mask(void **state) {
  (void)state;
  enum { N = 20000 };
  float *mask = malloc(N * 4), *again = malloc(N * 4);
  const float rates[] = {0.0f, 0.25f, 0.9f};
  for (size_t t = 0; t < NNT_ARRAY_LEN(rates); t++) {
    float rate = rates[t];
    assert_int_equal(K->dropout_mask(K, N, rate, 11, 3, mask), NNT_OK);
    assert_int_equal(K->dropout_mask(K, N, rate, 11, 3, again), NNT_OK);
    assert_memory_equal(mask, again, N * 4); /* a function of (key, stream) */
    size_t kept = 0;
    for (size_t i = 0; i < N; i++) {
      /* element i is the generator's value i of the stream, in any order */
      float keep = nnt_philox_uniform_at(11, 3, i) < rate ? 0.0f : 1 / (1 - rate);
      if (mask[i] != keep)
        fail_msg("mask[%zu] = %g, not %g, at rate %g", i, mask[i], keep, rate);
      kept += mask[i] != 0;
      if (mask[i] != 0 && fabsf(mask[i] - 1 / (1 - rate)) > 1e-6f)
        fail_msg("mask[%zu] = %g at rate %g", i, mask[i], rate);
    }
    /* binomial: 5 standard deviations at most */
    double mean = N * (1.0 - rate), sd = sqrt(N * rate * (1.0 - rate));
    assert_true(fabs((double)kept - mean) <= 5 * sd + 0.5);
    if (rate > 0) {
      /* another stream or key: another mask; a prefix is the same mask */
      assert_int_equal(K->dropout_mask(K, N, rate, 11, 4, again), NNT_OK);
      assert_true(memcmp(mask, again, N * 4) != 0);
      assert_int_equal(K->dropout_mask(K, N, rate, 12, 3, again), NNT_OK);
      assert_true(memcmp(mask, again, N * 4) != 0);
      assert_int_equal(K->dropout_mask(K, 7, rate, 11, 3, again), NNT_OK);
      assert_memory_equal(mask, again, 7 * 4);
    }
  }
  assert_int_equal(K->dropout_mask(K, N, 1.5f, 11, 3, mask), NNT_ERR_INVAL);
  assert_int_equal(K->dropout_mask(K, N, 0.5f, 11, 3, NULL), NNT_ERR_INVAL);
  free(mask), free(again);
}

static void test_optimizer_steps(void **state) {
  (void)state;
  const size_t n = 133;
  float *w = rnd(n, -1, 1), *m = calloc(n, 4), *v = calloc(n, 4), *g = malloc(n * 4);
  double *rw = tu_dzeros(n), *rm = tu_dzeros(n), *rv = tu_dzeros(n);
  for (size_t i = 0; i < n; i++)
    rw[i] = w[i];
  const float b1 = 0.9f, b2 = 0.999f, eps = 1e-7f, lr = 0.01f;
  for (int t = 1; t <= 3; t++) {
    tu_fill_uniform(&R, g, n, -1, 1);
    float lr_t = lr * sqrtf(1 - powf(b2, (float)t)) / (1 - powf(b1, (float)t));
    K->adam_step(K, n, lr_t, b1, b2, eps, 1.0f, g, m, v, w, NULL);
    for (size_t i = 0; i < n; i++) {
      rm[i] = b1 * rm[i] + (1 - (double)b1) * g[i];
      rv[i] = b2 * rv[i] + (1 - (double)b2) * g[i] * g[i];
      rw[i] -= lr_t * rm[i] / (sqrt(rv[i]) + eps);
    }
  }
  tu_expect_vs("adam m", m, rm, n, 1e-5);
  tu_expect_vs("adam v", v, rv, n, 1e-5);
  tu_expect_vs("adam w", w, rw, n, 1e-5);
  K->sgd_step(K, n, 0.5f, g, w, NULL);
  for (size_t i = 0; i < n; i++)
    rw[i] -= 0.5 * g[i];
  tu_expect_vs("sgd w", w, rw, n, 1e-5);
  free(w), free(m), free(v), free(g), free(rw), free(rm), free(rv);
}

/* ---- batch normalization --------------------------------------------------- */

static void test_batch_norm(void **state) {
  (void)state;
  const size_t shapes[][3] = {{3, 4, 5}, {7, 1, 1}, {2, 3, 17}};
  const float eps = 1e-3f;
  for (size_t t = 0; t < NNT_ARRAY_LEN(shapes); t++) {
    size_t outer = shapes[t][0], ch = shapes[t][1], inner = shapes[t][2];
    size_t n = outer * ch * inner, cnt = outer * inner;
    float *x = rnd(n, -3, 3), *g = rnd(ch, 0.5f, 1.5f), *b = rnd(ch, -1, 1);
    float *mean = malloc(ch * 4), *var = malloc(ch * 4), *is = malloc(ch * 4);
    float *xhat = malloc(n * 4), *y = malloc(n * 4), *dy = rnd(n, -1, 1), *dx = malloc(n * 4);
    float *dg = malloc(ch * 4), *db = malloc(ch * 4);
    double *wm = tu_dzeros(ch), *wv = tu_dzeros(ch), *wh = tu_dzeros(n), *wy = tu_dzeros(n), *wdx = tu_dzeros(n);
    double *wdg = tu_dzeros(ch), *wdb = tu_dzeros(ch);
    for (size_t c = 0; c < ch; c++) {
      double s = 0, s2 = 0;
      for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < inner; i++)
          s += x[(o * ch + c) * inner + i];
      wm[c] = s / cnt;
      for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < inner; i++) {
          double d = x[(o * ch + c) * inner + i] - wm[c];
          s2 += d * d;
        }
      wv[c] = s2 / cnt; /* biased */
      double inv = 1 / sqrt(wv[c] + eps), sdy = 0, sdyh = 0;
      for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < inner; i++) {
          size_t k = (o * ch + c) * inner + i;
          wh[k] = (x[k] - wm[c]) * inv;
          wy[k] = g[c] * wh[k] + b[c];
          sdy += dy[k], sdyh += dy[k] * wh[k];
        }
      wdg[c] = sdyh, wdb[c] = sdy;
      for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < inner; i++) {
          size_t k = (o * ch + c) * inner + i;
          wdx[k] = g[c] * inv * (dy[k] - sdy / cnt - wh[k] * sdyh / cnt);
        }
    }
    K->bn_fwd_train(K, outer, ch, inner, x, g, b, eps, mean, var, is, xhat, y);
    tu_expect_vs("bn mean", mean, wm, ch, 1e-5);
    tu_expect_vs("bn var", var, wv, ch, 1e-5);
    tu_expect_vs("bn xhat", xhat, wh, n, 1e-4);
    tu_expect_vs("bn y", y, wy, n, 1e-4);
    float *z = tu_dup(x, n); /* y may alias x */
    K->bn_fwd_train(K, outer, ch, inner, z, g, b, eps, mean, var, is, xhat, z);
    tu_expect_vs("bn y=x", z, wy, n, 1e-4);
    K->bn_bwd(K, outer, ch, inner, dy, xhat, is, g, dx, dg, db);
    tu_expect_vs("bn dx", dx, wdx, n, 1e-4);
    tu_expect_vs("bn dgamma", dg, wdg, ch, 1e-4);
    tu_expect_vs("bn dbeta", db, wdb, ch, 1e-5);
    float *d2 = tu_dup(dy, n); /* dx may alias dy; dgamma and dbeta may be NULL */
    K->bn_bwd(K, outer, ch, inner, d2, xhat, is, g, d2, NULL, NULL);
    tu_expect_vs("bn dx=dy", d2, wdx, n, 1e-4);
    K->bn_bwd(K, outer, ch, inner, dy, xhat, is, g, NULL, dg, NULL);
    tu_expect_vs("bn dgamma only", dg, wdg, ch, 1e-4);
    /* inference with the statistics just computed reproduces y */
    K->bn_fwd_infer(K, outer, ch, inner, x, mean, var, g, b, eps, z);
    tu_expect_vs("bn infer", z, wy, n, 1e-4);
    free(x), free(g), free(b), free(mean), free(var), free(is), free(xhat), free(y);
    free(dy), free(dx), free(dg), free(db), free(z), free(d2);
    free(wm), free(wv), free(wh), free(wy), free(wdx), free(wdg), free(wdb);
  }
}

/* ---- permute, upsample ------------------------------------------------------- */

static void test_permute_upsample(void **state) {
  (void)state;
  const unsigned d[3] = {2, 3, 5}, perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                                 {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  size_t len = 30, b = 3;
  float *x = rnd(b * len, -1, 1), *y = malloc(b * len * 4);
  for (int p = 0; p < 6; p++) {
    const unsigned *pm = perms[p];
    unsigned od[3] = {d[pm[0]], d[pm[1]], d[pm[2]]};
    K->permute3(K, b, d, pm, x, y);
    for (size_t n = 0; n < b; n++)
      for (unsigned i = 0; i < od[0]; i++)
        for (unsigned j = 0; j < od[1]; j++)
          for (unsigned k = 0; k < od[2]; k++) {
            unsigned at[3];
            at[pm[0]] = i, at[pm[1]] = j, at[pm[2]] = k;
            float want = x[n * len + (at[0] * d[1] + at[1]) * d[2] + at[2]];
            assert_true(y[n * len + (i * od[1] + j) * od[2] + k] == want);
          }
  }
  free(x), free(y);
  /* nearest upsampling by (2, 3) and its adjoint */
  size_t rows = 3, h = 2, w = 5, kh = 2, kw = 3, nin = rows * h * w, nout = nin * kh * kw;
  float *u = rnd(nin, -1, 1), *uy = malloc(nout * 4), *dy = rnd(nout, -1, 1);
  float *dx = malloc(nin * 4);
  K->upsample_nearest_fwd(K, rows, h, w, kh, kw, u, uy);
  for (size_t r = 0; r < rows; r++)
    for (size_t i = 0; i < h * kh; i++)
      for (size_t j = 0; j < w * kw; j++)
        assert_true(uy[(r * h * kh + i) * w * kw + j] == u[(r * h + i / kh) * w + j / kw]);
  K->upsample_nearest_bwd(K, rows, h, w, kh, kw, dy, dx);
  double lhs = 0, rhs = 0; /* <up(u), dy> == <u, up'(dy)> */
  for (size_t i = 0; i < nout; i++)
    lhs += (double)uy[i] * dy[i];
  for (size_t i = 0; i < nin; i++)
    rhs += (double)u[i] * dx[i];
  tu_expect1("upsample adjoint", rhs, lhs, 1e-5);
  free(u), free(uy), free(dy), free(dx);
}

int main(void) {
  K = nnt_kernels_cpu();
  nnt_rng_seed(&R, 2024);
  assert_int_equal(nnt_cpu_set_threads(1, NULL), NNT_OK);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemm),          cmocka_unit_test(test_gemm_empty),
      cmocka_unit_test(test_vector_ops),    cmocka_unit_test(test_row_col_ops),
      cmocka_unit_test(test_act_fwd),       cmocka_unit_test(test_act_bwd),
      cmocka_unit_test(test_act_names),     cmocka_unit_test(test_softmax),
      cmocka_unit_test(test_xent_softmax),  cmocka_unit_test(test_xent_sigmoid_mse),
      cmocka_unit_test(test_dropout_mask),  cmocka_unit_test(test_optimizer_steps),
      cmocka_unit_test(test_batch_norm),    cmocka_unit_test(test_permute_upsample),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
