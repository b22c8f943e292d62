/* Planners and the plan validator. */
#include "manager/planner.h"
#include "manager/planner_impl.h"

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


static int plan_basic(const nnt_plan_block *b, size_t n, size_t align, size_t chunk,
                      size_t *off, size_t *pool) {
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    size_t need = align_up(b[i].bytes, align);
    if (need)
      at = chunk_fit(at, need, chunk);
    off[i] = b[i].bytes ? at : 0;
    at += need;
  }
  *pool = at;
  return NNT_OK;
}

/* Larger first, then longer-lived, then by index. */
int nnt_plan_cmp_size_desc(const void *pa, const void *pb) {
  const order_item *a = pa, *b = pb;
  if (a->b->bytes != b->b->bytes)
    return a->b->bytes > b->b->bytes ? -1 : 1;
  unsigned la = a->b->last - a->b->first, lb = b->b->last - b->b->first;
  if (la != lb)
    return la > lb ? -1 : 1;
  return a->idx < b->idx ? -1 : (a->idx > b->idx);
}

/* Best fit places blocks largest first (ties: longer-lived, then by index),
 * each at the lowest aligned offset where it overlaps no placed block whose
 * lifetime meets its own. Scanning every placed block for that is quadratic,
 * and a training graph is the bad case: activations live from forward to
 * backward, so a block meets thousands of others stacked below its answer,
 * and blocks of other times crowd the same addresses.
 *
 * So time is cut into cells (a power of two, about sqrt(n / 32), at most
 * 256; equal widths when orders are dense, else at quantiles) and kept:
 *  - span[c]: the union of the address ranges of placed blocks living
 *    through all of cell c (each meets any block that touches c);
 *  - reg[c]: a treap by address of the placed blocks that touch cell c but do
 *    not cover it (each block is in at most two), with subtree aggregates to
 *    skip those that end below the candidate or miss the lifetime;
 *  - all[v], over the cells as a segment tree: the union of placed blocks
 *    touching any cell under node v (each meets a block covering those cells).
 * A block covering cells a..z whole and touching cells cf and cl in part
 * meets exactly the blocks in all[] of the canonical nodes of [a, z], in
 * span[cf] and span[cl], and those of reg[cf] and reg[cl] whose lifetime
 * meets its own. The candidate offset starts at 0 and only grows: each union
 * lifts it over the ranges (and gaps too small) in its way, searching forward
 * from where it last stood, and each treap is walked once in address order;
 * when none moves it, it is the lowest offset free of every conflicting
 * block, the offset the scan over all placed blocks finds, so the plans are
 * the same, only found faster. A stack of conflicting blocks is one range of
 * a union, cleared in one step. A placed block is added to about three
 * unions per cell it covers, so long-lived blocks cost O(cells) each: on the
 * nested lifetimes of a training graph planning grows like n^1.5, not n^2.
 * All offsets and range ends are multiples of the alignment. */
typedef struct {
  size_t lo, hi; /* [lo, hi) */
} bf_span;

typedef struct {
  bf_span *v; /* sorted, disjoint, not touching */
  size_t n, cap;
} bf_spans;

/* A position in a span set that only moves up: *i is at or before the first
 * span ending above the candidate. Returns the lowest at' >= at such that
 * [at', at' + need) misses every span. */
static size_t spans_fit(const bf_spans *s, size_t *i, size_t at, size_t need) {
  const bf_span *v = s->v;
  size_t lo = *i, n = s->n;
  if (lo < n && v[lo].hi <= at) { /* gallop, then bisect, to the first hi > at */
    size_t step = 1, hi = lo + 1;
    while (hi < n && v[hi].hi <= at) {
      lo = hi;
      step *= 2;
      hi = lo + step;
    }
    if (hi > n)
      hi = n;
    while (lo + 1 < hi) {
      size_t mid = lo + (hi - lo) / 2;
      if (v[mid].hi <= at)
        lo = mid;
      else
        hi = mid;
    }
    lo = hi;
  }
  for (; lo < n && v[lo].lo < at + need; lo++)
    at = v[lo].hi;
  *i = lo;
  return at;
}

