/* Private to the planners (planner.c, planner_pool.c). */
#ifndef NNT_PLANNER_IMPL_H
#define NNT_PLANNER_IMPL_H

#include <stddef.h>
#include "manager/planner.h"

static inline size_t align_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }

/* The lowest offset >= at where need bytes cross no multiple of chunk
 * (0: no chunk); need <= chunk. */
static inline size_t chunk_fit(size_t at, size_t need, size_t chunk) {
  if (!chunk || at % chunk + need <= chunk)
    return at;
  return (at / chunk + 1) * chunk;
}

/* Blocks by index, for sorting. */
typedef struct {
  const nnt_plan_block *b;
  size_t idx;
} order_item;

/* Larger first, then longer-lived, then by index (order_items). */
int nnt_plan_cmp_size_desc(const void *pa, const void *pb);
/* The memory-pool planner (planner_pool.c); the caller checked the
 * arguments (planner.c plan_checks). */
int nnt_plan_pool(const nnt_plan_block *b, size_t n, size_t align, size_t chunk, size_t *off,
                  size_t *pool, nnt_err *e);

#endif
