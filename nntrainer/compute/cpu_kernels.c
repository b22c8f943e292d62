/* The CPU backend: OpenBLAS for gemm, plain loops elsewhere (simple
 * unit-stride loops without calls, so gcc vectorizes them when its cost model
 * allows; GCC 12 at plain -O2 uses the "very-cheap" model, which needs
 * -fvect-cost-model=cheap or -O3 to vectorize loops of unknown length).
 *
 * Activations follow NNTrainer (nntrainer/layers/acti_func.h), which agrees
 * with PyTorch: leaky_relu slope 0.01 (passed in as alpha by the activation
 * layer), elu alpha 1.0, selu alpha 1.6732632 and scale 1.0507010, gelu the
 * exact form 0.5 x (1 + erf(x / sqrt 2)) (not the tanh approximation),
 * softplus log(1 + e^x) with beta 1, mish x tanh(softplus(x)), swish
 * x sigmoid(x). Where NNTrainer evaluates a formula that overflows (softplus
 * as log(1 + exp(x)), sigmoid as 1 / (1 + exp(-x))) we use the stable
 * equivalent. The derivatives are the true ones: NNTrainer's in-place path
 * evaluates the elu, selu, softplus and mish "primes" at the output instead
 * of the input, which is not the derivative; PyTorch's autograd is the
 * reference here. Elementwise entries tolerate exact aliasing of the output
 * with an input (other layers rely on y == a for add). */
#include "nntrainer/compute/kernels.h"
#include "nntrainer/compute/cpu_impl.h"

#include "nntrainer/philox.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/* An argument the entry can see is wrong: NNT_ERR_INVAL. */
#define NEED(cond)                                                                        \
  do {                                                                                    \
    if (!(cond))                                                                          \
      return NNT_ERR_INVAL;                                                               \
  } while (0)

/* Plain loops split over the compute threads by what they write (each
 * element, row or sum computed as on one thread): parts of at least
 * LOOP_MIN_PART values. */
#define LOOP_MIN_PART 16384

typedef struct loop_job {
  size_t cols;
  float v;
  const float *a, *b;
  float *y;
} loop_job;

static void fill_part(void *p, size_t b, size_t e) {
  const loop_job *j = p;
  for (size_t i = b; i < e; i++)
    j->y[i] = j->v;
}
static void copy_part(void *p, size_t b, size_t e) {
  const loop_job *j = p;
  memcpy(j->y + b, j->a + b, (e - b) * sizeof *j->y);
}
static void add_part(void *p, size_t b, size_t e) {
  const loop_job *j = p;
  const float *x = j->a, *z = j->b;
  float *y = j->y;
  for (size_t i = b; i < e; i++)
    y[i] = x[i] + z[i];
}

static int k_fill(const nnt_kernels *self, size_t n, float v, float *y) {
  (void)self;
  loop_job j = {.v = v, .y = y};
  nnt_cpu_pool_for(n, 16, LOOP_MIN_PART, fill_part, &j);
  return NNT_OK;
}
static int k_copy(const nnt_kernels *self, size_t n, const float *x, float *y) {
  (void)self;
  if (x == y)
    return NNT_OK;
  if (y + n <= x || x + n <= y) { /* apart: split */
    loop_job j = {.a = x, .y = y};
    nnt_cpu_pool_for(n, 16, LOOP_MIN_PART, copy_part, &j);
  } else {
    memmove(y, x, n * sizeof *y);
  }
  return NNT_OK;
}
static int k_scale(const nnt_kernels *self, size_t n, float a, float *y) {
  (void)self;
  for (size_t i = 0; i < n; i++)
    y[i] *= a;
  return NNT_OK;
}
static int k_clip_scale(const nnt_kernels *self, size_t n, float max_norm, const float *sumsq,
                        float *y) {
  float s = sqrtf(*sumsq);
  return s > max_norm ? k_scale(self, n, max_norm / s, y) : NNT_OK;
}
static int k_mask_upper(const nnt_kernels *self, size_t mats, size_t rows, size_t cols, float v,
                        float *y) {
  (void)self;
  for (size_t m = 0; m < mats; m++)
    for (size_t i = 0; i < rows; i++)
      for (size_t j = i + 1; j < cols; j++)
        y[(m * rows + i) * cols + j] = v;
  return NNT_OK;
}
static int k_axpy(const nnt_kernels *self, size_t n, float a, const float *x, float *y) {
  (void)self;
  for (size_t i = 0; i < n; i++)
    y[i] += a * x[i];
  return NNT_OK;
}
static int k_add(const nnt_kernels *self, size_t n, const float *a, const float *b, float *y) {
  (void)self;
  loop_job j = {.a = a, .b = b, .y = y};
  nnt_cpu_pool_for(n, 16, LOOP_MIN_PART, add_part, &j);
  return NNT_OK;
}
static int k_sub(const nnt_kernels *self, size_t n, const float *a, const float *b, float *y) {
  (void)self;
  for (size_t i = 0; i < n; i++)
    y[i] = a[i] - b[i];
  return NNT_OK;
}
static int k_mul(const nnt_kernels *self, size_t n, const float *a, const float *b, float *y) {
  (void)self;
  for (size_t i = 0; i < n; i++)
    y[i] = a[i] * b[i];
  return NNT_OK;
}
static int k_dot(const nnt_kernels *self, size_t n, const float *x, const float *y, float *out) {
  (void)self;
  NEED(out && (!n || (x && y)));
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += (double)x[i] * y[i];
  *out = (float)s;
  return NNT_OK;
}
static int k_sum(const nnt_kernels *self, size_t n, const float *x, float *out) {
  (void)self;
  NEED(out && (!n || x));
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += x[i];
  *out = (float)s;
  return NNT_OK;
}
static int k_add_row_vec(const nnt_kernels *self, size_t rows, size_t cols, const float *bias,
                         float *y) {
  (void)self;
  for (size_t r = 0; r < rows; r++)
    for (size_t c = 0; c < cols; c++)
      y[r * cols + c] += bias[c];
  return NNT_OK;
}
static int k_sum_rows(const nnt_kernels *self, size_t rows, size_t cols, const float *x, float beta,
                      float *out) {
  (void)self;
  for (size_t c = 0; c < cols; c++)
    out[c] = beta == 0 ? 0 : beta * out[c];
  for (size_t r = 0; r < rows; r++)
    for (size_t c = 0; c < cols; c++)
      out[c] += x[r * cols + c];
  return NNT_OK;
}

