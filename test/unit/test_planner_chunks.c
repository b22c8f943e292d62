/* Planning with a chunk (a buffer type's largest range one op may reach):
 * no block crosses a multiple of it, best fit still takes the lowest free
 * offset that does not, a chunk of 0 plans as before, and a tensor larger
 * than the chunk is refused by name. */
#include "test_util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "manager/manager.h"
#include "manager/planner.h"

static void random_blocks(nnt_rng *r, nnt_plan_block *b, size_t n, unsigned orders,
                          size_t max_bytes) {
  for (size_t i = 0; i < n; i++) {
    unsigned f = nnt_rng_below(r, orders), len = nnt_rng_below(r, orders / 4 + 1);
    b[i].first = f;
    b[i].last = f + len < orders ? f + len : orders - 1;
    b[i].after = 0;
    b[i].bytes = 4 * (size_t)(1 + nnt_rng_below(r, (unsigned)(max_bytes / 4)));
    if (!nnt_rng_below(r, 50))
      b[i].bytes = 0;
  }
}

static size_t up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Best fit written plainly: largest first (then longer-lived, then by
 * index), each at the lowest aligned offset free of every placed block
 * whose life meets its own and crossing no chunk. */
static const nnt_plan_block *ref_b;
static int ref_cmp(const void *pa, const void *pb) {
  size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
  const nnt_plan_block *x = &ref_b[a], *y = &ref_b[b];
  if (x->bytes != y->bytes)
    return x->bytes > y->bytes ? -1 : 1;
  if (x->last - x->first != y->last - y->first)
    return x->last - x->first > y->last - y->first ? -1 : 1;
  return a < b ? -1 : 1;
}

static void ref_best_fit(const nnt_plan_block *b, size_t n, size_t align, size_t chunk,
                         size_t *off) {
  size_t ord[256], placed[256], np = 0;
  for (size_t i = 0; i < n; i++)
    ord[i] = i, off[i] = 0;
  ref_b = b;
  qsort(ord, n, sizeof *ord, ref_cmp);
  for (size_t k = 0; k < n; k++) {
    size_t i = ord[k], need = up(b[i].bytes, align), at = 0;
    if (!need)
      continue;
    for (int moved = 1; moved;) {
      moved = 0;
      if (at % chunk + need > chunk)
        at = up(at + 1, chunk), moved = 1;
      for (size_t q = 0; q < np; q++) {
        size_t j = placed[q], jend = off[j] + up(b[j].bytes, align);
        if (b[j].first <= b[i].last && b[i].first <= b[j].last && off[j] < at + need &&
            at < jend)
          at = jend, moved = 1;
      }
    }
    off[i] = at;
    placed[np++] = i;
  }
}

static void test_no_block_crosses_a_chunk(void **state) {
  (void)state;
  nnt_rng r;
  nnt_rng_seed(&r, 7);
  enum { N = 160 };
  nnt_plan_block b[N];
  size_t off[N], ref[N], pool;
  const nnt_planner_kind kinds[] = {NNT_PLANNER_BASIC, NNT_PLANNER_BEST_FIT, NNT_PLANNER_POOL};
  size_t moved = 0;
  for (int round = 0; round < 600; round++) {
    size_t n = 1 + nnt_rng_below(&r, N), chunk = 64 * (size_t)(16 + nnt_rng_below(&r, 64));
    random_blocks(&r, b, n, 4 + nnt_rng_below(&r, 60), chunk);
    nnt_err e = {0};
    for (int k = 0; k < 3; k++) {
      assert_int_equal(nnt_plan_chunked(kinds[k], b, n, 64, chunk, off, &pool, &e), NNT_OK);
      if (nnt_plan_validate_chunked(b, n, off, pool, 64, chunk, &e))
        fail_msg("round %d, %s: %s", round, nnt_planner_name(kinds[k]), e.msg);
      for (size_t i = 0; i < n; i++)
        moved += b[i].bytes && off[i] % chunk == 0 && off[i];
    }
    assert_int_equal(nnt_plan_chunked(NNT_PLANNER_BEST_FIT, b, n, 64, chunk, off, &pool, &e),
                     NNT_OK);
    ref_best_fit(b, n, 64, chunk, ref);
    for (size_t i = 0; i < n; i++)
      if (off[i] != ref[i])
        fail_msg("round %d: block %zu at %zu, the plain best fit puts it at %zu", round, i,
                 off[i], ref[i]);
  }
  assert_true(moved > 600); /* blocks did move up to a chunk's start */
}

