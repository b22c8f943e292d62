/* The Tizen ML common API subset of ml-api-common.h: tensors information and
 * tensors data handles, and the helpers the rest of the C API builds its
 * results with.
 *
 * Every public function takes the API lock for its whole body and checks its
 * handle against the registry first, so a NULL, destroyed or foreign handle,
 * or one of the wrong kind, is refused with ML_ERROR_INVALID_PARAMETER
 * without being dereferenced. Every error records a message for ml_error()
 * naming the function and the argument at fault; success leaves it alone.
 * Allocation goes through nnt_calloc/nnt_strdup so tests can make it fail. */
#include "api/src/api_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define INVAL ML_ERROR_INVALID_PARAMETER

/* ---- helpers for the rest of the API ---- */

size_t nnt_tensor_type_size(ml_tensor_type_e type) {
  switch (type) {
  case ML_TENSOR_TYPE_INT8:
  case ML_TENSOR_TYPE_UINT8:
    return 1;
  case ML_TENSOR_TYPE_INT16:
  case ML_TENSOR_TYPE_UINT16:
  case ML_TENSOR_TYPE_FLOAT16:
    return 2;
  case ML_TENSOR_TYPE_INT32:
  case ML_TENSOR_TYPE_UINT32:
  case ML_TENSOR_TYPE_FLOAT32:
    return 4;
  case ML_TENSOR_TYPE_FLOAT64:
  case ML_TENSOR_TYPE_INT64:
  case ML_TENSOR_TYPE_UINT64:
    return 8;
  default:
    return 0;
  }
}

/* Element size times the product of the dimensions up to the first 0; 0 when
 * dim[0] is 0 or the type is unknown; SIZE_MAX when the product overflows. */
size_t nnt_tinfo_entry_bytes(const nnt_tinfo_entry *t) {
  size_t n = nnt_tensor_type_size(t->type);
  if (!n || !t->dim[0])
    return 0;
  for (unsigned r = 0; r < ML_TENSOR_RANK_LIMIT && t->dim[r]; r++) {
    if (n > SIZE_MAX / t->dim[r])
      return SIZE_MAX;
    n *= t->dim[r];
  }
  return n;
}

static void entry_reset(nnt_tinfo_entry *t) {
  t->name = NULL;
  t->type = ML_TENSOR_TYPE_UNKNOWN;
  memset(t->dim, 0, sizeof t->dim);
}

static void tinfo_init(nnt_tinfo *info) {
  info->count = 0;
  for (unsigned i = 0; i < ML_TENSOR_SIZE_LIMIT; i++)
    entry_reset(&info->t[i]);
}

static void tinfo_free_names(nnt_tinfo *info) {
  for (unsigned i = 0; i < ML_TENSOR_SIZE_LIMIT; i++) {
    nnt_free(info->t[i].name);
    info->t[i].name = NULL;
  }
}

/* dst = a deep copy of src's first count entries, the rest reset. dst is
 * overwritten without being freed; on failure it holds nothing to free. */
static int tinfo_copy(nnt_tinfo *dst, const nnt_tinfo *src) {
  tinfo_init(dst);
  for (unsigned i = 0; i < src->count; i++) {
    dst->t[i].type = src->t[i].type;
    memcpy(dst->t[i].dim, src->t[i].dim, sizeof dst->t[i].dim);
    if (src->t[i].name && !(dst->t[i].name = nnt_strdup(src->t[i].name))) {
      tinfo_free_names(dst);
      return ML_ERROR_OUT_OF_MEMORY;
    }
  }
  dst->count = src->count;
  return ML_ERROR_NONE;
}

