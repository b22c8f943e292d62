/* The planners alone: random lifetime sets, validity, and bounds. */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

#include "manager/planner.h"

static void random_blocks(nnt_rng *r, nnt_plan_block *b, size_t n, unsigned orders) {
  for (size_t i = 0; i < n; i++) {
    unsigned f = nnt_rng_below(r, orders), len = nnt_rng_below(r, orders / 4 + 1);
    b[i].first = f;
    b[i].last = f + len < orders ? f + len : orders - 1;
    b[i].bytes = (size_t)(1 + nnt_rng_below(r, 4096)) * (nnt_rng_below(r, 8) ? 4 : 64);
    if (!nnt_rng_below(r, 50))
      b[i].bytes = 0;
  }
}

static void test_random_plans_valid(void **state) {
  (void)state;
  nnt_rng r;
  nnt_rng_seed(&r, 42);
  enum { N = 200 };
  nnt_plan_block b[N];
  size_t off[N], pool_basic, pool_best;
  double worst = 1.0;
  for (int round = 0; round < 2000; round++) {
    size_t n = 1 + nnt_rng_below(&r, N);
    random_blocks(&r, b, n, 4 + nnt_rng_below(&r, 100));
    nnt_err e = {0};
    assert_int_equal(nnt_plan(NNT_PLANNER_BASIC, b, n, 64, off, &pool_basic, &e), NNT_OK);
    assert_int_equal(nnt_plan_validate(b, n, off, pool_basic, 64, &e), NNT_OK);
    assert_int_equal(nnt_plan(NNT_PLANNER_BEST_FIT, b, n, 64, off, &pool_best, &e), NNT_OK);
    if (nnt_plan_validate(b, n, off, pool_best, 64, &e))
      fail_msg("round %d: %s", round, e.msg);
    assert_true(pool_best <= pool_basic);
    size_t lb = nnt_plan_lower_bound(b, n);
    assert_true(lb <= pool_best);
    if (lb && (double)pool_best / lb > worst)
      worst = (double)pool_best / lb;
  }
  print_message("best_fit / lower bound, worst over 2000 random sets: %.3f\n", worst);
}

static void test_validator_catches_overlap(void **state) {
  (void)state;
  nnt_plan_block b[2] = {{128, 0, 5}, {128, 3, 8}};
  size_t off[2] = {0, 64};
  nnt_err e = {0};
  assert_int_equal(nnt_plan_validate(b, 2, off, 256, 64, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "overlap");
  off[1] = 128;
  assert_int_equal(nnt_plan_validate(b, 2, off, 256, 64, &e), NNT_OK);
  /* outside the pool */
  assert_int_equal(nnt_plan_validate(b, 2, off, 200, 64, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "outside");
  /* misaligned */
  off[1] = 130;
  assert_int_equal(nnt_plan_validate(b, 2, off, 512, 64, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "aligned");
}

static void test_disjoint_lifetimes_share(void **state) {
  (void)state;
  /* a chain: each block lives two orders, so two regions suffice */
  nnt_plan_block b[6];
  for (unsigned i = 0; i < 6; i++)
    b[i] = (nnt_plan_block){1024, i, i + 1};
  size_t off[6], pool;
  assert_int_equal(nnt_plan(NNT_PLANNER_BEST_FIT, b, 6, 64, off, &pool, NULL), NNT_OK);
  assert_int_equal(pool, 2048);
  assert_int_equal(nnt_plan_lower_bound(b, 6), 2048);
  assert_int_equal(nnt_plan(NNT_PLANNER_BASIC, b, 6, 64, off, &pool, NULL), NNT_OK);
  assert_int_equal(pool, 6 * 1024);
}

static void test_bad_input(void **state) {
  (void)state;
  nnt_plan_block b = {16, 5, 2};
  size_t off, pool;
  nnt_err e = {0};
  assert_int_equal(nnt_plan(NNT_PLANNER_BEST_FIT, &b, 1, 64, &off, &pool, &e), NNT_ERR_INVAL);
  b.last = 7;
  assert_int_equal(nnt_plan(NNT_PLANNER_BEST_FIT, &b, 1, 48, &off, &pool, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "power of two");
  nnt_planner_kind k;
  assert_int_equal(nnt_planner_from_name("BEST_FIT", &k), NNT_OK);
  assert_int_equal(k, NNT_PLANNER_BEST_FIT);
  assert_int_equal(nnt_planner_from_name("fancy", &k), NNT_ERR_INVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_plans_valid),
      cmocka_unit_test(test_validator_catches_overlap),
      cmocka_unit_test(test_disjoint_lifetimes_share),
      cmocka_unit_test(test_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
