/* rnn, gru, rnncell and grucell as NNTrainer defines them: each type's keys
 * and defaults, bad values refused with the key named, the weights'
 * names, shapes and order (what makes NNTrainer's .bin files load), the
 * shapes in and out, the C API layer types, and a weight file in
 * NNTrainer's layout giving PyTorch's output through a model. */
#include "test_util.h"
#include "nntrainer.h"
#include "nntrainer/ini.h"
#include "nntrainer/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A layer of type with props ("key", "value", ..., NULL) finalized on
 * inputs in[0..n_in); @return the code, the context in *fc. */
static int finalize(const char *type, const char *const *props, const nnt_dim *in,
                    unsigned n_in, nnt_finalize_ctx *fc, nnt_err *e) {
  nnt_layer *l;
  assert_int_equal(nnt_layer_create(type, &l, e), NNT_OK);
  for (size_t i = 0; props && props[i]; i += 2)
    if (nnt_layer_set_property(l, props[i], props[i + 1], e))
      fail_msg("%s %s=%s: %s", type, props[i], props[i + 1], e->msg);
  memset(fc, 0, sizeof *fc);
  fc->batch = in[0].b, fc->n_in = n_in, fc->n_out = 1, fc->trainable = 1;
  for (unsigned i = 0; i < n_in; i++)
    fc->in_dim[i] = in[i];
  int rc = l->ops->finalize(l, fc, e);
  nnt_layer_destroy(l);
  return rc;
}

static void expect_weight(const nnt_finalize_ctx *fc, unsigned i, const char *name,
                          unsigned rows, unsigned cols, nnt_init init) {
  assert_true(i < fc->n_w);
  assert_string_equal(fc->w[i].name, name);
  assert_true(nnt_dim_eq(fc->w[i].dim, nnt_dim_make(1, 1, rows, cols)));
  assert_int_equal(fc->w[i].init, init);
  assert_true(fc->w[i].trainable);
}

static void test_weights_and_shapes(void **state) {
  (void)state;
  nnt_finalize_ctx fc;
  nnt_err e = {0};
  const nnt_dim seq = nnt_dim_make(2, 1, 7, 3);
  /* gru: z, r, g columns; separate biases by default; the last step out */
  const char *gru[] = {"unit", "4", NULL};
  assert_int_equal(finalize("gru", gru, &seq, 1, &fc, &e), NNT_OK);
  assert_int_equal(fc.n_w, 4);
  expect_weight(&fc, 0, "weight_ih", 3, 12, NNT_INIT_XAVIER_UNIFORM);
  expect_weight(&fc, 1, "weight_hh", 4, 12, NNT_INIT_XAVIER_UNIFORM);
  expect_weight(&fc, 2, "bias_ih", 1, 12, NNT_INIT_ZEROS);
  expect_weight(&fc, 3, "bias_hh", 1, 12, NNT_INIT_ZEROS);
  assert_true(nnt_dim_eq(fc.out_dim[0], nnt_dim_make(2, 1, 1, 4)));
  assert_int_equal(fc.w[0].fan_in, 3);
  assert_int_equal(fc.w[0].fan_out, 12);
  /* integrate_bias: one bias_h; return_sequences: every step */
  const char *gru_ib[] = {"unit", "4", "integrate_bias", "true", "return_sequences", "true",
                          NULL};
  assert_int_equal(finalize("gru", gru_ib, &seq, 1, &fc, &e), NNT_OK);
  assert_int_equal(fc.n_w, 3);
  expect_weight(&fc, 2, "bias_h", 1, 12, NNT_INIT_ZEROS);
  assert_true(nnt_dim_eq(fc.out_dim[0], nnt_dim_make(2, 1, 7, 4)));
  /* disable_bias: the two matrices only */
  const char *rnn_nb[] = {"unit", "5", "disable_bias", "true", NULL};
  assert_int_equal(finalize("rnn", rnn_nb, &seq, 1, &fc, &e), NNT_OK);
  assert_int_equal(fc.n_w, 2);
  expect_weight(&fc, 0, "weight_ih", 3, 5, NNT_INIT_XAVIER_UNIFORM);
  expect_weight(&fc, 1, "weight_hh", 5, 5, NNT_INIT_XAVIER_UNIFORM);
  /* the cells: one step and the previous state in, the new state out */
  const nnt_dim cell[2] = {nnt_dim_make(3, 1, 1, 6), nnt_dim_make(3, 1, 1, 2)};
  const char *gc[] = {"unit", "2", "bias_initializer", "ones", NULL};
  assert_int_equal(finalize("grucell", gc, cell, 2, &fc, &e), NNT_OK);
  assert_int_equal(fc.n_w, 4);
  expect_weight(&fc, 0, "weight_ih", 6, 6, NNT_INIT_XAVIER_UNIFORM);
  expect_weight(&fc, 1, "weight_hh", 2, 6, NNT_INIT_XAVIER_UNIFORM);
  expect_weight(&fc, 3, "bias_hh", 1, 6, NNT_INIT_ONES);
  assert_true(nnt_dim_eq(fc.out_dim[0], nnt_dim_make(3, 1, 1, 2)));
  const char *rc[] = {"unit", "2", "integrate_bias", "true", NULL};
  assert_int_equal(finalize("rnncell", rc, cell, 2, &fc, &e), NNT_OK);
  assert_int_equal(fc.n_w, 3);
  expect_weight(&fc, 2, "bias_h", 1, 2, NNT_INIT_ZEROS);
}

