/* CPU batch-normalization kernels. */
#include "nntrainer/compute/cpu_impl.h"

#include <math.h>
#include <stdlib.h>

void nnt_cpu_bn_fwd_train(size_t outer, size_t ch, size_t inner, const float *x,
                          const float *gamma, const float *beta, float eps, float *mean,
                          float *var, float *invstd, float *xhat, float *y) {
  double n = (double)outer * inner;
  for (size_t c = 0; c < ch; c++) {
    double s = 0, s2 = 0;
    for (size_t o = 0; o < outer; o++) {
      const float *p = x + (o * ch + c) * inner;
      for (size_t i = 0; i < inner; i++)
        s += p[i];
    }
    double mu = s / n;
    for (size_t o = 0; o < outer; o++) {
      const float *p = x + (o * ch + c) * inner;
      for (size_t i = 0; i < inner; i++)
        s2 += (p[i] - mu) * (p[i] - mu);
    }
    double v = s2 / n;
    float is = (float)(1.0 / sqrt(v + eps));
    mean[c] = (float)mu;
    var[c] = (float)v;
    invstd[c] = is;
    float g = gamma[c], b = beta[c], m = (float)mu;
    for (size_t o = 0; o < outer; o++) {
      size_t off = (o * ch + c) * inner;
      for (size_t i = 0; i < inner; i++) {
        float h = (x[off + i] - m) * is;
        xhat[off + i] = h;
        y[off + i] = g * h + b;
      }
    }
  }
}

void nnt_cpu_bn_fwd_infer(size_t outer, size_t ch, size_t inner, const float *x,
                          const float *mean, const float *var, const float *gamma,
                          const float *beta, float eps, float *y) {
  for (size_t c = 0; c < ch; c++) {
    float is = 1.0f / sqrtf(var[c] + eps), g = gamma[c] * is, b = beta[c] - mean[c] * g;
    for (size_t o = 0; o < outer; o++) {
      size_t off = (o * ch + c) * inner;
      for (size_t i = 0; i < inner; i++)
        y[off + i] = x[off + i] * g + b;
    }
  }
}

void nnt_cpu_bn_bwd(size_t outer, size_t ch, size_t inner, const float *dy,
                    const float *xhat, const float *invstd, const float *gamma, float *dx,
                    float *dgamma, float *dbeta) {
  double n = (double)outer * inner;
  for (size_t c = 0; c < ch; c++) {
    double sdy = 0, sdyx = 0;
    for (size_t o = 0; o < outer; o++) {
      size_t off = (o * ch + c) * inner;
      for (size_t i = 0; i < inner; i++) {
        sdy += dy[off + i];
        sdyx += (double)dy[off + i] * xhat[off + i];
      }
    }
    if (dgamma)
      dgamma[c] = (float)sdyx;
    if (dbeta)
      dbeta[c] = (float)sdy;
    if (!dx)
      continue;
    float k = gamma[c] * invstd[c], mdy = (float)(sdy / n), mdyx = (float)(sdyx / n);
    for (size_t o = 0; o < outer; o++) {
      size_t off = (o * ch + c) * inner;
      for (size_t i = 0; i < inner; i++)
        dx[off + i] = k * (dy[off + i] - mdy - xhat[off + i] * mdyx);
    }
  }
}
