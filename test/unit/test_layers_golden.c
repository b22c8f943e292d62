/* fully_connected, every activation and every loss against PyTorch
 * (test/golden/gen_layers.py writes test/golden/layers/; its docstring gives
 * each file's layout). The cases complement test_golden.c: 4-D inputs with
 * odd sizes, no bias, one unit, activations where naive formulas overflow,
 * soft labels, and the outputs of the loss layers.
 *
 * Tolerance: 1e-5 relative to max(1, |reference|). The reference is float64
 * rounded once to float32; our float32 kernels round each operation, which
 * for the sums here (at most 33 terms) and libm's float functions stays
 * within a few 1e-7. */
#include "fd_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-5

static void fc_case(const char *name, nnt_dim in, unsigned unit, int bias) {
  size_t n;
  float *g = tu_golden_layer(name, &n);
  size_t ni = nnt_dim_len(in), k = in.w, no = ni / k * unit;
  const float *x = g, *w = x + ni, *b = w + k * unit, *r = b + (bias ? unit : 0);
  const float *y = r + no, *dx = y + no, *dw = dx + ni, *db = dw + k * unit;
  assert_int_equal(n, (size_t)(db + (bias ? unit : 0) - g));
  char u[16];
  snprintf(u, sizeof u, "%u", unit);
  const char *props[] = {"unit", u, "disable_bias", bias ? "false" : "true", NULL};
  const float *weights[] = {w, b};
  fd_harness h;
  fd_run_golden(&h, "fully_connected", props, in, x, weights, r, NULL);
  assert_int_equal(h.fc.n_w, bias ? 2 : 1);
  assert_true(nnt_dim_eq(h.out.dim, nnt_dim_make(in.b, in.c, in.h, unit)));
  tu_expect_close(h.out.data, y, no, TOL, "%s out", name);
  tu_expect_close(h.din.data, dx, ni, TOL, "%s dx", name);
  tu_expect_close(h.gw[0].data, dw, k * unit, TOL, "%s dW", name);
  if (bias) {
    tu_expect_close(h.gw[1].data, db, unit, TOL, "%s db", name);
  }
  fd_teardown(&h);
  free(g);
}

static void test_fully_connected(void **state) {
  (void)state;
  fc_case("fc_4d_nobias", nnt_dim_make(2, 3, 2, 5), 4, 0);
  fc_case("fc_unit1", nnt_dim_make(3, 1, 1, 6), 1, 1);
  fc_case("fc_wide", nnt_dim_make(2, 1, 1, 33), 17, 1);
}

static void test_activations(void **state) {
  (void)state;
  const char *acts[] = {"relu", "leaky_relu", "sigmoid", "tanh", "softmax", "swish",
                        "gelu", "elu", "selu", "softplus", "mish", "none"};
  const nnt_dim in = nnt_dim_make(2, 2, 3, 7);
  const size_t len = nnt_dim_len(in);
  for (size_t i = 0; i < NNT_ARRAY_LEN(acts); i++) {
    char name[64];
    snprintf(name, sizeof name, "act_%s", acts[i]);
    size_t n;
    float *g = tu_golden_layer(name, &n);
    assert_int_equal(n, 4 * len);
    const char *props[] = {"activation", acts[i], NULL};
    fd_harness h;
    fd_run_golden(&h, "activation", props, in, g, NULL, g + len, NULL);
    tu_expect_close(h.out.data, g + 2 * len, len, TOL, "%s out", acts[i]);
    tu_expect_close(h.din.data, g + 3 * len, len, TOL, "%s dx", acts[i]);
    fd_teardown(&h);
    free(g);
  }
}

static void loss_case(const char *type, nnt_dim in) {
  char name[64];
  snprintf(name, sizeof name, "loss_%s", type);
  size_t n, len = nnt_dim_len(in);
  float *g = tu_golden_layer(name, &n);
  assert_int_equal(n, 4 * len + 1);
  const float *x = g, *label = x + len, *out = label + len, *loss = out + len, *dx = loss + 1;
  fd_harness h;
  fd_run_golden(&h, type, NULL, in, x, NULL, NULL, label);
  if (!(fabs(h.lossv - *loss) <= TOL * fmax(1, fabs(*loss))))
    fail_msg("%s loss %.8g, PyTorch %.8g", type, h.lossv, *loss);
  tu_expect_close(h.out.data, out, len, TOL, "%s", type);
  tu_expect_close(h.din.data, dx, len, TOL, "%s", type);
  fd_teardown(&h);
  free(g);
}

static void test_losses(void **state) {
  (void)state;
  loss_case("cross_softmax", nnt_dim_make(3, 1, 2, 5));
  loss_case("cross_sigmoid", nnt_dim_make(2, 1, 3, 4));
  loss_case("mse", nnt_dim_make(2, 2, 2, 3));
}

int main(void) {
  assert_int_equal(nnt_cpu_set_threads(1, NULL), NNT_OK);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fully_connected),
      cmocka_unit_test(test_activations),
      cmocka_unit_test(test_losses),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
