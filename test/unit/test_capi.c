/* The Tizen ML Training C API (nntrainer.h) and our extension: the success
 * path of every function, and a table of misuses with their exact codes.
 * Leaks: every test ends with no live handle (nnt_h_count), and the ASan
 * build checks memory. */
#include "test_util.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* the deprecated dataset functions are tested on purpose */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include "nntrainer-ext.h"
#include "nntrainer.h"
#include "api/src/api_internal.h"

#define OK(call) assert_int_equal((call), ML_ERROR_NONE)

/* Every kind of handle is gone. */
static void assert_no_handles(void) {
  for (int k = NNT_H_MODEL; k <= NNT_H_TENSORS_DATA; k++)
    if (nnt_h_count((nnt_hkind)k))
      fail_msg("%zu live handles of kind %d", nnt_h_count((nnt_hkind)k), k);
}

/* The last error's message contains needle. */
static void assert_error(const char *needle) {
  const char *m = ml_error();
  if (!m)
    fail_msg("expected an error message containing '%s', got none", needle);
  tu_assert_contains(m, needle);
}

/* ---- a learnable generator: 8 inputs, 3 classes by the largest of three
 * input sums ---- */

typedef struct gen {
  unsigned samples;  /* per epoch */
  unsigned given;
  nnt_rng rng;
  int fail_at;       /* return fail_code at this sample (-1: never) */
  int fail_code;
  int never_last_after_first; /* epochs after the first never set last */
  unsigned epochs_done;
} gen;

static int gen_cb(float **input, float **label, bool *last, void *ud) {
  gen *g = ud;
  if (g->fail_at >= 0 && g->given == (unsigned)g->fail_at)
    return g->fail_code;
  if (g->given == g->samples && !(g->never_last_after_first && g->epochs_done)) {
    *last = true;
    g->given = 0;
    g->epochs_done++;
    return 0;
  }
  *last = false;
  float s[3] = {0, 0, 0};
  for (int i = 0; i < 8; i++) {
    input[0][i] = nnt_rng_uniform(&g->rng) * 2 - 1;
    s[i % 3] += input[0][i];
  }
  int best = s[1] > s[0] ? 1 : 0;
  best = s[2] > s[best] ? 2 : best;
  for (int k = 0; k < 3; k++)
    label[0][k] = k == best ? 1.0f : 0.0f;
  g->given++;
  return 0;
}

static void gen_init(gen *g, unsigned samples, uint64_t seed) {
  memset(g, 0, sizeof *g);
  g->samples = samples;
  g->fail_at = -1;
  nnt_rng_seed(&g->rng, seed);
}

/* A model built through the API: input 1:1:8, fc 16 relu, fc 3 softmax,
 * adam with an exponential scheduler, generators for train and valid. */
typedef struct built {
  ml_train_model_h model;
  ml_train_layer_h in, fc1, out;
  ml_train_optimizer_h opt;
  ml_train_lr_scheduler_h lrs;
  ml_train_dataset_h ds;
  gen train, valid;
} built;

static void build(built *b, int memopt) {
  gen_init(&b->train, 256, 1);
  gen_init(&b->valid, 64, 2);
  OK(ml_train_model_construct(&b->model));
  OK(ml_train_layer_create(&b->in, ML_TRAIN_LAYER_TYPE_INPUT));
  OK(ml_train_layer_set_property(b->in, "name=in", "input_shape=1:1:8", NULL));
  OK(ml_train_layer_create(&b->fc1, ML_TRAIN_LAYER_TYPE_FC));
  /* several properties in one string, separated by '|' */
  OK(ml_train_layer_set_property(b->fc1, "name = fc1 | unit = 16", "activation=relu",
                                 "weight_initializer=he_uniform", NULL));
  OK(ml_train_layer_create(&b->out, ML_TRAIN_LAYER_TYPE_FC));
  OK(ml_train_layer_set_property_with_single_param(b->out, "name=out|unit=3|activation=softmax"));
  OK(ml_train_model_add_layer(b->model, b->in));
  OK(ml_train_model_add_layer(b->model, b->fc1));
  OK(ml_train_model_add_layer(b->model, b->out));
  OK(ml_train_optimizer_create(&b->opt, ML_TRAIN_OPTIMIZER_TYPE_ADAM));
  OK(ml_train_optimizer_set_property(b->opt, "learning_rate=0.02", "beta1=0.9", NULL));
  OK(ml_train_lr_scheduler_create(&b->lrs, ML_TRAIN_LR_SCHEDULER_TYPE_EXPONENTIAL));
  OK(ml_train_lr_scheduler_set_property(b->lrs, "learning_rate=0.02", "decay_rate=0.5",
                                        "decay_steps=64", NULL));
  OK(ml_train_optimizer_set_lr_scheduler(b->opt, b->lrs));
  OK(ml_train_model_set_optimizer(b->model, b->opt));
  OK(ml_train_dataset_create(&b->ds));
  OK(ml_train_dataset_add_generator(b->ds, ML_TRAIN_DATASET_MODE_TRAIN, gen_cb, &b->train));
  OK(ml_train_dataset_add_generator(b->ds, ML_TRAIN_DATASET_MODE_VALID, gen_cb, &b->valid));
  OK(ml_train_dataset_set_property_for_mode(b->ds, ML_TRAIN_DATASET_MODE_TRAIN, "buffer_size=4",
                                            NULL));
  OK(ml_train_model_set_dataset(b->model, b->ds));
  OK(ml_train_model_compile(b->model, "loss=cross", "batch_size=8", "seed=3",
                            memopt ? "memory_optimization=true" : "memory_optimization=false",
                            NULL));
}