static void add_col_vec_part(void *p, size_t r0, size_t r1) {
  const loop_job *j = p;
  size_t cols = j->cols;
  for (size_t r = r0; r < r1; r++)
    for (size_t c = 0; c < cols; c++)
      j->y[r * cols + c] += j->a[r];
}
static int k_add_col_vec(const nnt_kernels *self, size_t rows, size_t cols, const float *v,
                         float *y) {
  (void)self;
  loop_job j = {.cols = cols, .a = v, .y = y};
  nnt_cpu_pool_for(rows, 1, cols ? (LOOP_MIN_PART + cols - 1) / cols : rows, add_col_vec_part, &j);
  return NNT_OK;
}
/* Each row summed by nnt_cpu_dsum (partial sums: one running sum was 7% of
 * a small CNN's step here, as the convolution's bias gradient); rows split
 * over the threads, each row's sum whole. Where the CPU has AVX-512
 * (nnt_cpu_vec_avx512), four rows at a time, a row's eight lanes in one
 * register and the four rows' chains of adds side by side (the SSE2 code
 * waits on each row's adds): each row's sum in nnt_cpu_dsum's order, the
 * same bits. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define NNT_HAVE_AVX512_SUM_COLS 1
/* The lanes of a (lane l: p[i + l] of the whole blocks of 8) with the
 * tail p[0..t) added to lane 0, then lanes 0..7 in order: nnt_cpu_dsum's
 * ending. */
__attribute__((target("avx512f"))) static double lanes_sum(__m512d a, const float *p,
                                                           size_t t) {
  double acc[NNT_LANES], s = 0;
  _mm512_storeu_pd(acc, a);
  for (size_t i = 0; i < t; i++)
    acc[0] += p[i];
  for (int l = 0; l < NNT_LANES; l++)
    s += acc[l];
  return s;
}
__attribute__((target("avx512f"))) static void sum_cols_avx512(const loop_job *j, size_t r0,
                                                               size_t r1) {
  size_t cols = j->cols, whole = cols / NNT_LANES * NNT_LANES;
  for (size_t r = r0; r < r1;) {
    size_t rows = r1 - r >= 4 ? 4 : 1;
    const float *x = j->a + r * cols;
    __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < whole; i += NNT_LANES) {
      a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm256_loadu_ps(x + i)));
      if (rows == 4) {
        a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_loadu_ps(x + cols + i)));
        a2 = _mm512_add_pd(a2, _mm512_cvtps_pd(_mm256_loadu_ps(x + 2 * cols + i)));
        a3 = _mm512_add_pd(a3, _mm512_cvtps_pd(_mm256_loadu_ps(x + 3 * cols + i)));
      }
    }
    const __m512d a[4] = {a0, a1, a2, a3};
    for (size_t q = 0; q < rows; q++, r++) {
      double s = lanes_sum(a[q], x + q * cols + whole, cols - whole);
      j->y[r] = (float)s + (j->v == 0 ? 0 : j->v * j->y[r]);
    }
  }
}
#endif
static void sum_cols_part(void *p, size_t r0, size_t r1) {
  const loop_job *j = p;
#ifdef NNT_HAVE_AVX512_SUM_COLS
  if (nnt_cpu_vec_avx512()) {
    sum_cols_avx512(j, r0, r1);
    return;
  }
#endif
  for (size_t r = r0; r < r1; r++) {
    double s = nnt_cpu_dsum(j->a + r * j->cols, j->cols);
    j->y[r] = (float)s + (j->v == 0 ? 0 : j->v * j->y[r]);
  }
}
static int k_sum_cols(const nnt_kernels *self, size_t rows, size_t cols, const float *x, float beta,
                      float *out) {
  (void)self;
  loop_job j = {.cols = cols, .v = beta, .a = x, .y = out};
  nnt_cpu_pool_for(rows, 1, cols ? (LOOP_MIN_PART + cols - 1) / cols : rows, sum_cols_part, &j);
  return NNT_OK;
}

