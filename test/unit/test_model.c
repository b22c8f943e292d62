/* The model end to end: graph compile, plans, training, save/load. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nntrainer/model_impl.h"

typedef struct lspec {
  const char *type, *name, *props[8];
} lspec;

/* Build a model from a table of layers and [Model] properties. */
static nnt_model *build(const lspec *layers, size_t n, const char *const *mprops,
                        const char *opt, nnt_err *e, int *rc_out) {
  nnt_model *m;
  int rc = nnt_model_create(&m, e);
  assert_int_equal(rc, NNT_OK);
  for (size_t i = 0; mprops && mprops[i]; i += 2)
    assert_int_equal(nnt_model_set_property(m, mprops[i], mprops[i + 1], e), NNT_OK);
  for (size_t i = 0; i < n; i++) {
    nnt_layer *l;
    assert_int_equal(nnt_layer_create(layers[i].type, &l, e), NNT_OK);
    assert_int_equal(nnt_layer_set_property(l, "name", layers[i].name, e), NNT_OK);
    for (size_t k = 0; layers[i].props[k]; k += 2)
      if ((rc = nnt_layer_set_property(l, layers[i].props[k], layers[i].props[k + 1], e)))
        fail_msg("%s: %s", layers[i].name, e->msg);
    assert_int_equal(nnt_model_add_layer(m, l, e), NNT_OK);
  }
  nnt_optimizer *o;
  assert_int_equal(nnt_optimizer_create(opt ? opt : "sgd", &o, e), NNT_OK);
  assert_int_equal(nnt_optimizer_set_property(o, "learning_rate", opt ? "0.01" : "0.1", e),
                   NNT_OK);
  assert_int_equal(nnt_model_set_optimizer(m, o, e), NNT_OK);
  nnt_dataset *ds;
  assert_int_equal(nnt_dataset_create_synthetic(64, 7, &ds, e), NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, e), NNT_OK);
  *rc_out = nnt_model_compile(m, e);
  m->keep_train_arena = 1; /* the tests read the training plan afterwards */
  return m;
}

static const lspec mlp[] = {
    {"input", "in", {"input_shape", "1:1:12", NULL}},
    {"fully_connected", "fc1", {"unit", "16", "activation", "sigmoid", NULL}},
    {"fully_connected", "fc2", {"unit", "8", "activation", "tanh", NULL}},
    {"dropout", "drop", {"dropout_rate", "0.2", NULL}},
    {"fully_connected", "fc3", {"unit", "4", "activation", "softmax", NULL}},
};
static const char *const mlp_props[] = {"batch_size", "8", "epochs", "3", "loss", "cross",
                                        "seed", "11", NULL};

static nnt_model *mlp_model(const char *opt, const char *memopt) {
  nnt_err e = {0};
  int rc;
  nnt_model *m = build(mlp, NNT_ARRAY_LEN(mlp), mlp_props, opt, &e, &rc);
  if (memopt) {
    /* set before compile through a fresh build */
    nnt_model_destroy(m);
    const char *props[] = {"batch_size", "8", "epochs", "3", "loss", "cross",
                           "seed", "11", "memory_optimization", memopt, NULL};
    m = build(mlp, NNT_ARRAY_LEN(mlp), props, opt, &e, &rc);
  }
  if (rc)
    fail_msg("compile: %s", e.msg);
  assert_int_equal(nnt_model_initialize(m, &e), NNT_OK);
  return m;
}

