/* Blocks that lie right after another (nnt_plan_block.after) and the
 * manager's pins built on them (nnt_mgr_pin): an in-place forward whose
 * output is smaller than its input keeps the input's start, and the rest
 * of the input is free for other tensors from that step on. */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

#include "manager/manager.h"
#include "manager/planner.h"

/* Random blocks, some following an earlier one (at most one each). */
static void linked_blocks(nnt_rng *r, nnt_plan_block *b, size_t n, unsigned orders) {
  unsigned char followed[256] = {0};
  for (size_t i = 0; i < n; i++) {
    unsigned f = nnt_rng_below(r, orders), len = nnt_rng_below(r, orders / 3 + 1);
    b[i] = (nnt_plan_block){(size_t)(1 + nnt_rng_below(r, 2048)) * 4, f,
                            f + len < orders ? f + len : orders - 1, 0};
    if (i && nnt_rng_below(r, 3) == 0) {
      size_t j = nnt_rng_below(r, (unsigned)i);
      if (!followed[j]) {
        followed[j] = 1;
        b[i].after = (unsigned)j + 1;
      }
    }
  }
}

static void test_links_placed(void **state) {
  (void)state;
  nnt_rng r;
  nnt_rng_seed(&r, 11);
  enum { N = 120 };
  nnt_plan_block b[N];
  size_t off[N], pool, bound;
  unsigned links = 0;
  for (int round = 0; round < 1500; round++) {
    size_t n = 1 + nnt_rng_below(&r, N);
    size_t align = (size_t)4 << nnt_rng_below(&r, 5);
    linked_blocks(&r, b, n, 3 + nnt_rng_below(&r, 60));
    for (size_t i = 0; i < n; i++)
      links += b[i].after != 0;
    nnt_err e = {0};
    assert_int_equal(nnt_plan(NNT_PLANNER_BEST_FIT, b, n, align, off, &pool, &e), NNT_OK);
    /* the validator checks each follower's offset and every overlap */
    if (nnt_plan_validate(b, n, off, pool, align, &e))
      fail_msg("round %d: %s", round, e.msg);
    assert_int_equal(nnt_plan_lower_bound(b, n, &bound, &e), NNT_OK);
    assert_true(pool >= bound);
    /* a follower moved by one alignment step is caught */
    for (size_t i = 0; i < n; i++)
      if (b[i].after) {
        off[i] += align;
        assert_int_equal(nnt_plan_validate(b, n, off, pool + align, align, &e), NNT_ERR_INVAL);
        tu_assert_contains(e.msg, "right after");
        break;
      }
  }
  assert_true(links > 1000);
}

