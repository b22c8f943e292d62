/* The batch-normalization loops of cpu_norm.c, included there once per
 * code path: NL(name) gives each copy its own names, and the includer sets
 * the target (plain x86-64 or AVX2) around the include. No include guard:
 * it is meant to be included more than once. The loops keep their order of
 * operations on every path (NNT_LANES partial sums added in a fixed order;
 * ISO C with no contraction into fused multiply-adds), so the paths give
 * the same bits; only the vector width the compiler picks differs. */

static double NL(dsum_sqdev)(const float *p, size_t n, double mu) {
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
 * vectorizes each (float to double widening) but not the loop that does
 * both at once, which stayed scalar and made this the slowest batch-norm
 * loop; the second pass finds the data in cache. */
static void NL(dsum_dy)(const float *dy, const float *xh, size_t n, double *sdy, double *sdyx) {
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

static void NL(fwd_train_part)(void *p, size_t c0, size_t c1) {
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
      s2 += NL(dsum_sqdev)(x + (o * ch + c) * inner, inner, mu);
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

static void NL(fwd_infer_part)(void *p, size_t c0, size_t c1) {
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

static void NL(bwd_part)(void *p, size_t c0, size_t c1) {
  const bn_job *j = p;
  size_t outer = j->outer, ch = j->ch, inner = j->inner;
  const float *dy = j->dy, *xhat = j->xhat_in, *invstd = j->invstd_in, *gamma = j->gamma;
  float *dx = j->dx, *dgamma = j->dgamma, *dbeta = j->dbeta;
  double n = (double)outer * inner;
  for (size_t c = c0; c < c1; c++) {
    double sdy = 0, sdyx = 0;
    for (size_t o = 0; o < outer; o++) {
      size_t off = (o * ch + c) * inner;
      NL(dsum_dy)(dy + off, xhat + off, inner, &sdy, &sdyx);
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

static void NL(affine_part)(void *p, size_t c0, size_t c1) {
  const bn_job *j = p;
  size_t outer = j->outer, ch = j->ch, inner = j->inner;
  const float *xhat = j->xhat_in, *gamma = j->gamma, *beta = j->beta;
  float *y = j->y;
  for (size_t c = c0; c < c1; c++) {
    float g = gamma[c], b = beta[c];
    for (size_t o = 0; o < outer; o++) {
      size_t off = (o * ch + c) * inner;
      for (size_t i = 0; i < inner; i++)
        y[off + i] = bn_affine1(g, xhat[off + i], b);
    }
  }
}