static int tinfo_alloc_locked(const char *fn, nnt_tinfo **out) {
  nnt_tinfo *info = nnt_calloc(1, sizeof *info);
  if (!info)
    return nnt_api_fail(ML_ERROR_OUT_OF_MEMORY, "%s: cannot allocate a tensors info", fn);
  tinfo_init(info);
  if (nnt_h_add(info, NNT_H_TENSORS_INFO)) {
    nnt_free(info);
    return nnt_api_fail(ML_ERROR_OUT_OF_MEMORY, "%s: out of memory registering a tensors info",
                        fn);
  }
  *out = info;
  return ML_ERROR_NONE;
}

int nnt_tinfo_new_locked(unsigned count, const unsigned (*bchw)[4], nnt_tinfo **out) {
  if (!out)
    return nnt_api_fail(INVAL, "%s: out is NULL", __func__);
  if (count > ML_TENSOR_SIZE_LIMIT)
    return nnt_api_fail(INVAL, "%s: count %u is more than ML_TENSOR_SIZE_LIMIT (%d)", __func__,
                        count, ML_TENSOR_SIZE_LIMIT);
  if (count && !bchw)
    return nnt_api_fail(INVAL, "%s: bchw is NULL", __func__);
  nnt_tinfo *info = NULL;
  int rc = tinfo_alloc_locked(__func__, &info);
  if (rc)
    return rc;
  info->count = count;
  for (unsigned i = 0; i < count; i++) {
    info->t[i].type = ML_TENSOR_TYPE_FLOAT32;
    for (unsigned r = 0; r < 4; r++)
      info->t[i].dim[r] = bchw[i][r];
  }
  *out = info;
  return ML_ERROR_NONE;
}

void nnt_tinfo_free_locked(nnt_tinfo *info) {
  if (!info)
    return;
  nnt_h_remove(info);
  tinfo_free_names(info);
  nnt_free(info);
}

void nnt_tdata_free_locked(nnt_tdata *data) {
  if (!data)
    return;
  nnt_h_remove(data);
  for (unsigned i = 0; i < ML_TENSOR_SIZE_LIMIT; i++)
    nnt_free(data->buf[i]);
  tinfo_free_names(&data->info);
  nnt_free(data);
}

/* The work of nnt_tdata_new_locked with fn naming the caller in messages. */
static int tdata_new_locked(const char *fn, const nnt_tinfo *info, nnt_tdata **out) {
  for (unsigned i = 0; i < info->count; i++)
    if (nnt_tinfo_entry_bytes(&info->t[i]) == SIZE_MAX)
      return nnt_api_fail(INVAL, "%s: info: the size of tensor %u overflows size_t", fn, i);
  nnt_tdata *d = nnt_calloc(1, sizeof *d);
  if (!d)
    return nnt_api_fail(ML_ERROR_OUT_OF_MEMORY, "%s: cannot allocate a tensors data", fn);
  if (tinfo_copy(&d->info, info)) {
    nnt_free(d);
    return nnt_api_fail(ML_ERROR_OUT_OF_MEMORY, "%s: out of memory copying the tensor names",
                        fn);
  }
  for (unsigned i = 0; i < info->count; i++) {
    d->size[i] = nnt_tinfo_entry_bytes(&info->t[i]);
    if (!(d->buf[i] = nnt_calloc(1, d->size[i]))) {
      size_t size = d->size[i];
      for (unsigned k = 0; k < i; k++)
        nnt_free(d->buf[k]);
      tinfo_free_names(&d->info);
      nnt_free(d);
      return nnt_api_fail(ML_ERROR_OUT_OF_MEMORY,
                          "%s: cannot allocate %zu bytes for tensor %u", fn, size, i);
    }
  }
  if (nnt_h_add(d, NNT_H_TENSORS_DATA)) {
    for (unsigned i = 0; i < info->count; i++)
      nnt_free(d->buf[i]);
    tinfo_free_names(&d->info);
    nnt_free(d);
    return nnt_api_fail(ML_ERROR_OUT_OF_MEMORY, "%s: out of memory registering a tensors data",
                        fn);
  }
  *out = d;
  return ML_ERROR_NONE;
}

