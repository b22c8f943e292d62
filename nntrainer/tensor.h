/* Tensor shapes (NNTrainer's b:c:h:w) and tensors. Tensors never own memory:
 * `data` points into a pool owned by the manager or a weight pool. */
#ifndef NNT_TENSOR_H
#define NNT_TENSOR_H

#include <stddef.h>
#include "nntrainer/common.h"

typedef struct nnt_dim {
  unsigned b, c, h, w;
} nnt_dim;

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
int nnt_dim_eq(nnt_dim a, nnt_dim b);
/* Parse "w", "h:w", "c:h:w" or "b:c:h:w" (missing leading axes are 1).
 * Every value must be a positive integer. */
int nnt_dim_parse(const char *key, const char *s, nnt_dim *out, nnt_err *e);
/* Format as "b:c:h:w" into buf (at least 64 bytes); returns buf. */
char *nnt_dim_str(nnt_dim d, char *buf, size_t n);

typedef struct nnt_tensor {
  nnt_dim dim;
  float *data;
} nnt_tensor;

static inline size_t nnt_tensor_len(const nnt_tensor *t) { return nnt_dim_len(t->dim); }

#endif
