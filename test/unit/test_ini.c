/* The INI loader: a full model, case-insensitivity, overrides, the older
 * forms ([Dataset], optimizer keys in [Model]), and every error naming the
 * file, the section and the key; no leaks when any allocation fails. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"


static const char *full_ini =
    "# a comment\n"
    "[Model]\nType = NeuralNetwork\nEpochs = 3\nbatch_size = 16\nloss = cross\n"
    "save_path = w.bin\nmemory_optimization = false\n\n"
    "[Optimizer]\ntype = Adam\nlearning_rate = 0.002\nbeta1 = 0.8\n\n"
    "[LearningRateScheduler]\ntype = step\nlearning_rate = 0.1,0.01\niteration = 100\n\n"
    "[train_set]\ntype = file\npath = train.dat\nbuffer_size = 3\n\n"
    "[test_set]\ntype = synthetic\nsamples = 32\n\n"
    "[Input]\ntype = input\ninput_shape = 1:1:6\n\n"
    "; another comment\n"
    "[FC1]\ntype = Fully_Connected\nUnit = 8\nactivation = ReLU\n"
    "weight_initializer = he_normal\n\n"
    "[out]\ntype = fully_connected\nunit = 3\nactivation = softmax\ninput_layers = fc1\n";

/* A fresh model with tu_dir as its base tu_dir, loaded from path. */
static int load(const char *path, const char *const *ov, size_t n, nnt_model **m, nnt_err *e) {
  assert_int_equal(nnt_model_create(m, e), NNT_OK);
  assert_int_equal(nnt_model_set_base_dir(*m, tu_dir, e), NNT_OK);
  return nnt_ini_load(*m, path, ov, n, e);
}