static int spans_add(bf_spans *s, size_t a, size_t z) {
  bf_span *v = s->v;
  size_t n = s->n, lo = 0, hi = n;
  while (lo < hi) { /* first span ending at or after a */
    size_t mid = (lo + hi) / 2;
    if (v[mid].hi < a)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < n && v[lo].lo <= a && v[lo].hi >= z)
    return 0; /* covered already */
  size_t j = lo;
  while (j < n && v[j].lo <= z)
    j++;
  if (j > lo) { /* merge with spans lo..j-1 */
    if (v[lo].lo < a)
      a = v[lo].lo;
    if (v[j - 1].hi > z)
      z = v[j - 1].hi;
    v[lo] = (bf_span){a, z};
    memmove(v + lo + 1, v + j, (n - j) * sizeof *v);
    s->n -= j - lo - 1;
    return 0;
  }
  if (n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 8;
    bf_span *nv = nnt_realloc(v, cap * sizeof *nv);
    if (!nv)
      return -1;
    s->v = v = nv;
    s->cap = cap;
  }
  memmove(v + lo + 1, v + lo, (n - lo) * sizeof *v);
  v[lo] = (bf_span){a, z};
  s->n++;
  return 0;
}

/* A treap node: one block in one cell's registry. Index 0 is "none". */
typedef struct {
  size_t lo, hi, max_hi;                     /* address, and max hi below */
  unsigned first, last, min_first, max_last; /* lifetime, and its span below */
  unsigned left, right, prio;
} bf_node;

static void node_pull(bf_node *t, unsigned x) {
  bf_node *p = &t[x];
  p->max_hi = p->hi;
  p->min_first = p->first;
  p->max_last = p->last;
  for (int side = 0; side < 2; side++) {
    unsigned c = side ? p->right : p->left;
    if (!c)
      continue;
    if (t[c].max_hi > p->max_hi)
      p->max_hi = t[c].max_hi;
    if (t[c].min_first < p->min_first)
      p->min_first = t[c].min_first;
    if (t[c].max_last > p->max_last)
      p->max_last = t[c].max_last;
  }
}

/* Treap order: by address, then by first order (so blocks reusing one
 * address sit in time order and prune together), then by index. */
static int node_before(const bf_node *t, unsigned x, unsigned y) {
  if (t[x].lo != t[y].lo)
    return t[x].lo < t[y].lo;
  if (t[x].first != t[y].first)
    return t[x].first < t[y].first;
  return x < y;
}

/* Insert node x into the treap at *root; path has room for its height. */
static void treap_insert(bf_node *t, unsigned *root, unsigned x, unsigned *path) {
  size_t depth = 0;
  unsigned cur = *root;
  while (cur) {
    bf_node *p = &t[cur];
    if (t[x].hi > p->max_hi) /* x goes below: widen the aggregates */
      p->max_hi = t[x].hi;
    if (t[x].first < p->min_first)
      p->min_first = t[x].first;
    if (t[x].last > p->max_last)
      p->max_last = t[x].last;
    path[depth++] = cur;
    cur = node_before(t, x, cur) ? p->left : p->right;
  }
  if (!depth) {
    *root = x;
    return;
  }
  unsigned parent = path[depth - 1];
  if (node_before(t, x, parent))
    t[parent].left = x;
  else
    t[parent].right = x;
  while (depth && t[x].prio > t[path[depth - 1]].prio) { /* rotate x up */
    unsigned p = path[--depth];
    if (t[p].left == x) {
      t[p].left = t[x].right;
      t[x].right = p;
    } else {
      t[p].right = t[x].left;
      t[x].left = p;
    }
    node_pull(t, p);
    node_pull(t, x);
    if (!depth)
      *root = x;
    else if (t[path[depth - 1]].left == p)
      t[path[depth - 1]].left = x;
    else
      t[path[depth - 1]].right = x;
  }
}

/* An in-order walk over one registry, skipping subtrees that cannot block:
 * all of it ending at or below the candidate (which only grows), or no
 * lifetime meeting [first, last]. */
typedef struct {
  unsigned *stack;
  size_t sp;
} bf_walk;