static inline float sigmoidf(float x) {
  if (x >= 0)
    return 1.0f / (1.0f + expf(-x));
  float e = expf(x);
  return e / (1.0f + e);
}
static inline float softplusf(float x) {
  /* log(1 + e^x) without overflow */
  return x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x));
}

#define SELU_ALPHA 1.6732632423543772f
#define SELU_SCALE 1.0507009873554805f

static int act_fwd1(const nnt_kernels *self, nnt_act a, float alpha, size_t n, const float *x,
                    float *y) {
  (void)self;
  size_t i;
  switch (a) {
  case NNT_ACT_NONE:
  case NNT_ACT_SOFTMAX: /* softmax goes through softmax_fwd */
    k_copy(self, n, x, y);
    break;
  case NNT_ACT_RELU:
    for (i = 0; i < n; i++)
      y[i] = x[i] > 0 ? x[i] : 0;
    break;
  case NNT_ACT_LEAKY_RELU:
    for (i = 0; i < n; i++)
      y[i] = x[i] > 0 ? x[i] : alpha * x[i];
    break;
  case NNT_ACT_SIGMOID:
    for (i = 0; i < n; i++)
      y[i] = sigmoidf(x[i]);
    break;
  case NNT_ACT_TANH:
    for (i = 0; i < n; i++)
      y[i] = tanhf(x[i]);
    break;
  case NNT_ACT_SWISH:
    for (i = 0; i < n; i++)
      y[i] = x[i] * sigmoidf(x[i]);
    break;
  case NNT_ACT_GELU:
    for (i = 0; i < n; i++)
      y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
    break;
  case NNT_ACT_ELU:
    for (i = 0; i < n; i++)
      y[i] = x[i] > 0 ? x[i] : alpha * expm1f(x[i]);
    break;
  case NNT_ACT_SELU:
    for (i = 0; i < n; i++)
      y[i] = SELU_SCALE * (x[i] > 0 ? x[i] : SELU_ALPHA * expm1f(x[i]));
    break;
  case NNT_ACT_SOFTPLUS:
    for (i = 0; i < n; i++)
      y[i] = softplusf(x[i]);
    break;
  case NNT_ACT_MISH:
    for (i = 0; i < n; i++)
      y[i] = x[i] * tanhf(softplusf(x[i]));
    break;
  default:
    break;
  }
  return NNT_OK;
}

static int act_bwd1(const nnt_kernels *self, nnt_act a, float alpha, size_t n, const float *x,
                    const float *y, const float *dy, float *dx) {
  (void)self;
  size_t i;
  switch (a) {
  case NNT_ACT_NONE:
  case NNT_ACT_SOFTMAX:
    k_copy(self, n, dy, dx);
    break;
  /* dy is read unconditionally so that the loop becomes a vector select
   * instead of a branch per element */
  case NNT_ACT_RELU:
    for (i = 0; i < n; i++) {
      float g = dy[i];
      dx[i] = y[i] > 0 ? g : 0.0f;
    }
    break;
  case NNT_ACT_LEAKY_RELU:
    for (i = 0; i < n; i++) {
      float g = dy[i];
      dx[i] = y[i] > 0 ? g : alpha * g;
    }
    break;
  case NNT_ACT_SIGMOID:
    for (i = 0; i < n; i++)
      dx[i] = dy[i] * y[i] * (1 - y[i]);
    break;
  case NNT_ACT_TANH:
    for (i = 0; i < n; i++)
      dx[i] = dy[i] * (1 - y[i] * y[i]);
    break;
  case NNT_ACT_SWISH:
    for (i = 0; i < n; i++) {
      float s = sigmoidf(x[i]);
      dx[i] = dy[i] * (s + x[i] * s * (1 - s));
    }
    break;
  case NNT_ACT_GELU:
    for (i = 0; i < n; i++) {
      float cdf = 0.5f * (1.0f + erff(x[i] * 0.70710678118654752f));
      float pdf = 0.3989422804014327f * expf(-0.5f * x[i] * x[i]);
      dx[i] = dy[i] * (cdf + x[i] * pdf);
    }
    break;
  case NNT_ACT_ELU:
    for (i = 0; i < n; i++)
      dx[i] = x[i] > 0 ? dy[i] : dy[i] * alpha * expf(x[i]);
    break;
  case NNT_ACT_SELU:
    for (i = 0; i < n; i++)
      dx[i] = dy[i] * SELU_SCALE * (x[i] > 0 ? 1 : SELU_ALPHA * expf(x[i]));
    break;
  case NNT_ACT_SOFTPLUS:
    for (i = 0; i < n; i++)
      dx[i] = dy[i] * sigmoidf(x[i]);
    break;
  case NNT_ACT_MISH:
    for (i = 0; i < n; i++) {
      float sp = softplusf(x[i]), t = tanhf(sp);
      dx[i] = dy[i] * (t + x[i] * (1 - t * t) * sigmoidf(x[i]));
    }
    break;
  default:
    break;
  }
  return NNT_OK;
}