typedef struct progress_log {
  unsigned epochs_seen;
  float first_loss, last_loss, valid_acc;
} progress_log;

static void on_progress(const ml_train_ext_progress_s *p, void *ud) {
  progress_log *l = ud;
  if (!p->epoch_done)
    return;
  if (!l->epochs_seen)
    l->first_loss = p->loss;
  l->last_loss = p->loss;
  l->valid_acc = p->has_valid ? p->valid_accuracy : -1;
  l->epochs_seen++;
}

static void test_train_and_inspect(void **state) {
  (void)state;
  built b;
  build(&b, 1);
  /* shapes: batch, channel, height, width */
  ml_tensors_info_h info;
  unsigned count;
  ml_tensor_dimension dim;
  OK(ml_train_model_get_input_tensors_info(b.model, &info));
  OK(ml_tensors_info_get_count(info, &count));
  assert_int_equal(count, 1);
  OK(ml_tensors_info_get_tensor_dimension(info, 0, dim));
  assert_int_equal(dim[0], 8);
  assert_int_equal(dim[1], 1);
  assert_int_equal(dim[2], 1);
  assert_int_equal(dim[3], 8);
  OK(ml_tensors_info_destroy(info));
  OK(ml_train_model_get_output_tensors_info(b.model, &info));
  OK(ml_tensors_info_get_tensor_dimension(info, 0, dim));
  assert_int_equal(dim[0], 8);
  assert_int_equal(dim[3], 3);
  OK(ml_tensors_info_destroy(info));

  /* the handle given back for a name is the one added */
  ml_train_layer_h got;
  OK(ml_train_model_get_layer(b.model, "fc1", &got));
  assert_ptr_equal(got, b.fc1);

  /* weights in NNTrainer's layout: weight 1:1:in:out, bias 1:1:1:out */
  ml_tensors_data_h w0;
  OK(ml_train_model_get_weight(b.model, "fc1", &w0, &info));
  OK(ml_tensors_info_get_count(info, &count));
  assert_int_equal(count, 2);
  OK(ml_tensors_info_get_tensor_dimension(info, 0, dim));
  assert_int_equal(dim[2], 8);
  assert_int_equal(dim[3], 16);
  OK(ml_tensors_info_destroy(info));

  progress_log log = {0};
  OK(ml_train_ext_model_run_with_progress(b.model, on_progress, &log, "epochs=6", NULL));
  assert_int_equal(log.epochs_seen, 6);
  assert_true(log.last_loss < log.first_loss * 0.8f);
  assert_true(log.valid_acc > 0.6f);

  /* the weights changed */
  ml_tensors_data_h w1;
  void *p0, *p1;
  size_t s0, s1;
  OK(ml_train_model_get_weight(b.model, "fc1", &w1, &info));
  OK(ml_tensors_info_destroy(info));
  OK(ml_tensors_data_get_tensor_data(w0, 0, &p0, &s0));
  OK(ml_tensors_data_get_tensor_data(w1, 0, &p1, &s1));
  assert_int_equal(s0, 8 * 16 * sizeof(float));
  assert_int_equal(s1, s0);
  assert_true(memcmp(p0, p1, s0) != 0);
  OK(ml_tensors_data_destroy(w0));

  /* inference on given inputs agrees with the labels' rule most of the time */
  ml_tensors_data_h in, out;
  OK(ml_train_model_get_input_tensors_info(b.model, &info));
  OK(ml_tensors_data_create(info, &in));
  OK(ml_tensors_info_destroy(info));
  float *x;
  size_t xs;
  OK(ml_tensors_data_get_tensor_data(in, 0, (void **)&x, &xs));
  assert_int_equal(xs, 8 * 8 * sizeof(float));
  gen probe;
  gen_init(&probe, 8, 99);
  float labels[8][3];
  for (int s = 0; s < 8; s++) {
    float *ip[1] = {x + 8 * s}, *lp[1] = {labels[s]};
    bool last;
    gen_cb(ip, lp, &last, &probe);
  }
  OK(ml_train_ext_model_infer(b.model, in, &out));
  float *y;
  size_t ys;
  OK(ml_tensors_data_get_tensor_data(out, 0, (void **)&y, &ys));
  assert_int_equal(ys, 8 * 3 * sizeof(float));
  int right = 0;
  for (int s = 0; s < 8; s++) {
    float sum = y[3 * s] + y[3 * s + 1] + y[3 * s + 2];
    assert_true(fabsf(sum - 1.0f) < 1e-4f); /* softmax probabilities */
    int a = y[3 * s + 1] > y[3 * s] ? 1 : 0;
    a = y[3 * s + 2] > y[3 * s + a] ? 2 : a;
    right += labels[s][a] == 1.0f;
  }
  assert_true(right >= 5);
  OK(ml_tensors_data_destroy(out));
  OK(ml_tensors_data_destroy(in));

  /* memory report */
  ml_train_ext_memory_report_s r;
  OK(ml_train_ext_model_get_memory_report(b.model, ML_TRAIN_EXT_MODE_TRAIN, &r));
  assert_int_equal(r.weight_bytes, (8 * 16 + 16 + 16 * 3 + 3) * sizeof(float));
  assert_int_equal(r.optimizer_bytes, 2 * r.weight_bytes);
  assert_true(r.arena_bytes >= r.lower_bound_bytes && r.lower_bound_bytes > 0);
  assert_int_equal(r.total_bytes, r.weight_bytes + r.optimizer_bytes + r.arena_bytes);
  ml_train_ext_memory_report_s ri;
  OK(ml_train_ext_model_get_memory_report(b.model, ML_TRAIN_EXT_MODE_INFER, &ri));
  assert_true(ri.arena_bytes < r.arena_bytes);
  assert_int_equal(ri.optimizer_bytes, 0);

  char **names;
  OK(ml_train_ext_model_get_layer_names(b.model, &names));
  assert_string_equal(names[0], "in");
  assert_string_equal(names[1], "fc1");
  assert_string_equal(names[2], "out");
  assert_null(names[3]);
  free(names);

  char *summary;
  OK(ml_train_model_get_summary(b.model, ML_TRAIN_SUMMARY_TENSOR, &summary));
  tu_assert_contains(summary, "fc1");
  tu_assert_contains(summary, "unit = 16");
  tu_assert_contains(summary, "weight");
  free(summary);

  /* save and load BIN: a second model gets the same weights bitwise */
  char *dir = tu_mkdtemp();
  char bin[512], ini[512];
  snprintf(bin, sizeof bin, "%s/w.bin", dir);
  snprintf(ini, sizeof ini, "%s/model.ini", dir);
  OK(ml_train_model_save(b.model, bin, ML_TRAIN_MODEL_FORMAT_BIN));
  built c;
  build(&c, 1);
  OK(ml_train_model_load(c.model, bin, ML_TRAIN_MODEL_FORMAT_BIN));
  ml_tensors_data_h w2;
  OK(ml_train_model_get_weight(c.model, "fc1", &w2, &info));
  OK(ml_tensors_info_destroy(info));
  void *p2;
  OK(ml_tensors_data_get_tensor_data(w2, 0, &p2, &s0));
  assert_memory_equal(p1, p2, s1);
  OK(ml_tensors_data_destroy(w2));
  OK(ml_train_model_destroy(c.model));

  /* INI with BIN: the configuration reads back into the same model */
  OK(ml_train_model_save(b.model, ini, ML_TRAIN_MODEL_FORMAT_INI_WITH_BIN));
  ml_train_model_h d;
  OK(ml_train_model_construct_with_conf(ini, &d));
  OK(ml_train_model_compile(d, NULL));
  ml_tensors_data_h w3;
  OK(ml_train_model_get_weight(d, "fc1", &w3, &info));
  OK(ml_tensors_info_destroy(info));
  void *p3;
  OK(ml_tensors_data_get_tensor_data(w3, 0, &p3, &s0));
  assert_memory_equal(p1, p3, s1);
  OK(ml_tensors_data_destroy(w3));
  OK(ml_train_model_get_summary(d, ML_TRAIN_SUMMARY_LAYER, &summary));
  tu_assert_contains(summary, "he_uniform");
  free(summary);
  OK(ml_train_model_destroy(d));
  /* INI alone: the configuration, weights initialized afresh */
  snprintf(ini, sizeof ini, "%s/config.ini", dir);
  OK(ml_train_model_save(b.model, ini, ML_TRAIN_MODEL_FORMAT_INI));
  OK(ml_train_model_construct_with_conf(ini, &d));
  OK(ml_train_model_compile(d, NULL));
  OK(ml_train_model_get_weight(d, "fc1", &w3, &info));
  OK(ml_tensors_info_get_tensor_dimension(info, 0, dim));
  assert_int_equal(dim[3], 16);
  OK(ml_tensors_info_destroy(info));
  OK(ml_tensors_data_get_tensor_data(w3, 0, &p3, &s0));
  assert_true(memcmp(p1, p3, s1) != 0);
  OK(ml_tensors_data_destroy(w3));
  OK(ml_train_model_destroy(d));
  OK(ml_tensors_data_destroy(w1));

  OK(ml_train_model_destroy(b.model));
  tu_rmdir(dir);
  free(dir);
  assert_no_handles();
}

