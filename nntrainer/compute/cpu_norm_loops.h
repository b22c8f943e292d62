/* The batch-normalization loops of cpu_norm.c, included there once per
 * code path: NL(name) gives each copy its own names, and the includer sets
 * the target (plain x86-64, AVX2 or AVX-512) around the include, with
 * BN_LOOPS_AVX2 or BN_LOOPS_AVX512 defined for the copies whose backward
 * sums (dsum_dy4) are written in intrinsics. No include guard: it is meant
 * to be included more than once. The loops keep their order of operations
 * on every path (NNT_LANES partial sums added in a fixed order; ISO C with
 * no contraction into fused multiply-adds; the intrinsics add lane by lane
 * in the same order), so the paths give the same bits. */

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

/* sum of dy and of dy * xhat over one block of n values (each of its
 * NNT_LANES partial sums added in order from 0). Two passes over the
 * block: gcc vectorizes each (float to double widening) but not the loop
 * that does both at once, which stayed scalar and made this the slowest
 * batch-norm loop; the second pass finds the data in cache. */
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
  double s = 0, t = 0;
  for (int l = 0; l < NNT_LANES; l++) {
    s += a[l];
    t += b[l];
  }
  *sdy = s;
  *sdyx = t;
}

/* The tails and lane sums of dsum_dy4 below: a[q], b[q] hold block q's
 * NNT_LANES partial sums over its first i values. */
static void NL(dsum_dy4_end)(const float *const dy[4], const float *const xh[4], size_t i,
                             size_t n, double a[4][NNT_LANES], double b[4][NNT_LANES],
                             double *sdy, double *sdyx) {
  for (int q = 0; q < 4; q++) {
    for (size_t k = i; k < n; k++) {
      a[q][0] += dy[q][k];
      b[q][0] += (double)dy[q][k] * xh[q][k];
    }
    double s = 0, t = 0;
    for (int l = 0; l < NNT_LANES; l++) {
      s += a[q][l];
      t += b[q][l];
    }
    sdy[q] = s;
    sdyx[q] = t;
  }
}

#ifdef BN_LOOPS_AVX512
_Static_assert(NNT_LANES == 8, "dsum_dy4's AVX-512 copy holds a block's lanes in one register");
/* dsum_dy4 on AVX-512: each block's NNT_LANES (8) partial sums of dy and
 * of dy * xhat in one register each, both in one pass: every lane adds
 * the same values in the same order as the loops below (a product of two
 * floats is exact in double), so the same bits; gcc kept the loops' sums
 * on the stack, a store and a load per add. */
static void NL(dsum_dy4)(const float *const dy[4], const float *const xh[4], size_t n,
                         double *sdy, double *sdyx) {
  __m512d va[4], vb[4];
  for (int q = 0; q < 4; q++)
    va[q] = vb[q] = _mm512_setzero_pd();
  size_t i = 0;
  for (; i + NNT_LANES <= n; i += NNT_LANES)
    for (int q = 0; q < 4; q++) {
      __m512d d = _mm512_cvtps_pd(_mm256_loadu_ps(dy[q] + i));
      __m512d h = _mm512_cvtps_pd(_mm256_loadu_ps(xh[q] + i));
      va[q] = _mm512_add_pd(va[q], d);
      vb[q] = _mm512_add_pd(vb[q], _mm512_mul_pd(d, h));
    }
  double a[4][NNT_LANES], b[4][NNT_LANES];
  for (int q = 0; q < 4; q++) {
    _mm512_storeu_pd(a[q], va[q]);
    _mm512_storeu_pd(b[q], vb[q]);
  }
  NL(dsum_dy4_end)(dy, xh, i, n, a, b, sdy, sdyx);
}
#elif defined(BN_LOOPS_AVX2)
_Static_assert(NNT_LANES == 8, "dsum_dy4's AVX2 copy holds a block's lanes in two registers");
/* dsum_dy4 on AVX2, as the AVX-512 copy above: a block's 8 lane sums of
 * dy and of dy * xhat in two registers each, two blocks a pass (eight
 * registers of sums), the same bits as the loops below. */
