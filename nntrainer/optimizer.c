/* Optimizers: sgd, adam, adamw, with NNTrainer's defaults and Adam's
 * epsilon added to the uncorrected sqrt(v) with the bias-corrected step. */
#include "nntrainer/optimizer.h"

#include <math.h>
#include <string.h>

static const char *const opt_names[] = {"sgd", "adam", "adamw"};

int nnt_optimizer_create(const char *type, nnt_optimizer **out, nnt_err *e) {
  for (size_t i = 0; i < NNT_ARRAY_LEN(opt_names); i++)
    if (nnt_streq(type, opt_names[i])) {
      nnt_optimizer *o = nnt_calloc(1, sizeof *o);
      if (!o)
        return nnt_err_set(e, NNT_ERR_NOMEM, "out of memory creating an optimizer");
      o->type = (nnt_opt_type)i;
      o->learning_rate = o->type == NNT_OPT_SGD ? 0.0001f : 0.001f;
      o->beta1 = 0.9f;
      o->beta2 = 0.999f;
      o->epsilon = 1e-7f;
      o->weight_decay = o->type == NNT_OPT_ADAMW ? 0.01f : 0.0f;
      *out = o;
      return NNT_OK;
    }
  return nnt_err_set(e, NNT_ERR_INVAL, "unknown optimizer type '%s' (sgd, adam, adamw)",
                     type ? type : "(null)");
}

void nnt_optimizer_destroy(nnt_optimizer *o) {
  if (!o)
    return;
  nnt_lrs_destroy(o->sched);
  nnt_free(o);
}

const char *nnt_optimizer_type_name(const nnt_optimizer *o) { return opt_names[o->type]; }

static int nonneg(const char *key, const char *v, float *out, nnt_err *e) {
  int rc = nnt_parse_float(key, v, out, e);
  if (!rc && *out < 0)
    return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': value '%s' must not be negative", key, v);
  return rc;
}

int nnt_optimizer_set_property(nnt_optimizer *o, const char *key, const char *value,
                               nnt_err *e) {
  int adam = o->type != NNT_OPT_SGD;
  if (nnt_streq(key, "type"))
    return nnt_streq(value, opt_names[o->type])
               ? NNT_OK
               : nnt_err_set(e, NNT_ERR_INVAL, "key 'type': '%s' differs from '%s'", value,
                             opt_names[o->type]);
  if (nnt_streq(key, "learning_rate")) {
    int rc = nonneg(key, value, &o->learning_rate, e);
    o->lr_set = !rc;
    return rc;
  }
  if (nnt_streq(key, "decay_rate")) {
    int rc = nonneg(key, value, &o->decay_rate, e);
    o->legacy_decay = !rc && o->decay_steps;
    return rc;
  }
  if (nnt_streq(key, "decay_steps")) {
    int rc = nnt_parse_uint(key, value, &o->decay_steps, e);
    o->legacy_decay = !rc && o->decay_steps && o->decay_rate > 0;
    return rc;
  }
  if (adam && (nnt_streq(key, "beta1") || nnt_streq(key, "beta2"))) {
    float b;
    int rc = nnt_parse_float(key, value, &b, e);
    if (rc)
      return rc;
    if (b < 0 || b >= 1)
      return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': %s is not in [0, 1)", key, value);
    *(nnt_streq(key, "beta1") ? &o->beta1 : &o->beta2) = b;
    return NNT_OK;
  }
  if (adam && nnt_streq(key, "epsilon"))
    return nonneg(key, value, &o->epsilon, e);
  if (o->type == NNT_OPT_ADAMW && nnt_streq(key, "weight_decay"))
    return nonneg(key, value, &o->weight_decay, e);
  return nnt_err_set(e, NNT_ERR_NOKEY, "unknown key '%s' for optimizer '%s'", key,
                     opt_names[o->type]);
}

int nnt_optimizer_set_lr_scheduler(nnt_optimizer *o, nnt_lr_scheduler *s, nnt_err *e) {
  if (!s)
    return nnt_err_set(e, NNT_ERR_INVAL, "set_lr_scheduler: scheduler is NULL");
  if (s->owned)
    return nnt_err_set(e, NNT_ERR_INVAL, "set_lr_scheduler: scheduler already belongs to an optimizer");
  int rc = nnt_lrs_validate(s, e);
  if (rc)
    return rc;
  if (o->sched != s)
    nnt_lrs_destroy(o->sched);
  o->sched = s;
  s->owned = 1;
  return NNT_OK;
}

unsigned nnt_optimizer_state_count(const nnt_optimizer *o) {
  return o && o->type != NNT_OPT_SGD ? 2 : 0;
}

float nnt_optimizer_lr(const nnt_optimizer *o, size_t iter) {
  if (o->sched) {
    if (o->sched->type == NNT_LRS_CONSTANT || o->sched->type == NNT_LRS_EXPONENTIAL) {
      nnt_lr_scheduler s = *o->sched;
      if (isnan(s.learning_rate))
        s.learning_rate = o->learning_rate;
      return nnt_lrs_get(&s, iter);
    }
    return nnt_lrs_get(o->sched, iter);
  }
  if (o->legacy_decay)
    return (float)(o->learning_rate * pow(o->decay_rate, (double)(iter / o->decay_steps)));
  return o->learning_rate;
}

void nnt_optimizer_apply(const nnt_optimizer *o, const nnt_kernels *k, size_t iter, size_t n,
                         float *w, const float *g, float **state) {
  float lr = nnt_optimizer_lr(o, iter);
  if (o->type == NNT_OPT_SGD) {
    k->sgd_step(n, lr, g, w);
    return;
  }
  double t = (double)iter + 1;
  float lr_t = (float)(lr * sqrt(1 - pow(o->beta2, t)) / (1 - pow(o->beta1, t)));
  if (o->type == NNT_OPT_ADAMW && o->weight_decay > 0)
    k->scale(n, 1.0f - lr * o->weight_decay, w); /* decoupled decay */
  k->adam_step(n, lr_t, o->beta1, o->beta2, o->epsilon, g, state[0], state[1], w);
}
