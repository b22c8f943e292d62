/* Learning-rate schedulers, with NNTrainer's formulas:
 * constant     lr
 * exponential  lr * decay_rate ^ floor(iter / decay_steps)
 * step         learning_rate[i], i = the first boundary with iter <= iteration[i]
 *              (the last rate after the last boundary)
 * cosine       min + (max - min) * (1 + cos(pi * iter / decay_steps)) / 2,
 *              min after decay_steps
 * linear       max - (max - min) * iter / decay_steps, min after decay_steps */
#include "nntrainer/optimizer.h"

#include <math.h>
#include <string.h>

static const char *const lrs_names[] = {"constant", "exponential", "step", "cosine", "linear"};

int nnt_lrs_create(const char *type, nnt_lr_scheduler **out, nnt_err *e) {
  for (size_t i = 0; i < NNT_ARRAY_LEN(lrs_names); i++)
    if (nnt_streq(type, lrs_names[i])) {
      nnt_lr_scheduler *s = nnt_calloc(1, sizeof *s);
      if (!s)
        return nnt_err_set(e, NNT_ERR_NOMEM, "out of memory creating a scheduler");
      s->type = (nnt_lrs_type)i;
      s->learning_rate = NAN;
      s->decay_rate = NAN;
      s->max_lr = s->min_lr = NAN;
      *out = s;
      return NNT_OK;
    }
  return nnt_err_set(e, NNT_ERR_INVAL,
                     "unknown learning-rate scheduler type '%s' (constant, exponential, step, "
                     "cosine, linear)", type ? type : "(null)");
}

void nnt_lrs_destroy(nnt_lr_scheduler *s) { nnt_free(s); }

static int positive(const char *key, const char *v, float *out, nnt_err *e) {
  int rc = nnt_parse_float(key, v, out, e);
  if (!rc && *out < 0)
    return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': value '%s' must not be negative", key, v);
  return rc;
}

int nnt_lrs_set_property(nnt_lr_scheduler *s, const char *key, const char *value,
                         nnt_err *e) {
  if (nnt_streq(key, "type"))
    return nnt_streq(value, lrs_names[s->type])
               ? NNT_OK
               : nnt_err_set(e, NNT_ERR_INVAL, "key 'type': '%s' differs from '%s'", value,
                             lrs_names[s->type]);
  if (nnt_streq(key, "learning_rate")) {
    if (s->type == NNT_LRS_STEP) {
      int rc = nnt_parse_float_list(key, value, s->step_lr, NNT_LRS_MAX_STEPS, &s->n_steps_lr, e);
      for (unsigned i = 0; !rc && i < s->n_steps_lr; i++)
        if (s->step_lr[i] < 0)
          return nnt_err_set(e, NNT_ERR_INVAL, "key 'learning_rate': negative rate in '%s'", value);
      return rc;
    }
    return positive(key, value, &s->learning_rate, e);
  }
  if (nnt_streq(key, "iteration") && s->type == NNT_LRS_STEP) {
    int rc = nnt_parse_uint_list(key, value, s->step_iter, NNT_LRS_MAX_STEPS, &s->n_steps_iter, e);
    for (unsigned i = 1; !rc && i < s->n_steps_iter; i++)
      if (s->step_iter[i] <= s->step_iter[i - 1])
        return nnt_err_set(e, NNT_ERR_INVAL, "key 'iteration': '%s' is not increasing", value);
    return rc;
  }
  if (nnt_streq(key, "decay_rate") && s->type == NNT_LRS_EXPONENTIAL)
    return positive(key, value, &s->decay_rate, e);
  if (nnt_streq(key, "decay_steps") && s->type != NNT_LRS_CONSTANT && s->type != NNT_LRS_STEP) {
    int rc = nnt_parse_uint(key, value, &s->decay_steps, e);
    if (!rc && !s->decay_steps)
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'decay_steps': must be positive");
    return rc;
  }
  if (nnt_streq(key, "max_learning_rate") && (s->type == NNT_LRS_COSINE || s->type == NNT_LRS_LINEAR))
    return positive(key, value, &s->max_lr, e);
  if (nnt_streq(key, "min_learning_rate") && (s->type == NNT_LRS_COSINE || s->type == NNT_LRS_LINEAR))
    return positive(key, value, &s->min_lr, e);
  return nnt_err_set(e, NNT_ERR_NOKEY, "unknown key '%s' for scheduler '%s'", key,
                     lrs_names[s->type]);
}

static int missing(nnt_err *e, const char *key, nnt_lrs_type t) {
  return nnt_err_set(e, NNT_ERR_INVAL, "%s: required key is missing for the %s scheduler", key,
                     lrs_names[t]);
}

int nnt_lrs_validate(const nnt_lr_scheduler *s, nnt_err *e) {
  switch (s->type) {
  case NNT_LRS_CONSTANT:
    return NNT_OK; /* learning_rate may come from the optimizer */
  case NNT_LRS_EXPONENTIAL:
    if (isnan(s->decay_rate))
      return missing(e, "decay_rate", s->type);
    if (!s->decay_steps)
      return missing(e, "decay_steps", s->type);
    return NNT_OK;
  case NNT_LRS_STEP:
    if (!s->n_steps_lr)
      return missing(e, "learning_rate", s->type);
    if (!s->n_steps_iter)
      return missing(e, "iteration", s->type);
    if (s->n_steps_iter + 1 != s->n_steps_lr)
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "iteration: %u boundaries need %u learning rates, not %u",
                         s->n_steps_iter, s->n_steps_iter + 1, s->n_steps_lr);
    return NNT_OK;
  case NNT_LRS_COSINE:
  case NNT_LRS_LINEAR:
    if (isnan(s->max_lr))
      return missing(e, "max_learning_rate", s->type);
    if (isnan(s->min_lr))
      return missing(e, "min_learning_rate", s->type);
    if (!s->decay_steps)
      return missing(e, "decay_steps", s->type);
    return NNT_OK;
  }
  return NNT_OK;
}

float nnt_lrs_get(const nnt_lr_scheduler *s, size_t iter) {
  switch (s->type) {
  case NNT_LRS_CONSTANT:
    return s->learning_rate;
  case NNT_LRS_EXPONENTIAL:
    return (float)(s->learning_rate * pow(s->decay_rate, (double)(iter / s->decay_steps)));
  case NNT_LRS_STEP:
    for (unsigned i = 0; i < s->n_steps_iter; i++)
      if (iter <= s->step_iter[i])
        return s->step_lr[i];
    return s->step_lr[s->n_steps_lr - 1];
  case NNT_LRS_COSINE:
    if (iter >= s->decay_steps)
      return s->min_lr;
    return (float)(s->min_lr + (s->max_lr - s->min_lr) *
                                   (1 + cos(M_PI * (double)iter / s->decay_steps)) / 2);
  case NNT_LRS_LINEAR:
    if (iter >= s->decay_steps)
      return s->min_lr;
    return (float)(s->max_lr - (s->max_lr - s->min_lr) * (double)iter / s->decay_steps);
  }
  return 0;
}
