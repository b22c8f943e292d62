/* Private to api/src: what the ml_train_* handles point to, and how a call
 * enters a model. */
#ifndef NNT_CAPI_H
#define NNT_CAPI_H

#include <pthread.h>
#include <stdarg.h>
#include "api/src/api_internal.h"
#include "nntrainer.h"
#include "nntrainer/model.h"

typedef struct capi_model capi_model;
typedef struct capi_optimizer capi_optimizer;

typedef struct capi_layer {
  nnt_layer *l;
  capi_model *owner;      /* the model that owns it, or NULL */
} capi_layer;

typedef struct capi_lrs {
  nnt_lr_scheduler *s;
  capi_optimizer *owner;  /* the optimizer that owns it, or NULL */
} capi_lrs;

struct capi_optimizer {
  nnt_optimizer *o;
  capi_lrs *lrs;          /* the scheduler handle it owns, or NULL */
  capi_model *owner;
};

/* A generator source's callback and the user data it is called with; the
 * source calls it through this slot, so that the "user_data" property can
 * change the user data after the generator is added. */
typedef struct capi_gen {
  ml_train_datagen_cb cb; /* NULL: the mode's source is not a generator */
  void *user_data;
} capi_gen;

typedef struct capi_dataset {
  nnt_dataset *ds[3];     /* per ml_train_dataset_mode_e; NULL when absent */
  capi_gen gen[3];
  capi_model *owner;
} capi_dataset;

struct capi_model {
  nnt_model *m;
  pthread_mutex_t mu;     /* serializes calls on the model and what it owns */
  unsigned users;         /* calls inside or waiting for mu (under the API lock) */
  int running;            /* ml_train_model_run in progress (under the API lock) */
  capi_layer **layers;    /* handles of its layers, made when added or asked for */
  size_t n_layers, cap_layers;
  capi_optimizer *opt;
  capi_dataset *ds;
  /* the last epoch's metrics of the runs so far, for get_summary's metric
   * codes (0 until reported); accuracy in percent, as NNTrainer's */
  float train_loss, valid_loss, valid_accuracy;
};

/* Enter the object h of kind (model, layer, optimizer, lr_scheduler,
 * dataset) for a call named what. On success either *owner is NULL and the
 * API lock is held (the object belongs to no model), or *owner is the model
 * that owns it, entered (its mutex held, the API lock not held). */
int capi_enter(void *h, nnt_hkind kind, const char *what, capi_model **owner);
void capi_leave(capi_model *owner);
/* The model that owns the object, or NULL; under the API lock. */
capi_model *capi_owner_of(void *h, nnt_hkind kind);

/* Apply "key=value" strings, each possibly holding several separated by
 * '|'; set(obj, key, value, e) is the internal setter. what names the call
 * for messages. @return an ml_error_e. */
typedef int (*capi_setter)(void *obj, const char *key, const char *value, nnt_err *e);
int capi_apply_props(const char *what, capi_setter set, void *obj, const char *const *props,
                     size_t n);
/* Collect a NULL-ended va_list of strings (at most 256) into out. */
int capi_collect(const char *what, va_list ap, const char **out, size_t max, size_t *n);
#define CAPI_MAX_PROPS 256

/* The body of a variadic ml_train_* function: collect the NULL-ended
 * properties after `last` and return call(h, what, props, n). */
#define CAPI_VARIADIC(what, last, call, h)                                  \
  const char *props_[CAPI_MAX_PROPS];                                       \
  size_t n_;                                                                \
  va_list ap_;                                                              \
  va_start(ap_, last);                                                      \
  int rc_ = capi_collect(what, ap_, props_, CAPI_MAX_PROPS, &n_);           \
  va_end(ap_);                                                              \
  return rc_ ? rc_ : call(h, what, props_, n_)

/* New registered tensors info (and data, when td is not NULL) for count
 * float32 tensors of the shapes dims (b:c:h:w). Takes the API lock. */
int capi_new_tensors(const char *what, unsigned count, const nnt_dim *dims, nnt_tinfo **ti,
                     nnt_tdata **td);

/* Free an optimizer handle with its scheduler handle and core objects (the
 * handles already out of the registry). */
void capi_optimizer_free(capi_optimizer *co);

#endif
