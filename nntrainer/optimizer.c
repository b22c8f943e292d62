/* Optimizers: sgd, adam and adamw with NNTrainer's defaults and update rules.
 *
 * sgd    w -= lr * g
 * adam   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
 *        w -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + epsilon),
 *        epsilon added to the uncorrected sqrt(v), t = iter + 1 across epochs
 * adamw  w *= 1 - lr * weight_decay (decoupled, scaled by the scheduled lr,
 *        before the Adam step), then the adam step
 *
 * The learning rate comes from the scheduler when one is set, else from the
 * legacy decay_rate / decay_steps keys (an exponential schedule), else it is
 * the constant learning_rate. Regularization that layers declare is added to
 * the gradient by the model before nnt_optimizer_apply; it is not done here. */
#include "nntrainer/optimizer.h"

#include <math.h>
#include <string.h>

static const char *const opt_names[] = {"sgd", "adam", "adamw"};

/* Creates an optimizer of the named type (case-insensitive) with NNTrainer's
 * defaults; the caller owns *out (nnt_optimizer_destroy). */
int nnt_optimizer_create(const char *type, nnt_optimizer **out, nnt_err *e) {
  for (size_t i = 0; i < NNT_ARRAY_LEN(opt_names); i++) {
    if (!nnt_streq(type, opt_names[i]))
      continue;
    nnt_optimizer *o = nnt_calloc(1, sizeof *o);
    if (!o)
      return nnt_err_set(e, NNT_ERR_NOMEM, "out of memory creating optimizer '%s'", type);
    o->type = (nnt_opt_type)i;
    o->learning_rate = o->type == NNT_OPT_SGD ? 0.0001f : 0.001f;
    o->beta1 = 0.9f;
    o->beta2 = 0.999f;
    o->epsilon = o->type == NNT_OPT_ADAMW ? 1e-8f : 1e-7f;
    o->weight_decay = 0.0f;
    o->decay_rate = NAN;
    *out = o;
    return NNT_OK;
  }
  return nnt_err_set(e, NNT_ERR_INVAL, "unknown optimizer type '%s' (sgd, adam, adamw)",
                     type ? type : "(null)");
}

/* Frees o and the scheduler it owns; NULL is a no-op. */
void nnt_optimizer_destroy(nnt_optimizer *o) {
  if (!o)
    return;
  nnt_lrs_destroy(o->sched);
  nnt_free(o);
}

/* The type's lower-case name; a static string. */
const char *nnt_optimizer_type_name(const nnt_optimizer *o) { return opt_names[o->type]; }

