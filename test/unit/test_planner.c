/* The planners alone: random lifetime sets, validity, and bounds. */
#include "test_util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "manager/manager.h"
#include "manager/planner.h"

static void random_blocks(nnt_rng *r, nnt_plan_block *b, size_t n, unsigned orders) {
  for (size_t i = 0; i < n; i++) {
    unsigned f = nnt_rng_below(r, orders), len = nnt_rng_below(r, orders / 4 + 1);
    b[i].first = f;
    b[i].last = f + len < orders ? f + len : orders - 1;
    b[i].after = 0;
    b[i].bytes = (size_t)(1 + nnt_rng_below(r, 4096)) * (nnt_rng_below(r, 8) ? 4 : 64);
    if (!nnt_rng_below(r, 50))
      b[i].bytes = 0;
  }
}

/* The planners as first written, quadratic and plain, as references: the
 * fast ones must give the very same offsets. */
static size_t ref_align(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }

static const nnt_plan_block *ref_blocks;

static int ref_cmp_size_desc(const void *pa, const void *pb) {
  size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
  const nnt_plan_block *x = &ref_blocks[a], *y = &ref_blocks[b];
  if (x->bytes != y->bytes)
    return x->bytes > y->bytes ? -1 : 1;
  unsigned lx = x->last - x->first, ly = y->last - y->first;
  if (lx != ly)
    return lx > ly ? -1 : 1;
  return a < b ? -1 : 1;
}

static int ref_cmp_start(const void *pa, const void *pb) {
  size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
  if (ref_blocks[a].first != ref_blocks[b].first)
    return ref_blocks[a].first < ref_blocks[b].first ? -1 : 1;
  return ref_cmp_size_desc(pa, pb);
}

/* Largest first, each at the lowest aligned offset free over its lifetime
 * among the blocks placed before it (kept sorted by offset, scanned). */
static size_t ref_best_fit(const nnt_plan_block *b, size_t n, size_t align, size_t *off) {
  size_t *ord = malloc((n + 1) * sizeof *ord), *placed = malloc((n + 1) * sizeof *placed);
  assert_non_null(ord);
  assert_non_null(placed);
  for (size_t i = 0; i < n; i++)
    ord[i] = i;
  ref_blocks = b;
  qsort(ord, n, sizeof *ord, ref_cmp_size_desc);
  size_t n_placed = 0, top = 0;
  for (size_t k = 0; k < n; k++) {
    size_t i = ord[k], at = 0;
    off[i] = 0;
    if (!b[i].bytes)
      continue;
    for (size_t q = 0; q < n_placed; q++) {
      size_t j = placed[q];
      if (b[j].first > b[i].last || b[j].last < b[i].first)
        continue;
      if (off[j] >= at + b[i].bytes)
        break;
      if (off[j] + b[j].bytes > at)
        at = ref_align(off[j] + b[j].bytes, align);
    }
    off[i] = at;
    if (at + b[i].bytes > top)
      top = at + b[i].bytes;
    size_t q = n_placed++;
    for (; q && off[placed[q - 1]] > at; q--)
      placed[q] = placed[q - 1];
    placed[q] = i;
  }
  free(ord);
  free(placed);
  return ref_align(top, align);
}

/* In order of first use, each block takes the smallest region (the first
 * made among equals) freed before its first order, or new memory on top. */
static size_t ref_pool(const nnt_plan_block *b, size_t n, size_t align, size_t *off) {
  size_t *ord = malloc((n + 1) * sizeof *ord), *r_off = malloc((n + 1) * sizeof *r_off);
  size_t *r_bytes = malloc((n + 1) * sizeof *r_bytes);
  unsigned *r_free_after = malloc((n + 1) * sizeof *r_free_after);
  assert_true(ord && r_off && r_bytes && r_free_after);
  for (size_t i = 0; i < n; i++)
    ord[i] = i;
  ref_blocks = b;
  qsort(ord, n, sizeof *ord, ref_cmp_start);
  size_t n_reg = 0, top = 0;
  for (size_t k = 0; k < n; k++) {
    size_t i = ord[k], need = ref_align(b[i].bytes, align), best = n_reg;
    off[i] = 0;
    if (!need)
      continue;
    for (size_t r = 0; r < n_reg; r++)
      if (r_free_after[r] < b[i].first && r_bytes[r] >= need &&
          (best == n_reg || r_bytes[r] < r_bytes[best]))
        best = r;
    if (best == n_reg) {
      r_off[n_reg] = top, r_bytes[n_reg] = need, r_free_after[n_reg] = b[i].last;
      n_reg++;
      off[i] = top;
      top += need;
    } else {
      off[i] = r_off[best];
      r_free_after[best] = b[i].last;
    }
  }
  free(ord), free(r_off), free(r_bytes), free(r_free_after);
  return top;
}

