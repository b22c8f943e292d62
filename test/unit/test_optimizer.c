/* Optimizers and learning-rate schedulers against their formulas. */
#include "test_util.h"

#include <math.h>
#include <string.h>

#include "nntrainer/optimizer.h"

static void test_defaults_and_errors(void **state) {
  (void)state;
  nnt_optimizer *o;
  nnt_err e = {0};
  assert_int_equal(nnt_optimizer_create("SGD", &o, &e), NNT_OK);
  assert_float_equal(o->learning_rate, 1e-4f, 0);
  assert_int_equal(nnt_optimizer_state_count(o), 0);
  assert_int_equal(nnt_optimizer_set_property(o, "beta1", "0.5", &e), NNT_ERR_NOKEY);
  assert_int_equal(nnt_optimizer_set_property(o, "learning_rate", "abc", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "learning_rate");
  tu_assert_contains(e.msg, "abc");
  nnt_optimizer_destroy(o);
  assert_int_equal(nnt_optimizer_create("adam", &o, &e), NNT_OK);
  assert_float_equal(o->learning_rate, 1e-3f, 0);
  assert_float_equal(o->epsilon, 1e-7f, 0);
  assert_int_equal(nnt_optimizer_state_count(o), 2);
  assert_int_equal(nnt_optimizer_set_property(o, "beta2", "1.5", &e), NNT_ERR_INVAL);
  nnt_optimizer_destroy(o);
  assert_int_equal(nnt_optimizer_create("rmsprop", &o, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "rmsprop");
}

static void test_adam_steps(void **state) {
  (void)state;
  nnt_optimizer *o;
  nnt_err e = {0};
  assert_int_equal(nnt_optimizer_create("adam", &o, &e), NNT_OK);
  assert_int_equal(nnt_optimizer_set_property(o, "learning_rate", "0.01", &e), NNT_OK);
  float w[3] = {1, -2, 0.5f}, m[3] = {0}, v[3] = {0}, *st[2] = {m, v};
  double rw[3] = {1, -2, 0.5}, rm[3] = {0}, rv[3] = {0};
  for (size_t it = 0; it < 6; it++) {
    float g[3] = {0.3f * (float)(it + 1), -0.1f, 2.0f / (float)(it + 1)};
    nnt_optimizer_apply(o, nnt_kernels_cpu(), it, 3, w, g, st);
    double t = (double)it + 1, lr_t = 0.01 * sqrt(1 - pow(0.999, t)) / (1 - pow(0.9, t));
    for (int i = 0; i < 3; i++) {
      rm[i] = 0.9 * rm[i] + 0.1 * g[i];
      rv[i] = 0.999 * rv[i] + 0.001 * g[i] * g[i];
      rw[i] -= lr_t * rm[i] / (sqrt(rv[i]) + 1e-7);
    }
  }
  for (int i = 0; i < 3; i++)
    assert_true(fabs(w[i] - rw[i]) < 1e-5);
  nnt_optimizer_destroy(o);
}

static void test_sgd_and_legacy_decay(void **state) {
  (void)state;
  nnt_optimizer *o;
  nnt_err e = {0};
  assert_int_equal(nnt_optimizer_create("sgd", &o, &e), NNT_OK);
  assert_int_equal(nnt_optimizer_set_property(o, "learning_rate", "0.1", &e), NNT_OK);
  float w = 1, g = 2;
  nnt_optimizer_apply(o, nnt_kernels_cpu(), 0, 1, &w, &g, NULL);
  assert_float_equal(w, 0.8f, 1e-6);
  assert_int_equal(nnt_optimizer_set_property(o, "decay_rate", "0.5", &e), NNT_OK);
  assert_int_equal(nnt_optimizer_set_property(o, "decay_steps", "10", &e), NNT_OK);
  /* staircase: lr * 0.5 ^ floor(iter / 10) */
  assert_float_equal(nnt_optimizer_lr(o, 9), 0.1f, 1e-7);
  assert_float_equal(nnt_optimizer_lr(o, 10), 0.05f, 1e-7);
  assert_float_equal(nnt_optimizer_lr(o, 25), 0.025f, 1e-7);
  nnt_optimizer_destroy(o);
}

static nnt_lr_scheduler *sched(const char *type, const char *const *kv) {
  nnt_lr_scheduler *s;
  nnt_err e = {0};
  assert_int_equal(nnt_lrs_create(type, &s, &e), NNT_OK);
  for (size_t i = 0; kv[i]; i += 2)
    if (nnt_lrs_set_property(s, kv[i], kv[i + 1], &e))
      fail_msg("%s", e.msg);
  if (nnt_lrs_validate(s, &e))
    fail_msg("%s", e.msg);
  return s;
}

static void test_schedulers(void **state) {
  (void)state;
  const char *ex[] = {"learning_rate", "1", "decay_rate", "0.5", "decay_steps", "4", NULL};
  nnt_lr_scheduler *s = sched("exponential", ex);
  assert_float_equal(nnt_lrs_get(s, 3), 1.0f, 0);
  assert_float_equal(nnt_lrs_get(s, 8), 0.25f, 1e-7);
  nnt_lrs_destroy(s);
  const char *st[] = {"learning_rate", "0.1, 0.01, 0.001", "iteration", "10,20", NULL};
  s = sched("step", st);
  assert_float_equal(nnt_lrs_get(s, 0), 0.1f, 0);
  assert_float_equal(nnt_lrs_get(s, 10), 0.1f, 0);
  assert_float_equal(nnt_lrs_get(s, 11), 0.01f, 0);
  assert_float_equal(nnt_lrs_get(s, 20), 0.01f, 0);
  assert_float_equal(nnt_lrs_get(s, 21), 0.001f, 0);
  nnt_lrs_destroy(s);
  const char *co[] = {"max_learning_rate", "1", "min_learning_rate", "0.1", "decay_steps",
                      "10", NULL};
  s = sched("cosine", co);
  assert_float_equal(nnt_lrs_get(s, 0), 1.0f, 1e-6);
  assert_float_equal(nnt_lrs_get(s, 5), 0.55f, 1e-6);
  assert_float_equal(nnt_lrs_get(s, 10), 0.1f, 1e-6);
  assert_float_equal(nnt_lrs_get(s, 50), 0.1f, 1e-6);
  nnt_lrs_destroy(s);
  s = sched("linear", co);
  assert_float_equal(nnt_lrs_get(s, 5), 0.55f, 1e-6);
  assert_float_equal(nnt_lrs_get(s, 2), 0.82f, 1e-6);
  assert_float_equal(nnt_lrs_get(s, 99), 0.1f, 1e-6);
  nnt_lrs_destroy(s);
  /* constant without a learning_rate takes the optimizer's */
  nnt_optimizer *o;
  nnt_err e = {0};
  assert_int_equal(nnt_optimizer_create("adam", &o, &e), NNT_OK);
  const char *none[] = {NULL};
  assert_int_equal(nnt_optimizer_set_lr_scheduler(o, sched("constant", none), &e), NNT_OK);
  assert_float_equal(nnt_optimizer_lr(o, 100), 1e-3f, 0);
  nnt_optimizer_destroy(o);
}

static void test_scheduler_errors(void **state) {
  (void)state;
  nnt_lr_scheduler *s;
  nnt_err e = {0};
  assert_int_equal(nnt_lrs_create("step", &s, &e), NNT_OK);
  assert_int_equal(nnt_lrs_set_property(s, "learning_rate", "0.1,0.01", &e), NNT_OK);
  assert_int_equal(nnt_lrs_set_property(s, "iteration", "5,9", &e), NNT_OK);
  assert_int_equal(nnt_lrs_validate(s, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "iteration");
  assert_int_equal(nnt_lrs_set_property(s, "iteration", "9,5", &e), NNT_ERR_INVAL);
  assert_int_equal(nnt_lrs_set_property(s, "max_learning_rate", "1", &e), NNT_ERR_NOKEY);
  nnt_lrs_destroy(s);
  assert_int_equal(nnt_lrs_create("cosine", &s, &e), NNT_OK);
  assert_int_equal(nnt_lrs_validate(s, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "max_learning_rate");
  nnt_lrs_destroy(s);
  assert_int_equal(nnt_lrs_create("warmup", &s, &e), NNT_ERR_INVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults_and_errors), cmocka_unit_test(test_adam_steps),
      cmocka_unit_test(test_sgd_and_legacy_decay), cmocka_unit_test(test_schedulers),
      cmocka_unit_test(test_scheduler_errors)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
