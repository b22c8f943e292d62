/* What NNTrainer's own C API test suite (docs/capi.md)
 * relies on beyond Tizen's header: the last run's metrics through
 * ml_train_model_get_summary (codes 101-103), the "user_data"
 * pseudo-property of generator datasets, and batch_size given to
 * ml_train_model_run after compile (the graph re-finalized and the memory
 * re-planned, the weights and the optimizer state kept). */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the deprecated dataset functions are what NNTrainer's tests call */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include "capi_harness.h"
#include "api/src/capi.h"
#include "nntrainer/model_impl.h"

#define INVAL ML_ERROR_INVALID_PARAMETER

typedef struct epoch_log {
  unsigned epochs;
  size_t batches;
  float first_loss, train_loss, valid_loss, valid_acc;
} epoch_log;

static void on_epoch(const ml_train_ext_progress_s *p, void *ud) {
  epoch_log *l = ud;
  if (!p->epoch_done)
    return;
  if (!l->epochs)
    l->first_loss = p->loss;
  l->epochs++;
  l->batches = p->batch;
  l->train_loss = p->loss;
  l->valid_loss = p->has_valid ? p->valid_loss : NAN;
  l->valid_acc = p->has_valid ? p->valid_accuracy : NAN;
}

/* The summary for a metric code: one number and a newline. */
static float metric(ml_train_model_h model, ml_train_summary_type_e code) {
  char *s = NULL;
  OK(ml_train_model_get_summary(model, code, &s));
  assert_non_null(s);
  size_t n = strlen(s);
  assert_true(n >= 2);
  assert_int_equal(s[n - 1], '\n');
  char *end;
  float v = strtof(s, &end);
  assert_ptr_equal(end, s + n - 1);
  free(s);
  return v;
}

static void assert_close(float got, float want) {
  /* printed with six significant digits */
  if (!(fabsf(got - want) <= 1e-5f * fmaxf(1.0f, fabsf(want))))
    fail_msg("got %.9g, want %.9g", got, want);
}

static void test_summary_metrics(void **state) {
  (void)state;
  /* NNTrainer's values for the codes */
  assert_int_equal(ML_TRAIN_EXT_SUMMARY_TRAIN_LOSS, 101);
  assert_int_equal(ML_TRAIN_EXT_SUMMARY_VALID_LOSS, 102);
  assert_int_equal(ML_TRAIN_EXT_SUMMARY_VALID_ACCURACY, 103);
  built b;
  build(&b, 1);
  /* before any run: 0, as in NNTrainer */
  assert_true(metric(b.model, ML_TRAIN_EXT_SUMMARY_TRAIN_LOSS) == 0.0f);
  assert_true(metric(b.model, ML_TRAIN_EXT_SUMMARY_VALID_ACCURACY) == 0.0f);

  epoch_log log = {0};
  OK(ml_train_ext_model_run_with_progress(b.model, on_epoch, &log, "epochs=3", NULL));
  assert_int_equal(log.epochs, 3);
  assert_true(log.train_loss > 0 && log.valid_loss > 0 && log.valid_acc > 0.3f);
  /* the last epoch's values; accuracy in percent */
  assert_close(metric(b.model, ML_TRAIN_EXT_SUMMARY_TRAIN_LOSS), log.train_loss);
  assert_close(metric(b.model, ML_TRAIN_EXT_SUMMARY_VALID_LOSS), log.valid_loss);
  assert_close(metric(b.model, ML_TRAIN_EXT_SUMMARY_VALID_ACCURACY), 100.0f * log.valid_acc);

  /* a plain run records them too */
  float before = metric(b.model, ML_TRAIN_EXT_SUMMARY_TRAIN_LOSS);
  OK(ml_train_model_run(b.model, "epochs=1", NULL));
  float after = metric(b.model, ML_TRAIN_EXT_SUMMARY_TRAIN_LOSS);
  assert_true(after > 0 && after != before);

  /* other codes are not summary types */
  char *s = NULL;
  EXPECT_FAIL(ml_train_model_get_summary(b.model, (ml_train_summary_type_e)3, &s), INVAL,
              "verbosity 3");
  EXPECT_FAIL(ml_train_model_get_summary(b.model, (ml_train_summary_type_e)100, &s), INVAL,
              "verbosity 100");
  EXPECT_FAIL(ml_train_model_get_summary(b.model, (ml_train_summary_type_e)104, &s), INVAL,
              "verbosity 104");
  EXPECT_FAIL(ml_train_model_get_summary(b.model, ML_TRAIN_EXT_SUMMARY_TRAIN_LOSS, NULL), INVAL,
              "summary is NULL");
  assert_null(s);
  OK(ml_train_model_destroy(b.model));
  assert_no_handles();
}

