/* Reading and writing tensor memory from the host's side, for code outside
 * a backend (weight files, checks, dumps, the C API): each helper uses the
 * mapped view (nnt_tensor_host) when the tensor's buffer is host memory and
 * otherwise stages the values through nnt_tensor_get/set in chunks of
 * NNT_STAGE_FLOATS, so no such code dereferences a tensor's `data`. */
#ifndef NNT_TENSOR_HOST_H
#define NNT_TENSOR_HOST_H

#include <stdio.h>
#include "nntrainer/compute/backend.h"

/* Floats staged at once on the host (8 KiB). */
#define NNT_STAGE_FLOATS 2048

/* The first value of t that is NaN or infinite: *at its index (the
 * tensor's length when every value is finite) and *v the value. NNT_OK or
 * the buffer's error. */
int nnt_tensor_find_nonfinite(const nnt_tensor *t, size_t *at, float *v, nnt_err *e);
/* Append the tensor's values to f as little-endian float32. NNT_OK or the
 * buffer's error; a write the stream refuses stops it early with the
 * stream's error flag set (ferror), for the caller to report. */
int nnt_tensor_fwrite(FILE *f, const nnt_tensor *t, nnt_err *e);

#endif