int nnt_tdata_new_locked(const nnt_tinfo *info, nnt_tdata **out) {
  if (!info)
    return nnt_api_fail(INVAL, "%s: info is NULL", __func__);
  if (!out)
    return nnt_api_fail(INVAL, "%s: out is NULL", __func__);
  return tdata_new_locked(__func__, info, out);
}

/* ---- the public API ---- */

/* A known element type (FLOAT16 included: it cannot be set here, but an info
 * built elsewhere could hold it). Compared as int: the enum may be unsigned
 * and callers can pass any int. */
static int type_known(ml_tensor_type_e type) {
  return (int)type >= 0 && (int)type < (int)ML_TENSOR_TYPE_UNKNOWN;
}

/* Run body with the lock held; body assigns rc and may not return. */
#define LOCKED(body)                                                                       \
  do {                                                                                     \
    nnt_api_lock();                                                                        \
    body;                                                                                  \
    nnt_api_unlock();                                                                      \
  } while (0)

/* Refuse h unless it is a live handle of kind, naming "fn: arg" in the
 * message (built only on failure). The lock is held. */
static int check_h(const char *fn, const char *arg, const void *h, nnt_hkind kind) {
  if (h && nnt_h_kind(h) == kind)
    return ML_ERROR_NONE;
  char what[128];
  snprintf(what, sizeof what, "%s: %s", fn, arg);
  return nnt_h_check(h, kind, what);
}

static int check_info(const char *fn, const char *arg, const void *h) {
  return check_h(fn, arg, h, NNT_H_TENSORS_INFO);
}

/* Check the handle (first) and the index; the lock is held. */
static int info_at(const char *fn, const void *h, unsigned index, nnt_tinfo **out) {
  int rc = check_info(fn, "info", h);
  if (rc)
    return rc;
  nnt_tinfo *info = (nnt_tinfo *)h;
  if (index >= info->count)
    return nnt_api_fail(INVAL, "%s: index %u is out of range (the info holds %u tensor%s)", fn,
                        index, info->count, info->count == 1 ? "" : "s");
  *out = info;
  return ML_ERROR_NONE;
}

static int data_at(const char *fn, const void *h, unsigned index, nnt_tdata **out) {
  int rc = check_h(fn, "data", h, NNT_H_TENSORS_DATA);
  if (rc)
    return rc;
  nnt_tdata *d = (nnt_tdata *)h;
  if (index >= d->info.count)
    return nnt_api_fail(INVAL, "%s: index %u is out of range (the data holds %u tensor%s)", fn,
                        index, d->info.count, d->info.count == 1 ? "" : "s");
  *out = d;
  return ML_ERROR_NONE;
}

static int info_create(const char *fn, ml_tensors_info_h *info) {
  int rc;
  nnt_tinfo *t = NULL;
  nnt_api_lock();
  if (!info)
    rc = nnt_api_fail(INVAL, "%s: info (the pointer to return the handle in) is NULL", fn);
  else
    rc = tinfo_alloc_locked(fn, &t);
  nnt_api_unlock();
  if (!rc)
    *info = t;
  return rc;
}

int ml_tensors_info_create(ml_tensors_info_h *info) { return info_create(__func__, info); }

/* Every info here has ML_TENSOR_RANK_LIMIT ranks, so extended is the same. */
int ml_tensors_info_create_extended(ml_tensors_info_h *info) {
  return info_create(__func__, info);
}

int ml_tensors_info_destroy(ml_tensors_info_h info) {
  int rc;
  LOCKED({
    if (!(rc = check_info(__func__, "info", info)))
      nnt_tinfo_free_locked(info);
  });
  return rc;
}

static int info_validate_locked(const char *fn, const void *h, bool *valid) {
  int rc = check_info(fn, "info", h);
  if (rc)
    return rc;
  if (!valid)
    return nnt_api_fail(INVAL, "%s: valid is NULL", fn);
  const nnt_tinfo *info = h;
  bool ok = info->count > 0;
  for (unsigned i = 0; ok && i < info->count; i++)
    ok = type_known(info->t[i].type) && info->t[i].dim[0] != 0;
  *valid = ok;
  return ML_ERROR_NONE;
}