static void NL(dsum_dy4)(const float *const dy[4], const float *const xh[4], size_t n,
                         double *sdy, double *sdyx) {
  double a[4][NNT_LANES], b[4][NNT_LANES];
  size_t i = 0;
  for (int q0 = 0; q0 < 4; q0 += 2) {
    __m256d va[2][2], vb[2][2];
    for (int q = 0; q < 2; q++)
      va[q][0] = va[q][1] = vb[q][0] = vb[q][1] = _mm256_setzero_pd();
    for (i = 0; i + NNT_LANES <= n; i += NNT_LANES)
      for (int q = 0; q < 2; q++)
        for (int h = 0; h < 2; h++) {
          __m256d d = _mm256_cvtps_pd(_mm_loadu_ps(dy[q0 + q] + i + 4 * h));
          __m256d x = _mm256_cvtps_pd(_mm_loadu_ps(xh[q0 + q] + i + 4 * h));
          va[q][h] = _mm256_add_pd(va[q][h], d);
          vb[q][h] = _mm256_add_pd(vb[q][h], _mm256_mul_pd(d, x));
        }
    for (int q = 0; q < 2; q++)
      for (int h = 0; h < 2; h++) {
        _mm256_storeu_pd(a[q0 + q] + 4 * h, va[q][h]);
        _mm256_storeu_pd(b[q0 + q] + 4 * h, vb[q][h]);
      }
  }
  NL(dsum_dy4_end)(dy, xh, i, n, a, b, sdy, sdyx);
}
#else
/* dsum_dy of four blocks at once, each with dsum_dy's own arithmetic (the
 * same bits): one block's lane sums are one chain of adds whose latency
 * set dsum_dy's pace; four independent chains keep the adder busy. */
static void NL(dsum_dy4)(const float *const dy[4], const float *const xh[4], size_t n,
                         double *sdy, double *sdyx) {
  double a[4][NNT_LANES] = {{0}}, b[4][NNT_LANES] = {{0}};
  size_t i = 0;
  for (; i + NNT_LANES <= n; i += NNT_LANES)
    for (int q = 0; q < 4; q++)
      for (int l = 0; l < NNT_LANES; l++)
        a[q][l] += dy[q][i + l];
  for (size_t k = 0; k + NNT_LANES <= n; k += NNT_LANES)
    for (int q = 0; q < 4; q++)
      for (int l = 0; l < NNT_LANES; l++)
        b[q][l] += (double)dy[q][k + l] * xh[q][k + l];
  NL(dsum_dy4_end)(dy, xh, i, n, a, b, sdy, sdyx);
}
#endif

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
    float mdy, mdyx;
    if (j->means_in) {
      mdy = j->means_in[c], mdyx = j->means_in[ch + c];
    } else {
      double sdy = 0, sdyx = 0;
      size_t o = 0;
      for (; o + 4 <= outer; o += 4) { /* four images' blocks at once */
        const float *d4[4], *x4[4];
        double a[4], b[4];
        for (int q = 0; q < 4; q++) {
          d4[q] = dy + ((o + q) * ch + c) * inner;
          x4[q] = xhat + ((o + q) * ch + c) * inner;
        }
        NL(dsum_dy4)(d4, x4, inner, a, b);
        for (int q = 0; q < 4; q++) {
          sdy += a[q];
          sdyx += b[q];
        }
      }
      for (; o < outer; o++) {
        size_t off = (o * ch + c) * inner;
        double a, b;
        NL(dsum_dy)(dy + off, xhat + off, inner, &a, &b);
        sdy += a;
        sdyx += b;
      }
      if (dgamma)
        dgamma[c] = (float)sdyx;
      if (dbeta)
        dbeta[c] = (float)sdy;
      mdy = (float)(sdy / n), mdyx = (float)(sdyx / n);
      if (j->means_out)
        j->means_out[c] = mdy, j->means_out[ch + c] = mdyx;
    }
    if (!dx)
      continue;
    float k = gamma[c] * invstd[c];
    for (size_t o = 0; o < outer; o++) {
      size_t off = (o * ch + c) * inner;
      for (size_t i = 0; i < inner; i++)
        dx[off + i] = k * (dy[off + i] - mdy - xhat[off + i] * mdyx);
    }
  }
}

/* bn_fwd_stats: fwd_train_part's normalization from the statistics given
 * in j->mean_in and j->invstd_in (each element's arithmetic the same). */
