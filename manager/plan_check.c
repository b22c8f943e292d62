/* Checks of plans: the lower bound no plan can beat, and the validator
 * (lifetimes against addresses, alignment, the pool's end, chunks). */
#include "manager/planner.h"

#include <stdlib.h>

/* Blocks by index, for sorting. */
typedef struct {
  const nnt_plan_block *b;
  size_t idx;
} order_item;

static int cmp_first(const void *pa, const void *pb) {
  const order_item *a = pa, *b = pb;
  if (a->b->first != b->b->first)
    return a->b->first < b->b->first ? -1 : 1;
  return a->idx < b->idx ? -1 : (a->idx > b->idx);
}

typedef struct {
  unsigned at;
  int end; /* 0: block starts at `at`; 1: block ends after `at` */
  size_t bytes;
} plan_event;

static int cmp_event(const void *pa, const void *pb) {
  const plan_event *a = pa, *b = pb;
  if (a->at != b->at)
    return a->at < b->at ? -1 : 1;
  return a->end - b->end; /* starts before ends at the same order */
}

int nnt_plan_lower_bound(const nnt_plan_block *blocks, size_t n, size_t *bound, nnt_err *e) {
  plan_event *ev = nnt_malloc(2 * n * sizeof *ev);
  if (!ev)
    return nnt_err_set(e, NNT_ERR_NOMEM, "planner: out of memory for the lower bound of %zu "
                       "blocks", n);
  for (size_t i = 0; i < n; i++) {
    ev[2 * i] = (plan_event){blocks[i].first, 0, blocks[i].bytes};
    ev[2 * i + 1] = (plan_event){blocks[i].last, 1, blocks[i].bytes};
  }
  qsort(ev, 2 * n, sizeof *ev, cmp_event);
  size_t cur = 0, best = 0;
  for (size_t i = 0; i < 2 * n; i++) {
    if (!ev[i].end) {
      cur += ev[i].bytes;
      if (cur > best)
        best = cur;
    } else {
      cur -= ev[i].bytes;
    }
  }
  nnt_free(ev);
  *bound = best;
  return NNT_OK;
}

int nnt_plan_validate(const nnt_plan_block *b, size_t n, const size_t *off,
                      size_t pool, size_t align, nnt_err *e) {
  return nnt_plan_validate_chunked(b, n, off, pool, align, 0, e);
}

int nnt_plan_validate_chunked(const nnt_plan_block *b, size_t n, const size_t *off,
                              size_t pool, size_t align, size_t chunk, nnt_err *e) {
  for (size_t i = 0; i < n; i++) {
    if (!b[i].bytes)
      continue;
    if (off[i] % align)
      return nnt_err_set(e, NNT_ERR_INVAL, "plan: block %zu at offset %zu is not %zu-aligned",
                         i, off[i], align);
    if (chunk && off[i] / chunk != (off[i] + b[i].bytes - 1) / chunk)
      return nnt_err_set(e, NNT_ERR_INVAL, "plan: block %zu [%zu, %zu) crosses a multiple of "
                         "the chunk of %zu bytes", i, off[i], off[i] + b[i].bytes, chunk);
    if (off[i] + b[i].bytes > pool)
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "plan: block %zu [%zu, %zu) lies outside the pool of %zu bytes", i, off[i],
                         off[i] + b[i].bytes, pool);
    size_t a = b[i].after - 1;
    if (b[i].after && (a >= i || off[i] != off[a] + ((b[a].bytes + align - 1) & ~(align - 1))))
      return nnt_err_set(e, NNT_ERR_INVAL, "plan: block %zu at %zu does not lie right after "
                         "block %u", i, off[i], b[i].after - 1);
  }
  /* Pairs that overlap in time must not overlap in memory. Sort by first
   * order and sweep, so the check is near-linear for sparse lifetimes. */
  order_item *ord = nnt_malloc(n * sizeof *ord);
  if (!ord)
    return nnt_err_set(e, NNT_ERR_NOMEM, "plan validator: out of memory");
  for (size_t i = 0; i < n; i++)
    ord[i] = (order_item){&b[i], i};
  qsort(ord, n, sizeof *ord, cmp_first);
  int rc = NNT_OK;
  for (size_t x = 0; x < n && !rc; x++) {
    size_t i = ord[x].idx;
    if (!b[i].bytes)
      continue;
    for (size_t y = x + 1; y < n && b[ord[y].idx].first <= b[i].last; y++) {
      size_t j = ord[y].idx;
      if (!b[j].bytes)
        continue;
      if (off[i] < off[j] + b[j].bytes && off[j] < off[i] + b[i].bytes)
        rc = nnt_err_set(
            e, NNT_ERR_INVAL,
            "plan: blocks %zu [%zu+%zu, orders %u..%u] and %zu [%zu+%zu, orders %u..%u] overlap", i,
            off[i], b[i].bytes, b[i].first, b[i].last, j, off[j], b[j].bytes, b[j].first,
            b[j].last);
    }
  }
  nnt_free(ord);
  return rc;
}
