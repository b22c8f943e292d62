/* Selecting a backend: the `engine` key on [Model] and on layers (INI,
 * overrides, the CLI, the C API, the INI writer), the compile's choice of
 * backend, and the supports(op) gate: a test backend that refuses some ops
 * makes compile name the layer or the optimizer and the op (test_kops.c
 * checks that the ops declared are those called). */
#include "test_util.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "capi_harness.h"
#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

/* Here no GPU can be had: a build with Vulkan is pointed at a loader that
 * does not exist (main), a build without says so. */
#ifdef NNT_HAVE_VULKAN
#define NO_GPU "engine 'gpu': no Vulkan loader (/nonexistent/libvulkan.so.1)"
#else
#define NO_GPU "engine 'gpu': this build has no GPU backend"
#endif

static int setup(void **state) { return tu_dir_setup(state); }
static int teardown(void **state) { return tu_dir_teardown(state); }

static const char *mlp_ini =
    "[Model]\ntype = NeuralNetwork\nepochs = 1\nbatch_size = 4\nloss = cross\n%s\n"
    "[Optimizer]\ntype = %s\nlearning_rate = 0.01\n\n"
    "[train_set]\ntype = synthetic\nsamples = 16\n\n"
    "[in]\ntype = input\ninput_shape = 1:1:8\n\n"
    "[fc1]\ntype = fully_connected\nunit = 6\nactivation = relu\n%s\n"
    "[out]\ntype = fully_connected\nunit = 3\nactivation = softmax\n";

/* The MLP with extra [Model] lines, optimizer type and [fc1] lines. */
static const char *mlp(const char *model, const char *opt, const char *fc1) {
  static char buf[2048];
  snprintf(buf, sizeof buf, mlp_ini, model, opt, fc1);
  return buf;
}

/* A model loaded from text (not compiled); load errors are the caller's. */
static int load(const char *text, nnt_model **m, nnt_err *e) {
  const char *path = tu_write_text("model.ini", text);
  assert_int_equal(nnt_model_create(m, e), NNT_OK);
  assert_int_equal(nnt_model_set_base_dir(*m, tu_dir, e), NNT_OK);
  return nnt_ini_load(*m, path, NULL, 0, e);
}

static nnt_model *load_ok(const char *text) {
  nnt_model *m;
  nnt_err e = {0};
  if (load(text, &m, &e))
    fail_msg("%s", e.msg);
  return m;
}

/* ---- the key ------------------------------------------------------------- */

static void test_model_engine_values(void **state) {
  (void)state;
  nnt_model *m;
  nnt_err e = {0};
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  assert_int_equal(m->engine_set, 0);
  const char *ok[] = {"cpu", "CPU", "Gpu", "qnn", "QNN"};
  const nnt_engine want[] = {NNT_ENGINE_CPU, NNT_ENGINE_CPU, NNT_ENGINE_GPU, NNT_ENGINE_QNN,
                             NNT_ENGINE_QNN};
  for (size_t i = 0; i < NNT_ARRAY_LEN(ok); i++) {
    assert_int_equal(nnt_model_set_property(m, "engine", ok[i], &e), NNT_OK);
    assert_int_equal(m->engine, want[i]);
    assert_int_equal(m->engine_set, 1);
  }
  const char *bad[] = {"tpu", "", "cpu ", "gpu0"};
  for (size_t i = 0; i < NNT_ARRAY_LEN(bad); i++) {
    assert_int_equal(nnt_model_set_property(m, "ENGINE", bad[i], &e), NNT_ERR_INVAL);
    tu_assert_contains(e.msg, "key 'engine'");
    char q[32];
    snprintf(q, sizeof q, "'%s'", bad[i]);
    tu_assert_contains(e.msg, q);
    tu_assert_contains(e.msg, "cpu, gpu, qnn");
    assert_int_equal(m->engine, NNT_ENGINE_QNN); /* unchanged */
  }
  nnt_model_destroy(m);
}