/* The element-wise activations and optimizer updates on the compute
 * threads (cpu_pool.c): each part is the one-thread entry on a slice of
 * the elements (a mask's at multiples of 32, one word each), so every
 * output is computed as on one thread. Parts of at least EW_MIN_PART
 * elements (EW_MIN_PART_SLOW for the activations that call exp, erf or
 * tanh). */
#define EW_MIN_PART 16384
#define EW_MIN_PART_SLOW 2048

typedef struct ew_job {
  const nnt_kernels *self;
  nnt_act a;
  float alpha, lr, b1, b2, eps, wscale;
  const float *x, *y, *dy, *mask, *g;
  float *out, *m, *v;
} ew_job;

static const float *at(const float *p, size_t i) { return p ? p + i : NULL; }

static size_t act_min_part(nnt_act a) {
  return a == NNT_ACT_NONE || a == NNT_ACT_RELU || a == NNT_ACT_LEAKY_RELU ||
                 a == NNT_ACT_SOFTMAX
             ? EW_MIN_PART
             : EW_MIN_PART_SLOW;
}

static void act_fwd_part(void *p, size_t b, size_t e) {
  const ew_job *j = p;
  act_fwd1(j->self, j->a, j->alpha, e - b, j->x + b, j->out + b);
}

static int k_act_fwd(const nnt_kernels *self, nnt_act a, float alpha, size_t n, const float *x,
                     float *y) {
  ew_job j = {.self = self, .a = a, .alpha = alpha, .x = x, .out = y};
  nnt_cpu_pool_for(n, 16, act_min_part(a), act_fwd_part, &j);
  return NNT_OK;
}

static void act_bwd_part(void *p, size_t b, size_t e) {
  const ew_job *j = p;
  act_bwd1(j->self, j->a, j->alpha, e - b, at(j->x, b), at(j->y, b), j->dy + b, j->out + b);
}

static int k_act_bwd(const nnt_kernels *self, nnt_act a, float alpha, size_t n, const float *x,
                     const float *y, const float *dy, float *dx) {
  ew_job j = {.self = self, .a = a, .alpha = alpha, .x = x, .y = y, .dy = dy, .out = dx};
  nnt_cpu_pool_for(n, 16, act_min_part(a), act_bwd_part, &j);
  return NNT_OK;
}

static void act_mask_part(void *p, size_t b, size_t e) {
  const ew_job *j = p;
  nnt_cpu_act_mask1(e - b, j->y + b, j->out + b / 32);
}

static int k_act_mask(const nnt_kernels *self, size_t n, const float *y, float *mask) {
  ew_job j = {.self = self, .y = y, .out = mask};
  nnt_cpu_pool_for(n, 32, EW_MIN_PART, act_mask_part, &j);
  return NNT_OK;
}

static void act_bwd_mask_part(void *p, size_t b, size_t e) {
  const ew_job *j = p;
  nnt_cpu_act_bwd_mask1(j->a, j->alpha, e - b, j->mask + b / 32, j->dy + b, j->out + b);
}

static int k_act_bwd_mask(const nnt_kernels *self, nnt_act a, float alpha, size_t n,
                          const float *mask, const float *dy, float *dx) {
  if (a != NNT_ACT_RELU && a != NNT_ACT_LEAKY_RELU)
    return NNT_ERR_INVAL;
  ew_job j = {.self = self, .a = a, .alpha = alpha, .mask = mask, .dy = dy, .out = dx};
  nnt_cpu_pool_for(n, 32, EW_MIN_PART, act_bwd_mask_part, &j);
  return NNT_OK;
}

static int k_softmax_fwd(const nnt_kernels *self, size_t rows, size_t cols, const float *x,
                         float *y) {
  (void)self;
  for (size_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    float mx = xr[0];
    for (size_t c = 1; c < cols; c++)
      mx = xr[c] > mx ? xr[c] : mx;
    double s = 0;
    for (size_t c = 0; c < cols; c++) {
      yr[c] = expf(xr[c] - mx);
      s += yr[c];
    }
    float inv = (float)(1.0 / s);
    for (size_t c = 0; c < cols; c++)
      yr[c] *= inv;
  }
  return NNT_OK;
}

static int k_softmax_bwd(const nnt_kernels *self, size_t rows, size_t cols, const float *y,
                         const float *dy, float *dx) {
  (void)self;
  for (size_t r = 0; r < rows; r++) {
    const float *yr = y + r * cols, *dyr = dy + r * cols;
    float *dxr = dx + r * cols;
    double s = 0;
    for (size_t c = 0; c < cols; c++)
      s += (double)dyr[c] * yr[c];
    for (size_t c = 0; c < cols; c++)
      dxr[c] = yr[c] * (dyr[c] - (float)s);
  }
  return NNT_OK;
}