/* memory_optimization=false keeps every tensor: outputs, derivatives and
 * gradients of the last step can be read. */
static void test_layer_tensors(void **state) {
  (void)state;
  built b;
  build(&b, 0);
  OK(ml_train_model_run(b.model, "epochs=1", NULL));
  ml_tensors_data_h t;
  ml_tensors_info_h info;
  ml_tensor_dimension dim;
  float *v;
  size_t n;
  OK(ml_train_ext_model_get_layer_tensor(b.model, "fc1", ML_TRAIN_EXT_TENSOR_OUTPUT, 0, &t,
                                         &info));
  OK(ml_tensors_info_get_tensor_dimension(info, 0, dim));
  assert_int_equal(dim[0], 8);
  assert_int_equal(dim[3], 16);
  OK(ml_tensors_data_get_tensor_data(t, 0, (void **)&v, &n));
  assert_int_equal(n, 8 * 16 * sizeof(float));
  OK(ml_tensors_data_destroy(t));
  OK(ml_tensors_info_destroy(info));
  OK(ml_train_ext_model_get_layer_tensor(b.model, "fc1", ML_TRAIN_EXT_TENSOR_GRADIENT, 1, &t,
                                         &info));
  OK(ml_tensors_data_get_tensor_data(t, 0, (void **)&v, &n));
  assert_int_equal(n, 16 * sizeof(float));
  double norm = 0;
  for (size_t i = 0; i < 16; i++)
    norm += fabs(v[i]);
  assert_true(norm > 0); /* a bias gradient after a step is not all zero */
  OK(ml_tensors_data_destroy(t));
  OK(ml_tensors_info_destroy(info));
  OK(ml_train_ext_model_get_layer_tensor(b.model, "out", ML_TRAIN_EXT_TENSOR_DERIVATIVE, 0, &t,
                                         &info));
  OK(ml_tensors_data_destroy(t));
  OK(ml_tensors_info_destroy(info));
  OK(ml_train_model_destroy(b.model));
  assert_no_handles();
}