/* A chunk of 0 is the plan without one, offset for offset. */
static void test_no_chunk_plans_as_before(void **state) {
  (void)state;
  nnt_rng r;
  nnt_rng_seed(&r, 8);
  enum { N = 120 };
  nnt_plan_block b[N];
  size_t a[N], z[N], pa, pz;
  for (int round = 0; round < 300; round++) {
    size_t n = 1 + nnt_rng_below(&r, N);
    random_blocks(&r, b, n, 4 + nnt_rng_below(&r, 60), 1 << 16);
    for (int k = 0; k < 3; k++) {
      nnt_err e = {0};
      assert_int_equal(nnt_plan((nnt_planner_kind)k, b, n, 64, a, &pa, &e), NNT_OK);
      assert_int_equal(nnt_plan_chunked((nnt_planner_kind)k, b, n, 64, 0, z, &pz, &e), NNT_OK);
      assert_int_equal(pa, pz);
      assert_memory_equal(a, z, n * sizeof *a);
    }
  }
}

static void test_bad_chunks(void **state) {
  (void)state;
  nnt_plan_block b[2] = {{100, 0, 1, 0}, {300, 1, 2, 0}};
  size_t off[2] = {0, 0}, pool;
  nnt_err e = {0};
  assert_int_equal(nnt_plan_chunked(NNT_PLANNER_BEST_FIT, b, 2, 64, 96, off, &pool, &e),
                   NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "not a multiple of the alignment");
  assert_int_equal(nnt_plan_chunked(NNT_PLANNER_POOL, b, 2, 64, 256, off, &pool, &e),
                   NNT_ERR_NOT_SUPPORTED);
  tu_assert_contains(e.msg, "block 1 of 300 bytes is larger than the chunk of 256");
  /* the validator sees a block across a chunk's end */
  b[1].bytes = 200;
  off[1] = 128;
  assert_int_equal(nnt_plan_validate_chunked(b, 2, off, 512, 64, 256, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "block 1 [128, 328) crosses a multiple of the chunk of 256");
  assert_int_equal(nnt_plan_validate_chunked(b, 2, off, 512, 64, 0, &e), NNT_OK);
}

/* The manager takes the chunk from the buffer type and names a tensor too
 * large for it, with its layer and both sizes. */
static size_t chunk_256(const nnt_buffer_type *t) {
  (void)t;
  return 256;
}

static void test_manager_refuses_a_tensor_larger_than_the_chunk(void **state) {
  (void)state;
  nnt_buffer_type t = *nnt_buffer_type_host();
  t.chunk = chunk_256;
  nnt_mgr g;
  nnt_err e = {0};
  nnt_mgr_init(&g);
  nnt_mgr_set_buffer_type(&g, &t);
  assert_int_equal(g.chunk, 256);
  for (int i = 0; i < 6; i++) /* 60 floats each: 240 bytes, four cannot share a chunk */
    assert_true(nnt_mgr_request(&g, "fc1:out0", NNT_TK_ACTIVATION, nnt_dim_make(1, 1, 1, 60),
                                0, 1) >= 0);
  assert_int_equal(nnt_mgr_plan(&g, NNT_PLANNER_BEST_FIT, 1, &e), NNT_OK);
  for (size_t i = 0; i < g.n; i++)
    assert_int_equal(g.t[i].offset, 256 * i);
  assert_int_equal(g.arena_bytes, 5 * 256 + 256);
  assert_int_equal(nnt_mgr_validate(&g, &e), NNT_OK);
  assert_int_equal(nnt_mgr_request(&g, "conv2:scratch1", NNT_TK_SCRATCH,
                                   nnt_dim_make(1, 1, 1, 65), 0, 1), 6);
  assert_int_equal(nnt_mgr_plan(&g, NNT_PLANNER_BEST_FIT, 1, &e), NNT_ERR_NOT_SUPPORTED);
  tu_assert_contains(e.msg, "[conv2] tensor 'conv2:scratch1' needs 260 bytes, more than 256 "
                            "bytes, the device's largest storage-buffer range");
  nnt_mgr_free(&g);
  /* a placed plan is validated against the chunk too */
  nnt_mgr_init(&g);
  nnt_mgr_set_buffer_type(&g, &t);
  nnt_mgr_set_align(&g, 4);
  assert_int_equal(nnt_mgr_request(&g, "a:w", NNT_TK_WEIGHT, nnt_dim_make(1, 1, 1, 40), 0, 0),
                   0);
  size_t off = 100;
  assert_int_equal(nnt_mgr_place(&g, &off, 300, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "crosses a multiple of the chunk of 256");
  off = 96;
  assert_int_equal(nnt_mgr_place(&g, &off, 300, &e), NNT_OK);
  assert_int_equal(g.t[0].offset, 96);
  assert_int_equal(nnt_mgr_alloc(&g, "test", &e), NNT_OK);
  nnt_mgr_free(&g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_block_crosses_a_chunk),
      cmocka_unit_test(test_no_chunk_plans_as_before),
      cmocka_unit_test(test_bad_chunks),
      cmocka_unit_test(test_manager_refuses_a_tensor_larger_than_the_chunk),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
