/* Weight sharing (shared_from): the summed gradient against finite
 * differences, training against PyTorch (test/golden/gen_shared.py), the
 * weight file holding a shared weight once, the refusals, poison mode,
 * memory_optimization on and off, clipping and regularization counting a
 * shared weight once, and the key through the INI, its writer and the C
 * API. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer.h"
#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

typedef struct lspec {
  const char *type, *name, *props[10];
} lspec;

/* A model of layers g[0..n) (the first gets input_shape 1:1:in_w), loss
 * cross, batch 4, a synthetic training set; compiled and initialized
 * unless compile fails, whose code is returned with the message in e. */
static int make(nnt_model **out, const lspec *g, size_t n, unsigned in_w, const char *opt,
                const char *lr, const char *const *mprops, nnt_err *e) {
  nnt_model *m;
  assert_int_equal(nnt_model_create(&m, e), NNT_OK);
  const char *mp[] = {"batch_size", "4", "epochs", "1", "loss", "cross", "seed", "7", NULL};
  for (size_t i = 0; mp[i]; i += 2)
    assert_int_equal(nnt_model_set_property(m, mp[i], mp[i + 1], e), NNT_OK);
  for (size_t i = 0; mprops && mprops[i]; i += 2)
    assert_int_equal(nnt_model_set_property(m, mprops[i], mprops[i + 1], e), NNT_OK);
  char shape[32];
  snprintf(shape, sizeof shape, "1:1:%u", in_w);
  for (size_t i = 0; i < n; i++) {
    nnt_layer *l;
    assert_int_equal(nnt_layer_create(g[i].type, &l, e), NNT_OK);
    assert_int_equal(nnt_layer_set_property(l, "name", g[i].name, e), NNT_OK);
    if (i == 0)
      assert_int_equal(nnt_layer_set_property(l, "input_shape", shape, e), NNT_OK);
    for (size_t k = 0; g[i].props[k]; k += 2)
      if (nnt_layer_set_property(l, g[i].props[k], g[i].props[k + 1], e))
        fail_msg("%s: %s", g[i].name, e->msg);
    assert_int_equal(nnt_model_add_layer(m, l, e), NNT_OK);
  }
  nnt_optimizer *o;
  assert_int_equal(nnt_optimizer_create(opt, &o, e), NNT_OK);
  assert_int_equal(nnt_optimizer_set_property(o, "learning_rate", lr, e), NNT_OK);
  assert_int_equal(nnt_model_set_optimizer(m, o, e), NNT_OK);
  nnt_dataset *ds;
  assert_int_equal(nnt_dataset_create_synthetic(8, in_w, &ds, e), NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, e), NNT_OK);
  *out = m;
  int rc = nnt_model_compile(m, e);
  if (!rc && (rc = nnt_model_initialize(m, e)))
    fail_msg("%s", e->msg);
  return rc;
}

/* fc1 -> fc2 (shared_from fc1, a square weight) -> out, with extra keys
 * on fc1 and fc2. */
static nnt_model *tied(const char *opt, const char *lr, const char *const *mprops,
                       const char *k1, const char *v1) {
  const lspec g[] = {
      {"fully_connected", "fc1", {"unit", "5", "activation", "tanh", k1, v1, NULL}},
      {"fully_connected", "fc2", {"unit", "5", "activation", "tanh", "shared_from", "fc1", k1, v1,
                                  NULL}},
      {"fully_connected", "out", {"unit", "3", "activation", "softmax", NULL}},
  };
  nnt_model *m;
  nnt_err e = {0};
  if (make(&m, g, NNT_ARRAY_LEN(g), 5, opt, lr, mprops, &e))
    fail_msg("%s", e.msg);
  return m;
}

static unsigned node_of(const nnt_model *m, const char *name) {
  for (size_t i = 0; i < m->n_nodes; i++)
    if (!strcmp(m->nodes[i].layer->name, name))
      return (unsigned)i;
  fail_msg("no node '%s'", name);
  return 0;
}

