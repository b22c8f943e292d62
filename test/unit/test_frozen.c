/* Frozen layers cost their weights and their forward pass only: no
 * optimizer state and no gradient for a frozen weight, no derivative and
 * no tensor kept past the forward pass for a node whose backward never
 * runs; the training arena of a model whose head alone trains is at most
 * its forward pass plus the head's own training plan; frozen weights do
 * not move, and the file with Adam's moments round-trips. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

/* conv, bn, conv, bn, flatten, fc: FROZEN is "" or "trainable = false" */
#define BODY(FROZEN)                                                                   \
  "[Model]\ntype = NeuralNetwork\nbatch_size = 4\nepochs = 2\nloss = cross\nseed = 3\n" \
  "[Optimizer]\ntype = adam\nlearning_rate = 0.01\n"                                   \
  "[in]\ntype = input\ninput_shape = 2:6:6\n"                                          \
  "[c1]\ntype = conv2d\nfilters = 3\nkernel_size = 3,3\npadding = 1,1\n" FROZEN "\n"   \
  "[b1]\ntype = batch_normalization\nactivation = relu\n" FROZEN "\n"                  \
  "[c2]\ntype = conv2d\nfilters = 2\nkernel_size = 3,3\npadding = 1,1\n" FROZEN "\n"   \
  "[b2]\ntype = batch_normalization\n" FROZEN "\n"                                     \
  "[flat]\ntype = flatten\n"                                                           \
  "[fc]\ntype = fully_connected\nunit = 5\nactivation = softmax\n"

/* the head alone, fed what flatten gives it */
#define HEAD                                                                           \
  "[Model]\ntype = NeuralNetwork\nbatch_size = 4\nepochs = 2\nloss = cross\nseed = 3\n" \
  "[Optimizer]\ntype = adam\nlearning_rate = 0.01\n"                                   \
  "[in]\ntype = input\ninput_shape = 1:1:72\n"                                         \
  "[fc]\ntype = fully_connected\nunit = 5\nactivation = softmax\n"

static nnt_model *load(const char *name, const char *text) {
  const char *path = tu_write_text(name, text);
  nnt_model *m = tu_model_for_ini(path);
  nnt_err e = {0};
  if (nnt_ini_load(m, path, NULL, 0, &e))
    fail_msg("%s: %s", name, e.msg);
  nnt_dataset *ds = NULL;
  assert_int_equal(nnt_dataset_create_synthetic(12, 77, &ds, &e), NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, &e), NNT_OK);
  if (nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("%s: %s", name, e.msg);
  m->keep_train_arena = 1;
  return m;
}

static void plan(nnt_model *m, nnt_mode mode) {
  nnt_err e = {0};
  if (nnt_model_plan(m, mode, &e) || nnt_mgr_validate(&m->mgr[mode], &e))
    fail_msg("%s", e.msg);
}

static int frozen_node(const char *tensor) {
  return tensor[0] == 'c' || tensor[0] == 'b'; /* c1, b1, c2, b2 and their parts */
}