/* The deprecated dataset functions still work. */
static int deprecated_cb(float **input, float **label, bool *last, void *ud) {
  static unsigned n;
  (void)ud;
  if (n++ == 32) {
    n = 0;
    *last = true;
    return 0;
  }
  *last = false;
  for (int i = 0; i < 8; i++)
    input[0][i] = (float)(n % 3);
  for (int k = 0; k < 3; k++)
    label[0][k] = (float)(k == (int)(n % 3));
  return 0;
}

/* input 1:1:8 and fc 3 softmax with sgd; *opt_out gets the optimizer */
static void small_model_opt(ml_train_model_h *model, ml_train_optimizer_h *opt_out) {
  ml_train_layer_h in, out;
  ml_train_optimizer_h opt;
  OK(ml_train_model_construct(model));
  OK(ml_train_layer_create(&in, ML_TRAIN_LAYER_TYPE_INPUT));
  OK(ml_train_layer_set_property(in, "input_shape=1:1:8", NULL));
  OK(ml_train_layer_create(&out, ML_TRAIN_LAYER_TYPE_FC));
  OK(ml_train_layer_set_property(out, "unit=3", "activation=softmax", NULL));
  OK(ml_train_model_add_layer(*model, in));
  OK(ml_train_model_add_layer(*model, out));
  OK(ml_train_optimizer_create(&opt, ML_TRAIN_OPTIMIZER_TYPE_SGD));
  OK(ml_train_model_set_optimizer(*model, opt));
  if (opt_out)
    *opt_out = opt;
}

static void small_model(ml_train_model_h *model) { small_model_opt(model, NULL); }

static void test_deprecated_dataset(void **state) {
  (void)state;
  ml_train_model_h model;
  small_model(&model);
  /* an unnamed layer is named after its type and index */
  ml_train_layer_h got;
  OK(ml_train_model_get_layer(model, "input0", &got));
  ml_train_dataset_h ds;
  OK(ml_train_dataset_create_with_generator(&ds, deprecated_cb, NULL, NULL));
  OK(ml_train_dataset_set_property(ds, "buffer_size=2", NULL));
  OK(ml_train_model_set_dataset(model, ds));
  OK(ml_train_model_compile(model, "loss=cross", "batch_size=4", NULL));
  OK(ml_train_model_run(model, "epochs=2", NULL));
  OK(ml_train_model_destroy(model));

  /* a raw file: per sample 8 inputs then 3 one-hot label floats */
  char *dir = tu_mkdtemp();
  char path[512];
  snprintf(path, sizeof path, "%s/train.dat", dir);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  for (int s = 0; s < 40; s++) {
    float rec[11];
    for (int i = 0; i < 8; i++)
      rec[i] = (float)(s % 3);
    for (int k = 0; k < 3; k++)
      rec[8 + k] = (float)(k == s % 3);
    assert_int_equal(fwrite(rec, sizeof rec, 1, f), 1);
  }
  fclose(f);
  small_model(&model);
  OK(ml_train_dataset_create_with_file(&ds, path, NULL, NULL));
  OK(ml_train_model_set_dataset(model, ds));
  OK(ml_train_model_compile_with_single_param(model, "loss=cross|batch_size=4"));
  OK(ml_train_model_run_with_single_param(model, "epochs=1"));
  OK(ml_train_model_destroy(model));
  /* the non-deprecated file source */
  small_model(&model);
  OK(ml_train_dataset_create(&ds));
  OK(ml_train_dataset_add_file(ds, ML_TRAIN_DATASET_MODE_TRAIN, path));
  OK(ml_train_dataset_set_property_for_mode_with_single_param(ds, ML_TRAIN_DATASET_MODE_TRAIN,
                                                              "buffer_size=3|shuffle=false"));
  OK(ml_train_model_set_dataset(model, ds));
  OK(ml_train_model_compile(model, "loss=cross", "batch_size=4", NULL));
  OK(ml_train_model_run(model, NULL));
  OK(ml_train_model_destroy(model));
  tu_rmdir(dir);
  free(dir);
  assert_no_handles();
}

/* Replacing the optimizer and the dataset gives the earlier ones back. */
static void test_replace_gives_back(void **state) {
  (void)state;
  ml_train_model_h model;
  ml_train_optimizer_h o1;
  small_model_opt(&model, &o1);
  ml_train_optimizer_h o2;
  OK(ml_train_optimizer_create(&o2, ML_TRAIN_OPTIMIZER_TYPE_ADAMW));
  OK(ml_train_optimizer_set_property_with_single_param(o2, "learning_rate=0.01|weight_decay=0.1"));
  ml_train_dataset_h d1, d2;
  gen g;
  gen_init(&g, 32, 5);
  OK(ml_train_dataset_create(&d1));
  OK(ml_train_dataset_add_generator(d1, ML_TRAIN_DATASET_MODE_TRAIN, gen_cb, &g));
  OK(ml_train_dataset_create(&d2));
  OK(ml_train_dataset_add_generator(d2, ML_TRAIN_DATASET_MODE_TRAIN, gen_cb, &g));
  OK(ml_train_model_set_dataset(model, d1));
  assert_int_equal(ml_train_dataset_destroy(d1), ML_ERROR_INVALID_PARAMETER);
  OK(ml_train_model_set_dataset(model, d2));
  OK(ml_train_dataset_destroy(d1)); /* given back */
  assert_int_equal(ml_train_optimizer_destroy(o1), ML_ERROR_INVALID_PARAMETER); /* owned */
  OK(ml_train_model_set_optimizer(model, o2));
  OK(ml_train_optimizer_destroy(o1)); /* given back */
  ml_train_optimizer_h o3;
  OK(ml_train_optimizer_create(&o3, ML_TRAIN_OPTIMIZER_TYPE_SGD));
  OK(ml_train_model_set_optimizer(model, o3));
  OK(ml_train_optimizer_destroy(o2)); /* given back */
  /* a scheduler replaced in an optimizer dies with the replacement */
  ml_train_lr_scheduler_h s1, s2;
  OK(ml_train_lr_scheduler_create(&s1, ML_TRAIN_LR_SCHEDULER_TYPE_CONSTANT));
  OK(ml_train_lr_scheduler_set_property_with_single_param(s1, "learning_rate=0.1"));
  OK(ml_train_lr_scheduler_create(&s2, ML_TRAIN_LR_SCHEDULER_TYPE_STEP));
  OK(ml_train_lr_scheduler_set_property(s2, "learning_rate=0.1,0.01", "iteration=10", NULL));
  OK(ml_train_optimizer_set_lr_scheduler(o3, s1));
  OK(ml_train_optimizer_set_lr_scheduler(o3, s2));
  assert_int_equal(ml_train_lr_scheduler_destroy(s1), ML_ERROR_INVALID_PARAMETER); /* gone */
  assert_int_equal(ml_train_lr_scheduler_destroy(s2), ML_ERROR_INVALID_PARAMETER); /* owned */
  OK(ml_train_model_compile(model, "loss=cross", "batch_size=4", NULL));
  OK(ml_train_model_run(model, "epochs=1", NULL));
  OK(ml_train_model_destroy(model));
  assert_no_handles();
}