static int parse_beta(const char *key, const char *v, float *out, nnt_err *e) {
  float x;
  int rc = nnt_parse_float(key, v, &x, e);
  if (rc)
    return rc;
  if (x < 0 || x >= 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': value '%s' is not in [0, 1)", key, v);
  *out = x;
  return NNT_OK;
}

static int legacy_with_sched(const char *key, nnt_err *e) {
  return nnt_err_set(e, NNT_ERR_INVAL,
                     "key '%s': the optimizer already has a learning-rate scheduler; set the "
                     "decay in the scheduler instead", key);
}

static void update_legacy(nnt_optimizer *o) {
  o->legacy_decay = !isnan(o->decay_rate) && o->decay_steps > 0;
}

/* Sets one property (key and value case-insensitive). Unknown keys give
 * NNT_ERR_NOKEY, bad values NNT_ERR_INVAL; the message names key and value.
 * On failure o is unchanged. */
int nnt_optimizer_set_property(nnt_optimizer *o, const char *key, const char *value,
                               nnt_err *e) {
  int adam = o->type != NNT_OPT_SGD;
  if (!key)
    return nnt_err_set(e, NNT_ERR_INVAL, "optimizer property: key is NULL");
  if (nnt_streq(key, "type")) {
    if (nnt_streq(value, opt_names[o->type]))
      return NNT_OK;
    return nnt_err_set(e, NNT_ERR_INVAL, "key 'type': value '%s' differs from this optimizer's "
                       "type '%s'", value ? value : "(null)", opt_names[o->type]);
  }
  if (nnt_streq(key, "learning_rate")) {
    int rc = nnt_parse_nonneg_float(key, value, &o->learning_rate, e);
    if (!rc)
      o->lr_set = 1;
    return rc;
  }
  if (nnt_streq(key, "decay_rate")) {
    float r;
    int rc = nnt_parse_float(key, value, &r, e);
    if (rc)
      return rc;
    if (!(r > 0))
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'decay_rate': value '%s' must be positive",
                         value);
    if (o->sched)
      return legacy_with_sched(key, e);
    o->decay_rate = r;
    update_legacy(o);
    return NNT_OK;
  }
  if (nnt_streq(key, "decay_steps")) {
    unsigned s;
    int rc = nnt_parse_positive_uint(key, value, &s, e);
    if (rc)
      return rc;
    if (o->sched)
      return legacy_with_sched(key, e);
    o->decay_steps = s;
    update_legacy(o);
    return NNT_OK;
  }
  if (adam && nnt_streq(key, "beta1"))
    return parse_beta(key, value, &o->beta1, e);
  if (adam && nnt_streq(key, "beta2"))
    return parse_beta(key, value, &o->beta2, e);
  if (adam && nnt_streq(key, "epsilon"))
    return nnt_parse_nonneg_float(key, value, &o->epsilon, e);
  if (o->type == NNT_OPT_ADAMW && nnt_streq(key, "weight_decay"))
    return nnt_parse_nonneg_float(key, value, &o->weight_decay, e);
  return nnt_err_set(e, NNT_ERR_NOKEY, "unknown key '%s' for optimizer '%s'", key,
                     opt_names[o->type]);
}

/* Validates s and gives it to o, which destroys any earlier scheduler. On
 * failure the caller still owns s. NNTrainer refuses a scheduler together
 * with the legacy decay_rate / decay_steps keys, and so does this. */
int nnt_optimizer_set_lr_scheduler(nnt_optimizer *o, nnt_lr_scheduler *s, nnt_err *e) {
  if (!s)
    return nnt_err_set(e, NNT_ERR_INVAL, "set_lr_scheduler: scheduler is NULL");
  if (s == o->sched)
    return NNT_OK;
  if (s->owned)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "set_lr_scheduler: scheduler already belongs to an optimizer");
  if (!isnan(o->decay_rate) || o->decay_steps)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "set_lr_scheduler: the optimizer sets %s; use either the scheduler or "
                       "the optimizer's decay_rate/decay_steps, not both",
                       !isnan(o->decay_rate) ? "decay_rate" : "decay_steps");
  int rc = nnt_lrs_validate(s, e);
  if (rc)
    return rc;
  nnt_lrs_destroy(o->sched);
  o->sched = s;
  s->owned = 1;
  return NNT_OK;
}

/* NNTrainer turns either legacy key into an exponential scheduler whose
 * finalize fails when the other is missing. */
int nnt_optimizer_validate(const nnt_optimizer *o, nnt_err *e) {
  if (!o)
    return nnt_err_set(e, NNT_ERR_INVAL, "optimizer is NULL");
  if (!isnan(o->decay_rate) && !o->decay_steps)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "decay_steps: required key is missing (decay_rate is set)");
  if (isnan(o->decay_rate) && o->decay_steps)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "decay_rate: required key is missing (decay_steps is set)");
  return o->sched ? nnt_lrs_validate(o->sched, e) : NNT_OK;
}

/* Notices and warnings about the learning rate, logged at compile: a
 * constant or exponential scheduler without learning_rate takes the
 * optimizer's (NNTrainer requires it); an optimizer learning_rate that a
 * scheduler overrides is ignored (NNTrainer ignores it too, with a
 * warning). */
