/* OpenBLAS's kernels chosen by the CPU's features (cpu_blas_core.c): the
 * choice table, the switch itself (OpenBLAS put on its SSE3 "Prescott"
 * path, as it picks on some AVX-512 VMs, then moved to the widest path the
 * CPU allows, with a product checked on every path), and that a core the
 * user names in OPENBLAS_CORETYPE is kept. */
#include "test_util.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/compute/kernels.h"

static void test_ranks(void **state) {
  (void)state;
  assert_int_equal(nnt_blas_core_rank("SkylakeX"), NNT_BLAS_AVX512);
  assert_int_equal(nnt_blas_core_rank("cooperlake"), NNT_BLAS_AVX512);
  assert_int_equal(nnt_blas_core_rank("Haswell"), NNT_BLAS_AVX2);
  assert_int_equal(nnt_blas_core_rank("Zen"), NNT_BLAS_AVX2);
  assert_int_equal(nnt_blas_core_rank("Sandybridge"), NNT_BLAS_AVX);
  assert_int_equal(nnt_blas_core_rank("Prescott"), NNT_BLAS_SSE);
  assert_int_equal(nnt_blas_core_rank("Nehalem"), NNT_BLAS_SSE);
  assert_int_equal(nnt_blas_core_rank(NULL), NNT_BLAS_SSE);
}

static void test_choice(void **state) {
  (void)state;
  static const struct {
    const char *current;
    int cpu;
    const char *user, *want;
  } cases[] = {
      {"Prescott", NNT_BLAS_AVX512, NULL, "SkylakeX"}, /* the Xeon VM's case */
      {"Haswell", NNT_BLAS_AVX512, NULL, "SkylakeX"},  /* an AVX-512 Zen 4/5 */
      {"Prescott", NNT_BLAS_AVX2, NULL, "Haswell"},
      {"Nehalem", NNT_BLAS_AVX, NULL, "Sandybridge"},
      {"Zen", NNT_BLAS_AVX2, NULL, NULL},              /* as wide as allowed */
      {"Cooperlake", NNT_BLAS_AVX512, NULL, NULL},
      {"SkylakeX", NNT_BLAS_AVX2, NULL, NULL},         /* never narrower */
      {"Prescott", NNT_BLAS_SSE, NULL, NULL},          /* nothing wider */
      {"Prescott", NNT_BLAS_AVX512, "Prescott", NULL}, /* the user's choice */
      {"Haswell", NNT_BLAS_AVX512, "Haswell", NULL},
      {NULL, NNT_BLAS_AVX2, NULL, "Haswell"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *got = nnt_blas_core_choice(cases[i].current, cases[i].cpu, cases[i].user);
    if (!cases[i].want)
      assert_null(got);
    else
      assert_string_equal(got ? got : "(null)", cases[i].want);
  }
}

/* A 37 x 29 by 29 x 41 product against a double-precision one. */
static void check_product(void) {
  enum { M = 37, K = 29, N = 41 };
  float a[M * K], b[K * N], c[M * N];
  for (int i = 0; i < M * K; i++)
    a[i] = (float)((i * 7919) % 97) / 97.0f - 0.5f;
  for (int i = 0; i < K * N; i++)
    b[i] = (float)((i * 104729) % 89) / 89.0f - 0.5f;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double r = 0;
      for (int k = 0; k < K; k++)
        r += (double)a[i * K + k] * b[k * N + j];
      assert_true(fabs(c[i * N + j] - r) < 1e-5);
    }
}

#if defined(__x86_64__) || defined(__i386__)
static void test_switch_then_choose(void **state) {
  (void)state;
  unsetenv("OPENBLAS_CORETYPE"); /* as a user who set nothing */
  assert_int_equal(nnt_blas_switch_core("NoSuchCore"), -1);
  assert_int_equal(nnt_blas_switch_core("Prescott"), 0);
  assert_string_equal(openblas_get_corename(), "Prescott");
  assert_null(getenv("OPENBLAS_CORETYPE")); /* put back as it was */
  check_product();
  /* the library's choice, made once, moves it to what the CPU allows */
  nnt_cpu_blas_choose_core();
  int cpu = nnt_blas_cpu_rank();
  if (cpu > NNT_BLAS_SSE) {
    assert_int_equal(nnt_blas_core_rank(openblas_get_corename()), cpu);
    assert_non_null(nnt_cpu_blas_first_core());
    assert_string_equal(nnt_cpu_blas_first_core(), "Prescott");
    char line[256];
    nnt_cpu_blas_describe(line, sizeof line);
    tu_assert_contains(line, "OpenBLAS's own pick: Prescott");
  } else {
    assert_string_equal(openblas_get_corename(), "Prescott");
  }
  check_product();
}

/* The CLI keeps a core the user named, and says which path runs. */
static void test_cli_keeps_user_core(void **state) {
  (void)state;
  char out[8192];
  assert_int_equal(tu_run_cli_env("OPENBLAS_CORETYPE=Prescott",
                                  "train " NNT_SOURCE_DIR "/benchmarks/models/mlp.ini "
                                  "--synthetic=64 epochs=1",
                                  out, sizeof out),
                   0);
  tu_assert_contains(out, "Prescott kernels, ");
  assert_null(strstr(out, "own pick"));
  assert_int_equal(tu_run_cli_env("-u OPENBLAS_CORETYPE",
                                  "train " NNT_SOURCE_DIR "/benchmarks/models/mlp.ini "
                                  "--synthetic=64 epochs=1",
                                  out, sizeof out),
                   0);
  const char *k = strstr(out, "blas: OpenBLAS");
  assert_non_null(k);
  char core[32] = "";
  assert_int_equal(sscanf(k, "blas: OpenBLAS %*s %31s", core), 1);
  assert_true(nnt_blas_core_rank(core) >= nnt_blas_cpu_rank());
}
#else
/* Not x86: the choice is OpenBLAS's own (its arm64 builds pick by the
 * CPU's ID registers); nothing is switched, and products still run. */
static void test_switch_then_choose(void **state) {
  (void)state;
  assert_int_equal(nnt_blas_cpu_rank(), NNT_BLAS_SSE);
  char before[64];
  snprintf(before, sizeof before, "%s", openblas_get_corename());
  nnt_cpu_blas_choose_core();
  assert_string_equal(openblas_get_corename(), before);
  assert_null(nnt_cpu_blas_first_core());
  check_product();
}

static void test_cli_keeps_user_core(void **state) {
  (void)state;
  char out[8192];
  assert_int_equal(tu_run_cli("train " NNT_SOURCE_DIR "/benchmarks/models/mlp.ini "
                              "--synthetic=64 epochs=1",
                              out, sizeof out),
                   0);
  tu_assert_contains(out, " kernels, ");
  assert_null(strstr(out, "own pick"));
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ranks),
      cmocka_unit_test(test_choice),
      cmocka_unit_test(test_switch_then_choose),
      cmocka_unit_test_setup_teardown(test_cli_keeps_user_core, tu_dir_setup, tu_dir_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
