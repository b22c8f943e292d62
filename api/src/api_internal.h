/* Private to api/src: the handle registry, the per-thread last error, and
 * the structures behind ml_tensors_info_h and ml_tensors_data_h. */
#ifndef NNT_API_INTERNAL_H
#define NNT_API_INTERNAL_H

#include <stddef.h>
#include "ml-api-common.h"
#include "nntrainer/common.h"

/* What a handle is. A pointer is a handle of the API only while it is in
 * the registry, so a destroyed or foreign pointer is refused without being
 * dereferenced. */
typedef enum nnt_hkind {
  NNT_H_NONE = 0,
  NNT_H_MODEL,
  NNT_H_LAYER,
  NNT_H_OPTIMIZER,
  NNT_H_LR_SCHEDULER,
  NNT_H_DATASET,
  NNT_H_TENSORS_INFO,
  NNT_H_TENSORS_DATA,
} nnt_hkind;

/* The one lock of the registry (and of handles not owned by a model). */
void nnt_api_lock(void);
void nnt_api_unlock(void);
/* Wait (holding the lock) until nnt_api_wake() is called; wake all. */
void nnt_api_wait(void);
void nnt_api_wake(void);
/* The three below require the lock. */
int nnt_h_add(void *h, nnt_hkind kind); /* ML_ERROR_NONE or OUT_OF_MEMORY */
nnt_hkind nnt_h_kind(const void *h);    /* NNT_H_NONE when not live */
void nnt_h_remove(const void *h);
/* Live handles of a kind (tests check for leaks with it). Takes the lock:
 * do not call it holding the lock. */
size_t nnt_h_count(nnt_hkind kind);

/* Record a message for ml_error() and return code. */
int nnt_api_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Record e's message; return its code as an ml_error_e. */
int nnt_api_fail_err(const nnt_err *e);
/* Map an internal code to an ml_error_e. */
int nnt_api_code(int nnt_code);
/* Refuse a handle that is NULL or not live with the kind:
 * ML_ERROR_INVALID_PARAMETER naming what (e.g. "model"). Requires the lock. */
int nnt_h_check(const void *h, nnt_hkind kind, const char *what);

/* ml_tensors_info_h */
typedef struct nnt_tinfo_entry {
  char *name;
  ml_tensor_type_e type;
  ml_tensor_dimension dim;
} nnt_tinfo_entry;

typedef struct nnt_tinfo {
  unsigned count;
  nnt_tinfo_entry t[ML_TENSOR_SIZE_LIMIT];
} nnt_tinfo;

/* ml_tensors_data_h: one buffer per tensor of its own copy of the info. */
typedef struct nnt_tdata {
  nnt_tinfo info;
  void *buf[ML_TENSOR_SIZE_LIMIT];
  size_t size[ML_TENSOR_SIZE_LIMIT];
} nnt_tdata;

/* Bytes of one element of a type (0 for UNKNOWN). */
size_t nnt_tensor_type_size(ml_tensor_type_e type);
/* Bytes of entry i (product of the dimensions up to the first 0);
 * SIZE_MAX when the product overflows. */
size_t nnt_tinfo_entry_bytes(const nnt_tinfo_entry *t);
/* Create registered handles for the API's own results, under the lock.
 * nnt_tinfo_new: count float32 tensors with dims given as b:c:h:w. */
int nnt_tinfo_new_locked(unsigned count, const unsigned (*bchw)[4], nnt_tinfo **out);
int nnt_tdata_new_locked(const nnt_tinfo *info, nnt_tdata **out);
void nnt_tinfo_free_locked(nnt_tinfo *info);
void nnt_tdata_free_locked(nnt_tdata *data);

#endif