/* A training graph as plan_bench makes it: per layer an activation kept
 * from forward to backward, a derivative, a gradient and a scratch. */
static void training_blocks(nnt_rng *r, nnt_plan_block *b, size_t layers) {
  size_t k = 0;
  for (size_t i = 0; i < layers; i++) {
    unsigned fwd = (unsigned)i, rr = (unsigned)(layers - 1 - i);
    unsigned grad = (unsigned)layers + 3 * rr, deriv = grad + 1, apply = grad + 2;
    size_t sz = (size_t)(256 + nnt_rng_below(r, 4096)) * 4;
    b[k++] = (nnt_plan_block){sz, fwd, deriv, 0};
    b[k++] = (nnt_plan_block){sz, deriv > 3 ? deriv - 3 : 0, deriv, 0};
    b[k++] = (nnt_plan_block){sz / 2, grad, apply, 0};
    b[k++] = (nnt_plan_block){sz / 4, fwd, fwd, 0};
  }
}

/* Lifetime sets of many shapes: short and long lives, dense and sparse
 * orders (past 2^31), one order for all, equal and scattered sizes. */
static size_t shaped_blocks(nnt_rng *r, nnt_plan_block *b, size_t max_n, int shape) {
  size_t n = 1 + nnt_rng_below(r, (uint32_t)max_n);
  unsigned orders = 1 + nnt_rng_below(r, shape % 2 ? 50 : 4000);
  unsigned long_every = 1 + nnt_rng_below(r, 20);
  int sizes = (int)nnt_rng_below(r, 4);
  if (shape == 6) {
    n = 4 * (1 + nnt_rng_below(r, (uint32_t)max_n / 4));
    training_blocks(r, b, n / 4);
    return n;
  }
  for (size_t i = 0; i < n; i++) {
    unsigned f = nnt_rng_below(r, orders), len;
    if (shape == 2) /* all at once */
      f = 7, len = 0;
    else if (i % long_every == 0)
      len = nnt_rng_below(r, orders);
    else
      len = nnt_rng_below(r, 4);
    b[i].first = f;
    b[i].last = f + len;
    if (shape == 4) { /* sparse orders, up to 2^32 - 1 */
      uint64_t f64 = (nnt_rng_next(r) >> 33) * 2;
      uint64_t l64 = f64 + (i % long_every ? nnt_rng_below(r, 3) : nnt_rng_next(r) >> 34);
      b[i].first = (unsigned)f64;
      b[i].last = l64 < UINT32_MAX ? (unsigned)l64 : UINT32_MAX;
    }
    b[i].after = 0;
    switch (sizes) {
    case 0:
      b[i].bytes = (size_t)(1 + nnt_rng_below(r, 4096)) * (nnt_rng_below(r, 8) ? 4 : 64);
      break;
    case 1:
      b[i].bytes = 64 * (1 + nnt_rng_below(r, 3));
      break;
    case 2:
      b[i].bytes = (size_t)1 << nnt_rng_below(r, 22);
      break;
    default:
      b[i].bytes = 1 + nnt_rng_below(r, 200);
    }
    if (!nnt_rng_below(r, 40))
      b[i].bytes = 0;
  }
  return n;
}

