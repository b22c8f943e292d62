/* The manager's guarantees on every model in Applications/ and
 * benchmarks/models/: plans within
 * 1.05 of the lower bound in training, inference and evaluation and valid;
 * inference without labels and loss values, evaluation with exactly
 * those; training
 * clean under poison mode; memory_optimization on and off bitwise equal,
 * and relu's bit masks (keep_less) bitwise equal to keeping its output,
 * with a training arena no larger wherever a mask is used. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

/* Load an application INI with synthetic data instead of its datasets. */
static nnt_model *load_app(const char *path, int memopt, int poison, const char *batch,
                           int keep) {
  nnt_model *m = tu_model_for_ini(path);
  m->keep_outputs = keep;
  nnt_err e = {0};
  const char *ov[] = {"epochs=1", "save_path=",
                      memopt ? "memory_optimization=true" : "memory_optimization=false", batch};
  if (nnt_ini_load(m, path, ov, batch ? 4 : 3, &e))
    fail_msg("%s: %s", path, e.msg);
  m->poison = poison;
  for (int mode = 0; mode < 3; mode++) {
    nnt_dataset *ds = NULL;
    if (mode == NNT_DS_TRAIN)
      assert_int_equal(nnt_dataset_create_synthetic(3 * nnt_model_batch_size(m), 77, &ds, &e),
                       NNT_OK);
    assert_int_equal(nnt_model_set_dataset(m, mode, ds, &e), NNT_OK);
  }
  if (nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("%s: %s", path, e.msg);
  m->keep_train_arena = 1;
  return m;
}

/* Scratch kept only for a backward that runs (NNT_SCRATCH_SAVED): the
 * masks of keep_less and layers' own (lstm's gates), per node. */
static unsigned masked_nodes(const nnt_model *m) {
  unsigned c = 0;
  for (size_t i = 0; i < m->n_nodes; i++)
    for (unsigned s = 0; s < m->nodes[i].fc.n_scratch; s++)
      c += m->nodes[i].fc.scratch_life[s] == NNT_SCRATCH_SAVED;
  return c;
}

static unsigned n_masked_apps;

static void check_app(const char *path) {
  nnt_err e = {0};
  /* the training plan keeping every output for its backward (no masks):
   * valid and near its lower bound */
  nnt_model *k = load_app(path, 1, 0, NULL, 1);
  if (nnt_model_plan(k, NNT_MODE_TRAIN, &e) || nnt_mgr_validate(&k->mgr[NNT_MODE_TRAIN], &e))
    fail_msg("%s: %s", path, e.msg);
  /* layers that keep training-only scratch of their own (lstm's gates)
   * count there too: the masks are what the plan without keep adds */
  unsigned own_saved = masked_nodes(k);
  size_t kept_arena = k->mgr[NNT_MODE_TRAIN].arena_bytes;
  assert_true(kept_arena <= (size_t)(1.05 * (double)k->mgr[NNT_MODE_TRAIN].lower_bound));
  nnt_model_destroy(k);
  /* plans: valid and near the lower bound, in both modes; with masks the
   * training arena is also at most kept_arena */
  nnt_model *m = load_app(path, 1, 0, NULL, 0);
  assert_true(masked_nodes(m) >= own_saved);
  unsigned masked = masked_nodes(m) - own_saved;
  n_masked_apps += masked > 0;
  for (int mode = 0; mode < 2; mode++) {
    if (nnt_model_plan(m, (nnt_mode)mode, &e) || nnt_mgr_validate(&m->mgr[mode], &e))
      fail_msg("%s: %s", path, e.msg);
    double ratio = (double)m->mgr[mode].arena_bytes / (double)m->mgr[mode].lower_bound;
    print_message("%s %s: arena %zu, lower bound %zu, ratio %.3f\n", path,
                  mode ? "infer" : "train", m->mgr[mode].arena_bytes, m->mgr[mode].lower_bound,
                  ratio);
    if (mode == 0 && masked)
      assert_true(m->mgr[mode].arena_bytes <= kept_arena);
    assert_true(ratio <= 1.05);
  }
  /* a model whose trainable part is only its head (resnet18_frozen.ini)
   * keeps little more for training than its forward pass needs (less,
   * where its additions compute their skip inputs again: rerun.c) */
  int frozen = 0;
  for (size_t i = 0; i < m->n_w; i++)
    frozen |= !nnt_model_weight_trains(m, i) && m->wspec[i].trainable;
  size_t train_arena = m->mgr[NNT_MODE_TRAIN].arena_bytes;
  if (frozen && m->n_reruns)
    assert_true(train_arena < m->mgr[NNT_MODE_INFER].arena_bytes);
  else if (frozen)
    assert_true(m->mgr[NNT_MODE_INFER].arena_bytes <= train_arena);
  else
    assert_true(m->mgr[NNT_MODE_INFER].arena_bytes < train_arena);
  /* inference plans no backward and no loss: no gradient, no derivative,
   * no label, no loss value; evaluation plans no backward, exactly the
   * label streams and one loss value per loss layer */
  const nnt_mgr *inf = &m->mgr[NNT_MODE_INFER], *ev = &m->mgr[NNT_MODE_EVAL];
  assert_int_equal(nnt_mgr_kind_bytes(inf, NNT_TK_GRADIENT), 0);
  assert_int_equal(nnt_mgr_kind_bytes(inf, NNT_TK_DERIVATIVE), 0);
  assert_int_equal(nnt_mgr_kind_bytes(inf, NNT_TK_LABEL), 0);
  assert_int_equal(tu_loss_tensors(inf), 0);
  if (nnt_model_plan(m, NNT_MODE_EVAL, &e) || nnt_mgr_validate(ev, &e))
    fail_msg("%s: %s", path, e.msg);
  assert_true(ev->arena_bytes <= (size_t)(1.05 * (double)ev->lower_bound));
  assert_int_equal(nnt_mgr_kind_bytes(ev, NNT_TK_GRADIENT), 0);
  assert_int_equal(nnt_mgr_kind_bytes(ev, NNT_TK_DERIVATIVE), 0);
  size_t label_bytes = 0;
  unsigned losses = tu_loss_nodes(m);
  for (unsigned i = 0; i < m->n_labels; i++)
    label_bytes += nnt_dim_len(m->label_dim[i]) * sizeof(float);
  assert_true(label_bytes > 0);
  assert_int_equal(nnt_mgr_kind_bytes(ev, NNT_TK_LABEL), label_bytes);
  assert_int_equal(tu_loss_tensors(ev), losses);
  assert_int_equal(nnt_mgr_kind_bytes(ev, NNT_TK_ACTIVATION),
                   nnt_mgr_kind_bytes(inf, NNT_TK_ACTIVATION));
  if (frozen && m->n_reruns) /* beyond inference's forward: labels and loss values */
    assert_true(ev->arena_bytes <= inf->arena_bytes + label_bytes + losses * NNT_MGR_ALIGN);
  else if (frozen)
    assert_true(ev->arena_bytes <= train_arena);
  else
    assert_true(ev->arena_bytes < train_arena);
  nnt_model_destroy(m);
  /* bitwise equality with memory_optimization off, and poison mode clean;
   * at batch 4 so the sanitizer build stays quick on ResNet-18 */
  nnt_model *a = load_app(path, 1, 1, "batch_size=4", 0);
  nnt_model *b = load_app(path, 0, 0, "batch_size=4", 0);
  nnt_model *c = load_app(path, 1, 0, "batch_size=4", 1);
  if (nnt_model_train(a, NULL, NULL, &e) || nnt_model_train(b, NULL, NULL, &e) ||
      nnt_model_train(c, NULL, NULL, &e))
    fail_msg("%s: %s", path, e.msg);
  assert_int_equal(a->wpool_floats, b->wpool_floats);
  for (size_t i = 0; i < a->wpool_floats; i++)
    if (isnan(a->wpool[i]))
      fail_msg("%s: weight %zu is NaN under poison mode", path, i);
  assert_memory_equal(a->wpool, b->wpool, a->wpool_floats * sizeof(float));
  assert_int_equal(a->wpool_floats, c->wpool_floats);
  assert_memory_equal(a->wpool, c->wpool, a->wpool_floats * sizeof(float));
  nnt_model_destroy(c);
  nnt_model_destroy(a);
  nnt_model_destroy(b);
}

static void check_one(const char *path, void *ud) {
  (void)ud;
  check_app(path);
}

static void test_every_application(void **state) {
  (void)state;
  assert_true(tu_each_app_ini(check_one, NULL) >= 8);
  /* lenet5, fmnist_cnn, convbn, FashionMNIST cnn and cnn_bn use masks */
  assert_true(n_masked_apps >= 5);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_application)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