typedef struct bad_key {
  const char *type, *key, *value, *expect;
} bad_key;

static void test_bad_values_name_the_key(void **state) {
  (void)state;
  static const bad_key cases[] = {
      {"gru", "unit", "0", "key 'unit'"},
      {"rnn", "unit", "-3", "unit"},
      {"gru", "reset_after", "maybe", "reset_after"},
      {"grucell", "reset_after", "2", "reset_after"},
      {"gru", "hidden_state_activation", "gelu", "key 'hidden_state_activation'"},
      {"rnncell", "hidden_state_activation", "softmax", "key 'hidden_state_activation'"},
      {"gru", "recurrent_activation", "nope", "key 'recurrent_activation'"},
      {"rnn", "dropout_rate", "1", "key 'dropout_rate'"},
      {"grucell", "dropout_rate", "-0.1", "dropout_rate"},
      {"gru", "integrate_bias", "yes please", "integrate_bias"},
      {"rnn", "return_sequences", "x", "return_sequences"},
      {"gru", "weight_initializer", "glorot", "weight_initializer"},
      /* keys NNTrainer does not give these types */
      {"gru", "bidirectional", "true", "unknown key 'bidirectional' for layer type 'gru'"},
      {"rnn", "max_timestep", "4", "unknown key 'max_timestep' for layer type 'rnn'"},
      {"rnn", "reset_after", "true", "unknown key 'reset_after' for layer type 'rnn'"},
      {"rnn", "recurrent_activation", "tanh", "unknown key 'recurrent_activation'"},
      {"rnncell", "return_sequences", "true", "unknown key 'return_sequences'"},
      {"grucell", "return_sequences", "true", "unknown key 'return_sequences'"},
      {"rnncell", "reset_after", "false", "unknown key 'reset_after'"},
  };
  for (size_t i = 0; i < NNT_ARRAY_LEN(cases); i++) {
    const bad_key *c = &cases[i];
    nnt_layer *l;
    nnt_err e = {0};
    assert_int_equal(nnt_layer_create(c->type, &l, &e), NNT_OK);
    int rc = nnt_layer_set_property(l, c->key, c->value, &e);
    if (rc != NNT_ERR_INVAL)
      fail_msg("%s %s=%s: code %d", c->type, c->key, c->value, rc);
    tu_assert_contains(e.msg, c->expect);
    nnt_layer_destroy(l);
  }
  /* and the keys each type has are taken */
  static const char *const good[][3] = {
      {"gru", "reset_after", "false"},         {"grucell", "recurrent_activation", "tanh"},
      {"rnn", "return_sequences", "true"},     {"rnncell", "hidden_state_activation", "relu"},
      {"gru", "dropout_rate", "0.5"},          {"rnn", "integrate_bias", "true"},
      {"grucell", "hidden_state_activation", "leaky_relu"},
  };
  for (size_t i = 0; i < NNT_ARRAY_LEN(good); i++) {
    nnt_layer *l;
    nnt_err e = {0};
    assert_int_equal(nnt_layer_create(good[i][0], &l, &e), NNT_OK);
    if (nnt_layer_set_property(l, good[i][1], good[i][2], &e))
      fail_msg("%s %s=%s: %s", good[i][0], good[i][1], good[i][2], e.msg);
    nnt_layer_destroy(l);
  }
}

