/* The schedule: the one list of steps that the planner takes every
 * lifetime from and the training loop walks. A step inserted into a
 * compiled model's schedule extends the plan's lifetimes and runs, and
 * clip_grad_by_norm's update is a step of its own. The manager owns the
 * weights and the optimizer state as well. */
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/model_impl.h"

/* in, fc1, fc1/act, fc2, fc2/act, fc3, fc3's loss (cross_softmax): nodes
 * 0..6; mprop/mval an extra [Model] key (NULL: none). */
static nnt_model *mlp(const char *mprop, const char *mval, int poison) {
  static const char *const layers[][7] = {
      {"input", "in", "input_shape", "1:1:12", NULL, NULL, NULL},
      {"fully_connected", "fc1", "unit", "16", "activation", "sigmoid", NULL},
      {"fully_connected", "fc2", "unit", "8", "activation", "tanh", NULL},
      {"fully_connected", "fc3", "unit", "4", "activation", "softmax", NULL},
  };
  nnt_err e = {0};
  nnt_model *m;
  if (poison)
    setenv("NNTRAINER_POISON", "1", 1);
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  unsetenv("NNTRAINER_POISON");
  const char *props[] = {"batch_size", "8", "epochs", "2", "loss", "cross", "seed", "5", mprop,
                         mval};
  for (size_t i = 0; i + 1 < NNT_ARRAY_LEN(props) && props[i]; i += 2)
    assert_int_equal(nnt_model_set_property(m, props[i], props[i + 1], &e), NNT_OK);
  for (size_t i = 0; i < NNT_ARRAY_LEN(layers); i++)
    tu_add_layer(m, layers[i], NNT_ARRAY_LEN(layers[i]), &e);
  nnt_optimizer *o;
  assert_int_equal(nnt_optimizer_create("adam", &o, &e), NNT_OK);
  assert_int_equal(nnt_model_set_optimizer(m, o, &e), NNT_OK);
  nnt_dataset *ds;
  assert_int_equal(nnt_dataset_create_synthetic(64, 3, &ds, &e), NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, &e), NNT_OK);
  if (nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(m->n_nodes, 7);
  return m;
}

static void train_or_fail(nnt_model *m) {
  nnt_err e = {0};
  if (nnt_model_train(m, NULL, NULL, &e))
    fail_msg("train: %s", e.msg);
}

static void plan_or_fail(nnt_model *m) {
  nnt_err e = {0};
  if (nnt_model_plan(m, NNT_MODE_TRAIN, &e))
    fail_msg("plan: %s", e.msg);
  assert_int_equal(nnt_mgr_validate(&m->mgr[NNT_MODE_TRAIN], &e), NNT_OK);
}

/* The first step of kind k of node n. */
static unsigned step_of(const nnt_model *m, unsigned n, nnt_step_kind k) {
  for (unsigned s = 0; s < m->n_steps[NNT_MODE_TRAIN]; s++)
    if (m->sched[NNT_MODE_TRAIN][s].node == n && m->sched[NNT_MODE_TRAIN][s].kind == k)
      return s;
  fail_msg("no %s step of node %u", nnt_step_kind_name(k), n);
  return 0;
}

static void life(const nnt_model *m, int id, unsigned *first, unsigned *last) {
  assert_true(id >= 0);
  nnt_mgr_life(&m->mgr[NNT_MODE_TRAIN], id, first, last);
}

/* Recomputation as a schedule edit: fc3 (node 5) forwards a second time
 * just before fc2's calc_gradient, after its own backward and update. Its
 * input (fc2's activation, written over fc2's output in place) and its
 * output now live to that step, every later lifetime moves one step on, the
 * plan stays valid, and training (under poison, which fills what a plan
 * lets die) gives the same weights bit for bit: the recomputed output is
 * read by no one. */
