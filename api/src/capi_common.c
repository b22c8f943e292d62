/* Entering objects of the C API, and property lists. */
#include "api/src/capi.h"

#include <ctype.h>
#include <string.h>

capi_model *capi_owner_of(void *h, nnt_hkind kind) {
  switch (kind) {
  case NNT_H_MODEL:
    return h;
  case NNT_H_LAYER:
    return ((capi_layer *)h)->owner;
  case NNT_H_OPTIMIZER:
    return ((capi_optimizer *)h)->owner;
  case NNT_H_LR_SCHEDULER: {
    capi_optimizer *o = ((capi_lrs *)h)->owner;
    return o ? o->owner : NULL;
  }
  case NNT_H_DATASET:
    return ((capi_dataset *)h)->owner;
  default:
    return NULL;
  }
}

int capi_enter(void *h, nnt_hkind kind, const char *what, capi_model **owner) {
  for (;;) {
    nnt_api_lock();
    int rc = nnt_h_check(h, kind, what);
    if (rc) {
      nnt_api_unlock();
      return rc;
    }
    capi_model *cm = capi_owner_of(h, kind);
    if (!cm) {
      *owner = NULL;
      return ML_ERROR_NONE; /* the API lock stays held */
    }
    if (cm->running) {
      nnt_api_unlock();
      return nnt_api_fail(ML_ERROR_TRY_AGAIN,
                          "%s: the model is training (ml_train_model_run has not returned)",
                          what);
    }
    cm->users++;
    nnt_api_unlock();
    pthread_mutex_lock(&cm->mu);
    nnt_api_lock();
    /* the object may have changed hands or died while this call waited */
    int same = nnt_h_kind(h) == kind && capi_owner_of(h, kind) == cm;
    nnt_api_unlock();
    if (same) {
      *owner = cm;
      return ML_ERROR_NONE;
    }
    capi_leave(cm);
  }
}

void capi_leave(capi_model *cm) {
  if (!cm) {
    nnt_api_unlock();
    return;
  }
  pthread_mutex_unlock(&cm->mu);
  nnt_api_lock();
  if (--cm->users == 0)
    nnt_api_wake();
  nnt_api_unlock();
}

int capi_collect(const char *what, va_list ap, const char **out, size_t max, size_t *n) {
  size_t k = 0;
  const char *s;
  while ((s = va_arg(ap, const char *)) != NULL) {
    if (k == max)
      return nnt_api_fail(ML_ERROR_INVALID_PARAMETER,
                          "%s: more than %zu properties (is the list ended by NULL?)", what,
                          max);
    out[k++] = s;
  }
  *n = k;
  return ML_ERROR_NONE;
}

/* Trim spaces at both ends of [s, s + len): sets *b and returns the length. */
static size_t trim(const char *s, size_t len, const char **b) {
  while (len && isspace((unsigned char)*s)) {
    s++;
    len--;
  }
  while (len && isspace((unsigned char)s[len - 1]))
    len--;
  *b = s;
  return len;
}

static int apply_one(const char *what, capi_setter set, void *obj, const char *item,
                     size_t len) {
  const char *b;
  len = trim(item, len, &b);
  if (!len)
    return ML_ERROR_NONE; /* "a=1 | " has an empty last part */
  const char *eq = memchr(b, '=', len);
  if (!eq)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: property '%.*s' is not key=value",
                        what, (int)len, b);
  char key[128], value[4096];
  const char *kb, *vb;
  size_t kl = trim(b, (size_t)(eq - b), &kb);
  size_t vl = trim(eq + 1, len - (size_t)(eq - b) - 1, &vb);
  if (!kl || kl >= sizeof key || vl >= sizeof value)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER,
                        "%s: property '%.*s' has an empty or too long key or value", what,
                        (int)len, b);
  memcpy(key, kb, kl);
  key[kl] = '\0';
  for (size_t i = 0; i < kl; i++)
    key[i] = (char)tolower((unsigned char)key[i]);
  memcpy(value, vb, vl);
  value[vl] = '\0';
  nnt_err e;
  nnt_err_clear(&e);
  int rc = set(obj, key, value, &e);
  if (rc == NNT_ERR_NOKEY)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: unknown key '%s'", what, key);
  if (rc) {
    nnt_err_prefix(&e, "%s: ", what);
    return nnt_api_fail_err(&e);
  }
  return ML_ERROR_NONE;
}

int capi_apply_props(const char *what, capi_setter set, void *obj, const char *const *props,
                     size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!props[i])
      return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: property %zu is NULL", what, i);
    const char *s = props[i];
    for (;;) {
      const char *bar = strchr(s, '|');
      size_t len = bar ? (size_t)(bar - s) : strlen(s);
      int rc = apply_one(what, set, obj, s, len);
      if (rc)
        return rc;
      if (!bar)
        break;
      s = bar + 1;
    }
  }
  return ML_ERROR_NONE;
}

int capi_new_tensors(const char *what, unsigned count, const nnt_dim *dims, nnt_tinfo **ti,
                     nnt_tdata **td) {
  unsigned bchw[ML_TENSOR_SIZE_LIMIT][4];
  if (count > ML_TENSOR_SIZE_LIMIT)
    return nnt_api_fail(ML_ERROR_NOT_SUPPORTED, "%s: %u tensors (at most %d)", what, count,
                        ML_TENSOR_SIZE_LIMIT);
  for (unsigned i = 0; i < count; i++) {
    bchw[i][0] = dims[i].b;
    bchw[i][1] = dims[i].c;
    bchw[i][2] = dims[i].h;
    bchw[i][3] = dims[i].w;
  }
  nnt_api_lock();
  int rc = nnt_tinfo_new_locked(count, (const unsigned(*)[4])bchw, ti);
  if (!rc && td && (rc = nnt_tdata_new_locked(*ti, td))) {
    nnt_tinfo_free_locked(*ti);
    *ti = NULL;
  }
  nnt_api_unlock();
  return rc ? nnt_api_fail(rc, "%s: out of memory", what) : ML_ERROR_NONE;
}
