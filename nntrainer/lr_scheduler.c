/* Learning-rate schedulers with the formulas NNTrainer's code computes
 * (i = the iteration, 0-based, counted across epochs):
 *
 * constant     learning_rate
 * exponential  learning_rate * decay_rate ^ (i / decay_steps), real division
 *              (a smooth decay, not a staircase)
 * step         learning_rate[k] for the first k with i <= iteration[k] (a
 *              boundary iteration still uses the rate before it); the last
 *              rate after the last boundary
 * cosine       min + (max - min) * (1 + cos(pi * (i mod decay_steps) /
 *              decay_steps)) / 2: periodic, back to max every decay_steps
 * linear       max(max - (max - min) * i / decay_steps, min): min after
 *              decay_steps
 *
 * A constant or exponential scheduler without learning_rate takes the
 * optimizer's (see nnt_optimizer_lr); NNTrainer refuses it instead. */
#include "nntrainer/optimizer.h"

#include <math.h>
#include <string.h>

static const char *const lrs_names[] = {"constant", "exponential", "step", "cosine", "linear"};

const char *nnt_lrs_type_name(nnt_lrs_type t) {
  return (unsigned)t < NNT_ARRAY_LEN(lrs_names) ? lrs_names[t] : NULL;
}

/* Creates a scheduler of the named type (case-insensitive) with no keys set;
 * the caller owns *out until it gives it to an optimizer. */
int nnt_lrs_create(const char *type, nnt_lr_scheduler **out, nnt_err *e) {
  for (size_t i = 0; i < NNT_ARRAY_LEN(lrs_names); i++) {
    if (!nnt_streq(type, lrs_names[i]))
      continue;
    nnt_lr_scheduler *s = nnt_calloc(1, sizeof *s);
    if (!s)
      return nnt_err_set(e, NNT_ERR_NOMEM, "out of memory creating scheduler '%s'", type);
    s->type = (nnt_lrs_type)i;
    s->learning_rate = NAN;
    s->decay_rate = NAN;
    s->max_lr = NAN;
    s->min_lr = NAN;
    *out = s;
    return NNT_OK;
  }
  return nnt_err_set(e, NNT_ERR_INVAL,
                     "unknown learning-rate scheduler type '%s' (constant, exponential, step, "
                     "cosine, linear)",
                     type ? type : "(null)");
}

/* Frees s; NULL is a no-op. */
void nnt_lrs_destroy(nnt_lr_scheduler *s) { nnt_free(s); }

static int set_step_lrs(nnt_lr_scheduler *s, const char *key, const char *v, nnt_err *e) {
  float lr[NNT_LRS_MAX_STEPS];
  unsigned n = 0;
  int rc = nnt_parse_float_list(key, v, lr, NNT_LRS_MAX_STEPS, &n, e);
  if (rc)
    return rc;
  for (unsigned i = 0; i < n; i++)
    if (lr[i] < 0)
      return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': value '%s' has a negative rate", key, v);
  memcpy(s->step_lr, lr, n * sizeof *lr);
  s->n_steps_lr = n;
  return NNT_OK;
}

static int set_step_iters(nnt_lr_scheduler *s, const char *key, const char *v, nnt_err *e) {
  unsigned it[NNT_LRS_MAX_STEPS];
  unsigned n = 0;
  int rc = nnt_parse_uint_list(key, v, it, NNT_LRS_MAX_STEPS, &n, e);
  if (rc)
    return rc;
  for (unsigned i = 1; i < n; i++)
    if (it[i] <= it[i - 1])
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "key '%s': value '%s' is not strictly increasing", key, v);
  memcpy(s->step_iter, it, n * sizeof *it);
  s->n_steps_iter = n;
  return NNT_OK;
}

static int uses_decay_steps(nnt_lrs_type t) {
  return t == NNT_LRS_EXPONENTIAL || t == NNT_LRS_COSINE || t == NNT_LRS_LINEAR;
}

static int uses_min_max(nnt_lrs_type t) { return t == NNT_LRS_COSINE || t == NNT_LRS_LINEAR; }

/* Sets one key (case-insensitive) allowed for the scheduler's type. Keys of
 * another type give NNT_ERR_NOKEY, bad values NNT_ERR_INVAL naming key and
 * value. On failure s is unchanged. */
