/* The INI loader: a full model, overrides, and every error naming the file,
 * the section and the key. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

static char *dir;

static int setup(void **state) {
  (void)state;
  dir = tu_mkdtemp();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  tu_rmdir(dir);
  free(dir);
  return 0;
}

static const char *write_ini(const char *name, const char *text) {
  static char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  return path;
}

static const char *full_ini =
    "[Model]\nType = NeuralNetwork\nEpochs = 3\nbatch_size = 16\nloss = cross\n"
    "save_path = w.bin\nmemory_optimization = false\n\n"
    "[Optimizer]\ntype = Adam\nlearning_rate = 0.002\nbeta1 = 0.8\n\n"
    "[LearningRateScheduler]\ntype = step\nlearning_rate = 0.1,0.01\niteration = 100\n\n"
    "[train_set]\ntype = file\npath = train.dat\nbuffer_size = 3\n\n"
    "[test_set]\ntype = synthetic\nsamples = 32\n\n"
    "[Input]\ntype = input\ninput_shape = 1:1:6\n\n"
    "[FC1]\ntype = Fully_Connected\nUnit = 8\nactivation = ReLU\n"
    "weight_initializer = he_normal\n\n"
    "[out]\ntype = fully_connected\nunit = 3\nactivation = softmax\ninput_layers = fc1\n";

static int load(const char *path, const char *const *ov, size_t n, nnt_model **m, nnt_err *e) {
  assert_int_equal(nnt_model_create(m, e), NNT_OK);
  assert_int_equal(nnt_model_set_base_dir(*m, dir, e), NNT_OK);
  return nnt_ini_load(*m, path, ov, n, e);
}

static void test_full_model(void **state) {
  (void)state;
  nnt_model *m;
  nnt_err e = {0};
  const char *path = write_ini("full.ini", full_ini);
  if (load(path, NULL, 0, &m, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(nnt_model_epochs(m), 3);
  assert_int_equal(nnt_model_batch_size(m), 16);
  assert_int_equal(nnt_model_layer_count(m), 3);
  assert_string_equal(nnt_model_layer_at(m, 1)->name, "fc1");
  assert_int_equal(nnt_model_layer_at(m, 1)->activation, NNT_ACT_RELU);
  nnt_optimizer *o = nnt_model_optimizer(m);
  assert_non_null(o);
  assert_int_equal(o->type, NNT_OPT_ADAM);
  assert_float_equal(o->learning_rate, 0.002f, 1e-9);
  assert_float_equal(o->beta1, 0.8f, 1e-9);
  assert_non_null(o->sched);
  assert_non_null(nnt_model_dataset(m, NNT_DS_TRAIN));
  assert_non_null(nnt_model_dataset(m, NNT_DS_TEST));
  assert_null(nnt_model_dataset(m, NNT_DS_VALID));
  assert_false(m->memory_optimization);
  /* relative paths resolve against the INI's folder */
  char want[1100];
  snprintf(want, sizeof want, "%s/w.bin", dir);
  assert_string_equal(m->save_path, want);
  assert_int_equal(nnt_model_compile(m, &e), NNT_OK);
  nnt_model_destroy(m);
}

