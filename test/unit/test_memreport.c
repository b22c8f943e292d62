/* The memory report (issue 13): where a plan peaks and what is live there
 * (nnt_mgr_peak, nnt_model_mem_peak, `nntrainer plan`,
 * ml_train_ext_model_get_memory_peak), and that a training step allocates
 * nothing after the first: every byte a step touches is the plan's. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "capi_harness.h"
#include "manager/manager.h"
#include "nntrainer/ini.h"
#include "nntrainer/memreport.h"
#include "nntrainer/model_impl.h"
#include "test_util.h"

/* The peak of a hand-made plan: the first order with the most bytes live,
 * a view counted once as its root, and the sum equal to the lower bound. */
static void test_mgr_peak(void **state) {
  (void)state;
  nnt_err e = {0};
  nnt_mgr g;
  nnt_mgr_init(&g);
  unsigned order = 99;
  size_t kb[NNT_TK__COUNT];
  /* nothing planned: order 0, nothing live */
  assert_int_equal(nnt_mgr_peak(&g, &order, kb, &e), NNT_OK);
  assert_int_equal(order, 0);
  /* a: input 0..1 (64 floats), b: activation 1..3 (128), c: view of b,
   * d: derivative 3..4 (128), s: scratch 2..2 (16) */
  int a = nnt_mgr_request(&g, "a", NNT_TK_INPUT, nnt_dim_make(1, 1, 1, 64), 0, 1);
  int b = nnt_mgr_request(&g, "b", NNT_TK_ACTIVATION, nnt_dim_make(1, 1, 1, 128), 1, 3);
  int c = nnt_mgr_request(&g, "c", NNT_TK_DERIVATIVE, nnt_dim_make(1, 1, 1, 128), 3, 3);
  int d = nnt_mgr_request(&g, "d", NNT_TK_DERIVATIVE, nnt_dim_make(1, 1, 1, 128), 3, 4);
  int s = nnt_mgr_request(&g, "s", NNT_TK_SCRATCH, nnt_dim_make(1, 1, 1, 16), 2, 2);
  assert_true(a >= 0 && b >= 0 && c >= 0 && d >= 0 && s >= 0);
  nnt_mgr_merge(&g, c, b);
  assert_int_equal(nnt_mgr_plan(&g, NNT_PLANNER_BEST_FIT, 1, &e), NNT_OK);
  assert_int_equal(nnt_mgr_peak(&g, &order, kb, &e), NNT_OK);
  /* order 1: 256 + 512; order 2: 512 + 64; order 3: 512 + 512 (the view
   * once, as an activation) */
  assert_int_equal(order, 3);
  assert_int_equal(kb[NNT_TK_ACTIVATION], 512);
  assert_int_equal(kb[NNT_TK_DERIVATIVE], 512);
  assert_int_equal(kb[NNT_TK_INPUT] + kb[NNT_TK_SCRATCH] + kb[NNT_TK_GRADIENT], 0);
  assert_int_equal(kb[NNT_TK_ACTIVATION] + kb[NNT_TK_DERIVATIVE], g.lower_bound);
  nnt_mgr_free(&g);

  /* ties: the first order */
  nnt_mgr_init(&g);
  assert_true(nnt_mgr_request(&g, "x", NNT_TK_ACTIVATION, nnt_dim_make(1, 1, 1, 32), 0, 0) >= 0);
  assert_true(nnt_mgr_request(&g, "y", NNT_TK_GRADIENT, nnt_dim_make(1, 1, 1, 32), 2, 2) >= 0);
  assert_int_equal(nnt_mgr_plan(&g, NNT_PLANNER_POOL, 1, &e), NNT_OK);
  assert_int_equal(nnt_mgr_peak(&g, &order, kb, &e), NNT_OK);
  assert_int_equal(order, 0);
  assert_int_equal(kb[NNT_TK_ACTIVATION], 128);
  assert_int_equal(kb[NNT_TK_GRADIENT], 0);
  /* the sweep's allocation fails cleanly */
  nnt_alloc_fail_once(0);
  assert_int_equal(nnt_mgr_peak(&g, &order, kb, &e), NNT_ERR_NOMEM);
  tu_assert_contains(e.msg, "peak");
  nnt_alloc_fail_after(-1);
  nnt_mgr_free(&g);
}

