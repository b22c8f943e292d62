/* CPU batch-normalization kernels. */
#include "nntrainer/compute/cpu_impl.h"

#include <math.h>
#include <stdlib.h>

static double dsum_sqdev(const float *p, size_t n, double mu) {
  double acc[NNT_LANES] = {0};
  size_t i = 0;
  for (; i + NNT_LANES <= n; i += NNT_LANES)
    for (int l = 0; l < NNT_LANES; l++) {
      double d = p[i + l] - mu;
      acc[l] += d * d;
    }
  for (; i < n; i++) {
    double d = p[i] - mu;
    acc[0] += d * d;
  }
  double s = 0;
  for (int l = 0; l < NNT_LANES; l++)
    s += acc[l];
  return s;
}

/* sum of dy and of dy * xhat. Two passes over the whole blocks: gcc
 * vectorizes each (float to double widening, 2 lanes per SSE2 register) but
 * not the loop that does both at once, which stayed scalar and made this
 * the slowest batch-norm loop; the second pass finds the data in cache. */
static void dsum_dy(const float *dy, const float *xh, size_t n, double *sdy, double *sdyx) {
  double a[NNT_LANES] = {0}, b[NNT_LANES] = {0};
  size_t i = 0;
  for (; i + NNT_LANES <= n; i += NNT_LANES)
    for (int l = 0; l < NNT_LANES; l++)
      a[l] += dy[i + l];
  for (size_t j = 0; j + NNT_LANES <= n; j += NNT_LANES)
    for (int l = 0; l < NNT_LANES; l++)
      b[l] += (double)dy[j + l] * xh[j + l];
  for (; i < n; i++) {
    a[0] += dy[i];
    b[0] += (double)dy[i] * xh[i];
  }
  for (int l = 0; l < NNT_LANES; l++) {
    *sdy += a[l];
    *sdyx += b[l];
  }
}

/* y of one element: bn_fwd_train and bn_affine share it, so that the
 * output recomputed from xhat is bitwise the first (C11: no contraction
 * into a fused multiply-add, -ffp-contract=off). */
static inline float bn_affine1(float g, float h, float b) { return g * h + b; }

/* An op's arguments, for its parts over channels [c0, c1) on the compute
 * threads (cpu_pool.c): every channel's sums and outputs are its own, so
 * a split over channels changes no result. */
typedef struct bn_job {
  size_t outer, ch, inner;
  const float *x, *gamma, *beta, *mean_in, *var_in, *dy, *xhat_in, *invstd_in;
  float eps;
  float *mean, *var, *invstd, *xhat, *y, *dx, *dgamma, *dbeta;
} bn_job;

/* Parts of at least this many values (a channel's outer * inner). */
#define BN_MIN_PART 16384

static size_t bn_min_channels(const bn_job *j) {
  size_t per = j->outer * j->inner;
  return per >= BN_MIN_PART ? 1 : (per ? BN_MIN_PART / per : BN_MIN_PART);
}

static void fwd_train_part(void *p, size_t c0, size_t c1) {
  const bn_job *j = p;
  size_t outer = j->outer, ch = j->ch, inner = j->inner;
  const float *x = j->x, *gamma = j->gamma, *beta = j->beta;
  float eps = j->eps, *mean = j->mean, *var = j->var, *invstd = j->invstd, *xhat = j->xhat;
  float *y = j->y;
  double n = (double)outer * inner;
  for (size_t c = c0; c < c1; c++) {
    double s = 0, s2 = 0;
    for (size_t o = 0; o < outer; o++)
      s += nnt_cpu_dsum(x + (o * ch + c) * inner, inner);
    double mu = s / n;
    for (size_t o = 0; o < outer; o++)
      s2 += dsum_sqdev(x + (o * ch + c) * inner, inner, mu);
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
        y[off + i] = bn_affine1(g, h, b);
      }
    }
  }
}

