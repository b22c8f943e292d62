/* unroll_for, recurrent_input, recurrent_output, as_sequence (NNTrainer's
 * recurrent realizer, nntrainer/unroll.c): the realized graph's names,
 * connections and shared weights; training an unrolled model against the
 * same model written out by hand with shared_from, bit for bit, and its
 * weight file holding each shared weight once; the refusals, naming the
 * file, section and key; the keys through the C API. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer.h"
#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

#define HEAD                                                                                  \
  "[Model]\ntype = NeuralNetwork\nbatch_size = 2\nepochs = 2\nloss = mse\nseed = 5\n"     \
  "[Optimizer]\ntype = adam\nlearning_rate = 0.01\n"                                          \
  "[input]\ntype = input\ninput_shape = 1:1:4\n"

/* input -> fc_in -> fc_out (tanh), unrolled 3 times: fc_out feeds fc_in. */
static const char *const rec_ini = HEAD
    "[fc_in]\ntype = fully_connected\nunit = 4\n"
    "[fc_out]\ntype = fully_connected\nunit = 4\nactivation = tanh\nunroll_for = 3\n"
    "recurrent_input = fc_in\nrecurrent_output = fc_out\n";

/* The same written out by hand. */
static const char *const hand_ini = HEAD
    "[a0]\ntype = fully_connected\nunit = 4\ninput_layers = input\n"
    "[b0]\ntype = fully_connected\nunit = 4\nactivation = tanh\n"
    "[a1]\ntype = fully_connected\nunit = 4\nshared_from = a0\n"
    "[b1]\ntype = fully_connected\nunit = 4\nactivation = tanh\nshared_from = b0\n"
    "[a2]\ntype = fully_connected\nunit = 4\nshared_from = a0\n"
    "[b2]\ntype = fully_connected\nunit = 4\nactivation = tanh\nshared_from = b0\n";

/* Load text as "rec.ini" (with the overrides), add a synthetic training
 * set; compile when compile is set. The code, the message in e. */
static int load(const char *text, const char *const *ov, size_t n_ov, int compile,
                nnt_model **out, nnt_err *e) {
  nnt_model *m;
  assert_int_equal(nnt_model_create(&m, e), NNT_OK);
  *out = m;
  int rc = nnt_ini_load_text(m, "rec.ini", text, strlen(text), ov, n_ov, e);
  if (rc || !compile)
    return rc;
  nnt_dataset *ds;
  assert_int_equal(nnt_dataset_create_synthetic(8, 11, &ds, e), NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, e), NNT_OK);
  rc = nnt_model_compile(m, e);
  if (!rc)
    rc = nnt_model_initialize(m, e);
  return rc;
}

static nnt_model *good(const char *text, const char *const *ov, size_t n_ov) {
  nnt_model *m;
  nnt_err e = {0};
  if (load(text, ov, n_ov, 1, &m, &e))
    fail_msg("%s", e.msg);
  return m;
}

/* Node name reads from (input k, output idx), and shares the weights of
 * owner (NULL: its own). */
static void expect(const nnt_model *m, const char *name, const char *type,
                   const char *const *in, const unsigned *idx, const char *owner) {
  const nnt_node *nd = tu_node(m, name);
  assert_string_equal(nd->layer->ops->type, type);
  unsigned n = 0;
  while (in[n])
    n++;
  if (nd->n_in != n)
    fail_msg("'%s' has %u inputs, not %u", name, nd->n_in, n);
  for (unsigned k = 0; k < n; k++) {
    assert_string_equal(m->nodes[nd->in_node[k]].layer->name, in[k]);
    assert_int_equal(nd->in_idx[k], idx ? idx[k] : 0);
  }
  const char *own = m->nodes[nd->w_owner].layer->name;
  if (owner)
    assert_string_equal(own, owner);
  else
    assert_string_equal(own, name);
}

#define IN(...) ((const char *const[]){__VA_ARGS__, NULL})