/* A model from an INI with a synthetic training set of `samples`,
 * compiled and initialized. */
static nnt_model *load(const char *ini, const char *batch, unsigned samples) {
  nnt_err e = {0};
  nnt_model *m;
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  char ov[64];
  snprintf(ov, sizeof ov, "batch_size=%s", batch);
  const char *ovs[] = {ov, "epochs=1", "save_path="};
  nnt_dataset *ds;
  if (nnt_ini_load(m, tu_data_path("../%s", ini), ovs, 3, &e) ||
      nnt_dataset_create_synthetic(samples, 0x5157ULL, &ds, &e) ||
      nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, &e))
    fail_msg("%s: %s", ini, e.msg);
  for (int d = NNT_DS_VALID; d <= NNT_DS_TEST; d++)
    if (nnt_model_dataset(m, d))
      assert_int_equal(nnt_model_set_dataset(m, d, NULL, &e), NNT_OK);
  if (nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("%s: %s", ini, e.msg);
  return m;
}

static const char *const models[] = {
    "Applications/FashionMNIST/mlp.ini", "Applications/FashionMNIST/cnn.ini",
    "Applications/FashionMNIST/cnn_bn.ini", "benchmarks/models/convbn.ini",
    "benchmarks/models/fmnist_cnn.ini", "benchmarks/models/lenet5.ini",
    "benchmarks/models/mlp.ini"};

/* At the benchmark models' own batch (32), where ReLU's bit masks (small,
 * long-lived) sit among short-lived large tensors: best fit's block orders
 * alone left LeNet-5 at 1.123 of its bound and the Fashion-MNIST CNN at
 * 1.157; the search over orders (manager.c try_orders) brings both within
 * 1.02, and conv-BN-ReLU (1.040 after the top search) too with the
 * promotion search (test_planner_search has its request set). */
static void test_bound_at_batch32(void **state) {
  (void)state;
  static const char *const ini[] = {"benchmarks/models/lenet5.ini",
                                    "benchmarks/models/fmnist_cnn.ini",
                                    "Applications/FashionMNIST/cnn.ini",
                                    "benchmarks/models/convbn.ini"};
  nnt_err e = {0};
  for (size_t i = 0; i < sizeof ini / sizeof *ini; i++) {
    nnt_model *m = load(ini[i], "32", 64);
    assert_int_equal(nnt_model_plan(m, NNT_MODE_TRAIN, &e), NNT_OK);
    const nnt_mgr *g = &m->mgr[NNT_MODE_TRAIN];
    if ((double)g->arena_bytes > 1.02 * (double)g->lower_bound)
      fail_msg("%s: arena %zu > 1.02 x lower bound %zu", ini[i], g->arena_bytes,
               g->lower_bound);
    nnt_model_destroy(m);
  }
}

/* Every mode of every model: the peak's live bytes are the lower bound,
 * its kinds sum to them, the step is one of the schedule's (or just after
 * it), the largest tensors are live there and sorted, and inference holds
 * no label, no loss, no gradient and no derivative at its peak. */