static void test_overrides(void **state) {
  (void)state;
  nnt_model *m;
  nnt_err e = {0};
  const char *path = write_ini("full.ini", full_ini);
  const char *ov[] = {"epochs=7", "FC1.unit=5", "Optimizer.learning_rate=0.5"};
  if (load(path, ov, 3, &m, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(nnt_model_epochs(m), 7);
  assert_float_equal(nnt_model_optimizer(m)->learning_rate, 0.5f, 1e-9);
  assert_int_equal(nnt_model_compile(m, &e), NNT_OK);
  assert_int_equal(m->nodes[1].fc.out_dim[0].w, 5);
  nnt_model_destroy(m);
  const char *bad[] = {"nosuch.unit=5"};
  assert_int_equal(load(path, bad, 1, &m, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "nosuch");
  nnt_model_destroy(m);
  const char *bad2[] = {"fc1.unit=abc"};
  assert_int_equal(load(path, bad2, 1, &m, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "[fc1] key 'unit'");
  nnt_model_destroy(m);
}

/* Replace `from` by `to` in the full INI, load, and check the message. */
static void expect_error(const char *from, const char *to, const char *sec, const char *key) {
  char text[4096];
  const char *at = strstr(full_ini, from);
  assert_non_null(at);
  snprintf(text, sizeof text, "%.*s%s%s", (int)(at - full_ini), full_ini, to, at + strlen(from));
  const char *path = write_ini("bad.ini", text);
  nnt_model *m;
  nnt_err e = {0};
  int rc = load(path, NULL, 0, &m, &e);
  if (rc == NNT_OK)
    fail_msg("'%s' -> '%s' loaded without error", from, to);
  tu_assert_contains(e.msg, "bad.ini");
  tu_assert_contains(e.msg, sec);
  tu_assert_contains(e.msg, key);
  nnt_model_destroy(m);
}

static void test_errors(void **state) {
  (void)state;
  expect_error("Unit = 8", "Units = 8", "[fc1]", "units");
  expect_error("Unit = 8", "unit = abc", "[fc1]", "unit");
  expect_error("Unit = 8", "unit = -3", "[fc1]", "unit");
  expect_error("input_shape = 1:1:6", "input_shape = 3:x:4", "[input]", "input_shape");
  expect_error("type = Fully_Connected", "type = fully_disconnected", "[fc1]", "type");
  expect_error("type = Fully_Connected\n", "", "[fc1]", "type");
  expect_error("Epochs = 3", "Epochs = many", "[model]", "epochs");
  expect_error("Epochs = 3", "Epoch = 3", "[model]", "epoch");
  expect_error("type = Adam", "type = sparkle", "[optimizer]", "type");
  expect_error("beta1 = 0.8", "gamma = 0.8", "[optimizer]", "gamma");
  expect_error("iteration = 100", "iteration = 100,200", "[learningratescheduler]", "iteration");
  expect_error("type = file", "type = tape", "[train_set]", "type");
  expect_error("path = train.dat", "paths = train.dat", "[train_set]", "path");
  expect_error("activation = ReLU", "activation = sparkle", "[fc1]", "activation");
  expect_error("loss = cross", "loss = hinge", "[model]", "loss");
  expect_error("[Optimizer]\ntype = Adam\nlearning_rate = 0.002\nbeta1 = 0.8\n\n", "",
               "[learningratescheduler]", "Optimizer");
}

static void test_file_errors(void **state) {
  (void)state;
  nnt_model *m;
  nnt_err e = {0};
  char path[1024];
  snprintf(path, sizeof path, "%s/missing.ini", dir);
  assert_int_equal(load(path, NULL, 0, &m, &e), NNT_ERR_IO);
  tu_assert_contains(e.msg, "missing.ini");
  nnt_model_destroy(m);
  const char *bad = write_ini("broken.ini", "[Model\nepochs = 1\n");
  assert_int_not_equal(load(bad, NULL, 0, &m, &e), NNT_OK);
  tu_assert_contains(e.msg, "broken.ini");
  nnt_model_destroy(m);
}

static void test_legacy_dataset_section(void **state) {
  (void)state;
  char text[4096];
  snprintf(text, sizeof text, "%s",
           "[Model]\nbatch_size = 2\nloss = mse\n[Dataset]\nTrainData = t.dat\n"
           "ValidData = v.dat\nBufferSize = 5\n[in]\ntype = input\ninput_shape = 1:1:2\n");
  const char *path = write_ini("legacy.ini", text);
  nnt_model *m;
  nnt_err e = {0};
  if (load(path, NULL, 0, &m, &e))
    fail_msg("%s", e.msg);
  assert_non_null(nnt_model_dataset(m, NNT_DS_TRAIN));
  assert_non_null(nnt_model_dataset(m, NNT_DS_VALID));
  assert_null(nnt_model_dataset(m, NNT_DS_TEST));
  nnt_model_destroy(m);
}

static void test_applications_load(void **state) {
  (void)state;
  nnt_model *m;
  nnt_err e = {0};
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  assert_int_equal(nnt_model_set_base_dir(m, NNT_SOURCE_DIR "/Applications/FashionMNIST", &e),
                   NNT_OK);
  if (nnt_ini_load(m, NNT_SOURCE_DIR "/Applications/FashionMNIST/mlp.ini", NULL, 0, &e) ||
      nnt_model_compile(m, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(m->n_inputs, 1);
  assert_int_equal(m->input_dim[0].w, 784);
  assert_int_equal(m->label_dim[0].w, 10);
  nnt_model_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_full_model, setup, teardown),
      cmocka_unit_test_setup_teardown(test_overrides, setup, teardown),
      cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_file_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_legacy_dataset_section, setup, teardown),
      cmocka_unit_test_setup_teardown(test_applications_load, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