/* (a) the realized graph of rec_ini: NNTrainer's names, the recurrent
 * wiring, one weight set per layer, an identity under the end's name. */
static void test_graph_chain(void **state) {
  (void)state;
  nnt_model *m = good(rec_ini, NULL, 0);
  assert_int_equal(m->n_nodes, 1 + 3 * 3 + 1 + 1);
  expect(m, "fc_in/0", "fully_connected", IN("input"), NULL, NULL);
  expect(m, "fc_out/0", "fully_connected", IN("fc_in/0"), NULL, NULL);
  expect(m, "fc_out/0/activation_realized", "activation", IN("fc_out/0"), NULL, NULL);
  for (unsigned t = 1; t < 3; t++) {
    char a[32], b[32], act[48], prev[48];
    snprintf(a, sizeof a, "fc_in/%u", t);
    snprintf(b, sizeof b, "fc_out/%u", t);
    snprintf(act, sizeof act, "fc_out/%u/activation_realized", t);
    snprintf(prev, sizeof prev, "fc_out/%u/activation_realized", t - 1);
    expect(m, a, "fully_connected", IN(prev), NULL, "fc_in/0");
    expect(m, b, "fully_connected", IN(a), NULL, "fc_out/0");
    expect(m, act, "activation", IN(b), NULL, "fc_out/0/activation_realized");
    assert_string_equal(tu_node(m, b)->layer->shared_from, "fc_out/0");
  }
  expect(m, "fc_out", "identity", IN("fc_out/2/activation_realized"), NULL, NULL);
  expect(m, "fc_out/loss_realized", "mse", IN("fc_out"), NULL, NULL);
  /* two weight sets, saved where NNTrainer saves them: the last step's */
  assert_int_equal(m->n_w, 4);
  assert_string_equal(m->nodes[m->w_node[0]].layer->name, "fc_in/2");
  assert_string_equal(m->nodes[m->w_node[2]].layer->name, "fc_out/2");
  /* the user's layers keep their keys for the INI writer */
  assert_int_equal(m->n_layers, 3);
  nnt_model_destroy(m);
}

/* (b) as_sequence: every step's output joined by a concat (channel axis,
 * NNTrainer's default for one-channel inputs) under end/concat_0. */
static void test_graph_sequence(void **state) {
  (void)state;
  const char *ov[] = {"fc_out.as_sequence=fc_out"};
  nnt_model *m = good(rec_ini, ov, 1);
  expect(m, "fc_out/concat_0", "concat",
         IN("fc_out/0/activation_realized", "fc_out/1/activation_realized",
            "fc_out/2/activation_realized"),
         NULL, NULL);
  expect(m, "fc_out", "identity", IN("fc_out/concat_0"), NULL, NULL);
  const nnt_node *id = tu_node(m, "fc_out");
  assert_int_equal(id->fc.out_dim[0].c, 3);
  assert_int_equal(id->fc.out_dim[0].w, 4);
  nnt_err e = {0};
  if (nnt_model_train(m, NULL, NULL, &e))
    fail_msg("%s", e.msg);
  nnt_model_destroy(m);
}

/* (c) two recurrent pairs, and a recurrent input given by slot: only the
 * layers on a path from a recurrent input to the end are copied. */
