/* The sequence layers as a user meets them: their keys and what a bad value
 * says (the key named), their C API layer types (NNTrainer's
 * ml_train_layer_type_e values), and an embedding given an index outside
 * [0, in_dim) in training: an error naming the layer on the CPU, and on a
 * Vulkan device (where the op cannot return it) the non-finite check's
 * error naming it. A weight file in NNTrainer's layout (Embedding
 * [in_dim, out_dim] row-major, then layer_normalization's gamma and beta)
 * loads and gives the rows it holds; layer_normalization keeps for its
 * backward only its input and two floats per row. The models of
 * type_models.c with the sequence layers train on a Vulkan device as on
 * the CPU, within a stated tolerance. */
#include "capi_harness.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/ini.h"
#include "nntrainer/layer.h"
#include "nntrainer/model.h"
#include "nntrainer/model_impl.h"
#include "type_models.h"

/* set_property of a new layer of type: the code, and the message holds
 * needle. */
static void bad_key(const char *type, const char *key, const char *value, const char *needle) {
  nnt_layer *l;
  nnt_err e = {0};
  assert_int_equal(nnt_layer_create(type, &l, &e), NNT_OK);
  int rc = nnt_layer_set_property(l, key, value, &e);
  if (rc != NNT_ERR_INVAL)
    fail_msg("%s %s=%s: got %d, want NNT_ERR_INVAL", type, key, value, rc);
  tu_assert_contains(e.msg, needle);
  nnt_layer_destroy(l);
}

/* A model of one input (shape in) and one layer (type, props '|'-joined),
 * then flatten and a softmax classifier, compiled through the C API. */
static int compile_one(const char *in, int ml_type, const char *props, ml_train_model_h *out) {
  ml_train_model_h m;
  ml_train_layer_h a, b, f, c;
  char shape[64];
  snprintf(shape, sizeof shape, "input_shape=%s", in);
  OK(ml_train_model_construct(&m));
  OK(ml_train_layer_create(&a, ML_TRAIN_LAYER_TYPE_INPUT));
  OK(ml_train_layer_set_property(a, "name=in", shape, NULL));
  OK(ml_train_layer_create(&b, ml_type));
  OK(ml_train_layer_set_property_with_single_param(b, props));
  OK(ml_train_layer_create(&f, ML_TRAIN_LAYER_TYPE_FLATTEN));
  OK(ml_train_layer_create(&c, ML_TRAIN_LAYER_TYPE_FC));
  OK(ml_train_layer_set_property(c, "unit=2", "activation=softmax", NULL));
  OK(ml_train_model_add_layer(m, a));
  OK(ml_train_model_add_layer(m, b));
  OK(ml_train_model_add_layer(m, f));
  OK(ml_train_model_add_layer(m, c));
  ml_train_optimizer_h o;
  OK(ml_train_optimizer_create(&o, ML_TRAIN_OPTIMIZER_TYPE_SGD));
  OK(ml_train_model_set_optimizer(m, o));
  *out = m;
  return ml_train_model_compile(m, "loss=cross", "batch_size=2", NULL);
}

static void test_embedding_keys(void **state) {
  (void)state;
  bad_key("embedding", "in_dim", "0", "in_dim");
  bad_key("embedding", "out_dim", "0", "out_dim");
  bad_key("embedding", "in_dim", "-3", "in_dim");
  bad_key("embedding", "zero_idx_mask", "a", "zero_idx_mask");
  ml_train_model_h m;
  /* a required key missing, the mask past the table, indices not 1:1:T */
  const struct {
    const char *in, *props, *needle;
  } bad[] = {
      {"1:1:4", "name=emb|out_dim=3", "in_dim"},
      {"1:1:4", "name=emb|in_dim=5", "out_dim"},
      {"1:1:4", "name=emb|in_dim=5|out_dim=3|zero_idx_mask=5", "zero_idx_mask"},
      {"2:1:4", "name=emb|in_dim=5|out_dim=3", "channel and height"},
      {"1:3:4", "name=emb|in_dim=5|out_dim=3", "channel and height"},
  };
  for (size_t i = 0; i < NNT_ARRAY_LEN(bad); i++) {
    (void)ml_error();
    int rc = compile_one(bad[i].in, ML_TRAIN_LAYER_TYPE_EMBEDDING, bad[i].props, &m);
    if (rc != ML_ERROR_INVALID_PARAMETER)
      fail_msg("%s: got %d", bad[i].props, rc);
    const char *msg = ml_error();
    assert_non_null(msg);
    tu_assert_contains(msg, bad[i].needle);
    tu_assert_contains(msg, "emb");
    OK(ml_train_model_destroy(m));
  }
  OK(compile_one("1:1:4", ML_TRAIN_LAYER_TYPE_EMBEDDING, "in_dim=5|out_dim=3|zero_idx_mask=4",
                 &m));
  OK(ml_train_model_destroy(m));
}

