/* Every layer's calc_derivative and calc_gradient against central finite
 * differences of a scalar objective: J = sum(out * R) for a fixed random R,
 * or the loss itself for loss layers. */
#include "fd_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/layer.h"

/* Max-like layers are piecewise linear: a smaller step keeps perturbations
 * from swapping which input is largest.
 * tol: float32 central differences with eps 1e-2 leave O(eps^2) truncation
 * plus O(1e-7 / eps) rounding; 2e-3 relative covers both for these sizes. */
static float fd_eps = 1e-2f;

static void fd_layer(const char *type, const char *const *props, nnt_dim in, double tol) {
  fd_layer_check(type, props, in, NULL, fd_eps, tol, 0);
}

static void test_fully_connected(void **state) {
  (void)state;
  const char *p[] = {"unit", "5", NULL};
  fd_layer("fully_connected", p, nnt_dim_make(3, 1, 1, 7), 2e-3);
  /* 4-D input: acts on the last axis */
  fd_layer("fully_connected", p, nnt_dim_make(2, 2, 3, 4), 2e-3);
  const char *nb[] = {"unit", "3", "disable_bias", "true", NULL};
  fd_layer("fully_connected", nb, nnt_dim_make(2, 1, 1, 5), 2e-3);
}

static void test_activations(void **state) {
  (void)state;
  const char *acts[] = {"relu", "leaky_relu", "sigmoid", "tanh", "softmax", "swish",
                        "gelu", "elu", "selu", "softplus", "mish", "none"};
  for (size_t i = 0; i < NNT_ARRAY_LEN(acts); i++) {
    const char *p[] = {"activation", acts[i], NULL};
    fd_layer("activation", p, nnt_dim_make(3, 1, 2, 5), 3e-3);
  }
}

static void test_shape_layers(void **state) {
  (void)state;
  fd_layer("flatten", NULL, nnt_dim_make(2, 3, 2, 2), 2e-3);
  const char *p[] = {"target_shape", "4:3:1", NULL};
  fd_layer("reshape", p, nnt_dim_make(2, 3, 2, 2), 2e-3);
  const char *d[] = {"dropout_rate", "0.3", NULL};
  fd_layer("dropout", d, nnt_dim_make(4, 1, 1, 9), 2e-3);
  const char *n[] = {"normalization", "false", NULL};
  fd_layer("input", n, nnt_dim_make(2, 1, 1, 6), 2e-3);
  fd_layer("identity", NULL, nnt_dim_make(2, 1, 3, 2), 2e-3);
  const char *perm[] = {"direction", "3,1,2", NULL};
  fd_layer("permute", perm, nnt_dim_make(2, 2, 3, 4), 2e-3);
  const char *up[] = {"kernel_size", "2,3", NULL};
  fd_layer("upsample2d", up, nnt_dim_make(2, 2, 2, 3), 2e-3);
}

static void test_batch_normalization(void **state) {
  (void)state;
  fd_layer("batch_normalization", NULL, nnt_dim_make(4, 3, 2, 2), 3e-3);
  const char *w[] = {"axis", "3", NULL};
  fd_layer("batch_normalization", w, nnt_dim_make(5, 1, 1, 4), 3e-3);
  const char *h[] = {"axis", "2", "epsilon", "0.01", NULL};
  fd_layer("batch_normalization", h, nnt_dim_make(3, 2, 3, 2), 3e-3);
}

static void test_batch_normalization_statistics(void **state) {
  (void)state;
  fd_harness h;
  const char *p[] = {"momentum", "0.9", NULL};
  fd_setup(&h, "batch_normalization", p, nnt_dim_make(4, 2, 1, 3), 0);
  /* moving_mean 0, moving_variance 1, gamma 1, beta 0 as initialized */
  for (int c = 0; c < 2; c++)
    h.w[0].data[c] = 0, h.w[1].data[c] = 1, h.w[2].data[c] = 1, h.w[3].data[c] = 0;
  h.l->ops->forward(h.l, &h.ctx);
  for (int c = 0; c < 2; c++) {
    double s = 0, s2 = 0, y = 0;
    for (int b = 0; b < 4; b++)
      for (int i = 0; i < 3; i++) {
        double v = h.in.data[(b * 2 + c) * 3 + i];
        s += v, s2 += v * v;
        y += h.out.data[(b * 2 + c) * 3 + i];
      }
    double mean = s / 12, var = s2 / 12 - mean * mean;
    assert_true(fabs(y / 12) < 1e-5);                          /* normalized */
    assert_true(fabs(h.w[0].data[c] - 0.1 * mean) < 1e-5);      /* kept 90% of 0 */
    assert_true(fabs(h.w[1].data[c] - (0.9 + 0.1 * var)) < 1e-5); /* biased variance */
  }
  /* inference uses the moving statistics */
  h.ctx.training = 0;
  h.l->ops->forward(h.l, &h.ctx);
  float want = (float)((h.in.data[0] - h.w[0].data[0]) / sqrt(h.w[1].data[0] + 1e-3));
  assert_float_equal(h.out.data[0], want, 1e-5);
  fd_teardown(&h);
}