/* ---- misuse: each case returns its exact code with a message ---- */

static void test_null_and_bad_arguments(void **state) {
  (void)state;
  ml_train_model_h model;
  ml_train_layer_h layer;
  ml_train_optimizer_h opt;
  ml_train_dataset_h ds;
  ml_train_lr_scheduler_h lrs;
  const int INVAL = ML_ERROR_INVALID_PARAMETER;

  assert_int_equal(ml_train_model_construct(NULL), INVAL);
  assert_error("model is NULL");
  assert_int_equal(ml_train_model_construct_with_conf(NULL, &model), INVAL);
  assert_error("model_conf");
  assert_int_equal(ml_train_model_construct_with_conf("/nonexistent/x.ini", &model), INVAL);
  assert_error("x.ini");
  assert_int_equal(ml_train_model_destroy(NULL), INVAL);
  assert_error("NULL");
  assert_int_equal(ml_train_model_compile(NULL, NULL), INVAL);
  assert_int_equal(ml_train_model_run(NULL, NULL), INVAL);
  assert_int_equal(ml_train_model_add_layer(NULL, NULL), INVAL);
  assert_int_equal(ml_train_model_set_optimizer(NULL, NULL), INVAL);
  assert_int_equal(ml_train_model_set_dataset(NULL, NULL), INVAL);
  assert_int_equal(ml_train_model_get_summary(NULL, ML_TRAIN_SUMMARY_MODEL, NULL), INVAL);
  assert_int_equal(ml_train_layer_create(NULL, ML_TRAIN_LAYER_TYPE_FC), INVAL);
  assert_int_equal(ml_train_layer_create(&layer, (ml_train_layer_type_e)12345), INVAL);
  assert_error("12345");
  assert_int_equal(ml_train_layer_create(&layer, ML_TRAIN_LAYER_TYPE_LSTM),
                   ML_ERROR_NOT_SUPPORTED);
  assert_error("not implemented");
  assert_int_equal(ml_train_layer_destroy(NULL), INVAL);
  assert_int_equal(ml_train_layer_set_property(NULL, "unit=1", NULL), INVAL);
  assert_int_equal(ml_train_optimizer_create(&opt, ML_TRAIN_OPTIMIZER_TYPE_UNKNOWN), INVAL);
  assert_error("not an optimizer type");
  assert_int_equal(ml_train_optimizer_create(NULL, ML_TRAIN_OPTIMIZER_TYPE_SGD), INVAL);
  assert_int_equal(ml_train_lr_scheduler_create(&lrs, ML_TRAIN_LR_SCHEDULER_TYPE_UNKNOWN),
                   INVAL);
  assert_int_equal(ml_train_dataset_create(NULL), INVAL);
  assert_int_equal(ml_train_dataset_create_with_generator(&ds, NULL, NULL, NULL), INVAL);
  assert_error("train_cb");
  assert_int_equal(ml_train_dataset_create_with_file(&ds, NULL, NULL, NULL), INVAL);

  /* bad properties on live handles */
  OK(ml_train_layer_create(&layer, ML_TRAIN_LAYER_TYPE_FC));
  assert_int_equal(ml_train_layer_set_property(layer, "unit=abc", NULL), INVAL);
  assert_error("unit");
  assert_int_equal(ml_train_layer_set_property(layer, "colour=blue", NULL), INVAL);
  assert_error("colour");
  assert_int_equal(ml_train_layer_set_property(layer, "no equals sign", NULL), INVAL);
  assert_error("not key=value");
  assert_int_equal(ml_train_layer_set_property_with_single_param(layer, NULL), INVAL);
  OK(ml_train_layer_set_property(layer, "unit=4", NULL));
  OK(ml_train_optimizer_create(&opt, ML_TRAIN_OPTIMIZER_TYPE_ADAM));
  assert_int_equal(ml_train_optimizer_set_property(opt, "beta1=2", NULL), INVAL);
  assert_error("beta1");
  assert_int_equal(ml_train_optimizer_set_property(opt, "momentum=0.9", NULL), INVAL);
  assert_error("momentum");
  OK(ml_train_lr_scheduler_create(&lrs, ML_TRAIN_LR_SCHEDULER_TYPE_COSINE));
  assert_int_equal(ml_train_lr_scheduler_set_property(lrs, "decay_rate=x", NULL), INVAL);
  /* a scheduler missing keys is refused when set */
  assert_int_equal(ml_train_optimizer_set_lr_scheduler(opt, lrs), INVAL);
  assert_error("max_learning_rate");
  assert_int_equal(ml_train_optimizer_set_lr_scheduler(opt, NULL), INVAL);
  OK(ml_train_dataset_create(&ds));
  assert_int_equal(ml_train_dataset_add_generator(ds, ML_TRAIN_DATASET_MODE_TRAIN, NULL, NULL),
                   INVAL);
  assert_int_equal(ml_train_dataset_add_generator(ds, (ml_train_dataset_mode_e)7, gen_cb, NULL),
                   INVAL);
  assert_error("mode 7");
  assert_int_equal(ml_train_dataset_add_file(ds, ML_TRAIN_DATASET_MODE_TRAIN, "/nonexistent.dat"),
                   INVAL);
  assert_error("/nonexistent.dat");
  assert_int_equal(
      ml_train_dataset_set_property_for_mode(ds, ML_TRAIN_DATASET_MODE_VALID, "buffer_size=2",
                                             NULL),
      INVAL);
  assert_error("no source");

  /* a handle of the wrong kind */
  assert_int_equal(ml_train_layer_destroy(opt), INVAL);
  assert_error("optimizer, not a layer");
  assert_int_equal(ml_train_model_destroy(layer), INVAL);
  assert_int_equal(ml_train_dataset_destroy(lrs), INVAL);

  OK(ml_train_model_construct(&model));
  assert_int_equal(ml_train_model_get_summary(model, (ml_train_summary_type_e)9, NULL), INVAL);
  assert_int_equal(ml_train_model_add_layer(model, opt), INVAL);
  assert_int_equal(ml_train_model_set_optimizer(model, layer), INVAL);
  assert_int_equal(ml_train_model_set_dataset(model, NULL), INVAL);
  assert_int_equal(ml_train_model_get_layer(model, NULL, &layer), INVAL);
  assert_int_equal(ml_train_model_get_layer(model, "nothing", &layer), INVAL);
  assert_error("no layer 'nothing'");
  assert_int_equal(ml_train_model_compile(model, "loss=hinge", NULL), INVAL);
  assert_error("hinge");
  assert_int_equal(ml_train_model_save(model, NULL, ML_TRAIN_MODEL_FORMAT_BIN), INVAL);
  assert_int_equal(ml_train_model_save(model, "x.bin", ML_TRAIN_MODEL_FORMAT_FLATBUFFER),
                   ML_ERROR_NOT_SUPPORTED);
  assert_int_equal(ml_train_model_load(model, "x.ini", ML_TRAIN_MODEL_FORMAT_INI),
                   ML_ERROR_NOT_SUPPORTED);
  OK(ml_train_model_destroy(model));
  OK(ml_train_layer_destroy(layer));
  OK(ml_train_optimizer_destroy(opt));
  OK(ml_train_lr_scheduler_destroy(lrs));
  OK(ml_train_dataset_destroy(ds));
  assert_no_handles();
}