static void walk_down(const bf_node *t, bf_walk *w, unsigned x, size_t at, unsigned first,
                      unsigned last) {
  while (x && t[x].max_hi > at && t[x].min_first <= last && t[x].max_last >= first) {
    w->stack[w->sp++] = x;
    x = t[x].left;
  }
}

/* Lift at over the registry's blocks that meet [first, last] and overlap
 * [at, at + need); stops at the first block starting at or above at + need. */
static size_t walk_fit(const bf_node *t, bf_walk *w, size_t at, size_t need, unsigned first,
                       unsigned last) {
  while (w->sp) {
    unsigned x = w->stack[w->sp - 1];
    if (t[x].lo >= at + need)
      break;
    w->sp--;
    if (t[x].hi > at && t[x].first <= last && t[x].last >= first)
      at = t[x].hi;
    walk_down(t, w, t[x].right, at, first, last);
  }
  return at;
}

typedef struct {
  size_t bytes;
  unsigned len, idx, first;
} bf_key;

static int cmp_key(const void *pa, const void *pb) {
  const bf_key *a = pa, *b = pb;
  if (a->bytes != b->bytes)
    return a->bytes > b->bytes ? -1 : 1;
  if (a->len != b->len)
    return a->len > b->len ? -1 : 1;
  return a->idx < b->idx ? -1 : (a->idx > b->idx);
}

/* The other orders nnt_plan_best_fit_perm offers: longest life first,
 * and largest bytes x life first. */
static int cmp_key_len(const void *pa, const void *pb) {
  const bf_key *a = pa, *b = pb;
  if (a->len != b->len)
    return a->len > b->len ? -1 : 1;
  return cmp_key(pa, pb);
}

static int cmp_key_first(const void *pa, const void *pb) {
  const bf_key *a = pa, *b = pb;
  if (a->first != b->first)
    return a->first < b->first ? -1 : 1;
  return cmp_key(pa, pb);
}

static int cmp_key_last(const void *pa, const void *pb) {
  const bf_key *a = pa, *b = pb;
  unsigned la = a->first + a->len, lb = b->first + b->len;
  if (la != lb)
    return la > lb ? -1 : 1;
  return cmp_key(pa, pb);
}

static int cmp_key_area(const void *pa, const void *pb) {
  const bf_key *a = pa, *b = pb;
  double x = (double)a->bytes * (a->len + 1.0), y = (double)b->bytes * (b->len + 1.0);
  if (x != y)
    return x > y ? -1 : 1;
  return cmp_key(pa, pb);
}

static int cmp_uint(const void *pa, const void *pb) {
  unsigned a = *(const unsigned *)pa, b = *(const unsigned *)pb;
  return a < b ? -1 : (a > b);
}

typedef struct {
  size_t cells;       /* a power of two */
  uint64_t *bound;    /* cell c holds orders [bound[c], bound[c + 1]) */
  uint64_t t0, width; /* width > 0: cells of equal width from t0 */
  bf_spans *all;      /* 2 * cells: segment tree, leaves at cells.. */
  bf_spans *span;     /* per cell */
  unsigned *reg;      /* per cell: treap root */
  unsigned *next;     /* per cell: its next free node; a cell's nodes are adjacent */
  bf_node *node;      /* 1 + 2 * n */
  unsigned *path, *stack[2];
  bf_key *key;
} bf_state;

