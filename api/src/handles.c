/* The handle registry and the per-thread last error of the C API. */
#include "api/src/api_internal.h"
#include "nntrainer-ext.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Open addressing over pointers; a removed slot becomes a tombstone. */
typedef struct slot {
  const void *p;
  nnt_hkind kind; /* NNT_H_NONE with p == TOMB: removed */
} slot;

static const char tomb_mark;
#define TOMB ((const void *)&tomb_mark)

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static slot *g_slots;
static size_t g_cap, g_used; /* g_used counts live and tombstones */
static size_t g_live[NNT_H_TENSORS_DATA + 1];

static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;

void nnt_api_lock(void) { pthread_mutex_lock(&g_lock); }
void nnt_api_unlock(void) { pthread_mutex_unlock(&g_lock); }
void nnt_api_wait(void) { pthread_cond_wait(&g_cond, &g_lock); }
void nnt_api_wake(void) { pthread_cond_broadcast(&g_cond); }

static size_t hash_ptr(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t)x;
}

static slot *find(const void *p) {
  if (!g_cap || !p)
    return NULL;
  for (size_t i = hash_ptr(p) & (g_cap - 1), n = 0; n < g_cap; i = (i + 1) & (g_cap - 1), n++) {
    if (!g_slots[i].p)
      return NULL;
    if (g_slots[i].p == p)
      return &g_slots[i];
  }
  return NULL;
}

static int grow(void) {
  /* sized from the live handles: a rebuild also drops the tombstones */
  size_t cap = 64, live = 0;
  for (size_t k = 1; k <= NNT_H_TENSORS_DATA; k++)
    live += g_live[k];
  while ((live + 1) * 2 >= cap)
    cap *= 2;
  /* plain calloc: the registry must not fail through the test hook that
   * makes the library's own allocations fail */
  slot *s = calloc(cap, sizeof *s);
  if (!s)
    return ML_ERROR_OUT_OF_MEMORY;
  for (size_t i = 0; i < g_cap; i++) {
    if (!g_slots[i].p || g_slots[i].p == TOMB)
      continue;
    size_t j = hash_ptr(g_slots[i].p) & (cap - 1);
    while (s[j].p)
      j = (j + 1) & (cap - 1);
    s[j] = g_slots[i];
  }
  free(g_slots);
  g_slots = s;
  g_cap = cap;
  g_used = live;
  return ML_ERROR_NONE;
}

int nnt_h_add(void *h, nnt_hkind kind) {
  if ((g_used + 1) * 4 >= g_cap * 3 && grow())
    return ML_ERROR_OUT_OF_MEMORY;
  size_t i = hash_ptr(h) & (g_cap - 1);
  while (g_slots[i].p && g_slots[i].p != TOMB)
    i = (i + 1) & (g_cap - 1);
  if (!g_slots[i].p)
    g_used++;
  g_slots[i].p = h;
  g_slots[i].kind = kind;
  g_live[kind]++;
  return ML_ERROR_NONE;
}

nnt_hkind nnt_h_kind(const void *h) {
  slot *s = find(h);
  return s ? s->kind : NNT_H_NONE;
}

void nnt_h_remove(const void *h) {
  slot *s = find(h);
  if (!s)
    return;
  g_live[s->kind]--;
  s->p = TOMB;
  s->kind = NNT_H_NONE;
}

size_t nnt_h_count(nnt_hkind kind) {
  nnt_api_lock();
  size_t n = kind <= NNT_H_TENSORS_DATA ? g_live[kind] : 0;
  nnt_api_unlock();
  return n;
}

static const char *kind_name(nnt_hkind k) {
  static const char *const names[] = {"nothing", "model", "layer", "optimizer",
                                      "lr_scheduler", "dataset", "tensors info",
                                      "tensors data"};
  return k <= NNT_H_TENSORS_DATA ? names[k] : "nothing";
}

int nnt_h_check(const void *h, nnt_hkind kind, const char *what) {
  if (!h)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: the handle is NULL", what);
  nnt_hkind k = nnt_h_kind(h);
  if (k == kind)
    return ML_ERROR_NONE;
  if (k == NNT_H_NONE)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER,
                        "%s: not a live handle (destroyed, or never created here)", what);
  return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: the handle is a %s, not a %s", what,
                      kind_name(k), kind_name(kind));
}

/* ---- last error, per thread ---- */

static _Thread_local char t_msg[NNT_ERR_MSG_MAX];
static _Thread_local char t_shown[NNT_ERR_MSG_MAX];
static _Thread_local int t_has;

int nnt_api_fail(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t_msg, sizeof t_msg, fmt, ap);
  va_end(ap);
  t_has = 1;
  return code;
}

int nnt_api_code(int c) {
  switch (c) {
  case NNT_OK:
    return ML_ERROR_NONE;
  case NNT_ERR_INVAL:
  case NNT_ERR_NOKEY:
    return ML_ERROR_INVALID_PARAMETER;
  case NNT_ERR_RANGE:
    return ML_TRAIN_EXT_ERROR_NOT_FINITE;
  case NNT_ERR_CANCELED:
    return ML_TRAIN_EXT_ERROR_CANCELED;
  case NNT_ERR_NOMEM:
    return ML_ERROR_OUT_OF_MEMORY;
  case NNT_ERR_IO:
    return ML_ERROR_IO_ERROR;
  case NNT_ERR_PERM:
    return ML_ERROR_PERMISSION_DENIED;
  case NNT_ERR_TRY_AGAIN:
    return ML_ERROR_TRY_AGAIN;
  case NNT_ERR_NOT_SUPPORTED:
    return ML_ERROR_NOT_SUPPORTED;
  case NNT_ERR_TIMED_OUT:
    return ML_ERROR_TIMED_OUT;
  default:
    return ML_ERROR_UNKNOWN;
  }
}

int nnt_api_fail_err(const nnt_err *e) {
  /* a data generator's own code comes back as it was, whatever its value */
  int code = e->from_callback ? e->code : nnt_api_code(e->code);
  nnt_api_fail(code, "%s", e->msg[0] ? e->msg : nnt_strerror(e->code));
  return code;
}

const char *ml_error(void) {
  if (!t_has)
    return NULL;
  memcpy(t_shown, t_msg, sizeof t_shown);
  t_has = 0;
  return t_shown;
}

const char *ml_strerror(int code) {
  switch (code) {
  case ML_ERROR_NONE:
    return "success";
  case ML_ERROR_INVALID_PARAMETER:
    return "invalid parameter";
  case ML_ERROR_STREAMS_PIPE:
    return "cannot create or access the pipeline";
  case ML_ERROR_TRY_AGAIN:
    return "try again";
  case ML_ERROR_UNKNOWN:
    return "unknown error";
  case ML_ERROR_TIMED_OUT:
    return "timed out";
  case ML_ERROR_NOT_SUPPORTED:
    return "not supported";
  case ML_ERROR_PERMISSION_DENIED:
    return "permission denied";
  case ML_ERROR_OUT_OF_MEMORY:
    return "out of memory";
  case ML_ERROR_IO_ERROR:
    return "input/output error";
  case ML_TRAIN_EXT_ERROR_NOT_FINITE:
    return "a value in training is not finite (NaN or infinity)";
  case ML_TRAIN_EXT_ERROR_CANCELED:
    return "training stopped on request";
  default:
    return NULL;
  }
}
