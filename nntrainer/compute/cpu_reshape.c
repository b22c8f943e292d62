/* CPU kernels that move values: strided copy, permute and nearest
 * upsampling. */
#include "nntrainer/compute/cpu_impl.h"

#include <string.h>

int nnt_cpu_copy2d(const struct nnt_kernels *self, size_t rows, size_t cols, const float *x,
                   size_t ldx, float *y, size_t ldy) {
  (void)self;
  if (rows > 1 && (cols > ldx || cols > ldy))
    return NNT_ERR_INVAL;
  for (size_t r = 0; r < rows && cols; r++)
    memcpy(y + r * ldy, x + r * ldx, cols * sizeof *x);
  return NNT_OK;
}

int nnt_cpu_permute3(const struct nnt_kernels *self, size_t b, const unsigned d[3],
                     const unsigned perm[3], const float *x, float *y) {
  (void)self;
  size_t in_stride[3] = {(size_t)d[1] * d[2], d[2], 1};
  size_t od[3] = {d[perm[0]], d[perm[1]], d[perm[2]]};
  size_t s0 = in_stride[perm[0]], s1 = in_stride[perm[1]], s2 = in_stride[perm[2]];
  size_t len = (size_t)d[0] * d[1] * d[2];
  for (size_t n = 0; n < b; n++) {
    const float *xb = x + n * len;
    float *yb = y + n * len;
    for (size_t i = 0; i < od[0]; i++)
      for (size_t j = 0; j < od[1]; j++)
        for (size_t k = 0; k < od[2]; k++)
          *yb++ = xb[i * s0 + j * s1 + k * s2];
  }
  return NNT_OK;
}

int nnt_cpu_upsample_nearest_fwd(const struct nnt_kernels *self, size_t rows, size_t h, size_t w,
                                 size_t kh, size_t kw, const float *x, float *y) {
  (void)self;
  size_t ow = w * kw;
  for (size_t r = 0; r < rows; r++)
    for (size_t i = 0; i < h * kh; i++) {
      const float *xr = x + (r * h + i / kh) * w;
      float *yr = y + (r * h * kh + i) * ow;
      for (size_t j = 0; j < ow; j++)
        yr[j] = xr[j / kw];
    }
  return NNT_OK;
}

int nnt_cpu_upsample_nearest_bwd(const struct nnt_kernels *self, size_t rows, size_t h, size_t w,
                                 size_t kh, size_t kw, const float *dy, float *dx) {
  (void)self;
  size_t ow = w * kw;
  for (size_t r = 0; r < rows; r++)
    for (size_t i = 0; i < h; i++)
      for (size_t j = 0; j < w; j++) {
        float s = 0;
        for (size_t a = 0; a < kh; a++)
          for (size_t c = 0; c < kw; c++)
            s += dy[(r * h * kh + i * kh + a) * ow + j * kw + c];
        dx[(r * h + i) * w + j] = s;
      }
  return NNT_OK;
}