static void test_model_peaks(void **state) {
  (void)state;
  nnt_err e = {0};
  for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
    nnt_model *m = load(models[i], "8", 16);
    for (int mode = 0; mode < NNT_MODE__COUNT; mode++) {
      if (nnt_model_plan(m, (nnt_mode)mode, &e))
        fail_msg("%s: %s", models[i], e.msg);
      nnt_mem_peak p;
      assert_int_equal(nnt_model_mem_peak(m, (nnt_mode)mode, &p, &e), NNT_OK);
      const nnt_mgr *g = &m->mgr[mode];
      assert_int_equal(p.live_bytes, g->lower_bound);
      /* best fit, in its other block orders where the first leaves a gap,
       * places the arena within 2% of the bound (issue 13's goal) */
      if ((double)g->arena_bytes > 1.02 * (double)g->lower_bound)
        fail_msg("%s mode %d: arena %zu > 1.02 x lower bound %zu", models[i], mode,
                 g->arena_bytes, g->lower_bound);
      size_t sum = 0;
      for (int k = 0; k < NNT_TK__COUNT; k++)
        if (k != NNT_TK_WEIGHT && k != NNT_TK_OPT_STATE)
          sum += p.kind_bytes[k];
      assert_int_equal(sum, p.live_bytes);
      assert_int_equal(p.total_bytes, p.live_bytes + p.kind_bytes[NNT_TK_WEIGHT] +
                                          p.kind_bytes[NNT_TK_OPT_STATE]);
      assert_true(p.step <= p.n_steps && p.n_steps == m->n_steps[mode]);
      assert_true(p.kind_bytes[NNT_TK_WEIGHT] > 0);
      assert_true(p.n_largest > 0);
      for (unsigned r = 0; r < p.n_largest; r++) {
        const nnt_mgr_tensor *t = &g->t[p.largest[r]];
        assert_true(t->parent < 0 && t->life_first <= p.step && p.step <= t->life_last);
        assert_true(r == 0 || p.largest_bytes[r - 1] >= p.largest_bytes[r]);
      }
      if (mode == NNT_MODE_TRAIN) {
        /* adam's two values per weight that trains (not batch norm's
         * moving statistics), sgd's none */
        size_t trains = 0;
        for (size_t w = 0; w < m->n_w; w++)
          if (nnt_model_weight_trains(m, w))
            trains += nnt_dim_len(m->wspec[w].dim) * sizeof(float);
        assert_int_equal(p.kind_bytes[NNT_TK_OPT_STATE],
                         nnt_optimizer_state_count(m->opt) * trains);
      } else {
        assert_int_equal(p.kind_bytes[NNT_TK_OPT_STATE], 0);
        assert_int_equal(p.kind_bytes[NNT_TK_GRADIENT] + p.kind_bytes[NNT_TK_DERIVATIVE], 0);
      }
      if (mode == NNT_MODE_INFER) {
        /* the whole inference plan: no label, no loss value */
        assert_int_equal(nnt_mgr_kind_bytes(g, NNT_TK_LABEL), 0);
        for (size_t t = 0; t < g->n; t++)
          if (strstr(g->t[t].name, ":loss") || strstr(g->t[t].name, ":label"))
            fail_msg("%s: the inference plan holds '%s'", models[i], g->t[t].name);
      }
      char w[256];
      nnt_mem_peak_where(&p, w, sizeof w);
      if (p.step < p.n_steps)
        tu_assert_contains(w, nnt_step_kind_name(p.kind));
      nnt_model_release_plan(m, (nnt_mode)mode);
    }
    nnt_model_destroy(m);
  }
}

typedef struct arm_state {
  int armed, disarmed;
  size_t batches;
} arm_state;

/* After step 1 every allocation of the library fails; after step N they
 * succeed again: steps 2..N must make none. */
static void arm(const nnt_progress *p, void *ud) {
  arm_state *s = ud;
  if (p->epoch_done)
    return;
  if (p->batch == 1) {
    nnt_alloc_fail_after(0);
    s->armed = 1;
  }
  if (p->batch == s->batches) {
    nnt_alloc_fail_after(-1);
    s->disarmed = 1;
  }
}

/* A training step allocates nothing through the library after the first:
 * steps 2..6 of every model run with every allocation failing. */
static void test_steps_do_not_allocate(void **state) {
  (void)state;
  nnt_err e = {0};
  for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
    nnt_model *m = load(models[i], "4", 24);
    arm_state s = {0, 0, 6};
    int rc = nnt_model_train(m, arm, &s, &e);
    nnt_alloc_fail_after(-1);
    if (rc)
      fail_msg("%s: a step after the first allocated: %s", models[i], e.msg);
    assert_true(s.armed && s.disarmed);
    assert_int_equal(nnt_alloc_failures(), 0);
    nnt_model_destroy(m);
  }
}

/* A plan without its memory (nnt_model_plan_layout, what `nntrainer plan`
 * reports): every mode's arena is planned and not allocated, the peak is
 * reported from it, and nnt_model_plan then allocates that same plan and
 * binds the nodes to it, after which the model trains. */
