/* The default training plan's cheap recomputation (recompute.c
 * nnt_recompute_default): batch normalization's output, with the relu and
 * residual additions in place over it, is dropped after the forward pass
 * and computed again from the kept xhat before the backward steps that
 * read it. On a conv-BN-ReLU-conv chain and a small residual net, on the
 * CPU and the fake device: the plan keeps less than without it, some
 * node recomputes from what it kept, and two training steps give bitwise
 * the weights (moving statistics included) of the plan without it and of
 * memory_optimization=false. A backend that does not support bn_affine
 * keeps the outputs (no recomputation). */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

#include "fake_device.h"
#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

static const char chain_ini[] =
    "[Model]\ntype = NeuralNetwork\nepochs = 1\nbatch_size = 4\nloss = cross\nseed = 5\n"
    "[Optimizer]\ntype = sgd\nlearning_rate = 0.1\n"
    "[in]\ntype = input\ninput_shape = 3:8:8\n"
    "[c1]\ntype = conv2d\nfilters = 6\nkernel_size = 3,3\npadding = 1,1\n"
    "[b1]\ntype = batch_normalization\nactivation = relu\n"
    "[c2]\ntype = conv2d\nfilters = 6\nkernel_size = 3,3\npadding = 1,1\n"
    "[b2]\ntype = batch_normalization\nactivation = relu\n"
    "[c3]\ntype = conv2d\nfilters = 4\nkernel_size = 3,3\npadding = 1,1\n"
    "[fl]\ntype = flatten\n"
    "[fc]\ntype = fully_connected\nunit = 5\nactivation = softmax\n";

enum { DEFAULT, WITHOUT, UNOPTIMIZED, BUDGET };
static size_t budget_bytes; /* BUDGET: memory_budget */

static nnt_backend no_affine_be;
static int no_affine_supports(const nnt_backend *be, nnt_kop op) {
  (void)be;
  return (unsigned)op < NNT_KOP__COUNT && op != NNT_KOP_BN_AFFINE;
}

/* backend: 0 cpu, 1 fake device, 2 the CPU without bn_affine */
static nnt_model *load(int resnet, int backend, int how) {
  nnt_err e = {0};
  const char *path = resnet ? NNT_SOURCE_DIR "/Applications/ResNet/resnet18.ini"
                            : tu_write_text("chain.ini", chain_ini);
  const char *ov[3] = {"input.input_shape=3:8:8", "batch_size=2",
                       how == UNOPTIMIZED ? "memory_optimization=false" : "epochs=1"};
  nnt_model *m = tu_model_for_ini(path);
  if (resnet ? nnt_ini_load(m, path, ov, 3, &e) : nnt_ini_load(m, path, ov + 2, 1, &e))
    fail_msg("%s: %s", path, e.msg);
  nnt_dataset *ds = NULL;
  assert_int_equal(nnt_dataset_create_synthetic(2 * nnt_model_batch_size(m), 5, &ds, &e), NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, &e), NNT_OK);
  if (backend == 1)
    assert_int_equal(nnt_model_set_backend(m, fdev_backend(), &e), NNT_OK);
  if (backend == 2) {
    no_affine_be = *nnt_backend_cpu();
    no_affine_be.supports = no_affine_supports;
    assert_int_equal(nnt_model_set_backend(m, &no_affine_be, &e), NNT_OK);
  }
  if (nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("compile: %s", e.msg);
  if (how == WITHOUT)
    m->recompute_default_done = 1;
  if (how == BUDGET)
    m->memory_budget = budget_bytes;
  if (nnt_model_plan(m, NNT_MODE_TRAIN, &e))
    fail_msg("plan: %s", e.msg);
  return m;
}

static size_t arena(const nnt_model *m) { return m->mgr[NNT_MODE_TRAIN].arena_bytes; }

static unsigned saved_nodes(const nnt_model *m) {
  unsigned c = 0;
  for (size_t i = 0; i < m->n_nodes; i++)
    c += m->nodes[i].recompute_saved;
  return c;
}

