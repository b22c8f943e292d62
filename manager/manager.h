/* The manager: every tensor is a request with a kind and the execution
 * orders that touch it; views share their source's memory; the plan places
 * all requests of one mode in one arena with a planner. */
#ifndef NNT_MANAGER_H
#define NNT_MANAGER_H

#include <stddef.h>
#include "nntrainer/common.h"
#include "nntrainer/tensor.h"
#include "manager/planner.h"
#include "nntrainer/compute/backend.h"

typedef enum nnt_tkind {
  NNT_TK_WEIGHT = 0,
  NNT_TK_GRADIENT,
  NNT_TK_OPT_STATE,
  NNT_TK_ACTIVATION,
  NNT_TK_DERIVATIVE,
  NNT_TK_SCRATCH,
  NNT_TK_INPUT,
  NNT_TK_LABEL,
  NNT_TK__COUNT
} nnt_tkind;

const char *nnt_tkind_name(nnt_tkind k);

#define NNT_MGR_ALIGN 64

typedef struct nnt_mgr_tensor {
  char name[160];
  nnt_tkind kind;
  size_t bytes;
  unsigned first, last; /* lifetime (orders), own uses */
  int parent;           /* view: the request whose memory it shares; -1 */
  size_t offset;        /* in the arena, after planning */
  unsigned life_first, life_last; /* after planning: the root's whole life */
  /* a root whose memory the caller lends for each run (nnt_mgr_lend): no
   * bytes in the arena; its views share that memory */
  int borrowed;
  float *lent; /* the memory lent now, or NULL */
  /* nnt_mgr_pin: the request whose memory this one's begins at (-1) */
  int pin;
  /* after planning, on roots: the root this one is pinned to and the one
   * pinned to it (-1: none), and the bytes at its start that the one
   * pinned to it keeps when this one's life ends */
  int pin_to, pin_child;
  size_t pin_keep;
} nnt_mgr_tensor;

typedef struct nnt_mgr {
  nnt_mgr_tensor *t;
  size_t n, cap;
  nnt_planner_kind planner;
  const nnt_buffer_type *buft; /* where the arena is allocated (default host) */
  nnt_buffer *buf;              /* the arena, once allocated */
  float *arena;                 /* its base address (buf->base), or NULL */
  size_t arena_bytes;
  size_t lower_bound;
  double planning_ms;
  int planned;
  int allocated; /* the arena of the current plan exists (nnt_mgr_alloc) */
  int poison; /* fill a tensor with NaN when its lifetime ends (debug) */
  size_t align; /* of every tensor's offset: NNT_MGR_ALIGN unless set */
  size_t chunk; /* buft's chunk: no tensor crosses a multiple of it (0: none) */
  int quick;    /* best fit: the fixed block orders only, no search over orders */
} nnt_mgr;

/* An empty manager whose arena will be a host buffer. */
void nnt_mgr_init(nnt_mgr *m);
/* The arena will be a buffer of buft (NULL: host); offsets become
 * multiples of buft's alignment where that is larger than the manager's,
 * and no tensor crosses a multiple of buft's chunk where it has one. */
void nnt_mgr_set_buffer_type(nnt_mgr *m, const nnt_buffer_type *buft);
/* Place tensors at multiples of align (a power of two, at least 4) instead
 * of NNT_MGR_ALIGN: 4 packs a pool of floats (the weights, as a weight
 * file holds them). */
void nnt_mgr_set_align(nnt_mgr *m, size_t align);
void nnt_mgr_free(nnt_mgr *m); /* frees requests and the arena */

/* Request a tensor of `dim` floats alive over [first, last].
 * @return its id (>= 0), NNT_ERR_INVAL when dim has an axis of 0 or more
 * than NNT_BYTES_MAX bytes (nnt_dim_check), or NNT_ERR_NOMEM. */
int nnt_mgr_request(nnt_mgr *m, const char *name, nnt_tkind kind, nnt_dim dim,
                    unsigned first, unsigned last);
