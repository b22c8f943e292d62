/* Defaults equal to NNTrainer's (pooling stride, concat axis, dataset
 * buffer_size and shuffle by mode, and the ones that were already equal),
 * and the notices that say where ours differ, from the INI loader, the C
 * API and the CLI; every example INI compiles without a notice. */
#include "test_util.h"

#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nntrainer-ext.h"
#include "nntrainer.h"
#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

/* ---- defaults through the INI loader ------------------------------------ */

static int setup(void **state) { return tu_dir_setup(state); }

static int teardown(void **state) {
  nnt_log_set(NULL, NULL);
  return tu_dir_teardown(state);
}

/* Load the INI text into a fresh model and compile it. */
static nnt_model *compile_ini(const char *text) {
  const char *path = tu_write_text("model.ini", text);
  nnt_model *m;
  nnt_err e = {0};
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  assert_int_equal(nnt_model_set_base_dir(m, tu_dir, &e), NNT_OK);
  if (nnt_ini_load(m, path, NULL, 0, &e) || nnt_model_compile(m, &e))
    fail_msg("%s", e.msg);
  return m;
}

/* The output shape of layer name's node, as b:c:h:w. */
static void assert_out(nnt_model *m, const char *name, unsigned b, unsigned c, unsigned h,
                       unsigned w) {
  for (size_t i = 0; i < m->n_nodes; i++)
    if (!strcmp(m->nodes[i].layer->name, name)) {
      nnt_dim d = m->nodes[i].fc.out_dim[0];
      if (d.b != b || d.c != c || d.h != h || d.w != w)
        fail_msg("%s: output %u:%u:%u:%u, want %u:%u:%u:%u", name, d.b, d.c, d.h, d.w, b, c, h,
                 w);
      return;
    }
  fail_msg("no node '%s'", name);
}

#define MODEL_HEAD "[Model]\ntype = NeuralNetwork\nbatch_size = 2\n"

/* NNTrainer's pooling2d stride is 1 whatever the pool size: a 6x6 input
 * pooled 2x2 without stride gives 5x5 (not 3x3); with stride 2,2, 3x3. */
static void test_pooling_stride_default(void **state) {
  (void)state;
  nnt_model *m = compile_ini(MODEL_HEAD
                             "[in]\ntype = input\ninput_shape = 3:6:6\n"
                             "[p]\ntype = pooling2d\npooling = max\npool_size = 2,2\n"
                             "[q]\ntype = pooling2d\npooling = average\npool_size = 2,2\n"
                             "input_layers = in\nstride = 2,2\n"
                             "[r]\ntype = pooling2d\npooling = max\npool_size = 3\n"
                             "input_layers = in\npadding = same\n");
  assert_out(m, "p", 2, 3, 5, 5);
  assert_out(m, "q", 2, 3, 3, 3);
  assert_out(m, "r", 2, 3, 6, 6); /* same padding keeps the size at stride 1 */
  nnt_model_destroy(m);
}

/* NNTrainer's concat axis: width when the first input has more than one
 * channel, else channel. */
static void test_concat_axis_default(void **state) {
  (void)state;
  nnt_model *m = compile_ini(MODEL_HEAD
                             "[in]\ntype = input\ninput_shape = 1:1:4\n"
                             "[a]\ntype = fully_connected\nunit = 3\ninput_layers = in\n"
                             "[b]\ntype = fully_connected\nunit = 3\ninput_layers = in\n"
                             "[cat]\ntype = concat\ninput_layers = a, b\n"
                             "[in2]\ntype = input\ninput_shape = 2:3:4\n"
                             "[c]\ntype = identity\ninput_layers = in2\n"
                             "[d]\ntype = identity\ninput_layers = in2\n"
                             "[cat2]\ntype = concat\ninput_layers = c, d\n"
                             "[cat3]\ntype = concat\ninput_layers = a, b\naxis = 3\n");
  assert_out(m, "cat", 2, 2, 1, 3);  /* channel */
  assert_out(m, "cat2", 2, 2, 3, 8); /* width */
  assert_out(m, "cat3", 2, 1, 1, 6); /* as given */
  nnt_model_destroy(m);
}

/* NNTrainer's defaults that were already ours, pinned: conv2d stride 1,
 * padding valid, dilation 1; batch-norm axis channel; upsample2d 2x. */
