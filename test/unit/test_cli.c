/* The nntrainer command-line tool, run as a user would. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>



static int exists(const char *name) {
  char path[1024];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", tu_dir, name);
  return stat(path, &st) == 0;
}

static const char *good_ini =
    "[Model]\ntype = NeuralNetwork\nepochs = 2\nbatch_size = 8\nloss = cross\n"
    "save_path = out.bin\n\n"
    "[Optimizer]\ntype = sgd\nlearning_rate = 0.1\n\n"
    "[train_set]\ntype = synthetic\nsamples = 64\n\n"
    "[in]\ntype = input\ninput_shape = 1:1:8\n\n"
    "[fc1]\ntype = fully_connected\nunit = 6\nactivation = relu\n\n"
    "[out]\ntype = fully_connected\nunit = 3\nactivation = softmax\n";

static void test_version_and_help(void **state) {
  (void)state;
  char out[8192];
  assert_int_equal(tu_run_cli("--version", out, sizeof out), 0);
  tu_assert_contains(out, "nntrainer ");
  assert_int_equal(tu_run_cli("--help", out, sizeof out), 0);
  tu_assert_contains(out, "train CONFIG");
  assert_int_not_equal(tu_run_cli("frobnicate", out, sizeof out), 0);
  tu_assert_contains(out, "unknown command");
}

static void test_train_writes_weights(void **state) {
  (void)state;
  char out[65536];
  tu_write_text("good.ini", good_ini);
  int rc = tu_run_cli("train good.ini", out, sizeof out);
  if (rc)
    fail_msg("exit %d: %s", rc, out);
  tu_assert_contains(out, "planned memory");
  tu_assert_contains(out, "epoch 2/2");
  /* the kernels OpenBLAS runs on this CPU, before the model line; where
   * the library chose them over OpenBLAS's own pick (an AVX-512 Xeon that
   * OpenBLAS 0.3.21 takes for a Prescott), that pick in brackets */
  static const char plain[] = " kernels, ", chosen[] = " kernels (for this CPU's features; "
                                                       "OpenBLAS's own pick: ";
  tu_assert_contains(out, "blas: OpenBLAS ");
  const char *kern = strstr(out, " kernels");
  assert_non_null(kern);
  if (strncmp(kern, plain, sizeof plain - 1) && strncmp(kern, chosen, sizeof chosen - 1))
    fail_msg("blas line: %.120s", kern);
  assert_true(strstr(out, "blas: ") < strstr(out, "model: "));
  /* where the bytes live: the CPU's are all host memory, at least the
   * planned weights and training arena (the plan's own figures) */
  double dev, host, slack;
  tu_cli_memory(out, &dev, &host, &slack);
  tu_assert_contains(out, "); on cpu: 0 B device, ");
  assert_true(dev == 0);
  char plan[1 << 16];
  assert_int_equal(tu_run_cli("plan good.ini --json", plan, sizeof plan), 0);
  tu_assert_contains(plan, "\"engine\":\"cpu\",\"backend\":\"cpu\",\"device\":null,"
                           "\"memory\":{\"arena\":\"host\",\"weights\":\"host\","
                           "\"optimizer\":\"host\"}");
  size_t want = tu_json_size(plan, "arena_bytes") + tu_json_size(plan, "weight_bytes");
  if (host + slack < (double)want)
    fail_msg("host bytes %.0f (+%.0f) < planned arena and weights %zu", host, slack, want);
  assert_true(exists("out.bin"));
  /* overrides and --synthetic */
  rc = tu_run_cli("train good.ini epochs=1 fc1.unit=4 --synthetic=32 --seed 3", out, sizeof out);
  if (rc)
    fail_msg("exit %d: %s", rc, out);
  tu_assert_contains(out, "epoch 1/1");
}