/* input 1:1:8 and fc 3 softmax with sgd, the dataset ds, compiled with
 * batch 8, trained for epochs. */
static void train_small(ml_train_dataset_h ds, unsigned epochs) {
  ml_train_model_h model;
  small_model(&model);
  OK(ml_train_model_set_dataset(model, ds));
  OK(ml_train_model_compile(model, "loss=cross", "batch_size=8", NULL));
  char prop[32];
  snprintf(prop, sizeof prop, "epochs=%u", epochs);
  OK(ml_train_model_run(model, prop, NULL));
  OK(ml_train_model_destroy(model));
}

static void test_user_data(void **state) {
  (void)state;
  gen ga, gb, gc;
  gen_init(&ga, 32, 1);
  gen_init(&gb, 16, 2);
  gen_init(&gc, 24, 3);
  /* the deprecated constructor gives its generators no user data ... */
  ml_train_dataset_h ds;
  OK(ml_train_dataset_create_with_generator(&ds, gen_cb, gen_cb, NULL));
  /* ... which the pseudo-property sets: the key, then the pointer */
  OK(ml_train_dataset_set_property_for_mode(ds, ML_TRAIN_DATASET_MODE_TRAIN, "user_data", &ga,
                                            NULL));
  OK(ml_train_dataset_set_property_for_mode(ds, ML_TRAIN_DATASET_MODE_VALID, " User_Data ", &gb,
                                            "buffer_size=2", NULL));
  /* misuse: a value in the string, no pointer, a mode without a source */
  EXPECT_FAIL(ml_train_dataset_set_property(ds, "user_data=5", NULL), INVAL, "next argument");
  EXPECT_FAIL(ml_train_dataset_set_property(ds, "buffer_size=2", "user_data", NULL), INVAL,
              "pointer must follow");
  EXPECT_FAIL(ml_train_dataset_set_property_for_mode_with_single_param(
                  ds, ML_TRAIN_DATASET_MODE_TRAIN, "user_data"),
              INVAL, "pointer must follow");
  EXPECT_FAIL(ml_train_dataset_set_property_for_mode(ds, ML_TRAIN_DATASET_MODE_TEST, "user_data",
                                                     &gc, NULL),
              INVAL, "no source for mode 2");
  train_small(ds, 2);
  /* each generator saw its own pointer: two epochs each */
  assert_int_equal(ga.epochs_done, 2);
  assert_int_equal(gb.epochs_done, 2);
  assert_int_equal(gc.epochs_done, 0);

  /* for every mode at once: train and valid share gc */
  OK(ml_train_dataset_create(&ds));
  OK(ml_train_dataset_add_generator(ds, ML_TRAIN_DATASET_MODE_TRAIN, gen_cb, &ga));
  OK(ml_train_dataset_add_generator(ds, ML_TRAIN_DATASET_MODE_VALID, gen_cb, &gb));
  OK(ml_train_dataset_set_property(ds, "user_data", &gc, NULL));
  train_small(ds, 1);
  assert_int_equal(ga.epochs_done, 2);
  assert_int_equal(gb.epochs_done, 2);
  assert_int_equal(gc.epochs_done, 2);

  /* a file source has no user data */
  char *dir = tu_mkdtemp();
  char path[4096];
  snprintf(path, sizeof path, "%s/train.dat", dir);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  float rec[11] = {0};
  assert_int_equal(fwrite(rec, sizeof rec, 1, f), 1);
  assert_int_equal(fclose(f), 0);
  OK(ml_train_dataset_create_with_file(&ds, path, NULL, NULL));
  EXPECT_FAIL(ml_train_dataset_set_property(ds, "user_data", &gc, NULL), INVAL,
              "user_data is for generator sources");
  OK(ml_train_dataset_destroy(ds));
  tu_rmdir(dir);
  free(dir);
  assert_no_handles();
}

static size_t arena_bytes(ml_train_model_h model) {
  ml_train_ext_memory_report_s r;
  OK(ml_train_ext_model_get_memory_report(model, ML_TRAIN_EXT_MODE_TRAIN, &r));
  return r.arena_bytes;
}

static unsigned input_batch(ml_train_model_h model) {
  ml_tensors_info_h info;
  ml_tensor_dimension dim;
  OK(ml_train_model_get_input_tensors_info(model, &info));
  OK(ml_tensors_info_get_tensor_dimension(info, 0, dim));
  OK(ml_tensors_info_destroy(info));
  return dim[0];
}

