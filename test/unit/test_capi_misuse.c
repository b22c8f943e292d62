/* The C API misused: NULL and bad arguments, wrong order and ownership,
 * failing and endless generators, calls from inside a run, two threads, and
 * every allocation failed in turn; each case with its exact code and an
 * ml_error() message, and no handle left behind. */
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
  assert_int_equal(ml_train_layer_create(&layer, ML_TRAIN_LAYER_TYPE_CENTROID_KNN),
                   ML_ERROR_NOT_SUPPORTED);
  assert_error("not implemented");
  /* the recurrent types NNTrainer numbers 12 and 20 */
  assert_int_equal(ml_train_layer_create(&layer, ML_TRAIN_LAYER_TYPE_LSTM), ML_ERROR_NONE);
  assert_int_equal(ml_train_layer_set_property(layer, "unit=3", "bidirectional=true", NULL),
                   ML_ERROR_NONE);
  assert_int_equal(ml_train_layer_set_property(layer, "dropout_rate=2", NULL), INVAL);
  assert_error("dropout_rate");
  assert_int_equal(ml_train_layer_destroy(layer), ML_ERROR_NONE);
  assert_int_equal(ml_train_layer_create(&layer, ML_TRAIN_LAYER_TYPE_LSTMCELL), ML_ERROR_NONE);
  assert_int_equal(ml_train_layer_set_property(layer, "unit=3", "integrate_bias=true", NULL),
                   ML_ERROR_NONE);
  assert_int_equal(ml_train_layer_destroy(layer), ML_ERROR_NONE);
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
  /* a folder or a device is no data file: refused here, not at the run */
  assert_int_equal(ml_train_dataset_add_file(ds, ML_TRAIN_DATASET_MODE_TRAIN, "/tmp"), INVAL);
  assert_error("'/tmp' is a directory");
  assert_int_equal(ml_train_dataset_add_file(ds, ML_TRAIN_DATASET_MODE_TRAIN, "/dev/zero"), INVAL);
  assert_error("/dev/zero");
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
  /* run accepts epochs, save_path and batch_size, not what changes the graph */
  assert_int_equal(ml_train_model_run(model, "loss=mse", NULL), INVAL);
  assert_error("loss");
  assert_int_equal(ml_train_model_run(model, "batch_size=0", NULL), INVAL);
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
  /* any code, even one equal to an internal code (-1001 was the end of
   * data, -1000 an unknown key) or positive, comes back as it is, with
   * the sample named: only last ends an epoch */
  const int codes[] = {-1001, -1000, 1, -22, -34, -125, ML_ERROR_UNKNOWN};
  for (size_t i = 0; i < NNT_ARRAY_LEN(codes); i++) {
    gen_init(&g, 64, 4);
    g.fail_at = 5; /* after a batch of 4 trained */
    g.fail_code = codes[i];
    run_with_gen(&g, codes[i]);
    char want[64];
    snprintf(want, sizeof want, "callback returned %d at sample 5", codes[i]);
    assert_error(want);
  }
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_null_and_bad_arguments),
      cmocka_unit_test(test_order_and_ownership),
      cmocka_unit_test(test_generator_errors),
      cmocka_unit_test(test_reentry_refused),
      cmocka_unit_test(test_threads_serialized),
      cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