static int k_xent_softmax_fwd(const nnt_kernels *self, size_t rows, size_t cols, const float *prob,
                              const float *label, float *loss) {
  (void)self;
  NEED(rows && loss && prob && label);
  double s = 0;
  for (size_t i = 0; i < rows * cols; i++)
    if (label[i] != 0)
      s -= (double)label[i] * log((double)prob[i] + 1e-20);
  *loss = (float)(s / rows);
  return NNT_OK;
}

static int k_xent_softmax_bwd(const nnt_kernels *self, size_t rows, size_t cols, const float *prob,
                               const float *label, float *dx) {
  (void)self;
  float inv = 1.0f / (float)rows;
  for (size_t i = 0; i < rows * cols; i++)
    dx[i] = (prob[i] - label[i]) * inv;
  return NNT_OK;
}

/* Sigmoid cross entropy on logits, as NNTrainer's CrossEntropySigmoidLossLayer
 * computes it: the mean over all N = rows * cols elements of
 * max(x,0) - x*t + log(1 + e^-|x|) (PyTorch's binary_cross_entropy_with_logits
 * with reduction 'mean'); its derivative is (sigmoid(x) - t) / N. */
static int k_xent_sigmoid_fwd(const nnt_kernels *self, size_t rows, size_t cols, const float *x,
                              const float *label, float *loss) {
  (void)self;
  NEED(rows && cols && loss && x && label);
  double s = 0;
  size_t n = rows * cols;
  for (size_t i = 0; i < n; i++)
    s += (x[i] > 0 ? x[i] : 0) - x[i] * label[i] + log1p(exp(-fabs((double)x[i])));
  *loss = (float)(s / n);
  return NNT_OK;
}

static int k_xent_sigmoid_bwd(const nnt_kernels *self, size_t rows, size_t cols, const float *x,
                               const float *label, float *dx) {
  (void)self;
  size_t n = rows * cols;
  float inv = 1.0f / (float)n;
  for (size_t i = 0; i < n; i++)
    dx[i] = (sigmoidf(x[i]) - label[i]) * inv;
  return NNT_OK;
}

static int k_mse_fwd(const nnt_kernels *self, size_t n, const float *y, const float *label,
                     float *loss) {
  (void)self;
  NEED(n && loss && y && label);
  double s = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)y[i] - label[i];
    s += d * d;
  }
  *loss = (float)(s / n);
  return NNT_OK;
}

static int k_mse_bwd(const nnt_kernels *self, size_t n, const float *y, const float *label,
                     float *dx) {
  (void)self;
  float k = 2.0f / (float)n;
  for (size_t i = 0; i < n; i++)
    dx[i] = k * (y[i] - label[i]);
  return NNT_OK;
}

/* Four values per Philox call: element i is word i % 4 of counter
 * (stream, i / 4), exactly nnt_philox_uniform_at(key, stream, i). */
static int k_dropout_mask(const nnt_kernels *self, size_t n, float rate, uint64_t key,
                          uint64_t stream, float *mask) {
  (void)self;
  NEED(!n || mask);
  NEED(rate >= 0 && rate <= 1);
  float keep = rate < 1 ? 1.0f / (1.0f - rate) : 0;
  for (size_t i = 0; i < n; i += 4) {
    nnt_philox_out r = nnt_philox(key, stream, i >> 2);
    for (size_t j = 0; j < 4 && i + j < n; j++)
      mask[i + j] = nnt_philox_u01(r.v[j]) < rate ? 0.0f : keep;
  }
  return NNT_OK;
}

/* The input layer's per-sample normalization, row by row in place on y
 * (after a copy when y is not x), as documented in kernels.h. */
static int k_normalize_rows(const nnt_kernels *self, size_t rows, size_t cols, unsigned mode,
                            const float *x, float *y) {
  (void)self;
  NEED(!rows || (cols && x && y));
  NEED(!(mode & ~(unsigned)(NNT_NORM_MINMAX | NNT_NORM_STANDARD)));
  for (size_t r = 0; r < rows; r++) {
    float *v = y + r * cols;
    k_copy(self, cols, x + r * cols, v);
    if (mode & NNT_NORM_MINMAX) {
      float lo = v[0], hi = v[0];
      for (size_t i = 1; i < cols; i++)
        lo = v[i] < lo ? v[i] : lo, hi = v[i] > hi ? v[i] : hi;
      float range = hi - lo;
      for (size_t i = 0; i < cols; i++)
        v[i] = range > 0 ? (v[i] - lo) / range : 0;
    }
    if (mode & NNT_NORM_STANDARD) {
      float s;
      k_sum(self, cols, v, &s);
      float mean = s / (float)cols;
      double var = 0;
      for (size_t i = 0; i < cols; i++)
        var += (double)(v[i] - mean) * (v[i] - mean);
      float sd = (float)sqrt(var / cols);
      for (size_t i = 0; i < cols; i++)
        v[i] = sd > 0 ? (v[i] - mean) / sd : 0;
    }
  }
  return NNT_OK;
}