static void test_compile_realizes_nodes(void **state) {
  (void)state;
  nnt_model *m = mlp_model(NULL, NULL);
  /* in, fc1, act, fc2, act, drop, fc3, cross_softmax (replacing softmax) */
  assert_int_equal(m->n_nodes, 8);
  assert_string_equal(m->nodes[2].layer->name, "fc1/activation_realized");
  assert_string_equal(m->nodes[7].layer->ops->type, "cross_softmax");
  assert_int_equal(m->nodes[7].fc.out_dim[0].w, 4);
  assert_int_equal(m->nodes[7].in_node[0], 6);
  assert_int_equal(m->n_inputs, 1);
  assert_int_equal(m->n_labels, 1);
  /* the schedule: node i forwards at step i; backward walks from the end,
   * three steps a node, none for the input (no gradient, no derivative) */
  const nnt_step *st = m->sched[NNT_MODE_TRAIN];
  assert_int_equal(m->n_steps[NNT_MODE_TRAIN], 8 + 3 * 7);
  assert_int_equal(st[3].node, 3);
  assert_int_equal(st[3].kind, NNT_STEP_FORWARD);
  assert_int_equal(st[8].node, 7);
  assert_int_equal(st[8].kind, NNT_STEP_CALC_GRADIENT);
  assert_int_equal(st[9].kind, NNT_STEP_CALC_DERIVATIVE);
  assert_int_equal(st[8 + 3 * 7 - 1].node, 1);
  assert_int_equal(st[8 + 3 * 7 - 1].kind, NNT_STEP_APPLY_GRADIENT);
  for (unsigned s = 8; s < m->n_steps[NNT_MODE_TRAIN]; s++)
    assert_int_not_equal(st[s].node, 0);
  assert_int_equal(m->n_steps[NNT_MODE_INFER], 8);
  assert_int_equal(m->sched[NNT_MODE_INFER][7].kind, NNT_STEP_FORWARD);
  /* the input layer has no backward; fc1 computes dW but no dX */
  assert_false(m->nodes[1].do_deriv);
  assert_true(m->nodes[1].do_grad);
  assert_true(m->nodes[2].do_deriv);
  nnt_model_destroy(m);
}

