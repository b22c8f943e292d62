/* Recomputation under [Model] memory_budget (nntrainer/recompute.c): a
 * budget the plain training plan exceeds makes compile drop forward
 * results and recompute them in the backward pass. Trained weights and
 * batch normalization's moving statistics are bitwise those without a
 * budget, on a chain with batch normalization and dropout and on a
 * residual net, on the CPU and on the fake device; the plan fits the
 * budget; an impossible budget names the smallest one that fits; no
 * budget changes nothing; the smallest plan recomputes a layer more than
 * once; an in-place layer recomputed alone is refused. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_device.h"
#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

static const char chain_ini[] =
    "[Model]\ntype = NeuralNetwork\nepochs = 1\nbatch_size = 32\nloss = cross\nseed = 3\n"
    "[Optimizer]\ntype = sgd\nlearning_rate = 0.1\n"
    "[in]\ntype = input\ninput_shape = 1:1:16\n"
    "[f1]\ntype = fully_connected\nunit = 24\n"
    "[b1]\ntype = batch_normalization\nactivation = relu\n"
    "[d1]\ntype = dropout\ndropout_rate = 0.3\n"
    "[f2]\ntype = fully_connected\nunit = 24\n"
    "[b2]\ntype = batch_normalization\nactivation = relu\n"
    "[d2]\ntype = dropout\ndropout_rate = 0.2\n"
    "[f3]\ntype = fully_connected\nunit = 24\n"
    "[b3]\ntype = batch_normalization\nactivation = relu\n"
    "[f4]\ntype = fully_connected\nunit = 24\n"
    "[b4]\ntype = batch_normalization\nactivation = relu\n"
    "[fc]\ntype = fully_connected\nunit = 5\nactivation = softmax\n";

static const char *model_path(int resnet) {
  return resnet ? NNT_SOURCE_DIR "/Applications/ResNet/resnet18.ini"
                : tu_write_text("chain.ini", chain_ini);
}

/* The model with overrides ov (plus the resnet's shrinking), synthetic
 * data of 3 batches, compiled and initialized. */
static nnt_model *load(int resnet, int fake, const char *budget, nnt_err *e, int *rc) {
  const char *path = model_path(resnet);
  const char *ov[4];
  size_t n = 0;
  if (resnet) {
    ov[n++] = "input.input_shape=3:8:8";
    ov[n++] = "batch_size=2";
  }
  if (budget)
    ov[n++] = budget;
  nnt_model *m = tu_model_for_ini(path);
  if ((*rc = nnt_ini_load(m, path, ov, n, e)))
    fail_msg("%s: %s", path, e->msg);
  for (int mode = 0; mode < 3; mode++) {
    nnt_dataset *ds = NULL;
    if (mode == NNT_DS_TRAIN)
      assert_int_equal(nnt_dataset_create_synthetic(3 * nnt_model_batch_size(m), 5, &ds, e),
                       NNT_OK);
    assert_int_equal(nnt_model_set_dataset(m, mode, ds, e), NNT_OK);
  }
  if (fake)
    assert_int_equal(nnt_model_set_backend(m, fdev_backend(), e), NNT_OK);
  if ((*rc = nnt_model_compile(m, e)) || (*rc = nnt_model_initialize(m, e)))
    fail_msg("compile: %s", e->msg);
  /* the budget's search alone: without the default plan's cheap
   * recomputation (test_recompute_default) */
  m->recompute_default_done = 1;
  return m;
}

/* The training plan's total of m (planned). */
static size_t train_total(nnt_model *m) {
  size_t t;
  nnt_err e = {0};
  if (nnt_model_train_total(m, &t, &e))
    fail_msg("%s", e.msg);
  return t;
}

/* "the minimum budget that fits is 1.2 MiB (1234 bytes)" -> 1234 */
static size_t min_named(const char *msg) {
  tu_assert_contains(msg, "the smallest training plan found needs");
  tu_assert_contains(msg, "for the datasets' queues");
  const char *p = strstr(msg, "the minimum budget that fits is");
  if (!p)
    fail_msg("no minimum in: %s", msg);
  p = strchr(p, '(');
  assert_non_null(p);
  return (size_t)strtoull(p + 1, NULL, 10);
}

/* The most forward steps any node runs in m's training schedule (1: each
 * recomputed at most once). */
static unsigned most_forwards(const nnt_model *m) {
  unsigned most = 0;
  for (size_t i = 0; i < m->n_nodes; i++) {
    unsigned c = 0;
    for (unsigned s = 0; s < m->n_steps[NNT_MODE_TRAIN]; s++)
      c += m->sched[NNT_MODE_TRAIN][s].node == i &&
           m->sched[NNT_MODE_TRAIN][s].kind == NNT_STEP_FORWARD;
    most = c > most ? c : most;
  }
  return most;
}