static void test_layer_normalization_keys(void **state) {
  (void)state;
  bad_key("layer_normalization", "epsilon", "0", "epsilon");
  bad_key("layer_normalization", "epsilon", "-1e-3", "epsilon");
  bad_key("layer_normalization", "axis", "4", "axis");
  bad_key("layer_normalization", "axis", "2", "axis");     /* not the last axes */
  bad_key("layer_normalization", "axis", "0,1,2,3", "axis"); /* the batch */
  bad_key("layer_normalization", "axis", "1,3", "axis");
  bad_key("layer_normalization", "gamma_initializer", "twos", "gamma_initializer");
  ml_train_model_h m;
  (void)ml_error();
  assert_int_equal(compile_one("2:3:4", ML_TRAIN_LAYER_TYPE_LAYER_NORMALIZATION, "name=ln",
                               &m), ML_ERROR_INVALID_PARAMETER);
  const char *msg = ml_error();
  assert_non_null(msg);
  tu_assert_contains(msg, "axis");
  tu_assert_contains(msg, "ln");
  OK(ml_train_model_destroy(m));
  OK(compile_one("2:3:4", ML_TRAIN_LAYER_TYPE_LAYER_NORMALIZATION,
                 "name=ln|axis=2,3|epsilon=1e-5|beta_initializer=ones", &m));
  OK(ml_train_model_destroy(m));
}

static void test_positional_encoding_keys(void **state) {
  (void)state;
  bad_key("positional_encoding", "max_timestep", "0", "max_timestep");
  bad_key("positional_encoding", "max_timestep", "x", "max_timestep");
  ml_train_model_h m;
  const struct {
    const char *in, *props;
  } bad[] = {{"1:4:6", "name=pe"}, {"1:9:6", "name=pe|max_timestep=8"}};
  for (size_t i = 0; i < NNT_ARRAY_LEN(bad); i++) {
    (void)ml_error();
    assert_int_equal(compile_one(bad[i].in, ML_TRAIN_LAYER_TYPE_POSITIONAL_ENCODING,
                                 bad[i].props, &m), ML_ERROR_INVALID_PARAMETER);
    const char *msg = ml_error();
    assert_non_null(msg);
    tu_assert_contains(msg, "max_timestep");
    tu_assert_contains(msg, "pe");
    OK(ml_train_model_destroy(m));
  }
  OK(compile_one("1:8:6", ML_TRAIN_LAYER_TYPE_POSITIONAL_ENCODING, "max_timestep=8", &m));
  OK(ml_train_model_destroy(m));
}

/* Inputs a (shape sa) and b (shape sb) into a layer of ml_type through
 * the C API, then an mse loss: the compile's code. */
static int compile_two(int ml_type, const char *sa, const char *sb) {
  ml_train_model_h m;
  ml_train_layer_h a, b, op;
  char pa[64], pb[64];
  snprintf(pa, sizeof pa, "input_shape=%s", sa);
  snprintf(pb, sizeof pb, "input_shape=%s", sb);
  OK(ml_train_model_construct(&m));
  OK(ml_train_layer_create(&a, ML_TRAIN_LAYER_TYPE_INPUT));
  OK(ml_train_layer_set_property(a, "name=a", pa, NULL));
  OK(ml_train_layer_create(&b, ML_TRAIN_LAYER_TYPE_INPUT));
  OK(ml_train_layer_set_property(b, "name=b", pb, NULL));
  OK(ml_train_layer_create(&op, ml_type));
  OK(ml_train_layer_set_property(op, "name=op", "input_layers=a,b", NULL));
  OK(ml_train_model_add_layer(m, a));
  OK(ml_train_model_add_layer(m, b));
  OK(ml_train_model_add_layer(m, op));
  ml_train_optimizer_h o;
  OK(ml_train_optimizer_create(&o, ML_TRAIN_OPTIMIZER_TYPE_SGD));
  OK(ml_train_model_set_optimizer(m, o));
  (void)ml_error();
  int rc = ml_train_model_compile(m, "loss=mse", "batch_size=2", NULL);
  if (rc) {
    const char *msg = ml_error();
    assert_non_null(msg);
    tu_assert_contains(msg, "op");
    tu_assert_contains(msg, sa);
    tu_assert_contains(msg, sb);
  }
  OK(ml_train_model_destroy(m));
  return rc;
}

