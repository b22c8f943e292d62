/* Optimizers and learning-rate schedulers against hand-computed double
 * references: sgd, adam and adamw steps over several iterations, every
 * scheduler at chosen iterations (boundaries included), the legacy
 * decay_rate/decay_steps keys, defaults and property errors. */
#include "test_util.h"

#include <math.h>
#include <string.h>

#include "nntrainer/optimizer.h"

/* A minimal kernel table with the entries the optimizers use, written here so
 * the optimizer is checked on its own; one test compares with the CPU table. */
static int r_scale(const nnt_kernels *self, size_t n, float a, float *y) {
  (void)self;
  for (size_t i = 0; i < n; i++)
    y[i] *= a;
  return NNT_OK;
}
static int r_sgd_step(const nnt_kernels *self, size_t n, float lr, const float *g, float *w,
                      const float *skip) {
  (void)self;
  if (skip && *skip)
    return NNT_OK;
  for (size_t i = 0; i < n; i++)
    w[i] -= lr * g[i];
  return NNT_OK;
}
static int r_adam_step(const nnt_kernels *self, size_t n, float lr_t, float b1, float b2, float eps,
                       float wscale, const float *g, float *m, float *v, float *w,
                       const float *skip) {
  (void)self;
  if (skip && *skip)
    return NNT_OK;
  for (size_t i = 0; i < n; i++)
    w[i] *= wscale;
  for (size_t i = 0; i < n; i++) {
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
    w[i] -= lr_t * m[i] / (sqrtf(v[i]) + eps);
  }
  return NNT_OK;
}
static const nnt_kernels ref_k = {
    .name = "test-ref", .scale = r_scale, .sgd_step = r_sgd_step, .adam_step = r_adam_step};

#define N 5
#define STEPS 7

static nnt_optimizer *opt(const char *type, const char *const *kv) {
  nnt_optimizer *o = NULL;
  nnt_err e = {0};
  if (nnt_optimizer_create(type, &o, &e))
    fail_msg("%s", e.msg);
  for (size_t i = 0; kv && kv[i]; i += 2)
    if (nnt_optimizer_set_property(o, kv[i], kv[i + 1], &e))
      fail_msg("%s = %s: %s", kv[i], kv[i + 1], e.msg);
  return o;
}

static nnt_lr_scheduler *sched(const char *type, const char *const *kv) {
  nnt_lr_scheduler *s = NULL;
  nnt_err e = {0};
  if (nnt_lrs_create(type, &s, &e))
    fail_msg("%s", e.msg);
  for (size_t i = 0; kv && kv[i]; i += 2)
    if (nnt_lrs_set_property(s, kv[i], kv[i + 1], &e))
      fail_msg("%s = %s: %s", kv[i], kv[i + 1], e.msg);
  if (nnt_lrs_validate(s, &e))
    fail_msg("%s", e.msg);
  return s;
}

static void grad_at(size_t it, float *g) {
  for (int i = 0; i < N; i++)
    g[i] = (float)(sin(1.7 * (double)i + 0.9 * (double)it) * (0.2 + 0.4 * i));
}

static void assert_close(const float *got, const double *want, size_t n, double tol) {
  for (size_t i = 0; i < n; i++)
    if (!(fabs((double)got[i] - want[i]) <= tol * (1 + fabs(want[i]))))
      fail_msg("element %zu: got %.9g, want %.9g", i, (double)got[i], want[i]);
}

/* Adam in double: NNTrainer's form, epsilon on the uncorrected sqrt(v) and
 * the bias corrections folded into the step size; decoupled decay first. */
static void ref_adam(double lr, double b1, double b2, double eps, double wd, size_t it,
                     const float *g, double *m, double *v, double *w) {
  double t = (double)it + 1;
  double lr_t = lr * sqrt(1 - pow(b2, t)) / (1 - pow(b1, t));
  for (int i = 0; i < N; i++) {
    w[i] *= 1 - lr * wd;
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    v[i] = b2 * v[i] + (1 - b2) * (double)g[i] * g[i];
    w[i] -= lr_t * m[i] / (sqrt(v[i]) + eps);
  }
}

