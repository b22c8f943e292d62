/* Host-side helpers over tensor memory (tensor_host.h): the mapped view
 * where the buffer is host memory, staged get/set in bounded chunks
 * otherwise. */
#include "nntrainer/tensor_host.h"

#include <math.h>
#include <string.h>

#include "nntrainer/model_impl.h"

int nnt_tensor_find_nonfinite(const nnt_tensor *t, size_t *at, float *v, nnt_err *e) {
  size_t n = nnt_tensor_len(t);
  const float *h = nnt_tensor_host(t);
  *at = n;
  *v = 0;
  if (h) {
    size_t k = nnt_first_nonfinite(h, n);
    if (k < n)
      *at = k, *v = h[k];
    return NNT_OK;
  }
  float stage[NNT_STAGE_FLOATS];
  for (size_t i = 0; i < n; i += NNT_STAGE_FLOATS) {
    size_t c = n - i < NNT_STAGE_FLOATS ? n - i : NNT_STAGE_FLOATS;
    int rc = nnt_tensor_get(t, i, stage, c, e);
    if (rc)
      return rc;
    size_t k = nnt_first_nonfinite(stage, c);
    if (k < c) {
      *at = i + k, *v = stage[k];
      return NNT_OK;
    }
  }
  return NNT_OK;
}

static void to_le(float *p, size_t n) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  uint32_t *u = (uint32_t *)(void *)p;
  for (size_t i = 0; i < n; i++)
    u[i] = __builtin_bswap32(u[i]);
#else
  (void)p, (void)n;
#endif
}

int nnt_tensor_fwrite(FILE *f, const nnt_tensor *t, nnt_err *e) {
  size_t n = nnt_tensor_len(t);
  const float *h = nnt_tensor_host(t);
#if !(defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)
  if (h) { /* little-endian host memory goes out as it is */
    fwrite(h, sizeof(float), n, f);
    return NNT_OK;
  }
#endif
  float stage[NNT_STAGE_FLOATS];
  for (size_t i = 0; i < n; i += NNT_STAGE_FLOATS) {
    size_t c = n - i < NNT_STAGE_FLOATS ? n - i : NNT_STAGE_FLOATS;
    int rc = h ? (memcpy(stage, h + i, c * sizeof(float)), NNT_OK)
               : nnt_tensor_get(t, i, stage, c, e);
    if (rc)
      return rc;
    to_le(stage, c);
    if (fwrite(stage, sizeof(float), c, f) != c)
      return NNT_OK;
  }
  return NNT_OK;
}