/* The table, the run contexts and the schedule of the tied model. */
static void test_structure(void **state) {
  (void)state;
  nnt_model *m = tied("sgd", "0.1", NULL, NULL, NULL);
  unsigned a = node_of(m, "fc1"), b = node_of(m, "fc2");
  /* fc1's weight and bias once, out's two */
  assert_int_equal(m->n_w, 4);
  assert_int_equal(m->wpool_floats, 5 * 5 + 5 + 5 * 3 + 3);
  assert_int_equal(m->nodes[a].w_first, m->nodes[b].w_first);
  assert_int_equal(m->nodes[b].w_owner, a);
  assert_int_equal(m->nodes[a].grad_sum, b);
  assert_int_equal(m->nodes[b].grad_apply, a);
  nnt_err e = {0};
  assert_int_equal(nnt_model_plan(m, NNT_MODE_TRAIN, &e), NNT_OK);
  assert_ptr_equal(m->nodes[a].ctx.w, m->nodes[b].ctx.w);
  assert_ptr_not_equal(m->nodes[a].gw[0].data, NULL);
  /* the training schedule: fc1 accumulates right after its calc_gradient,
   * fc2 applies nothing, fc1 applies; one step more than 4 per node */
  const nnt_step *st = m->sched[NNT_MODE_TRAIN];
  unsigned n = m->n_steps[NNT_MODE_TRAIN], acc = 0, apply_a = 0, apply_b = 0;
  assert_int_equal(n, 4 * m->n_nodes + 1);
  for (unsigned s = 0; s < n; s++) {
    if (st[s].kind == NNT_STEP_ACCUMULATE_GRADIENT) {
      acc++;
      assert_int_equal(st[s].node, a);
      assert_int_equal(st[s - 1].kind, NNT_STEP_CALC_GRADIENT);
      assert_int_equal(st[s - 1].node, a);
    }
    apply_a += st[s].kind == NNT_STEP_APPLY_GRADIENT && st[s].node == a;
    apply_b += st[s].kind == NNT_STEP_APPLY_GRADIENT && st[s].node == b;
  }
  assert_int_equal(acc, 1);
  assert_int_equal(apply_a, 1);
  assert_int_equal(apply_b, 0);
  assert_string_equal(nnt_step_kind_name(NNT_STEP_ACCUMULATE_GRADIENT), "accumulate_gradient");
  /* the summary counts the shared weight once: 30 + 18 parameters */
  FILE *f = tmpfile();
  nnt_model_print_summary(f, m, 0);
  char text[4096] = {0};
  rewind(f);
  assert_true(fread(text, 1, sizeof text - 1, f) > 0);
  fclose(f);
  tu_assert_contains(text, "parameters: 48 (trainable 48,");
  /* an accumulate step of a node that shares nothing is refused */
  assert_int_equal(nnt_schedule_insert(m, NNT_MODE_TRAIN, n,
                                       (nnt_step){node_of(m, "out"), NNT_STEP_ACCUMULATE_GRADIENT},
                                       &e),
                   NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "accumulate_gradient");
  nnt_model_destroy(m);
}

/* (a) dL/dW of the shared weight is the sum of both uses: the gradient the
 * update reads (the sum's node's) against central differences. */
static void test_fd_summed_gradient(void **state) {
  (void)state;
  const char *mp[] = {"memory_optimization", "false", NULL};
  nnt_model *m = tied("sgd", "0", mp, NULL, NULL);
  m->keep_train_arena = 1;
  nnt_err e = {0};
  if (nnt_model_train(m, NULL, NULL, &e))
    fail_msg("%s", e.msg);
  unsigned a = node_of(m, "fc1"), b = node_of(m, "fc2");
  size_t checked = 0;
  for (unsigned w = 0; w < 2; w++) {
    float *x = m->w[m->nodes[a].w_first + w].data, *sum = m->nodes[b].gw[w].data;
    const float *own_a = m->nodes[a].gw[w].data;
    size_t len = nnt_dim_len(m->wspec[m->nodes[a].w_first + w].dim);
    double apart = 0;
    for (size_t j = 0; j < len; j++) {
      double num = tu_model_fd(m, x, j, 1e-2f);
      if (fabs(num - sum[j]) > 3e-3 * fmax(1, fabs(num)))
        fail_msg("%s[%zu]: summed %g, numeric %g", m->wspec[m->nodes[a].w_first + w].name, j,
                 sum[j], num);
      apart = fmax(apart, fabs(sum[j] - own_a[j]));
      checked++;
    }
    /* fc2's own part is not zero: the sum is not fc1's gradient alone */
    assert_true(apart > 1e-4);
  }
  assert_int_equal(checked, 30);
  nnt_model_destroy(m);
}