static int k_argmax_match(const nnt_kernels *self, size_t rows, size_t cols, const float *y,
                          const float *label, float *count) {
  (void)self;
  NEED(count && (!rows || (cols && y && label)));
  size_t ok = 0;
  for (size_t r = 0; r < rows; r++) {
    const float *a = y + r * cols, *b = label + r * cols;
    size_t ia = 0, ib = 0;
    for (size_t c = 1; c < cols; c++) {
      if (a[c] > a[ia])
        ia = c;
      if (b[c] > b[ib])
        ib = c;
    }
    ok += ia == ib;
  }
  *count = (float)ok;
  return NNT_OK;
}

/* The optimizer updates run in the library's floating-point mode
 * (common.h nnt_fp_flush_begin: on x86, MXCSR's FTZ and DAZ for the
 * update's duration on the thread that runs it, restored after), also
 * when called outside a training step: a value below the smallest normal
 * float, read or computed, is 0 in them. What they store passes through
 * nnt_flush_subnormal as well, but an intermediate (lr_t m of a moment
 * decaying toward 0, the square of a tiny gradient) that comes out
 * subnormal costs a microcode assist on x86, some hundred cycles an
 * element: the Fashion-MNIST MLP's step with Adam grew 17% after its
 * first epoch that way (docs/performance.md, "Epoch drift"). */
static inline unsigned fp_flush_begin(void) { return nnt_fp_flush_begin(); }
static inline void fp_flush_end(unsigned csr) { nnt_fp_mode_set(csr); }

int nnt_cpu_update_flushes(void) {
#if defined(__x86_64__) || defined(__i386__)
  return 1;
#else
  return 0;
#endif
}

/* The SGD update, also compiled for AVX-512 and taken when the CPU has it
 * (a test per call, no ifunc, as train_check.c's scan): the SSE loop's
 * instructions, not memory, bounded it (6% of the benchmark MLP's step).
 * The same operations in the same order (C11 contracts no multiply-add):
 * the same bits. */
static inline __attribute__((always_inline)) void sgd_loop(size_t n, float lr, const float *g,
                                                           float *w) {
  for (size_t i = 0; i < n; i++)
    w[i] = nnt_flush_subnormal(w[i] - lr * g[i]);
}
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx512f"))) static void sgd_loop_avx512(size_t n, float lr,
                                                               const float *g, float *w) {
  sgd_loop(n, lr, g, w);
}
#define NNT_HAVE_AVX512_SGD 1
#endif

static int sgd_step1(const nnt_kernels *self, size_t n, float lr, const float *g, float *w,
                     const float *skip) {
  (void)self;
  if (skip && *skip != 0)
    return NNT_OK;
  unsigned csr = fp_flush_begin();
#ifdef NNT_HAVE_AVX512_SGD
  if (__builtin_cpu_supports("avx512f"))
    sgd_loop_avx512(n, lr, g, w);
  else
#endif
    sgd_loop(n, lr, g, w);
  fp_flush_end(csr);
  return NNT_OK;
}

/* The Adam update, in vectors of 16 (AVX-512) or 8 (AVX2) where the CPU
 * has them, the rest (and other CPUs) in the plain loop: every operation
 * of the plain loop in its order (no multiply-add; a vector square root
 * and division round as the scalar ones do): the same bits. The plain
 * loop's square root keeps it scalar (sqrtf sets errno), 10 to 20 times
 * slower than the vectors: the Fashion-MNIST MLP's step with Adam took
 * three times its step with SGD (docs/performance.md). */