static void test_other_shape_defaults(void **state) {
  (void)state;
  nnt_model *m = compile_ini(MODEL_HEAD
                             "[in]\ntype = input\ninput_shape = 2:7:7\n"
                             "[conv]\ntype = conv2d\nfilters = 4\nkernel_size = 3,3\n"
                             "[bn]\ntype = batch_normalization\n"
                             "[up]\ntype = upsample2d\nupsample = nearest\nkernel_size = 2\n");
  assert_out(m, "conv", 2, 4, 5, 5);
  assert_out(m, "up", 2, 4, 10, 10);
  size_t i = 0;
  while (strcmp(m->nodes[i].layer->name, "bn"))
    i++;
  assert_int_equal(m->nodes[i].fc.w[0].dim.c, 4); /* per channel */
  nnt_model_destroy(m);
}

/* ---- dataset defaults --------------------------------------------------- */

static atomic_int gen_calls;

static int count_gen(float **input, float **label, bool *last, void *ud) {
  (void)ud;
  input[0][0] = (float)atomic_fetch_add(&gen_calls, 1);
  label[0][0] = 1;
  *last = false;
  return 0;
}

/* buffer_size defaults to NNTrainer's 1: a ring of two slots (the batch
 * read and the next one loading: dataset.c ring_slots), so a producer
 * nobody reads from prepares two batches and waits. */
static void test_buffer_size_default(void **state) {
  (void)state;
  nnt_err e = {0};
  nnt_dataset *d;
  atomic_store(&gen_calls, 0);
  assert_int_equal(nnt_dataset_create_generator(count_gen, NULL, &d, &e), NNT_OK);
  nnt_ds_shape sh = {.n_in = 1, .n_label = 1, .in_len = {1}, .label_len = {1}};
  assert_int_equal(nnt_dataset_prepare(d, &sh, 4, 1, &e), NNT_OK);
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
  for (int t = 0; t < 5000 && atomic_load(&gen_calls) < 8; t++)
    usleep(1000);
  usleep(50000); /* time to run ahead, if it could */
  assert_int_equal(atomic_load(&gen_calls), 8);
  nnt_dataset_destroy(d);
}

/* The first batch of a 16-sample synthetic set at batch 16. */
static void first_batch(nnt_dataset *d, float *x, float *y) {
  nnt_err e = {0};
  nnt_ds_shape sh = {.n_in = 1, .n_label = 1, .in_len = {3}, .label_len = {2}};
  assert_int_equal(nnt_dataset_prepare(d, &sh, 16, 99, &e), NNT_OK);
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
  float *in[1] = {x}, *lab[1] = {y};
  int end = -1;
  assert_int_equal(nnt_dataset_next_batch(d, in, lab, &end, &e), NNT_OK);
  assert_int_equal(end, 0);
  nnt_dataset_epoch_end(d);
}

/* NNTrainer shuffles the training set only: a validation or test set is
 * read in order unless shuffle is given. */
static void test_shuffle_default_by_mode(void **state) {
  (void)state;
  nnt_err e = {0};
  nnt_model *m;
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  nnt_dataset *ref, *ds[3], *forced;
  assert_int_equal(nnt_dataset_create_synthetic(16, 5, &ref, &e), NNT_OK);
  assert_int_equal(nnt_dataset_set_property(ref, "shuffle", "false", &e), NNT_OK);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(nnt_dataset_create_synthetic(16, 5, &ds[i], &e), NNT_OK);
    assert_int_equal(nnt_model_set_dataset(m, (nnt_ds_mode)i, ds[i], &e), NNT_OK);
  }
  float rx[48], ry[32], x[48], y[32];
  first_batch(ref, rx, ry);
  first_batch(ds[NNT_DS_TRAIN], x, y);
  assert_memory_not_equal(x, rx, sizeof x);
  first_batch(ds[NNT_DS_VALID], x, y);
  assert_memory_equal(x, rx, sizeof x);
  first_batch(ds[NNT_DS_TEST], x, y);
  assert_memory_equal(x, rx, sizeof x);
  /* given, shuffle keeps its value in any mode */
  assert_int_equal(nnt_dataset_create_synthetic(16, 5, &forced, &e), NNT_OK);
  assert_int_equal(nnt_dataset_set_property(forced, "shuffle", "true", &e), NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_VALID, forced, &e), NNT_OK);
  first_batch(forced, x, y);
  assert_memory_not_equal(x, rx, sizeof x);
  nnt_dataset_destroy(ref);
  nnt_model_destroy(m);
}

/* ---- notices ------------------------------------------------------------ */

/* Bias keys on layers whose biases do not take them: a warning each, and
 * none when they are absent. */
