/* Optimizers (sgd, adam, adamw) and learning-rate schedulers (constant,
 * exponential, step, cosine, linear), with NNTrainer's defaults. */
#ifndef NNT_OPTIMIZER_H
#define NNT_OPTIMIZER_H

#include <stddef.h>
#include "nntrainer/common.h"
#include "nntrainer/compute/backend.h"
#include "nntrainer/compute/kernels.h"

typedef enum nnt_opt_type { NNT_OPT_SGD = 0, NNT_OPT_ADAM, NNT_OPT_ADAMW } nnt_opt_type;
typedef enum nnt_lrs_type {
  NNT_LRS_CONSTANT = 0,
  NNT_LRS_EXPONENTIAL,
  NNT_LRS_STEP,
  NNT_LRS_COSINE,
  NNT_LRS_LINEAR,
} nnt_lrs_type;

#define NNT_LRS_MAX_STEPS 32

typedef struct nnt_lr_scheduler {
  nnt_lrs_type type;
  int owned;                /* set on a scheduler an optimizer owns */
  float learning_rate;      /* constant / exponential; NAN: take the optimizer's */
  float decay_rate;         /* exponential */
  unsigned decay_steps;     /* exponential, cosine, linear */
  float max_lr, min_lr;     /* cosine, linear */
  unsigned n_steps_lr;      /* step: learning_rate list */
  float step_lr[NNT_LRS_MAX_STEPS];
  unsigned n_steps_iter;    /* step: iteration list (one fewer than lrs) */
  unsigned step_iter[NNT_LRS_MAX_STEPS];
} nnt_lr_scheduler;

int nnt_lrs_create(const char *type, nnt_lr_scheduler **out, nnt_err *e);
/* The INI name of a type ("cosine"), or NULL for a value that is not one. */
const char *nnt_lrs_type_name(nnt_lrs_type t);
void nnt_lrs_destroy(nnt_lr_scheduler *s);
int nnt_lrs_set_property(nnt_lr_scheduler *s, const char *key,
                         const char *value, nnt_err *e);
/* Check that the keys its type needs are set. */
int nnt_lrs_validate(const nnt_lr_scheduler *s, nnt_err *e);
/* Learning rate at iteration `iter` (0-based, counted across epochs). */
float nnt_lrs_get(const nnt_lr_scheduler *s, size_t iter);

typedef struct nnt_optimizer {
  nnt_opt_type type;
  int owned;
  float learning_rate;   /* default: 0.0001 for sgd, 0.001 for adam(w) */
  int lr_set;
  float beta1, beta2, epsilon; /* 0.9, 0.999; epsilon 1e-7 adam, 1e-8 adamw */
  float weight_decay;          /* adamw, default 0 (NNTrainer's) */
  /* legacy [Optimizer] decay_rate / decay_steps: an exponential schedule;
   * decay_rate is NAN and decay_steps 0 while unset */
  float decay_rate;
  unsigned decay_steps;
  int legacy_decay;
  nnt_lr_scheduler *sched;     /* owned; NULL: constant or legacy decay */
} nnt_optimizer;

int nnt_optimizer_create(const char *type, nnt_optimizer **out, nnt_err *e);
void nnt_optimizer_destroy(nnt_optimizer *o); /* destroys its scheduler */
int nnt_optimizer_set_property(nnt_optimizer *o, const char *key,
                               const char *value, nnt_err *e);
/* Takes ownership of s (replacing and destroying any earlier one). */
int nnt_optimizer_set_lr_scheduler(nnt_optimizer *o, nnt_lr_scheduler *s,
                                   nnt_err *e);
const char *nnt_optimizer_type_name(const nnt_optimizer *o);
/* Check the optimizer is complete before training: the legacy decay_rate and
 * decay_steps must be set together (NNTrainer fails at finalize otherwise).
 * @return NNT_OK or NNT_ERR_INVAL naming the missing key. */
int nnt_optimizer_validate(const nnt_optimizer *o, nnt_err *e);
/* Log (nnt_log) what a missing scheduler learning_rate falls back to and
 * an optimizer learning_rate that the scheduler overrides. */
void nnt_optimizer_log_defaults(const nnt_optimizer *o);
/* State tensors per weight, each as large as the weight: 0 sgd, 2 adam(w). */
unsigned nnt_optimizer_state_count(const nnt_optimizer *o);
/* The kernel ops nnt_optimizer_apply calls, as NNT_KOP_BIT(...)s. */
uint64_t nnt_optimizer_kops(const nnt_optimizer *o);
/* Learning rate at iteration iter (0-based across epochs). */
float nnt_optimizer_lr(const nnt_optimizer *o, size_t iter);
/* One update of n weights w with gradient g at iteration iter (0-based;
 * Adam's t is iter + 1). state holds nnt_optimizer_state_count arrays.
 * skip: NULL, or one float of the backend's memory that, when not 0 as the
 * update runs, leaves everything unchanged (kernels.h).
 * @return NNT_OK or the kernel table's error code. */
int nnt_optimizer_apply(const nnt_optimizer *o, const nnt_kernels *k,
                        size_t iter, size_t n, float *w, const float *g,
                        float **state, const float *skip);

#endif
