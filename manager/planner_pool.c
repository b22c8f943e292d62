/* The memory-pool planner (NNT_PLANNER_POOL). */
#include "manager/planner_impl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The memory-pool scheme: walk the orders; blocks whose life ended return
 * their region to a free pool; a starting block takes the smallest free
 * region that holds it, whole, or else new memory at the top. */
static int cmp_start(const void *pa, const void *pb) {
  const order_item *a = pa, *b = pb;
  if (a->b->first != b->b->first)
    return a->b->first < b->b->first ? -1 : 1;
  return nnt_plan_cmp_size_desc(pa, pb);
}

/* A set of slots 0..n-1 as a bitmap with summary levels (bit j of level
 * l + 1: word j of level l is not zero), to find the first slot at or after
 * a position in a few word operations. */
typedef struct {
  uint64_t *w[7];
  size_t words[7], levels;
} slot_set;

static int slots_init(slot_set *s, size_t n) {
  size_t total = 0, words = n / 64 + 1;
  s->levels = 0;
  for (;;) {
    s->words[s->levels++] = words;
    total += words;
    if (words == 1)
      break;
    words = (words + 63) / 64;
  }
  uint64_t *mem = nnt_calloc(total, sizeof *mem);
  if (!mem)
    return -1;
  for (size_t l = 0; l < s->levels; mem += s->words[l++])
    s->w[l] = mem;
  return 0;
}

static void slots_put(slot_set *s, size_t i) {
  for (size_t l = 0; l < s->levels; l++, i /= 64) {
    uint64_t was = s->w[l][i / 64];
    s->w[l][i / 64] = was | (uint64_t)1 << (i % 64);
    if (was)
      break;
  }
}

static void slots_take(slot_set *s, size_t i) {
  for (size_t l = 0; l < s->levels; l++, i /= 64)
    if ((s->w[l][i / 64] &= ~((uint64_t)1 << (i % 64))))
      break;
}

/* The first slot >= i, or SIZE_MAX. */
static size_t slots_next(const slot_set *s, size_t i) {
  size_t l = 0;
  for (;; l++, i = i / 64 + 1) {
    if (i / 64 >= s->words[l])
      return SIZE_MAX;
    uint64_t m = s->w[l][i / 64] & (~(uint64_t)0 << (i % 64));
    if (m) {
      i = i / 64 * 64 + (size_t)__builtin_ctzll(m);
      break;
    }
    if (l + 1 == s->levels)
      return SIZE_MAX;
  }
  while (l--)
    i = i * 64 + (size_t)__builtin_ctzll(s->w[l][i]);
  return i;
}

static int cmp_size(const void *pa, const void *pb) {
  size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
  return a < b ? -1 : (a > b);
}

/* A busy region: free after order `until`. */
typedef struct {
  unsigned until;
  size_t slot;
} pool_busy;

static void busy_push(pool_busy *h, size_t *n, pool_busy x) {
  size_t i = (*n)++;
  for (; i && h[(i - 1) / 2].until > x.until; i = (i - 1) / 2)
    h[i] = h[(i - 1) / 2];
  h[i] = x;
}

static pool_busy busy_pop(pool_busy *h, size_t *n) {
  pool_busy top = h[0], x = h[--*n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n)
      break;
    if (c + 1 < *n && h[c + 1].until < h[c].until)
      c++;
    if (h[c].until >= x.until)
      break;
    h[i] = h[c];
    i = c;
  }
  if (*n)
    h[i] = x;
  return top;
}

/* Regions are never split or merged, so a region's size is the rounded size
 * of the block that made it. Slots order the regions by (size, creation):
 * the sizes in ascending order each get as many slots as blocks of that size,
 * filled in creation order. The smallest free region that holds a block,
 * the first made among equals, is the first free slot at or after its size's
 * first slot; busy regions wait in a heap by the order they free at. */
int nnt_plan_pool(const nnt_plan_block *b, size_t n, size_t align, size_t chunk, size_t *off,
                  size_t *pool, nnt_err *e) {
  order_item *ord = nnt_malloc((n + 1) * sizeof *ord);
  size_t *size = nnt_malloc((n + 1) * sizeof *size);  /* distinct sizes, ascending */
  size_t *first = nnt_malloc((n + 1) * sizeof *first); /* per size: its first slot */
  size_t *fill = nnt_malloc((n + 1) * sizeof *fill);   /* per size: its next new slot */
  size_t *where = nnt_malloc((n + 1) * sizeof *where); /* per slot: region offset */
  pool_busy *busy = nnt_malloc((n + 1) * sizeof *busy);
  slot_set free_slots = {0};
  int rc = NNT_OK;
  if (!ord || !size || !first || !fill || !where || !busy || slots_init(&free_slots, n)) {
    rc = nnt_err_set(e, NNT_ERR_NOMEM, "planner: out of memory for %zu blocks", n);
    goto out;
  }
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (b[i].bytes)
      size[m++] = align_up(b[i].bytes, align);
  qsort(size, m, sizeof *size, cmp_size);
  size_t n_size = 0;
  for (size_t j = 0; j < m; j++) {
    if (!n_size || size[n_size - 1] != size[j]) {
      size[n_size] = size[j];
      first[n_size] = fill[n_size] = j;
      n_size++;
    }
  }
  for (size_t i = 0; i < n; i++)
    ord[i] = (order_item){&b[i], i};
  qsort(ord, n, sizeof *ord, cmp_start);
  size_t n_busy = 0, top = 0;
  for (size_t k = 0; k < n; k++) {
    size_t i = ord[k].idx;
    size_t need = align_up(b[i].bytes, align);
    if (!need) {
      off[i] = 0;
      continue;
    }
    while (n_busy && busy[0].until < b[i].first)
      slots_put(&free_slots, busy_pop(busy, &n_busy).slot);
    size_t lo = 0, hi = n_size; /* the first size >= need */
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (size[mid] < need)
        lo = mid + 1;
      else
        hi = mid;
    }
    size_t slot = slots_next(&free_slots, first[lo]);
    if (slot == SIZE_MAX) { /* a new region; its size is exactly need */
      slot = fill[lo]++;
      top = chunk_fit(top, need, chunk); /* a reused region is inside one chunk */
      where[slot] = top;
      top += need;
    } else {
      slots_take(&free_slots, slot);
    }
    off[i] = where[slot];
    busy_push(busy, &n_busy, (pool_busy){b[i].last, slot});
  }
  *pool = top;
out:
  nnt_free(ord), nnt_free(size), nnt_free(first), nnt_free(fill), nnt_free(where);
  nnt_free(busy), nnt_free(free_slots.w[0]);
  return rc;
}