static void test_order_and_ownership(void **state) {
  (void)state;
  const int INVAL = ML_ERROR_INVALID_PARAMETER;
  ml_train_model_h model;
  small_model(&model);
  ml_tensors_info_h info;
  ml_tensors_data_h data;
  /* calls that need a compiled model */
  assert_int_equal(ml_train_model_run(model, NULL), INVAL);
  assert_error("compile the model first");
  assert_int_equal(ml_train_model_get_input_tensors_info(model, &info), INVAL);
  assert_int_equal(ml_train_model_get_weight(model, "fc1", &data, &info), INVAL);
  assert_int_equal(ml_train_model_save(model, "x.bin", ML_TRAIN_MODEL_FORMAT_BIN), INVAL);
  assert_int_equal(ml_train_ext_model_infer(model, NULL, &data), INVAL);
  ml_train_ext_memory_report_s r;
  assert_int_equal(ml_train_ext_model_get_memory_report(model, ML_TRAIN_EXT_MODE_TRAIN, &r),
                   INVAL);
  /* names must stay unique */
  ml_train_layer_h dup, in0;
  OK(ml_train_layer_create(&dup, ML_TRAIN_LAYER_TYPE_FC));
  OK(ml_train_layer_set_property(dup, "name=input0", "unit=2", NULL));
  assert_int_equal(ml_train_model_add_layer(model, dup), INVAL);
  assert_error("input0");
  OK(ml_train_model_get_layer(model, "input0", &in0));
  assert_int_equal(ml_train_layer_set_property(in0, "name=fully_connected1", NULL), INVAL);
  assert_error("already has a layer");
  /* owned objects cannot be destroyed by the caller or given twice */
  assert_int_equal(ml_train_layer_destroy(in0), INVAL);
  assert_error("belongs to a model");
  ml_train_model_h other;
  OK(ml_train_model_construct(&other));
  assert_int_equal(ml_train_model_add_layer(other, in0), INVAL);
  assert_error("already belongs");
  OK(ml_train_model_destroy(other));

  gen g;
  gen_init(&g, 32, 9);
  ml_train_dataset_h ds;
  OK(ml_train_dataset_create(&ds));
  OK(ml_train_dataset_add_generator(ds, ML_TRAIN_DATASET_MODE_TRAIN, gen_cb, &g));
  OK(ml_train_model_set_dataset(model, ds));
  OK(ml_train_model_compile(model, "loss=cross", "batch_size=4", NULL));
  /* compiling twice, and changing a compiled model */
  assert_int_equal(ml_train_model_compile(model, NULL), INVAL);
  assert_error("already compiled");
  assert_int_equal(ml_train_model_add_layer(model, dup), ML_ERROR_NOT_SUPPORTED);
  assert_int_equal(ml_train_layer_set_property(in0, "input_shape=1:1:9", NULL),
                   ML_ERROR_NOT_SUPPORTED);
  assert_error("compiled");
  ml_train_optimizer_h o;
  OK(ml_train_optimizer_create(&o, ML_TRAIN_OPTIMIZER_TYPE_SGD));
  assert_int_equal(ml_train_model_set_optimizer(model, o), ML_ERROR_NOT_SUPPORTED);
  assert_int_equal(ml_train_dataset_add_generator(ds, ML_TRAIN_DATASET_MODE_VALID, gen_cb, &g),
                   ML_ERROR_NOT_SUPPORTED);
  /* run accepts epochs and save_path, not what changes the graph */
  assert_int_equal(ml_train_model_run(model, "batch_size=8", NULL), INVAL);
  assert_error("batch_size");
  OK(ml_train_model_run(model, "epochs=1", "batch_size=4", NULL));
  /* layer tensors need memory_optimization=false */
  assert_int_equal(ml_train_ext_model_get_layer_tensor(model, "input0",
                                                       ML_TRAIN_EXT_TENSOR_OUTPUT, 0, &data,
                                                       &info),
                   ML_ERROR_NOT_SUPPORTED);
  /* inference input of the wrong size */
  ml_tensors_info_h bad;
  ml_tensor_dimension dim = {3, 1, 1, 8};
  OK(ml_tensors_info_create(&bad));
  OK(ml_tensors_info_set_count(bad, 1));
  OK(ml_tensors_info_set_tensor_type(bad, 0, ML_TENSOR_TYPE_FLOAT32));
  OK(ml_tensors_info_set_tensor_dimension(bad, 0, dim));
  OK(ml_tensors_data_create(bad, &data));
  ml_tensors_data_h out;
  assert_int_equal(ml_train_ext_model_infer(model, data, &out), INVAL);
  assert_error("batch_size");
  OK(ml_tensors_data_destroy(data));
  OK(ml_tensors_info_destroy(bad));
  /* a truncated weight file is refused and changes nothing */
  char *dir = tu_mkdtemp();
  char path[512];
  snprintf(path, sizeof path, "%s/short.bin", dir);
  FILE *f = fopen(path, "wb");
  float few[3] = {1, 2, 3};
  fwrite(few, sizeof few, 1, f);
  fclose(f);
  assert_int_equal(ml_train_model_load(model, path, ML_TRAIN_MODEL_FORMAT_BIN), INVAL);
  assert_error("short.bin");
  /* saving into a folder that does not exist leaves nothing behind */
  snprintf(path, sizeof path, "%s/no/such/dir/w.bin", dir);
  assert_int_equal(ml_train_model_save(model, path, ML_TRAIN_MODEL_FORMAT_BIN),
                   ML_ERROR_IO_ERROR);
  tu_rmdir(dir);
  free(dir);

  OK(ml_train_model_destroy(model));
  /* a destroyed handle is refused, not dereferenced */
  assert_int_equal(ml_train_model_destroy(model), INVAL);
  assert_error("not a live handle");
  assert_int_equal(ml_train_model_run(model, NULL), INVAL);
  assert_int_equal(ml_train_layer_set_property(in0, "unit=3", NULL), INVAL);
  assert_int_equal(ml_train_dataset_destroy(ds), INVAL);
  OK(ml_train_layer_destroy(dup));
  OK(ml_train_optimizer_destroy(o));
  assert_int_equal(ml_train_optimizer_destroy(o), INVAL);
  /* a pointer that was never a handle */
  int local;
  assert_int_equal(ml_train_model_destroy(&local), INVAL);
  assert_no_handles();
}

