/* `nntrainer plan --budget BYTES` and `--max-batch BYTES` (tools/cli_budget.c):
 * the layers recomputed under a budget that forces it, their extra FLOPs,
 * the plan with the queues within the budget (text and JSON); the largest
 * batch that fits does, one more does not; bad values are refused naming
 * the option. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *chain_ini =
    "[Model]\ntype = NeuralNetwork\nepochs = 1\nbatch_size = 64\nloss = cross\n\n"
    "[Optimizer]\ntype = sgd\nlearning_rate = 0.1\n\n"
    "[train_set]\ntype = synthetic\nsamples = 256\n\n"
    "[in]\ntype = input\ninput_shape = 1:1:64\n\n"
    "[f1]\ntype = fully_connected\nunit = 64\n\n"
    "[b1]\ntype = batch_normalization\nactivation = relu\n\n"
    "[f2]\ntype = fully_connected\nunit = 64\n\n"
    "[b2]\ntype = batch_normalization\nactivation = relu\n\n"
    "[f3]\ntype = fully_connected\nunit = 64\n\n"
    "[b3]\ntype = batch_normalization\nactivation = relu\n\n"
    "[f4]\ntype = fully_connected\nunit = 64\n\n"
    "[b4]\ntype = batch_normalization\nactivation = relu\n\n"
    "[out]\ntype = fully_connected\nunit = 10\nactivation = softmax\n";

/* "the minimum budget that fits is 1.2 MiB (1234 bytes)" -> 1234 */
static unsigned long long min_budget(const char *out) {
  const char *p = strstr(out, "the minimum budget that fits is");
  if (!p)
    fail_msg("no minimum in: %s", out);
  p = strchr(p, '(');
  assert_non_null(p);
  return strtoull(p + 1, NULL, 10);
}

static void test_budget_lists_recomputed(void **state) {
  (void)state;
  static char out[1 << 17];
  char args[256];
  tu_write_text("chain.ini", chain_ini);
  /* the plan without a budget */
  assert_int_equal(tu_run_cli("plan chain.ini --json", out, sizeof out), 0);
  size_t full = tu_json_size(out, "total_bytes");
  assert_null(strstr(out, "\"recompute\""));
  /* too small: refused, naming the minimum (below the full plan) */
  assert_int_not_equal(tu_run_cli("plan chain.ini --budget 40K", out, sizeof out), 0);
  tu_assert_contains(out, "[Model] memory_budget");
  unsigned long long min = min_budget(out);
  /* the smallest plan found is below the default plan (which recomputes
   * the cheap chains only); the minimum adds the queues to it */
  const char *sm = strstr(out, "the smallest training plan found needs");
  assert_non_null(sm);
  sm = strchr(sm, '(');
  assert_non_null(sm);
  unsigned long long smallest = strtoull(sm + 1, NULL, 10);
  assert_true(smallest < full && smallest < min);
  /* at the minimum: recomputes named layers, the plan and the queues fit */
  snprintf(args, sizeof args, "plan chain.ini --budget %llu", min);
  int rc = tu_run_cli(args, out, sizeof out);
  if (rc)
    fail_msg("%s: exit %d: %s", args, rc, out);
  tu_assert_contains(out, "recomputed   ");
  tu_assert_contains(out, " layers: ");
  assert_null(strstr(out, "recomputed   0 layers"));
  tu_assert_contains(out, "extra FLOPs  ");
  tu_assert_contains(out, "of one forward + backward");
  tu_assert_contains(out, "datasets' queues");
  snprintf(args, sizeof args, "plan chain.ini --json --budget %llu", min);
  assert_int_equal(tu_run_cli(args, out, sizeof out), 0);
  tu_assert_contains(out, "\"recompute\":{\"budget_bytes\":");
  tu_assert_contains(out, "\"layers\":[\"");
  assert_true(tu_json_size(out, "total_with_queues_bytes") <= min);
  assert_true(tu_json_size(out, "queue_bytes") > 0);
  assert_true(tu_json_size(out, "extra_flops") > 0);
  assert_true(tu_json_size(out, "total_bytes") < full);
  /* one JSON object: the report's members and ours, closed once */
  size_t len = strlen(out);
  assert_true(len > 2 && out[len - 1] == '\n' && out[len - 2] == '}' && out[0] == '{');
  /* a budget the plan fits without: the plan without a budget (with the
   * default's cheap recomputation) */
  snprintf(args, sizeof args, "plan chain.ini --json --budget %zu", 2 * full);
  assert_int_equal(tu_run_cli(args, out, sizeof out), 0);
  assert_int_equal(tu_json_size(out, "total_bytes"), full);
}

