/* Allocation failure across a whole job of the C API (issue 10): a model
 * built call by call (convolution, batch normalization, a residual sum,
 * pooling, dropout, Adam with a scheduler, a generator for training and a
 * raw file for validation), compiled at one batch size and run at another,
 * then its summary and metrics, memory reports, layer names, weights,
 * inference through ml_tensors_*, saves in the three formats, and the
 * saves loaded again with ml_train_model_construct_with_conf and
 * ml_train_model_load. The sweep (alloc_sweep.h) fails each allocation in
 * turn: ML_ERROR_OUT_OF_MEMORY with a message from ml_error(), no handle,
 * thread or byte left, files absent or as a reference run wrote them, and
 * a success only with the reference's results. A third sweep retries each
 * call that failed once memory is back: a failed call must leave nothing
 * half done, so the job then ends exactly as the reference. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "alloc_sweep.h"
#include "capi_harness.h"
#include "test_util.h"

typedef struct capi_ctx {
  char *dir;
  char train[512], conf[512];
  char valid[512], ckpt[512], bin[512], ini[512], both_ini[512], both_bin[512], copy_bin[512];
  unsigned gen_next; /* the generator's next sample */
  const char *epochs; /* "epochs=2" */
  char save_prop[600]; /* "save_path=<dir>/ckpt.bin" */
  int retry;         /* a call that fails is called again with memory back */
  int retried;       /* calls retried in this run */
} capi_ctx;

/* 6 samples an epoch: 16 inputs and a one-hot label of 3; sample k of an
 * epoch is the same in every epoch and every run. */
static int sample_gen(float **in, float **label, bool *last, void *ud) {
  capi_ctx *c = ud;
  unsigned k = c->gen_next++ % 6;
  nnt_rng r;
  nnt_rng_seed(&r, 100 + k);
  for (int i = 0; i < 16; i++)
    in[0][i] = 2 * nnt_rng_uniform(&r) - 1;
  memset(label[0], 0, 3 * sizeof(float));
  label[0][k % 3] = 1;
  *last = k == 5;
  return 0;
}

/* A call failed with msg: in the retry sweep it must be out of memory
 * with a message saying so, and then it is called again with every
 * allocation succeeding (@return 1); otherwise the job ends (@return 0). */
static int retry_after(capi_ctx *c, int rc, const char *call, const char *msg) {
  if (!c->retry)
    return 0;
  if (rc != ML_ERROR_OUT_OF_MEMORY)
    fail_msg("%s: %d, not ML_ERROR_OUT_OF_MEMORY: %s", call, rc, msg);
  if (!strstr(msg, "memory") && !strstr(msg, "allocate"))
    fail_msg("%s: out of memory, but the message is '%s'", call, msg);
  nnt_alloc_fail_after(-1);
  c->retried++;
  return 1;
}

/* Call; on failure keep the message and end the job, or (retry sweep)
 * call again. */