static void test_elementwise_layers(void **state) {
  (void)state;
  static const struct {
    const char *type;
    int ml;
  } t[] = {{"add", ML_TRAIN_LAYER_TYPE_ADD},
           {"subtract", ML_TRAIN_LAYER_TYPE_SUBTRACT},
           {"multiply", ML_TRAIN_LAYER_TYPE_MULTIPLY},
           {"divide", ML_TRAIN_LAYER_TYPE_DIVIDE}};
  for (size_t i = 0; i < NNT_ARRAY_LEN(t); i++) {
    bad_key(t[i].type, "inplace_direction", "up", "inplace_direction");
    bad_key(t[i].type, "inplace", "maybe", "inplace");
    assert_int_equal(compile_two(t[i].ml, "1:2:3", "1:2:3"), ML_ERROR_NONE);
    assert_int_equal(compile_two(t[i].ml, "1:2:3", "1:1:3"), ML_ERROR_INVALID_PARAMETER);
    assert_int_equal(compile_two(t[i].ml, "1:2:3", "2:2:3"), ML_ERROR_INVALID_PARAMETER);
  }
}

static void test_reduce_mean_keys(void **state) {
  (void)state;
  bad_key("reduce_mean", "axis", "0", "axis");
  bad_key("reduce_mean", "axis", "4", "axis");
  bad_key("reduce_mean", "axis", "2,3", "axis");
  ml_train_model_h m;
  OK(compile_one("2:3:4", ML_TRAIN_LAYER_TYPE_REDUCE_MEAN, "axis=2", &m));
  OK(ml_train_model_destroy(m));
}

/* Samples of 4 indices: index `bad` (when has_bad) at position 2 from
 * sample 3 on; 16 samples an epoch. */
typedef struct idx_gen {
  int n;
  int has_bad;
  float bad;
} idx_gen;
static int idx_cb(float **in, float **label, bool *last, void *ud) {
  idx_gen *g = ud;
  for (int t = 0; t < 4; t++)
    in[0][t] = (float)((g->n + t) % 5);
  if (g->has_bad && g->n >= 3)
    in[0][2] = g->bad;
  label[0][0] = (float)(g->n % 2), label[0][1] = (float)(1 - g->n % 2);
  *last = ++g->n % 16 == 0;
  return 0;
}

/* Train the embedding model on engine with indices from g: the run's code. */
static int train_indices(const char *engine, idx_gen *g) {
  ml_train_model_h m;
  ml_train_layer_h in, emb, flat, out;
  OK(ml_train_model_construct(&m));
  OK(ml_train_layer_create(&in, ML_TRAIN_LAYER_TYPE_INPUT));
  OK(ml_train_layer_set_property(in, "name=in", "input_shape=1:1:4", NULL));
  OK(ml_train_layer_create(&emb, ML_TRAIN_LAYER_TYPE_EMBEDDING));
  OK(ml_train_layer_set_property(emb, "name=emb", "in_dim=5", "out_dim=3", NULL));
  OK(ml_train_layer_create(&flat, ML_TRAIN_LAYER_TYPE_FLATTEN));
  OK(ml_train_layer_create(&out, ML_TRAIN_LAYER_TYPE_FC));
  OK(ml_train_layer_set_property(out, "unit=2", "activation=softmax", NULL));
  OK(ml_train_model_add_layer(m, in));
  OK(ml_train_model_add_layer(m, emb));
  OK(ml_train_model_add_layer(m, flat));
  OK(ml_train_model_add_layer(m, out));
  ml_train_optimizer_h o;
  OK(ml_train_optimizer_create(&o, ML_TRAIN_OPTIMIZER_TYPE_SGD));
  OK(ml_train_model_set_optimizer(m, o));
  ml_train_dataset_h ds;
  OK(ml_train_dataset_create(&ds));
  OK(ml_train_dataset_add_generator(ds, ML_TRAIN_DATASET_MODE_TRAIN, idx_cb, g));
  OK(ml_train_model_set_dataset(m, ds));
  OK(ml_train_model_compile(m, "loss=cross", "batch_size=2", engine, NULL));
  (void)ml_error();
  int rc = ml_train_model_run(m, "epochs=1", NULL);
  const char *msg = ml_error();
  print_message("%s: %d %s\n", engine, rc, msg ? msg : "");
  if (rc != ML_ERROR_NONE) {
    assert_non_null(msg);
    tu_assert_contains(msg, "emb");
  }
  OK(ml_train_model_destroy(m));
  return rc;
}