static inline __attribute__((always_inline)) void adam_loop(size_t n, float lr_t, float b1,
                                                            float b2, float eps,
                                                            const float *g, float *m,
                                                            float *v, float *w) {
  for (size_t i = 0; i < n; i++) {
    m[i] = nnt_flush_subnormal(b1 * m[i] + (1 - b1) * g[i]);
    v[i] = nnt_flush_subnormal(b2 * v[i] + (1 - b2) * g[i] * g[i]);
    w[i] = nnt_flush_subnormal(w[i] - lr_t * m[i] / (sqrtf(v[i]) + eps));
  }
}
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx512f"))) static inline __m512 adam_flush512(__m512 x) {
  __mmask16 normal = _mm512_test_epi32_mask(_mm512_castps_si512(x),
                                            _mm512_set1_epi32(0x7f800000));
  return _mm512_maskz_mov_ps(normal, x);
}
__attribute__((target("avx512f"))) static size_t adam_avx512(size_t n, float lr_t, float b1,
                                                             float b2, float eps,
                                                             const float *g, float *m,
                                                             float *v, float *w) {
  __m512 vb1 = _mm512_set1_ps(b1), vc1 = _mm512_set1_ps(1 - b1), vb2 = _mm512_set1_ps(b2);
  __m512 vc2 = _mm512_set1_ps(1 - b2), vlr = _mm512_set1_ps(lr_t), veps = _mm512_set1_ps(eps);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 gi = _mm512_loadu_ps(g + i);
    __m512 mi = adam_flush512(_mm512_add_ps(_mm512_mul_ps(vb1, _mm512_loadu_ps(m + i)),
                                            _mm512_mul_ps(vc1, gi)));
    __m512 vi = adam_flush512(_mm512_add_ps(_mm512_mul_ps(vb2, _mm512_loadu_ps(v + i)),
                                            _mm512_mul_ps(_mm512_mul_ps(vc2, gi), gi)));
    __m512 step = _mm512_div_ps(_mm512_mul_ps(vlr, mi), _mm512_add_ps(_mm512_sqrt_ps(vi), veps));
    _mm512_storeu_ps(m + i, mi);
    _mm512_storeu_ps(v + i, vi);
    _mm512_storeu_ps(w + i, adam_flush512(_mm512_sub_ps(_mm512_loadu_ps(w + i), step)));
  }
  return i;
}
__attribute__((target("avx2"))) static inline __m256 adam_flush256(__m256 x) {
  __m256i e = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7f800000));
  __m256i zero = _mm256_cmpeq_epi32(e, _mm256_setzero_si256());
  return _mm256_andnot_ps(_mm256_castsi256_ps(zero), x);
}
__attribute__((target("avx2"))) static size_t adam_avx2(size_t n, float lr_t, float b1,
                                                        float b2, float eps, const float *g,
                                                        float *m, float *v, float *w) {
  __m256 vb1 = _mm256_set1_ps(b1), vc1 = _mm256_set1_ps(1 - b1), vb2 = _mm256_set1_ps(b2);
  __m256 vc2 = _mm256_set1_ps(1 - b2), vlr = _mm256_set1_ps(lr_t), veps = _mm256_set1_ps(eps);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 gi = _mm256_loadu_ps(g + i);
    __m256 mi = adam_flush256(_mm256_add_ps(_mm256_mul_ps(vb1, _mm256_loadu_ps(m + i)),
                                            _mm256_mul_ps(vc1, gi)));
    __m256 vi = adam_flush256(_mm256_add_ps(_mm256_mul_ps(vb2, _mm256_loadu_ps(v + i)),
                                            _mm256_mul_ps(_mm256_mul_ps(vc2, gi), gi)));
    __m256 step = _mm256_div_ps(_mm256_mul_ps(vlr, mi), _mm256_add_ps(_mm256_sqrt_ps(vi), veps));
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    _mm256_storeu_ps(w + i, adam_flush256(_mm256_sub_ps(_mm256_loadu_ps(w + i), step)));
  }
  return i;
}
#define NNT_HAVE_VECTOR_ADAM 1
#endif

/* path: NNT_BLAS_AVX512, NNT_BLAS_AVX2 or lower (the plain loop), taken
 * only where the CPU has it. */
void nnt_cpu_adam_path(int path, size_t n, float lr_t, float b1, float b2, float eps,
                       float wscale, const float *g, float *m, float *v, float *w) {
  unsigned csr = fp_flush_begin();
  if (wscale != 1.0f)
    for (size_t i = 0; i < n; i++)
      w[i] *= wscale;
  size_t i = 0;
#ifdef NNT_HAVE_VECTOR_ADAM
  if (path >= NNT_BLAS_AVX512 && __builtin_cpu_supports("avx512f"))
    i = adam_avx512(n, lr_t, b1, b2, eps, g, m, v, w);
  else if (path >= NNT_BLAS_AVX2 && __builtin_cpu_supports("avx2"))
    i = adam_avx2(n, lr_t, b1, b2, eps, g, m, v, w);
#else
  (void)path;
#endif
  adam_loop(n - i, lr_t, b1, b2, eps, g + i, m + i, v + i, w + i);
  fp_flush_end(csr);
}

static int adam_step1(const nnt_kernels *self, size_t n, float lr_t, float b1, float b2,
                      float eps, float wscale, const float *g, float *m, float *v, float *w,
                      const float *skip) {
  (void)self;
  if (skip && *skip != 0)
    return NNT_OK;
  nnt_cpu_adam_path(NNT_BLAS_AVX512, n, lr_t, b1, b2, eps, wscale, g, m, v, w);
  return NNT_OK;
}

static void sgd_part(void *p, size_t b, size_t e) {
  const ew_job *j = p;
  sgd_step1(j->self, e - b, j->lr, j->g + b, j->out + b, NULL);
}

static int k_sgd_step(const nnt_kernels *self, size_t n, float lr, const float *g, float *w,
                      const float *skip) {
  if (skip && *skip != 0)
    return NNT_OK;
  ew_job j = {.self = self, .lr = lr, .g = g, .out = w};
  nnt_cpu_pool_for(n, 16, EW_MIN_PART, sgd_part, &j);
  return NNT_OK;
}

