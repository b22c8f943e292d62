/* Planners and the plan validator. */
#include "manager/planner.h"

#include <stdlib.h>
#include <string.h>

int nnt_planner_from_name(const char *name, nnt_planner_kind *out) {
  if (nnt_streq(name, "basic"))
    *out = NNT_PLANNER_BASIC;
  else if (nnt_streq(name, "best_fit"))
    *out = NNT_PLANNER_BEST_FIT;
  else if (nnt_streq(name, "pool"))
    *out = NNT_PLANNER_POOL;
  else
    return NNT_ERR_INVAL;
  return NNT_OK;
}

const char *nnt_planner_name(nnt_planner_kind k) {
  switch (k) {
  case NNT_PLANNER_BASIC:
    return "basic";
  case NNT_PLANNER_POOL:
    return "pool";
  default:
    return "best_fit";
  }
}

static size_t align_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }

static int plan_basic(const nnt_plan_block *b, size_t n, size_t align,
                      size_t *off, size_t *pool) {
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    off[i] = b[i].bytes ? at : 0;
    at += align_up(b[i].bytes, align);
  }
  *pool = at;
  return NNT_OK;
}

/* Sort keys for best fit: larger first, then longer-lived, then index. */
typedef struct {
  const nnt_plan_block *b;
  size_t idx;
} order_item;

static int cmp_size_desc(const void *pa, const void *pb) {
  const order_item *a = pa, *b = pb;
  if (a->b->bytes != b->b->bytes)
    return a->b->bytes > b->b->bytes ? -1 : 1;
  unsigned la = a->b->last - a->b->first, lb = b->b->last - b->b->first;
  if (la != lb)
    return la > lb ? -1 : 1;
  return a->idx < b->idx ? -1 : (a->idx > b->idx);
}

static int cmp_first(const void *pa, const void *pb) {
  const order_item *a = pa, *b = pb;
  if (a->b->first != b->b->first)
    return a->b->first < b->b->first ? -1 : 1;
  return a->idx < b->idx ? -1 : (a->idx > b->idx);
}

/* Place blocks largest first; each goes to the lowest aligned address that
 * is free over its lifetime among the blocks already placed. The placed
 * blocks are kept sorted by offset (struct of arrays, insertion by memmove),
 * so finding the first gap is one linear scan with no sorting. */
typedef struct placed_set {
  uint64_t *life; /* first << 32 | last: one load decides most skips */
  size_t *start, *end;
  size_t n;
} placed_set;

static size_t first_gap(const placed_set *p, unsigned first, unsigned last,
                        size_t bytes, size_t align) {
  size_t at = 0;
  const uint64_t *life = p->life;
  for (size_t j = 0; j < p->n; j++) {
    uint64_t l = life[j];
    if ((unsigned)(l >> 32) > last || (unsigned)l < first)
      continue;
    if (p->start[j] >= at + bytes)
      break;
    if (p->end[j] > at)
      at = align_up(p->end[j], align);
  }
  return at;
}

static void placed_insert(placed_set *p, size_t start, size_t end, unsigned first,
                          unsigned last) {
  size_t lo = 0, hi = p->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (p->start[mid] <= start)
      lo = mid + 1;
    else
      hi = mid;
  }
  size_t tail = p->n - lo;
  memmove(p->life + lo + 1, p->life + lo, tail * sizeof *p->life);
  memmove(p->start + lo + 1, p->start + lo, tail * sizeof *p->start);
  memmove(p->end + lo + 1, p->end + lo, tail * sizeof *p->end);
  p->life[lo] = (uint64_t)first << 32 | last;
  p->start[lo] = start;
  p->end[lo] = end;
  p->n++;
}

static int plan_best_fit(const nnt_plan_block *b, size_t n, size_t align,
                         size_t *off, size_t *pool, nnt_err *e) {
  order_item *ord = nnt_malloc((n + 1) * sizeof *ord);
  placed_set p = {nnt_malloc((n + 1) * sizeof(uint64_t)), nnt_malloc((n + 1) * sizeof(size_t)),
                  nnt_malloc((n + 1) * sizeof(size_t)), 0};
  int rc = NNT_OK;
  if (!ord || !p.life || !p.start || !p.end) {
    rc = nnt_err_set(e, NNT_ERR_NOMEM, "planner: out of memory for %zu blocks", n);
    goto out;
  }
  for (size_t i = 0; i < n; i++)
    ord[i] = (order_item){&b[i], i};
  qsort(ord, n, sizeof *ord, cmp_size_desc);
  size_t top = 0;
  for (size_t k = 0; k < n; k++) {
    size_t i = ord[k].idx;
    if (!b[i].bytes) {
      off[i] = 0;
      continue;
    }
    size_t at = first_gap(&p, b[i].first, b[i].last, b[i].bytes, align);
    off[i] = at;
    if (at + b[i].bytes > top)
      top = at + b[i].bytes;
    placed_insert(&p, at, at + b[i].bytes, b[i].first, b[i].last);
  }
  *pool = align_up(top, align);
out:
  nnt_free(ord), nnt_free(p.life), nnt_free(p.start), nnt_free(p.end);
  return rc;
}