static void test_loss_falls(void **state) {
  (void)state;
  nnt_model *m = mlp_model("adam", NULL);
  nnt_err e = {0};
  float l0, l1, acc;
  assert_int_equal(nnt_model_evaluate(m, NNT_DS_TRAIN, &l0, &acc, &e), NNT_OK);
  m->epochs = 150;
  if (nnt_model_train(m, NULL, NULL, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(nnt_model_evaluate(m, NNT_DS_TRAIN, &l1, &acc, &e), NNT_OK);
  print_message("loss %.4f -> %.4f, accuracy %.3f\n", l0, l1, acc);
  assert_true(l1 < 0.5f * l0);
  nnt_model_destroy(m);
}

static void train_or_fail(nnt_model *m) {
  nnt_err e = {0};
  if (nnt_model_train(m, NULL, NULL, &e))
    fail_msg("train: %s", e.msg);
}

static void test_seeded_runs_identical(void **state) {
  (void)state;
  nnt_model *a = mlp_model("adam", NULL), *b = mlp_model("adam", NULL);
  train_or_fail(a);
  train_or_fail(b);
  assert_int_equal(a->wpool_floats, b->wpool_floats);
  assert_memory_equal(a->wpool, b->wpool, a->wpool_floats * sizeof(float));
  nnt_model_destroy(a);
  nnt_model_destroy(b);
}

static void test_memory_optimization_bitwise(void **state) {
  (void)state;
  nnt_model *a = mlp_model("adam", "true"), *b = mlp_model("adam", "false");
  train_or_fail(a);
  train_or_fail(b);
  assert_memory_equal(a->wpool, b->wpool, a->wpool_floats * sizeof(float));
  /* the optimized arena is smaller */
  assert_true(a->mgr[NNT_MODE_TRAIN].arena_bytes < b->mgr[NNT_MODE_TRAIN].arena_bytes);
  nnt_model_destroy(a);
  nnt_model_destroy(b);
}

static void test_poison_clean(void **state) {
  (void)state;
  setenv("NNTRAINER_POISON", "1", 1);
  nnt_model *m = mlp_model("adam", NULL);
  unsetenv("NNTRAINER_POISON");
  assert_true(m->poison);
  nnt_err e = {0};
  train_or_fail(m);
  float l, acc;
  assert_int_equal(nnt_model_evaluate(m, NNT_DS_TRAIN, &l, &acc, &e), NNT_OK);
  assert_false(isnan(l));
  for (size_t i = 0; i < m->wpool_floats; i++)
    assert_false(isnan(m->wpool[i]));
  nnt_model_destroy(m);
}

static void test_save_load_roundtrip(void **state) {
  (void)state;
  char *dir = tu_mkdtemp();
  char path[512];
  snprintf(path, sizeof path, "%s/w.bin", dir);
  nnt_model *a = mlp_model("adam", NULL);
  train_or_fail(a);
  nnt_err e = {0};
  assert_int_equal(nnt_model_save_weights(a, path, 1, &e), NNT_OK);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  /* weights, "adam", two moments per weight, two counters */
  assert_int_equal((size_t)st.st_size, a->wpool_floats * 4 * 3 + 4 + 8);
  nnt_model *b = mlp_model("adam", NULL);
  assert_int_equal(nnt_model_load_weights(b, path, &e), NNT_OK);
  assert_memory_equal(a->wpool, b->wpool, a->wpool_floats * sizeof(float));
  assert_int_equal(b->epoch_idx, 3);
  assert_int_equal(b->iter, a->iter);
  float la, lb, acc;
  assert_int_equal(nnt_model_evaluate(a, NNT_DS_TRAIN, &la, &acc, &e), NNT_OK);
  assert_int_equal(nnt_model_evaluate(b, NNT_DS_TRAIN, &lb, &acc, &e), NNT_OK);
  assert_true(la == lb);
  /* a truncated file is refused and changes nothing */
  assert_int_equal(truncate(path, 100), 0);
  float before = b->wpool[0];
  assert_int_equal(nnt_model_load_weights(b, path, &e), NNT_ERR_IO);
  tu_assert_contains(e.msg, "truncated");
  tu_assert_contains(e.msg, path);
  assert_true(b->wpool[0] == before);
  nnt_model_destroy(a);
  nnt_model_destroy(b);
  tu_rmdir(dir);
  free(dir);
}

static void test_continue_train_resumes(void **state) {
  (void)state;
  /* 3 epochs straight equal 2 epochs, save, then 1 more resumed */
  char *dir = tu_mkdtemp();
  char path[512];
  snprintf(path, sizeof path, "%s/ck.bin", dir);
  nnt_model *a = mlp_model("adam", NULL);
  train_or_fail(a);
  nnt_err e = {0};
  nnt_model *b = mlp_model("adam", NULL);
  b->epochs = 2;
  train_or_fail(b);
  assert_int_equal(nnt_model_save_weights(b, path, 1, &e), NNT_OK);
  nnt_model_destroy(b);
  int rc;
  const char *props[] = {"batch_size", "8", "epochs", "3", "loss", "cross", "seed", "11",
                         "continue_train", "true", "save_path", path, NULL};
  nnt_model *c = build(mlp, NNT_ARRAY_LEN(mlp), props, "adam", &e, &rc);
  assert_int_equal(rc, NNT_OK);
  assert_int_equal(nnt_model_initialize(c, &e), NNT_OK);
  assert_int_equal(c->epoch_idx, 2);
  train_or_fail(c);
  assert_int_equal(c->epoch_idx, 3);
  /* the synthetic data and shuffles depend on the epoch, so the resumed run
   * sees the same third epoch; compare only that training continued from
   * the checkpoint, not bitwise */
  assert_int_equal(c->iter, a->iter);
  nnt_model_destroy(a);
  nnt_model_destroy(c);
  tu_rmdir(dir);
  free(dir);
}

static void expect_compile_error(const lspec *l, size_t n, const char *const *props,
                                 const char *needle1, const char *needle2) {
  nnt_err e = {0};
  int rc;
  nnt_model *m = build(l, n, props, NULL, &e, &rc);
  assert_int_equal(rc, NNT_ERR_INVAL);
  tu_assert_contains(e.msg, needle1);
  if (needle2)
    tu_assert_contains(e.msg, needle2);
  nnt_model_destroy(m);
}

static void test_compile_errors(void **state) {
  (void)state;
  const char *props[] = {"batch_size", "4", "loss", "mse", NULL};
  const lspec missing[] = {
      {"input", "in", {"input_shape", "1:1:4", NULL}},
      {"fully_connected", "fc", {"unit", "2", "input_layers", "nowhere", NULL}},
  };
  expect_compile_error(missing, 2, props, "[fc] input_layers", "nowhere");
  const lspec cycle[] = {
      {"input", "in", {"input_shape", "1:1:4", NULL}},
      {"fully_connected", "a", {"unit", "4", "input_layers", "b", NULL}},
      {"fully_connected", "b", {"unit", "4", "input_layers", "a", NULL}},
  };
  expect_compile_error(cycle, 3, props, "cycle", "input_layers");
  const lspec no_shape[] = {{"fully_connected", "fc", {"unit", "2", NULL}}};
  expect_compile_error(no_shape, 1, props, "[fc] input_shape", NULL);
  const char *cross[] = {"batch_size", "4", "loss", "cross", NULL};
  const lspec no_softmax[] = {
      {"fully_connected", "fc", {"unit", "2", "input_shape", "1:1:3", NULL}}};
  expect_compile_error(no_softmax, 1, cross, "loss", "softmax or sigmoid");
  /* found by the INI fuzz target: multiout makes as many outputs as are
   * named, and output 20 was written past its 16 output slots */
  const lspec many_outputs[] = {
      {"input", "in", {"input_shape", "1:1:4", NULL}},
      {"multiout", "mo", {NULL}},
      {"fully_connected", "fc", {"unit", "2", "input_layers", "mo(20)", NULL}},
  };
  expect_compile_error(many_outputs, 3, props, "[fc] input_layers: 'mo(20)'", "at most 16");
  const lspec last_slot[] = {
      {"input", "in", {"input_shape", "1:1:4", NULL}},
      {"multiout", "mo", {NULL}},
      {"fully_connected", "fc", {"unit", "2", "input_layers", "mo(16)", NULL}},
  };
  expect_compile_error(last_slot, 3, props, "names output 16", "at most 16");
  /* a loss layer read by another one (NNTrainer: a label layer is a leaf) */
  const char *none[] = {"batch_size", "4", NULL};
  const lspec loss_middle[] = {
      {"input", "in", {"input_shape", "1:1:4", NULL}},
      {"mse", "l1", {NULL}},
      {"fully_connected", "fc", {"unit", "2", NULL}},
      {"mse", "l2", {NULL}},
  };
  expect_compile_error(loss_middle, 4, none, "[l1] a loss layer must end the model", NULL);
}

/* Found by the C API fuzz target: a model output that no loss reads got
 * no derivative, and its backward pass read a NULL d_out (a segfault).
 * Training refuses such a model, naming the output; a model with a loss
 * on every output still trains, and the output's inference still runs. */
static void test_output_without_loss(void **state) {
  (void)state;
  const char *props[] = {"batch_size", "4", NULL};
  const lspec two_outputs[] = {
      {"input", "in", {"input_shape", "1:1:3", NULL}},
      {"fully_connected", "fc", {"unit", "2", "activation", "tanh", NULL}},
      {"fully_connected", "fc2", {"unit", "2", "input_layers", "in", NULL}},
      {"mse", "loss", {"input_layers", "fc2", NULL}},
  };
  const lspec loss_first[] = {
      {"input", "in", {"input_shape", "1:1:3", NULL}},
      {"cross_softmax", "l", {"input_shape", "3", NULL}},
      {"fully_connected", "fc", {"unit", "2", NULL}},
  };
  const lspec no_loss[] = {
      {"input", "in", {"input_shape", "1:1:3", NULL}},
      {"fully_connected", "fc", {"unit", "2", NULL}},
  };
  struct {
    const lspec *l;
    size_t n;
    const char *a, *b;
  } cases[] = {
      {two_outputs, 4, "[fc/activation_realized] training", "without a loss"},
      {no_loss, 2, "has no loss", "[Model] loss"},
  };
  for (size_t c = 0; c < NNT_ARRAY_LEN(cases); c++) {
    nnt_err e = {0};
    int rc;
    nnt_model *m = build(cases[c].l, cases[c].n, props, NULL, &e, &rc);
    assert_int_equal(rc, NNT_OK);
    assert_int_equal(nnt_model_initialize(m, &e), NNT_OK);
    assert_int_equal(nnt_model_plan(m, NNT_MODE_TRAIN, &e), NNT_ERR_INVAL);
    tu_assert_contains(e.msg, cases[c].a);
    tu_assert_contains(e.msg, cases[c].b);
    nnt_err_clear(&e);
    assert_int_equal(nnt_model_train(m, NULL, NULL, &e), NNT_ERR_INVAL);
    tu_assert_contains(e.msg, cases[c].b);
    /* inference needs no derivative */
    assert_int_equal(nnt_model_plan(m, NNT_MODE_INFER, &e), NNT_OK);
    nnt_model_destroy(m);
  }
  /* a loss read by another layer is refused at compile already */
  expect_compile_error(loss_first, 3, props, "[l] a loss layer must end the model", NULL);
  /* a loss on each output: it trains */
  const lspec both[] = {
      {"input", "in", {"input_shape", "1:1:3", NULL}},
      {"multiout", "mo", {NULL}},
      {"fully_connected", "fc", {"unit", "2", "input_layers", "mo(0)", NULL}},
      {"mse", "l1", {"input_layers", "fc", NULL}},
      {"fully_connected", "fc2", {"unit", "2", "input_layers", "mo(1)", NULL}},
      {"mse", "l2", {"input_layers", "fc2", NULL}},
  };
  nnt_err e = {0};
  int rc;
  nnt_model *m = build(both, NNT_ARRAY_LEN(both), props, NULL, &e, &rc);
  assert_int_equal(rc, NNT_OK);
  assert_int_equal(nnt_model_initialize(m, &e), NNT_OK);
  if (nnt_model_train(m, NULL, NULL, &e))
    fail_msg("%s", e.msg);
  nnt_model_destroy(m);
}

static void test_views_and_inplace(void **state) {
  (void)state;
  /* flatten is a view of its input; sigmoid may run in place over the
   * fully connected output, which fc's backward does not read */
  const lspec g[] = {
      {"input", "in", {"input_shape", "1:2:3", NULL}},
      {"fully_connected", "a", {"unit", "5", "activation", "sigmoid", NULL}},
      {"flatten", "f", {NULL}},
      {"fully_connected", "out", {"unit", "3", "activation", "softmax", NULL}},
  };
  const char *props[] = {"batch_size", "2", "loss", "cross", NULL};
  nnt_err e = {0};
  int rc;
  nnt_model *m = build(g, NNT_ARRAY_LEN(g), props, NULL, &e, &rc);
  if (rc)
    fail_msg("%s", e.msg);
  assert_int_equal(nnt_model_initialize(m, &e), NNT_OK);
  train_or_fail(m);
  /* flatten is a view: its output shares the activation's memory */
  const nnt_mgr *mg = &m->mgr[NNT_MODE_TRAIN];
  assert_true(m->nodes[3].inplace);
  assert_int_equal(nnt_mgr_root(mg, m->nodes[3].t_out[0]), nnt_mgr_root(mg, m->nodes[2].t_out[0]));
  /* sigmoid reads its output in backward, so the fc's output it overwrote is
   * not read by fc's backward: sigmoid ran in place */
  assert_true(m->nodes[2].inplace);
  nnt_model_destroy(m);
}

static void test_frozen_layer_keeps_weights(void **state) {
  (void)state;
  const lspec g[] = {
      {"input", "in", {"input_shape", "1:1:6", NULL}},
      {"fully_connected",
       "frozen",
       {"unit", "5", "activation", "tanh", "trainable", "false", NULL}},
      {"fully_connected", "head", {"unit", "3", "activation", "softmax", NULL}},
  };
  const char *props[] = {"batch_size", "4", "epochs", "2", "loss", "cross", NULL};
  nnt_err e = {0};
  int rc;
  nnt_model *m = build(g, NNT_ARRAY_LEN(g), props, NULL, &e, &rc);
  assert_int_equal(rc, NNT_OK);
  assert_int_equal(nnt_model_initialize(m, &e), NNT_OK);
  m->keep_train_arena = 0;
  size_t frozen = 6 * 5 + 5;
  float *before = malloc(m->wpool_floats * sizeof(float));
  memcpy(before, m->wpool, m->wpool_floats * sizeof(float));
  train_or_fail(m);
  assert_memory_equal(before, m->wpool, frozen * sizeof(float));
  assert_memory_not_equal(before + frozen, m->wpool + frozen,
                          (m->wpool_floats - frozen) * sizeof(float));
  assert_false(m->nodes[1].do_grad);
  /* the training arena is released when training ends */
  assert_false(m->mgr[NNT_MODE_TRAIN].planned);
  assert_null(m->mgr[NNT_MODE_TRAIN].arena);
  free(before);
  nnt_model_destroy(m);
}

static int failing_cb(float **in, float **label, bool *last, void *ud) {
  int *calls = ud;
  if (++*calls == 11)
    return -5;
  memset(in[0], 0, 12 * sizeof(float)); /* every value: the ring holds junk */
  memset(label[0], 0, 4 * sizeof(float));
  in[0][0] = 1;
  label[0][0] = 1;
  return 0;
}

static void test_producer_error_stops_training(void **state) {
  (void)state;
  nnt_model *m = mlp_model(NULL, NULL);
  nnt_err e = {0};
  int calls = 0;
  nnt_dataset *ds;
  assert_int_equal(nnt_dataset_create_generator(failing_cb, &calls, &ds, &e), NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, &e), NNT_OK);
  assert_int_equal(nnt_model_train(m, NULL, NULL, &e), -5);
  tu_assert_contains(e.msg, "callback returned -5");
  nnt_model_destroy(m);
}

/* NNTrainer's issue #1211: A -> B (in-place candidate) -> C and A -> D. B
 * must not overwrite A's output, which D still reads; the derivatives of
 * A's two consumers are summed. Checked against finite differences of the
 * whole model's loss. */
static void test_branch_fanout(void **state) {
  (void)state;
  const lspec g[] = {
      {"input", "in", {"input_shape", "1:1:6", NULL}},
      {"fully_connected", "a", {"unit", "5", NULL}},
      {"activation", "b", {"activation", "sigmoid", NULL}},
      {"fully_connected", "c", {"unit", "3", NULL}},
      {"cross_softmax", "closs", {NULL}},
      {"fully_connected", "d", {"unit", "2", "input_layers", "a", NULL}},
      {"mse", "dloss", {NULL}},
  };
  for (int memopt = 1; memopt >= 0; memopt--) {
    const char *props[] = {"batch_size", "64", "epochs", "1", "memory_optimization",
                           memopt ? "true" : "false", NULL};
    nnt_err e = {0};
    int rc;
    nnt_model *m = build(g, NNT_ARRAY_LEN(g), props, NULL, &e, &rc);
    if (rc)
      fail_msg("%s", e.msg);
    assert_int_equal(m->n_labels, 2);
    assert_int_equal(nnt_optimizer_set_property(m->opt, "learning_rate", "0", &e), NNT_OK);
    assert_int_equal(nnt_model_initialize(m, &e), NNT_OK);
    train_or_fail(m);
    nnt_node *a = &m->nodes[1], *b = &m->nodes[2];
    assert_string_equal(a->layer->name, "a");
    assert_int_equal(a->n_consumers[0], 2);
    assert_false(b->inplace); /* d still reads a's output */
    if (memopt) {
      nnt_model_destroy(m);
      continue;
    }
    /* with memory_optimization=false every gradient is still readable */
    float *gw = a->gw[0].data, *w = m->w[a->w_first].data;
    for (size_t i = 0; i < 30; i++) {
      double num = tu_model_fd(m, w, i, 1e-2f);
      if (fabs(num - gw[i]) > 2e-3 * fmax(1, fabs(num)))
        fail_msg("dW[%zu]: analytic %g, numeric %g", i, gw[i], num);
    }
    nnt_model_destroy(m);
  }
}

/* Consecutive in-place layers where the rule allows it: the input layer
 * runs in place over the model input, tanh in place over fc's output, and
 * a second output-reading activation after tanh is refused (relu would
 * keep a bit mask instead of its output: test_applications). */
static void test_consecutive_inplace(void **state) {
  (void)state;
  const lspec g[] = {
      {"input", "in", {"input_shape", "1:1:6", NULL}},
      {"fully_connected", "fc", {"unit", "5", NULL}},
      {"activation", "r", {"activation", "tanh", NULL}},
      {"activation", "s", {"activation", "sigmoid", NULL}},
      {"fully_connected", "out", {"unit", "3", "activation", "softmax", NULL}},
  };
  const char *props[] = {"batch_size", "4", "loss", "cross", NULL};
  nnt_err e = {0};
  int rc;
  nnt_model *m = build(g, NNT_ARRAY_LEN(g), props, NULL, &e, &rc);
  assert_int_equal(rc, NNT_OK);
  assert_int_equal(nnt_model_initialize(m, &e), NNT_OK);
  assert_int_equal(nnt_model_plan(m, NNT_MODE_TRAIN, &e), NNT_OK);
  assert_true(m->nodes[0].inplace);  /* input over the model input */
  assert_true(m->nodes[2].inplace);  /* tanh over fc's output */
  assert_false(m->nodes[3].inplace); /* tanh's backward reads what it would overwrite */
  /* in inference nothing reads backward: sigmoid may run in place too */
  assert_int_equal(nnt_model_plan(m, NNT_MODE_INFER, &e), NNT_OK);
  assert_true(m->nodes[3].inplace);
  /* back to the training plan: the nodes point into it again */
  assert_int_equal(nnt_model_plan(m, NNT_MODE_TRAIN, &e), NNT_OK);
  assert_false(m->nodes[3].inplace);
  const nnt_mgr *tg = &m->mgr[NNT_MODE_TRAIN];
  assert_ptr_equal(m->nodes[4].out[0].data, nnt_mgr_data(tg, m->nodes[4].t_out[0]));
  assert_true((char *)m->nodes[4].out[0].data >= (char *)tg->arena &&
              (char *)m->nodes[4].out[0].data < (char *)tg->arena + tg->arena_bytes);
  train_or_fail(m);
  nnt_model_destroy(m);
}

/* A batch size set after compile (what ml_train_model_run's batch_size
 * does) gives the model that compiling with it gives: the same shapes,
 * plans and outputs, with the weights it had. */
static void test_batch_change_matches_compile(void **state) {
  (void)state;
  const lspec g[] = {
      {"input", "in", {"input_shape", "2:6:6", NULL}},
      {"conv2d", "c", {"filters", "3", "kernel_size", "3,3", "padding", "same", NULL}},
      {"batch_normalization", "bn", {NULL}},
      {"activation", "r", {"activation", "relu", NULL}},
      {"pooling2d", "p", {"pooling", "max", "pool_size", "2,2", "stride", "2,2", NULL}},
      {"flatten", "f", {NULL}},
      {"fully_connected", "a", {"unit", "4", NULL}},
      {"fully_connected", "b", {"unit", "4", "input_layers", "f", NULL}},
      {"addition", "add", {"input_layers", "a,b", NULL}},
      {"fully_connected", "out", {"unit", "3", "activation", "softmax", NULL}},
  };
  const char *p2[] = {"batch_size", "2", "loss", "cross", NULL};
  const char *p5[] = {"batch_size", "5", "loss", "cross", NULL};
  nnt_err e = {0};
  int rc2, rc5;
  nnt_model *m = build(g, NNT_ARRAY_LEN(g), p2, NULL, &e, &rc2);
  nnt_model *ref = build(g, NNT_ARRAY_LEN(g), p5, NULL, &e, &rc5);
  assert_int_equal(rc2, NNT_OK);
  assert_int_equal(rc5, NNT_OK);
  assert_int_equal(nnt_model_initialize(m, &e), NNT_OK);
  assert_int_equal(nnt_model_initialize(ref, &e), NNT_OK);
  train_or_fail(m); /* a plan and optimizer state for batch 2 */
  assert_int_equal(nnt_model_plan(m, NNT_MODE_INFER, &e), NNT_OK);
  float *w = malloc(m->wpool_floats * sizeof *w);
  assert_non_null(w);
  memcpy(w, m->wpool, m->wpool_floats * sizeof *w);
  assert_int_equal(nnt_model_set_property(m, "batch_size", "5", &e), NNT_OK);
  assert_memory_equal(m->wpool, w, m->wpool_floats * sizeof *w);
  free(w);
  /* the shapes of a model compiled for 5 */
  assert_int_equal(m->n_nodes, ref->n_nodes);
  assert_true(nnt_dim_eq(m->input_dim[0], ref->input_dim[0]));
  assert_true(nnt_dim_eq(m->label_dim[0], ref->label_dim[0]));
  for (size_t i = 0; i < m->n_nodes; i++) {
    const nnt_finalize_ctx *a = &m->nodes[i].fc, *b = &ref->nodes[i].fc;
    assert_int_equal(a->n_in, b->n_in);
    assert_int_equal(a->n_out, b->n_out);
    assert_int_equal(a->n_scratch, b->n_scratch);
    for (unsigned k = 0; k < a->n_in; k++)
      assert_true(nnt_dim_eq(a->in_dim[k], b->in_dim[k]));
    for (unsigned k = 0; k < a->n_out; k++)
      assert_true(nnt_dim_eq(a->out_dim[k], b->out_dim[k]));
    for (unsigned k = 0; k < a->n_scratch; k++)
      assert_true(nnt_dim_eq(a->scratch_dim[k], b->scratch_dim[k]));
  }
  /* planned anew: the same plans */
  for (int mode = NNT_MODE_TRAIN; mode <= NNT_MODE_INFER; mode++) {
    assert_false(m->mgr[mode].planned);
    assert_int_equal(nnt_model_plan(m, (nnt_mode)mode, &e), NNT_OK);
    assert_int_equal(nnt_model_plan(ref, (nnt_mode)mode, &e), NNT_OK);
    assert_int_equal(m->mgr[mode].arena_bytes, ref->mgr[mode].arena_bytes);
  }
  /* with the same weights, the same outputs */
  memcpy(ref->wpool, m->wpool, m->wpool_floats * sizeof(float));
  size_t n_in = 5 * 2 * 6 * 6, n_out = 5 * 3;
  float *in = malloc(n_in * sizeof *in), *o1 = malloc(n_out * sizeof *o1),
        *o2 = malloc(n_out * sizeof *o2);
  assert_true(in && o1 && o2);
  nnt_rng r;
  nnt_rng_seed(&r, 5);
  tu_fill_uniform(&r, in, n_in, -1, 1);
  const float *ins[] = {in};
  float *outs1[] = {o1}, *outs2[] = {o2};
  assert_int_equal(nnt_model_infer(m, ins, outs1, &e), NNT_OK);
  assert_int_equal(nnt_model_infer(ref, ins, outs2, &e), NNT_OK);
  assert_memory_equal(o1, o2, n_out * sizeof *o1);
  free(in), free(o1), free(o2);
  train_or_fail(m); /* and it trains at 5 */
  nnt_model_destroy(m);
  nnt_model_destroy(ref);
}

/* A layer that asks for more weights or scratch tensors than a finalize
 * context holds is marked, so compile refuses it instead of running it
 * without the dropped tensors. */
static void test_finalize_tables_full(void **state) {
  (void)state;
  nnt_finalize_ctx fc;
  memset(&fc, 0, sizeof fc);
  for (unsigned i = 0; i < NNT_MAX_WEIGHTS; i++)
    assert_int_equal(nnt_fctx_add_weight(&fc, "w", nnt_dim_make(1, 1, 1, 1), NNT_INIT_ZEROS, 1,
                                         1, 0, 0, 1),
                     i);
  assert_false(fc.overfull);
  assert_int_equal(nnt_fctx_add_weight(&fc, "w", nnt_dim_make(1, 1, 1, 1), NNT_INIT_ZEROS, 1, 1,
                                       0, 0, 1),
                   NNT_MAX_WEIGHTS);
  assert_true(fc.overfull);
  assert_int_equal(fc.n_w, NNT_MAX_WEIGHTS);
  memset(&fc, 0, sizeof fc);
  for (unsigned i = 0; i < NNT_MAX_SCRATCH; i++)
    assert_int_equal(nnt_fctx_add_scratch(&fc, nnt_dim_make(1, 1, 1, 1), NNT_SCRATCH_FWD), i);
  assert_false(fc.overfull);
  assert_int_equal(nnt_fctx_add_scratch(&fc, nnt_dim_make(1, 1, 1, 1), NNT_SCRATCH_FWD),
                   NNT_MAX_SCRATCH);
  assert_true(fc.overfull);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_finalize_tables_full),
      cmocka_unit_test(test_batch_change_matches_compile),
      cmocka_unit_test(test_compile_realizes_nodes),
      cmocka_unit_test(test_loss_falls),
      cmocka_unit_test(test_seeded_runs_identical),
      cmocka_unit_test(test_memory_optimization_bitwise),
      cmocka_unit_test(test_poison_clean),
      cmocka_unit_test(test_save_load_roundtrip),
      cmocka_unit_test(test_continue_train_resumes),
      cmocka_unit_test(test_compile_errors),
      cmocka_unit_test(test_output_without_loss),
      cmocka_unit_test(test_views_and_inplace),
      cmocka_unit_test(test_frozen_layer_keeps_weights),
      cmocka_unit_test(test_branch_fanout),
      cmocka_unit_test(test_consecutive_inplace),
      cmocka_unit_test(test_producer_error_stops_training),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