static void test_fast_planners_match_reference(void **state) {
  (void)state;
  nnt_rng r;
  nnt_rng_seed(&r, 2024);
  enum { N = 4000 };
  nnt_plan_block *b = malloc(N * sizeof *b);
  size_t *off = malloc(N * sizeof *off), *ref = malloc(N * sizeof *ref);
  assert_true(b && off && ref);
  for (int round = 0; round < 700; round++) {
    int shape = round % 7;
    size_t n = shaped_blocks(&r, b, round % 50 == 0 ? N : 300, shape);
    size_t align = (size_t)1 << nnt_rng_below(&r, 9), pool;
    nnt_err e = {0};
    size_t want = ref_best_fit(b, n, align, ref);
    assert_int_equal(nnt_plan(NNT_PLANNER_BEST_FIT, b, n, align, off, &pool, &e), NNT_OK);
    if (pool != want || memcmp(off, ref, n * sizeof *off))
      fail_msg("best_fit round %d (shape %d, %zu blocks): pool %zu, reference %zu", round, shape,
               n, pool, want);
    if (nnt_plan_validate(b, n, off, pool, align, &e))
      fail_msg("best_fit round %d: %s", round, e.msg);
    want = ref_pool(b, n, align, ref);
    assert_int_equal(nnt_plan(NNT_PLANNER_POOL, b, n, align, off, &pool, &e), NNT_OK);
    if (pool != want || memcmp(off, ref, n * sizeof *off))
      fail_msg("pool round %d (shape %d, %zu blocks): pool %zu, reference %zu", round, shape, n,
               pool, want);
  }
  free(b), free(off), free(ref);
}

static void test_planners_out_of_memory(void **state) {
  (void)state;
  nnt_rng r;
  nnt_rng_seed(&r, 5);
  enum { N = 1200 };
  nnt_plan_block *b = malloc(N * sizeof *b);
  size_t *off = malloc(N * sizeof *off), *ref = malloc(N * sizeof *ref);
  assert_true(b && off && ref);
  training_blocks(&r, b, N / 4);
  const nnt_planner_kind kinds[] = {NNT_PLANNER_BEST_FIT, NNT_PLANNER_POOL};
  for (size_t q = 0; q < 2; q++) {
    size_t want, pool;
    assert_int_equal(nnt_plan(kinds[q], b, N, 64, ref, &want, NULL), NNT_OK);
    int done = 0;
    for (long k = 0; k < 100000 && !done; k++) {
      nnt_err e = {0};
      nnt_alloc_fail_after(k);
      int rc = nnt_plan(kinds[q], b, N, 64, off, &pool, &e);
      nnt_alloc_fail_after(-1);
      if (rc == NNT_OK) {
        done = 1;
        assert_int_equal(pool, want);
        assert_memory_equal(off, ref, N * sizeof *off);
      } else {
        assert_int_equal(rc, NNT_ERR_NOMEM);
        tu_assert_contains(e.msg, "out of memory");
      }
    }
    assert_true(done);
  }
  /* the lower bound sorts a copy: out of memory is an error, never a bound
   * of 0 reported as the plan's (it used to be) */
  size_t lb_want, lb = 7;
  nnt_err e = {0};
  assert_int_equal(nnt_plan_lower_bound(b, N, &lb_want, NULL), NNT_OK);
  assert_true(lb_want > 0);
  nnt_alloc_fail_after(0);
  int rc = nnt_plan_lower_bound(b, N, &lb, &e);
  nnt_alloc_fail_after(-1);
  assert_int_equal(rc, NNT_ERR_NOMEM);
  assert_int_equal(lb, 7);
  tu_assert_contains(e.msg, "out of memory for the lower bound");
  free(b), free(off), free(ref);
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
    size_t lb;
    assert_int_equal(nnt_plan_lower_bound(b, n, &lb, &e), NNT_OK);
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
      b[i] = (nnt_plan_block){64 * (1 + nnt_rng_below(&r, 6)), f, f + nnt_rng_below(&r, 4), 0};
    }
    size_t off[6], pool;
    assert_int_equal(nnt_plan(NNT_PLANNER_BEST_FIT, b, n, 64, off, &pool, NULL), NNT_OK);
    size_t opt = exhaustive(b, n);
    assert_true(opt <= pool);
    size_t lb;
    assert_int_equal(nnt_plan_lower_bound(b, n, &lb, NULL), NNT_OK);
    assert_true(lb <= opt);
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
  nnt_plan_block b[2] = {{128, 0, 5, 0}, {128, 3, 8, 0}};
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
    b[i] = (nnt_plan_block){1024, i, i + 1, 0};
  size_t off[6], pool;
  assert_int_equal(nnt_plan(NNT_PLANNER_BEST_FIT, b, 6, 64, off, &pool, NULL), NNT_OK);
  assert_int_equal(pool, 2048);
  size_t lb;
  assert_int_equal(nnt_plan_lower_bound(b, 6, &lb, NULL), NNT_OK);
  assert_int_equal(lb, 2048);
  assert_int_equal(nnt_plan(NNT_PLANNER_BASIC, b, 6, 64, off, &pool, NULL), NNT_OK);
  assert_int_equal(pool, 6 * 1024);
}