static void test_bias_keys_ignored(void **state) {
  (void)state;
  tu_log_start();
  nnt_model *m = compile_ini(MODEL_HEAD
                             "[Optimizer]\ntype = sgd\nlearning_rate = 0.1\n"
                             "[in]\ntype = input\ninput_shape = 1:1:4\n"
                             "[emb]\ntype = embedding\nin_dim = 5\nout_dim = 6\n"
                             "disable_bias = true\n"
                             "[att]\ntype = multi_head_attention\nnum_heads = 2\n"
                             "bias_decay = 0.1\ninput_layers = emb, emb, emb\n");
  tu_log_expect(NNT_LOG_WARNING, "layer 'emb' (embedding)", "'disable_bias'", "no bias");
  tu_log_expect(NNT_LOG_WARNING, "layer 'att' (multi_head_attention)", "'bias_decay'",
                "weight_decay");
  assert_int_equal(tu_log_count(NNT_LOG_WARNING), 2);
  nnt_model_destroy(m);
  memset(&tu_logged, 0, sizeof tu_logged);
  m = compile_ini(MODEL_HEAD
                  "[Optimizer]\ntype = sgd\nlearning_rate = 0.1\n"
                  "[in]\ntype = input\ninput_shape = 1:1:4\n"
                  "[emb]\ntype = embedding\nin_dim = 5\nout_dim = 6\n"
                  "[att]\ntype = multi_head_attention\nnum_heads = 2\n"
                  "input_layers = emb, emb, emb\n");
  assert_int_equal(tu_log_count(NNT_LOG_WARNING), 0);
  nnt_model_destroy(m);
}

/* Each key whose default here differs from NNTrainer's (or that NNTrainer
 * requires) says so at compile when absent, naming layer, key and value;
 * ignored keys are warnings. */
static void test_notices_from_ini(void **state) {
  (void)state;
  tu_log_start();
  nnt_model *m = compile_ini(MODEL_HEAD
                             "[Optimizer]\ntype = adam\nlearning_rate = 0.01\n"
                             "[LearningRateScheduler]\ntype = constant\n"
                             "[in]\ntype = input\ninput_shape = 2:4:4\n"
                             "[p1]\ntype = pooling2d\npooling = max\n"
                             "[up]\ntype = upsample2d\n"
                             "[sp]\ntype = split\n"
                             "[cat]\ntype = concat\ninput_layers = sp(0), sp(1)\n"
                             "[g]\ntype = pooling2d\npooling = global_average\nstride = 2\n");
  assert_out(m, "p1", 2, 2, 3, 3);   /* pool_size 2, stride 1 */
  assert_out(m, "up", 2, 2, 6, 6);   /* nearest, 2x2 */
  assert_out(m, "cat", 2, 2, 6, 6);  /* split in two on width, joined on width */
  tu_log_expect(NNT_LOG_NOTICE, "layer 'p1' (pooling2d)", "key 'pool_size' not given", "using 2,2");
  tu_log_expect(NNT_LOG_NOTICE, "layer 'up' (upsample2d)", "key 'upsample' not given",
             "using nearest");
  tu_log_expect(NNT_LOG_NOTICE, "layer 'up' (upsample2d)", "key 'kernel_size' not given",
             "using 2,2");
  tu_log_expect(NNT_LOG_NOTICE, "layer 'sp' (split)", "key 'axis' not given", "using 3");
  tu_log_expect(NNT_LOG_NOTICE, "layer 'sp' (split)", "key 'split_number' not given",
             "number of outputs");
  tu_log_expect(NNT_LOG_NOTICE, "scheduler (constant)", "key 'learning_rate' not given",
             "learning_rate 0.01");
  tu_log_expect(NNT_LOG_WARNING, "layer 'g' (pooling2d)", "key 'stride' is ignored", "global");
  assert_int_equal(tu_log_count(NNT_LOG_NOTICE), 6);
  assert_int_equal(tu_log_count(NNT_LOG_WARNING), 1);
  assert_int_equal(tu_logged.n, 7);
  nnt_model_destroy(m);
  /* the same model with every key given: silent */
  memset(&tu_logged, 0, sizeof tu_logged);
  m = compile_ini(MODEL_HEAD
                  "[Optimizer]\ntype = adam\n"
                  "[LearningRateScheduler]\ntype = constant\nlearning_rate = 0.01\n"
                  "[in]\ntype = input\ninput_shape = 2:4:4\n"
                  "[p1]\ntype = pooling2d\npooling = max\npool_size = 2\n"
                  "[up]\ntype = upsample2d\nupsample = nearest\nkernel_size = 2\n"
                  "[sp]\ntype = split\naxis = 3\nsplit_number = 2\n"
                  "[cat]\ntype = concat\ninput_layers = sp(0), sp(1)\n"
                  "[g]\ntype = pooling2d\npooling = global_average\n");
  if (tu_logged.n) {
    tu_log_print();
    fail_msg("%d messages from a model that gives every key", tu_logged.n);
  }
  nnt_model_destroy(m);
  /* an optimizer learning_rate a scheduler overrides is a warning */
  memset(&tu_logged, 0, sizeof tu_logged);
  m = compile_ini(MODEL_HEAD
                  "[Optimizer]\ntype = sgd\nlearning_rate = 0.5\n"
                  "[LearningRateScheduler]\ntype = step\nlearning_rate = 0.1, 0.01\n"
                  "iteration = 10\n"
                  "[in]\ntype = input\ninput_shape = 1:1:4\n");
  tu_log_expect(NNT_LOG_WARNING, "optimizer (sgd)", "key 'learning_rate' (0.5) is ignored",
             "step");
  assert_int_equal(tu_logged.n, 1);
  nnt_model_destroy(m);
  tu_log_stop();
}