static void test_graph_pairs(void **state) {
  (void)state;
  static const char *const two = HEAD
      "[a]\ntype = fully_connected\nunit = 4\ninput_layers = input\n"
      "[b]\ntype = fully_connected\nunit = 4\ninput_layers = input\n"
      "[s]\ntype = addition\ninput_layers = a, b\nunroll_for = 2\n"
      "recurrent_input = a, b\nrecurrent_output = s, s\n";
  nnt_model *m = good(two, NULL, 0);
  expect(m, "a/0", "fully_connected", IN("input"), NULL, NULL);
  expect(m, "b/0", "fully_connected", IN("input"), NULL, NULL);
  expect(m, "a/1", "fully_connected", IN("s/0"), NULL, "a/0");
  expect(m, "b/1", "fully_connected", IN("s/0"), NULL, "b/0");
  expect(m, "s/1", "addition", IN("a/1", "b/1"), NULL, "s/0");
  expect(m, "s", "identity", IN("s/1"), NULL, NULL);
  nnt_model_destroy(m);
  static const char *const slot = HEAD
      "[a]\ntype = fully_connected\nunit = 4\ninput_layers = input\n"
      "[b]\ntype = fully_connected\nunit = 4\ninput_layers = input\n"
      "[s]\ntype = addition\ninput_layers = a, b\nunroll_for = 3\n"
      "recurrent_input = s(1)\nrecurrent_output = s\n";
  m = good(slot, NULL, 0);
  assert_int_equal(m->n_nodes, 1 + 2 + 3 + 1 + 1); /* a and b once */
  expect(m, "s/0", "addition", IN("a", "b"), NULL, NULL);
  expect(m, "s/1", "addition", IN("a", "s/0"), NULL, "s/0");
  expect(m, "s/2", "addition", IN("a", "s/1"), NULL, "s/0");
  nnt_model_destroy(m);
}

/* (d) training the unrolled model equals training the hand-written one bit
 * for bit (same initial weights, loaded from one file into both), and the
 * weight files are the same bytes: each shared weight once. */