static void run_adam(nnt_optimizer *o, const nnt_kernels *k, size_t first_iter, double wd,
                     float *w_out) {
  float w[N] = {1, -2, 0.5f, 0.03f, -0.7f}, m[N] = {0}, v[N] = {0}, *st[2] = {m, v};
  double rw[N], rm[N] = {0}, rv[N] = {0};
  for (int i = 0; i < N; i++)
    rw[i] = w[i];
  for (size_t it = first_iter; it < first_iter + STEPS; it++) {
    float g[N];
    grad_at(it, g);
    assert_int_equal(nnt_optimizer_apply(o, k, it, N, w, g, st, NULL), NNT_OK);
    ref_adam(nnt_optimizer_lr(o, it), o->beta1, o->beta2, o->epsilon, wd, it, g, rm, rv, rw);
    assert_close(w, rw, N, 2e-6);
    assert_close(m, rm, N, 1e-6);
    assert_close(v, rv, N, 1e-6);
  }
  if (w_out)
    memcpy(w_out, w, sizeof w);
}

static void test_defaults(void **state) {
  (void)state;
  nnt_optimizer *o = opt("SGD", NULL);
  assert_int_equal(o->type, NNT_OPT_SGD);
  assert_string_equal(nnt_optimizer_type_name(o), "sgd");
  assert_float_equal(o->learning_rate, 1e-4f, 0);
  assert_int_equal(nnt_optimizer_state_count(o), 0);
  assert_float_equal(nnt_optimizer_lr(o, 12345), 1e-4f, 0);
  assert_int_equal(nnt_optimizer_validate(o, NULL), NNT_OK);
  nnt_optimizer_destroy(o);

  o = opt("Adam", NULL);
  assert_float_equal(o->learning_rate, 1e-3f, 0);
  assert_float_equal(o->beta1, 0.9f, 0);
  assert_float_equal(o->beta2, 0.999f, 0);
  assert_float_equal(o->epsilon, 1e-7f, 0);
  assert_int_equal(nnt_optimizer_state_count(o), 2);
  nnt_optimizer_destroy(o);

  o = opt("ADAMW", NULL);
  assert_string_equal(nnt_optimizer_type_name(o), "adamw");
  assert_float_equal(o->learning_rate, 1e-3f, 0);
  assert_float_equal(o->epsilon, 1e-8f, 0); /* NNTrainer's adamw default */
  assert_float_equal(o->weight_decay, 0.0f, 0);
  assert_int_equal(nnt_optimizer_state_count(o), 2);
  nnt_optimizer_destroy(o);
  assert_int_equal(nnt_optimizer_state_count(NULL), 0);
  nnt_optimizer_destroy(NULL);
  nnt_lrs_destroy(NULL);
}