static void adam_part(void *p, size_t b, size_t e) {
  const ew_job *j = p;
  adam_step1(j->self, e - b, j->lr, j->b1, j->b2, j->eps, j->wscale, j->g + b, j->m + b,
             j->v + b, j->out + b, NULL);
}

static int k_adam_step(const nnt_kernels *self, size_t n, float lr_t, float b1, float b2, float eps,
                       float wscale, const float *g, float *m, float *v, float *w,
                       const float *skip) {
  if (skip && *skip != 0)
    return NNT_OK;
  ew_job j = {.self = self, .lr = lr_t, .b1 = b1, .b2 = b2, .eps = eps, .wscale = wscale,
              .g = g, .m = m, .v = v, .out = w};
  nnt_cpu_pool_for(n, 16, EW_MIN_PART_SLOW, adam_part, &j);
  return NNT_OK;
}

static int k_flag_nonfinite(const nnt_kernels *self, size_t n, const float *x, float *flag,
                            float *any) {
  (void)self;
  if (!flag)
    return NNT_ERR_INVAL;
  for (size_t i = 0; i < n; i++)
    if (!isfinite(x[i])) {
      *flag = 1;
      if (any)
        *any = 1;
      break;
    }
  return NNT_OK;
}

static int k_prepare(const nnt_kernels *self, nnt_err *e) {
  (void)self;
  int rc = nnt_cpu_prepare(e);
  return rc ? rc : nnt_cpu_pool_start(e);
}

const nnt_kernels nnt_cpu_kernel_table = {
    .name = "cpu",
    .prepare = k_prepare,
    .gemm = nnt_cpu_gemm,
    .gemm_rows = nnt_cpu_gemm_rows,
    .fill = k_fill,
    .copy = k_copy,
    .scale = k_scale,
    .clip_scale = k_clip_scale,
    .mask_upper = k_mask_upper,
    .axpy = k_axpy,
    .add = k_add,
    .sub = k_sub,
    .mul = k_mul,
    .dot = k_dot,
    .sum = k_sum,
    .add_row_vec = k_add_row_vec,
    .sum_rows = k_sum_rows,
    .add_col_vec = k_add_col_vec,
    .sum_cols = k_sum_cols,
    .act_fwd = k_act_fwd,
    .act_bwd = k_act_bwd,
    .act_mask = k_act_mask,
    .act_bwd_mask = k_act_bwd_mask,
    .softmax_fwd = k_softmax_fwd,
    .softmax_bwd = k_softmax_bwd,
    .normalize_rows = k_normalize_rows,
    .xent_softmax_fwd = k_xent_softmax_fwd,
    .xent_softmax_bwd = k_xent_softmax_bwd,
    .xent_sigmoid_fwd = k_xent_sigmoid_fwd,
    .xent_sigmoid_bwd = k_xent_sigmoid_bwd,
    .mse_fwd = k_mse_fwd,
    .mse_bwd = k_mse_bwd,
    .argmax_match = k_argmax_match,
    .dropout_mask = k_dropout_mask,
    .bn_fwd_train = nnt_cpu_bn_fwd_train,
    .bn_fwd_infer = nnt_cpu_bn_fwd_infer,
    .bn_bwd = nnt_cpu_bn_bwd,
    .bn_bwd_means = nnt_cpu_bn_bwd_means,
    .bn_affine = nnt_cpu_bn_affine,
    .conv_fwd = nnt_cpu_conv_fwd,
    .conv_bwd_x = nnt_cpu_conv_bwd_x,
    .conv_bwd_x_add = nnt_cpu_conv_bwd_x_add,
    .conv_bwd_w = nnt_cpu_conv_bwd_w,
    .permute3 = nnt_cpu_permute3,
    .copy2d = nnt_cpu_copy2d,
    .im2col = nnt_cpu_im2col,
    .col2im = nnt_cpu_col2im,
    .col2im_set = nnt_cpu_col2im_set,
    .pool_fwd = nnt_cpu_pool_fwd,
    .pool_bwd = nnt_cpu_pool_bwd,
    .upsample_nearest_fwd = nnt_cpu_upsample_nearest_fwd,
    .upsample_nearest_bwd = nnt_cpu_upsample_nearest_bwd,
    .sgd_step = k_sgd_step,
    .adam_step = k_adam_step,
    .flag_nonfinite = k_flag_nonfinite,
    .gather_rows = nnt_cpu_gather_rows,
    .scatter_add_rows = nnt_cpu_scatter_add_rows,
    .ln_fwd = nnt_cpu_ln_fwd,
    .ln_bwd = nnt_cpu_ln_bwd,
    .pos_encoding = nnt_cpu_pos_encoding,
    .div = nnt_cpu_div,
    .conv_wino = nnt_cpu_conv_wino,
    .conv_wino_dw = nnt_cpu_conv_wino_dw,
    .parallel = nnt_cpu_parallel,
};

/* The CPU kernel table: static, never freed. */
const nnt_kernels *nnt_kernels_cpu(void) { return &nnt_cpu_kernel_table; }
