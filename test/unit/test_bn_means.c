/* Batch normalization's backward sums made once (kernels.h bn_bwd_means):
 * calc_gradient keeps the means of dy and dy xhat and calc_derivative
 * reads them. Two training steps on the CPU give bitwise the weights
 * (moving statistics included) of the CPU without the op, where each step
 * sums for itself through bn_bwd; a trainable batch norm calls
 * bn_bwd_means twice a step and bn_bwd never, a frozen one whose
 * derivative a trainable layer before it needs calls bn_bwd alone. */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

#define CHAIN(B1)                                                                         \
  "[Model]\ntype = NeuralNetwork\nepochs = 1\nbatch_size = 4\nloss = cross\nseed = 5\n"   \
  "[Optimizer]\ntype = sgd\nlearning_rate = 0.1\n"                                        \
  "[in]\ntype = input\ninput_shape = 3:8:8\n"                                             \
  "[c1]\ntype = conv2d\nfilters = 6\nkernel_size = 3,3\npadding = 1,1\n"                  \
  "[b1]\ntype = batch_normalization\nactivation = relu\n" B1                               \
  "[c2]\ntype = conv2d\nfilters = 6\nkernel_size = 3,3\npadding = 1,1\n"                  \
  "[b2]\ntype = batch_normalization\nactivation = relu\n"                                 \
  "[fl]\ntype = flatten\n"                                                                \
  "[fc]\ntype = fully_connected\nunit = 5\nactivation = softmax\n"

static const char trained_ini[] = CHAIN("");
static const char frozen_ini[] = CHAIN("trainable = false\n");

/* The CPU's kernels with bn_bwd and bn_bwd_means counted (or the latter
 * left out). */
static unsigned n_bwd, n_means;
static int count_bwd(const nnt_kernels *self, size_t o, size_t ch, size_t in, const float *dy,
                     const float *xhat, const float *is, const float *g, float *dx, float *dg,
                     float *db) {
  (void)self;
  n_bwd++;
  const nnt_kernels *k = nnt_kernels_cpu();
  return k->bn_bwd(k, o, ch, in, dy, xhat, is, g, dx, dg, db);
}
static int count_means(const nnt_kernels *self, size_t o, size_t ch, size_t in,
                       const float *dy, const float *xhat, const float *is, const float *g,
                       float *dx, float *dg, float *db, float *means) {
  (void)self;
  n_means++;
  const nnt_kernels *k = nnt_kernels_cpu();
  return k->bn_bwd_means(k, o, ch, in, dy, xhat, is, g, dx, dg, db, means);
}

static nnt_kernels table[2];
static nnt_backend be[2];

static nnt_model *load(const char *ini, int with_means) {
  nnt_err e = {0};
  const char *path = tu_write_text("bn_means.ini", ini);
  nnt_model *m = tu_model_for_ini(path);
  if (nnt_ini_load(m, path, NULL, 0, &e))
    fail_msg("%s: %s", path, e.msg);
  nnt_dataset *ds = NULL;
  assert_int_equal(nnt_dataset_create_synthetic(2 * nnt_model_batch_size(m), 5, &ds, &e), NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, &e), NNT_OK);
  table[with_means] = *nnt_kernels_cpu();
  table[with_means].bn_bwd = count_bwd;
  table[with_means].bn_bwd_means = with_means ? count_means : NULL;
  be[with_means] = *nnt_backend_cpu();
  be[with_means].k = &table[with_means];
  assert_int_equal(nnt_model_set_backend(m, &be[with_means], &e), NNT_OK);
  if (nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("compile: %s", e.msg);
  return m;
}

/* Two steps each; the calls counted on the model with the op. */
static void check(const char *ini, unsigned want_bwd, unsigned want_means) {
  nnt_err e = {0};
  nnt_model *with = load(ini, 1), *without = load(ini, 0);
  n_bwd = n_means = 0;
  if (nnt_model_train(with, NULL, NULL, &e))
    fail_msg("train: %s", e.msg);
  assert_int_equal(n_bwd, want_bwd);
  assert_int_equal(n_means, want_means);
  if (nnt_model_train(without, NULL, NULL, &e))
    fail_msg("train: %s", e.msg);
  float *a = tu_weights_of(with), *b = tu_weights_of(without);
  assert_memory_equal(a, b, with->wpool_floats * sizeof(float));
  free(a), free(b);
  nnt_model_destroy(with);
  nnt_model_destroy(without);
}

/* Two steps, two batch norms: each calc_gradient and calc_derivative. */
static void test_trained(void **state) {
  (void)state;
  check(trained_ini, 0, 8);
}

/* b1 frozen: its derivative alone (c1 trains), summing for itself. */
static void test_frozen(void **state) {
  (void)state;
  check(frozen_ini, 2, 4);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_trained),
      cmocka_unit_test(test_frozen),
  };
  return cmocka_run_group_tests(tests, tu_dir_setup, tu_dir_teardown);
}
