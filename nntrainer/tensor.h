/* Tensor shapes (NNTrainer's b:c:h:w) and tensors. Tensors never own memory:
 * `data` points into a pool owned by the manager or a weight pool. */
#ifndef NNT_TENSOR_H
#define NNT_TENSOR_H

#include <stddef.h>
#include <stdint.h>
#include "nntrainer/common.h"

/* Checked arithmetic for sizes that user values reach (shapes, window
 * geometry, weight and pool totals). Each returns 0 when the result fits
 * and is in *out, 1 when it overflows (then *out is unspecified). */
static inline int nnt_size_mul(size_t a, size_t b, size_t *out) {
  return __builtin_mul_overflow(a, b, out);
}
static inline int nnt_size_add(size_t a, size_t b, size_t *out) {
  return __builtin_add_overflow(a, b, out);
}
/* a * b as a shape axis (32 bits). */
static inline int nnt_axis_mul(uint64_t a, uint64_t b, unsigned *out) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r) || r > UINT32_MAX)
    return 1;
  *out = (unsigned)r;
  return 0;
}

/* The most bytes one tensor, pool or plan may take: PTRDIFF_MAX, so that
 * every byte of it can be addressed by pointer arithmetic. */
#define NNT_BYTES_MAX ((size_t)PTRDIFF_MAX)

typedef struct nnt_dim {
  unsigned b, c, h, w;
} nnt_dim;

/* Elements of d, unchecked: every shape of a compiled model has passed
 * nnt_dim_check, so these products fit; a shape straight from a user value
 * goes through nnt_dim_check first. */
static inline size_t nnt_dim_len(nnt_dim d) {
  return (size_t)d.b * d.c * d.h * d.w;
}
/* Elements of one batch item. */
static inline size_t nnt_dim_feature_len(nnt_dim d) {
  return (size_t)d.c * d.h * d.w;
}
static inline nnt_dim nnt_dim_make(unsigned b, unsigned c, unsigned h, unsigned w) {
  nnt_dim d = {b, c, h, w};
  return d;
}
/* The elements and bytes (float32) of d, checked: NNT_OK when no axis is 0
 * and the bytes are at most NNT_BYTES_MAX; otherwise NNT_ERR_INVAL with a
 * message "<what> <shape> ..." saying which. len or bytes may be NULL. */
int nnt_dim_check(nnt_dim d, const char *what, size_t *len, size_t *bytes, nnt_err *e);
int nnt_dim_eq(nnt_dim a, nnt_dim b);
/* Parse "w", "h:w", "c:h:w" or "b:c:h:w" (missing leading axes are 1).
 * Every value must be a positive integer. */
int nnt_dim_parse(const char *key, const char *s, nnt_dim *out, nnt_err *e);
/* Format as "b:c:h:w" into buf (at least 64 bytes); returns buf. */
char *nnt_dim_str(nnt_dim d, char *buf, size_t n);

struct nnt_buffer;

/* A tensor: a shape and where it lives. `data` is an address in the
 * buffer's address space (nntrainer/compute/backend.h): a host pointer only
 * when the buffer is host memory, so code outside a backend reaches the
 * values through nnt_tensor_set/get or the mapped view nnt_tensor_host.
 * buf is NULL for a tensor that is not bound (data NULL too). */
typedef struct nnt_tensor {
  nnt_dim dim;
  float *data;
  struct nnt_buffer *buf;
} nnt_tensor;

static inline size_t nnt_tensor_len(const nnt_tensor *t) { return nnt_dim_len(t->dim); }

#endif
