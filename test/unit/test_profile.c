/* The per-step profile (nntrainer/profile.h): off by default; on, each
 * layer's steps add their time, the first iteration not counted, by kind
 * (a forward, a gradient, a derivative, an update), a row per layer of the
 * compiled graph; cleared by turning it on again; refused before compile,
 * with too few rows and on a device engine (whose steps the host records
 * and runs later); and `nntrainer train --profile` prints it. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/ini.h"
#include "nntrainer/profile.h"

/* conv (the first layer: no derivative), batch norm, fully connected;
 * 20 samples of batch 4: 5 training steps an epoch */
static const char *net_ini =
    "[Model]\ntype = NeuralNetwork\nepochs = 1\nbatch_size = 4\nloss = cross\n\n"
    "[Optimizer]\ntype = sgd\nlearning_rate = 0.01\n\n"
    "[train_set]\ntype = synthetic\nsamples = 20\n\n"
    "[in]\ntype = input\ninput_shape = 2:6:6\n\n"
    "[c1]\ntype = conv2d\nfilters = 4\nkernel_size = 3,3\npadding = 1,1\n\n"
    "[bn]\ntype = batch_normalization\nactivation = relu\n\n"
    "[out]\ntype = fully_connected\nunit = 3\nactivation = softmax\n";

static nnt_model *load(const char *const *ov, unsigned nov) {
  nnt_err e = {0};
  const char *path = tu_write_text("net.ini", net_ini);
  nnt_model *m = tu_model_for_ini(path);
  if (nnt_ini_load(m, path, ov, nov, &e) || nnt_model_compile(m, &e) ||
      nnt_model_initialize(m, &e))
    fail_msg("%s: %s", path, e.msg);
  return m;
}

static void train(nnt_model *m) {
  nnt_err e = {0};
  if (nnt_model_train(m, NULL, NULL, &e))
    fail_msg("train: %s", e.msg);
}

static const nnt_profile_row *row(const nnt_profile_row *r, size_t n, const char *layer) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(r[i].layer, layer))
      return &r[i];
  fail_msg("no row for %s", layer);
  return NULL;
}

static double total(const nnt_profile_row *r) {
  return r->forward_ms + r->recompute_ms + r->gradient_ms + r->derivative_ms + r->apply_ms;
}

static void test_counts(void **state) {
  (void)state;
  nnt_model *m = load(NULL, 0);
  nnt_model_profile_enable(m, 1);
  train(m);
  nnt_profile_row r[16];
  size_t n;
  unsigned iters;
  double other;
  nnt_err e = {0};
  assert_int_equal(nnt_model_profile(m, NNT_MODE_TRAIN, r, 16, &n, &iters, &other, &e), NNT_OK);
  assert_int_equal(n, m->n_nodes);
  assert_int_equal(iters, 4); /* 5 steps, the first not counted */
  assert_true(other == 0);    /* no clip_grad_by_norm */
  for (size_t i = 0; i < n; i++) {
    assert_non_null(r[i].layer);
    assert_non_null(r[i].type);
    assert_true(r[i].forward_ms >= 0 && r[i].gradient_ms >= 0 && r[i].derivative_ms >= 0 &&
                r[i].apply_ms >= 0 && r[i].recompute_ms >= 0);
  }
  const nnt_profile_row *c1 = row(r, n, "c1"), *bn = row(r, n, "bn"), *out = row(r, n, "out");
  assert_string_equal(c1->type, "conv2d");
  assert_string_equal(out->type, "fully_connected");
  /* the layers with weights: a forward, a gradient and an update each */
  const nnt_profile_row *w[] = {c1, bn, out};
  for (int i = 0; i < 3; i++)
    assert_true(w[i]->forward_ms > 0 && w[i]->gradient_ms > 0 && w[i]->apply_ms > 0);
  assert_true(out->derivative_ms > 0 && bn->derivative_ms > 0);
  /* turning it on again clears the counts */
  nnt_model_profile_enable(m, 1);
  assert_int_equal(nnt_model_profile(m, NNT_MODE_TRAIN, r, 16, &n, &iters, &other, &e), NNT_OK);
  assert_int_equal(iters, 0);
  for (size_t i = 0; i < n; i++)
    assert_true(total(&r[i]) == 0);
  nnt_model_destroy(m);
}

static void test_off_and_refusals(void **state) {
  (void)state;
  nnt_profile_row r[16];
  size_t n;
  unsigned iters = 7;
  double other;
  nnt_err e = {0};
  nnt_model *m = load(NULL, 0);
  /* never turned on: nothing counted */
  train(m);
  assert_int_equal(nnt_model_profile(m, NNT_MODE_TRAIN, r, 16, &n, &iters, &other, &e), NNT_OK);
  assert_int_equal(iters, 0);
  for (size_t i = 0; i < n; i++)
    assert_true(total(&r[i]) == 0);
  /* on, then off before training: still nothing */
  nnt_model_profile_enable(m, 1);
  nnt_model_profile_enable(m, 0);
  train(m);
  assert_int_equal(nnt_model_profile(m, NNT_MODE_TRAIN, r, 16, &n, &iters, &other, &e), NNT_OK);
  assert_int_equal(iters, 0);
  /* fewer rows than layers */
  assert_int_equal(nnt_model_profile(m, NNT_MODE_TRAIN, r, 2, &n, &iters, &other, &e),
                   NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "profile: 2 rows for ");
  nnt_model_destroy(m);
  /* before compile */
  nnt_model *fresh;
  assert_int_equal(nnt_model_create(&fresh, &e), NNT_OK);
  assert_int_equal(nnt_model_profile(fresh, NNT_MODE_TRAIN, r, 16, &n, &iters, &other, &e),
                   NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "not compiled");
  nnt_model_destroy(fresh);
#ifdef NNT_HAVE_VULKAN
  /* a device engine: refused, naming it (lavapipe in CI) */
  const char *ov[] = {"engine=gpu"};
  m = load(ov, 1);
  nnt_model_profile_enable(m, 1);
  train(m);
  assert_int_equal(nnt_model_profile(m, NNT_MODE_TRAIN, r, 16, &n, &iters, &other, &e),
                   NNT_ERR_NOT_SUPPORTED);
  tu_assert_contains(e.msg, "records its steps for the device");
  nnt_model_destroy(m);
#endif
}

static void test_cli(void **state) {
  (void)state;
  char out[65536];
  tu_write_text("net.ini", net_ini);
  int rc = tu_run_cli("train net.ini --profile", out, sizeof out);
  if (rc)
    fail_msg("exit %d: %s", rc, out);
  tu_assert_contains(out, "profile: ");
  tu_assert_contains(out, " ms per training step over 4 steps (the first not counted)");
  tu_assert_contains(out, "c1 ");
  tu_assert_contains(out, "fully_connected");
  /* without the flag, no table */
  assert_int_equal(tu_run_cli("train net.ini", out, sizeof out), 0);
  assert_null(strstr(out, "profile: "));
}

int main(void) {
  tu_keep_vulkan_driver();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_counts),
      cmocka_unit_test(test_off_and_refusals),
      cmocka_unit_test(test_cli),
  };
  return cmocka_run_group_tests(tests, tu_dir_setup, tu_dir_teardown);
}