int ml_tensors_info_validate(const ml_tensors_info_h info, bool *valid) {
  int rc;
  LOCKED(rc = info_validate_locked(__func__, info, valid));
  return rc;
}

static int info_clone_locked(const char *fn, void *dest, const void *src) {
  int rc = check_info(fn, "dest", dest);
  if (rc || (rc = check_info(fn, "src", src)))
    return rc;
  if (dest == src)
    return ML_ERROR_NONE;
  nnt_tinfo tmp;
  if (tinfo_copy(&tmp, src))
    return nnt_api_fail(ML_ERROR_OUT_OF_MEMORY,
                        "%s: out of memory copying the tensor names of src", fn);
  nnt_tinfo *d = dest;
  tinfo_free_names(d);
  *d = tmp;
  return ML_ERROR_NONE;
}

int ml_tensors_info_clone(ml_tensors_info_h dest, const ml_tensors_info_h src) {
  int rc;
  LOCKED(rc = info_clone_locked(__func__, dest, src));
  return rc;
}

static int info_set_count_locked(const char *fn, void *h, unsigned count) {
  int rc = check_info(fn, "info", h);
  if (rc)
    return rc;
  if (count < 1 || count > ML_TENSOR_SIZE_LIMIT)
    return nnt_api_fail(INVAL, "%s: count %u is out of range (1 to %d)", fn, count,
                        ML_TENSOR_SIZE_LIMIT);
  ((nnt_tinfo *)h)->count = count;
  return ML_ERROR_NONE;
}

int ml_tensors_info_set_count(ml_tensors_info_h info, unsigned int count) {
  int rc;
  LOCKED(rc = info_set_count_locked(__func__, info, count));
  return rc;
}

static int info_get_count_locked(const char *fn, void *h, unsigned *count) {
  int rc = check_info(fn, "info", h);
  if (rc)
    return rc;
  if (!count)
    return nnt_api_fail(INVAL, "%s: count is NULL", fn);
  *count = ((nnt_tinfo *)h)->count;
  return ML_ERROR_NONE;
}

int ml_tensors_info_get_count(ml_tensors_info_h info, unsigned int *count) {
  int rc;
  LOCKED(rc = info_get_count_locked(__func__, info, count));
  return rc;
}

static int info_set_name_locked(const char *fn, void *h, unsigned index, const char *name) {
  nnt_tinfo *info = NULL;
  int rc = info_at(fn, h, index, &info);
  if (rc)
    return rc;
  char *copy = NULL;
  if (name && !(copy = nnt_strdup(name)))
    return nnt_api_fail(ML_ERROR_OUT_OF_MEMORY, "%s: out of memory copying name \"%.64s\"", fn,
                        name);
  nnt_free(info->t[index].name);
  info->t[index].name = copy;
  return ML_ERROR_NONE;
}

int ml_tensors_info_set_tensor_name(ml_tensors_info_h info, unsigned int index,
                                    const char *name) {
  int rc;
  LOCKED(rc = info_set_name_locked(__func__, info, index, name));
  return rc;
}

static int info_get_name_locked(const char *fn, void *h, unsigned index, char **name) {
  nnt_tinfo *info = NULL;
  int rc = info_at(fn, h, index, &info);
  if (rc)
    return rc;
  if (!name)
    return nnt_api_fail(INVAL, "%s: name is NULL", fn);
  char *copy = NULL;
  if (info->t[index].name && !(copy = nnt_strdup(info->t[index].name)))
    return nnt_api_fail(ML_ERROR_OUT_OF_MEMORY,
                        "%s: out of memory copying the name of tensor %u", fn, index);
  *name = copy;
  return ML_ERROR_NONE;
}