/* (b) the tied MLP of gen_shared.py, 5 steps of sgd and of adam: the loss
 * and every weight after every step against PyTorch. */
static void golden_case(const char *name) {
  nnt_model *m = tu_golden_model(name, NULL, 0);
  assert_int_equal(m->wpool_floats, 112);
  tu_golden_train(m, name);
  nnt_model_destroy(m);
}

static void test_golden_sgd(void **state) {
  (void)state;
  golden_case("tied_sgd");
}

static void test_golden_adam(void **state) {
  (void)state;
  golden_case("tied_adam");
}

static long file_size(const char *path) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fclose(f);
  return n;
}

/* (c) the weight file: the shared weight once, where NNTrainer puts it (at
 * fc2, the sharer last in the graph: mid, fc1/fc2, out), and it round-trips
 * with adam's moments, once per weight. */
static void test_weight_file(void **state) {
  (void)state;
  nnt_model *m = tu_golden_model("tied_adam", NULL, 0);
  assert_int_equal(m->n_w, 6);
  assert_string_equal(m->nodes[m->w_node[0]].layer->name, "mid");
  assert_string_equal(m->nodes[m->w_node[2]].layer->name, "fc2");
  assert_string_equal(m->nodes[m->w_node[4]].layer->name, "out");
  /* fc1 reads what sits at fc2's position: init.bin's floats 42..84 */
  size_t n;
  char path[1200];
  snprintf(path, sizeof path, "%s/init.bin", tu_data_path("golden/training/tied_adam"));
  float *init = tu_read_floats(path, &n);
  assert_int_equal(n, 112);
  assert_memory_equal(m->w[m->nodes[node_of(m, "fc1")].w_first].data, init + 42,
                      42 * sizeof(float));
  free(init);
  nnt_err e = {0};
  if (nnt_model_train(m, NULL, NULL, &e))
    fail_msg("%s", e.msg);
  char *dir = tu_mkdtemp();
  snprintf(path, sizeof path, "%s/w.bin", dir);
  assert_int_equal(nnt_model_save_weights(m, path, 0, &e), NNT_OK);
  assert_int_equal(file_size(path), 112 * 4);
  char spath[1200];
  snprintf(spath, sizeof spath, "%s/s.bin", dir);
  assert_int_equal(nnt_model_save_weights(m, spath, 1, &e), NNT_OK);
  /* weights, "adam", m and v of the 6 weights, epoch and iteration */
  assert_int_equal(file_size(spath), 112 * 4 + 4 + 2 * 112 * 4 + 8);
  nnt_model *r = tu_golden_model("tied_adam", NULL, 0);
  assert_int_equal(nnt_model_load_weights(r, spath, &e), NNT_OK);
  assert_memory_equal(r->wpool, m->wpool, 112 * sizeof(float));
  assert_non_null(r->opt_pool);
  assert_memory_equal(r->opt_pool, m->opt_pool, 2 * 112 * sizeof(float));
  nnt_model_destroy(r);
  nnt_model_destroy(m);
  tu_rmdir(dir);
  free(dir);
}