/* The C API builds through the same calls, so it gets the same notices. */
static void test_notices_from_capi(void **state) {
  (void)state;
  tu_log_start();
  ml_train_model_h model;
  ml_train_layer_h in, pool;
  ml_train_optimizer_h opt;
  ml_train_lr_scheduler_h lrs;
  assert_int_equal(ml_train_model_construct(&model), ML_ERROR_NONE);
  assert_int_equal(ml_train_layer_create(&in, ML_TRAIN_LAYER_TYPE_INPUT), ML_ERROR_NONE);
  assert_int_equal(ml_train_layer_set_property(in, "input_shape=1:4:4", NULL), ML_ERROR_NONE);
  assert_int_equal(ml_train_model_add_layer(model, in), ML_ERROR_NONE);
  assert_int_equal(ml_train_layer_create(&pool, ML_TRAIN_LAYER_TYPE_POOLING2D), ML_ERROR_NONE);
  assert_int_equal(ml_train_layer_set_property(pool, "name=pool", "pooling=average", NULL),
                   ML_ERROR_NONE);
  assert_int_equal(ml_train_model_add_layer(model, pool), ML_ERROR_NONE);
  assert_int_equal(ml_train_optimizer_create(&opt, ML_TRAIN_OPTIMIZER_TYPE_ADAM), ML_ERROR_NONE);
  assert_int_equal(ml_train_lr_scheduler_create(&lrs, ML_TRAIN_LR_SCHEDULER_TYPE_CONSTANT),
                   ML_ERROR_NONE);
  assert_int_equal(ml_train_optimizer_set_lr_scheduler(opt, lrs), ML_ERROR_NONE);
  assert_int_equal(ml_train_model_set_optimizer(model, opt), ML_ERROR_NONE);
  assert_int_equal(tu_logged.n, 0); /* nothing before compile */
  assert_int_equal(ml_train_model_compile(model, "batch_size=1", NULL), ML_ERROR_NONE);
  tu_log_expect(NNT_LOG_NOTICE, "layer 'pool' (pooling2d)", "key 'pool_size' not given", "2,2");
  tu_log_expect(NNT_LOG_NOTICE, "scheduler (constant)", "key 'learning_rate' not given",
             "learning_rate 0.001");
  assert_int_equal(tu_logged.n, 2);
  assert_int_equal(ml_train_model_destroy(model), ML_ERROR_NONE);
  tu_log_stop();
}

/* Every example and benchmark INI gives the keys whose defaults differ:
 * compiling them logs nothing. */
static void check_quiet(const char *path) {
  char d[2048];
  snprintf(d, sizeof d, "%s", path);
  *strrchr(d, '/') = '\0';
  nnt_model *m;
  nnt_err e = {0};
  const char *ov[] = {"save_path="};
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  assert_int_equal(nnt_model_set_base_dir(m, d, &e), NNT_OK);
  memset(&tu_logged, 0, sizeof tu_logged);
  if (nnt_ini_load(m, path, ov, 1, &e) || nnt_model_compile(m, &e))
    fail_msg("%s: %s", path, e.msg);
  if (tu_logged.n) {
    tu_log_print();
    fail_msg("%s: %d log messages at compile", path, tu_logged.n);
  }
  nnt_model_destroy(m);
}