int ml_tensors_info_get_tensor_name(ml_tensors_info_h info, unsigned int index, char **name) {
  int rc;
  LOCKED(rc = info_get_name_locked(__func__, info, index, name));
  return rc;
}

static int info_set_type_locked(const char *fn, void *h, unsigned index, ml_tensor_type_e type) {
  nnt_tinfo *info = NULL;
  int rc = info_at(fn, h, index, &info);
  if (rc)
    return rc;
  if (!type_known(type))
    return nnt_api_fail(INVAL, "%s: type %d is not a tensor type (0 to %d)", fn, (int)type,
                        (int)ML_TENSOR_TYPE_UNKNOWN - 1);
  if (type == ML_TENSOR_TYPE_FLOAT16)
    return nnt_api_fail(ML_ERROR_NOT_SUPPORTED,
                        "%s: type ML_TENSOR_TYPE_FLOAT16 is not supported on this platform", fn);
  info->t[index].type = type;
  return ML_ERROR_NONE;
}

int ml_tensors_info_set_tensor_type(ml_tensors_info_h info, unsigned int index,
                                    const ml_tensor_type_e type) {
  int rc;
  LOCKED(rc = info_set_type_locked(__func__, info, index, type));
  return rc;
}

static int info_get_type_locked(const char *fn, void *h, unsigned index, ml_tensor_type_e *type) {
  nnt_tinfo *info = NULL;
  int rc = info_at(fn, h, index, &info);
  if (rc)
    return rc;
  if (!type)
    return nnt_api_fail(INVAL, "%s: type is NULL", fn);
  *type = info->t[index].type;
  return ML_ERROR_NONE;
}

int ml_tensors_info_get_tensor_type(ml_tensors_info_h info, unsigned int index,
                                    ml_tensor_type_e *type) {
  int rc;
  LOCKED(rc = info_get_type_locked(__func__, info, index, type));
  return rc;
}

static int info_set_dim_locked(const char *fn, void *h, unsigned index, const unsigned *dim) {
  nnt_tinfo *info = NULL;
  int rc = info_at(fn, h, index, &info);
  if (rc)
    return rc;
  if (!dim)
    return nnt_api_fail(INVAL, "%s: dimension is NULL", fn);
  memcpy(info->t[index].dim, dim, sizeof info->t[index].dim);
  return ML_ERROR_NONE;
}

int ml_tensors_info_set_tensor_dimension(ml_tensors_info_h info, unsigned int index,
                                         const ml_tensor_dimension dimension) {
  int rc;
  LOCKED(rc = info_set_dim_locked(__func__, info, index, dimension));
  return rc;
}

static int info_get_dim_locked(const char *fn, void *h, unsigned index, unsigned *dim) {
  nnt_tinfo *info = NULL;
  int rc = info_at(fn, h, index, &info);
  if (rc)
    return rc;
  if (!dim)
    return nnt_api_fail(INVAL, "%s: dimension is NULL", fn);
  memcpy(dim, info->t[index].dim, sizeof info->t[index].dim);
  return ML_ERROR_NONE;
}

int ml_tensors_info_get_tensor_dimension(ml_tensors_info_h info, unsigned int index,
                                         ml_tensor_dimension dimension) {
  int rc;
  LOCKED(rc = info_get_dim_locked(__func__, info, index, dimension));
  return rc;
}

static int info_get_size_locked(const char *fn, void *h, int index, size_t *data_size) {
  int rc = check_info(fn, "info", h);
  if (rc)
    return rc;
  const nnt_tinfo *info = h;
  if (index < -1 || (index >= 0 && (unsigned)index >= info->count))
    return nnt_api_fail(INVAL,
                        "%s: index %d is out of range (-1 for all, or 0 to %d: the info "
                        "holds %u tensor%s)",
                        fn, index, (int)info->count - 1, info->count,
                        info->count == 1 ? "" : "s");
  if (!data_size)
    return nnt_api_fail(INVAL, "%s: data_size is NULL", fn);
  unsigned lo = index < 0 ? 0 : (unsigned)index;
  unsigned hi = index < 0 ? info->count : lo + 1;
  size_t sum = 0;
  for (unsigned i = lo; i < hi; i++) {
    size_t n = nnt_tinfo_entry_bytes(&info->t[i]);
    if (n == SIZE_MAX || sum > SIZE_MAX - 1 - n)
      return nnt_api_fail(INVAL, "%s: the size of tensor %u overflows size_t", fn, i);
    sum += n;
  }
  *data_size = sum;
  return ML_ERROR_NONE;
}