static size_t bf_cell(const bf_state *s, unsigned t) {
  if (s->width)
    return (size_t)((t - s->t0) / s->width);
  size_t lo = 0, hi = s->cells; /* last c with bound[c] <= t */
  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    if (s->bound[mid] <= t)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

static void bf_free(bf_state *s) {
  if (s->all)
    for (size_t v = 0; v < 2 * s->cells; v++)
      nnt_free(s->all[v].v);
  if (s->span)
    for (size_t c = 0; c < s->cells; c++)
      nnt_free(s->span[c].v);
  nnt_free(s->bound), nnt_free(s->all), nnt_free(s->span), nnt_free(s->reg), nnt_free(s->next);
  nnt_free(s->node), nnt_free(s->path), nnt_free(s->stack[0]), nnt_free(s->stack[1]);
  nnt_free(s->key);
}

/* Cells and their bounds: equal widths when orders are dense, else cut at
 * quantiles of the lifetime ends so every cell gets its share. */
static int bf_cells(bf_state *s, const nnt_plan_block *b, size_t n, size_t nz) {
  unsigned tmin = UINT32_MAX, tmax = 0;
  for (size_t i = 0; i < n; i++)
    if (b[i].bytes) {
      if (b[i].first < tmin)
        tmin = b[i].first;
      if (b[i].last > tmax)
        tmax = b[i].last;
    }
  uint64_t range = (uint64_t)tmax - tmin + 1;
  size_t cells = 1;
  while (cells < 256 && (uint64_t)cells * 2 <= range && cells * cells * 32 < nz)
    cells *= 2;
  s->cells = cells;
  s->bound = nnt_malloc((cells + 1) * sizeof *s->bound);
  if (!s->bound)
    return -1;
  if (range <= 8 * (uint64_t)nz + 64) {
    s->t0 = tmin;
    s->width = (range + cells - 1) / cells;
    for (size_t c = 0; c <= cells; c++) {
      uint64_t x = tmin + c * s->width;
      s->bound[c] = x < tmin + range ? x : tmin + range;
    }
    return 0;
  }
  unsigned *ends = nnt_malloc(2 * nz * sizeof *ends);
  if (!ends)
    return -1;
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (b[i].bytes) {
      ends[m++] = b[i].first;
      ends[m++] = b[i].last;
    }
  qsort(ends, m, sizeof *ends, cmp_uint);
  s->bound[0] = tmin;
  for (size_t c = 1; c < cells; c++) { /* strictly increasing, or empty cells */
    uint64_t x = ends[c * m / cells];
    s->bound[c] = x > s->bound[c - 1] ? x : s->bound[c - 1];
  }
  s->bound[cells] = (uint64_t)tmax + 1;
  nnt_free(ends);
  return 0;
}

/* The cells block b covers whole ([*a, *z]) and touches in part (part[],
 * *n_part of them), and whether it covers its first and last cell whole. */
static void bf_cover(const bf_state *s, const nnt_plan_block *b, size_t *cf, size_t *cl,
                     int *full_f, int *full_l, size_t *a, size_t *z, size_t part[2],
                     size_t *n_part) {
  unsigned first = b->first, last = b->last;
  *cf = bf_cell(s, first), *cl = bf_cell(s, last);
  *full_f = first <= s->bound[*cf] && (uint64_t)last + 1 >= s->bound[*cf + 1];
  *full_l = first <= s->bound[*cl] && (uint64_t)last + 1 >= s->bound[*cl + 1];
  *a = *full_f ? *cf : *cf + 1, *z = *full_l ? *cl : *cl - 1, *n_part = 0;
  if (!*full_f)
    part[(*n_part)++] = *cf;
  if (!*full_l && *cl != *cf)
    part[(*n_part)++] = *cl;
}

/* The lowest aligned offset >= lo where block i overlaps no placed block
 * whose lifetime meets its own (and crosses no chunk). */
static size_t bf_fit(bf_state *st, const nnt_plan_block *b, size_t i, size_t lo, size_t align,
                     size_t chunk) {
  bf_state s = *st;
  unsigned first = b[i].first, last = b[i].last;
  size_t need = align_up(b[i].bytes, align), cells = s.cells;
  size_t cf, cl, a, z, part[2], n_part;
  int full_f, full_l;
  bf_cover(&s, &b[i], &cf, &cl, &full_f, &full_l, &a, &z, part, &n_part);
  bf_spans *sets[32];
  size_t finger[32], n_sets = 0;
  if (a <= z && (cf != cl || full_f))
    for (size_t l = a + cells, r = z + cells + 1; l < r; l >>= 1, r >>= 1) {
      if (l & 1)
        sets[n_sets++] = &s.all[l++];
      if (r & 1)
        sets[n_sets++] = &s.all[--r];
    }
  for (size_t q = 0; q < n_part; q++)
    sets[n_sets++] = &s.span[part[q]];
  for (size_t q = 0; q < n_sets; q++)
    finger[q] = 0;
  bf_walk walk[2];
  size_t at = align_up(lo, align);
  for (int walking = 0;;) {
    /* lift over the unions until a whole round leaves at where it is */
    for (size_t q = 0, still = 0; still < n_sets; q = q + 1 == n_sets ? 0 : q + 1) {
      size_t to = spans_fit(sets[q], &finger[q], at, need);
      still = to == at ? still + 1 : 1;
      at = to;
    }
    if (!walking) {
      walking = 1;
      for (size_t q = 0; q < n_part; q++) {
        walk[q] = (bf_walk){s.stack[q], 0};
        walk_down(s.node, &walk[q], s.reg[part[q]], at, first, last);
      }
    }
    size_t was = at;
    for (size_t q = 0; q < n_part; q++)
      at = walk_fit(s.node, &walk[q], at, need, first, last);
    at = chunk_fit(at, need, chunk); /* a chunk's end is one more obstacle */
    if (at == was)
      break;
  }
  return at;
}

/* Record block i at offset at: all[] of every node over [cf, cl], span[]
 * or reg[] per cell. */
static int bf_record(bf_state *s, const nnt_plan_block *b, size_t i, size_t at, size_t align,
                     uint64_t *rng) {
  unsigned first = b[i].first, last = b[i].last;
  size_t need = align_up(b[i].bytes, align), cells = s->cells;
  size_t cf, cl, a, z, part[2], n_part;
  int full_f, full_l;
  bf_cover(s, &b[i], &cf, &cl, &full_f, &full_l, &a, &z, part, &n_part);
  for (size_t l = cf + cells, r = cl + cells;; l >>= 1, r >>= 1) {
    for (size_t v = l; v <= r; v++)
      if (spans_add(&s->all[v], at, at + need))
        return NNT_ERR_NOMEM;
    if (l == 1)
      break;
  }
  for (size_t c = cf; c <= cl; c++) {
    if ((c != cf || full_f) && (c != cl || full_l)) {
      if (spans_add(&s->span[c], at, at + need))
        return NNT_ERR_NOMEM;
      continue;
    }
    unsigned x = s->next[c]++;
    *rng ^= *rng << 13, *rng ^= *rng >> 7, *rng ^= *rng << 17;
    s->node[x] = (bf_node){at, at + need, at + need, first, last, first, last, 0, 0,
                           (unsigned)(*rng >> 32)};
    treap_insert(s->node, &s->reg[c], x, s->path);
  }
  return NNT_OK;
}

static int plan_best_fit(const nnt_plan_block *b, size_t n, size_t align, size_t chunk,
                         int order, const unsigned *perm, unsigned *perm_out, size_t *off,
                         size_t *pool, nnt_err *e) {
  bf_state s = {0};
  size_t nz = 0, top = 0;
  for (size_t i = 0; i < n; i++) {
    if (b[i].bytes)
      nz++;
    else
      off[i] = 0;
  }
  if (!nz || n > UINT32_MAX / 2 - 1) {
    *pool = 0;
    if (nz)
      return nnt_err_set(e, NNT_ERR_INVAL, "planner: %zu blocks are too many", n);
    return NNT_OK;
  }
  if (bf_cells(&s, b, n, nz))
    goto nomem;
  size_t cells = s.cells;
  s.all = nnt_calloc(2 * cells, sizeof *s.all);
  s.span = nnt_calloc(cells, sizeof *s.span);
  s.reg = nnt_calloc(cells, sizeof *s.reg);
  s.next = nnt_calloc(cells + 1, sizeof *s.next);
  s.node = nnt_malloc((2 * nz + 1) * sizeof *s.node);
  s.path = nnt_malloc((2 * nz + 1) * sizeof *s.path);
  s.stack[0] = nnt_malloc((2 * nz + 1) * sizeof *s.stack[0]);
  s.stack[1] = nnt_malloc((2 * nz + 1) * sizeof *s.stack[1]);
  s.key = nnt_malloc(nz * sizeof *s.key);
  if (!s.all || !s.span || !s.reg || !s.next || !s.node || !s.path || !s.stack[0] ||
      !s.stack[1] || !s.key)
    goto nomem;
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (b[i].bytes)
      s.key[m++] = (bf_key){b[i].bytes, b[i].last - b[i].first, (unsigned)i, b[i].first};
  for (size_t k = 0; perm && k < nz; k++) /* the caller's order: block perm[k] k-th */
    s.key[k] = (bf_key){b[perm[k]].bytes, b[perm[k]].last - b[perm[k]].first, perm[k],
                        b[perm[k]].first};
  if (!perm)
    qsort(s.key, nz, sizeof *s.key,
          order == 1   ? cmp_key_len
          : order == 2 ? cmp_key_area
          : order == 3 ? cmp_key_first
          : order == 4 ? cmp_key_last
                       : cmp_key);
  for (size_t k = 0; perm_out && k < nz; k++)
    perm_out[k] = s.key[k].idx;
  for (size_t i = 0; i < n; i++) /* count each cell's registry nodes */
    if (b[i].bytes) {
      size_t cf = bf_cell(&s, b[i].first), cl = bf_cell(&s, b[i].last);
      s.next[cf + 1] += b[i].first > s.bound[cf] || (uint64_t)b[i].last + 1 < s.bound[cf + 1];
      if (cl != cf)
        s.next[cl + 1] += (uint64_t)b[i].last + 1 < s.bound[cl + 1];
    }
  s.next[0] = 1;
  for (size_t c = 1; c <= cells; c++)
    s.next[c] += s.next[c - 1];
  uint64_t rng = 0x9e3779b97f4a7c15ULL;
  /* the block placed right after each (links), or SIZE_MAX */
  size_t *follow = nnt_malloc(n * sizeof *follow);
  if (!follow)
    goto nomem;
  for (size_t i = 0; i < n; i++)
    follow[i] = SIZE_MAX;
  for (size_t i = 0; i < n; i++)
    if (b[i].after)
      follow[b[i].after - 1] = i;
  for (size_t k = 0; k < nz; k++) {
    size_t i = s.key[k].idx;
    if (b[i].after) /* placed with the block it follows */
      continue;
    /* the lowest offset where the block and those that follow it fit: a
     * follower that does not fit where it must lifts the start by as much
     * as its own lowest place lies above that */
    size_t lo = 0, at;
    for (;;) {
      at = bf_fit(&s, b, i, lo, align, chunk);
      size_t pos = at + align_up(b[i].bytes, align), j = follow[i];
      for (; j != SIZE_MAX; j = follow[j]) {
        size_t p = bf_fit(&s, b, j, pos, align, chunk);
        if (p != pos)
          break;
        pos += align_up(b[j].bytes, align);
      }
      if (j == SIZE_MAX)
        break;
      lo = at + (bf_fit(&s, b, j, pos, align, chunk) - pos);
    }
    for (size_t j = i; j != SIZE_MAX; j = follow[j]) {
      off[j] = at;
      if (at + b[j].bytes > top)
        top = at + b[j].bytes;
      if (bf_record(&s, b, j, at, align, &rng)) {
        nnt_free(follow);
        goto nomem;
      }
      at += align_up(b[j].bytes, align);
    }
  }
  nnt_free(follow);
  *pool = align_up(top, align);
  bf_free(&s);
  return NNT_OK;
nomem:
  bf_free(&s);
  return nnt_err_set(e, NNT_ERR_NOMEM, "planner: out of memory for %zu blocks", n);
}

int nnt_plan(nnt_planner_kind kind, const nnt_plan_block *blocks, size_t n,
             size_t align, size_t *offsets, size_t *pool_bytes, nnt_err *e) {
  return nnt_plan_chunked(kind, blocks, n, align, 0, offsets, pool_bytes, e);
}

/* The arguments every planner refuses: alignment, chunk, lifetimes, sizes. */
static int plan_checks(const nnt_plan_block *blocks, size_t n, size_t align, size_t chunk,
                       nnt_err *e) {
  if (!align || (align & (align - 1)))
    return nnt_err_set(e, NNT_ERR_INVAL, "planner: alignment %zu is not a power of two", align);
  if (chunk % align)
    return nnt_err_set(e, NNT_ERR_INVAL, "planner: chunk %zu is not a multiple of the "
                       "alignment %zu", chunk, align);
  if (chunk > SIZE_MAX / 2)
    return nnt_err_set(e, NNT_ERR_INVAL, "planner: chunk %zu is too large", chunk);
  /* every block end fits in a size_t if their sum does; with chunks, each
   * block may leave up to a chunk unused before it */
  size_t total = 0, slack = align - 1 + chunk;
  for (size_t i = 0; i < n; i++) {
    if (blocks[i].first > blocks[i].last)
      return nnt_err_set(e, NNT_ERR_INVAL, "planner: block %zu ends (%u) before it starts (%u)",
                         i, blocks[i].last, blocks[i].first);
    if (chunk && blocks[i].bytes > chunk)
      return nnt_err_set(e, NNT_ERR_NOT_SUPPORTED, "planner: block %zu of %zu bytes is larger "
                         "than the chunk of %zu bytes", i, blocks[i].bytes, chunk);
    if (total > SIZE_MAX - slack || blocks[i].bytes > SIZE_MAX - slack - total)
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "planner: block sizes add up past SIZE_MAX at block %zu", i);
    total += align_up(blocks[i].bytes, align) + chunk;
    if (blocks[i].after && (blocks[i].after - 1 >= i || !blocks[i].bytes ||
                            !blocks[blocks[i].after - 1].bytes))
      return nnt_err_set(e, NNT_ERR_INVAL, "planner: block %zu follows block %u, which is not "
                         "an earlier block of nonzero size", i, blocks[i].after - 1);
  }
  return NNT_OK;
}