static void test_links_refused(void **state) {
  (void)state;
  nnt_plan_block b[3] = {{64, 0, 2, 0}, {64, 1, 3, 1}, {64, 2, 4, 0}};
  size_t off[3], pool;
  nnt_err e = {0};
  /* only best fit without a chunk places them */
  assert_int_equal(nnt_plan(NNT_PLANNER_BASIC, b, 3, 64, off, &pool, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "only best fit");
  assert_int_equal(nnt_plan(NNT_PLANNER_POOL, b, 3, 64, off, &pool, &e), NNT_ERR_INVAL);
  assert_int_equal(nnt_plan_chunked(NNT_PLANNER_BEST_FIT, b, 3, 64, 4096, off, &pool, &e),
                   NNT_ERR_INVAL);
  assert_int_equal(nnt_plan(NNT_PLANNER_BEST_FIT, b, 3, 64, off, &pool, &e), NNT_OK);
  assert_int_equal(off[1], off[0] + 64);
  /* two followers of one block; a follower of itself or of a later block */
  b[2].after = 1;
  assert_int_equal(nnt_plan(NNT_PLANNER_BEST_FIT, b, 3, 64, off, &pool, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "two blocks follow block 0");
  b[2].after = 3;
  assert_int_equal(nnt_plan(NNT_PLANNER_BEST_FIT, b, 3, 64, off, &pool, &e), NNT_ERR_INVAL);
  b[2].after = 0;
  b[0].after = 2;
  assert_int_equal(nnt_plan(NNT_PLANNER_BEST_FIT, b, 3, 64, off, &pool, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "not an earlier block");
}

static int req(nnt_mgr *g, const char *name, unsigned floats, unsigned first, unsigned last) {
  int id = nnt_mgr_request(g, name, NNT_TK_ACTIVATION, nnt_dim_make(1, 1, 1, floats), first,
                           last);
  assert_true(id >= 0);
  return id;
}

/* q: 8 KiB over orders 0..5; p: 4 KiB over 5..9 pinned to q; x: 4 KiB
 * over 6..9, which fits in q's second half once p took the first. */
static size_t pinned_arena(nnt_planner_kind kind, int pin, unsigned p_floats, int *same_root) {
  nnt_mgr g;
  nnt_err e = {0};
  nnt_mgr_init(&g);
  int q = req(&g, "q", 2048, 0, 5), p = req(&g, "p", p_floats, 5, 9);
  req(&g, "x", 1024, 6, 9);
  if (pin)
    nnt_mgr_pin(&g, p, q);
  else
    nnt_mgr_merge(&g, p, q);
  assert_int_equal(nnt_mgr_plan(&g, kind, 1, &e), NNT_OK);
  assert_int_equal(nnt_mgr_validate(&g, &e), NNT_OK);
  assert_int_equal(g.t[p].offset, g.t[q].offset);
  *same_root = nnt_mgr_root(&g, p) == nnt_mgr_root(&g, q);
  unsigned order;
  size_t kb[NNT_TK__COUNT];
  assert_int_equal(nnt_mgr_peak(&g, &order, kb, &e), NNT_OK);
  assert_int_equal(kb[NNT_TK_ACTIVATION], g.lower_bound); /* what the sweep found */
  size_t arena = g.arena_bytes;
  nnt_mgr_free(&g);
  return arena;
}

static void test_pin_frees_the_tail(void **state) {
  (void)state;
  int same;
  /* pinned: 8 KiB in all, at the lower bound; merged: p holds q's 8 KiB */
  assert_int_equal(pinned_arena(NNT_PLANNER_BEST_FIT, 1, 1024, &same), 8192);
  assert_false(same);
  assert_int_equal(pinned_arena(NNT_PLANNER_BEST_FIT, 0, 1024, &same), 12288);
  assert_true(same);
  /* a pin another planner does not honor, or one no smaller than its
   * base, is a merge */
  assert_int_equal(pinned_arena(NNT_PLANNER_POOL, 1, 1024, &same), 12288);
  assert_true(same);
  assert_int_equal(pinned_arena(NNT_PLANNER_BEST_FIT, 1, 2048, &same), 12288);
  assert_true(same);
}

/* A chain: r 16 KiB over 0..3, q 8 KiB over 3..6 pinned to r, p 4 KiB over
 * 6..9 pinned to q; x 8 KiB over 4..9 takes r's second half. */
static void test_pin_chain(void **state) {
  (void)state;
  for (int pin = 0; pin < 2; pin++) {
    nnt_mgr g;
    nnt_err e = {0};
    nnt_mgr_init(&g);
    int r = req(&g, "r", 4096, 0, 3), q = req(&g, "q", 2048, 3, 6), p = req(&g, "p", 1024, 6, 9);
    int x = req(&g, "x", 2048, 4, 9);
    if (pin) {
      nnt_mgr_pin(&g, q, r);
      nnt_mgr_pin(&g, p, q);
    } else {
      nnt_mgr_merge(&g, q, r);
      nnt_mgr_merge(&g, p, q);
    }
    assert_int_equal(nnt_mgr_plan(&g, NNT_PLANNER_BEST_FIT, 1, &e), NNT_OK);
    assert_int_equal(nnt_mgr_validate(&g, &e), NNT_OK);
    assert_int_equal(g.arena_bytes, pin ? 16384 : 24576);
    assert_int_equal(g.arena_bytes, g.lower_bound);
    assert_int_equal(g.t[q].offset, g.t[r].offset);
    assert_int_equal(g.t[p].offset, g.t[r].offset);
    if (pin) { /* what each keeps for the one pinned to it */
      assert_int_equal(g.t[r].pin_keep, 8192);
      assert_int_equal(g.t[q].pin_keep, 4096);
      assert_int_equal(g.t[p].pin_keep, 0);
      assert_int_equal(g.t[x].offset, 8192);
    }
    nnt_mgr_free(&g);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_links_placed),
      cmocka_unit_test(test_links_refused),
      cmocka_unit_test(test_pin_frees_the_tail),
      cmocka_unit_test(test_pin_chain),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