static void test_train_equals_hand(void **state) {
  (void)state;
  nnt_model *u = good(rec_ini, NULL, 0), *h = good(hand_ini, NULL, 0);
  char *dir = tu_mkdtemp(), p0[1200], pu[1200], ph[1200];
  snprintf(p0, sizeof p0, "%s/init.bin", dir);
  snprintf(pu, sizeof pu, "%s/u.bin", dir);
  snprintf(ph, sizeof ph, "%s/h.bin", dir);
  nnt_err e = {0};
  assert_int_equal(nnt_model_save_weights(u, p0, 0, &e), NNT_OK);
  size_t n;
  unsigned char *bytes = tu_file_bytes(p0, &n);
  assert_int_equal(n, 2 * (16 + 4) * sizeof(float));
  free(bytes);
  if (nnt_model_load_weights(h, p0, &e))
    fail_msg("%s", e.msg);
  if (nnt_model_train(u, NULL, NULL, &e) || nnt_model_train(h, NULL, NULL, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(nnt_model_save_weights(u, pu, 1, &e), NNT_OK);
  assert_int_equal(nnt_model_save_weights(h, ph, 1, &e), NNT_OK);
  tu_assert_same_file(pu, ph);
  /* the weights moved: the comparison is not of two untouched files */
  bytes = tu_file_bytes(pu, &n);
  size_t n0;
  unsigned char *b0 = tu_file_bytes(p0, &n0);
  assert_true(memcmp(bytes, b0, n0) != 0);
  free(bytes), free(b0);
  nnt_model_destroy(u);
  nnt_model_destroy(h);
  tu_rmdir(dir);
  free(dir);
}

typedef struct bad_case {
  const char *ov;     /* an override of rec_ini */
  int at_load;        /* refused by the loader (else by compile) */
  const char *a, *b;  /* in the message */
} bad_case;

static const bad_case bad[] = {
    {"fc_out.unroll_for=0", 1, "(from override 'fc_out.unroll_for=0')",
     "[fc_out] unroll_for: must be positive"},
    {"fc_out.unroll_for=x", 1, "[fc_out] unroll_for: ", "'x'"},
    {"fc_out.recurrent_input=nope", 1, "[fc_out] recurrent_input: ", "no layer named 'nope'"},
    {"fc_out.recurrent_output=nope", 1, "[fc_out] recurrent_output: ", "no layer named 'nope'"},
    {"fc_out.recurrent_input=fc_in(", 1, "[fc_out] recurrent_input: ", "name(index)"},
    {"fc_out.recurrent_input=fc_in,fc_out", 1, "[fc_out] recurrent_output: ",
     "1 connection(s), but recurrent_input has 2"},
    {"fc_in.recurrent_input=fc_in", 1, "[fc_in] recurrent_input: ", "needs unroll_for"},
    {"fc_out.as_sequence=fc_in", 1, "[fc_out] as_sequence: ", "'fc_in' is not 'fc_out'"},
    {"fc_out.as_sequence=fc_out,fc_out", 1, "[fc_out] as_sequence: ", "one connection"},
    {"fc_out.unit=5", 0, "[fc_out] recurrent_output: 'fc_out(0)' gives 2:1:1:5",
     "'fc_in(0)' (recurrent_input 1) reads 2:1:1:4"},
    {"fc_out.recurrent_input=fc_in(1)", 0, "[fc_out] recurrent_input: ",
     "'fc_in' has 1 input(s): that slot does not exist"},
    {"fc_out.recurrent_input=input", 0, "[fc_out] recurrent_input: ",
     "'input' has 0 input(s)"},
    {"fc_out.as_sequence=fc_out(1)", 0, "[fc_out] as_sequence: ",
     "no layer reads 'fc_out(1)'"},
};

/* (e) the refusals: at load with the file, line, section and key; at
 * compile with the section (layer) and key. */
static void test_refusals(void **state) {
  (void)state;
  for (size_t i = 0; i < NNT_ARRAY_LEN(bad); i++) {
    nnt_model *m;
    nnt_err e = {0};
    int rc = load(rec_ini, &bad[i].ov, 1, !bad[i].at_load, &m, &e);
    if (rc != NNT_ERR_INVAL)
      fail_msg("case %zu (%s): code %d, message '%s'", i, bad[i].ov, rc, e.msg);
    if (bad[i].at_load)
      tu_assert_contains(e.msg, "rec.ini: ");
    tu_assert_contains(e.msg, bad[i].a);
    tu_assert_contains(e.msg, bad[i].b);
    nnt_model_destroy(m);
  }
  /* in the file itself: its line */
  static const char *const zero = HEAD
      "[fc_in]\ntype = fully_connected\nunit = 4\n"
      "[fc_out]\ntype = fully_connected\nunit = 4\nunroll_for = 0\n";
  nnt_model *z;
  nnt_err ez = {0};
  assert_int_equal(load(zero, NULL, 0, 0, &z, &ez), NNT_ERR_INVAL);
  tu_assert_contains(ez.msg, "rec.ini: line 19: [fc_out] unroll_for: must be positive");
  nnt_model_destroy(z);
  /* a recurrent input that does not lead to the end; a layer outside the
   * group reading one inside */
  static const char *const after = HEAD
      "[fc_in]\ntype = fully_connected\nunit = 4\n"
      "[fc_out]\ntype = fully_connected\nunit = 4\nunroll_for = 2\n"
      "recurrent_input = late\nrecurrent_output = fc_out\n"
      "[late]\ntype = fully_connected\nunit = 4\n";
  static const char *const peek = HEAD
      "[fc_in]\ntype = fully_connected\nunit = 4\n"
      "[fc_out]\ntype = fully_connected\nunit = 4\nunroll_for = 2\n"
      "recurrent_input = fc_in\nrecurrent_output = fc_out\n"
      "[side]\ntype = addition\ninput_layers = fc_out, fc_in\n";
  const char *texts[] = {after, peek};
  const char *want[] = {"[fc_out] recurrent_input: 'late' does not lead to 'fc_out'",
                        "[side] input_layers: 'fc_in' is inside the group that 'fc_out' "
                        "unrolls"};
  for (size_t i = 0; i < 2; i++) {
    nnt_model *m;
    nnt_err e = {0};
    assert_int_equal(load(texts[i], NULL, 0, 1, &m, &e), NNT_ERR_INVAL);
    tu_assert_contains(e.msg, want[i]);
    nnt_model_destroy(m);
  }
}

/* (f) the keys through ml_train_layer_set_property: the same graph as the
 * INI's; a bad value refused where it is set. */
static void test_capi(void **state) {
  (void)state;
  ml_train_model_h model;
  assert_int_equal(ml_train_model_construct(&model), ML_ERROR_NONE);
  ml_train_layer_h in, a, b;
  assert_int_equal(ml_train_layer_create(&in, ML_TRAIN_LAYER_TYPE_INPUT), ML_ERROR_NONE);
  assert_int_equal(ml_train_layer_set_property(in, "name=input", "input_shape=1:1:4", NULL),
                   ML_ERROR_NONE);
  assert_int_equal(ml_train_model_add_layer(model, in), ML_ERROR_NONE);
  assert_int_equal(ml_train_layer_create(&a, ML_TRAIN_LAYER_TYPE_FC), ML_ERROR_NONE);
  assert_int_equal(ml_train_layer_set_property(a, "name=fc_in", "unit=4", NULL), ML_ERROR_NONE);
  assert_int_equal(ml_train_model_add_layer(model, a), ML_ERROR_NONE);
  assert_int_equal(ml_train_layer_create(&b, ML_TRAIN_LAYER_TYPE_FC), ML_ERROR_NONE);
  assert_int_equal(ml_train_layer_set_property(b, "name=fc_out", "unroll_for=0", NULL),
                   ML_ERROR_INVALID_PARAMETER);
  const char *msg = ml_error();
  tu_assert_contains(msg, "unroll_for");
  tu_assert_contains(msg, "must be positive");
  assert_int_equal(ml_train_layer_set_property(b, "name=fc_out", "unit=4", "activation=tanh",
                                               "unroll_for=3", "recurrent_input=fc_in",
                                               "recurrent_output=fc_out",
                                               "as_sequence=fc_out", NULL),
                   ML_ERROR_NONE);
  assert_int_equal(ml_train_model_add_layer(model, b), ML_ERROR_NONE);
  assert_int_equal(ml_train_model_compile(model, "batch_size=2", "loss=mse", NULL),
                   ML_ERROR_NONE);
  char *sum = NULL;
  assert_int_equal(ml_train_model_get_summary(model, ML_TRAIN_SUMMARY_LAYER, &sum),
                   ML_ERROR_NONE);
  tu_assert_contains(sum, "fc_in/2");
  tu_assert_contains(sum, "fc_out/concat_0");
  free(sum);
  assert_int_equal(ml_train_model_destroy(model), ML_ERROR_NONE);
  /* a name that is no layer's, refused at compile naming layer and key */
  assert_int_equal(ml_train_model_construct(&model), ML_ERROR_NONE);
  assert_int_equal(ml_train_layer_create(&a, ML_TRAIN_LAYER_TYPE_FC), ML_ERROR_NONE);
  assert_int_equal(ml_train_layer_set_property(a, "name=fc", "unit=4", "input_shape=1:1:4",
                                               "unroll_for=2", "recurrent_input=fc9",
                                               "recurrent_output=fc", NULL),
                   ML_ERROR_NONE);
  assert_int_equal(ml_train_model_add_layer(model, a), ML_ERROR_NONE);
  assert_int_equal(ml_train_model_compile(model, "batch_size=2", "loss=mse", NULL),
                   ML_ERROR_INVALID_PARAMETER);
  msg = ml_error();
  tu_assert_contains(msg, "[fc] recurrent_input: no layer named 'fc9'");
  assert_int_equal(ml_train_model_destroy(model), ML_ERROR_NONE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_graph_chain),       cmocka_unit_test(test_graph_sequence),
      cmocka_unit_test(test_graph_pairs),       cmocka_unit_test(test_train_equals_hand),
      cmocka_unit_test(test_refusals),          cmocka_unit_test(test_capi),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