static void test_full_model(void **state) {
  (void)state;
  nnt_model *m;
  nnt_err e = {0};
  const char *path = tu_write_text("full.ini", full_ini);
  if (load(path, NULL, 0, &m, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(nnt_model_epochs(m), 3);
  assert_int_equal(nnt_model_batch_size(m), 16);
  assert_int_equal(nnt_model_layer_count(m), 3);
  static const char *names[] = {"input", "fc1", "out"};
  for (size_t i = 0; i < 3; i++)
    assert_string_equal(nnt_model_layer_at(m, i)->name, names[i]);
  assert_string_equal(nnt_model_layer_at(m, 1)->ops->type, "fully_connected");
  assert_int_equal(nnt_model_layer_at(m, 1)->activation, NNT_ACT_RELU);
  assert_string_equal(nnt_model_layer_at(m, 2)->input_names[0], "fc1");
  nnt_optimizer *o = nnt_model_optimizer(m);
  assert_non_null(o);
  assert_int_equal(o->type, NNT_OPT_ADAM);
  assert_float_equal(o->learning_rate, 0.002f, 1e-9);
  assert_float_equal(o->beta1, 0.8f, 1e-9);
  assert_float_equal(o->beta2, 0.999f, 1e-9);
  assert_non_null(o->sched);
  assert_int_equal(o->sched->type, NNT_LRS_STEP);
  assert_float_equal(nnt_lrs_get(o->sched, 100), 0.1f, 1e-9);
  assert_float_equal(nnt_lrs_get(o->sched, 101), 0.01f, 1e-9);
  assert_non_null(nnt_model_dataset(m, NNT_DS_TRAIN));
  assert_null(nnt_model_dataset(m, NNT_DS_VALID));
  assert_non_null(nnt_model_dataset(m, NNT_DS_TEST));
  assert_false(m->memory_optimization);
  /* relative paths resolve against the INI's folder */
  char want[1100];
  snprintf(want, sizeof want, "%s/w.bin", tu_dir);
  assert_string_equal(m->save_path, want);
  assert_int_equal(nnt_model_compile(m, &e), NNT_OK);
  nnt_model_destroy(m);
}

static void test_case_insensitive(void **state) {
  (void)state;
  const char *path = tu_write_text(
      "case.ini", "[MODEL]\nTYPE = NEURALNETWORK\nEPOCHS = 2\nBatch_Size = 4\nLOSS = CROSS\n"
                  "MEMORY_OPTIMIZATION = FALSE\n[OPTIMIZER]\nTYPE = SGD\nLearning_Rate = 0.5\n"
                  "[Train_Set]\nTYPE = SYNTHETIC\nSAMPLES = 8\nSHUFFLE = False\n"
                  "[InPut]\nTYPE = INPUT\nINPUT_SHAPE = 1:1:4\n"
                  "[Out]\nTYPE = FULLY_CONNECTED\nUNIT = 2\nACTIVATION = SOFTMAX\n"
                  "Input_Layers = INPUT\nWeight_Initializer = XAVIER_NORMAL\n");
  nnt_model *m;
  nnt_err e = {0};
  if (load(path, NULL, 0, &m, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(nnt_model_epochs(m), 2);
  assert_int_equal(nnt_model_batch_size(m), 4);
  assert_false(m->memory_optimization);
  assert_int_equal(m->loss, NNT_LOSS_CROSS);
  assert_int_equal(nnt_model_optimizer(m)->type, NNT_OPT_SGD);
  assert_float_equal(nnt_model_optimizer(m)->learning_rate, 0.5f, 1e-9);
  /* section names become lowercase layer names */
  assert_string_equal(nnt_model_layer_at(m, 0)->name, "input");
  assert_string_equal(nnt_model_layer_at(m, 1)->name, "out");
  assert_non_null(nnt_model_find_layer(m, "OUT"));
  assert_int_equal(nnt_model_layer_at(m, 1)->activation, NNT_ACT_SOFTMAX);
  assert_int_equal(nnt_model_compile(m, &e), NNT_OK);
  nnt_model_destroy(m);
}

static void test_overrides(void **state) {
  (void)state;
  nnt_model *m;
  nnt_err e = {0};
  char path[1024];
  snprintf(path, sizeof path, "%s", tu_write_text("full.ini", full_ini));
  const char *ov[] = {"epochs=7", "Model.batch_size = 2", "FC1.unit=5",
                      "Optimizer.learning_rate=0.5", "out.disable_bias=true", "save_path="};
  if (load(path, ov, NNT_ARRAY_LEN(ov), &m, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(nnt_model_epochs(m), 7);
  assert_int_equal(nnt_model_batch_size(m), 2);
  assert_float_equal(nnt_model_optimizer(m)->learning_rate, 0.5f, 1e-9);
  assert_null(m->save_path); /* an empty override clears it */
  assert_int_equal(nnt_model_compile(m, &e), NNT_OK);
  assert_int_equal(m->nodes[1].fc.out_dim[0].w, 5);
  nnt_model_destroy(m);

  /* an override's section must exist in the file */
  const char *bad[] = {"nosuch.unit=5"};
  assert_int_equal(load(path, bad, 1, &m, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "override 'nosuch.unit=5'");
  tu_assert_contains(e.msg, "no section [nosuch]");
  tu_assert_contains(e.msg, "full.ini");
  nnt_model_destroy(m);
  /* a bad value names the file, section, key and the override */
  const char *bad2[] = {"fc1.unit=abc"};
  assert_int_equal(load(path, bad2, 1, &m, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, path);
  tu_assert_contains(e.msg, "[fc1] unit: value 'abc' is not a non-negative integer");
  tu_assert_contains(e.msg, "(from override 'fc1.unit=abc')");
  nnt_model_destroy(m);
  const char *bad3[] = {"epoch=2"};
  assert_int_equal(load(path, bad3, 1, &m, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "[model] unknown key 'epoch' (from override 'epoch=2')");
  nnt_model_destroy(m);
  static const char *malformed[] = {"epochs", "=3", ".unit=3", "fc1.=3", " = 3"};
  for (size_t i = 0; i < NNT_ARRAY_LEN(malformed); i++) {
    assert_int_equal(load(path, &malformed[i], 1, &m, &e), NNT_ERR_INVAL);
    tu_assert_contains(e.msg, "override '");
    tu_assert_contains(e.msg, malformed[i]);
    nnt_model_destroy(m);
  }
}

typedef struct err_case {
  const char *from, *to; /* replace from by to in full_ini */
  int code;
  const char *expect;    /* "[section] key: what" */
} err_case;

static const err_case err_cases[] = {
    {"Unit = 8", "Units = 8", NNT_ERR_INVAL, "[fc1] unknown key 'units'"},
    {"Unit = 8", "unit = abc", NNT_ERR_INVAL,
     "[fc1] unit: value 'abc' is not a non-negative integer"},
    {"Unit = 8", "unit = -3", NNT_ERR_INVAL, "[fc1] unit: value '-3'"},
    {"Unit = 8", "unit =", NNT_ERR_INVAL, "[fc1] unit: value ''"},
    {"input_shape = 1:1:6", "input_shape = 3:x:4", NNT_ERR_INVAL,
     "[input] input_shape: value '3:x:4' is not a shape"},
    {"type = Fully_Connected", "type = fully_disconnected", NNT_ERR_INVAL,
     "[fc1] type: unknown layer type 'fully_disconnected'"},
    {"type = Fully_Connected\n", "", NNT_ERR_INVAL, "[fc1] type: required key is missing"},
    {"activation = ReLU", "activation = sparkle", NNT_ERR_INVAL,
     "[fc1] activation: unknown activation 'sparkle'"},
    {"input_layers = fc1", "input_layers = fc1(x)", NNT_ERR_INVAL, "[out] input_layers: "},
    {"Unit = 8", "Unit = 8\nname = other", NNT_ERR_INVAL,
     "[fc1] name: 'other' differs from the section name"},
    {"Unit = 8", "Unit = 8\nbackbone = base.ini", NNT_ERR_NOT_SUPPORTED,
     "[fc1] backbone: backbone sections are not supported"},
    {"Epochs = 3", "Epochs = many", NNT_ERR_INVAL, "[model] epochs: value 'many'"},
    {"Epochs = 3", "Epoch = 3", NNT_ERR_INVAL, "[model] unknown key 'epoch'"},
    {"batch_size = 16", "batch_size = 0", NNT_ERR_INVAL, "[model] batch_size: must be positive"},
    {"Epochs = 3", "Epochs = 0", NNT_ERR_INVAL, "[model] epochs: must be positive"},
    {"Epochs = 3", "Epochs = 3\nmemory_planner = tetris", NNT_ERR_INVAL,
     "[model] memory_planner: unknown planner 'tetris' (basic, pool, best_fit)"},
    {"loss = cross", "loss = hinge", NNT_ERR_INVAL, "[model] loss: unknown loss 'hinge'"},
    {"Type = NeuralNetwork", "Type = KNN", NNT_ERR_INVAL, "[model] type: model type 'KNN'"},
    {"memory_optimization = false", "memory_swap = true", NNT_ERR_NOT_SUPPORTED,
     "[model] memory_swap: NNTrainer's key is supported only with the value 'false'"},
    {"memory_optimization = false", "save_best_path = best.bin", NNT_ERR_NOT_SUPPORTED,
     "[model] save_best_path: NNTrainer's key is not supported"},
    {"memory_optimization = false", "learning_rate = 0.1", NNT_ERR_INVAL,
     "[model] learning_rate: an optimizer key"},
    {"memory_optimization = false", "optimizer = sgd", NNT_ERR_INVAL,
     "[model] optimizer: the optimizer is given twice"},
    {"[Model]\n", "[Modell]\n", NNT_ERR_INVAL, "no [Model] section"},
    {"type = Adam", "type = sparkle", NNT_ERR_INVAL,
     "[optimizer] type: unknown optimizer type 'sparkle'"},
    {"beta1 = 0.8", "gamma = 0.8", NNT_ERR_INVAL, "[optimizer] unknown key 'gamma'"},
    {"beta1 = 0.8", "beta1 = 1.5", NNT_ERR_INVAL, "[optimizer] beta1: value '1.5'"},
    {"beta1 = 0.8", "decay_rate = 0.5", NNT_ERR_INVAL,
     "[optimizer] decay_steps: required key is missing"},
    {"type = step", "type = wavy", NNT_ERR_INVAL, "[learningratescheduler] type: "},
    {"type = step\n", "", NNT_ERR_INVAL, "[learningratescheduler] type: required key is missing"},
    {"iteration = 100", "iteration = 100,200", NNT_ERR_INVAL,
     "[learningratescheduler] iteration: "},
    {"iteration = 100", "iteration = 100\nmax_learning_rate = 1", NNT_ERR_INVAL,
     "[learningratescheduler] unknown key 'max_learning_rate'"},
    {"[Optimizer]\ntype = Adam\nlearning_rate = 0.002\nbeta1 = 0.8\n", "", NNT_ERR_INVAL,
     "[learningratescheduler] needs an optimizer"},
    {"beta1 = 0.8", "decay_rate = 0.5\ndecay_steps = 10", NNT_ERR_INVAL,
     "[learningratescheduler] cannot be combined with the optimizer's decay_rate"},
    {"type = file", "type = tape", NNT_ERR_INVAL,
     "[train_set] type: unknown dataset type 'tape'"},
    {"type = file\n", "", NNT_ERR_INVAL, "[train_set] type: required key is missing"},
    {"path = train.dat", "paths = train.dat", NNT_ERR_INVAL,
     "[train_set] path: required key is missing"},
    {"buffer_size = 3", "buffer_size = 0", NNT_ERR_INVAL, "[train_set] buffer_size: value '0'"},
    {"buffer_size = 3", "buffer = 3", NNT_ERR_INVAL, "[train_set] unknown key 'buffer'"},
    {"samples = 32", "samples = lots", NNT_ERR_INVAL, "[test_set] samples: value 'lots'"},
    {"samples = 32", "samples = 0", NNT_ERR_INVAL, "[test_set] samples: "},
    {"type = synthetic", "type = idx\nimages = i.gz", NNT_ERR_INVAL,
     "[test_set] labels: required key is missing"},
    /* numbers that do not fit their type */
    {"learning_rate = 0.002", "learning_rate = 1e39", NNT_ERR_INVAL,
     "[optimizer] learning_rate: value '1e39' is out of float32's range"},
    {"beta1 = 0.8", "beta1 = 1e-50", NNT_ERR_INVAL,
     "[optimizer] beta1: value '1e-50' is too small for float32"},
    {"Unit = 8", "Unit = 4294967296", NNT_ERR_INVAL,
     "[fc1] unit: value '4294967296' is out of range (0 to 4294967295)"},
    {"samples = 32", "samples = 99999999999999999999", NNT_ERR_INVAL,
     "[test_set] samples: value '99999999999999999999' is out of range"},
    {"Epochs = 3", "Epochs = 3x", NNT_ERR_INVAL, "[model] epochs: value '3x'"},
    {"input_shape = 1:1:6", "input_shape = 1::6", NNT_ERR_INVAL,
     "[input] input_shape: value '1::6' is not a shape"},
    {"learning_rate = 0.1,0.01", "learning_rate = 0.1,,0.01", NNT_ERR_INVAL,
     "[learningratescheduler] learning_rate: an empty item in '0.1,,0.01'"},
    {"iteration = 100", "iteration = 100,", NNT_ERR_INVAL,
     "[learningratescheduler] iteration: an empty item"},
    {"[test_set]\ntype = synthetic\nsamples = 32\n", "[Dataset]\nTrainData = t.dat\n",
     NNT_ERR_INVAL, "[dataset] traindata: the train_set is given twice, here and in [train_set]"},
};

static void test_errors(void **state) {
  (void)state;
  for (size_t i = 0; i < NNT_ARRAY_LEN(err_cases); i++) {
    const err_case *k = &err_cases[i];
    char text[4096], path[1024];
    const char *at = strstr(full_ini, k->from);
    assert_non_null(at);
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - full_ini), full_ini, k->to,
             at + strlen(k->from));
    snprintf(path, sizeof path, "%s", tu_write_text("bad.ini", text));
    nnt_model *m;
    nnt_err e = {0};
    int rc = load(path, NULL, 0, &m, &e);
    if (rc != k->code)
      fail_msg("'%s' -> '%s': code %d, expected %d (%s)", k->from, k->to, rc, k->code, e.msg);
    /* "<path as given>: [section] key: what" */
    if (strncmp(e.msg, path, strlen(path)) || strncmp(e.msg + strlen(path), ": ", 2))
      fail_msg("'%s' -> '%s': message does not start with the path: %s", k->from, k->to,
               e.msg);
    tu_assert_contains(e.msg, k->expect);
    nnt_model_destroy(m);
  }
}

/* Loading name (text of len bytes written to tu_dir, or name as is when text
 * is NULL) fails with code and a message starting with the path and
 * holding what. */
static void expect_file_error_n(const char *name, const char *text, size_t len, int code,
                                const char *what) {
  nnt_model *m;
  nnt_err e = {0};
  char path[1024];
  if (text) {
    snprintf(path, sizeof path, "%s/%s", tu_dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
  } else {
    snprintf(path, sizeof path, "%s", name);
  }
  assert_int_equal(load(path, NULL, 0, &m, &e), code);
  if (strncmp(e.msg, path, strlen(path)))
    fail_msg("message does not start with the path %s: %s", path, e.msg);
  tu_assert_contains(e.msg, what);
  nnt_model_destroy(m);
  /* a NULL error record is allowed */
  assert_int_equal(nnt_model_create(&m, NULL), NNT_OK);
  assert_int_equal(nnt_ini_load(m, path, NULL, 0, NULL), code);
  nnt_model_destroy(m);
}

static void expect_file_error(const char *name, const char *text, int code, const char *what) {
  expect_file_error_n(name, text, text ? strlen(text) : 0, code, what);
}

/* The loader never prints, not even for a syntax error. */
static void test_nothing_printed(void **state) {
  (void)state;
  char errpath[1100];
  snprintf(errpath, sizeof errpath, "%s/stderr.txt", tu_dir);
  const char *bad = tu_write_text("broken.ini", "[Model\nepochs = 1\n");
  fflush(stderr);
  int saved = dup(2);
  FILE *f = fopen(errpath, "w");
  assert_true(saved >= 0 && f);
  dup2(fileno(f), 2);
  nnt_model *m;
  nnt_err e = {0};
  int rc = load(bad, NULL, 0, &m, &e);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  fclose(f);
  nnt_model_destroy(m);
  assert_int_equal(rc, NNT_ERR_INVAL);
  struct stat st;
  assert_int_equal(stat(errpath, &st), 0);
  assert_int_equal(st.st_size, 0);
}

static void test_file_errors(void **state) {
  (void)state;
  char path[1024];
  snprintf(path, sizeof path, "%s/missing.ini", tu_dir);
  expect_file_error(path, NULL, NNT_ERR_IO, "cannot read: No such file");
  expect_file_error(tu_dir, NULL, NNT_ERR_IO, "not a regular file");
  expect_file_error("broken.ini", "[Model\nepochs = 1\n", NNT_ERR_INVAL,
                    ": line 1: '[Model' is not a [section], a key = value or a comment");
  /* a trailing backslash continues a line, as iniparser reads it */
  expect_file_error("broken2.ini", "[Model]\nepochs = 1\n  \nloss = \\\n  mse\nfoo bar\n",
                    NNT_ERR_INVAL, ": line 6: [model] 'foo bar' is not a [section]");
  expect_file_error("broken3.ini", "[Model]\n= 3\n", NNT_ERR_INVAL,
                    ": line 2: [model] '= 3' has no key before '='");
  expect_file_error("outside.ini", "epochs = 1\n[Model]\nbatch_size = 2\n", NNT_ERR_INVAL,
                    ": line 1: key 'epochs' comes before any [section]");
  /* iniparser merged these silently; the reader refuses them */
  expect_file_error("dupsec.ini", "[Model]\nepochs = 1\n[in]\ntype = input\n[IN]\ntype = input\n",
                    NNT_ERR_INVAL, ": line 5: duplicate section [in], already given on line 3");
  expect_file_error("dupkey.ini", "[Model]\nepochs = 1\nEpochs = 2\n[in]\ntype = input\n",
                    NNT_ERR_INVAL,
                    ": line 3: [model] epochs: duplicate key, already given on line 2");
  /* iniparser cut the line at the NUL and read "epochs = 1" */
  expect_file_error_n("nul.ini", "[Model]\nepochs = 1\0junk\n[in]\ntype = input\n", 42,
                      NNT_ERR_INVAL, ": line 2: binary content (byte 0x00 at column 11)");
  expect_file_error("nolayers.ini", "[Model]\nepochs = 1\n[Optimizer]\ntype = sgd\n",
                    NNT_ERR_INVAL, ": no layer sections");
  expect_file_error("empty.ini", "", NNT_ERR_INVAL, "no [Model] section");
}

/* [Dataset] with TrainData, ValidData, BufferSize and LabelData. */
static void test_legacy_dataset_section(void **state) {
  (void)state;
  const char *head = "[Model]\nbatch_size = 2\nloss = mse\n[Dataset]\n";
  const char *tail = "[in]\ntype = input\ninput_shape = 1:1:2\n";
  char text[1024];
  snprintf(text, sizeof text, "%sTrainData = t.dat\nValidData = v.dat\nBufferSize = 5\n"
           "LabelData = labels.txt\n%s", head, tail);
  const char *path = tu_write_text("legacy.ini", text);
  nnt_model *m;
  nnt_err e = {0};
  if (load(path, NULL, 0, &m, &e))
    fail_msg("%s", e.msg);
  assert_non_null(nnt_model_dataset(m, NNT_DS_TRAIN));
  assert_non_null(nnt_model_dataset(m, NNT_DS_VALID));
  assert_null(nnt_model_dataset(m, NNT_DS_TEST));
  nnt_model_destroy(m);
  static const struct {
    const char *keys, *expect;
  } bad[] = {
      {"ValidData = v.dat\n", "[dataset] traindata: required key is missing"},
      {"TrainData = t.dat\nShuffle = true\n", "[dataset] unknown key 'shuffle'"},
      {"TrainData = t.dat\nBufferSize = 0\n", "[dataset] buffersize: value '0'"},
      {"TrainData = t.dat\nbuffer_size = x\n", "[dataset] buffer_size: value 'x'"},
  };
  for (size_t i = 0; i < NNT_ARRAY_LEN(bad); i++) {
    snprintf(text, sizeof text, "%s%s%s", head, bad[i].keys, tail);
    path = tu_write_text("legacy.ini", text);
    assert_int_equal(load(path, NULL, 0, &m, &e), NNT_ERR_INVAL);
    tu_assert_contains(e.msg, "legacy.ini: ");
    tu_assert_contains(e.msg, bad[i].expect);
    nnt_model_destroy(m);
  }
}

/* The older optimizer keys in [Model], forwarded when `optimizer` is set;
 * a scheduler attaches to that optimizer too. */
static void test_legacy_model_optimizer(void **state) {
  (void)state;
  const char *path = tu_write_text(
      "old.ini", "[Model]\nType = NeuralNetwork\nOptimizer = adam\nLearning_rate = 1e-4\n"
                 "beta1 = 0.85\nbeta2 = 0.99\nepsilon = 1e-6\nloss = mse\n"
                 "[LearningRateScheduler]\ntype = exponential\ndecay_rate = 0.5\n"
                 "decay_steps = 10\n[in]\ntype = input\ninput_shape = 1:1:2\n");
  nnt_model *m;
  nnt_err e = {0};
  if (load(path, NULL, 0, &m, &e))
    fail_msg("%s", e.msg);
  nnt_optimizer *o = nnt_model_optimizer(m);
  assert_non_null(o);
  assert_int_equal(o->type, NNT_OPT_ADAM);
  assert_float_equal(o->learning_rate, 1e-4f, 1e-12);
  assert_float_equal(o->beta1, 0.85f, 1e-9);
  assert_float_equal(o->beta2, 0.99f, 1e-9);
  assert_float_equal(o->epsilon, 1e-6f, 1e-12);
  assert_non_null(o->sched);
  assert_int_equal(o->sched->type, NNT_LRS_EXPONENTIAL);
  nnt_model_destroy(m);
  /* a bad forwarded value is reported in [Model] */
  path = tu_write_text("old.ini", "[Model]\noptimizer = sgd\nlearning_rate = fast\n"
                              "[in]\ntype = input\ninput_shape = 2\n");
  assert_int_equal(load(path, NULL, 0, &m, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "old.ini: line 3: [model] learning_rate: value 'fast'");
  nnt_model_destroy(m);
  path = tu_write_text("old.ini", "[Model]\noptimizer = rmsprop\n[in]\ntype = input\n");
  assert_int_equal(load(path, NULL, 0, &m, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "old.ini: line 2: [model] optimizer: unknown optimizer type 'rmsprop'");
  nnt_model_destroy(m);
}

/* NNTrainer's defaults: [Optimizer] without type is adam; its [Model] keys
 * nntrainer lacks load when they hold the value that means what nntrainer
 * does anyway. */
static void test_nntrainer_defaults(void **state) {
  (void)state;
  const char *path = tu_write_text(
      "defaults.ini", "[Model]\nmemory_swap = false\ntensor_format = nchw\n"
                      "model_tensor_type = FP32-FP32\nloss_scale = 1.0\n"
                      "[Optimizer]\nlearning_rate = 0.01\n[in]\ntype = input\ninput_shape = 2\n");
  nnt_model *m;
  nnt_err e = {0};
  if (load(path, NULL, 0, &m, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(nnt_model_optimizer(m)->type, NNT_OPT_ADAM);
  assert_float_equal(nnt_model_optimizer(m)->learning_rate, 0.01f, 1e-9);
  nnt_model_destroy(m);
}

/* A raw-file train_set with a relative path reads the file next to the INI
 * although the working directory is elsewhere. */
static void test_relative_dataset_path(void **state) {
  (void)state;
  char data[1100];
  snprintf(data, sizeof data, "%s/data.dat", tu_dir);
  FILE *f = fopen(data, "wb");
  assert_non_null(f);
  for (int s = 0; s < 4; s++) {
    float rec[4] = {(float)s, 1.0f - (float)s, s % 2 ? 1.0f : 0.0f, s % 2 ? 0.0f : 1.0f};
    assert_int_equal(fwrite(rec, sizeof rec, 1, f), 1);
  }
  fclose(f);
  const char *path = tu_write_text(
      "rel.ini", "[Model]\nepochs = 1\nbatch_size = 2\nloss = cross\nseed = 3\n"
                 "[Optimizer]\ntype = sgd\n[train_set]\ntype = file\npath = data.dat\n"
                 "shuffle = false\n[in]\ntype = input\ninput_shape = 1:1:2\n"
                 "[fc]\ntype = fully_connected\nunit = 2\nactivation = softmax\n");
  nnt_model *m;
  nnt_err e = {0};
  if (load(path, NULL, 0, &m, &e) || nnt_model_compile(m, &e) || nnt_model_initialize(m, &e) ||
      nnt_model_train(m, NULL, NULL, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(nnt_dataset_samples(nnt_model_dataset(m, NNT_DS_TRAIN)), 4);
  nnt_model_destroy(m);
}

/* Fail each allocation in turn: every failure is reported, nothing leaks
 * (LeakSanitizer checks at exit) and the model is still destroyable. */
static void test_allocation_failures(void **state) {
  (void)state;
  char path[1024];
  snprintf(path, sizeof path, "%s", tu_write_text("full.ini", full_ini));
  const char *ov[] = {"fc1.unit=4", "epochs=2"};
  int done = 0;
  for (long n = 0; n < 2000 && !done; n++) {
    nnt_model *m;
    nnt_err e = {0};
    assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
    assert_int_equal(nnt_model_set_base_dir(m, tu_dir, &e), NNT_OK);
    nnt_alloc_fail_after(n);
    int rc = nnt_ini_load(m, path, ov, 2, &e);
    nnt_alloc_fail_after(-1);
    if (rc == NNT_OK) {
      done = 1;
      assert_int_equal(nnt_model_layer_count(m), 3);
    } else {
      assert_int_equal(rc, e.code);
      tu_assert_contains(e.msg, "full.ini");
    }
    nnt_model_destroy(m);
  }
  assert_true(done);
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
      cmocka_unit_test_setup_teardown(test_full_model, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_case_insensitive, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_overrides, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_errors, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_nothing_printed, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_file_errors, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_legacy_dataset_section, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_legacy_model_optimizer, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_nntrainer_defaults, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_relative_dataset_path, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_allocation_failures, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_applications_load, tu_dir_setup, tu_dir_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
