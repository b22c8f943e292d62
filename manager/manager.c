/* Tensor requests, views, planning one arena per mode, and allocating it. */
#include "manager/manager.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const kind_names[NNT_TK__COUNT] = {
    "weight", "gradient", "optimizer", "activation",
    "derivative", "scratch", "input", "label"};

const char *nnt_tkind_name(nnt_tkind k) {
  return k < NNT_TK__COUNT ? kind_names[k] : "?";
}

void nnt_mgr_init(nnt_mgr *m) {
  memset(m, 0, sizeof *m);
  m->buft = nnt_buffer_type_host();
  m->align = NNT_MGR_ALIGN;
}

void nnt_mgr_set_align(nnt_mgr *m, size_t align) { m->align = align; }

void nnt_mgr_set_buffer_type(nnt_mgr *m, const nnt_buffer_type *buft) {
  m->buft = buft ? buft : nnt_buffer_type_host();
  /* every offset is one the buffer type can address a tensor at */
  size_t a = m->buft->alignment(m->buft);
  if (a > m->align)
    m->align = a;
  m->chunk = nnt_buffer_type_chunk(m->buft);
}

static void release_arena(nnt_mgr *m) {
  nnt_buffer_free(m->buf);
  m->buf = NULL;
  m->arena = NULL;
}

void nnt_mgr_free(nnt_mgr *m) {
  nnt_free(m->t);
  release_arena(m);
  nnt_mgr_init(m);
}

int nnt_mgr_request(nnt_mgr *m, const char *name, nnt_tkind kind, nnt_dim dim,
                    unsigned first, unsigned last) {
  size_t bytes;
  if (nnt_dim_check(dim, name, NULL, &bytes, NULL))
    return NNT_ERR_INVAL;
  if (m->n == m->cap) {
    size_t cap = m->cap ? 2 * m->cap : 64;
    nnt_mgr_tensor *t = nnt_realloc(m->t, cap * sizeof *t);
    if (!t)
      return NNT_ERR_NOMEM;
    m->t = t;
    m->cap = cap;
  }
  nnt_mgr_tensor *t = &m->t[m->n];
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%s", name);
  t->kind = kind;
  t->bytes = bytes;
  t->first = first < last ? first : last;
  t->last = first < last ? last : first;
  t->parent = -1;
  t->pin = t->pin_to = t->pin_child = -1;
  return (int)m->n++;
}

int nnt_mgr_root(const nnt_mgr *m, int id) {
  while (m->t[id].parent >= 0)
    id = m->t[id].parent;
  return id;
}

void nnt_mgr_borrow(nnt_mgr *m, int id) {
  nnt_mgr_tensor *t = &m->t[nnt_mgr_root(m, id)];
  t->borrowed = 1;
  t->bytes = 0;
}

void nnt_mgr_lend(nnt_mgr *m, int id, float *data) {
  m->t[nnt_mgr_root(m, id)].lent = data;
}

int nnt_mgr_borrowed(const nnt_mgr *m, int id) {
  return id >= 0 && m->t[nnt_mgr_root(m, id)].borrowed;
}

/* The bytes request i reserves: none in borrowed memory. */
static size_t own_bytes(const nnt_mgr *m, size_t i) {
  return m->t[nnt_mgr_root(m, (int)i)].borrowed ? 0 : m->t[i].bytes;
}

void nnt_mgr_use(nnt_mgr *m, int id, unsigned order) {
  nnt_mgr_tensor *t = &m->t[id];
  if (order < t->first)
    t->first = order;
  if (order > t->last)
    t->last = order;
}

void nnt_mgr_merge(nnt_mgr *m, int view, int src) {
  int a = nnt_mgr_root(m, view), b = nnt_mgr_root(m, src);
  if (a == b)
    return;
  m->t[a].parent = b;
}

void nnt_mgr_pin(nnt_mgr *m, int id, int base) { m->t[id].pin = base; }

/* Lifetime and size of each root: the union over its views. */
static void root_extent(const nnt_mgr *m, unsigned *first, unsigned *last,
                        size_t *bytes) {
  for (size_t i = 0; i < m->n; i++) {
    first[i] = m->t[i].first;
    last[i] = m->t[i].last;
    bytes[i] = own_bytes(m, i);
  }
  for (size_t i = 0; i < m->n; i++) {
    int r = nnt_mgr_root(m, (int)i);
    if ((size_t)r == i)
      continue;
    if (m->t[i].first < first[r])
      first[r] = m->t[i].first;
    if (m->t[i].last > last[r])
      last[r] = m->t[i].last;
    if (own_bytes(m, i) > bytes[r])
      bytes[r] = own_bytes(m, i);
  }
}

