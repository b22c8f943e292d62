/* Memory planners: pure functions from (sizes, lifetimes, alignment) to
 * (offsets, pool size). They know nothing of layers or tensors. */
#ifndef NNT_PLANNER_H
#define NNT_PLANNER_H

#include <stddef.h>
#include "nntrainer/common.h"

typedef enum nnt_planner_kind {
  NNT_PLANNER_BASIC = 0, /* every block its own memory: no reuse */
  NNT_PLANNER_BEST_FIT,  /* largest first, lowest address free over its life */
  NNT_PLANNER_POOL,      /* reuse freed blocks from a size-keyed free pool */
} nnt_planner_kind;

/* One block: bytes, and the closed interval of execution orders it lives.
 * after: 0, or 1 + the index (below this block's) of the block this one
 * lies right after: its offset is that block's plus its bytes rounded up
 * to the alignment (the parts of one tensor that die at different times:
 * manager.c's pins). Only best fit without a chunk places such blocks;
 * the other planners refuse them (NNT_ERR_INVAL). */
typedef struct nnt_plan_block {
  size_t bytes;
  unsigned first, last;
  unsigned after;
} nnt_plan_block;

int nnt_planner_from_name(const char *name, nnt_planner_kind *out);
const char *nnt_planner_name(nnt_planner_kind k);

/* Plan n blocks: offsets[i] receives block i's offset, a multiple of align
 * (a power of two); *pool_bytes the pool size. Blocks of 0 bytes get offset
 * 0. @return NNT_OK or NNT_ERR_NOMEM / NNT_ERR_INVAL. */
int nnt_plan(nnt_planner_kind kind, const nnt_plan_block *blocks, size_t n,
             size_t align, size_t *offsets, size_t *pool_bytes, nnt_err *e);
/* The same with a chunk (0: none, the plan nnt_plan gives): no block
 * crosses a multiple of chunk bytes (a multiple of align). Where a block
 * would, it moves up to the next multiple, and the search for a free place
 * goes on from there. A block larger than chunk: NNT_ERR_NOT_SUPPORTED. */
int nnt_plan_chunked(nnt_planner_kind kind, const nnt_plan_block *blocks, size_t n,
                     size_t align, size_t chunk, size_t *offsets, size_t *pool_bytes,
                     nnt_err *e);

/* Largest sum of block sizes live at one order: no plan can be smaller.
 * @return NNT_OK and the bound in *bound, or NNT_ERR_NOMEM (it sorts a
 * copy of the blocks' ends). */
int nnt_plan_lower_bound(const nnt_plan_block *blocks, size_t n, size_t *bound, nnt_err *e);
/* Best fit with the blocks of nonzero size taken in the order perm gives
 * (their indices, each once), or when perm is NULL in one of
 * NNT_BEST_FIT_ORDERS orders: 0 largest first (as nnt_plan_chunked), 1
 * longest life first, 2 largest bytes x life first, 3 earliest first, 4
 * latest end first. perm_out, when not NULL, receives the order used (one
 * index per block of nonzero size). The manager tries the orders, then
 * searches over permutations, when order 0 leaves the arena above its lower
 * bound, and keeps the smallest (manager.c). */
#define NNT_BEST_FIT_ORDERS 5
int nnt_plan_best_fit_perm(const nnt_plan_block *blocks, size_t n, size_t align, size_t chunk,
                           int order, const unsigned *perm, unsigned *perm_out,
                           size_t *offsets, size_t *pool_bytes, nnt_err *e);

/* Check a plan: every pair of blocks whose lifetimes overlap is disjoint in
 * memory, and every block lies inside the pool and is aligned.
 * @return NNT_OK or NNT_ERR_INVAL naming the first offending pair. */
int nnt_plan_validate(const nnt_plan_block *blocks, size_t n,
                      const size_t *offsets, size_t pool_bytes, size_t align,
                      nnt_err *e);
/* The same, and no block crosses a multiple of chunk (0: no chunk). */
int nnt_plan_validate_chunked(const nnt_plan_block *blocks, size_t n, const size_t *offsets,
                              size_t pool_bytes, size_t align, size_t chunk, nnt_err *e);

#endif