static void test_layout_allocates_nothing(void **state) {
  (void)state;
  nnt_err e = {0};
  nnt_model *m = load("Applications/FashionMNIST/cnn_bn.ini", "8", 24);
  size_t arena[NNT_MODE__COUNT];
  for (int mode = 0; mode < NNT_MODE__COUNT; mode++) {
    const nnt_mgr *g = &m->mgr[mode];
    assert_int_equal(nnt_model_plan_layout(m, (nnt_mode)mode, &e), NNT_OK);
    assert_true(g->planned && g->arena_bytes > 0);
    assert_false(g->allocated);
    assert_null(g->arena);
    nnt_mem_peak p;
    assert_int_equal(nnt_model_mem_peak(m, (nnt_mode)mode, &p, &e), NNT_OK);
    assert_int_equal(p.live_bytes, g->lower_bound);
    arena[mode] = g->arena_bytes;
    /* planned again: still nothing allocated */
    assert_int_equal(nnt_model_plan_layout(m, (nnt_mode)mode, &e), NNT_OK);
    assert_false(g->allocated);
  }
  for (int mode = 0; mode < NNT_MODE__COUNT; mode++) {
    const nnt_mgr *g = &m->mgr[mode];
    assert_int_equal(nnt_model_plan(m, (nnt_mode)mode, &e), NNT_OK);
    assert_true(g->allocated && g->arena != NULL);
    assert_int_equal(g->arena_bytes, arena[mode]);
    for (size_t i = 0; i < m->n_nodes; i++) /* bound to this mode's arena */
      for (unsigned o = 0; o < m->nodes[i].fc.n_out; o++) {
        const nnt_node *nd = &m->nodes[i];
        if (!nnt_mgr_borrowed(g, nd->t_out[o])) /* the input's is the batch's, lent per step */
          assert_true(nd->out[o].data && nd->out[o].data == nnt_mgr_data(g, nd->t_out[o]));
      }
  }
  if (nnt_model_train(m, NULL, NULL, &e))
    fail_msg("train after the layout: %s", e.msg);
  /* a report of the other modes between two trainings (their layouts give
   * the nodes those modes' ids; the training plan binds its own again):
   * the same weights as a twin trained twice without them */
  nnt_model *twin = load("Applications/FashionMNIST/cnn_bn.ini", "8", 24);
  assert_int_equal(nnt_model_train(twin, NULL, NULL, &e), NNT_OK);
  assert_int_equal(nnt_model_train(twin, NULL, NULL, &e), NNT_OK);
  for (int mode = NNT_MODE_EVAL; mode < NNT_MODE__COUNT; mode++) {
    nnt_model_release_plan(m, (nnt_mode)mode);
    assert_int_equal(nnt_model_plan_layout(m, (nnt_mode)mode, &e), NNT_OK);
    nnt_model_release_plan(m, (nnt_mode)mode);
  }
  if (nnt_model_train(m, NULL, NULL, &e))
    fail_msg("train after the other modes' layouts: %s", e.msg);
  assert_int_equal(m->wpool_floats, twin->wpool_floats);
  assert_memory_equal(m->wpool, twin->wpool, m->wpool_floats * sizeof(float));
  nnt_model_destroy(twin);
  nnt_model_destroy(m);
}

/* The C API's peak agrees with its report and with itself, per mode, on a
 * model with weights that do not train (batch norm's moving statistics:
 * no optimizer state for them in either figure). */