static void test_convolution(void **state) {
  (void)state;
  const char *a[] = {"filters", "3", "kernel_size", "3,3", NULL};
  fd_layer("conv2d", a, nnt_dim_make(2, 2, 5, 7), 3e-3);
  const char *b[] = {"filters", "2", "kernel_size", "3", "stride", "2", "padding", "same", NULL};
  fd_layer("conv2d", b, nnt_dim_make(2, 2, 5, 6), 3e-3);
  const char *c[] = {"filters", "2", "kernel_size", "2,3", "dilation", "2", "padding", "1,0,2,1",
                     NULL};
  fd_layer("conv2d", c, nnt_dim_make(1, 3, 6, 5), 3e-3);
  const char *d[] = {"filters", "2", "kernel_size", "3", "padding", "1", "disable_bias", "true",
                     NULL};
  fd_layer("conv2d", d, nnt_dim_make(2, 1, 4, 4), 3e-3);
  const char *e1[] = {"filters", "3", "kernel_size", "3", "stride", "2", "padding", "same", NULL};
  fd_layer("conv1d", e1, nnt_dim_make(2, 2, 1, 9), 3e-3);
}

static void test_pooling(void **state) {
  (void)state;
  const char *modes[] = {"max", "average", "global_max", "global_average"};
  fd_eps = 1e-3f;
  for (int i = 0; i < 4; i++) {
    const char *p[] = {"pooling", modes[i], NULL};
    fd_layer("pooling2d", p, nnt_dim_make(2, 2, 4, 6), 3e-3);
    const char *q[] = {"pooling", modes[i], "pool_size", "3", "stride", "2", "padding", "same",
                       NULL};
    fd_layer("pooling2d", q, nnt_dim_make(1, 2, 5, 5), 3e-3);
  }
  fd_eps = 1e-2f;
}

