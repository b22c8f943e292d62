/* CPU kernels of the sequence layers: rows of a table by index (embedding)
 * and their adjoint, layer normalization, the sinusoid table of
 * positional_encoding, and division. */
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

int nnt_cpu_ln_fwd(const struct nnt_kernels *self, size_t rows, size_t cols, const float *x,
                   const float *gamma, const float *beta, float eps, float *mean, float *invstd,
                   float *y) {
  (void)self;
  for (size_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    float mu = (float)(nnt_cpu_dsum(xr, cols) / (double)cols);
    double v = 0;
    for (size_t c = 0; c < cols; c++) {
      double d = (double)xr[c] - mu;
      v += d * d;
    }
    float is = (float)(1.0 / sqrt(v / (double)cols + eps));
    if (mean)
      mean[r] = mu;
    if (invstd)
      invstd[r] = is;
    for (size_t c = 0; c < cols; c++)
      yr[c] = (xr[c] - mu) * is * gamma[c] + beta[c];
  }
  return NNT_OK;
}

int nnt_cpu_ln_bwd(const struct nnt_kernels *self, size_t rows, size_t cols, const float *x,
                   const float *dy, const float *mean, const float *invstd, const float *gamma,
                   float *dx, float *dgamma, float *dbeta) {
  (void)self;
  if (dgamma || dbeta)
    for (size_t c = 0; c < cols; c++) {
      double sg = 0, sb = 0;
      for (size_t r = 0; r < rows; r++) {
        float d = dy[r * cols + c];
        sg += (double)d * ((x[r * cols + c] - mean[r]) * invstd[r]);
        sb += d;
      }
      if (dgamma)
        dgamma[c] = (float)sg;
      if (dbeta)
        dbeta[c] = (float)sb;
    }
  if (!dx)
    return NNT_OK;
  for (size_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols, *dr = dy + r * cols;
    float mu = mean[r], is = invstd[r];
    double s1 = 0, s2 = 0;
    for (size_t c = 0; c < cols; c++) {
      float g = dr[c] * gamma[c];
      s1 += g;
      s2 += (double)g * ((xr[c] - mu) * is);
    }
    float m1 = (float)(s1 / (double)cols), m2 = (float)(s2 / (double)cols);
    for (size_t c = 0; c < cols; c++) {
      float g = dr[c] * gamma[c], xh = (xr[c] - mu) * is;
      dx[r * cols + c] = is * (g - m1 - xh * m2);
    }
  }
  return NNT_OK;
}

int nnt_cpu_pos_encoding(const struct nnt_kernels *self, size_t t, size_t d, float *table) {
  (void)self;
  for (size_t i = 0; i < t; i++)
    for (size_t j = 0; j < d; j++) {
      size_t jj = j >> 1 << 1;
      float a = (float)i / powf(10000.0f, (float)jj / (float)d);
      table[i * d + j] = j & 1 ? cosf(a) : sinf(a);
    }
  return NNT_OK;
}

int nnt_cpu_div(const struct nnt_kernels *self, size_t n, const float *a, const float *b,
                float *y) {
  (void)self;
  for (size_t i = 0; i < n; i++)
    y[i] = a[i] / b[i];
  return NNT_OK;
}