static void test_layer_engine_values(void **state) {
  (void)state;
  nnt_layer *l;
  nnt_err e = {0};
  assert_int_equal(nnt_layer_create("fully_connected", &l, &e), NNT_OK);
  assert_int_equal(l->has_engine, 0);
  assert_int_equal(nnt_layer_set_property(l, "Engine", "GPU", &e), NNT_OK);
  assert_int_equal(l->engine, NNT_ENGINE_GPU);
  assert_true(nnt_layer_has_key(l, "engine"));
  assert_int_equal(nnt_layer_set_property(l, "engine", "npu", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "key 'engine': unknown engine 'npu'");
  assert_int_equal(l->engine, NNT_ENGINE_GPU);
  nnt_layer_destroy(l);
}

/* Unknown values are refused when the file is read, naming the file, the
 * line, the section, the key and the value. */
static void test_ini_refuses_unknown_engine(void **state) {
  (void)state;
  nnt_model *m;
  nnt_err e = {0};
  assert_int_equal(load(mlp("engine = tpu\n", "sgd", ""), &m, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "model.ini: line 6: [model] engine: unknown engine 'tpu'");
  nnt_model_destroy(m);
  assert_int_equal(load(mlp("", "sgd", "engine = vulkan\n"), &m, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "line 23: [fc1] engine: unknown engine 'vulkan'");
  nnt_model_destroy(m);
}

/* ---- the choice at compile ---------------------------------------------- */

static void test_compile_engines(void **state) {
  (void)state;
  nnt_err e = {0};
  /* cpu, in any case, on the model and on a layer */
  nnt_model *m = load_ok(mlp("engine = Cpu\n", "adam", "engine = CPU\n"));
  assert_int_equal(nnt_model_compile(m, &e), NNT_OK);
  assert_string_equal(m->be->name, "cpu");
  assert_ptr_equal(m->k, m->be->k);
  nnt_model_destroy(m);

  const char *cases[][3] = {
      /* [Model] lines, [fc1] lines, the message */
      {"engine = gpu\n", "", "[Model] " NO_GPU},
      {"engine = QNN\n", "", "[Model] engine 'qnn': this build has no QNN backend"},
      {"", "engine = gpu\n", "layer 'fc1': " NO_GPU},
      {"engine = cpu\n", "engine = qnn\n", "layer 'fc1': engine 'qnn': this build has no QNN"},
  };
  for (size_t i = 0; i < NNT_ARRAY_LEN(cases); i++) {
    m = load_ok(mlp(cases[i][0], "adam", cases[i][1]));
    assert_int_equal(nnt_model_compile(m, &e), NNT_ERR_NOT_SUPPORTED);
    tu_assert_contains(e.msg, cases[i][2]);
    assert_false(nnt_model_is_compiled(m));
    /* the model is not stuck: another engine compiles */
    if (cases[i][0][0])
      assert_int_equal(nnt_model_set_property(m, "engine", "cpu", &e), NNT_OK);
    else
      assert_int_equal(nnt_layer_set_property(nnt_model_find_layer(m, "fc1"), "engine", "cpu",
                                              &e), NNT_OK);
    if (i == 3)
      assert_int_equal(nnt_layer_set_property(nnt_model_find_layer(m, "fc1"), "engine", "cpu",
                                              &e), NNT_OK);
    assert_int_equal(nnt_model_compile(m, &e), NNT_OK);
    assert_string_equal(m->be->name, "cpu");
    /* the engine cannot change once compiled */
    assert_int_equal(nnt_model_set_property(m, "engine", "cpu", &e), NNT_ERR_INVAL);
    tu_assert_contains(e.msg, "engine: the model is already compiled");
    nnt_model_destroy(m);
  }
}

/* ---- the CLI and the C API ------------------------------------------------ */


static void test_cli_override(void **state) {
  (void)state;
  char out[16384];
  tu_write_text("m.ini", mlp("", "sgd", ""));
  assert_int_equal(tu_run_cli("train m.ini engine=gpu", out, sizeof out), 1);
  tu_assert_contains(out, "nntrainer: error: [Model] " NO_GPU);
  assert_int_equal(tu_run_cli("summary m.ini Model.engine=QNN", out, sizeof out), 1);
  tu_assert_contains(out, "[Model] engine 'qnn': this build has no QNN backend");
  assert_int_equal(tu_run_cli("train m.ini fc1.engine=gpu", out, sizeof out), 1);
  tu_assert_contains(out, "layer 'fc1': " NO_GPU);
  assert_int_equal(tu_run_cli("train m.ini engine=tpu", out, sizeof out), 1);
  tu_assert_contains(out, "[model] engine: unknown engine 'tpu' (cpu, gpu, qnn) (from "
                          "override 'engine=tpu')");
  int rc = tu_run_cli("train m.ini engine=CPU fc1.engine=cpu", out, sizeof out);
  if (rc)
    fail_msg("exit %d: %s", rc, out);
  assert_int_equal(tu_run_cli("--help", out, sizeof out), 0);
  tu_assert_contains(out, "engine=cpu|gpu|qnn");
}

static void test_capi(void **state) {
  (void)state;
  const char *path = tu_write_text("m.ini", mlp("", "sgd", ""));
  ml_train_model_h model;
  OK(ml_train_model_construct_with_conf(path, &model));
  EXPECT_FAIL(ml_train_model_compile(model, "engine=tpu", NULL), ML_ERROR_INVALID_PARAMETER,
              "unknown engine 'tpu'");
  EXPECT_FAIL(ml_train_model_compile(model, "engine=gpu", NULL), ML_ERROR_NOT_SUPPORTED,
              NO_GPU);
  OK(ml_train_model_compile(model, "engine=cpu", NULL));
  OK(ml_train_model_destroy(model));

  /* a layer's key */
  ml_train_model_h m2;
  ml_train_layer_h in, fc;
  OK(ml_train_model_construct(&m2));
  OK(ml_train_layer_create(&in, ML_TRAIN_LAYER_TYPE_INPUT));
  OK(ml_train_layer_set_property(in, "input_shape=1:1:4", "name=in", NULL));
  OK(ml_train_model_add_layer(m2, in));
  OK(ml_train_layer_create(&fc, ML_TRAIN_LAYER_TYPE_FC));
  EXPECT_FAIL(ml_train_layer_set_property(fc, "engine=cuda", NULL), ML_ERROR_INVALID_PARAMETER,
              "unknown engine 'cuda'");
  OK(ml_train_layer_set_property(fc, "unit=2", "name=fc", "engine=QNN", NULL));
  OK(ml_train_model_add_layer(m2, fc));
  EXPECT_FAIL(ml_train_model_compile(m2, "loss=mse", NULL), ML_ERROR_NOT_SUPPORTED,
              "layer 'fc': engine 'qnn'");
  OK(ml_train_layer_set_property(fc, "engine=cpu", NULL));
  OK(ml_train_model_compile(m2, "loss=mse", NULL));
  OK(ml_train_model_destroy(m2));
  assert_no_handles();
}

/* ---- the INI writer -------------------------------------------------------- */

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  static char buf[8192];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static void test_ini_round_trip(void **state) {
  (void)state;
  nnt_err e = {0};
  char path[1024];
  snprintf(path, sizeof path, "%s/saved.ini", tu_dir);
  /* not given: not written */
  nnt_model *m = load_ok(mlp("", "sgd", ""));
  assert_int_equal(nnt_model_save_ini(m, path, NULL, &e), NNT_OK);
  assert_null(strstr(slurp(path), "engine"));
  nnt_model_destroy(m);
  /* given: written, read back the same, compiles */
  m = load_ok(mlp("engine = GPU\n", "sgd", "engine = Qnn\n"));
  assert_int_equal(nnt_model_save_ini(m, path, NULL, &e), NNT_OK);
  nnt_model_destroy(m);
  const char *text = slurp(path);
  const char *model_line = strstr(text, "engine = gpu\n"), *fc1 = strstr(text, "[fc1]");
  assert_non_null(model_line);
  assert_non_null(fc1);
  assert_true(model_line < strstr(text, "[Optimizer]"));
  assert_non_null(strstr(fc1, "engine = Qnn\n"));
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  assert_int_equal(nnt_ini_load(m, path, NULL, 0, &e), NNT_OK);
  assert_int_equal(m->engine_set, 1);
  assert_int_equal(m->engine, NNT_ENGINE_GPU);
  const nnt_layer *l = nnt_model_find_layer(m, "fc1");
  assert_int_equal(l->has_engine, 1);
  assert_int_equal(l->engine, NNT_ENGINE_QNN);
  assert_int_equal(nnt_model_compile(m, &e), NNT_ERR_NOT_SUPPORTED);
  tu_assert_contains(e.msg, "[Model] engine 'gpu'");
  nnt_model_destroy(m);
}

/* ---- the supports gate ------------------------------------------------------ */

/* A copy of the CPU backend that refuses the ops in ctx (a bit set). */
typedef struct test_backend {
  nnt_backend be;
  uint64_t refused;
  int *freed;
} test_backend;

static int tb_supports(const nnt_backend *be, nnt_kop op) {
  const test_backend *t = (const test_backend *)be;
  return (unsigned)op < NNT_KOP__COUNT && !(t->refused >> op & 1);
}

static void tb_free(nnt_backend *be) {
  test_backend *t = (test_backend *)be;
  ++*t->freed;
  free(t);
}

static nnt_backend *new_test_backend(uint64_t refused, int *freed) {
  test_backend *t = calloc(1, sizeof *t);
  assert_non_null(t);
  t->be = *nnt_backend_cpu();
  t->be.supports = tb_supports;
  t->be.free = tb_free;
  t->refused = refused;
  t->freed = freed;
  return &t->be;
}

static const char *cnn_ini =
    "[Model]\ntype = NeuralNetwork\nepochs = 1\nbatch_size = 2\nloss = cross\n\n"
    "[Optimizer]\ntype = sgd\n\n"
    "[train_set]\ntype = synthetic\nsamples = 4\n\n"
    "[in]\ntype = input\ninput_shape = 1:4:4\n\n"
    "[conv1]\ntype = conv2d\nfilters = 2\nkernel_size = 3\nflatten = true\n\n"
    "[out]\ntype = fully_connected\nunit = 3\nactivation = softmax\n";

/* Compile text on a backend refusing the ops refused: the code. */
static int compile_on(const char *text, uint64_t refused, nnt_err *e) {
  int freed = 0;
  nnt_model *m = load_ok(text);
  assert_int_equal(nnt_model_set_backend(m, new_test_backend(refused, &freed), e), NNT_OK);
  int rc = nnt_model_compile(m, e);
  if (!rc) {
    assert_int_equal(nnt_model_initialize(m, e), NNT_OK);
    if (nnt_model_train(m, NULL, NULL, e))
      fail_msg("%s", e->msg);
    assert_true(((test_backend *)m->be)->refused == refused); /* the one it ran on */
  }
  nnt_model_destroy(m);
  assert_int_equal(freed, 1);
  return rc;
}

static void test_gate(void **state) {
  (void)state;
  nnt_err e = {0};
  /* conv2d needs im2col */
  assert_int_equal(compile_on(cnn_ini, NNT_KOP_BIT(IM2COL), &e), NNT_ERR_NOT_SUPPORTED);
  tu_assert_contains(e.msg, "layer 'conv1' (conv2d): backend 'cpu' does not support the op "
                            "'im2col' it needs");
  /* an fc model needs none of these: it compiles and trains */
  uint64_t conv_ops = NNT_KOP_BIT(IM2COL) | NNT_KOP_BIT(COL2IM) | NNT_KOP_BIT(POOL_FWD) |
                      NNT_KOP_BIT(ADAM_STEP) | NNT_KOP_BIT(DOT) | NNT_KOP_BIT(AXPY);
  assert_int_equal(compile_on(mlp("", "sgd", ""), conv_ops, &e), NNT_OK);
  /* the optimizer */
  assert_int_equal(compile_on(mlp("", "adam", ""), NNT_KOP_BIT(ADAM_STEP), &e),
                   NNT_ERR_NOT_SUPPORTED);
  tu_assert_contains(e.msg, "the optimizer 'adam': backend 'cpu' does not support the op "
                            "'adam_step'");
  assert_int_equal(compile_on(mlp("", "sgd", ""), NNT_KOP_BIT(SGD_STEP), &e),
                   NNT_ERR_NOT_SUPPORTED);
  tu_assert_contains(e.msg, "the optimizer 'sgd'");
  /* AdamW's decay is part of adam_step: it needs no scale */
  assert_int_equal(compile_on(mlp("", "adamw\nweight_decay = 0.1", ""), NNT_KOP_BIT(SCALE), &e),
                   NNT_OK);
  assert_int_equal(compile_on(mlp("", "adamw\nweight_decay = 0.1", ""),
                              NNT_KOP_BIT(ADAM_STEP), &e), NNT_ERR_NOT_SUPPORTED);
  tu_assert_contains(e.msg, "the optimizer 'adamw': backend 'cpu' does not support the op "
                            "'adam_step'");
  /* the core's own ops */
  assert_int_equal(compile_on(mlp("clip_grad_by_norm = 1\n", "sgd", ""), NNT_KOP_BIT(DOT), &e),
                   NNT_ERR_NOT_SUPPORTED);
  tu_assert_contains(e.msg, "[Model] clip_grad_by_norm: backend 'cpu' does not support the op "
                            "'dot'");
  assert_int_equal(compile_on(mlp("", "sgd", "weight_regularizer = l2norm\n"),
                              NNT_KOP_BIT(AXPY), &e),
                   NNT_ERR_NOT_SUPPORTED);
  tu_assert_contains(e.msg, "layer 'fc1': the regularizer or decay of weight 'weight': backend "
                            "'cpu' does not support the op 'axpy'");
  /* an output read by two layers: its derivatives are summed with add */
  const char *fan =
      "[Model]\ntype = NeuralNetwork\nbatch_size = 2\nloss = mse\n\n"
      "[Optimizer]\ntype = sgd\n\n[train_set]\ntype = synthetic\nsamples = 4\n\n"
      "[in]\ntype = input\ninput_shape = 1:1:4\n\n[h]\ntype = fully_connected\nunit = 3\n\n"
      "[a]\ntype = fully_connected\nunit = 2\ninput_layers = h\n\n"
      "[b]\ntype = fully_connected\nunit = 2\ninput_layers = h\n\n"
      "[cat]\ntype = concat\ninput_layers = a, b\n";
  assert_int_equal(compile_on(fan, 0, &e), NNT_OK);
  assert_int_equal(compile_on(fan, NNT_KOP_BIT(ADD), &e), NNT_ERR_NOT_SUPPORTED);
  tu_assert_contains(e.msg, "layer 'h': the sum of the derivatives of its output 0, which 2 "
                            "layers read: backend 'cpu' does not support the op 'add'");
}

/* The backend hook: NULL or incomplete refused, after compile refused. */
static void test_set_backend(void **state) {
  (void)state;
  nnt_err e = {0};
  int freed = 0;
  nnt_model *m = load_ok(mlp("", "sgd", ""));
  assert_int_equal(nnt_model_set_backend(m, NULL, &e), NNT_ERR_INVAL);
  nnt_backend half = *nnt_backend_cpu();
  half.supports = NULL;
  assert_int_equal(nnt_model_set_backend(m, &half, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "incomplete");
  /* a backend of another engine's name is replaced by the engine's */
  nnt_backend *t = new_test_backend(0, &freed);
  t->name = "gpu";
  assert_int_equal(nnt_model_set_backend(m, t, &e), NNT_OK);
  assert_ptr_equal(m->k, t->k);
  assert_int_equal(nnt_model_compile(m, &e), NNT_OK);
  assert_int_equal(freed, 1);
  assert_ptr_equal(m->be, nnt_backend_cpu());
  assert_ptr_equal(m->k, m->be->k);
  t = new_test_backend(0, &freed);
  assert_int_equal(nnt_model_set_backend(m, t, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "set_backend: the model is already compiled");
  t->free(t);
  nnt_model_destroy(m);
  /* the engine it serves decides, not its name: one named otherwise that
   * serves "cpu" is kept (a layer's engine = cpu agrees with it), one
   * named "cpu" that serves "gpu" is replaced */
  for (int serves_cpu = 0; serves_cpu < 2; serves_cpu++) {
    freed = 0;
    m = load_ok(mlp("", "sgd", "engine = cpu\n"));
    t = new_test_backend(0, &freed);
    t->name = serves_cpu ? "stand-in" : "cpu";
    t->engine = serves_cpu ? "cpu" : "gpu";
    assert_int_equal(nnt_model_set_backend(m, t, &e), NNT_OK);
    assert_int_equal(nnt_model_compile(m, &e), NNT_OK);
    assert_int_equal(freed, !serves_cpu);
    if (serves_cpu)
      assert_ptr_equal(m->be, t);
    else
      assert_ptr_equal(m->be, nnt_backend_cpu());
    nnt_model_destroy(m);
    assert_int_equal(freed, 1);
  }
}

int main(void) {
  setenv("NNTRAINER_VULKAN_LOADER", "/nonexistent/libvulkan.so.1", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_model_engine_values),
      cmocka_unit_test(test_layer_engine_values),
      cmocka_unit_test_setup_teardown(test_ini_refuses_unknown_engine, setup, teardown),
      cmocka_unit_test_setup_teardown(test_compile_engines, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cli_override, setup, teardown),
      cmocka_unit_test_setup_teardown(test_capi, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ini_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gate, setup, teardown),
      cmocka_unit_test_setup_teardown(test_set_backend, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