static void test_bad_input(void **state) {
  (void)state;
  nnt_plan_block b = {16, 5, 2, 0};
  size_t off, pool;
  nnt_err e = {0};
  assert_int_equal(nnt_plan(NNT_PLANNER_BEST_FIT, &b, 1, 64, &off, &pool, &e), NNT_ERR_INVAL);
  b.last = 7;
  assert_int_equal(nnt_plan(NNT_PLANNER_BEST_FIT, &b, 1, 48, &off, &pool, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "power of two");
  nnt_plan_block huge[2] = {{SIZE_MAX / 2, 0, 1, 0}, {SIZE_MAX / 2, 1, 2, 0}};
  size_t offs[2];
  assert_int_equal(nnt_plan(NNT_PLANNER_BEST_FIT, huge, 2, 64, offs, &pool, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "SIZE_MAX");
  /* nothing to place */
  assert_int_equal(nnt_plan(NNT_PLANNER_BEST_FIT, huge, 0, 64, offs, &pool, &e), NNT_OK);
  assert_int_equal(pool, 0);
  nnt_planner_kind k;
  assert_int_equal(nnt_planner_from_name("BEST_FIT", &k), NNT_OK);
  assert_int_equal(k, NNT_PLANNER_BEST_FIT);
  assert_int_equal(nnt_planner_from_name("fancy", &k), NNT_ERR_INVAL);
}

/* A buffer type that wants 256-byte offsets (as some GPUs do for storage
 * buffers) gets them from the manager's plan. */
static size_t align_256(const nnt_buffer_type *t) {
  (void)t;
  return 256;
}

static void test_plan_follows_buffer_alignment(void **state) {
  (void)state;
  nnt_buffer_type t = *nnt_buffer_type_host();
  t.alignment = align_256;
  nnt_mgr g;
  nnt_err e = {0};
  nnt_mgr_init(&g);
  nnt_mgr_set_buffer_type(&g, &t);
  int a = nnt_mgr_request(&g, "a", NNT_TK_ACTIVATION, nnt_dim_make(1, 1, 1, 3), 0, 2);
  int b = nnt_mgr_request(&g, "b", NNT_TK_ACTIVATION, nnt_dim_make(1, 1, 1, 5), 1, 3);
  int c = nnt_mgr_request(&g, "c", NNT_TK_ACTIVATION, nnt_dim_make(1, 1, 1, 70), 2, 4);
  assert_true(a >= 0 && b >= 0 && c >= 0);
  assert_int_equal(nnt_mgr_plan(&g, NNT_PLANNER_BEST_FIT, 1, &e), NNT_OK);
  for (int i = 0; i < 3; i++)
    assert_int_equal(g.t[i].offset % 256, 0);
  assert_true(g.arena_bytes >= 3 * 256);
  assert_int_equal(nnt_mgr_alloc(&g, "test", &e), NNT_OK);
  nnt_mgr_free(&g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_plans_valid),
      cmocka_unit_test(test_validator_catches_overlap),
      cmocka_unit_test(test_best_fit_near_optimum_on_small_sets),
      cmocka_unit_test(test_disjoint_lifetimes_share),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_fast_planners_match_reference),
      cmocka_unit_test(test_planners_out_of_memory),
      cmocka_unit_test(test_plan_follows_buffer_alignment),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
