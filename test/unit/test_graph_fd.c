/* Whole graphs with branches, merges and multi-output layers: every weight
 * gradient against central finite differences of the model's loss. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/model_impl.h"

typedef struct lspec {
  const char *type, *name, *props[8];
} lspec;

static void check_graph(const lspec *g, size_t n, const char *loss, unsigned in_w) {
  nnt_model *m;
  nnt_err e = {0};
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  const char *mp[] = {"batch_size", "6", "epochs", "1", "memory_optimization", "false",
                      "loss", loss, "seed", "3", NULL};
  for (size_t i = 0; mp[i]; i += 2)
    assert_int_equal(nnt_model_set_property(m, mp[i], mp[i + 1], &e), NNT_OK);
  char shape[32];
  snprintf(shape, sizeof shape, "1:1:%u", in_w);
  for (size_t i = 0; i < n; i++) {
    nnt_layer *l;
    assert_int_equal(nnt_layer_create(g[i].type, &l, &e), NNT_OK);
    assert_int_equal(nnt_layer_set_property(l, "name", g[i].name, &e), NNT_OK);
    if (i == 0)
      assert_int_equal(nnt_layer_set_property(l, "input_shape", shape, &e), NNT_OK);
    for (size_t k = 0; g[i].props[k]; k += 2)
      if (nnt_layer_set_property(l, g[i].props[k], g[i].props[k + 1], &e))
        fail_msg("%s: %s", g[i].name, e.msg);
    assert_int_equal(nnt_model_add_layer(m, l, &e), NNT_OK);
  }
  nnt_optimizer *o;
  assert_int_equal(nnt_optimizer_create("sgd", &o, &e), NNT_OK);
  assert_int_equal(nnt_optimizer_set_property(o, "learning_rate", "0", &e), NNT_OK);
  assert_int_equal(nnt_model_set_optimizer(m, o, &e), NNT_OK);
  nnt_dataset *ds;
  assert_int_equal(nnt_dataset_create_synthetic(6, 5, &ds, &e), NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, &e), NNT_OK);
  if (nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("%s", e.msg);
  m->keep_train_arena = 1;
  if (nnt_model_train(m, NULL, NULL, &e))
    fail_msg("%s", e.msg);
  size_t checked = 0;
  for (size_t i = 0; i < m->n_nodes; i++) {
    nnt_node *nd = &m->nodes[i];
    for (unsigned w = 0; w < nd->fc.n_w; w++) {
      if (!nd->gw[w].data)
        continue;
      float *x = m->w[nd->w_first + w].data, *gw = nd->gw[w].data;
      size_t len = nnt_dim_len(nd->fc.w[w].dim);
      for (size_t j = 0; j < len; j += 1 + len / 12) {
        double num = tu_model_fd(m, x, j, 1e-2f);
        if (fabs(num - gw[j]) > 3e-3 * fmax(1, fabs(num)))
          fail_msg("%s:%s[%zu]: analytic %g, numeric %g", nd->layer->name, nd->fc.w[w].name, j,
                   gw[j], num);
        checked++;
      }
    }
  }
  assert_true(checked > 0);
  nnt_model_destroy(m);
}

static void test_residual_addition(void **state) {
  (void)state;
  const lspec g[] = {
      {"input", "in", {NULL}},
      {"fully_connected", "a", {"unit", "4", "activation", "tanh", NULL}},
      {"fully_connected", "b", {"unit", "4", NULL}},
      {"addition", "add", {"input_layers", "a, b", NULL}},
      {"fully_connected", "out", {"unit", "3", "activation", "softmax", NULL}},
  };
  check_graph(g, NNT_ARRAY_LEN(g), "cross", 5);
}

static void test_concat_branches(void **state) {
  (void)state;
  const lspec g[] = {
      {"input", "in", {NULL}},
      {"fully_connected", "a", {"unit", "3", "activation", "sigmoid", "input_layers", "in", NULL}},
      {"fully_connected", "b", {"unit", "2", "input_layers", "in", NULL}},
      {"concat", "cat", {"input_layers", "a,b", "axis", "3", NULL}},
      {"fully_connected", "out", {"unit", "3", "activation", "softmax", NULL}},
  };
  check_graph(g, NNT_ARRAY_LEN(g), "cross", 4);
}

static void test_split_and_multiout(void **state) {
  (void)state;
  const lspec g[] = {
      {"input", "in", {NULL}},
      {"split", "sp", {"split_number", "2", "axis", "3", NULL}},
      {"fully_connected", "p", {"unit", "3", "input_layers", "sp(0)", NULL}},
      {"fully_connected", "q", {"unit", "3", "input_layers", "sp(1)", NULL}},
      {"addition", "add", {"input_layers", "p,q", NULL}},
      {"multiout", "mo", {NULL}},
      {"fully_connected", "r", {"unit", "2", "input_layers", "mo(0)", NULL}},
      {"fully_connected", "s", {"unit", "2", "activation", "tanh", "input_layers", "mo(1)", NULL}},
      {"concat", "cat", {"input_layers", "r,s", "axis", "3", NULL}},
      {"fully_connected", "out", {"unit", "2", "activation", "sigmoid", NULL}},
  };
  check_graph(g, NNT_ARRAY_LEN(g), "mse", 6);
}

static void test_batch_norm_in_model(void **state) {
  (void)state;
  const lspec g[] = {
      {"input", "in", {NULL}},
      {"fully_connected", "fc", {"unit", "5", NULL}},
      /* tanh, not relu: batch-normalized values sit near relu's kink */
      {"batch_normalization", "bn", {"activation", "tanh", NULL}},
      {"fully_connected", "out", {"unit", "3", "activation", "softmax", NULL}},
  };
  check_graph(g, NNT_ARRAY_LEN(g), "cross", 4);
}