static void NL(stats_part)(void *p, size_t c0, size_t c1) {
  const bn_job *j = p;
  size_t outer = j->outer, ch = j->ch, inner = j->inner;
  const float *x = j->x, *gamma = j->gamma, *beta = j->beta;
  float *y = j->y;
  for (size_t c = c0; c < c1; c++) {
    float g = gamma[c], b = beta[c], m = j->mean_in[c], is = j->invstd_in[c];
    for (size_t o = 0; o < outer; o++) {
      size_t off = (o * ch + c) * inner;
      for (size_t i = 0; i < inner; i++) {
        float h = (x[off + i] - m) * is;
        y[off + i] = bn_affine1(g, h, b);
      }
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

/* ---- split over images (cpu_norm.c: the same arithmetic as above, the
 * sums over images added by the caller in image order). j->part holds a
 * sum (two for the backward) per (image, channel), j->chan per channel:
 * the mean (double) for sqdev_img_part; dx_img_part reads the means of dy
 * and of dy * xhat from j->means_in. */

static void NL(sum_img_part)(void *p, size_t o0, size_t o1) {
  const bn_job *j = p;
  for (size_t o = o0; o < o1; o++)
    for (size_t c = 0; c < j->ch; c++)
      j->part[o * j->ch + c] = nnt_cpu_dsum(j->x + (o * j->ch + c) * j->inner, j->inner);
}

static void NL(sqdev_img_part)(void *p, size_t o0, size_t o1) {
  const bn_job *j = p;
  for (size_t o = o0; o < o1; o++)
    for (size_t c = 0; c < j->ch; c++)
      j->part[o * j->ch + c] =
          NL(dsum_sqdev)(j->x + (o * j->ch + c) * j->inner, j->inner, j->chan[c]);
}

static void NL(norm_img_part)(void *p, size_t o0, size_t o1) {
  const bn_job *j = p;
  size_t inner = j->inner;
  for (size_t o = o0; o < o1; o++)
    for (size_t c = 0; c < j->ch; c++) {
      float m = j->mean[c], is = j->invstd[c], g = j->gamma[c], b = j->beta[c];
      size_t off = (o * j->ch + c) * inner;
      const float *x = j->x + off;
      float *xhat = j->xhat + off, *y = j->y + off;
      for (size_t i = 0; i < inner; i++) {
        float h = (x[i] - m) * is;
        xhat[i] = h;
        y[i] = bn_affine1(g, h, b);
      }
    }
}

static void NL(infer_img_part)(void *p, size_t o0, size_t o1) {
  const bn_job *j = p;
  size_t inner = j->inner;
  for (size_t o = o0; o < o1; o++)
    for (size_t c = 0; c < j->ch; c++) {
      float is = 1.0f / sqrtf(j->var_in[c] + j->eps), g = j->gamma[c] * is,
            b = j->beta[c] - j->mean_in[c] * g;
      size_t off = (o * j->ch + c) * inner;
      for (size_t i = 0; i < inner; i++)
        j->y[off + i] = j->x[off + i] * g + b;
    }
}

static void NL(dysum_img_part)(void *p, size_t o0, size_t o1) {
  const bn_job *j = p;
  for (size_t o = o0; o < o1; o++) {
    size_t c = 0;
    for (; c + 4 <= j->ch; c += 4) { /* four channels' blocks at once */
      const float *d4[4], *x4[4];
      double a[4], b[4];
      for (int q = 0; q < 4; q++) {
        size_t off = (o * j->ch + c + q) * j->inner;
        d4[q] = j->dy + off;
        x4[q] = j->xhat_in + off;
      }
      NL(dsum_dy4)(d4, x4, j->inner, a, b);
      for (int q = 0; q < 4; q++) {
        j->part[2 * (o * j->ch + c + q)] = a[q];
        j->part[2 * (o * j->ch + c + q) + 1] = b[q];
      }
    }
    for (; c < j->ch; c++) {
      size_t off = (o * j->ch + c) * j->inner, k = o * j->ch + c;
      NL(dsum_dy)(j->dy + off, j->xhat_in + off, j->inner, &j->part[2 * k], &j->part[2 * k + 1]);
    }
  }
}

static void NL(dx_img_part)(void *p, size_t o0, size_t o1) {
  const bn_job *j = p;
  size_t inner = j->inner;
  for (size_t o = o0; o < o1; o++)
    for (size_t c = 0; c < j->ch; c++) {
      float k = j->gamma[c] * j->invstd_in[c], mdy = j->means_in[c],
            mdyx = j->means_in[j->ch + c];
      size_t off = (o * j->ch + c) * inner;
      const float *dy = j->dy + off, *xhat = j->xhat_in + off;
      float *dx = j->dx + off;
      for (size_t i = 0; i < inner; i++)
        dx[i] = k * (dy[i] - mdy - xhat[i] * mdyx);
    }
}

static void NL(affine_img_part)(void *p, size_t o0, size_t o1) {
  const bn_job *j = p;
  size_t inner = j->inner;
  for (size_t o = o0; o < o1; o++)
    for (size_t c = 0; c < j->ch; c++) {
      float g = j->gamma[c], b = j->beta[c];
      size_t off = (o * j->ch + c) * inner;
      for (size_t i = 0; i < inner; i++)
        j->y[off + i] = bn_affine1(g, j->xhat_in[off + i], b);
    }
}