static void refused(const lspec *g, size_t n, const char *a, const char *b, const char *c) {
  nnt_model *m;
  nnt_err e = {0};
  const char *mse[] = {"loss", "mse", NULL};
  int rc = make(&m, g, n, 6, "sgd", "0.1", mse, &e);
  if (rc != NNT_ERR_INVAL)
    fail_msg("compile gave %d (%s), not NNT_ERR_INVAL", rc, e.msg);
  tu_assert_contains(e.msg, a);
  tu_assert_contains(e.msg, b);
  tu_assert_contains(e.msg, c);
  nnt_model_destroy(m);
}

/* (d) what compile refuses, naming the layers (and the weight). */
static void test_refusals(void **state) {
  (void)state;
  const lspec missing[] = {
      {"fully_connected", "fc1", {"unit", "6", NULL}},
      {"fully_connected", "fc2", {"unit", "6", "shared_from", "nope", NULL}},
  };
  refused(missing, 2, "[fc2] shared_from", "no layer named 'nope'", "");
  const lspec other_type[] = {
      {"fully_connected", "fc1", {"unit", "6", NULL}},
      {"batch_normalization", "bn", {"shared_from", "fc1", NULL}},
  };
  refused(other_type, 2, "[bn] shared_from = fc1", "'bn' is a batch_normalization layer",
          "'fc1'");
  const lspec shape[] = {
      {"fully_connected", "fc1", {"unit", "6", NULL}},
      {"fully_connected", "fc2", {"unit", "5", "shared_from", "fc1", NULL}},
  };
  refused(shape, 2, "[fc2] shared_from = fc1", "weight 'weight' is 1:1:6:5 in 'fc2'",
          "1:1:6:6 in 'fc1'");
  const lspec no_bias[] = {
      {"fully_connected", "fc1", {"unit", "6", NULL}},
      {"fully_connected", "fc2", {"unit", "6", "shared_from", "fc1", "disable_bias", "true", NULL}},
  };
  refused(no_bias, 2, "[fc2] shared_from = fc1", "weight 'bias' of 'fc1'",
          "no counterpart in 'fc2'");
  const lspec cycle[] = {
      {"fully_connected", "a", {"unit", "6", "shared_from", "b", NULL}},
      {"fully_connected", "b", {"unit", "6", "shared_from", "a", NULL}},
  };
  refused(cycle, 2, "[a] shared_from = b", "cycle", "'a' -> 'b' -> 'a'");
  const lspec self[] = {
      {"fully_connected", "fc1", {"unit", "6", NULL}},
      {"fully_connected", "fc2", {"unit", "6", "shared_from", "fc2", NULL}},
  };
  refused(self, 2, "[fc2] shared_from", "'fc2' names the layer itself", "");
  /* an empty value is refused when set */
  nnt_layer *l;
  nnt_err e = {0};
  assert_int_equal(nnt_layer_create("fully_connected", &l, &e), NNT_OK);
  assert_int_equal(nnt_layer_set_property(l, "shared_from", " ", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "shared_from");
  nnt_layer_destroy(l);
}

/* A chain c -> b -> a resolves to a: one weight set, three users. */
static void test_chain(void **state) {
  (void)state;
  const lspec g[] = {
      {"fully_connected", "a", {"unit", "4", "activation", "tanh", NULL}},
      {"fully_connected", "b", {"unit", "4", "activation", "tanh", "shared_from", "a", NULL}},
      {"fully_connected", "c", {"unit", "4", "activation", "tanh", "shared_from", "b", NULL}},
      {"fully_connected", "out", {"unit", "3", "activation", "softmax", NULL}},
  };
  nnt_model *m;
  nnt_err e = {0};
  assert_int_equal(make(&m, g, NNT_ARRAY_LEN(g), 4, "sgd", "0.1", NULL, &e), NNT_OK);
  unsigned a = node_of(m, "a"), b = node_of(m, "b"), c = node_of(m, "c");
  assert_int_equal(m->n_w, 4);
  assert_int_equal(m->nodes[b].w_owner, a);
  assert_int_equal(m->nodes[c].w_owner, a);
  assert_int_equal(m->nodes[a].grad_sum, c);
  assert_int_equal(m->nodes[c].grad_apply, a);
  if (nnt_model_train(m, NULL, NULL, &e))
    fail_msg("%s", e.msg);
  nnt_model_destroy(m);
}

/* The weights after training the tied model with adam and model keys. */
static float *train_tied(const char *const *mprops, int poison, size_t *n) {
  const char *mp[12] = {"epochs", "2", NULL};
  for (size_t i = 0; mprops && mprops[i]; i++)
    mp[2 + i] = mprops[i];
  nnt_model *m = tied("adam", "0.05", mp, NULL, NULL);
  m->poison = poison;
  nnt_err e = {0};
  if (nnt_model_train(m, NULL, NULL, &e))
    fail_msg("%s", e.msg);
  *n = m->wpool_floats;
  float *w = malloc(*n * sizeof(float));
  memcpy(w, m->wpool, *n * sizeof(float));
  for (size_t i = 0; i < *n; i++)
    assert_true(isfinite(w[i]));
  nnt_model_destroy(m);
  return w;
}

/* (e) poison mode: every tensor NaN-filled when its lifetime ends; a
 * gradient read after it died would make the weights NaN. (f) no reuse
 * and no in-place gives the same bits. */
static void test_poison_and_memory_optimization(void **state) {
  (void)state;
  size_t n0, n1, n2;
  const char *off[] = {"memory_optimization", "false", NULL};
  float *plain = train_tied(NULL, 0, &n0);
  float *poisoned = train_tied(NULL, 1, &n1);
  float *unopt = train_tied(off, 0, &n2);
  assert_int_equal(n0, n1);
  assert_int_equal(n0, n2);
  assert_memory_equal(plain, poisoned, n0 * sizeof(float));
  assert_memory_equal(plain, unopt, n0 * sizeof(float));
  free(plain), free(poisoned), free(unopt);
}

/* One sgd step of lr 1 (a batch of the 8 samples), clip_grad_by_norm
 * clip when not NULL, key k1 on fc1 and fc2: the change of every weight
 * into d (the gradient with its sign flipped). */
static void one_step(const char *clip, const char *k1, const char *v1, float *d, size_t *n) {
  const char *mp[] = {"batch_size", "8", clip ? "clip_grad_by_norm" : NULL, clip, NULL};
  nnt_model *m = tied("sgd", "1", mp, k1, v1);
  *n = m->wpool_floats;
  float *before = malloc(*n * sizeof(float));
  memcpy(before, m->wpool, *n * sizeof(float));
  nnt_err e = {0};
  if (nnt_model_train(m, NULL, NULL, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(m->iter, 1);
  for (size_t i = 0; i < *n; i++)
    d[i] = m->wpool[i] - before[i];
  free(before);
  nnt_model_destroy(m);
}

/* clip_grad_by_norm counts the shared weight once: the clipped step is the
 * unclipped one scaled by c / |g| over the table's weights; l2norm adds
 * constant * w to the shared weight's gradient once. */
static void test_clip_and_regularization_once(void **state) {
  (void)state;
  float d0[64], d1[64], d2[64];
  size_t n0, n1, n2;
  one_step(NULL, NULL, NULL, d0, &n0);
  assert_int_equal(n0, 5 * 5 + 5 + 5 * 3 + 3);
  double sq = 0;
  for (size_t i = 0; i < n0; i++)
    sq += (double)d0[i] * d0[i];
  double c = sqrt(sq) / 4; /* clips by a factor of 4 */
  char cs[32];
  snprintf(cs, sizeof cs, "%.9g", c);
  one_step(cs, NULL, NULL, d1, &n1);
  assert_int_equal(n0, n1);
  for (size_t i = 0; i < n0; i++)
    if (fabs(d1[i] - d0[i] / 4) > 1e-6 + 1e-4 * fabs(d0[i]))
      fail_msg("clipped step [%zu]: %g, expected %g", i, d1[i], d0[i] / 4);
  one_step(NULL, "weight_regularizer", "l2norm", d2, &n2);
  assert_int_equal(n0, n2);
  /* the shared weight is the table's first (25 floats): its step changes
   * by -1 * constant (1) * w, once, not twice; nothing else changes */
  nnt_model *m = tied("sgd", "1", NULL, NULL, NULL);
  for (size_t i = 0; i < n0; i++) {
    double want = i < 25 ? d0[i] - m->wpool[i] : d0[i];
    if (fabs(d2[i] - want) > 1e-5)
      fail_msg("l2norm step [%zu]: %g, expected %g", i, d2[i], want);
  }
  nnt_model_destroy(m);
}

/* The key through the INI loader and back through its writer. */
static void test_ini_round_trip(void **state) {
  (void)state;
  nnt_model *m = tu_golden_model("tied_sgd", NULL, 0);
  char *dir = tu_mkdtemp(), path[1200];
  snprintf(path, sizeof path, "%s/saved.ini", dir);
  nnt_err e = {0};
  assert_int_equal(nnt_model_save_ini(m, path, NULL, &e), NNT_OK);
  FILE *f = fopen(path, "r");
  char text[4096] = {0};
  assert_true(fread(text, 1, sizeof text - 1, f) > 0);
  fclose(f);
  tu_assert_contains(text, "[fc2]\ntype = fully_connected\n");
  tu_assert_contains(strstr(text, "[fc2]"), "shared_from = fc1\n");
  nnt_model *r;
  assert_int_equal(nnt_model_create(&r, &e), NNT_OK);
  assert_int_equal(nnt_model_set_base_dir(r, tu_data_path("golden/training/tied_sgd"), &e),
                   NNT_OK);
  if (nnt_ini_load(r, path, NULL, 0, &e) || nnt_model_compile(r, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(r->n_w, 6);
  nnt_model_destroy(r);
  nnt_model_destroy(m);
  tu_rmdir(dir);
  free(dir);
}

/* The key through the C API's layer properties; a refusal there too. */
static void test_capi(void **state) {
  (void)state;
  for (int bad = 0; bad < 2; bad++) {
    ml_train_model_h model;
    assert_int_equal(ml_train_model_construct(&model), ML_ERROR_NONE);
    ml_train_layer_h l1, l2;
    assert_int_equal(ml_train_layer_create(&l1, ML_TRAIN_LAYER_TYPE_FC), ML_ERROR_NONE);
    assert_int_equal(ml_train_layer_set_property(l1, "name=fc1", "unit=3", "input_shape=1:1:3",
                                                 NULL),
                     ML_ERROR_NONE);
    assert_int_equal(ml_train_model_add_layer(model, l1), ML_ERROR_NONE);
    assert_int_equal(ml_train_layer_create(&l2, ML_TRAIN_LAYER_TYPE_FC), ML_ERROR_NONE);
    assert_int_equal(ml_train_layer_set_property(l2, "name=fc2", "unit=3",
                                                 bad ? "shared_from=fc9" : "shared_from=fc1",
                                                 NULL),
                     ML_ERROR_NONE);
    assert_int_equal(ml_train_model_add_layer(model, l2), ML_ERROR_NONE);
    int rc = ml_train_model_compile(model, "batch_size=2", "loss=mse", NULL);
    if (bad) {
      assert_int_equal(rc, ML_ERROR_INVALID_PARAMETER);
      tu_assert_contains(ml_error(), "[fc2] shared_from: no layer named 'fc9'");
    } else {
      assert_int_equal(rc, ML_ERROR_NONE);
    }
    assert_int_equal(ml_train_model_destroy(model), ML_ERROR_NONE);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_structure),
      cmocka_unit_test(test_fd_summed_gradient),
      cmocka_unit_test(test_golden_sgd),
      cmocka_unit_test(test_golden_adam),
      cmocka_unit_test(test_weight_file),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_chain),
      cmocka_unit_test(test_poison_and_memory_optimization),
      cmocka_unit_test(test_clip_and_regularization_once),
      cmocka_unit_test(test_ini_round_trip),
      cmocka_unit_test(test_capi),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