static void test_bad_shapes(void **state) {
  (void)state;
  nnt_finalize_ctx fc;
  nnt_err e = {0};
  const char *u4[] = {"unit", "4", NULL};
  const nnt_dim seq = nnt_dim_make(2, 1, 5, 3), two_ch = nnt_dim_make(2, 2, 5, 3);
  assert_int_equal(finalize("gru", NULL, &seq, 1, &fc, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "unit: required key is missing");
  assert_int_equal(finalize("grucell", NULL, &seq, 1, &fc, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "unit: required key is missing");
  assert_int_equal(finalize("rnn", u4, &two_ch, 1, &fc, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "rnn: the input is 2:5:3");
  const nnt_dim cell[2] = {nnt_dim_make(2, 1, 1, 3), nnt_dim_make(2, 1, 1, 4)};
  assert_int_equal(finalize("rnncell", u4, cell, 1, &fc, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "rnncell takes two inputs");
  assert_int_equal(finalize("grucell", u4, (nnt_dim[]){seq, cell[1]}, 2, &fc, &e),
                   NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "grucell takes one time step, 1:1:features, not 1:5:3");
  const char *u5[] = {"unit", "5", NULL};
  assert_int_equal(finalize("grucell", u5, cell, 2, &fc, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "the previous hidden state is 1:1:4, not 1:1:5 (unit)");
  /* sizes past what a product or a scratch tensor takes are refused, not wrapped */
  /* (the kept gates, 3 blocks a step, are the longest axis: the backward's
   * derivatives go over them) */
  const nnt_dim long_seq = nnt_dim_make(1, 1, 2147483647u, 1);
  assert_int_equal(finalize("gru", u4, &long_seq, 1, &fc, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "2147483647 time steps are too many for the backward");
  const char *huge[] = {"unit", "1000000000", NULL};
  assert_int_equal(finalize("gru", huge, &seq, 1, &fc, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "unit times gates: 3000000000 is more than");
}

/* The backward's scratch: a gru writes each step's pre-activation
 * derivatives over that step's three kept gate blocks, so it holds only
 * one step's state derivative (the output's slice is copied in as the
 * backward reaches that step), G + 2 blocks of work and one segment's
 * states (K = 3 for 5 steps); it keeps its gates and the state before its
 * second segment, its states being the forward's alone. An rnn, whose
 * backward reads its kept value (its state) while it writes, keeps its
 * states and holds its derivatives (G = 1 block a step) too. */
static void test_backward_scratch(void **state) {
  (void)state;
  static const struct {
    const char *type, *dropout;
    unsigned saved, bwd; /* [B, U] blocks: kept, backward's */
    nnt_scratch_life states;
  } cases[] = {
      {"gru", "0", 3 * 5 + 1, 1 + 3 + 2 + 3, NNT_SCRATCH_FWD},
      {"gru", "0.2", 3 * 5 + 1, 1 + 3 + 2 + 3, NNT_SCRATCH_FWD},
      {"rnn", "0", 0, 5 + 1 + 1 + 2, NNT_SCRATCH_ITER},
      {"rnn", "0.2", 5, 5 + 1 + 1 + 2, NNT_SCRATCH_ITER},
  };
  const nnt_dim seq = nnt_dim_make(2, 1, 5, 3);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const char *props[] = {"unit", "4", "dropout_rate", cases[c].dropout, NULL};
    nnt_finalize_ctx fc;
    nnt_err e = {0};
    assert_int_equal(finalize(cases[c].type, props, &seq, 1, &fc, &e), NNT_OK);
    unsigned saved = 0, bwd = 0;
    assert_int_equal(fc.scratch_life[0], cases[c].states);
    for (unsigned i = 1; i < fc.n_scratch; i++) { /* 0: the states [T, B, U] */
      nnt_dim d = fc.scratch_dim[i];
      assert_true(d.h == 2 && d.w == 4);
      if (fc.scratch_life[i] == NNT_SCRATCH_BWD)
        bwd += d.c;
      else
        saved += d.c;
    }
    if (strcmp(cases[c].dropout, "0")) /* the mask, T blocks */
      saved -= 5;
    assert_int_equal(saved, cases[c].saved);
    assert_int_equal(bwd, cases[c].bwd);
  }
}

static void test_capi_layer_types(void **state) {
  (void)state;
  static const struct {
    ml_train_layer_type_e type;
    const char *name;
  } types[] = {{ML_TRAIN_LAYER_TYPE_RNN, "rnn"},
               {ML_TRAIN_LAYER_TYPE_GRU, "gru"},
               {ML_TRAIN_LAYER_TYPE_GRUCELL, "grucell"},
               {ML_TRAIN_LAYER_TYPE_RNNCELL, "rnncell"}};
  assert_int_equal(ML_TRAIN_LAYER_TYPE_RNN, 11);
  assert_int_equal(ML_TRAIN_LAYER_TYPE_GRU, 14);
  assert_int_equal(ML_TRAIN_LAYER_TYPE_GRUCELL, 21);
  assert_int_equal(ML_TRAIN_LAYER_TYPE_RNNCELL, 22);
  for (size_t i = 0; i < NNT_ARRAY_LEN(types); i++) {
    const nnt_layer_ops *ops = nnt_layer_ops_find_ml((int)types[i].type);
    assert_non_null(ops);
    assert_string_equal(ops->type, types[i].name);
    ml_train_layer_h l;
    assert_int_equal(ml_train_layer_create(&l, types[i].type), ML_ERROR_NONE);
    assert_int_equal(ml_train_layer_set_property(l, "unit=3", "integrate_bias=true", NULL),
                     ML_ERROR_NONE);
    assert_int_equal(ml_train_layer_set_property(l, "dropout_rate=2", NULL),
                     ML_ERROR_INVALID_PARAMETER);
    assert_int_equal(ml_train_layer_destroy(l), ML_ERROR_NONE);
  }
}

/* A weight file in NNTrainer's layout (the golden case gru_seq's weights,
 * weight_ih, weight_hh, bias_ih, bias_hh) loaded into a model built from an
 * INI: inference gives PyTorch's torch.nn.GRU output. */
static void test_nntrainer_weight_file(void **state) {
  (void)state;
  size_t n;
  float *g = tu_read_floats(tu_data_path("golden/layers/rec_gru_seq.bin"), &n);
  const size_t B = 2, T = 4, F = 3, U = 5, nx = B * T * F, nw = F * 3 * U + U * 3 * U + 6 * U;
  const float *x = g, *w = g + nx, *want = w + nw + B * T * U; /* after R */
  char bin[1024], ini[1024];
  snprintf(bin, sizeof bin, "%s", tu_write("w.bin", w, nw * sizeof(float)));
  snprintf(ini, sizeof ini,
           "[Model]\ntype = NeuralNetwork\nbatch_size = 2\nloss = mse\n\n"
           "[Optimizer]\ntype = sgd\n\n"
           "[in]\ntype = input\ninput_shape = 1:4:3\n\n"
           "[g]\ntype = gru\nunit = 5\nreturn_sequences = true\n");
  const char *path = tu_write_text("gru.ini", ini);
  nnt_model *m;
  nnt_err e = {0};
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  if (nnt_ini_load(m, path, NULL, 0, &e) || nnt_model_compile(m, &e) ||
      nnt_model_initialize(m, &e) || nnt_model_load_weights(m, bin, &e))
    fail_msg("%s", e.msg);
  float got[2 * 4 * 5];
  const float *in[] = {x};
  float *out[] = {got};
  assert_int_equal(nnt_model_infer(m, in, out, &e), NNT_OK);
  double err = tu_max_rel_err(got, want, B * T * U);
  if (err > 1e-5)
    fail_msg("inference against torch.nn.GRU: max relative error %g", err);
  nnt_model_destroy(m);
  free(g);
}

/* A model from INI text (batch 2) compiled and initialized. */
static nnt_model *model_of(const char *name, const char *layers) {
  char ini[2048];
  snprintf(ini, sizeof ini,
           "[Model]\ntype = NeuralNetwork\nbatch_size = 2\nloss = mse\n\n"
           "[Optimizer]\ntype = sgd\n\n%s",
           layers);
  const char *path = tu_write_text(name, ini);
  nnt_model *m;
  nnt_err e = {0};
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  if (nnt_ini_load(m, path, NULL, 0, &e) || nnt_model_compile(m, &e) ||
      nnt_model_initialize(m, &e))
    fail_msg("%s: %s", name, e.msg);
  return m;
}

/* A cell unrolled over T steps (unroll_for, the state as its recurrent
 * input, as_sequence) from a zero state computes what the sequence layer
 * computes on the same input at every step, with the same weight file. */
static void unrolled_case(const char *seq_type, const char *cell_type, const char *keys) {
  enum { B = 2, T = 5, F = 3, U = 4 };
  char layers[1024];
  snprintf(layers, sizeof layers,
           "[x]\ntype = input\ninput_shape = 1:1:3\n\n"
           "[h0]\ntype = input\ninput_shape = 1:1:4\n\n"
           "[c]\ntype = %s\nunit = 4\n%s\ninput_layers = x, h0\nunroll_for = 5\n"
           "recurrent_input = c(1)\nrecurrent_output = c\nas_sequence = c\n",
           cell_type, keys);
  nnt_model *cell = model_of("cell.ini", layers);
  snprintf(layers, sizeof layers,
           "[x]\ntype = input\ninput_shape = 1:5:3\n\n"
           "[s]\ntype = %s\nunit = 4\n%s\nreturn_sequences = true\n",
           seq_type, keys);
  nnt_model *seq = model_of("seq.ini", layers);
  nnt_err e = {0};
  char bin[1024];
  snprintf(bin, sizeof bin, "%s", tu_path_in("cell.bin"));
  if (nnt_model_save_weights(cell, bin, 0, &e) || nnt_model_load_weights(seq, bin, &e))
    fail_msg("%s: %s", seq_type, e.msg);
  float x[B * F], h0[B * U] = {0}, xs[B * T * F], got_cell[B * T * U], got_seq[B * T * U];
  nnt_rng r;
  nnt_rng_seed(&r, 3);
  tu_fill_uniform(&r, x, B * F, -1, 1);
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      memcpy(xs + (b * T + t) * F, x + b * F, F * sizeof(float));
  /* the model's inputs in its order (the graph's: h0 may come first) */
  nnt_dim d[2];
  assert_int_equal(nnt_model_input_dims(cell, d, 2), 2);
  const float *in_cell[] = {d[0].w == F ? x : h0, d[0].w == F ? h0 : x}, *in_seq[] = {xs};
  float *out_cell[] = {got_cell}, *out_seq[] = {got_seq};
  assert_int_equal(nnt_model_infer(cell, in_cell, out_cell, &e), NNT_OK);
  assert_int_equal(nnt_model_infer(seq, in_seq, out_seq, &e), NNT_OK);
  double err = tu_max_rel_err(got_cell, got_seq, B * T * U);
  if (err > 1e-6)
    fail_msg("%s unrolled against %s %s: max relative error %g", cell_type, seq_type, keys,
             err);
  nnt_model_destroy(cell);
  nnt_model_destroy(seq);
}

static void test_unrolled_cells_match_the_sequence_layers(void **state) {
  (void)state;
  unrolled_case("gru", "grucell", "");
  unrolled_case("gru", "grucell", "reset_after = false\nintegrate_bias = true");
  unrolled_case("rnn", "rnncell", "");
  unrolled_case("rnn", "rnncell", "integrate_bias = true\nhidden_state_activation = sigmoid");
}

/* An INI with a bad recurrent key: the message names the file, the
 * section and the key. */
static void test_ini_error(void **state) {
  (void)state;
  const char *path = tu_write_text(
      "bad.ini", "[Model]\ntype = NeuralNetwork\nbatch_size = 2\nloss = mse\n\n"
                 "[in]\ntype = input\ninput_shape = 1:4:3\n\n"
                 "[g]\ntype = gru\nunit = 5\nreset_after = sometimes\n");
  nnt_model *m;
  nnt_err e = {0};
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  assert_int_equal(nnt_ini_load(m, path, NULL, 0, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, path);
  tu_assert_contains(e.msg, "[g]");
  tu_assert_contains(e.msg, "reset_after");
  nnt_model_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_weights_and_shapes),
      cmocka_unit_test(test_bad_values_name_the_key),
      cmocka_unit_test(test_bad_shapes),
      cmocka_unit_test(test_backward_scratch),
      cmocka_unit_test(test_capi_layer_types),
      cmocka_unit_test_setup_teardown(test_nntrainer_weight_file, tu_dir_setup,
                                      tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_ini_error, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_unrolled_cells_match_the_sequence_layers,
                                      tu_dir_setup, tu_dir_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