static void test_embedding_bad_index(void **state) {
  (void)state;
  idx_gen good = {0, 0, 0}, big = {0, 1, 5}, neg = {0, 1, -0.5f};
  assert_int_equal(train_indices("engine=cpu", &good), ML_ERROR_NONE);
  /* the CPU's op says so at once: the forward fails, naming the layer */
  assert_int_equal(train_indices("engine=cpu", &big), ML_ERROR_INVALID_PARAMETER);
  /* below 0 (NNTrainer's cast would make -0.5 index 0) */
  assert_int_equal(train_indices("engine=cpu", &neg), ML_ERROR_INVALID_PARAMETER);
#ifdef NNT_HAVE_VULKAN
  /* the op cannot return it: its NaN rows stop the step at the
   * non-finite check, whose replay names the layer */
  tu_keep_vulkan_driver();
  idx_gen ggood = {0, 0, 0}, gbig = {0, 1, 7};
  assert_int_equal(train_indices("engine=gpu", &ggood), ML_ERROR_NONE);
  assert_int_equal(train_indices("engine=gpu", &gbig), NNT_ERR_RANGE);
#endif
}

static void test_weight_file_layout(void **state) {
  (void)state;
  char ini[1024], bin[1024]; /* tu_write's path is overwritten by the next call */
  snprintf(ini, sizeof ini, "%s", tu_write_text("seq.ini",
                                  "[Model]\ntype = NeuralNetwork\nbatch_size = 2\nloss = mse\n\n"
                                  "[Optimizer]\ntype = sgd\n\n"
                                  "[in]\ntype = input\ninput_shape = 1:1:4\n\n"
                                  "[emb]\ntype = embedding\nin_dim = 5\nout_dim = 3\n\n"
                                  "[ln]\ntype = layer_normalization\naxis = 3\n"));
  float w[15 + 3 + 3];
  for (int i = 0; i < 15; i++) { /* row r: r, r^2 / 8, -r / 4 */
    float r = (float)(i / 3);
    w[i] = i % 3 == 0 ? r : i % 3 == 1 ? r * r / 8 : -0.25f * r;
  }
  const float gamma[3] = {1.5f, 0.5f, 2}, beta[3] = {0.25f, -1, 0};
  memcpy(w + 15, gamma, sizeof gamma);
  memcpy(w + 18, beta, sizeof beta);
  snprintf(bin, sizeof bin, "%s", tu_write("seq.bin", w, sizeof w));
  nnt_model *m = tu_model_for_ini(ini);
  nnt_err e = {0};
  if (nnt_ini_load(m, ini, NULL, 0, &e) || nnt_model_compile(m, &e) ||
      nnt_model_initialize(m, &e) || nnt_model_load_weights(m, bin, &e))
    fail_msg("%s", e.msg);
  const float x[8] = {0, 4, 2.5f, 1, 3, 3, 0.75f, 2};
  float y[24];
  const float *ins[] = {x};
  float *outs[] = {y};
  assert_int_equal(nnt_model_infer(m, ins, outs, &e), NNT_OK);
  for (int t = 0; t < 8; t++) {
    const float *row = w + 3 * (int)x[t];
    double mu = (row[0] + row[1] + row[2]) / 3.0, v = 0;
    for (int c = 0; c < 3; c++)
      v += (row[c] - mu) * (row[c] - mu);
    double is = 1 / sqrt(v / 3 + 1e-3);
    for (int c = 0; c < 3; c++) {
      double want = (row[c] - mu) * is * gamma[c] + beta[c];
      if (fabs(y[t * 3 + c] - want) > 1e-5)
        fail_msg("index %g, column %d: %g, expected %g", x[t], c, y[t * 3 + c], want);
    }
  }
  /* a file one float short is refused */
  const char *shortbin = tu_write("short.bin", w, sizeof w - sizeof(float));
  assert_int_not_equal(nnt_model_load_weights(m, shortbin, &e), NNT_OK);
  nnt_model_destroy(m);
}