/* One inference on zeros, of the model's input shape. */
static void infer_once(ml_train_model_h model) {
  ml_tensors_info_h info;
  ml_tensors_data_h in, out;
  OK(ml_train_model_get_input_tensors_info(model, &info));
  OK(ml_tensors_data_create(info, &in));
  OK(ml_train_ext_model_infer(model, in, &out));
  OK(ml_tensors_data_destroy(out));
  OK(ml_tensors_data_destroy(in));
  OK(ml_tensors_info_destroy(info));
}

static void test_batch_size_at_run(void **state) {
  (void)state;
  built b;
  build(&b, 1); /* compiled with batch_size=8 */
  size_t arena8 = arena_bytes(b.model);
  epoch_log first = {0};
  OK(ml_train_ext_model_run_with_progress(b.model, on_epoch, &first, "epochs=4", NULL));
  assert_int_equal(first.batches, 256 / 8);

  /* the core keeps the weights and the optimizer state when the batch
   * changes, and drops both plans */
  capi_model *cm = b.model;
  nnt_model *m = cm->m;
  size_t wn = m->wpool_floats, on = nnt_model_opt_bytes(m, m->opt_slots) / sizeof(float);
  assert_true(on > 0);
  float *w = malloc(wn * sizeof *w), *o = malloc(on * sizeof *o);
  assert_non_null(w);
  assert_non_null(o);
  memcpy(w, m->wpool, wn * sizeof *w);
  memcpy(o, m->opt_pool, on * sizeof *o);
  const float *wpool = m->wpool, *opt_pool = m->opt_pool;
  infer_once(b.model); /* an inference plan for batch 8 */
  assert_true(m->mgr[NNT_MODE_INFER].planned);
  nnt_err e;
  nnt_err_clear(&e);
  assert_int_equal(nnt_model_set_property(m, "batch_size", "4", &e), NNT_OK);
  assert_ptr_equal(m->wpool, wpool);
  assert_ptr_equal(m->opt_pool, opt_pool);
  assert_memory_equal(m->wpool, w, wn * sizeof *w);
  assert_memory_equal(m->opt_pool, o, on * sizeof *o);
  assert_false(m->mgr[NNT_MODE_TRAIN].planned);
  assert_false(m->mgr[NNT_MODE_INFER].planned);
  free(w);
  free(o);
  assert_int_equal(input_batch(b.model), 4);

  /* through run: 2 now, as NNTrainer's ml_train_model_run(.., "batch_size=2") */
  epoch_log second = {0};
  OK(ml_train_ext_model_run_with_progress(b.model, on_epoch, &second, "epochs=1",
                                          "batch_size=2", NULL));
  assert_int_equal(second.batches, 256 / 2);
  assert_int_equal(input_batch(b.model), 2);
  ml_tensors_info_h info;
  ml_tensor_dimension dim;
  OK(ml_train_model_get_output_tensors_info(b.model, &info));
  OK(ml_tensors_info_get_tensor_dimension(info, 0, dim));
  OK(ml_tensors_info_destroy(info));
  assert_int_equal(dim[0], 2);
  /* trained on from the weights it had, not from new ones */
  assert_true(second.train_loss < (first.first_loss + first.train_loss) / 2);
  /* planned anew for the smaller batch */
  assert_true(arena_bytes(b.model) < arena8);
  /* inference takes batches of 2 now, and gives 2 x 3 probabilities */
  OK(ml_train_model_get_input_tensors_info(b.model, &info));
  ml_tensors_data_h in, out;
  OK(ml_tensors_data_create(info, &in));
  OK(ml_tensors_info_destroy(info));
  OK(ml_train_ext_model_infer(b.model, in, &out));
  void *p;
  size_t bytes;
  OK(ml_tensors_data_get_tensor_data(out, 0, &p, &bytes));
  assert_int_equal(bytes, 2 * 3 * sizeof(float));
  OK(ml_tensors_data_destroy(out));
  OK(ml_tensors_data_destroy(in));

  /* larger than any batch before (the dataset's buffers grow), and a bad
   * value, which changes nothing */
  OK(ml_train_model_run(b.model, "batch_size=16", NULL));
  assert_int_equal(input_batch(b.model), 16);
  EXPECT_FAIL(ml_train_model_run(b.model, "batch_size=0", NULL), INVAL, "batch_size");
  assert_int_equal(input_batch(b.model), 16);
  OK(ml_train_model_destroy(b.model));
  assert_no_handles();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_summary_metrics),
      cmocka_unit_test(test_user_data),
      cmocka_unit_test(test_batch_size_at_run),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