static void check_model(int resnet, int fake) {
  nnt_err e = {0};
  int rc;
  /* no budget: no recomputation */
  nnt_model *plain = load(resnet, fake, NULL, &e, &rc);
  assert_int_equal(nnt_model_plan(plain, NNT_MODE_TRAIN, &e), NNT_OK);
  assert_int_equal(plain->n_recompute, 0);
  size_t full = train_total(plain);
  /* one byte: impossible, naming the minimum */
  nnt_model *m = load(resnet, fake, NULL, &e, &rc);
  m->memory_budget = m->weight_bytes + 1; /* the weights fit, the activations never */
  assert_int_equal(nnt_model_plan(m, NNT_MODE_TRAIN, &e), NNT_ERR_NOMEM);
  tu_assert_contains(e.msg, "[Model] memory_budget");
  size_t min = min_named(e.msg);
  assert_true(min > 0 && min < full);
  assert_int_equal(m->n_recompute, 0);
  nnt_model_destroy(m);
  /* the minimum: fits, recomputes, trains bitwise as without */
  char b[64];
  snprintf(b, sizeof b, "memory_budget=%zu", min);
  m = load(resnet, fake, b, &e, &rc);
  if (nnt_model_plan(m, NNT_MODE_TRAIN, &e))
    fail_msg("at the minimum %zu: %s", min, e.msg);
  assert_true(m->n_recompute > 0);
  assert_true(m->recompute_flops > 0);
  assert_true(train_total(m) + nnt_model_queue_reserve(m) <= min);
  assert_true(nnt_model_queue_reserve(m) > 0);
  /* the smallest plan recomputes a layer more than once: what only feeds
   * another recomputation is dropped and computed again when read */
  assert_true(most_forwards(m) >= 3);
  nnt_model_destroy(m);
  /* one byte less does not fit */
  nnt_model *less;
  snprintf(b, sizeof b, "memory_budget=%zu", min - 1);
  less = load(resnet, fake, b, &e, &rc);
  if (nnt_model_plan(less, NNT_MODE_TRAIN, &e) != NNT_ERR_NOMEM)
    fail_msg("min %zu - 1 fits: %zu, %u recomputed", min, train_total(less), less->n_recompute);
  nnt_model_destroy(less);
  /* training under the budget, the queues on top, weights bitwise */
  for (int k = 0; k < 2; k++) {
    /* k 0: the minimum, the training dataset set only after a plan (the
     * plan is fit again when training starts); k 1: half way to the full
     * plan */
    size_t bud = k ? min + (full - min) / 2 : min;
    nnt_model *r = load(resnet, fake, NULL, &e, &rc);
    nnt_model *p = load(resnet, fake, NULL, &e, &rc);
    r->memory_budget = bud;
    if (!k) {
      assert_int_equal(nnt_model_set_dataset(r, NNT_DS_TRAIN, NULL, &e), NNT_OK);
      if (nnt_model_plan(r, NNT_MODE_TRAIN, &e))
        fail_msg("budget %zu without datasets: %s", bud, e.msg);
      nnt_dataset *ds = NULL;
      assert_int_equal(nnt_dataset_create_synthetic(3 * nnt_model_batch_size(r), 5, &ds, &e),
                       NNT_OK);
      assert_int_equal(nnt_model_set_dataset(r, NNT_DS_TRAIN, ds, &e), NNT_OK);
    }
    for (int step = 0; step < 2; step++) {
      if (nnt_model_train(r, NULL, NULL, &e))
        fail_msg("train with recomputation, budget %zu (min %zu): %s", bud, min, e.msg);
      if (nnt_model_train(p, NULL, NULL, &e))
        fail_msg("train: %s", e.msg);
    }
    assert_true(r->n_recompute > 0);
    assert_int_equal(r->memory_budget, bud);
    assert_true(train_total(r) + nnt_model_queue_reserve(r) <= bud);
    float *wr = tu_weights_of(r), *wp = tu_weights_of(p);
    size_t nf = 0;
    for (size_t i = 0; i < p->n_w; i++)
      nf += nnt_dim_len(p->wspec[i].dim);
    assert_int_equal(memcmp(wr, wp, nf * sizeof(float)), 0);
    free(wr), free(wp);
    nnt_model_destroy(r);
    nnt_model_destroy(p);
  }
  nnt_model_destroy(plain);
}

/* An in-place layer recomputed without its producer would apply itself
 * twice: planning refuses such a schedule, naming the layer. */
static void test_inplace_alone(void **s) {
  (void)s;
  nnt_err e = {0};
  int rc;
  nnt_model *m = load(0, 0, NULL, &e, &rc);
  assert_int_equal(nnt_model_plan(m, NNT_MODE_TRAIN, &e), NNT_OK); /* sets inplace */
  size_t b1 = m->n_nodes; /* the first in-place layer over another's output */
  for (size_t i = m->n_nodes; i-- > 0;)
    if (m->nodes[i].inplace && m->nodes[i].in_node[0] != NNT_NO_NODE)
      b1 = i;
  assert_true(b1 < m->n_nodes);
  char want[NNT_NAME_MAX + 96];
  snprintf(want, sizeof want, "[%s] runs in place and is recomputed without its producer",
           m->nodes[b1].layer->name);
  unsigned fe = nnt_schedule_forward_end(m, NNT_MODE_TRAIN);
  assert_int_equal(nnt_schedule_insert(m, NNT_MODE_TRAIN, fe + 1,
                                       (nnt_step){(unsigned)b1, NNT_STEP_FORWARD}, &e),
                   NNT_OK);
  m->nodes[b1].recompute = 1;
  m->n_recompute = 1;
  assert_int_equal(nnt_model_plan(m, NNT_MODE_TRAIN, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, want);
  nnt_model_destroy(m);
}

static void test_chain_cpu(void **s) { (void)s; check_model(0, 0); }
static void test_chain_fake(void **s) { (void)s; check_model(0, 1); }
static void test_resnet_cpu(void **s) { (void)s; check_model(1, 0); }
static void test_resnet_fake(void **s) { (void)s; check_model(1, 1); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_chain_cpu, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_inplace_alone, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_chain_fake, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_resnet_cpu, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_resnet_fake, tu_dir_setup, tu_dir_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