/* Extend id's lifetime to include `order`. */
void nnt_mgr_use(nnt_mgr *m, int id, unsigned order);
/* Make `view` share the memory of `src` (their lifetimes are united). */
void nnt_mgr_merge(nnt_mgr *m, int view, int src);
/* Place id's memory where base's begins, id's life beginning where
 * base's ends (sharing that one order): an in-place forward whose output
 * is smaller than its input. Unlike a merge, the part of base's memory
 * beyond id's bytes is free for other tensors after that order. Honored
 * by best fit without a chunk where id (with its views) is smaller than
 * base and begins no earlier than base ends; otherwise a merge. */
void nnt_mgr_pin(nnt_mgr *m, int id, int base);
/* The request that owns id's memory. */
int nnt_mgr_root(const nnt_mgr *m, int id);
/* id's memory (a root, before planning) is not the arena's: the caller
 * lends it before each run (nnt_mgr_lend), so it takes no bytes of the
 * plan and none of the kinds' or the peak's figures. The model's inputs
 * on the CPU: the batch where the dataset's queue holds it. */
void nnt_mgr_borrow(nnt_mgr *m, int id);
/* Lend data as the memory of borrowed id's root (and of its views). */
void nnt_mgr_lend(nnt_mgr *m, int id, float *data);
/* Is id's memory borrowed (its root's)? */
int nnt_mgr_borrowed(const nnt_mgr *m, int id);

/* Place every root request with the planner: offsets and arena_bytes, no
 * memory yet (any earlier arena is freed). With validate set, the plan is
 * checked (always in debug builds); that every tensor lies inside the
 * arena is checked always. With a chunk, a tensor larger than it is
 * NNT_ERR_NOT_SUPPORTED naming the tensor, its layer and both sizes. */
int nnt_mgr_plan(nnt_mgr *m, nnt_planner_kind planner, int validate,
                 nnt_err *e);
/* Take the caller's plan instead: offsets[i] for request i (every request
 * a root) in an arena of arena_bytes. It is validated like a planner's
 * (alignment, the arena's end, chunks, lifetimes): NNT_ERR_INVAL if not. */
int nnt_mgr_place(nnt_mgr *m, const size_t *offsets, size_t arena_bytes, nnt_err *e);
/* Allocate and zero the arena of the current plan (once). what names the
 * arena in the error ("training"): NNT_ERR_NOMEM with its bytes. */
int nnt_mgr_alloc(nnt_mgr *m, const char *what, nnt_err *e);
float *nnt_mgr_data(const nnt_mgr *m, int id);
/* A tensor of dim bound to id's memory (data and buf NULL for id < 0 or
 * before the arena exists; for borrowed memory, data what is lent now and
 * buf NULL: host memory outside any buffer). */
nnt_tensor nnt_mgr_bind(const nnt_mgr *m, int id, nnt_dim dim);
/* Check the current plan with the plan validator. */
int nnt_mgr_validate(const nnt_mgr *m, nnt_err *e);
/* Lifetime of id's memory (after planning): [first, last] of its root. */
void nnt_mgr_life(const nnt_mgr *m, int id, unsigned *first, unsigned *last);
/* Bytes of root requests of one kind. */
size_t nnt_mgr_kind_bytes(const nnt_mgr *m, nnt_tkind kind);
/* Where the plan peaks (after planning): the first execution order at
 * which the most bytes are live, in *order, and the bytes live there per
 * kind (a view's memory counts once, as its root's kind), summing to the
 * lower bound. An empty plan peaks at order 0 with nothing live.
 * @return NNT_OK or NNT_ERR_NOMEM. */
int nnt_mgr_peak(const nnt_mgr *m, unsigned *order, size_t kind_bytes[NNT_TK__COUNT],
                 nnt_err *e);
/* Poison mode: after executing `order`, fill tensors whose life ended. */
void nnt_mgr_poison_after(nnt_mgr *m, unsigned order);

#endif