static void test_max_batch(void **state) {
  (void)state;
  static char out[1 << 17];
  char args[256];
  tu_write_text("chain.ini", chain_ini);
  for (int k = 0; k < 2; k++) {
    const char *bytes = k ? "300K" : "150K";
    snprintf(args, sizeof args, "plan chain.ini --max-batch %s", bytes);
    int rc = tu_run_cli(args, out, sizeof out);
    if (rc)
      fail_msg("%s: exit %d: %s", args, rc, out);
    const char *p = strstr(out, "max batch    ");
    assert_non_null(p);
    unsigned b = (unsigned)strtoul(p + 13, NULL, 10);
    assert_true(b > 0);
    char want[64];
    snprintf(want, sizeof want, "batch %u", b + 1);
    tu_assert_contains(out, want);
    tu_assert_contains(out, "refused: [Model] memory_budget");
    /* it fits; one more does not */
    snprintf(args, sizeof args, "plan chain.ini --budget %s batch_size=%u", bytes, b);
    if ((rc = tu_run_cli(args, out, sizeof out)))
      fail_msg("%s: exit %d: %s", args, rc, out);
    snprintf(args, sizeof args, "plan chain.ini --budget %s batch_size=%u", bytes, b + 1);
    assert_int_not_equal(tu_run_cli(args, out, sizeof out), 0);
    tu_assert_contains(out, "[Model] memory_budget");
    snprintf(args, sizeof args, "plan chain.ini --json --max-batch %s", bytes);
    assert_int_equal(tu_run_cli(args, out, sizeof out), 0);
    assert_int_equal(tu_json_size(out, "max_batch"), b);
    tu_assert_contains(out, "\"next_batch_refused\":\"[Model] memory_budget");
  }
  /* nothing fits: the weights alone are more */
  assert_int_not_equal(tu_run_cli("plan chain.ini --max-batch 1K", out, sizeof out), 0);
  tu_assert_contains(out, "--max-batch: no batch size fits 1024 bytes: batch_size 1: ");
}

static void test_bad_values(void **state) {
  (void)state;
  char out[8192];
  tu_write_text("chain.ini", chain_ini);
  static const struct {
    const char *args, *msg;
  } cases[] = {
      {"plan chain.ini --budget abc", "--budget: 'abc' is not a byte count"},
      {"plan chain.ini --budget 12Q", "--budget: '12Q' is not a byte count"},
      {"plan chain.ini --budget -5", "--budget: '-5' is not a byte count"},
      {"plan chain.ini --budget 0", "--budget: '0' must be more than 0 bytes"},
      {"plan chain.ini --budget 99999999999999999999", "--budget: '99999999999999999999' is more"},
      {"plan chain.ini --budget 17179869184G", "--budget: '17179869184G' is more"},
      {"plan chain.ini --max-batch x1M", "--max-batch: 'x1M' is not a byte count"},
      {"plan chain.ini --max-batch 0K", "--max-batch: '0K' must be more than 0 bytes"},
      {"plan chain.ini --budget", "--budget needs a byte count"},
      {"plan chain.ini --max-batch", "--max-batch needs a byte count"},
      {"plan chain.ini --budget 1M --max-batch 1M", "--budget and --max-batch: give one"},
      {"plan chain.ini --budget 1M --mode infer", "--budget plans training: not with --mode infer"},
      {"plan chain.ini --max-batch 1M --mode eval", "--max-batch plans training"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    int rc = tu_run_cli(cases[i].args, out, sizeof out);
    if (rc == 0 || !strstr(out, cases[i].msg))
      fail_msg("%s: exit %d, want '%s': %s", cases[i].args, rc, cases[i].msg, out);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_budget_lists_recomputed, tu_dir_setup,
                                      tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_max_batch, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_bad_values, tu_dir_setup, tu_dir_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