static void test_inserted_forward_extends_lifetimes(void **state) {
  (void)state;
  nnt_err e = {0};
  nnt_model *a = mlp(NULL, NULL, 0), *b = mlp(NULL, NULL, 1);
  unsigned at = step_of(a, 3, NNT_STEP_CALC_GRADIENT);
  assert_true(step_of(a, 5, NNT_STEP_APPLY_GRADIENT) < at);
  assert_int_equal(nnt_schedule_insert(b, NNT_MODE_TRAIN, at,
                                       (nnt_step){5, NNT_STEP_FORWARD}, &e),
                   NNT_OK);
  assert_int_equal(b->n_steps[NNT_MODE_TRAIN], a->n_steps[NNT_MODE_TRAIN] + 1);
  plan_or_fail(a);
  plan_or_fail(b);
  unsigned fa, la, fb, lb;
  /* fc3's input: its last reader was fc2's activation's calc_derivative */
  life(a, a->nodes[5].t_in[0], &fa, &la);
  life(b, b->nodes[5].t_in[0], &fb, &lb);
  assert_true(la < at);
  assert_int_equal(fb, fa);
  assert_int_equal(lb, at);
  /* fc3's output (its own uses: the loss may share its memory): its last
   * reader was the loss's backward */
  la = a->mgr[NNT_MODE_TRAIN].t[a->nodes[5].t_out[0]].last;
  lb = b->mgr[NNT_MODE_TRAIN].t[b->nodes[5].t_out[0]].last;
  assert_true(la < at);
  assert_int_equal(lb, at);
  /* fc1's gradient lies after the new step: one step later */
  life(a, a->nodes[1].t_gw[0], &fa, &la);
  life(b, b->nodes[1].t_gw[0], &fb, &lb);
  assert_true(fa > at);
  assert_int_equal(fb, fa + 1);
  assert_int_equal(lb, la + 1);
  /* the recomputed output keeps memory nobody else uses then: more bytes */
  assert_true(b->mgr[NNT_MODE_TRAIN].arena_bytes >= a->mgr[NNT_MODE_TRAIN].arena_bytes);
  train_or_fail(a);
  train_or_fail(b);
  assert_int_equal(a->iter, b->iter);
  assert_memory_equal(a->wpool, b->wpool, a->wpool_floats * sizeof(float));
  nnt_model_destroy(a);
  nnt_model_destroy(b);
}

/* A step that runs nothing moves every later lifetime one step on and
 * leaves the plan's bytes as they were. */
static void test_inserted_none_shifts(void **state) {
  (void)state;
  nnt_err e = {0};
  nnt_model *a = mlp(NULL, NULL, 0), *b = mlp(NULL, NULL, 0);
  unsigned at = step_of(a, 6, NNT_STEP_CALC_GRADIENT);
  assert_int_equal(nnt_schedule_insert(b, NNT_MODE_TRAIN, at,
                                       (nnt_step){NNT_NO_NODE, NNT_STEP_NONE}, &e),
                   NNT_OK);
  plan_or_fail(a);
  plan_or_fail(b);
  const nnt_mgr *ga = &a->mgr[NNT_MODE_TRAIN], *gb = &b->mgr[NNT_MODE_TRAIN];
  assert_int_equal(ga->n, gb->n);
  assert_int_equal(ga->arena_bytes, gb->arena_bytes);
  unsigned fwd_end = nnt_schedule_forward_end(b, NNT_MODE_TRAIN);
  for (size_t i = 0; i < ga->n; i++) {
    assert_string_equal(ga->t[i].name, gb->t[i].name);
    assert_int_equal(gb->t[i].first, ga->t[i].first + (ga->t[i].first >= at));
    /* a loss value is read when the forward steps end, before the step
     * inserted at their end */
    if (strstr(ga->t[i].name, ":loss"))
      assert_int_equal(gb->t[i].last, fwd_end);
    else
      assert_int_equal(gb->t[i].last, ga->t[i].last + (ga->t[i].last >= at));
    assert_int_equal(gb->t[i].offset, ga->t[i].offset);
  }
  nnt_model_destroy(a);
  nnt_model_destroy(b);
}

/* clip_grad_by_norm: no node applies alone; the last step clips and
 * applies, and every gradient lives to it. Under poison (which fills a
 * tensor with NaN after its last step) the weights are those of a run
 * without it: the gradients were poisoned before the clipped update read
 * them when the update ran after the last order. */
static void test_clip_is_a_step(void **state) {
  (void)state;
  nnt_model *a = mlp("clip_grad_by_norm", "0.05", 0), *b = mlp("clip_grad_by_norm", "0.05", 1);
  unsigned n = a->n_steps[NNT_MODE_TRAIN];
  assert_int_equal(n, 7 + 3 * 6); /* the input has no backward steps */
  assert_int_equal(a->sched[NNT_MODE_TRAIN][n - 1].kind, NNT_STEP_CLIP_APPLY);
  for (unsigned s = 0; s < n; s++)
    assert_int_not_equal(a->sched[NNT_MODE_TRAIN][s].kind, NNT_STEP_APPLY_GRADIENT);
  plan_or_fail(a);
  unsigned f, l;
  life(a, a->nodes[5].t_gw[0], &f, &l);
  assert_int_equal(l, n - 1);
  train_or_fail(a);
  train_or_fail(b);
  for (size_t i = 0; i < b->wpool_floats; i++)
    assert_false(isnan(b->wpool[i]));
  assert_memory_equal(a->wpool, b->wpool, a->wpool_floats * sizeof(float));
  nnt_model_destroy(a);
  nnt_model_destroy(b);
}