#define CALL(x)                                                                  \
  do {                                                                           \
    if ((rc = (x)) != ML_ERROR_NONE) {                                           \
      const char *m_ = ml_error();                                               \
      snprintf(msg, SW_MSG_MAX, "%s", m_ ? m_ : "");                            \
      if (!retry_after(c, rc, #x, msg))                                          \
        goto done;                                                               \
      if ((rc = (x)) != ML_ERROR_NONE) {                                         \
        m_ = ml_error();                                                         \
        snprintf(msg, SW_MSG_MAX, "%s called again: %s", #x, m_ ? m_ : "");     \
        goto done;                                                               \
      }                                                                          \
    }                                                                            \
  } while (0)
/* A call that cannot be repeated with the same effect (a run trains): on
 * failure the job ends. */
#define ONCE(x)                                                                  \
  do {                                                                           \
    if ((rc = (x)) != ML_ERROR_NONE) {                                           \
      const char *m_ = ml_error();                                               \
      snprintf(msg, SW_MSG_MAX, "%s", m_ ? m_ : "");                            \
      goto done;                                                                 \
    }                                                                            \
  } while (0)

/* A layer of type with properties; the model owns it after adding. */
static int add_layer(ml_train_model_h m, ml_train_layer_type_e type, const char *p1,
                     const char *p2, const char *p3, const char *p4) {
  ml_train_layer_h l;
  int rc = ml_train_layer_create(&l, type);
  if (rc)
    return rc;
  if ((rc = ml_train_layer_set_property(l, p1, p2, p3, p4, NULL)) ||
      (rc = ml_train_model_add_layer(m, l)))
    /* a call that succeeds leaves the message for ml_error() */
    assert_int_equal(ml_train_layer_destroy(l), ML_ERROR_NONE);
  return rc;
}

/* Record a tensors data handle's tensors (as described by info). */
static void put_data(sw_out *out, const char *name, ml_tensors_info_h info,
                     ml_tensors_data_h data) {
  unsigned n = 0;
  assert_int_equal(ml_tensors_info_get_count(info, &n), ML_ERROR_NONE);
  for (unsigned i = 0; i < n; i++) {
    void *p;
    size_t size;
    char key[64];
    assert_int_equal(ml_tensors_data_get_tensor_data(data, i, &p, &size), ML_ERROR_NONE);
    snprintf(key, sizeof key, "%s[%u]", name, i);
    sw_put(out, key, p, size);
    ml_tensor_dimension d;
    assert_int_equal(ml_tensors_info_get_tensor_dimension(info, i, d), ML_ERROR_NONE);
    snprintf(key, sizeof key, "%s[%u] shape", name, i);
    sw_put(out, key, d, sizeof d);
  }
}

static int capi_job(void *vc, sw_out *out, char *msg) {
  capi_ctx *c = vc;
  const char *files[] = {c->ckpt, c->bin, c->ini, c->both_ini, c->both_bin, c->copy_bin};
  for (size_t i = 0; i < NNT_ARRAY_LEN(files); i++)
    unlink(files[i]);
  c->gen_next = 0;
  ml_train_model_h m = NULL, m2 = NULL, m3 = NULL;
  ml_train_optimizer_h opt = NULL;
  ml_train_layer_h conv2 = NULL; /* owned by m2 */
  ml_train_lr_scheduler_h lrs = NULL;
  ml_train_dataset_h ds = NULL;
  ml_tensors_info_h in_info = NULL, out_info = NULL, w_info = NULL, w2_info = NULL,
                    w3_info = NULL, clone = NULL;
  ml_tensors_data_h in_data = NULL, out_data = NULL, w_data = NULL, w2_data = NULL,
                    w3_data = NULL;
  char *summary = NULL, *loss_text = NULL, *acc_text = NULL, **names = NULL, *tname = NULL;
  ml_train_ext_memory_report_s rep[2];
  int rc;
  (void)ml_error();
  CALL(ml_train_model_construct(&m));
  CALL(add_layer(m, ML_TRAIN_LAYER_TYPE_INPUT, "name=in", "input_shape=1:4:4", NULL, NULL));
  CALL(add_layer(m, ML_TRAIN_LAYER_TYPE_CONV2D, "name=conv", "filters=2", "kernel_size=3,3",
                 "padding=same"));
  CALL(add_layer(m, ML_TRAIN_LAYER_TYPE_BN, "name=bn", "activation=relu", NULL, NULL));
  CALL(add_layer(m, ML_TRAIN_LAYER_TYPE_ADDITION, "name=res", "input_layers=conv,bn", NULL,
                 NULL));
  CALL(add_layer(m, ML_TRAIN_LAYER_TYPE_POOLING2D, "name=pool", "pooling=max",
                 "pool_size=2,2", "stride=2,2"));
  CALL(add_layer(m, ML_TRAIN_LAYER_TYPE_FLATTEN, "name=flat", NULL, NULL, NULL));
  CALL(add_layer(m, ML_TRAIN_LAYER_TYPE_DROPOUT, "name=drop", "dropout_rate=0.25", NULL,
                 NULL));
  CALL(add_layer(m, ML_TRAIN_LAYER_TYPE_FC, "name=out", "unit=3", "activation=softmax", NULL));
  CALL(ml_train_optimizer_create(&opt, ML_TRAIN_OPTIMIZER_TYPE_ADAM));
  CALL(ml_train_lr_scheduler_create(&lrs, ML_TRAIN_LR_SCHEDULER_TYPE_EXPONENTIAL));
  CALL(ml_train_lr_scheduler_set_property(lrs, "learning_rate=0.01", "decay_rate=0.5",
                                          "decay_steps=2", NULL));
  CALL(ml_train_optimizer_set_lr_scheduler(opt, lrs));
  lrs = NULL;
  CALL(ml_train_model_set_optimizer(m, opt));
  opt = NULL;
  CALL(ml_train_dataset_create(&ds));
  CALL(ml_train_dataset_add_generator(ds, ML_TRAIN_DATASET_MODE_TRAIN, sample_gen, c));
  CALL(ml_train_dataset_add_file(ds, ML_TRAIN_DATASET_MODE_VALID, c->valid));
  CALL(ml_train_dataset_set_property_for_mode(ds, ML_TRAIN_DATASET_MODE_TRAIN, "buffer_size=2",
                                              NULL));
  CALL(ml_train_dataset_set_property_for_mode_with_single_param(ds, ML_TRAIN_DATASET_MODE_VALID,
                                                                "buffer_size=1"));
  CALL(ml_train_model_set_dataset(m, ds));
  ds = NULL;
  CALL(ml_train_ext_model_set_planner(m, "best_fit"));
  /* compiled for batch 3, run at 2: the graph is finalized again */
  CALL(ml_train_model_compile(m, "loss=cross", "batch_size=3", "seed=7", NULL));
  ONCE(ml_train_model_run(m, c->epochs, "batch_size=2", c->save_prop, NULL));
  CALL(ml_train_model_get_summary(m, ML_TRAIN_SUMMARY_TENSOR, &summary));
  CALL(ml_train_model_get_summary(m, ML_TRAIN_EXT_SUMMARY_TRAIN_LOSS, &loss_text));
  CALL(ml_train_model_get_summary(m, ML_TRAIN_EXT_SUMMARY_VALID_ACCURACY, &acc_text));
  for (int mode = 0; mode < 2; mode++) {
    CALL(ml_train_ext_model_get_memory_report(m, (ml_train_ext_mode_e)mode, &rep[mode]));
    rep[mode].planning_ms = 0;
  }
  CALL(ml_train_ext_model_get_layer_names(m, &names));
  CALL(ml_train_model_get_weight(m, "conv", &w_data, &w_info));
  /* inference on one batch, the input made through ml_tensors_* */
  CALL(ml_train_model_get_input_tensors_info(m, &in_info));
  CALL(ml_tensors_info_create(&clone));
  CALL(ml_tensors_info_clone(clone, in_info));
  CALL(ml_tensors_info_set_tensor_name(clone, 0, "image"));
  CALL(ml_tensors_info_get_tensor_name(clone, 0, &tname));
  CALL(ml_tensors_data_create(clone, &in_data));
  {
    float x[2 * 16];
    for (int i = 0; i < 32; i++)
      x[i] = (float)((i * 7) % 11) / 11.0f - 0.5f;
    CALL(ml_tensors_data_set_tensor_data(in_data, 0, x, sizeof x));
  }
  CALL(ml_train_ext_model_infer(m, in_data, &out_data));
  CALL(ml_train_model_get_output_tensors_info(m, &out_info));
  CALL(ml_train_model_save(m, c->bin, ML_TRAIN_MODEL_FORMAT_BIN));
  CALL(ml_train_model_save(m, c->ini, ML_TRAIN_MODEL_FORMAT_INI));
  CALL(ml_train_model_save(m, c->both_ini, ML_TRAIN_MODEL_FORMAT_INI_WITH_BIN));
  /* the INI and the weights again, in two models */
  CALL(ml_train_model_construct_with_conf(c->ini, &m2));
  CALL(ml_train_model_compile(m2, NULL));
  CALL(ml_train_model_load(m2, c->bin, ML_TRAIN_MODEL_FORMAT_BIN));
  CALL(ml_train_model_get_weight(m2, "conv", &w2_data, &w2_info));
  CALL(ml_train_model_construct_with_conf(c->both_ini, &m3));
  CALL(ml_train_model_compile(m3, NULL)); /* loads the weights beside the INI */
  CALL(ml_train_model_get_weight(m3, "conv", &w3_data, &w3_info));
  /* a handle for a layer read from the INI, made on demand */
  CALL(ml_train_model_get_layer(m2, "conv", &conv2));
  /* the first model's layers into the third (their Adam moments restart) */
  const char *const copied[] = {"conv", "bn", "out", NULL};
  CALL(ml_train_ext_model_copy_layer_weights(m3, m, copied));
  CALL(ml_train_model_save(m3, c->copy_bin, ML_TRAIN_MODEL_FORMAT_BIN));
  sw_put(out, "summary", summary, strlen(summary));
  sw_put(out, "train loss", loss_text, strlen(loss_text));
  sw_put(out, "valid accuracy", acc_text, strlen(acc_text));
  sw_put(out, "memory reports", rep, sizeof rep);
  for (int i = 0; names[i]; i++)
    sw_put(out, "layer name", names[i], strlen(names[i]));
  sw_put(out, "tensor name", tname, strlen(tname));
  put_data(out, "conv weights", w_info, w_data);
  put_data(out, "output", out_info, out_data);
  put_data(out, "conv weights loaded", w2_info, w2_data);
  put_data(out, "conv weights beside the INI", w3_info, w3_data);
done:
  /* files left behind: on success all, on failure any of them */
  sw_put_file(out, "ckpt.bin", c->ckpt);
  sw_put_file(out, "out.bin", c->bin);
  sw_put_file(out, "out.ini", c->ini);
  sw_put_file(out, "both.ini", c->both_ini);
  sw_put_file(out, "both.bin", c->both_bin);
  sw_put_file(out, "copy.bin", c->copy_bin);
  (void)conv2;
  free(summary), free(loss_text), free(acc_text), free(names), free(tname);
  ml_tensors_data_h datas[] = {in_data, out_data, w_data, w2_data, w3_data};
  for (size_t i = 0; i < NNT_ARRAY_LEN(datas); i++)
    if (datas[i])
      assert_int_equal(ml_tensors_data_destroy(datas[i]), ML_ERROR_NONE);
  ml_tensors_info_h infos[] = {in_info, out_info, w_info, w2_info, w3_info, clone};
  for (size_t i = 0; i < NNT_ARRAY_LEN(infos); i++)
    if (infos[i])
      assert_int_equal(ml_tensors_info_destroy(infos[i]), ML_ERROR_NONE);
  if (lrs)
    assert_int_equal(ml_train_lr_scheduler_destroy(lrs), ML_ERROR_NONE);
  if (opt)
    assert_int_equal(ml_train_optimizer_destroy(opt), ML_ERROR_NONE);
  if (ds)
    assert_int_equal(ml_train_dataset_destroy(ds), ML_ERROR_NONE);
  ml_train_model_h models[] = {m, m2, m3};
  for (size_t i = 0; i < NNT_ARRAY_LEN(models); i++)
    if (models[i])
      assert_int_equal(ml_train_model_destroy(models[i]), ML_ERROR_NONE);
  assert_no_handles();
  return rc;
}

/* The second job: a model from an INI with raw-file datasets, compiled and
 * run through the single-parameter and progress forms, with every tensor
 * kept (memory_optimization=false) and read back; the deprecated dataset
 * constructors. */
static const char *const conf_ini =
    "[Model]\n"
    "type = NeuralNetwork\n"
    "batch_size = 2\n"
    "loss = cross\n"
    "seed = 5\n"
    "[Optimizer]\n"
    "type = sgd\n"
    "learning_rate = 0.1\n"
    "[train_set]\n"
    "type = file\n"
    "path = train.dat\n"
    "[valid_set]\n"
    "type = file\n"
    "path = valid.dat\n"
    "[in]\n"
    "type = input\n"
    "input_shape = 1:4:4\n"
    "[conv]\n"
    "type = conv2d\n"
    "filters = 2\n"
    "kernel_size = 3,3\n"
    "[flat]\n"
    "type = flatten\n"
    "[out]\n"
    "type = fully_connected\n"
    "unit = 3\n"
    "activation = softmax\n";

static void count_progress(const ml_train_ext_progress_s *p, void *ud) {
  unsigned *n = ud;
  *n += p->epoch_done;
}

static int conf_job(void *vc, sw_out *out, char *msg) {
  capi_ctx *c = vc;
  ml_train_model_h m = NULL;
  ml_train_dataset_h d1 = NULL, d2 = NULL;
  ml_tensors_data_h t[3] = {0};
  ml_tensors_info_h ti[3] = {0};
  char *summary = NULL;
  unsigned epochs_seen = 0;
  int rc;
  CALL(ml_train_model_construct_with_conf(c->conf, &m));
  CALL(ml_train_model_compile_with_single_param(m, "memory_optimization=false|batch_size=2"));
  ONCE(ml_train_ext_model_run_with_progress(m, count_progress, &epochs_seen, "epochs=1", NULL));
  ONCE(ml_train_model_run_with_single_param(m, "epochs=1"));
  CALL(ml_train_ext_model_get_layer_tensor(m, "conv", ML_TRAIN_EXT_TENSOR_OUTPUT, 0, &t[0],
                                           &ti[0]));
  CALL(ml_train_ext_model_get_layer_tensor(m, "conv", ML_TRAIN_EXT_TENSOR_GRADIENT, 0, &t[1],
                                           &ti[1]));
  CALL(ml_train_ext_model_get_layer_tensor(m, "out", ML_TRAIN_EXT_TENSOR_DERIVATIVE, 0, &t[2],
                                           &ti[2]));
  CALL(ml_train_model_get_summary(m, ML_TRAIN_SUMMARY_MODEL, &summary));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  CALL(ml_train_dataset_create_with_file(&d1, c->train, c->valid, NULL));
  CALL(ml_train_dataset_set_property(d1, "buffer_size=1", NULL));
  CALL(ml_train_dataset_create_with_generator(&d2, sample_gen, NULL, NULL));
#pragma GCC diagnostic pop
  sw_put(out, "epochs seen", &epochs_seen, sizeof epochs_seen);
  sw_put(out, "summary", summary, strlen(summary));
  put_data(out, "conv output", ti[0], t[0]);
  put_data(out, "conv gradient", ti[1], t[1]);
  put_data(out, "out derivative", ti[2], t[2]);
done:
  free(summary);
  for (int i = 0; i < 3; i++) {
    if (t[i])
      assert_int_equal(ml_tensors_data_destroy(t[i]), ML_ERROR_NONE);
    if (ti[i])
      assert_int_equal(ml_tensors_info_destroy(ti[i]), ML_ERROR_NONE);
  }
  if (d1)
    assert_int_equal(ml_train_dataset_destroy(d1), ML_ERROR_NONE);
  if (d2)
    assert_int_equal(ml_train_dataset_destroy(d2), ML_ERROR_NONE);
  if (m)
    assert_int_equal(ml_train_model_destroy(m), ML_ERROR_NONE);
  assert_no_handles();
  return rc;
}

static int setup(void **state) {
  capi_ctx *c = calloc(1, sizeof *c);
  c->dir = sw_mkdtemp();
  snprintf(c->valid, sizeof c->valid, "%s/valid.dat", c->dir);
  snprintf(c->ckpt, sizeof c->ckpt, "%s/ckpt.bin", c->dir);
  snprintf(c->save_prop, sizeof c->save_prop, "save_path=%s", c->ckpt);
  snprintf(c->bin, sizeof c->bin, "%s/out.bin", c->dir);
  snprintf(c->ini, sizeof c->ini, "%s/out.ini", c->dir);
  snprintf(c->both_ini, sizeof c->both_ini, "%s/both.ini", c->dir);
  snprintf(c->both_bin, sizeof c->both_bin, "%s/both.bin", c->dir);
  snprintf(c->copy_bin, sizeof c->copy_bin, "%s/copy.bin", c->dir);
  sw_write_raw(c->valid, 4, 2);
  snprintf(c->train, sizeof c->train, "%s/train.dat", c->dir);
  sw_write_raw(c->train, 6, 1);
  snprintf(c->conf, sizeof c->conf, "%s/conf.ini", c->dir);
  FILE *f = fopen(c->conf, "w");
  assert_non_null(f);
  fputs(conf_ini, f);
  fclose(f);
  *state = c;
  return 0;
}

static int teardown(void **state) {
  capi_ctx *c = *state;
  tu_rmdir(c->dir);
  free(c->dir);
  free(c);
  return 0;
}

static const int nomem[] = {ML_ERROR_OUT_OF_MEMORY, 0};

static void run_capi(capi_ctx *c, int once, int retry) {
  /* the checkpoint of epoch 1, which a failure in epoch 2 leaves: the one
   * a run of one epoch writes */
  sw_out partial = {0}, ref = {0};
  char msg[SW_MSG_MAX] = "";
  c->retry = 0;
  c->epochs = "epochs=1";
  assert_int_equal(capi_job(c, &ref, msg), ML_ERROR_NONE);
  assert_true(sw_put_file(&partial, "ckpt.bin", c->ckpt));
  sw_out_free(&ref);
  c->epochs = "epochs=2";
  c->retry = retry;
  c->retried = 0;
  sw_config cfg = {.name = retry ? "C API job, calls retried" : "C API job",
                   .job = capi_job, .ctx = c, .codes = nomem, .partial = &partial,
                   .once = once, .max_trials = 20000};
  sw_stats st = sw_run(&cfg, NULL);
  assert_true(st.trials > 100);
  if (retry) { /* failures in a run end the job; all others were retried */
    assert_true(c->retried > 0);
    assert_int_equal(st.absorbed, c->retried);
  }
  sw_out_free(&partial);
}

static void run_conf(capi_ctx *c, int once, int retry) {
  c->retry = retry;
  c->retried = 0;
  sw_config cfg = {.name = retry ? "C API job from an INI, calls retried"
                               : "C API job from an INI",
                   .job = conf_job, .ctx = c, .codes = nomem, .once = once,
                   .max_trials = 20000};
  sw_stats st = sw_run(&cfg, NULL);
  assert_true(st.trials > 50);
  assert_int_equal(st.absorbed, c->retried);
}

static void test_conf_fail_from_n(void **state) { run_conf(*state, 0, 0); }
static void test_conf_fail_once(void **state) { run_conf(*state, 1, 0); }
static void test_conf_fail_once_retry(void **state) { run_conf(*state, 1, 1); }

static void test_capi_fail_from_n(void **state) { run_capi(*state, 0, 0); }
static void test_capi_fail_once(void **state) { run_capi(*state, 1, 0); }
static void test_capi_fail_once_retry(void **state) { run_capi(*state, 1, 1); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_capi_fail_from_n, setup, teardown),
      cmocka_unit_test_setup_teardown(test_capi_fail_once, setup, teardown),
      cmocka_unit_test_setup_teardown(test_capi_fail_once_retry, setup, teardown),
      cmocka_unit_test_setup_teardown(test_conf_fail_from_n, setup, teardown),
      cmocka_unit_test_setup_teardown(test_conf_fail_once, setup, teardown),
      cmocka_unit_test_setup_teardown(test_conf_fail_once_retry, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