static void test_examples_quiet(void **state) {
  (void)state;
  static const char *const dirs[] = {"Applications/FashionMNIST", "Applications/ResNet",
                                     "benchmarks/models"};
  tu_log_start();
  int checked = 0;
  for (size_t i = 0; i < NNT_ARRAY_LEN(dirs); i++) {
    char dpath[1024];
    snprintf(dpath, sizeof dpath, "%s/%s", NNT_SOURCE_DIR, dirs[i]);
    DIR *dp = opendir(dpath);
    assert_non_null(dp);
    struct dirent *de;
    while ((de = readdir(dp))) {
      size_t n = strlen(de->d_name);
      if (n < 5 || strcmp(de->d_name + n - 4, ".ini"))
        continue;
      char p[2048];
      snprintf(p, sizeof p, "%s/%s", dpath, de->d_name);
      check_quiet(p);
      checked++;
    }
    closedir(dp);
  }
  assert_true(checked >= 8);
  tu_log_stop();
}

/* The CLI installs a callback that prints notices and warnings on stderr. */
static void test_cli_prints_notices(void **state) {
  (void)state;
  char path[1024], cmd[4096], out[16384];
  snprintf(path, sizeof path, "%s/cli.ini", tu_dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(MODEL_HEAD "[in]\ntype = input\ninput_shape = 1:4:4\n"
        "[p]\ntype = pooling2d\npooling = max\n", f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "%s summary %s 2>&1", NNT_CLI_PATH, path);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t got = fread(out, 1, sizeof out - 1, p);
  out[got] = '\0';
  assert_int_equal(pclose(p), 0);
  tu_assert_contains(out, "nntrainer: notice: layer 'p' (pooling2d): key 'pool_size' not given: "
                          "using 2,2");
  /* given, it is quiet */
  f = fopen(path, "a");
  assert_non_null(f);
  fputs("pool_size = 2,2\n", f);
  fclose(f);
  p = popen(cmd, "r");
  assert_non_null(p);
  got = fread(out, 1, sizeof out - 1, p);
  out[got] = '\0';
  assert_int_equal(pclose(p), 0);
  if (strstr(out, "notice") || strstr(out, "warning"))
    fail_msg("unexpected log line: %s", out);
  tu_assert_contains(out, "pooling2d");
}

/* What the INI loader itself reads differently from NNTrainer says so:
 * a [LearningRateScheduler] with the optimizer of [Model] (NNTrainer
 * ignores the section then), a relative raw file path (NNTrainer reads it
 * from the working directory). An absolute path is silent. */
static void test_notices_from_loader(void **state) {
  (void)state;
  char data[1024];
  snprintf(data, sizeof data, "%s/d.dat", tu_dir);
  FILE *f = fopen(data, "w");
  assert_non_null(f);
  fclose(f);
  tu_log_start();
  nnt_model *m = compile_ini("[Model]\ntype = NeuralNetwork\nbatch_size = 1\noptimizer = sgd\n"
                             "[LearningRateScheduler]\ntype = constant\nlearning_rate = 0.1\n"
                             "[train_set]\ntype = file\npath = d.dat\n"
                             "[in]\ntype = input\ninput_shape = 1:1:4\n");
  tu_log_expect(NNT_LOG_NOTICE, "[learningratescheduler] applies to the optimizer given in "
                "[Model]", "NNTrainer ignores", NULL);
  tu_log_expect(NNT_LOG_NOTICE, "[train_set] path: 'd.dat' is read as", "INI file's folder",
                "working directory");
  if (tu_logged.n != 2) {
    tu_log_print();
    fail_msg("%d messages, 2 expected", tu_logged.n);
  }
  nnt_model_destroy(m);
  memset(&tu_logged, 0, sizeof tu_logged);
  char text[2048];
  snprintf(text, sizeof text,
           "[Model]\ntype = NeuralNetwork\nbatch_size = 1\n[Optimizer]\ntype = sgd\n"
           "[LearningRateScheduler]\ntype = constant\n"
           "learning_rate = 0.1\n[train_set]\ntype = file\npath = %s\n"
           "[in]\ntype = input\ninput_shape = 1:1:4\n",
           data);
  m = compile_ini(text);
  assert_int_equal(tu_logged.n, 0);
  nnt_model_destroy(m);
  tu_log_stop();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pooling_stride_default),
      cmocka_unit_test(test_concat_axis_default),
      cmocka_unit_test(test_other_shape_defaults),
      cmocka_unit_test(test_buffer_size_default),
      cmocka_unit_test(test_shuffle_default_by_mode),
      cmocka_unit_test(test_bias_keys_ignored),
      cmocka_unit_test(test_notices_from_ini),
      cmocka_unit_test(test_notices_from_capi),
      cmocka_unit_test(test_examples_quiet),
      cmocka_unit_test(test_cli_prints_notices),
      cmocka_unit_test(test_notices_from_loader),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
