/* Where a step's time goes (ours): with profiling on, each step of a mode's
 * schedule that runs adds its wall time; per layer, the time of its
 * forward, its second forward (memory_budget's recomputation, the default
 * plan's cheap chains), its weight gradient, its derivative and its
 * weights' update, in ms per iteration of the mode. The first iteration of
 * each mode is not counted (its first touch of the arena and the BLAS
 * buffers). The CPU engine only: a device records its steps and runs them
 * later, so the host's time of a step is not the step's. `nntrainer train
 * --profile` prints it. */
#ifndef NNT_PROFILE_H
#define NNT_PROFILE_H

#include "nntrainer/model_impl.h"

typedef struct nnt_profile_row {
  const char *layer, *type; /* the model's strings */
  double forward_ms, recompute_ms, gradient_ms, derivative_ms, apply_ms;
} nnt_profile_row;

/* Turn profiling on (1) or off (0); turning it on clears what was
 * counted. Memory for the counts comes with the mode's first iteration. */
void nnt_model_profile_enable(nnt_model *m, int on);

/* Step s of the bound mode ran from t0 (nnt_now_s). NNT_ERR_NOMEM
 * when the counts could not be allocated. Only while profiling is on. */
int nnt_profile_add(nnt_model *m, unsigned s, double t0, nnt_err *e);

/* Mode's counts: one row per node of the compiled graph, in graph order
 * (rows holds n_nodes; n_rows gets that count), the iterations counted,
 * and the time of steps of no node (clip_grad_by_norm's scale and update)
 * in ms per iteration. NNT_ERR_NOT_SUPPORTED on a device engine, NNT_ERR_INVAL
 * before compile or with fewer than n_nodes rows. */
int nnt_model_profile(const nnt_model *m, nnt_mode mode, nnt_profile_row *rows, size_t max,
                      size_t *n_rows, unsigned *iters, double *other_ms, nnt_err *e);

#endif