/* NNTrainer's order: a branch in -> {a, b} runs and saves in, b, a. */
static void test_branch_order_matches_nntrainer(void **state) {
  (void)state;
  nnt_model *m;
  nnt_err e = {0};
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  const char *specs[][4] = {{"input", "in", "input_shape", "1:1:4"},
                            {"fully_connected", "a", "input_layers", "in"},
                            {"fully_connected", "b", "input_layers", "in"},
                            {"concat", "cat", "input_layers", "a,b"}};
  for (size_t i = 0; i < 4; i++) {
    nnt_layer *l;
    assert_int_equal(nnt_layer_create(specs[i][0], &l, &e), NNT_OK);
    assert_int_equal(nnt_layer_set_property(l, "name", specs[i][1], &e), NNT_OK);
    assert_int_equal(nnt_layer_set_property(l, specs[i][2], specs[i][3], &e), NNT_OK);
    if (i == 1 || i == 2)
      assert_int_equal(nnt_layer_set_property(l, "unit", "2", &e), NNT_OK);
    assert_int_equal(nnt_model_add_layer(m, l, &e), NNT_OK);
  }
  assert_int_equal(nnt_model_compile(m, &e), NNT_OK);
  assert_string_equal(m->nodes[0].layer->name, "in");
  assert_string_equal(m->nodes[1].layer->name, "b");
  assert_string_equal(m->nodes[2].layer->name, "a");
  assert_string_equal(m->nodes[3].layer->name, "cat");
  nnt_model_destroy(m);
}

static void test_mismatched_shapes_named(void **state) {
  (void)state;
  nnt_model *m;
  nnt_err e = {0};
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  const char *specs[][6] = {{"input", "in", "input_shape", "1:1:4", NULL, NULL},
                            {"fully_connected", "a", "unit", "3", NULL, NULL},
                            {"fully_connected", "b", "unit", "2", "input_layers", "in"},
                            {"addition", "add", "input_layers", "a,b", NULL, NULL}};
  for (size_t i = 0; i < 4; i++) {
    nnt_layer *l;
    assert_int_equal(nnt_layer_create(specs[i][0], &l, &e), NNT_OK);
    assert_int_equal(nnt_layer_set_property(l, "name", specs[i][1], &e), NNT_OK);
    for (size_t k = 2; k < 6 && specs[i][k]; k += 2)
      assert_int_equal(nnt_layer_set_property(l, specs[i][k], specs[i][k + 1], &e), NNT_OK);
    assert_int_equal(nnt_model_add_layer(m, l, &e), NNT_OK);
  }
  assert_int_equal(nnt_model_compile(m, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "[add]");
  tu_assert_contains(e.msg, "1:1:1:2");
  tu_assert_contains(e.msg, "1:1:1:3");
  nnt_model_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_residual_addition), cmocka_unit_test(test_concat_branches),
      cmocka_unit_test(test_split_and_multiout), cmocka_unit_test(test_batch_norm_in_model),
      cmocka_unit_test(test_mismatched_shapes_named),
      cmocka_unit_test(test_branch_order_matches_nntrainer)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