static void run_with_gen(gen *g, int expect) {
  ml_train_model_h model;
  small_model(&model);
  ml_train_dataset_h ds;
  OK(ml_train_dataset_create(&ds));
  OK(ml_train_dataset_add_generator(ds, ML_TRAIN_DATASET_MODE_TRAIN, gen_cb, g));
  OK(ml_train_model_set_dataset(model, ds));
  OK(ml_train_model_compile(model, "loss=cross", "batch_size=4", NULL));
  assert_int_equal(ml_train_model_run(model, "epochs=3", NULL), expect);
  OK(ml_train_model_destroy(model));
}

static void test_generator_errors(void **state) {
  (void)state;
  gen g;
  /* the callback's own error code comes back from run */
  gen_init(&g, 64, 4);
  g.fail_at = 10;
  g.fail_code = ML_ERROR_IO_ERROR;
  run_with_gen(&g, ML_ERROR_IO_ERROR);
  assert_error("callback returned");
  gen_init(&g, 64, 4);
  g.fail_at = 3;
  g.fail_code = -77;
  run_with_gen(&g, -77);
  /* a callback that stops setting last is caught, not trained forever */
  gen_init(&g, 16, 4);
  g.never_last_after_first = 1;
  run_with_gen(&g, ML_ERROR_INVALID_PARAMETER);
  assert_error("without setting *last");
  assert_no_handles();
}

/* A call on a model from inside its generator callback (during run) is
 * refused instead of deadlocking. */
typedef struct reentry {
  gen g;
  ml_train_model_h model;
  int code;
} reentry;

static int reentry_cb(float **input, float **label, bool *last, void *ud) {
  reentry *r = ud;
  char *s = NULL;
  r->code = ml_train_model_get_summary(r->model, ML_TRAIN_SUMMARY_MODEL, &s);
  free(s);
  return gen_cb(input, label, last, &r->g);
}