static void test_window_errors(void **state) {
  (void)state;
  nnt_layer *l;
  nnt_err e = {0};
  assert_int_equal(nnt_layer_create("conv2d", &l, &e), NNT_OK);
  snprintf(l->name, sizeof l->name, "conv");
  nnt_finalize_ctx fc = {0};
  fc.n_in = 1;
  fc.in_dim[0] = nnt_dim_make(1, 1, 3, 3);
  assert_int_equal(l->ops->finalize(l, &fc, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "filters");
  assert_int_equal(nnt_layer_set_property(l, "filters", "2", &e), NNT_OK);
  assert_int_equal(nnt_layer_set_property(l, "kernel_size", "5,5", &e), NNT_OK);
  assert_int_equal(l->ops->finalize(l, &fc, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "kernel_size");
  tu_assert_contains(e.msg, "5x5");
  tu_assert_contains(e.msg, "1:1:3:3");
  assert_int_equal(nnt_layer_set_property(l, "padding", "1,2,3", &e), NNT_ERR_INVAL);
  nnt_layer_destroy(l);
  assert_int_equal(nnt_layer_create("pooling2d", &l, &e), NNT_OK);
  assert_int_equal(l->ops->finalize(l, &fc, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "pooling");
  nnt_layer_destroy(l);
}

static void test_losses(void **state) {
  (void)state;
  fd_layer("mse", NULL, nnt_dim_make(4, 1, 1, 3), 2e-3);
  fd_layer("cross_softmax", NULL, nnt_dim_make(4, 1, 1, 5), 2e-3);
  fd_layer("cross_sigmoid", NULL, nnt_dim_make(3, 1, 1, 4), 2e-3);
}

static void test_dropout_inference_is_identity(void **state) {
  (void)state;
  fd_harness h;
  const char *d[] = {"dropout_rate", "0.5", NULL};
  fd_setup(&h, "dropout", d, nnt_dim_make(2, 1, 1, 50), 0);
  h.ctx.training = 0;
  h.l->ops->forward(h.l, &h.ctx);
  assert_memory_equal(h.in.data, h.out.data, nnt_tensor_len(&h.in) * sizeof(float));
  h.ctx.training = 1;
  nnt_rng_seed(&h.rng, 12);
  h.l->ops->forward(h.l, &h.ctx);
  size_t zeros = 0;
  for (size_t i = 0; i < 100; i++) {
    zeros += h.out.data[i] == 0;
    if (h.out.data[i] != 0)
      assert_float_equal(h.out.data[i], 2 * h.in.data[i], 1e-6);
  }
  assert_in_range(zeros, 25, 75);
  fd_teardown(&h);
}

static void test_property_errors(void **state) {
  (void)state;
  nnt_layer *l;
  nnt_err e = {0};
  assert_int_equal(nnt_layer_create("fully_connected", &l, &e), NNT_OK);
  assert_int_equal(nnt_layer_set_property(l, "units", "3", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "unknown key 'units'");
  assert_int_equal(nnt_layer_set_property(l, "unit", "abc", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "'unit'");
  tu_assert_contains(e.msg, "abc");
  assert_int_equal(nnt_layer_set_property(l, "unit", "-3", &e), NNT_ERR_INVAL);
  assert_int_equal(nnt_layer_set_property(l, "input_shape", "3:x:4", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "input_shape");
  assert_int_equal(nnt_layer_set_property(l, "weight_initializer", "magic", &e), NNT_ERR_INVAL);
  assert_int_equal(nnt_layer_set_property(l, "UNIT", "4", &e), NNT_OK); /* case-insensitive */
  assert_int_equal(nnt_layer_set_property(l, "Activation", "ReLU", &e), NNT_OK);
  assert_int_equal(l->activation, NNT_ACT_RELU);
  assert_int_equal(nnt_layer_set_property(l, "input_layers", "a, B(1)", &e), NNT_OK);
  assert_int_equal(l->n_inputs, 2);
  assert_string_equal(l->input_names[1], "b");
  assert_int_equal(l->input_idx[1], 1);
  nnt_layer_destroy(l);
  /* finalize errors name the key and both shapes */
  assert_int_equal(nnt_layer_create("reshape", &l, &e), NNT_OK);
  assert_int_equal(nnt_layer_set_property(l, "target_shape", "2:2:2", &e), NNT_OK);
  nnt_finalize_ctx fc = {0};
  fc.n_in = 1;
  fc.in_dim[0] = nnt_dim_make(1, 1, 1, 7);
  assert_int_equal(l->ops->finalize(l, &fc, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "1:2:2:2");
  tu_assert_contains(e.msg, "1:1:1:7");
  nnt_layer_destroy(l);
  assert_int_equal(nnt_layer_create("fully_connected", &l, &e), NNT_OK);
  assert_int_equal(l->ops->finalize(l, &fc, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "unit");
  nnt_layer_destroy(l);
  assert_int_equal(nnt_layer_create("convolution9d", &l, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "convolution9d");
}

static void test_registry(void **state) {
  (void)state;
  assert_ptr_equal(nnt_layer_ops_find("FULLY_CONNECTED"), &nnt_layer_fully_connected);
  assert_ptr_equal(nnt_layer_ops_find_ml(1), &nnt_layer_fully_connected);
  assert_null(nnt_layer_ops_find("nope"));
  size_t n = 0;
  for (const nnt_layer_ops *const *p = nnt_layer_ops_all(); *p; p++)
    n++;
  assert_true(n >= 9);
}

static void test_initializers(void **state) {
  (void)state;
  enum { N = 20000 };
  float *w = malloc(N * sizeof *w);
  nnt_rng r;
  nnt_rng_seed(&r, 3);
  /* he_normal: std sqrt(2 / fan_in) */
  nnt_init_fill(NNT_INIT_HE_NORMAL, 50, 10, &r, w, N);
  double s = 0, s2 = 0;
  for (size_t i = 0; i < N; i++)
    s += w[i], s2 += (double)w[i] * w[i];
  assert_true(fabs(s / N) < 0.01);
  assert_true(fabs(sqrt(s2 / N) - sqrt(2.0 / 50)) < 0.01);
  /* xavier_uniform: within sqrt(6 / (in + out)) */
  nnt_init_fill(NNT_INIT_XAVIER_UNIFORM, 30, 20, &r, w, N);
  float lim = sqrtf(6.0f / 50), mx = 0;
  for (size_t i = 0; i < N; i++)
    mx = fabsf(w[i]) > mx ? fabsf(w[i]) : mx;
  assert_true(mx <= lim && mx > 0.95f * lim);
  nnt_init_fill(NNT_INIT_ONES, 1, 1, &r, w, 4);
  assert_float_equal(w[3], 1.0f, 0);
  free(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fully_connected),
      cmocka_unit_test(test_activations),
      cmocka_unit_test(test_shape_layers),
      cmocka_unit_test(test_losses),
      cmocka_unit_test(test_batch_normalization),
      cmocka_unit_test(test_convolution),
      cmocka_unit_test(test_pooling),
      cmocka_unit_test(test_window_errors),
      cmocka_unit_test(test_batch_normalization_statistics),
      cmocka_unit_test(test_dropout_inference_is_identity),
      cmocka_unit_test(test_property_errors),
      cmocka_unit_test(test_registry),
      cmocka_unit_test(test_initializers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
