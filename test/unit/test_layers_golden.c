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

static float *golden(const char *name, size_t *n) {
  return tu_read_floats(tu_data_path("golden/layers/%s.bin", name), n);
}

static void expect_close(const char *what, const float *got, const float *want, size_t n) {
  double err = tu_max_rel_err(got, want, n);
  if (err > TOL)
    fail_msg("%s: max relative error %g > %g", what, err, TOL);
}

/* Finalize the layer through the harness, then replace its random input,
 * weights, d_out and label with the golden ones and run forward, then
 * calc_gradient and calc_derivative. */
static void run(fd_harness *h, const char *type, const char *const *props, nnt_dim in,
                const float *x, const float *const *w, const float *r, const float *label) {
  fd_setup(h, type, props, in, 0);
  memcpy(h->in.data, x, nnt_tensor_len(&h->in) * sizeof(float));
  for (unsigned k = 0; k < h->fc.n_w; k++)
    memcpy(h->w[k].data, w[k], nnt_tensor_len(&h->w[k]) * sizeof(float));
  if (label)
    memcpy(h->label.data, label, nnt_tensor_len(&h->label) * sizeof(float));
  h->lossv = 0;
  assert_int_equal(h->l->ops->forward(h->l, &h->ctx), NNT_OK);
  for (size_t i = 0; i < nnt_tensor_len(&h->dout); i++)
    h->dout.data[i] = r ? r[i] : NAN; /* losses must not read d_out */
  if (h->l->ops->calc_gradient)
    assert_int_equal(h->l->ops->calc_gradient(h->l, &h->ctx), NNT_OK);
  assert_int_equal(h->l->ops->calc_derivative(h->l, &h->ctx), NNT_OK);
}

static void fc_case(const char *name, nnt_dim in, unsigned unit, int bias) {
  size_t n;
  float *g = golden(name, &n);
  size_t ni = nnt_dim_len(in), k = in.w, no = ni / k * unit;
  const float *x = g, *w = x + ni, *b = w + k * unit, *r = b + (bias ? unit : 0);
  const float *y = r + no, *dx = y + no, *dw = dx + ni, *db = dw + k * unit;
  assert_int_equal(n, (size_t)(db + (bias ? unit : 0) - g));
  char u[16], what[96];
  snprintf(u, sizeof u, "%u", unit);
  const char *props[] = {"unit", u, "disable_bias", bias ? "false" : "true", NULL};
  const float *weights[] = {w, b};
  fd_harness h;
  run(&h, "fully_connected", props, in, x, weights, r, NULL);
  assert_int_equal(h.fc.n_w, bias ? 2 : 1);
  assert_true(nnt_dim_eq(h.out.dim, nnt_dim_make(in.b, in.c, in.h, unit)));
  snprintf(what, sizeof what, "%s out", name);
  expect_close(what, h.out.data, y, no);
  snprintf(what, sizeof what, "%s dx", name);
  expect_close(what, h.din.data, dx, ni);
  snprintf(what, sizeof what, "%s dW", name);
  expect_close(what, h.gw[0].data, dw, k * unit);
  if (bias) {
    snprintf(what, sizeof what, "%s db", name);
    expect_close(what, h.gw[1].data, db, unit);
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
    char name[64], what[96];
    snprintf(name, sizeof name, "act_%s", acts[i]);
    size_t n;
    float *g = golden(name, &n);
    assert_int_equal(n, 4 * len);
    const char *props[] = {"activation", acts[i], NULL};
    fd_harness h;
    run(&h, "activation", props, in, g, NULL, g + len, NULL);
    snprintf(what, sizeof what, "%s out", acts[i]);
    expect_close(what, h.out.data, g + 2 * len, len);
    snprintf(what, sizeof what, "%s dx", acts[i]);
    expect_close(what, h.din.data, g + 3 * len, len);
    fd_teardown(&h);
    free(g);
  }
}

static void loss_case(const char *type, nnt_dim in) {
  char name[64];
  snprintf(name, sizeof name, "loss_%s", type);
  size_t n, len = nnt_dim_len(in);
  float *g = golden(name, &n);
  assert_int_equal(n, 4 * len + 1);
  const float *x = g, *label = x + len, *out = label + len, *loss = out + len, *dx = loss + 1;
  fd_harness h;
  run(&h, type, NULL, in, x, NULL, NULL, label);
  if (!(fabs(h.lossv - *loss) <= TOL * fmax(1, fabs(*loss))))
    fail_msg("%s loss %.8g, PyTorch %.8g", type, h.lossv, *loss);
  expect_close(type, h.out.data, out, len);
  expect_close(type, h.din.data, dx, len);
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