int nnt_cpu_bn_fwd_train(const struct nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                         const float *x, const float *gamma, const float *beta, float eps,
                         float *mean, float *var, float *invstd, float *xhat, float *y) {
  (void)self;
  bn_job j = {.outer = outer, .ch = ch, .inner = inner, .x = x, .gamma = gamma, .beta = beta,
              .eps = eps, .mean = mean, .var = var, .invstd = invstd, .xhat = xhat, .y = y};
  nnt_cpu_pool_for(ch, 1, bn_min_channels(&j), fwd_train_part, &j);
  return NNT_OK;
}

static void fwd_infer_part(void *p, size_t c0, size_t c1) {
  const bn_job *j = p;
  size_t outer = j->outer, ch = j->ch, inner = j->inner;
  const float *x = j->x, *gamma = j->gamma, *beta = j->beta, *mean = j->mean_in;
  const float *var = j->var_in;
  float eps = j->eps, *y = j->y;
  for (size_t c = c0; c < c1; c++) {
    float is = 1.0f / sqrtf(var[c] + eps), g = gamma[c] * is, b = beta[c] - mean[c] * g;
    for (size_t o = 0; o < outer; o++) {
      size_t off = (o * ch + c) * inner;
      for (size_t i = 0; i < inner; i++)
        y[off + i] = x[off + i] * g + b;
    }
  }
}

int nnt_cpu_bn_fwd_infer(const struct nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                         const float *x, const float *mean, const float *var, const float *gamma,
                         const float *beta, float eps, float *y) {
  (void)self;
  bn_job j = {.outer = outer, .ch = ch, .inner = inner, .x = x, .gamma = gamma, .beta = beta,
              .mean_in = mean, .var_in = var, .eps = eps, .y = y};
  nnt_cpu_pool_for(ch, 1, bn_min_channels(&j), fwd_infer_part, &j);
  return NNT_OK;
}

static void bwd_part(void *p, size_t c0, size_t c1) {
  const bn_job *j = p;
  size_t outer = j->outer, ch = j->ch, inner = j->inner;
  const float *dy = j->dy, *xhat = j->xhat_in, *invstd = j->invstd_in, *gamma = j->gamma;
  float *dx = j->dx, *dgamma = j->dgamma, *dbeta = j->dbeta;
  double n = (double)outer * inner;
  for (size_t c = c0; c < c1; c++) {
    double sdy = 0, sdyx = 0;
    for (size_t o = 0; o < outer; o++) {
      size_t off = (o * ch + c) * inner;
      dsum_dy(dy + off, xhat + off, inner, &sdy, &sdyx);
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

int nnt_cpu_bn_bwd(const struct nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                   const float *dy, const float *xhat, const float *invstd, const float *gamma,
                   float *dx, float *dgamma, float *dbeta) {
  (void)self;
  bn_job j = {.outer = outer, .ch = ch, .inner = inner, .dy = dy, .xhat_in = xhat,
              .invstd_in = invstd, .gamma = gamma, .dx = dx, .dgamma = dgamma, .dbeta = dbeta};
  nnt_cpu_pool_for(ch, 1, bn_min_channels(&j), bwd_part, &j);
  return NNT_OK;
}

static void affine_part(void *p, size_t c0, size_t c1) {
  const bn_job *j = p;
  size_t outer = j->outer, ch = j->ch, inner = j->inner;
  for (size_t c = c0; c < c1; c++) {
    float g = j->gamma[c], b = j->beta[c];
    for (size_t o = 0; o < outer; o++) {
      size_t off = (o * ch + c) * inner;
      for (size_t i = 0; i < inner; i++)
        j->y[off + i] = bn_affine1(g, j->xhat_in[off + i], b);
    }
  }
}

int nnt_cpu_bn_affine(const struct nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                      const float *xhat, const float *gamma, const float *beta, float *y) {
  (void)self;
  bn_job j = {.outer = outer, .ch = ch, .inner = inner, .xhat_in = xhat, .gamma = gamma,
              .beta = beta, .y = y};
  nnt_cpu_pool_for(ch, 1, bn_min_channels(&j), affine_part, &j);
  return NNT_OK;
}