static void test_summary(void **state) {
  (void)state;
  char out[65536];
  tu_write_text("good.ini", good_ini);
  assert_int_equal(tu_run_cli("summary good.ini", out, sizeof out), 0);
  tu_assert_contains(out, "fc1");
  tu_assert_contains(out, "fully_connected");
  tu_assert_contains(out, "cross_softmax");
  /* 8*6+6 + 6*3+3 */
  tu_assert_contains(out, "parameters: 75");
}

static void test_errors_name_file_section_key(void **state) {
  (void)state;
  char out[65536], ini[4096];
  snprintf(ini, sizeof ini, "%s", good_ini);
  char *p = strstr(ini, "unit = 6");
  memcpy(p, "unit = x", 8);
  tu_write_text("bad.ini", ini);
  assert_int_not_equal(tu_run_cli("train bad.ini", out, sizeof out), 0);
  tu_assert_contains(out, "bad.ini");
  tu_assert_contains(out, "[fc1]");
  tu_assert_contains(out, "unit");
  assert_false(exists("out.bin"));
  /* a bad override is reported too, and nothing is written */
  tu_write_text("good.ini", good_ini);
  assert_int_not_equal(tu_run_cli("train good.ini fc1.unit=abc", out, sizeof out), 0);
  tu_assert_contains(out, "unit");
  assert_false(exists("out.bin"));
  assert_int_not_equal(tu_run_cli("train missing.ini", out, sizeof out), 0);
  tu_assert_contains(out, "missing.ini");
}

/* A numeric option or thread variable that is negative, too large for its
 * type or followed by junk is refused naming it; the exit status is
 * nonzero and nothing is written. */
static void test_numeric_options(void **state) {
  (void)state;
  static const struct {
    const char *args, *expect;
  } cases[] = {
      {"--seed -1", "--seed: '-1' must not be negative"},
      {"--seed 4294967296", "--seed: '4294967296' is out of range (0 to 4294967295)"},
      {"--seed 99999999999999999999999", "--seed: '99999999999999999999999' is out of range"},
      {"--seed 12abc", "--seed: '12abc' is not a whole number"},
      {"--seed ''", "--seed: '' is not a whole number"},
      {"--seed 0x10", "--seed: '0x10' is not a whole number"},
      {"--seed ' 5'", "--seed: ' 5' is not a whole number"},
      {"--seed", "--seed needs a number"},
      {"--synthetic=0", "--synthetic: '0' is out of range (1 to 4294967295)"},
      {"--synthetic=-5", "--synthetic: '-5' must not be negative"},
      {"--synthetic=3000000000x", "--synthetic: '3000000000x' is not a whole number"},
      {"--synthetic=4294967296", "--synthetic: '4294967296' is out of range"},
      {"--synthetic=", "--synthetic: '' is not a whole number"},
      {"--synthetic=1e3", "--synthetic: '1e3' is not a whole number"},
  };
  char out[8192], args[256];
  tu_write_text("good.ini", good_ini);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    snprintf(args, sizeof args, "train good.ini %s", cases[i].args);
    int rc = tu_run_cli(args, out, sizeof out);
    if (rc == 0)
      fail_msg("'%s' was accepted: %s", cases[i].args, out);
    tu_assert_contains(out, cases[i].expect);
    assert_false(exists("out.bin"));
  }
  static const char *const threads[] = {"NNTRAINER_THREADS=-1", "NNTRAINER_THREADS=2x",
                                        "NNTRAINER_THREADS=4294967297",
                                        "NNTRAINER_THREADS= OPENBLAS_NUM_THREADS=abc"};
  for (size_t i = 0; i < sizeof threads / sizeof *threads; i++) {
    if (!tu_run_cli_env(threads[i], "train good.ini epochs=1", out, sizeof out))
      fail_msg("%s was accepted: %s", threads[i], out);
    tu_assert_contains(out, strchr(threads[i], 'O') ? "OPENBLAS_NUM_THREADS: 'abc'"
                                                     : "NNTRAINER_THREADS: '");
    assert_false(exists("out.bin"));
  }
  /* the largest values are accepted */
  int rc = tu_run_cli("train good.ini epochs=1 --seed 4294967295 --synthetic=16", out, sizeof out);
  if (rc)
    fail_msg("exit %d: %s", rc, out);
  assert_true(exists("out.bin"));
}