int ml_tensors_info_get_tensor_size(ml_tensors_info_h info, int index, size_t *data_size) {
  int rc;
  LOCKED(rc = info_get_size_locked(__func__, info, index, data_size));
  return rc;
}

static int data_create_locked(const char *fn, const void *h, nnt_tdata **out) {
  int rc = check_info(fn, "info", h);
  if (rc)
    return rc;
  if (!out)
    return nnt_api_fail(INVAL, "%s: data (the pointer to return the handle in) is NULL", fn);
  const nnt_tinfo *info = h;
  if (!info->count)
    return nnt_api_fail(INVAL, "%s: info is not valid: it holds no tensors", fn);
  for (unsigned i = 0; i < info->count; i++) {
    if (!type_known(info->t[i].type))
      return nnt_api_fail(INVAL, "%s: info is not valid: tensor %u has no type", fn, i);
    if (!info->t[i].dim[0])
      return nnt_api_fail(INVAL, "%s: info is not valid: tensor %u has no dimension", fn, i);
  }
  return tdata_new_locked(fn, info, out);
}

int ml_tensors_data_create(const ml_tensors_info_h info, ml_tensors_data_h *data) {
  int rc;
  nnt_tdata *d = NULL;
  LOCKED(rc = data_create_locked(__func__, info, data ? &d : NULL));
  if (!rc)
    *data = d;
  return rc;
}

int ml_tensors_data_destroy(ml_tensors_data_h data) {
  int rc;
  LOCKED({
    if (!(rc = check_h(__func__, "data", data, NNT_H_TENSORS_DATA)))
      nnt_tdata_free_locked(data);
  });
  return rc;
}

static int data_get_locked(const char *fn, void *h, unsigned index, void **raw, size_t *size) {
  nnt_tdata *d = NULL;
  int rc = data_at(fn, h, index, &d);
  if (rc)
    return rc;
  if (!raw)
    return nnt_api_fail(INVAL, "%s: raw_data is NULL", fn);
  if (!size)
    return nnt_api_fail(INVAL, "%s: data_size is NULL", fn);
  *raw = d->buf[index];
  *size = d->size[index];
  return ML_ERROR_NONE;
}

int ml_tensors_data_get_tensor_data(ml_tensors_data_h data, unsigned int index, void **raw_data,
                                    size_t *data_size) {
  int rc;
  LOCKED(rc = data_get_locked(__func__, data, index, raw_data, data_size));
  return rc;
}

static int data_set_locked(const char *fn, void *h, unsigned index, const void *raw,
                           size_t size) {
  nnt_tdata *d = NULL;
  int rc = data_at(fn, h, index, &d);
  if (rc)
    return rc;
  if (!raw)
    return nnt_api_fail(INVAL, "%s: raw_data is NULL", fn);
  if (size == 0 || size > d->size[index])
    return nnt_api_fail(INVAL, "%s: data_size %zu is out of range (1 to %zu, tensor %u's size)",
                        fn, size, d->size[index], index);
  memcpy(d->buf[index], raw, size);
  return ML_ERROR_NONE;
}

int ml_tensors_data_set_tensor_data(ml_tensors_data_h data, unsigned int index,
                                    const void *raw_data, const size_t data_size) {
  int rc;
  LOCKED(rc = data_set_locked(__func__, data, index, raw_data, data_size));
  return rc;
}