/* Whether a block follows another (then only best fit without a chunk),
 * and no block is followed by two. */
static int links_ok(const nnt_plan_block *b, size_t n, nnt_planner_kind kind, size_t chunk,
                    nnt_err *e) {
  unsigned char *seen = NULL;
  for (size_t i = 0; i < n; i++) {
    if (!b[i].after)
      continue;
    if (kind != NNT_PLANNER_BEST_FIT || chunk) {
      nnt_free(seen);
      return nnt_err_set(e, NNT_ERR_INVAL, "planner: block %zu follows another: only best fit "
                         "without a chunk places such blocks", i);
    }
    if (!seen && !(seen = nnt_calloc(n, 1)))
      return nnt_err_set(e, NNT_ERR_NOMEM, "planner: out of memory for %zu blocks", n);
    if (seen[b[i].after - 1]++) {
      nnt_free(seen);
      return nnt_err_set(e, NNT_ERR_INVAL, "planner: two blocks follow block %u",
                         b[i].after - 1);
    }
  }
  nnt_free(seen);
  return NNT_OK;
}

int nnt_plan_chunked(nnt_planner_kind kind, const nnt_plan_block *blocks, size_t n,
                     size_t align, size_t chunk, size_t *offsets, size_t *pool_bytes,
                     nnt_err *e) {
  int rc = plan_checks(blocks, n, align, chunk, e);
  if (!rc)
    rc = links_ok(blocks, n, kind, chunk, e);
  if (rc || kind == NNT_PLANNER_BASIC)
    return rc ? rc : plan_basic(blocks, n, align, chunk, offsets, pool_bytes);
  if (kind == NNT_PLANNER_POOL)
    return nnt_plan_pool(blocks, n, align, chunk, offsets, pool_bytes, e);
  return plan_best_fit(blocks, n, align, chunk, 0, NULL, NULL, offsets, pool_bytes, e);
}

int nnt_plan_best_fit_perm(const nnt_plan_block *blocks, size_t n, size_t align, size_t chunk,
                           int order, const unsigned *perm, unsigned *perm_out,
                           size_t *offsets, size_t *pool_bytes, nnt_err *e) {
  int rc = plan_checks(blocks, n, align, chunk, e);
  if (!rc)
    rc = links_ok(blocks, n, NNT_PLANNER_BEST_FIT, chunk, e);
  if (order < 0 || order >= NNT_BEST_FIT_ORDERS)
    order = 0;
  return rc ? rc : plan_best_fit(blocks, n, align, chunk, order, perm, perm_out, offsets,
                                 pool_bytes, e);
}