static void test_insert_errors(void **state) {
  (void)state;
  nnt_err e = {0};
  nnt_model *m = mlp(NULL, NULL, 0);
  unsigned n = m->n_steps[NNT_MODE_TRAIN];
  assert_int_equal(nnt_schedule_insert(m, NNT_MODE_TRAIN, n + 1,
                                       (nnt_step){0, NNT_STEP_FORWARD}, &e),
                   NNT_ERR_INVAL);
  assert_non_null(strstr(e.msg, "schedule: cannot insert a forward step of node 0"));
  assert_int_equal(nnt_schedule_insert(m, NNT_MODE_TRAIN, 0,
                                       (nnt_step){7, NNT_STEP_CALC_GRADIENT}, &e),
                   NNT_ERR_INVAL);
  assert_non_null(strstr(e.msg, "calc_gradient step of node 7"));
  /* inference runs forward steps only */
  assert_int_equal(nnt_schedule_insert(m, NNT_MODE_INFER, 0,
                                       (nnt_step){1, NNT_STEP_CALC_GRADIENT}, &e),
                   NNT_ERR_INVAL);
  assert_int_equal(m->n_steps[NNT_MODE_TRAIN], n);
  /* a step inserted at the end is accepted */
  assert_int_equal(nnt_schedule_insert(m, NNT_MODE_INFER, m->n_steps[NNT_MODE_INFER],
                                       (nnt_step){6, NNT_STEP_FORWARD}, &e),
                   NNT_OK);
  assert_int_equal(m->n_steps[NNT_MODE_INFER], 8);
  nnt_model_destroy(m);
}

/* The manager owns the weights and the optimizer state too: one request
 * each in a persistent pool of the backend (whole-run lifetime), packed in
 * save order, so slot s of weight i lies at s * wpool_floats plus the
 * weight's offset, as the optimizer and the weight file read them. */
static void test_persistent_pools(void **state) {
  (void)state;
  nnt_model *m = mlp(NULL, NULL, 0);
  const nnt_mgr *w = &m->wmgr;
  assert_int_equal(w->n, m->n_w);
  assert_int_equal(nnt_mgr_kind_bytes(w, NNT_TK_WEIGHT), m->weight_bytes);
  assert_int_equal(w->arena_bytes, m->weight_bytes);
  assert_ptr_equal(m->wbuf, w->buf);
  assert_ptr_equal(m->wpool, w->arena);
  assert_string_equal(w->t[0].name, "fc1:weight");
  for (size_t i = 0; i < m->n_w; i++) {
    assert_int_equal(w->t[i].kind, NNT_TK_WEIGHT);
    assert_ptr_equal(m->w[i].data, nnt_mgr_data(w, (int)i));
    assert_ptr_equal(m->w[i].buf, m->wbuf);
  }
  assert_null(m->obuf); /* optimizer state waits for the first training step */
  train_or_fail(m);
  const nnt_mgr *o = &m->omgr;
  assert_int_equal(m->opt_slots, 2);
  assert_int_equal(o->n, 2 * m->n_w);
  assert_int_equal(nnt_mgr_kind_bytes(o, NNT_TK_OPT_STATE), 2 * m->weight_bytes);
  assert_ptr_equal(m->opt_pool, o->arena);
  for (unsigned sl = 0; sl < 2; sl++)
    for (size_t i = 0; i < m->n_w; i++)
      assert_ptr_equal(nnt_mgr_data(o, (int)(sl * m->n_w + i)),
                       m->opt_pool + sl * m->wpool_floats + (m->w[i].data - m->wpool));
  /* the modes' arenas hold neither */
  nnt_err e = {0};
  assert_int_equal(nnt_model_plan(m, NNT_MODE_INFER, &e), NNT_OK);
  for (int mode = 0; mode < 2; mode++) {
    assert_int_equal(nnt_mgr_kind_bytes(&m->mgr[mode], NNT_TK_WEIGHT), 0);
    assert_int_equal(nnt_mgr_kind_bytes(&m->mgr[mode], NNT_TK_OPT_STATE), 0);
  }
  nnt_model_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_inserted_forward_extends_lifetimes),
      cmocka_unit_test(test_inserted_none_shifts),
      cmocka_unit_test(test_clip_is_a_step),
      cmocka_unit_test(test_insert_errors),
      cmocka_unit_test(test_persistent_pools),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
