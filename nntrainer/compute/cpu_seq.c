/* CPU kernels of the sequence layers: rows of a table by index (embedding)
 * and their adjoint. */
#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/kernels.h"

#include <math.h>

/* The row a value names, or -1 when it is outside [0, n) or NaN. */
static long row_of(float v, size_t n) {
  if (!(v >= 0.0f) || !(v < (float)n)) /* NaN fails both */
    return -1;
  long i = (long)v; /* truncation, NNTrainer's cast */
  return (size_t)i < n ? i : -1;
}

int nnt_cpu_gather_rows(const struct nnt_kernels *self, size_t rows, size_t cols, size_t n,
                        const float *idx, const float *table, size_t mask, float *y) {
  (void)self;
  int rc = NNT_OK;
  for (size_t r = 0; r < rows; r++) {
    long i = row_of(idx[r], n);
    float *yr = y + r * cols;
    if (i < 0) {
      for (size_t c = 0; c < cols; c++)
        yr[c] = NAN;
      rc = NNT_ERR_INVAL;
    } else if ((size_t)i == mask) {
      for (size_t c = 0; c < cols; c++)
        yr[c] = 0.0f;
    } else {
      const float *t = table + (size_t)i * cols;
      for (size_t c = 0; c < cols; c++)
        yr[c] = t[c];
    }
  }
  return rc;
}

int nnt_cpu_scatter_add_rows(const struct nnt_kernels *self, size_t rows, size_t cols, size_t n,
                             const float *idx, const float *dy, size_t mask, float *dtable) {
  (void)self;
  for (size_t k = 0; k < n * cols; k++)
    dtable[k] = 0.0f;
  for (size_t r = 0; r < rows; r++) {
    long i = row_of(idx[r], n);
    if (i < 0 || (size_t)i == mask)
      continue;
    float *t = dtable + (size_t)i * cols;
    const float *d = dy + r * cols;
    for (size_t c = 0; c < cols; c++)
      t[c] += d[c];
  }
  return NNT_OK;
}
