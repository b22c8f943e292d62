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
    size_t pool_pool;
    assert_int_equal(nnt_plan(NNT_PLANNER_POOL, b, n, 64, off, &pool_pool, &e), NNT_OK);
    if (nnt_plan_validate(b, n, off, pool_pool, 64, &e))
      fail_msg("pool round %d: %s", round, e.msg);
    assert_true(pool_pool <= pool_basic);
    /* best_fit again, for the ratio below */
    assert_int_equal(nnt_plan(NNT_PLANNER_BEST_FIT, b, n, 64, off, &pool_best, &e), NNT_OK);
    size_t lb = nnt_plan_lower_bound(b, n);
    assert_true(lb <= pool_best);
    if (lb && (double)pool_best / lb > worst)
      worst = (double)pool_best / lb;
  }
  print_message("best_fit / lower bound, worst over 2000 random sets: %.3f\n", worst);
}

/* The optimum by trying every order of placement (each block at the lowest
 * free address given the blocks before it); for n <= 6 that covers the
 * optimal packings found by first-fit placement. */
static size_t exhaustive(const nnt_plan_block *b, size_t n) {
  size_t perm[8], best = (size_t)-1;
  for (size_t i = 0; i < n; i++)
    perm[i] = i;
  for (;;) {
    nnt_plan_block pb[8];
    size_t off[8], pool;
    for (size_t i = 0; i < n; i++)
      pb[i] = b[perm[i]];
    /* place in this order: best_fit with sizes equal would sort, so do it here */
    size_t top = 0;
    for (size_t i = 0; i < n; i++) {
      size_t at = 0;
      int moved = 1;
      while (moved) {
        moved = 0;
        for (size_t j = 0; j < i; j++)
          if (pb[j].first <= pb[i].last && pb[i].first <= pb[j].last &&
              off[j] < at + pb[i].bytes && at < off[j] + pb[j].bytes) {
            at = off[j] + pb[j].bytes;
            moved = 1;
          }
      }
      off[i] = at;
      if (at + pb[i].bytes > top)
        top = at + pb[i].bytes;
    }
    pool = top;
    if (pool < best)
      best = pool;
    /* next permutation */
    size_t k = n - 1;
    while (k > 0 && perm[k - 1] > perm[k])
      k--;
    if (k == 0)
      break;
    size_t l = n - 1;
    while (perm[l] < perm[k - 1])
      l--;
    size_t t = perm[k - 1];
    perm[k - 1] = perm[l];
    perm[l] = t;
    for (size_t a = k, z = n - 1; a < z; a++, z--) {
      t = perm[a];
      perm[a] = perm[z];
      perm[z] = t;
    }
  }
  return best;
}

static void test_best_fit_near_optimum_on_small_sets(void **state) {
  (void)state;
  nnt_rng r;
  nnt_rng_seed(&r, 7);
  size_t optimal = 0, rounds = 300;
  double worst = 1.0;
  for (size_t round = 0; round < rounds; round++) {
    nnt_plan_block b[6];
    size_t n = 2 + nnt_rng_below(&r, 5);
    for (size_t i = 0; i < n; i++) {
      unsigned f = nnt_rng_below(&r, 8);
      b[i] = (nnt_plan_block){64 * (1 + nnt_rng_below(&r, 6)), f, f + nnt_rng_below(&r, 4)};
    }
    size_t off[6], pool;
    assert_int_equal(nnt_plan(NNT_PLANNER_BEST_FIT, b, n, 64, off, &pool, NULL), NNT_OK);
    size_t opt = exhaustive(b, n);
    assert_true(opt <= pool);
    assert_true(nnt_plan_lower_bound(b, n) <= opt);
    optimal += pool == opt;
    if ((double)pool / opt > worst)
      worst = (double)pool / opt;
  }
  print_message("best_fit optimal on %zu of %zu small sets; worst ratio %.3f\n", optimal,
                rounds, worst);
  /* a heuristic, but on tiny sets it should rarely miss */
  assert_true(optimal * 10 >= rounds * 8);
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
      cmocka_unit_test(test_best_fit_near_optimum_on_small_sets),
      cmocka_unit_test(test_disjoint_lifetimes_share),
      cmocka_unit_test(test_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