void nnt_optimizer_log_defaults(const nnt_optimizer *o) {
  const nnt_lr_scheduler *s = o ? o->sched : NULL;
  if (!s || !nnt_log_enabled(NNT_LOG_MAX_LEVEL))
    return;
  int own_lr = !isnan(s->learning_rate) || s->type == NNT_LRS_STEP ||
               s->type == NNT_LRS_COSINE || s->type == NNT_LRS_LINEAR;
  if (!own_lr)
    nnt_log(NNT_LOG_NOTICE,
            "learning-rate scheduler (%s): key 'learning_rate' not given: using the "
            "optimizer's learning_rate %g (NNTrainer has no default: give it)",
            nnt_lrs_type_name(s->type), (double)o->learning_rate);
  else if (o->lr_set)
    nnt_log(NNT_LOG_WARNING,
            "optimizer (%s): key 'learning_rate' (%g) is ignored: the %s learning-rate "
            "scheduler sets the rate",
            nnt_optimizer_type_name(o), (double)o->learning_rate, nnt_lrs_type_name(s->type));
}

/* Number of state arrays per weight: 0 for sgd, 2 (m, v) for adam and adamw. */
unsigned nnt_optimizer_state_count(const nnt_optimizer *o) {
  return o && o->type != NNT_OPT_SGD ? 2 : 0;
}

/* The learning rate at iteration iter: the scheduler's when set (a constant
 * or exponential scheduler without learning_rate takes the optimizer's), else
 * the legacy exponential decay, else the constant learning_rate. */
float nnt_optimizer_lr(const nnt_optimizer *o, size_t iter) {
  const nnt_lr_scheduler *s = o->sched;
  if (s) {
    if ((s->type == NNT_LRS_CONSTANT || s->type == NNT_LRS_EXPONENTIAL) &&
        isnan(s->learning_rate)) {
      nnt_lr_scheduler tmp = *s;
      tmp.learning_rate = o->learning_rate;
      return nnt_lrs_get(&tmp, iter);
    }
    return nnt_lrs_get(s, iter);
  }
  if (o->legacy_decay) {
    /* NNTrainer: lr * pow(decay_rate, iteration / (float)decay_steps) */
    float ex = (float)iter / (float)o->decay_steps;
    return (float)((double)o->learning_rate * pow((double)o->decay_rate, (double)ex));
  }
  return o->learning_rate;
}

/* Adam's step size lr * sqrt(1 - b2^t) / (1 - b1^t), t = iter + 1, with the
 * bias corrections rounded to float as NNTrainer's adam computes them. */
static double adam_lr_t(const nnt_optimizer *o, double lr, size_t iter) {
  double t = (double)iter + 1;
  float bc1 = (float)(1.0 - pow((double)o->beta1, t));
  float bc2 = (float)(1.0 - pow((double)o->beta2, t));
  return lr * sqrt((double)bc2) / (double)bc1;
}

uint64_t nnt_optimizer_kops(const nnt_optimizer *o) {
  if (o->type == NNT_OPT_SGD)
    return NNT_KOP_BIT(SGD_STEP);
  return NNT_KOP_BIT(ADAM_STEP); /* AdamW's decay is adam_step's wscale */
}

/* One update of the n weights w from gradient g (read-only) at iteration
 * iter; state holds nnt_optimizer_state_count arrays of n floats (m, v),
 * zeroed before the first step. Computes only through the kernel table k.
 * @return NNT_OK or the first kernel's error code. */
int nnt_optimizer_apply(const nnt_optimizer *o, const nnt_kernels *k, size_t iter, size_t n,
                        float *w, const float *g, float **state, const float *skip) {
  float lr = nnt_optimizer_lr(o, iter);
  if (o->type == NNT_OPT_SGD)
    return k->sgd_step(k, n, lr, g, w, skip);
  float wscale =
      o->type == NNT_OPT_ADAMW && o->weight_decay > 0 ? 1.0f - lr * o->weight_decay : 1.0f;
  float lr_t = (float)adam_lr_t(o, lr, iter);
  return k->adam_step(k, n, lr_t, o->beta1, o->beta2, o->epsilon, wscale, g, state[0], state[1],
                      w, skip);
}
