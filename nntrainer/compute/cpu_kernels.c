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

/* The element-wise activations on the compute threads (cpu_pool.c; the
 * optimizer updates likewise in cpu_update.c): each part is the one-thread entry on a slice of
 * the elements (a mask's at multiples of 32, one word each), so every
 * output is computed as on one thread. Parts of at least EW_MIN_PART
 * elements (EW_MIN_PART_SLOW for the activations that call exp, erf or
 * tanh). */
#define EW_MIN_PART 16384
#define EW_MIN_PART_SLOW 2048

typedef struct ew_job {
  const nnt_kernels *self;
  nnt_act a;
  float alpha;
  const float *x, *y, *dy, *mask;
  float *out;
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
    .bn_fwd_stats = nnt_cpu_bn_fwd_stats,
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
    .sgd_step = nnt_cpu_sgd_step,
    .adam_step = nnt_cpu_adam_step,
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
