/* Where a mode's plan peaks: the step of its schedule at which the most
 * bytes are live, what runs there and what is live there, by kind. The
 * figures `nntrainer plan` and ml_train_ext_model_get_memory_peak() give. */
#ifndef NNT_MEMREPORT_H
#define NNT_MEMREPORT_H

#include "nntrainer/model_impl.h"

#define NNT_MEM_PEAK_TOP 8

typedef struct nnt_mem_peak {
  unsigned step;     /* the peak's execution order: a step index of the
                        mode's schedule, or n_steps (after its last step) */
  unsigned n_steps;  /* the schedule's steps */
  nnt_step_kind kind; /* what runs there (NNT_STEP_NONE past the end) */
  const char *layer; /* the layer it runs (the model's string), or NULL */
  /* bytes live at the peak per kind: the arena's tensors, and the weights
   * and the optimizer state (training only), which live at every step */
  size_t kind_bytes[NNT_TK__COUNT];
  size_t live_bytes;  /* the arena's tensors live there: the lower bound */
  size_t total_bytes; /* live_bytes + weights + optimizer state */
  int largest[NNT_MEM_PEAK_TOP]; /* the largest live tensors of the arena
                                    (request ids, largest first) */
  size_t largest_bytes[NNT_MEM_PEAK_TOP]; /* and their reserved bytes */
  unsigned n_largest;
} nnt_mem_peak;

/* The peak of mode's current plan (nnt_model_plan must have planned it).
 * @return NNT_OK, NNT_ERR_INVAL when the mode is not planned, or
 * NNT_ERR_NOMEM. */
int nnt_model_mem_peak(const nnt_model *m, nnt_mode mode, nnt_mem_peak *p, nnt_err *e);

/* "step 37: calc_derivative of conv3", "step 12: clip_and_apply" or
 * "after step 11 (the loss values are read)": buf, always terminated. */
const char *nnt_mem_peak_where(const nnt_mem_peak *p, char *buf, size_t n);

#endif