static void check(int resnet, int backend) {
  nnt_err e = {0};
  nnt_model *d = load(resnet, backend, DEFAULT);
  nnt_model *w = load(resnet, backend, WITHOUT);
  nnt_model *u = load(resnet, backend, UNOPTIMIZED);
  assert_int_equal(w->n_recompute, 0);
  assert_int_equal(u->n_recompute, 0);
  assert_true(d->n_recompute > 0);
  assert_true(saved_nodes(d) > 0);
  assert_true(arena(d) < arena(w));
  for (int step = 0; step < 2; step++)
    if (nnt_model_train(d, NULL, NULL, &e) || nnt_model_train(w, NULL, NULL, &e) ||
        nnt_model_train(u, NULL, NULL, &e))
      fail_msg("train: %s", e.msg);
  float *wd = tu_weights_of(d), *ww = tu_weights_of(w), *wu = tu_weights_of(u);
  size_t nf = 0;
  for (size_t i = 0; i < d->n_w; i++)
    nf += nnt_dim_len(d->wspec[i].dim);
  assert_int_equal(memcmp(wd, ww, nf * sizeof(float)), 0);
  assert_int_equal(memcmp(wd, wu, nf * sizeof(float)), 0);
  free(wd), free(ww), free(wu);
  nnt_model_destroy(d);
  nnt_model_destroy(w);
  nnt_model_destroy(u);
}

/* A budget below the default plan: the search recomputes whole chains
 * where it must and the cheap ones from what they keep where it keeps
 * their chain; fits, and trains bitwise as without. */
static void check_budget(int resnet, int backend) {
  nnt_err e = {0};
  nnt_model *d = load(resnet, backend, DEFAULT);
  size_t total, reserve = nnt_model_queue_reserve(d);
  assert_int_equal(nnt_model_train_total(d, &total, &e), NNT_OK);
  budget_bytes = total + reserve - 1; /* the default plan does not fit */
  nnt_model *b = load(resnet, backend, BUDGET);
  nnt_model *u = load(resnet, backend, UNOPTIMIZED);
  assert_true(b->n_recompute > 0);
  if (resnet) /* the chain's search recomputes whole chains */
    assert_true(saved_nodes(b) > 0);
  assert_int_equal(nnt_model_train_total(b, &total, &e), NNT_OK);
  assert_true(total + nnt_model_queue_reserve(b) <= budget_bytes);
  for (int step = 0; step < 2; step++)
    if (nnt_model_train(b, NULL, NULL, &e) || nnt_model_train(u, NULL, NULL, &e))
      fail_msg("train: %s", e.msg);
  float *wb = tu_weights_of(b), *wu = tu_weights_of(u);
  size_t nf = 0;
  for (size_t i = 0; i < b->n_w; i++)
    nf += nnt_dim_len(b->wspec[i].dim);
  assert_int_equal(memcmp(wb, wu, nf * sizeof(float)), 0);
  free(wb), free(wu);
  nnt_model_destroy(d);
  nnt_model_destroy(b);
  nnt_model_destroy(u);
}

static void test_budget_chain(void **s) { (void)s; check_budget(0, 0); }
static void test_budget_resnet(void **s) { (void)s; check_budget(1, 0); }

static void test_chain_cpu(void **s) { (void)s; check(0, 0); }
static void test_chain_fake(void **s) { (void)s; check(0, 1); }
static void test_resnet_cpu(void **s) { (void)s; check(1, 0); }
static void test_resnet_fake(void **s) { (void)s; check(1, 1); }

/* Without bn_affine on the backend (as on Vulkan) the outputs are kept. */
static void test_unsupported(void **s) {
  (void)s;
  nnt_model *m = load(0, 2, DEFAULT);
  assert_int_equal(m->n_recompute, 0);
  assert_int_equal(saved_nodes(m), 0);
  nnt_model_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_chain_cpu, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_chain_fake, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_resnet_cpu, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_resnet_fake, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_unsupported, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_budget_chain, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_budget_resnet, tu_dir_setup, tu_dir_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
