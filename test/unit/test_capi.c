/* The Tizen ML Training C API (nntrainer.h) and our extension: the success
 * path of every function (misuse is in test_capi_misuse.c). Leaks: every
 * test ends with no live handle (nnt_h_count), and the ASan build checks
 * memory. */
#include "test_util.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* the deprecated dataset functions are tested on purpose */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include "capi_harness.h"
#include "api/src/api_internal.h"

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
  /* evaluation: inference's tensors, the labels (batch 8 x 3 classes) and
   * the loss value; neither has a gradient or a derivative */
  ml_train_ext_memory_report_s re;
  OK(ml_train_ext_model_get_memory_report(b.model, ML_TRAIN_EXT_MODE_EVAL, &re));
  assert_int_equal(re.input_bytes, ri.input_bytes + 8 * 3 * sizeof(float));
  assert_int_equal(re.scratch_bytes, ri.scratch_bytes + sizeof(float));
  assert_int_equal(re.activation_bytes, ri.activation_bytes);
  assert_true(ri.arena_bytes < re.arena_bytes && re.arena_bytes < r.arena_bytes);
  assert_int_equal(re.optimizer_bytes + re.gradient_bytes + re.derivative_bytes, 0);
  assert_int_equal(ri.gradient_bytes + ri.derivative_bytes, 0);
  assert_int_equal(ml_train_ext_model_get_memory_report(b.model, ML_TRAIN_EXT_MODE_EVAL + 1, &re),
                   ML_ERROR_INVALID_PARAMETER);
  assert_error("mode 3 is not a mode");

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
  n++;
  for (int i = 0; i < 8; i++)
    input[0][i] = (float)(n % 3);
  for (int k = 0; k < 3; k++)
    label[0][k] = (float)(k == (int)(n % 3));
  *last = n == 32; /* with the 32nd sample */
  if (*last)
    n = 0;
  return 0;
}

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
      cmocka_unit_test(test_construct_with_conf),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