static void test_property_errors(void **state) {
  (void)state;
  nnt_optimizer *o = opt("sgd", NULL);
  nnt_err e = {0};
  assert_int_equal(nnt_optimizer_set_property(o, "beta1", "0.5", &e), NNT_ERR_NOKEY);
  tu_assert_contains(e.msg, "beta1");
  assert_int_equal(nnt_optimizer_set_property(o, "momentum", "0.5", &e), NNT_ERR_NOKEY);
  assert_int_equal(nnt_optimizer_set_property(o, "weight_decay", "0.1", &e), NNT_ERR_NOKEY);
  assert_int_equal(nnt_optimizer_set_property(o, "learning_rate", "abc", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "learning_rate");
  tu_assert_contains(e.msg, "abc");
  assert_float_equal(o->learning_rate, 1e-4f, 0); /* unchanged */
  assert_int_equal(nnt_optimizer_set_property(o, "learning_rate", "-0.1", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "-0.1");
  assert_int_equal(nnt_optimizer_set_property(o, "Learning_Rate", " 0.25 ", &e), NNT_OK);
  assert_float_equal(o->learning_rate, 0.25f, 0);
  assert_int_equal(nnt_optimizer_set_property(o, "TYPE", "Sgd", &e), NNT_OK);
  assert_int_equal(nnt_optimizer_set_property(o, "type", "adam", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "adam");
  assert_int_equal(nnt_optimizer_set_property(o, "decay_steps", "0", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "decay_steps");
  assert_int_equal(nnt_optimizer_set_property(o, "decay_steps", "1.5", &e), NNT_ERR_INVAL);
  assert_int_equal(nnt_optimizer_set_property(o, "decay_rate", "0", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "decay_rate");
  assert_int_equal(nnt_optimizer_set_property(o, NULL, "1", &e), NNT_ERR_INVAL);
  nnt_optimizer_destroy(o);

  o = opt("adam", NULL);
  assert_int_equal(nnt_optimizer_set_property(o, "beta2", "1.5", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "beta2");
  tu_assert_contains(e.msg, "1.5");
  assert_float_equal(o->beta2, 0.999f, 0);
  assert_int_equal(nnt_optimizer_set_property(o, "beta1", "1", &e), NNT_ERR_INVAL);
  assert_int_equal(nnt_optimizer_set_property(o, "epsilon", "-1e-7", &e), NNT_ERR_INVAL);
  assert_int_equal(nnt_optimizer_set_property(o, "epsilon", "nan", &e), NNT_ERR_INVAL);
  assert_int_equal(nnt_optimizer_set_property(o, "weight_decay", "0.1", &e), NNT_ERR_NOKEY);
  assert_int_equal(nnt_optimizer_set_property(o, "Beta1", "0.8", &e), NNT_OK);
  assert_float_equal(o->beta1, 0.8f, 0);
  nnt_optimizer_destroy(o);

  o = opt("adamw", NULL);
  assert_int_equal(nnt_optimizer_set_property(o, "weight_decay", "x", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "weight_decay");
  assert_int_equal(nnt_optimizer_set_property(o, "weight_decay", "0.05", &e), NNT_OK);
  assert_float_equal(o->weight_decay, 0.05f, 0);
  nnt_optimizer_destroy(o);

  assert_int_equal(nnt_optimizer_create("rmsprop", &o, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "rmsprop");
  assert_int_equal(nnt_optimizer_create(NULL, &o, &e), NNT_ERR_INVAL);
}

static void test_sgd_steps(void **state) {
  (void)state;
  const char *kv[] = {"learning_rate", "0.1", NULL};
  nnt_optimizer *o = opt("sgd", kv);
  float w[N] = {1, -2, 0.5f, 0.03f, -0.7f};
  double rw[N];
  for (int i = 0; i < N; i++)
    rw[i] = w[i];
  for (size_t it = 0; it < STEPS; it++) {
    float g[N];
    grad_at(it, g);
    assert_int_equal(nnt_optimizer_apply(o, &ref_k, it, N, w, g, NULL, NULL), NNT_OK);
    for (int i = 0; i < N; i++)
      rw[i] -= 0.1 * g[i];
    assert_close(w, rw, N, 1e-6);
  }
  nnt_optimizer_destroy(o);
}

static void test_adam_steps(void **state) {
  (void)state;
  const char *kv[] = {"learning_rate", "0.01", NULL};
  nnt_optimizer *o = opt("adam", kv);
  run_adam(o, &ref_k, 0, 0, NULL);
  /* t counts across epochs: starting at iteration 100 uses t = 101 */
  run_adam(o, &ref_k, 100, 0, NULL);
  /* step 1 by hand: m = 0.1 g, v = 0.001 g^2, lr_t = lr sqrt(0.001) / 0.1,
   * so w moves by lr * g / (|g| + eps / sqrt(0.001)) ~ lr * sign(g) */
  float w = 1, g = 0.5f, m = 0, v = 0, *st[2] = {&m, &v};
  assert_int_equal(nnt_optimizer_apply(o, &ref_k, 0, 1, &w, &g, st, NULL), NNT_OK);
  double want = 1 - 0.01 * sqrt(0.001) / 0.1 * 0.05 / (sqrt(0.00025) + 1e-7);
  assert_true(fabs(w - want) < 5e-7);
  nnt_optimizer_destroy(o);

  const char *kv2[] = {"learning_rate", "0.05", "beta1", "0.8", "beta2", "0.99", "epsilon",
                       "1e-3", NULL};
  o = opt("adam", kv2);
  run_adam(o, &ref_k, 0, 0, NULL);
  nnt_optimizer_destroy(o);
}

static void test_adamw_steps(void **state) {
  (void)state;
  const char *kv[] = {"learning_rate", "0.01", "weight_decay", "0.1", NULL};
  nnt_optimizer *o = opt("adamw", kv);
  float with_decay[N], without[N];
  run_adam(o, &ref_k, 0, 0.1, with_decay);
  nnt_optimizer_destroy(o);
  const char *kv0[] = {"learning_rate", "0.01", NULL};
  o = opt("adamw", kv0);
  run_adam(o, &ref_k, 0, 0, without);
  nnt_optimizer_destroy(o);
  /* the decay pulls every weight toward 0 */
  assert_true(fabs(with_decay[0]) < fabs(without[0]));
  assert_true(fabs(with_decay[1]) < fabs(without[1]));
  /* decay uses the scheduled lr, the Adam step the bias-corrected one */
  const char *kv2[] = {"weight_decay", "0.5", NULL};
  o = opt("adamw", kv2);
  const char *st[] = {"learning_rate", "0.1,0.02", "iteration", "2", NULL};
  assert_int_equal(nnt_optimizer_set_lr_scheduler(o, sched("step", st), NULL), NNT_OK);
  run_adam(o, &ref_k, 0, 0.5, NULL);
  nnt_optimizer_destroy(o);
}

static void test_cpu_kernels_agree(void **state) {
  (void)state;
  const char *kv[] = {"learning_rate", "0.01", "weight_decay", "0.01", NULL};
  nnt_optimizer *o = opt("adamw", kv);
  float a[N], b[N];
  run_adam(o, &ref_k, 0, 0.01, a);
  run_adam(o, nnt_kernels_cpu(), 0, 0.01, b);
  assert_true(tu_max_rel_err(a, b, N) < 1e-6);
  nnt_optimizer_destroy(o);
}

static void test_legacy_decay(void **state) {
  (void)state;
  nnt_err e = {0};
  const char *kv[] = {"learning_rate", "0.1", "Decay_Rate", "0.5", "decay_steps", "10", NULL};
  nnt_optimizer *o = opt("sgd", kv);
  assert_int_equal(nnt_optimizer_validate(o, &e), NNT_OK);
  /* lr * decay_rate ^ (iter / decay_steps), real division: not a staircase */
  assert_float_equal(nnt_optimizer_lr(o, 0), 0.1f, 1e-9);
  assert_float_equal(nnt_optimizer_lr(o, 5), 0.1 * pow(0.5, 0.5), 1e-8);
  assert_float_equal(nnt_optimizer_lr(o, 9), 0.1 * pow(0.5, 0.9), 1e-8);
  assert_float_equal(nnt_optimizer_lr(o, 10), 0.05f, 1e-8);
  assert_float_equal(nnt_optimizer_lr(o, 25), 0.1 * pow(0.5, 2.5), 1e-8);
  /* the step uses the decayed rate */
  float w = 1, g = 2;
  assert_int_equal(nnt_optimizer_apply(o, &ref_k, 20, 1, &w, &g, NULL, NULL), NNT_OK);
  assert_float_equal(w, 1 - 0.025 * 2, 1e-7);
  /* a scheduler on top of the legacy keys is refused, as NNTrainer does */
  nnt_lr_scheduler *s = sched("constant", NULL);
  assert_int_equal(nnt_optimizer_set_lr_scheduler(o, s, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "decay_rate");
  nnt_lrs_destroy(s); /* still ours */
  nnt_optimizer_destroy(o);

  /* only one of the two: no decay, and validate names the missing key */
  const char *one[] = {"learning_rate", "0.1", "decay_rate", "0.5", NULL};
  o = opt("adam", one);
  assert_float_equal(nnt_optimizer_lr(o, 50), 0.1f, 0);
  assert_int_equal(nnt_optimizer_validate(o, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "decay_steps");
  nnt_optimizer_destroy(o);
  const char *other[] = {"decay_steps", "3", NULL};
  o = opt("adam", other);
  assert_int_equal(nnt_optimizer_validate(o, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "decay_rate");
  nnt_optimizer_destroy(o);

  /* legacy keys after a scheduler are refused too */
  o = opt("sgd", NULL);
  assert_int_equal(nnt_optimizer_set_lr_scheduler(o, sched("constant", NULL), &e), NNT_OK);
  assert_int_equal(nnt_optimizer_set_property(o, "decay_steps", "4", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "decay_steps");
  assert_int_equal(nnt_optimizer_set_property(o, "decay_rate", "0.9", &e), NNT_ERR_INVAL);
  nnt_optimizer_destroy(o);
}

static void test_constant_and_exponential(void **state) {
  (void)state;
  const char *c[] = {"type", "Constant", "learning_rate", "0.3", NULL};
  nnt_lr_scheduler *s = sched("CONSTANT", c);
  assert_float_equal(nnt_lrs_get(s, 0), 0.3f, 0);
  assert_float_equal(nnt_lrs_get(s, 1000000), 0.3f, 0);
  nnt_lrs_destroy(s);

  const char *ex[] = {"learning_rate", "1", "decay_rate", "0.9", "decay_steps", "4", NULL};
  s = sched("exponential", ex);
  const size_t its[] = {0, 1, 3, 4, 8, 10, 401};
  for (size_t i = 0; i < NNT_ARRAY_LEN(its); i++)
    assert_float_equal(nnt_lrs_get(s, its[i]), pow(0.9, (double)its[i] / 4), 1e-7);
  nnt_lrs_destroy(s);

  /* without learning_rate, the optimizer's is used */
  const char *lr[] = {"learning_rate", "0.02", NULL};
  nnt_optimizer *o = opt("adam", lr);
  assert_int_equal(nnt_optimizer_set_lr_scheduler(o, sched("constant", NULL), NULL), NNT_OK);
  assert_float_equal(nnt_optimizer_lr(o, 100), 0.02f, 0);
  const char *ex2[] = {"decay_rate", "0.5", "decay_steps", "2", NULL};
  assert_int_equal(nnt_optimizer_set_lr_scheduler(o, sched("exponential", ex2), NULL), NNT_OK);
  assert_float_equal(nnt_optimizer_lr(o, 3), 0.02 * pow(0.5, 1.5), 1e-9);
  /* a scheduler's own learning_rate wins over the optimizer's */
  const char *c2[] = {"learning_rate", "0.7", NULL};
  assert_int_equal(nnt_optimizer_set_lr_scheduler(o, sched("constant", c2), NULL), NNT_OK);
  assert_float_equal(nnt_optimizer_lr(o, 3), 0.7f, 0);
  nnt_optimizer_destroy(o);
}

static void test_step(void **state) {
  (void)state;
  const char *st[] = {"learning_rate", "0.1, 0.01, 0.001", "iteration", "10,20", NULL};
  nnt_lr_scheduler *s = sched("step", st);
  const size_t its[] = {0, 9, 10, 11, 19, 20, 21, 100000};
  const float want[] = {0.1f, 0.1f, 0.1f, 0.01f, 0.01f, 0.01f, 0.001f, 0.001f};
  for (size_t i = 0; i < NNT_ARRAY_LEN(its); i++)
    assert_float_equal(nnt_lrs_get(s, its[i]), want[i], 0);
  nnt_lrs_destroy(s);
  const char *one[] = {"iteration", "0", "learning_rate", "1,2", NULL};
  s = sched("step", one);
  assert_float_equal(nnt_lrs_get(s, 0), 1.0f, 0);
  assert_float_equal(nnt_lrs_get(s, 1), 2.0f, 0);
  nnt_lrs_destroy(s);
}

static void test_cosine_and_linear(void **state) {
  (void)state;
  const char *co[] = {"max_learning_rate", "1", "min_learning_rate", "0.1", "decay_steps",
                      "10", NULL};
  nnt_lr_scheduler *s = sched("cosine", co);
  const size_t its[] = {0, 1, 5, 9, 10, 13, 25, 99};
  for (size_t i = 0; i < NNT_ARRAY_LEN(its); i++) {
    double want = 0.1 + 0.9 * 0.5 * (1 + cos(M_PI * (double)(its[i] % 10) / 10));
    assert_float_equal(nnt_lrs_get(s, its[i]), want, 1e-6);
  }
  /* periodic: back to max at decay_steps, halfway at 15 */
  assert_float_equal(nnt_lrs_get(s, 10), 1.0f, 1e-7);
  assert_float_equal(nnt_lrs_get(s, 15), 0.55f, 1e-6);
  nnt_lrs_destroy(s);

  s = sched("linear", co);
  assert_float_equal(nnt_lrs_get(s, 0), 1.0f, 1e-7);
  assert_float_equal(nnt_lrs_get(s, 2), 0.82f, 1e-6);
  assert_float_equal(nnt_lrs_get(s, 5), 0.55f, 1e-6);
  assert_float_equal(nnt_lrs_get(s, 9), 0.19f, 1e-6);
  assert_float_equal(nnt_lrs_get(s, 10), 0.1f, 1e-7);
  assert_float_equal(nnt_lrs_get(s, 11), 0.1f, 1e-7);
  assert_float_equal(nnt_lrs_get(s, 5000), 0.1f, 1e-7);
  nnt_lrs_destroy(s);

  /* these ignore the optimizer's learning_rate */
  nnt_optimizer *o = opt("sgd", NULL);
  assert_int_equal(nnt_optimizer_set_lr_scheduler(o, sched("linear", co), NULL), NNT_OK);
  assert_float_equal(nnt_optimizer_lr(o, 5), 0.55f, 1e-6);
  nnt_optimizer_destroy(o);
}

static void expect_missing(const char *type, const char *const *kv, const char *key) {
  nnt_lr_scheduler *s = NULL;
  nnt_err e = {0};
  assert_int_equal(nnt_lrs_create(type, &s, &e), NNT_OK);
  for (size_t i = 0; kv[i]; i += 2)
    assert_int_equal(nnt_lrs_set_property(s, kv[i], kv[i + 1], &e), NNT_OK);
  assert_int_equal(nnt_lrs_validate(s, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, key);
  /* an optimizer refuses it and leaves it to the caller */
  nnt_optimizer *o = opt("sgd", NULL);
  assert_int_equal(nnt_optimizer_set_lr_scheduler(o, s, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, key);
  assert_null(o->sched);
  nnt_optimizer_destroy(o);
  nnt_lrs_destroy(s);
}

static void test_scheduler_errors(void **state) {
  (void)state;
  nnt_lr_scheduler *s = NULL;
  nnt_err e = {0};
  assert_int_equal(nnt_lrs_create("warmup", &s, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "warmup");

  const char *ex1[] = {"learning_rate", "1", "decay_steps", "3", NULL};
  expect_missing("exponential", ex1, "decay_rate");
  const char *ex2[] = {"decay_rate", "0.5", NULL};
  expect_missing("exponential", ex2, "decay_steps");
  const char *st1[] = {"iteration", "5", NULL};
  expect_missing("step", st1, "learning_rate");
  const char *st2[] = {"learning_rate", "0.1,0.01", NULL};
  expect_missing("step", st2, "iteration");
  const char *st3[] = {"learning_rate", "0.1,0.01", "iteration", "5,9", NULL};
  expect_missing("step", st3, "iteration"); /* mismatched lengths */
  const char *st4[] = {"learning_rate", "0.1,0.01,0.001,1", "iteration", "5,9", NULL};
  expect_missing("step", st4, "learning_rate");
  const char *co1[] = {"min_learning_rate", "0", "decay_steps", "3", NULL};
  expect_missing("cosine", co1, "max_learning_rate");
  const char *co2[] = {"max_learning_rate", "1", "decay_steps", "3", NULL};
  expect_missing("linear", co2, "min_learning_rate");
  const char *co3[] = {"max_learning_rate", "1", "min_learning_rate", "0", NULL};
  expect_missing("cosine", co3, "decay_steps");

  assert_int_equal(nnt_lrs_create("step", &s, &e), NNT_OK);
  assert_int_equal(nnt_lrs_set_property(s, "iteration", "9,5", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "iteration");
  assert_int_equal(nnt_lrs_set_property(s, "iteration", "5,5", &e), NNT_ERR_INVAL);
  assert_int_equal(nnt_lrs_set_property(s, "iteration", "5,x", &e), NNT_ERR_INVAL);
  assert_int_equal(s->n_steps_iter, 0); /* unchanged on failure */
  assert_int_equal(nnt_lrs_set_property(s, "learning_rate", "0.1,-1", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "learning_rate");
  assert_int_equal(nnt_lrs_set_property(s, "learning_rate", "abc", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "abc");
  assert_int_equal(nnt_lrs_set_property(s, "max_learning_rate", "1", &e), NNT_ERR_NOKEY);
  tu_assert_contains(e.msg, "max_learning_rate");
  assert_int_equal(nnt_lrs_set_property(s, "decay_rate", "0.5", &e), NNT_ERR_NOKEY);
  assert_int_equal(nnt_lrs_set_property(s, "type", "cosine", &e), NNT_ERR_INVAL);
  nnt_lrs_destroy(s);

  assert_int_equal(nnt_lrs_create("cosine", &s, &e), NNT_OK);
  assert_int_equal(nnt_lrs_set_property(s, "learning_rate", "0.1", &e), NNT_ERR_NOKEY);
  assert_int_equal(nnt_lrs_set_property(s, "iteration", "3", &e), NNT_ERR_NOKEY);
  assert_int_equal(nnt_lrs_set_property(s, "decay_steps", "0", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "decay_steps");
  assert_true(isnan(nnt_lrs_get(s, 3))); /* unvalidated: no division by zero */
  nnt_lrs_destroy(s);

  assert_int_equal(nnt_lrs_create("constant", &s, &e), NNT_OK);
  assert_int_equal(nnt_lrs_set_property(s, "decay_steps", "3", &e), NNT_ERR_NOKEY);
  assert_int_equal(nnt_lrs_set_property(s, "learning_rate", "-1", &e), NNT_ERR_INVAL);
  /* one scheduler cannot belong to two optimizers */
  nnt_optimizer *a = opt("sgd", NULL), *b = opt("adam", NULL);
  assert_int_equal(nnt_optimizer_set_lr_scheduler(a, s, &e), NNT_OK);
  assert_int_equal(nnt_optimizer_set_lr_scheduler(a, s, &e), NNT_OK); /* same one again */
  assert_int_equal(nnt_optimizer_set_lr_scheduler(b, s, &e), NNT_ERR_INVAL);
  assert_int_equal(nnt_optimizer_set_lr_scheduler(b, NULL, &e), NNT_ERR_INVAL);
  nnt_optimizer_destroy(a); /* frees s */
  nnt_optimizer_destroy(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults),
      cmocka_unit_test(test_property_errors),
      cmocka_unit_test(test_sgd_steps),
      cmocka_unit_test(test_adam_steps),
      cmocka_unit_test(test_adamw_steps),
      cmocka_unit_test(test_cpu_kernels_agree),
      cmocka_unit_test(test_legacy_decay),
      cmocka_unit_test(test_constant_and_exponential),
      cmocka_unit_test(test_step),
      cmocka_unit_test(test_cosine_and_linear),
      cmocka_unit_test(test_scheduler_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