static void test_capi_peak(void **state) {
  (void)state;
  ml_train_model_h model;
  ml_train_ext_memory_peak_s p;
  OK(ml_train_model_construct_with_conf(tu_data_path("../Applications/FashionMNIST/cnn_bn.ini"),
                                        &model));
  EXPECT_FAIL(ml_train_ext_model_get_memory_peak(model, ML_TRAIN_EXT_MODE_TRAIN, &p),
              ML_ERROR_INVALID_PARAMETER, "compile the model first");
  OK(ml_train_model_compile(model, "batch_size=8", NULL));
  EXPECT_FAIL(ml_train_ext_model_get_memory_peak(model, ML_TRAIN_EXT_MODE_TRAIN, NULL),
              ML_ERROR_INVALID_PARAMETER, "peak is NULL");
  EXPECT_FAIL(ml_train_ext_model_get_memory_peak(model, (ml_train_ext_mode_e)7, &p),
              ML_ERROR_INVALID_PARAMETER, "mode 7 is not a mode");
  size_t train_live = 0;
  for (int mode = ML_TRAIN_EXT_MODE_TRAIN; mode <= ML_TRAIN_EXT_MODE_EVAL; mode++) {
    ml_train_ext_memory_report_s r;
    OK(ml_train_ext_model_get_memory_report(model, (ml_train_ext_mode_e)mode, &r));
    OK(ml_train_ext_model_get_memory_peak(model, (ml_train_ext_mode_e)mode, &p));
    assert_int_equal(p.live_bytes, r.lower_bound_bytes);
    assert_int_equal(p.gradient_bytes + p.activation_bytes + p.derivative_bytes +
                         p.scratch_bytes + p.input_bytes + p.label_bytes,
                     p.live_bytes);
    assert_int_equal(p.weight_bytes, r.weight_bytes);
    assert_int_equal(p.optimizer_bytes, r.optimizer_bytes);
    assert_int_equal(p.total_bytes, p.live_bytes + p.weight_bytes + p.optimizer_bytes);
    assert_true(p.step <= p.steps && p.steps > 0);
    assert_non_null(p.step_kind);
    if (p.step < p.steps && strcmp(p.step_kind, "clip_and_apply"))
      assert_true(p.layer[0] != '\0');
    assert_true(p.n_largest > 0 && p.n_largest <= 8);
    size_t sum = 0;
    for (unsigned i = 0; i < p.n_largest; i++) {
      assert_true(i == 0 || p.largest[i - 1].bytes >= p.largest[i].bytes);
      assert_non_null(strchr(p.largest[i].name, ':'));
      assert_non_null(p.largest[i].kind);
      sum += p.largest[i].bytes;
    }
    assert_true(sum <= p.live_bytes);
    /* training holds at its peak at least what inference does there (the
     * peak may lie in the forward pass: cnn_bn's fc1 gradient is applied
     * a block of rows at a time, so no backward step holds more) */
    if (mode == ML_TRAIN_EXT_MODE_TRAIN)
      train_live = p.live_bytes;
    if (mode == ML_TRAIN_EXT_MODE_INFER)
      assert_true(train_live >= p.live_bytes && p.live_bytes > 0);
    if (mode == ML_TRAIN_EXT_MODE_INFER)
      assert_int_equal(p.label_bytes + p.gradient_bytes + p.derivative_bytes, 0);
  }
  /* every allocation failing in turn: out of memory and nothing kept,
   * until the call succeeds with the figures of a clean call */
  ml_train_ext_memory_peak_s clean, q;
  OK(ml_train_ext_model_get_memory_peak(model, ML_TRAIN_EXT_MODE_INFER, &clean));
  for (long k = 0;; k++) {
    nnt_alloc_fail_once(k);
    int rc = ml_train_ext_model_get_memory_peak(model, ML_TRAIN_EXT_MODE_INFER, &q);
    nnt_alloc_fail_after(-1);
    if (nnt_alloc_failures() == 0) {
      OK(rc);
      break;
    }
    assert_int_equal(rc, ML_ERROR_OUT_OF_MEMORY);
    assert_true(k < 1000);
  }
  assert_int_equal(q.live_bytes, clean.live_bytes);
  assert_int_equal(q.step, clean.step);
  assert_string_equal(q.largest[0].name, clean.largest[0].name);
  OK(ml_train_model_destroy(model));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mgr_peak),
      cmocka_unit_test(test_model_peaks),
      cmocka_unit_test(test_bound_at_batch32),
      cmocka_unit_test(test_steps_do_not_allocate),
      cmocka_unit_test(test_layout_allocates_nothing),
      cmocka_unit_test(test_capi_peak),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