/* The memory-pool scheme: walk the orders; blocks whose life ended return
 * their region to a free pool; a starting block takes the smallest free
 * region that holds it, whole, or else new memory at the top. */
static int cmp_start(const void *pa, const void *pb) {
  const order_item *a = pa, *b = pb;
  if (a->b->first != b->b->first)
    return a->b->first < b->b->first ? -1 : 1;
  return cmp_size_desc(pa, pb);
}

typedef struct {
  size_t offset, bytes;
  unsigned free_after; /* order after which the region is free */
} pool_region;

static int plan_pool(const nnt_plan_block *b, size_t n, size_t align, size_t *off,
                     size_t *pool, nnt_err *e) {
  order_item *ord = nnt_malloc((n + 1) * sizeof *ord);
  pool_region *reg = nnt_malloc((n + 1) * sizeof *reg);
  if (!ord || !reg) {
    nnt_free(ord), nnt_free(reg);
    return nnt_err_set(e, NNT_ERR_NOMEM, "planner: out of memory for %zu blocks", n);
  }
  for (size_t i = 0; i < n; i++)
    ord[i] = (order_item){&b[i], i};
  qsort(ord, n, sizeof *ord, cmp_start);
  size_t n_reg = 0, top = 0;
  for (size_t k = 0; k < n; k++) {
    size_t i = ord[k].idx;
    size_t need = align_up(b[i].bytes, align);
    if (!need) {
      off[i] = 0;
      continue;
    }
    size_t best = n_reg;
    for (size_t r = 0; r < n_reg; r++)
      if (reg[r].free_after < b[i].first && reg[r].bytes >= need &&
          (best == n_reg || reg[r].bytes < reg[best].bytes))
        best = r;
    if (best == n_reg) {
      reg[n_reg++] = (pool_region){top, need, b[i].last};
      off[i] = top;
      top += need;
    } else {
      off[i] = reg[best].offset;
      reg[best].free_after = b[i].last;
    }
  }
  *pool = top;
  nnt_free(ord), nnt_free(reg);
  return NNT_OK;
}

int nnt_plan(nnt_planner_kind kind, const nnt_plan_block *blocks, size_t n,
             size_t align, size_t *offsets, size_t *pool_bytes, nnt_err *e) {
  if (!align || (align & (align - 1)))
    return nnt_err_set(e, NNT_ERR_INVAL, "planner: alignment %zu is not a power of two", align);
  for (size_t i = 0; i < n; i++)
    if (blocks[i].first > blocks[i].last)
      return nnt_err_set(e, NNT_ERR_INVAL, "planner: block %zu ends (%u) before it starts (%u)",
                         i, blocks[i].last, blocks[i].first);
  if (kind == NNT_PLANNER_BASIC)
    return plan_basic(blocks, n, align, offsets, pool_bytes);
  if (kind == NNT_PLANNER_POOL)
    return plan_pool(blocks, n, align, offsets, pool_bytes, e);
  return plan_best_fit(blocks, n, align, offsets, pool_bytes, e);
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

size_t nnt_plan_lower_bound(const nnt_plan_block *blocks, size_t n) {
  plan_event *ev = nnt_malloc(2 * n * sizeof *ev);
  if (!ev)
    return 0;
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
  return best;
}

int nnt_plan_validate(const nnt_plan_block *b, size_t n, const size_t *off,
                      size_t pool, size_t align, nnt_err *e) {
  for (size_t i = 0; i < n; i++) {
    if (!b[i].bytes)
      continue;
    if (off[i] % align)
      return nnt_err_set(e, NNT_ERR_INVAL, "plan: block %zu at offset %zu is not %zu-aligned",
                         i, off[i], align);
    if (off[i] + b[i].bytes > pool)
      return nnt_err_set(e, NNT_ERR_INVAL, "plan: block %zu [%zu, %zu) lies outside the pool of %zu bytes",
                         i, off[i], off[i] + b[i].bytes, pool);
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
        rc = nnt_err_set(e, NNT_ERR_INVAL,
                         "plan: blocks %zu [%zu+%zu, orders %u..%u] and %zu [%zu+%zu, orders %u..%u] overlap",
                         i, off[i], b[i].bytes, b[i].first, b[i].last, j, off[j],
                         b[j].bytes, b[j].first, b[j].last);
    }
  }
  nnt_free(ord);
  return rc;
}