static size_t up_to(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* The pins (nnt_mgr_pin) the plan honors, on the roots' pin_to and
 * pin_child; one it cannot (another planner, a chunk, an id not smaller
 * than its base or living before its base ends, a second pin on one base)
 * becomes a merge. Leaves every root's extent in first, last, bytes. */
static void resolve_pins(nnt_mgr *m, nnt_planner_kind planner, unsigned *first, unsigned *last,
                         size_t *bytes) {
  for (int changed = 1; changed;) {
    changed = 0;
    root_extent(m, first, last, bytes);
    for (size_t i = 0; i < m->n; i++)
      m->t[i].pin_to = m->t[i].pin_child = -1, m->t[i].pin_keep = 0;
    for (size_t i = 0; i < m->n && !changed; i++) {
      if (m->t[i].pin < 0)
        continue;
      int r = nnt_mgr_root(m, (int)i), q = nnt_mgr_root(m, m->t[i].pin);
      if (r == q)
        continue;
      if (planner == NNT_PLANNER_BEST_FIT && !m->chunk && !m->t[r].borrowed &&
          !m->t[q].borrowed && up_to(bytes[r], m->align) < bytes[q] && last[q] <= first[r] &&
          m->t[q].pin_child < 0 && m->t[r].pin_to < 0) {
        m->t[r].pin_to = q;
        m->t[q].pin_child = r;
      } else {
        m->t[r].parent = q; /* a merge, and the extents again */
        changed = 1;
      }
    }
  }
}

/* The planner's blocks: one per root, except that a chain of pins G0 <-
 * G1 <- ... <- Gk (each smaller, each living after the one before) gives
 * one block per level: Gk's bytes (the head, from G0's first order to Gk's
 * last), then for each l down to 0 the bytes of Gl beyond G(l+1)'s, right
 * after, from G0's first order to Gl's last. root[b] is block b's root and
 * head[b] the chain's head block; keep[r] (keep may be NULL) the bytes
 * of root r that the root pinned to it keeps. */
static size_t build_blocks(const nnt_mgr *m, const unsigned *first, const unsigned *last,
                           const size_t *bytes, nnt_plan_block *blk, size_t *root, size_t *head,
                           int *chain, size_t *keep) {
  size_t nr = 0;
  for (size_t i = 0; i < m->n; i++) {
    if (m->t[i].parent >= 0 || m->t[i].pin_to >= 0)
      continue;
    size_t k = 0;
    for (int r = (int)i; r >= 0; r = m->t[r].pin_child)
      chain[k++] = r;
    size_t h = nr, g0 = (size_t)chain[0];
    for (size_t l = k; l-- > 0;) {
      size_t g = (size_t)chain[l], inner = l + 1 < k ? up_to(bytes[chain[l + 1]], m->align) : 0;
      size_t own = (l ? up_to(bytes[g], m->align) : bytes[g]) - inner;
      if (l + 1 == k) /* the head: exactly its bytes */
        own = bytes[g];
      if (keep)
        keep[g] = inner;
      blk[nr] = (nnt_plan_block){own, first[g0], last[g], l + 1 < k ? (unsigned)nr : 0};
      root[nr] = g;
      head[nr++] = h;
    }
  }
  return nr;
}

/* With a chunk, every tensor must fit in one: name the first that does
 * not, with its layer (its name up to the first ':'). */
static int fit_chunk(const nnt_mgr *m, const size_t *roots, const nnt_plan_block *blk,
                     size_t nr, nnt_err *e) {
  for (size_t k = 0; m->chunk && k < nr; k++)
    if (blk[k].bytes > m->chunk) {
      const char *name = m->t[roots[k]].name, *colon = strchr(name, ':');
      int len = colon ? (int)(colon - name) : (int)strlen(name);
      return nnt_err_set(e, NNT_ERR_NOT_SUPPORTED,
                         "[%.*s] tensor '%s' needs %zu bytes, more than %zu bytes, the "
                         "device's largest storage-buffer range (buffer type '%s'): no "
                         "tensor may be larger",
                         len, name, name, blk[k].bytes, m->chunk, m->buft->name);
    }
  return NNT_OK;
}

/* The block that reaches highest in a plan (the first such). */
static size_t top_block(const nnt_plan_block *blk, size_t nr, const size_t *off) {
  size_t t = 0, top = 0;
  for (size_t i = 0; i < nr; i++)
    if (blk[i].bytes && off[i] + blk[i].bytes > top) {
      top = off[i] + blk[i].bytes;
      t = i;
    }
  return t;
}

/* The block right under block t that lives at the same time as it (the
 * one whose end is highest at or below t's offset); nr when none. */
static size_t blocker(const nnt_plan_block *blk, size_t nr, const size_t *off, size_t t) {
  size_t j = nr, end = 0;
  for (size_t i = 0; i < nr; i++)
    if (i != t && blk[i].bytes && blk[i].first <= blk[t].last && blk[t].first <= blk[i].last &&
        off[i] + blk[i].bytes <= off[t] && (j == nr || off[i] + blk[i].bytes > end)) {
      j = i;
      end = off[i] + blk[i].bytes;
    }
  return j;
}

/* Rounds of the search below: each is one placement. */
#define TOP_MOVES 24

/* Blocks at the head of the order the promotion search moves, and the
 * work it may spend: (plans tried) x (blocks) at most this. */
#define PROMOTE_HEAD 16
#define PROMOTE_WORK (1u << 14)

/* A search over block orders: the blocks, the best order so far (best,
 * its nz blocks of nonzero size), its offsets (off) and arena (*pool). */
typedef struct order_search {
  const nnt_plan_block *blk;
  size_t nr, nz, align, chunk, bound;
  unsigned *best, *perm; /* perm: the order to try */
  size_t *alt, *off, *pool;
} order_search;

/* Place the blocks in s->perm's order; keep it as the best when its arena
 * is smaller (*better set). */
static int try_perm(order_search *s, int *better, nnt_err *e) {
  size_t p = 0;
  int rc = nnt_plan_best_fit_perm(s->blk, s->nr, s->align, s->chunk, 0, s->perm, NULL, s->alt,
                                  &p, e);
  if (!rc && p < *s->pool) {
    *better = 1;
    memcpy(s->best, s->perm, s->nz * sizeof *s->best);
    memcpy(s->off, s->alt, s->nr * sizeof *s->off);
    *s->pool = p;
  }
  return rc;
}

/* s->perm: the best order with its k-th block moved to position to (to
 * before k: earlier; to == nz - 1: last). */
static void move_block(order_search *s, size_t k, size_t to) {
  const unsigned *b = s->best;
  unsigned *q = s->perm, x = b[k];
  if (to <= k) {
    memcpy(q, b, to * sizeof *q);
    q[to] = x;
    memcpy(q + to + 1, b + to, (k - to) * sizeof *q);
    memcpy(q + k + 1, b + k + 1, (s->nz - k - 1) * sizeof *q);
  } else {
    memcpy(q, b, k * sizeof *q);
    memcpy(q + k, b + k + 1, (to - k) * sizeof *q);
    q[to] = x;
    memcpy(q + to + 1, b + to + 1, (s->nz - to - 1) * sizeof *q);
  }
}

/* The promotion search: each of the first PROMOTE_HEAD blocks of the best
 * order so far is tried at every earlier position (the second block at the
 * first, the third at the first and second...), the first move that
 * shrinks the arena kept, and the scan started again, until none does,
 * the bound is reached or the work is spent. The top search follows the
 * block that reaches highest; this one finds the large blocks that should
 * be placed before larger ones although none of them is at the top: on
 * conv-BN-ReLU (benchmarks/models/convbn.ini) the derivatives of c3 and c2
 * (2 and 4 MiB, short-lived) placed after the 4 MiB activations leave a
 * 1.9 MB gap under the input at the peak, and moving them to the head of
 * the order closes it (1.040 -> 1.0003 of the bound). */
static int promote_search(order_search *s, nnt_err *e) {
  size_t tries = PROMOTE_WORK / s->nz, head = s->nz < PROMOTE_HEAD ? s->nz : PROMOTE_HEAD;
  int better = 1, rc = NNT_OK;
  while (better && *s->pool > s->bound && tries && !rc) {
    better = 0;
    for (size_t k = 1; k < head && !better && tries && !rc; k++)
      for (size_t to = 0; to < k && !better && tries && !rc; to++, tries--) {
        move_block(s, k, to);
        rc = try_perm(s, &better, e);
      }
  }
  return rc;
}

/* The demotion search: each block of the best order so far is tried last
 * (placed after all others, into whatever room they leave), the first move
 * that shrinks the arena kept and the scan started again, until none does,
 * the bound is reached or PROMOTE_WORK is spent. The promotion search
 * moves large blocks ahead; this one moves a small long-lived block that
 * best fit put under a short-lived large one out of its way: LeNet-5 at
 * batch 8 with its fc1 gradient in blocks (docs/memory.md, "Updates fused
 * with the gradient") had the labels 320 bytes below the first
 * convolution's output, which kept the second convolution's columns
 * 14 KiB above the bound (1.050 of it -> 1.009). */
static int demote_search(order_search *s, nnt_err *e) {
  size_t tries = PROMOTE_WORK / s->nz;
  int better = 1, rc = NNT_OK;
  while (better && *s->pool > s->bound && tries && !rc) {
    better = 0;
    for (size_t k = 0; k + 1 < s->nz && !better && tries && !rc; k++, tries--) {
      move_block(s, k, s->nz - 1);
      rc = try_perm(s, &better, e);
    }
  }
  return rc;
}

/* The top search: the block that reaches highest is placed earlier (just
 * before the block right under it, else first) in the order of the best
 * plan so far, and the blocks placed again; a move is kept when the arena
 * shrinks. (A small long-lived block placed early under a short-lived
 * large one is the usual obstacle: the move lets the large one go in
 * first.) Candidates: the top block, the block under it, the one under
 * that... */
static int top_search(order_search *s, nnt_err *e) {
  const nnt_plan_block *blk = s->blk;
  int rc = NNT_OK;
  for (int moves = 0; moves < TOP_MOVES && *s->pool > s->bound && !rc;) {
    int better = 0;
    size_t c = top_block(blk, s->nr, s->off);
    for (int depth = 0; depth < 8 && c < s->nr && !better && moves < TOP_MOVES && !rc;
         depth++) {
      size_t u = blocker(blk, s->nr, s->off, c), k = 0;
      while (k < s->nz && s->best[k] != c)
        k++;
      for (int how = 0; how < 2 && k < s->nz && !better && moves < TOP_MOVES && !rc; how++) {
        size_t to = 0; /* how 0: just before the block under it; 1: first */
        if (!how && u < s->nr)
          while (to < k && s->best[to] != u)
            to++;
        if (to >= k)
          continue;
        move_block(s, k, to);
        moves++;
        rc = try_perm(s, &better, e);
      }
      c = u;
    }
    if (!better)
      break;
  }
  return rc;
}

/* Best fit's other block orders (planner.h), then the top search, the
 * promotion search and the demotion search above (not with quick). off
 * and *pool become the best plan found, down to the bound. */
static int try_orders(const nnt_plan_block *blk, size_t nr, size_t align, size_t chunk,
                      size_t bound, int quick, size_t *off, size_t *pool, nnt_err *e) {
  size_t *alt = nnt_malloc((nr + 1) * sizeof *alt);
  unsigned *best = nnt_malloc((nr + 1) * sizeof *best);
  unsigned *perm = nnt_malloc((nr + 1) * sizeof *perm);
  if (!alt || !best || !perm) {
    nnt_free(alt), nnt_free(best), nnt_free(perm);
    return nnt_err_set(e, NNT_ERR_NOMEM, "manager: out of memory planning %zu tensors", nr);
  }
  int rc = NNT_OK;
  /* order 0 again, for its permutation (off holds its offsets already) */
  for (int o = 0; o < NNT_BEST_FIT_ORDERS && (o == 0 || *pool > bound) && !rc; o++) {
    size_t p = 0;
    if ((rc = nnt_plan_best_fit_perm(blk, nr, align, chunk, o, NULL, perm, alt, &p, e)))
      break;
    if (o == 0 || p < *pool) {
      memcpy(off, alt, nr * sizeof *off);
      memcpy(best, perm, nr * sizeof *best);
      *pool = p;
    }
  }
  order_search s = {blk, nr, 0, align, chunk, bound, best, perm, alt, off, pool};
  for (size_t i = 0; i < nr; i++)
    s.nz += blk[i].bytes != 0;
  int (*const step[])(order_search *, nnt_err *) = {top_search, promote_search, demote_search};
  for (size_t i = 0; i < 3 && !rc && *pool > bound && s.nz > 1 && !quick; i++)
    rc = step[i](&s, e);
  nnt_free(alt), nnt_free(best), nnt_free(perm);
  return rc;
}

int nnt_mgr_plan(nnt_mgr *m, nnt_planner_kind planner, int validate,
                 nnt_err *e) {
  struct timespec t0, t1; /* planning time: requests to offsets, not allocation */
  clock_gettime(CLOCK_MONOTONIC, &t0);
  size_t n = m->n;
  unsigned *first = nnt_malloc((n + 1) * sizeof *first);
  unsigned *last = nnt_malloc((n + 1) * sizeof *last);
  size_t *bytes = nnt_malloc((n + 1) * sizeof *bytes);
  nnt_plan_block *blk = nnt_malloc((n + 1) * sizeof *blk);
  size_t *roots = nnt_malloc((n + 1) * sizeof *roots);
  size_t *off = nnt_malloc((n + 1) * sizeof *off);
  size_t *head = nnt_malloc((n + 1) * sizeof *head);
  int *chain = nnt_malloc((n + 1) * sizeof *chain);
  int rc = NNT_OK;
  if (!first || !last || !bytes || !blk || !roots || !off || !head || !chain) {
    rc = nnt_err_set(e, NNT_ERR_NOMEM, "manager: out of memory planning %zu tensors", n);
    goto out;
  }
  resolve_pins(m, planner, first, last, bytes);
  memset(off, 0, n * sizeof *off); /* the pins' keep[] first (only a chain's are set) */
  size_t nr = build_blocks(m, first, last, bytes, blk, roots, head, chain, off);
  for (size_t i = 0; i < n; i++)
    m->t[i].pin_keep = off[i];
  if ((rc = fit_chunk(m, roots, blk, nr, e)))
    goto out;
  size_t pool = 0, bound;
  rc = nnt_plan_chunked(planner, blk, nr, m->align, m->chunk, off, &pool, e);
  if (rc || (rc = nnt_plan_lower_bound(blk, nr, &bound, e)))
    goto out;
  /* above the bound: best fit in its other orders, the smallest kept */
  if (planner == NNT_PLANNER_BEST_FIT && pool > bound &&
      (rc = try_orders(blk, nr, m->align, m->chunk, bound, m->quick, off, &pool, e)))
    goto out;
#ifndef NDEBUG
  validate = 1;
#endif
  if (validate && (rc = nnt_plan_validate_chunked(blk, nr, off, pool, m->align, m->chunk, e)))
    goto out;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  m->planning_ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
  /* the validator's overlap check is for debug builds and tests; that
   * every tensor lies inside the arena is checked always */
  for (size_t k = 0; k < nr; k++)
    if (blk[k].bytes && (off[k] > pool || blk[k].bytes > pool - off[k])) {
      rc = nnt_err_set(e, NNT_ERR_INVAL,
                       "manager: the plan puts '%s' (%zu bytes at %zu) outside its arena of "
                       "%zu bytes",
                       m->t[roots[k]].name, blk[k].bytes, off[k], pool);
      goto out;
    }
  release_arena(m);
  for (size_t k = 0; k < nr; k++) /* a chain of pins: all at its head's */
    m->t[roots[k]].offset = off[head[k]];
  for (size_t i = 0; i < n; i++) {
    int r = nnt_mgr_root(m, (int)i);
    m->t[i].offset = m->t[r].offset;
    m->t[i].life_first = first[r];
    m->t[i].life_last = last[r];
  }
  m->arena_bytes = pool;
  m->lower_bound = bound;
  m->planner = planner;
  m->planned = 1;
  m->allocated = 0;
out:
  nnt_free(first), nnt_free(last), nnt_free(bytes), nnt_free(blk), nnt_free(roots),
      nnt_free(off), nnt_free(head), nnt_free(chain);
  return rc;
}

int nnt_mgr_place(nnt_mgr *m, const size_t *offsets, size_t arena_bytes, nnt_err *e) {
  size_t n = m->n;
  nnt_plan_block *blk = nnt_malloc((n + 1) * sizeof *blk);
  int rc = NNT_OK;
  if (!blk)
    return nnt_err_set(e, NNT_ERR_NOMEM, "manager: out of memory placing %zu tensors", n);
  for (size_t i = 0; i < n && !rc; i++) {
    if (m->t[i].parent >= 0)
      rc = nnt_err_set(e, NNT_ERR_INVAL, "manager: '%s' is a view; a placed plan has none",
                       m->t[i].name);
    blk[i] = (nnt_plan_block){m->t[i].bytes, m->t[i].first, m->t[i].last, 0};
  }
  if (!rc)
    rc = nnt_plan_validate_chunked(blk, n, offsets, arena_bytes, m->align, m->chunk, e);
  nnt_free(blk);
  if (rc)
    return rc;
  release_arena(m);
  for (size_t i = 0; i < n; i++) {
    m->t[i].offset = offsets[i];
    m->t[i].life_first = m->t[i].first;
    m->t[i].life_last = m->t[i].last;
  }
  m->arena_bytes = arena_bytes;
  m->lower_bound = 0;
  m->planning_ms = 0;
  m->planner = NNT_PLANNER_BASIC;
  m->planned = 1;
  m->allocated = 0;
  return NNT_OK;
}

int nnt_mgr_alloc(nnt_mgr *m, const char *what, nnt_err *e) {
  if (!m->planned)
    return nnt_err_set(e, NNT_ERR_INVAL, "manager: nothing is planned");
  if (m->allocated)
    return NNT_OK;
  if (m->arena_bytes > NNT_BYTES_MAX)
    return nnt_err_set(e, NNT_ERR_NOMEM, "cannot allocate the %s arena of %zu bytes", what,
                       m->arena_bytes);
  if (m->arena_bytes) {
    if (nnt_buffer_alloc(m->buft, m->arena_bytes, "an arena", &m->buf, NULL))
      return nnt_err_set(e, NNT_ERR_NOMEM, "cannot allocate the %s arena of %zu bytes", what,
                         m->arena_bytes);
    m->arena = nnt_buffer_at(m->buf, 0);
  }
  m->allocated = 1;
  return NNT_OK;
}

float *nnt_mgr_data(const nnt_mgr *m, int id) {
  if (id >= 0 && nnt_mgr_borrowed(m, id))
    return m->t[nnt_mgr_root(m, id)].lent;
  if (id < 0 || !m->arena)
    return NULL;
  return (float *)((char *)m->arena + m->t[id].offset);
}

nnt_tensor nnt_mgr_bind(const nnt_mgr *m, int id, nnt_dim dim) {
  nnt_tensor t = {.dim = dim};
  t.data = nnt_mgr_data(m, id);
  t.buf = t.data && !nnt_mgr_borrowed(m, id) ? m->buf : NULL;
  return t;
}

void nnt_mgr_life(const nnt_mgr *m, int id, unsigned *first, unsigned *last) {
  *first = m->t[id].life_first;
  *last = m->t[id].life_last;
}

size_t nnt_mgr_kind_bytes(const nnt_mgr *m, nnt_tkind kind) {
  size_t s = 0;
  for (size_t i = 0; i < m->n; i++)
    if (m->t[i].parent < 0 && m->t[i].kind == kind)
      s += m->t[i].bytes;
  return s;
}

void nnt_mgr_poison_after(nnt_mgr *m, unsigned order) {
  if (!m->poison || !m->arena)
    return;
  for (size_t i = 0; i < m->n; i++) {
    if (m->t[i].parent >= 0)
      continue;
    /* all bytes 0xff: every float is a NaN; through the buffer, so it
     * works on any backend's memory (a debug mode: errors cannot occur on
     * a live buffer and are not reported) */
    /* of a pinned root, the part beyond what the one pinned to it keeps */
    size_t keep = m->t[i].pin_keep;
    if (m->t[i].life_last == order && m->t[i].bytes > keep)
      m->buf->type->memset(m->buf, m->t[i].offset + keep, 0xff, m->t[i].bytes - keep, NULL);
  }
}

/* The planned blocks again, from the roots' lives after planning, with
 * their offsets (NULL where not wanted): what validate and peak read. */
static int planned_blocks(const nnt_mgr *m, nnt_plan_block **blk, size_t **off, size_t **root,
                          size_t *nr) {
  size_t n = m->n;
  unsigned *first = nnt_malloc((n + 1) * sizeof *first), *last = nnt_malloc((n + 1) * sizeof *last);
  size_t *bytes = nnt_calloc(n + 1, sizeof *bytes), *head = nnt_malloc((n + 1) * sizeof *head);
  int *chain = nnt_malloc((n + 1) * sizeof *chain);
  *blk = nnt_malloc((n + 1) * sizeof **blk);
  *root = nnt_malloc((n + 1) * sizeof **root);
  *off = nnt_malloc((n + 1) * sizeof **off);
  int rc = NNT_OK;
  if (!first || !last || !bytes || !head || !chain || !*blk || !*root || !*off) {
    rc = NNT_ERR_NOMEM;
  } else {
    for (size_t i = 0; i < n; i++) {
      int r = nnt_mgr_root(m, (int)i);
      first[i] = m->t[i].life_first, last[i] = m->t[i].life_last;
      if (own_bytes(m, i) > bytes[r])
        bytes[r] = own_bytes(m, i);
    }
    *nr = build_blocks(m, first, last, bytes, *blk, *root, head, chain, NULL);
    for (size_t b = 0; b < *nr; b++) /* a chain's levels lie above their inner ones */
      (*off)[b] = m->t[(*root)[b]].offset + m->t[(*root)[b]].pin_keep;
  }
  nnt_free(first), nnt_free(last), nnt_free(bytes), nnt_free(head), nnt_free(chain);
  if (rc) {
    nnt_free(*blk), nnt_free(*root), nnt_free(*off);
    *blk = NULL, *root = *off = NULL;
  }
  return rc;
}

int nnt_mgr_validate(const nnt_mgr *m, nnt_err *e) {
  if (!m->planned)
    return nnt_err_set(e, NNT_ERR_INVAL, "manager: nothing is planned");
  nnt_plan_block *b;
  size_t *off, *root, n;
  if (planned_blocks(m, &b, &off, &root, &n))
    return nnt_err_set(e, NNT_ERR_NOMEM, "manager: out of memory");
  int rc = nnt_plan_validate_chunked(b, n, off, m->arena_bytes, m->align, m->chunk, e);
  nnt_free(b), nnt_free(off), nnt_free(root);
  return rc;
}

int nnt_mgr_peak(const nnt_mgr *m, unsigned *order, size_t kind_bytes[NNT_TK__COUNT],
                 nnt_err *e) {
  for (int k = 0; k < NNT_TK__COUNT; k++)
    kind_bytes[k] = 0;
  *order = 0;
  if (!m->planned || !m->n)
    return NNT_OK;
  /* the planned blocks (a root each, or a chain of pins' levels), then a
   * sweep over the orders with the changes of the live sum at each (lives
   * are inclusive) */
  nnt_plan_block *blk;
  size_t *off, *root, nr;
  if (planned_blocks(m, &blk, &off, &root, &nr))
    return nnt_err_set(e, NNT_ERR_NOMEM, "manager: out of memory finding the peak of %zu "
                       "tensors", m->n);
  nnt_free(off);
  unsigned orders = 0;
  for (size_t b = 0; b < nr; b++)
    if (blk[b].last + 1 > orders)
      orders = blk[b].last + 1;
  size_t *ext = NULL, *delta = nnt_calloc((size_t)orders + 1, 2 * sizeof *delta);
  if (!delta) {
    nnt_free(blk), nnt_free(root);
    return nnt_err_set(e, NNT_ERR_NOMEM, "manager: out of memory finding the peak of %zu "
                       "tensors", m->n);
  }
  /* delta[2o]: bytes starting at o; delta[2o + 1]: bytes ending after o */
  for (size_t b = 0; b < nr; b++) {
    delta[2 * (size_t)blk[b].first] += blk[b].bytes;
    delta[2 * (size_t)blk[b].last + 1] += blk[b].bytes;
  }
  size_t cur = 0, best = 0;
  for (unsigned o = 0; o < orders; o++) {
    cur += delta[2 * (size_t)o];
    if (cur > best) {
      best = cur;
      *order = o;
    }
    cur -= delta[2 * (size_t)o + 1];
  }
  for (size_t b = 0; b < nr; b++)
    if (blk[b].first <= *order && *order <= blk[b].last)
      kind_bytes[m->t[root[b]].kind] += blk[b].bytes;
  nnt_free(blk), nnt_free(root);
  nnt_free(ext), nnt_free(delta);
  return NNT_OK;
}