static void test_reentry_refused(void **state) {
  (void)state;
  reentry r;
  gen_init(&r.g, 16, 6);
  small_model(&r.model);
  ml_train_dataset_h ds;
  OK(ml_train_dataset_create(&ds));
  OK(ml_train_dataset_add_generator(ds, ML_TRAIN_DATASET_MODE_TRAIN, reentry_cb, &r));
  OK(ml_train_model_set_dataset(r.model, ds));
  OK(ml_train_model_compile(r.model, "loss=cross", "batch_size=4", NULL));
  OK(ml_train_model_run(r.model, "epochs=1", NULL));
  assert_int_equal(r.code, ML_ERROR_TRY_AGAIN);
  OK(ml_train_model_destroy(r.model));
  assert_no_handles();
}

/* Two threads calling on one model are serialized: every call succeeds and
 * nothing races (the TSan-free check is that ASan and the results hold). */
typedef struct hammer {
  ml_train_model_h model;
  int failures;
} hammer;

static void *hammer_thread(void *arg) {
  hammer *h = arg;
  for (int i = 0; i < 200; i++) {
    char *s = NULL;
    ml_train_layer_h l;
    if (ml_train_model_get_summary(h->model, ML_TRAIN_SUMMARY_LAYER, &s) != ML_ERROR_NONE)
      h->failures++;
    free(s);
    if (ml_train_model_get_layer(h->model, "input0", &l) != ML_ERROR_NONE)
      h->failures++;
    else if (ml_train_layer_set_property(l, "normalization=false", NULL) != ML_ERROR_NONE)
      h->failures++;
  }
  return NULL;
}

static void test_threads_serialized(void **state) {
  (void)state;
  hammer h = {0};
  small_model(&h.model);
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&t[i], NULL, hammer_thread, &h), 0);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  assert_int_equal(h.failures, 0);
  OK(ml_train_model_destroy(h.model));
  assert_no_handles();
}

/* Allocation failure anywhere in building a model gives
 * ML_ERROR_OUT_OF_MEMORY (or a clean error) and leaks nothing. */
static void test_allocation_failures(void **state) {
  (void)state;
  for (long n = 0; n < 400; n++) {
    nnt_alloc_fail_after(n);
    ml_train_model_h model = NULL;
    ml_train_layer_h in = NULL, fc = NULL;
    int rc = ml_train_model_construct(&model);
    if (!rc)
      rc = ml_train_layer_create(&in, ML_TRAIN_LAYER_TYPE_INPUT);
    if (!rc)
      rc = ml_train_layer_set_property(in, "input_shape=1:1:8", NULL);
    if (!rc) {
      rc = ml_train_model_add_layer(model, in);
      if (!rc)
        in = NULL;
    }
    if (!rc)
      rc = ml_train_layer_create(&fc, ML_TRAIN_LAYER_TYPE_FC);
    if (!rc)
      rc = ml_train_layer_set_property(fc, "unit=3", NULL);
    if (!rc) {
      rc = ml_train_model_add_layer(model, fc);
      if (!rc)
        fc = NULL;
    }
    if (!rc)
      rc = ml_train_model_compile(model, "loss=mse", "batch_size=2", NULL);
    nnt_alloc_fail_after(-1);
    if (rc && rc != ML_ERROR_OUT_OF_MEMORY)
      fail_msg("allocation %ld: code %d (%s)", n, rc, ml_error());
    if (in)
      OK(ml_train_layer_destroy(in));
    if (fc)
      OK(ml_train_layer_destroy(fc));
    if (model)
      OK(ml_train_model_destroy(model));
    assert_no_handles();
    if (!rc)
      return; /* every allocation of the sequence was failed once */
  }
  fail_msg("the sequence never completed");
}

/* The INI loader and the API build the same model: an Applications INI
 * through construct_with_conf compiles and names its layers. */
static void test_construct_with_conf(void **state) {
  (void)state;
  ml_train_model_h model;
  char path[1024];
  snprintf(path, sizeof path, "%s/Applications/FashionMNIST/mlp.ini", NNT_SOURCE_DIR);
  OK(ml_train_model_construct_with_conf(path, &model));
  char *summary;
  OK(ml_train_model_get_summary(model, ML_TRAIN_SUMMARY_MODEL, &summary));
  tu_assert_contains(summary, "not compiled");
  free(summary);
  ml_train_layer_h l;
  char **names;
  OK(ml_train_ext_model_get_layer_names(model, &names));
  assert_non_null(names[0]);
  OK(ml_train_model_get_layer(model, names[0], &l));
  assert_int_equal(ml_train_layer_destroy(l), ML_ERROR_INVALID_PARAMETER);
  OK(ml_train_ext_model_set_planner(model, "pool"));
  assert_int_equal(ml_train_ext_model_set_planner(model, "tetris"), ML_ERROR_INVALID_PARAMETER);
  assert_error("tetris");
  OK(ml_train_model_compile(model, NULL));
  ml_train_ext_memory_report_s r;
  OK(ml_train_ext_model_get_memory_report(model, ML_TRAIN_EXT_MODE_INFER, &r));
  assert_true(r.arena_bytes > 0);
  free(names);
  OK(ml_train_model_destroy(model));
  assert_no_handles();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_train_and_inspect),
      cmocka_unit_test(test_layer_tensors),
      cmocka_unit_test(test_deprecated_dataset),
      cmocka_unit_test(test_replace_gives_back),
      cmocka_unit_test(test_null_and_bad_arguments),
      cmocka_unit_test(test_order_and_ownership),
      cmocka_unit_test(test_generator_errors),
      cmocka_unit_test(test_reentry_refused),
      cmocka_unit_test(test_threads_serialized),
      cmocka_unit_test(test_allocation_failures),
      cmocka_unit_test(test_construct_with_conf),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