int nnt_lrs_set_property(nnt_lr_scheduler *s, const char *key, const char *value,
                         nnt_err *e) {
  if (!key)
    return nnt_err_set(e, NNT_ERR_INVAL, "scheduler property: key is NULL");
  if (nnt_streq(key, "type")) {
    if (nnt_streq(value, lrs_names[s->type]))
      return NNT_OK;
    return nnt_err_set(e, NNT_ERR_INVAL, "key 'type': value '%s' differs from this scheduler's "
                       "type '%s'", value ? value : "(null)", lrs_names[s->type]);
  }
  if (nnt_streq(key, "learning_rate") && !uses_min_max(s->type)) {
    if (s->type == NNT_LRS_STEP)
      return set_step_lrs(s, key, value, e);
    return nnt_parse_nonneg_float(key, value, &s->learning_rate, e);
  }
  if (nnt_streq(key, "iteration") && s->type == NNT_LRS_STEP)
    return set_step_iters(s, key, value, e);
  if (nnt_streq(key, "decay_rate") && s->type == NNT_LRS_EXPONENTIAL) {
    float r;
    int rc = nnt_parse_float(key, value, &r, e);
    if (rc)
      return rc;
    if (!(r > 0))
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'decay_rate': value '%s' must be positive",
                         value);
    s->decay_rate = r;
    return NNT_OK;
  }
  if (nnt_streq(key, "decay_steps") && uses_decay_steps(s->type))
    return nnt_parse_positive_uint(key, value, &s->decay_steps, e);
  if (nnt_streq(key, "max_learning_rate") && uses_min_max(s->type))
    return nnt_parse_nonneg_float(key, value, &s->max_lr, e);
  if (nnt_streq(key, "min_learning_rate") && uses_min_max(s->type))
    return nnt_parse_nonneg_float(key, value, &s->min_lr, e);
  return nnt_err_set(e, NNT_ERR_NOKEY, "unknown key '%s' for the %s learning-rate scheduler",
                     key, lrs_names[s->type]);
}

static int missing(nnt_err *e, const char *key, nnt_lrs_type t) {
  return nnt_err_set(e, NNT_ERR_INVAL, "%s: required key is missing for the %s scheduler", key,
                     lrs_names[t]);
}

/* Checks that the keys s's type needs are set and consistent; the message
 * names the missing or offending key. */
int nnt_lrs_validate(const nnt_lr_scheduler *s, nnt_err *e) {
  if (!s)
    return nnt_err_set(e, NNT_ERR_INVAL, "scheduler is NULL");
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
                         "iteration: %u boundaries need %u values of learning_rate, not %u",
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
  return nnt_err_set(e, NNT_ERR_INVAL, "scheduler has an unknown type %d", (int)s->type);
}

/* The learning rate at iteration iter of a validated scheduler (NAN from a
 * constant or exponential one without learning_rate). */
float nnt_lrs_get(const nnt_lr_scheduler *s, size_t iter) {
  if (uses_decay_steps(s->type) && !s->decay_steps)
    return NAN; /* not validated */
  switch (s->type) {
  case NNT_LRS_CONSTANT:
    return s->learning_rate;
  case NNT_LRS_EXPONENTIAL: {
    float ex = (float)iter / (float)s->decay_steps; /* NNTrainer divides in float */
    return (float)((double)s->learning_rate * pow((double)s->decay_rate, (double)ex));
  }
  case NNT_LRS_STEP:
    for (unsigned k = 0; k < s->n_steps_iter; k++)
      if (iter <= s->step_iter[k])
        return s->step_lr[k];
    return s->n_steps_lr ? s->step_lr[s->n_steps_lr - 1] : NAN;
  case NNT_LRS_COSINE: {
    double phase = (double)(iter % s->decay_steps) / (double)s->decay_steps;
    double c = 0.5 * (1.0 + cos(M_PI * phase));
    return (float)((double)s->min_lr + ((double)s->max_lr - (double)s->min_lr) * c);
  }
  case NNT_LRS_LINEAR: {
    double lr = (double)s->max_lr -
                ((double)s->max_lr - (double)s->min_lr) * ((double)iter / s->decay_steps);
    return (float)(lr > s->min_lr ? lr : (double)s->min_lr);
  }
  }
  return NAN;
}