/* What layer_normalization asks the planner for: one scratch of two floats
 * per normalized row, kept for the backward only (NNT_SCRATCH_SAVED), and
 * its input (no copy of it, of x - mean or of the normalized input). */
static void test_layer_normalization_keeps_little(void **state) {
  (void)state;
  nnt_layer *l;
  nnt_err e = {0};
  assert_int_equal(nnt_layer_create("layer_normalization", &l, &e), NNT_OK);
  assert_int_equal(nnt_layer_set_property(l, "axis", "3", &e), NNT_OK);
  nnt_finalize_ctx fc;
  memset(&fc, 0, sizeof fc);
  fc.batch = 4, fc.n_in = 1, fc.n_out = 1;
  fc.in_dim[0] = nnt_dim_make(4, 2, 16, 64);
  assert_int_equal(l->ops->finalize(l, &fc, &e), NNT_OK);
  assert_int_equal(fc.n_scratch, 1);
  assert_int_equal(nnt_dim_len(fc.scratch_dim[0]), 2 * 4 * 2 * 16);
  assert_int_equal(fc.scratch_life[0], NNT_SCRATCH_SAVED);
  assert_int_equal(fc.flags, NNT_LF_BWD_READS_INPUT);
  assert_int_equal(fc.n_w, 2);
  assert_string_equal(fc.w[0].name, "gamma");
  assert_string_equal(fc.w[1].name, "beta");
  assert_true(nnt_dim_eq(fc.w[0].dim, nnt_dim_make(1, 1, 1, 64)));
  nnt_layer_destroy(l);
}

#ifdef NNT_HAVE_VULKAN
static nnt_model *seq_model(const char *ini, const char *engine) {
  nnt_model *m = tu_model_for_ini(ini);
  nnt_err e = {0};
  const char *ov[] = {engine, "save_path="};
  if (nnt_ini_load(m, ini, ov, 2, &e) || nnt_model_compile(m, &e) ||
      nnt_model_initialize(m, &e))
    fail_msg("%s: %s", engine, e.msg);
  return m;
}

/* max |a - b| / max(1, max |a|) */
static double werr(const float *a, const float *b, size_t n) {
  double d = 0, sc = 1;
  for (size_t i = 0; i < n; i++) {
    double x = fabs((double)a[i] - b[i]);
    d = x > d || isnan(x) ? x : d;
    sc = fmax(sc, fabs(a[i]));
  }
  return d / sc;
}

static void test_models_train_on_the_gpu(void **state) {
  (void)state;
  tu_keep_vulkan_driver();
  unsigned seen = 0;
  for (size_t i = 0; i < tu_n_type_models; i++) {
    const char *txt = tu_type_models[i];
    if (!strstr(txt, "embedding") && !strstr(txt, "divide"))
      continue;
    seen++;
    char ini[1024];
    snprintf(ini, sizeof ini, "%s", tu_write_text("m.ini", txt));
    nnt_model *c = seq_model(ini, "engine=cpu"), *g = seq_model(ini, "engine=gpu");
    assert_string_equal(g->be->name, "vulkan");
    nnt_err e = {0};
    assert_int_equal(nnt_model_train(c, NULL, NULL, &e), NNT_OK);
    if (nnt_model_train(g, NULL, NULL, &e))
      fail_msg("gpu: %s", e.msg);
    float *wc = tu_weights_of(c), *wg = tu_weights_of(g);
    double err = werr(wc, wg, c->wpool_floats);
    print_message("type model %zu: weights within %.3g of the cpu's (normalised)\n", i, err);
    if (!(err <= 1e-4))
      fail_msg("type model %zu: the gpu's weights differ by %.3g", i, err);
    free(wc), free(wg);
    tu_model_destroy_checked(c);
    tu_model_destroy_checked(g);
  }
  assert_int_equal(seen, 2);
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_embedding_keys),
      cmocka_unit_test(test_layer_normalization_keys),
      cmocka_unit_test(test_positional_encoding_keys),
      cmocka_unit_test(test_elementwise_layers),
      cmocka_unit_test(test_reduce_mean_keys),
      cmocka_unit_test(test_embedding_bad_index),
      cmocka_unit_test_setup_teardown(test_weight_file_layout, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test(test_layer_normalization_keeps_little),
#ifdef NNT_HAVE_VULKAN
      cmocka_unit_test_setup_teardown(test_models_train_on_the_gpu, tu_dir_setup, tu_dir_teardown),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