static void test_plan(void **state) {
  (void)state;
  char out[1 << 16];
  tu_write_text("good.ini", good_ini);
  assert_int_equal(tu_run_cli("plan good.ini", out, sizeof out), 0);
  tu_assert_contains(out, "arena / lower bound");
  tu_assert_contains(out, "saving");
  /* where the plan peaks: the step, what runs there, the kinds live there */
  tu_assert_contains(out, "peak         step ");
  tu_assert_contains(out, "(every step)");
  tu_assert_contains(out, "engine       cpu (backend 'cpu'): arena in host memory, weights and "
                          "optimizer state in host memory\n");
  assert_int_equal(tu_run_cli("plan good.ini --json --mode infer --planner pool", out, sizeof out),
                   0);
  const char *fields[] = {"\"mode\":\"infer\"", "\"planner\":\"pool\"", "\"arena_bytes\":",
                          "\"lower_bound_bytes\":", "\"unoptimized_arena_bytes\":",
                          "\"weight_bytes\":", "\"optimizer_bytes\":", "\"total_bytes\":",
                          "\"planning_ms\":", "\"tensors\":[{\"name\":", "\"first\":",
                          "\"offset\":"};
  for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
    tu_assert_contains(out, fields[i]);
  tu_assert_contains(out, "\"peak\":{\"step\":");
  tu_assert_contains(out, "\"largest\":[{\"name\":");
  assert_int_equal(tu_json_size(out, "live_bytes"), tu_json_size(out, "lower_bound_bytes"));
  /* the evaluation plan holds the labels and the loss value, inference
   * neither */
  tu_assert_contains(out, "\"kinds\"");
  assert_null(strstr(out, "\"kind\":\"label\""));
  assert_null(strstr(out, ":loss0\""));
  assert_int_equal(tu_run_cli("plan good.ini --json --mode eval", out, sizeof out), 0);
  tu_assert_contains(out, "\"mode\":\"eval\"");
  tu_assert_contains(out, "\"kind\":\"label\"");
  tu_assert_contains(out, ":loss0\"");
  assert_int_not_equal(tu_run_cli("plan good.ini --mode test", out, sizeof out), 0);
  tu_assert_contains(out, "--mode: 'test' is not train, eval or infer");
  assert_int_equal(tu_run_cli("plan good.ini --svg plan.svg --verbose", out, sizeof out), 0);
  tu_assert_contains(out, "fc1:out0");
  tu_assert_contains(out, "largest live there:");
  assert_true(exists("plan.svg"));
  /* written as every file of the library: a folder is refused by name */
  char sub[1024];
  snprintf(sub, sizeof sub, "%s/svgdir", tu_dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  assert_int_not_equal(tu_run_cli("plan good.ini --svg svgdir", out, sizeof out), 0);
  tu_assert_contains(out, "'svgdir': it is a directory");
  assert_int_equal(rmdir(sub), 0);
  assert_int_not_equal(tu_run_cli("plan good.ini --planner fancy", out, sizeof out), 0);
  tu_assert_contains(out, "fancy");
}

static void test_dump(void **state) {
  (void)state;
  char out[1 << 16];
  tu_write_text("good.ini", good_ini);
  int rc = tu_run_cli("train good.ini epochs=1 --dump dumped", out, sizeof out);
  if (rc)
    fail_msg("exit %d: %s", rc, out);
  assert_true(exists("dumped/index.tsv"));
  assert_true(exists("dumped/fc1_weight.raw"));
  assert_true(exists("dumped/fc1_grad0.raw"));
  assert_true(exists("dumped/fc1_activation_realized_d_in0.raw"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_version_and_help, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_train_writes_weights, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_summary, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_errors_name_file_section_key, tu_dir_setup,
                                      tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_numeric_options, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_plan, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_dump, tu_dir_setup, tu_dir_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