static void test_frozen_plan(void **state) {
  (void)state;
  nnt_model *f = load("frozen.ini", BODY("trainable = false\n"));
  nnt_model *a = load("all.ini", BODY(""));
  nnt_model *h = load("head.ini", HEAD);
  /* the weights that train: fc's weight and bias (indices 12, 13) */
  assert_int_equal(f->n_w, 14);
  size_t head_floats = 72 * 5 + 5;
  for (size_t i = 0; i < f->n_w; i++)
    assert_int_equal(nnt_model_weight_trains(f, i), i >= 12);
  assert_int_equal(nnt_model_opt_bytes(f, 2), 2 * head_floats * sizeof(float));
  assert_true(nnt_model_opt_bytes(a, 2) > nnt_model_opt_bytes(f, 2));
  plan(f, NNT_MODE_TRAIN);
  plan(f, NNT_MODE_INFER);
  plan(h, NNT_MODE_TRAIN);
  plan(a, NNT_MODE_TRAIN);
  const nnt_mgr *g = &f->mgr[NNT_MODE_TRAIN];
  /* gradients: fc's only; derivatives: the loss's for fc only */
  assert_int_equal(nnt_mgr_kind_bytes(g, NNT_TK_GRADIENT), head_floats * sizeof(float));
  assert_int_equal(nnt_mgr_kind_bytes(g, NNT_TK_DERIVATIVE), 4 * 5 * sizeof(float));
  /* nothing of a frozen node lives past the forward pass but the output
   * fc reads in its backward (b2's, flatten's view of it) */
  unsigned fwd_end = nnt_schedule_forward_end(f, NNT_MODE_TRAIN);
  unsigned checked = 0;
  for (size_t i = 0; i < g->n; i++) {
    if (!frozen_node(g->t[i].name) || strncmp(g->t[i].name, "b2:out", 6) == 0 ||
        strncmp(g->t[i].name, "b2/", 3) == 0)
      continue;
    if (g->t[i].last >= fwd_end)
      fail_msg("'%s' lives to step %u, past the forward pass (%u steps)", g->t[i].name,
               g->t[i].last, fwd_end);
    assert_true(g->t[i].kind != NNT_TK_DERIVATIVE && g->t[i].kind != NNT_TK_GRADIENT);
    checked++;
  }
  assert_true(checked >= 8);
  /* the schedule has no backward step of a frozen node (nor of the input):
   * 8 forward steps (in, c1, b1, b1's relu, c2, b2, flat, fc's softmax and
   * loss as one), backward for the loss and fc only */
  for (unsigned s = fwd_end; s < f->n_steps[NNT_MODE_TRAIN]; s++)
    assert_false(frozen_node(f->nodes[f->sched[NNT_MODE_TRAIN][s].node].layer->name));
  assert_int_equal(f->n_steps[NNT_MODE_TRAIN], fwd_end + 2 * 3);
  /* the arena: the forward pass and the head's training, no more; and
   * well below the model that trains everything */
  size_t tr = g->arena_bytes, inf = f->mgr[NNT_MODE_INFER].arena_bytes;
  size_t head = h->mgr[NNT_MODE_TRAIN].arena_bytes;
  print_message("frozen: train arena %zu, infer %zu, head %zu, all trainable %zu\n", tr, inf,
                head, a->mgr[NNT_MODE_TRAIN].arena_bytes);
  assert_true(tr <= inf + head);
  assert_true(tr < a->mgr[NNT_MODE_TRAIN].arena_bytes);
  nnt_model_destroy(f);
  nnt_model_destroy(a);
  nnt_model_destroy(h);
}

static void test_frozen_train_and_file(void **state) {
  (void)state;
  nnt_model *f = load("frozen.ini", BODY("trainable = false\n"));
  float *before = tu_weights_of(f);
  nnt_err e = {0};
  assert_int_equal(nnt_model_train(f, NULL, NULL, &e), NNT_OK);
  float *after = tu_weights_of(f);
  /* frozen weights stay; the moving statistics (not trainable weights of
   * a batch norm, updated in training as NNTrainer does) and the head move */
  size_t at = 0;
  for (size_t i = 0; i < f->n_w; i++) {
    size_t n = nnt_dim_len(f->wspec[i].dim);
    int same = memcmp(before + at, after + at, n * sizeof(float)) == 0;
    if (i >= 12 || !f->wspec[i].trainable)
      assert_false(same);
    else
      assert_true(same);
    at += n;
  }
  assert_int_equal(f->omgr.arena_bytes, 2 * (72 * 5 + 5) * sizeof(float));
  /* the file: weights, "adam", fc's moments, counters; it loads back */
  const char *p = tu_path_in("f.bin");
  assert_int_equal(nnt_model_save_weights(f, p, 1, &e), NNT_OK);
  size_t n;
  unsigned char *bytes = tu_file_bytes(p, &n);
  assert_int_equal(n, f->wpool_floats * 4 + 4 + 2 * (72 * 5 + 5) * 4 + 8);
  assert_memory_equal(bytes + f->wpool_floats * 4, "adam", 4);
  nnt_model *g = load("frozen.ini", BODY("trainable = false\n"));
  if (nnt_model_load_weights(g, p, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(g->omgr.arena_bytes, f->omgr.arena_bytes);
  assert_memory_equal(g->opt_pool, f->opt_pool, f->omgr.arena_bytes);
  const char *q = tu_path_in("g.bin");
  assert_int_equal(nnt_model_save_weights(g, q, 1, &e), NNT_OK);
  tu_assert_same_file(p, q);
  free(bytes);
  free(before);
  free(after);
  nnt_model_destroy(f);
  nnt_model_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_frozen_plan),
      cmocka_unit_test(test_frozen_train_and_file),
  };
  return cmocka_run_group_tests(tests, tu_dir_setup, tu_dir_teardown);
}
