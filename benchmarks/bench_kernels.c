/* Kernel efficiency: the fully_connected layer's forward at the MLP's shapes
 * and conv2d's forward at the Fashion-MNIST CNN's shapes and a 1x1 one, against a bare
 * cblas_sgemm of the same shapes (conv: the im2col shapes). Prints JSON
 * lines with GFLOP/s and their ratio (median of 21 runs each). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nntrainer/layer.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static float *rnd(size_t n) {
  float *x = malloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++)
    x[i] = (float)rand() / RAND_MAX - 0.5f;
  return x;
}

/* Median seconds of `reps` runs of a layer forward. */
static double time_layer(const char *type, const char *const *props, nnt_dim in) {
  nnt_layer *l;
  nnt_err e = {0};
  if (nnt_layer_create(type, &l, &e))
    exit(1);
  for (size_t i = 0; props[i]; i += 2)
    nnt_layer_set_property(l, props[i], props[i + 1], &e);
  nnt_finalize_ctx fc = {0};
  fc.n_in = fc.n_out = 1, fc.in_dim[0] = in, fc.batch = in.b;
  if (l->ops->finalize(l, &fc, &e)) {
    fprintf(stderr, "%s\n", e.msg);
    exit(1);
  }
  nnt_tensor x = {.dim = in, .data = rnd(nnt_dim_len(in))};
  nnt_tensor y = {.dim = fc.out_dim[0], .data = rnd(nnt_dim_len(fc.out_dim[0]))};
  nnt_tensor w[2], s[NNT_MAX_SCRATCH];
  for (unsigned i = 0; i < fc.n_w; i++)
    w[i] = (nnt_tensor){.dim = fc.w[i].dim, .data = rnd(nnt_dim_len(fc.w[i].dim))};
  for (unsigned i = 0; i < fc.n_scratch; i++)
    s[i] = (nnt_tensor){.dim = fc.scratch_dim[i], .data = rnd(nnt_dim_len(fc.scratch_dim[i]))};
  nnt_run_ctx c = {.k = nnt_kernels_cpu(), .n_in = 1, .n_out = 1, .n_w = fc.n_w,
                   .n_scratch = fc.n_scratch, .in = &x, .out = &y, .w = w, .scratch = s,
                   .training = 1};
  double t[21];
  for (int r = 0; r < 21; r++) {
    double t0 = now_s();
    int rc = l->ops->forward(l, &c);
    t[r] = now_s() - t0;
    if (rc) {
      fprintf(stderr, "%s: forward failed: %s\n", type, nnt_strerror(rc));
      exit(1);
    }
  }
  qsort(t, 21, sizeof *t, cmp_double);
  free(x.data), free(y.data);
  for (unsigned i = 0; i < fc.n_w; i++)
    free(w[i].data);
  for (unsigned i = 0; i < fc.n_scratch; i++)
    free(s[i].data);
  nnt_layer_destroy(l);
  return t[10];
}

/* Median seconds of `times` back-to-back sgemms of m x n x k. */
static double time_gemm(size_t m, size_t n, size_t k, int times) {
  float *a = rnd(m * k), *b = rnd(k * n), *c = rnd(m * n);
  double t[21];
  for (int r = 0; r < 21; r++) {
    double t0 = now_s();
    for (int i = 0; i < times; i++)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a,
                  (int)k, b, (int)n, 0.0f, c, (int)n);
    t[r] = now_s() - t0;
  }
  qsort(t, 21, sizeof *t, cmp_double);
  free(a), free(b), free(c);
  return t[10];
}

static void report(const char *name, double flops, double t_layer, double t_gemm) {
  printf("{\"kernel\":\"%s\",\"layer_gflops\":%.2f,\"sgemm_gflops\":%.2f,\"ratio\":%.3f}\n",
         name, flops / t_layer / 1e9, flops / t_gemm / 1e9, t_gemm / t_layer);
}

int main(void) {
  const char *t = getenv("NNTRAINER_THREADS");
  nnt_err e = {0};
  if (nnt_cpu_set_threads(t ? (unsigned)atoi(t) : 0, &e)) {
    fprintf(stderr, "%s\n", e.msg);
    return 1;
  }
  /* fully_connected at the MLP's shapes, batch 64 */
  /* wake OpenBLAS's threads and the clock before the first measurement,
   * which otherwise pays for both */
  for (int w = 0; w < 5; w++)
    time_gemm(64, 256, 784, 1);
  const unsigned fc[][2] = {{784, 256}, {256, 256}, {256, 10}};
  for (int i = 0; i < 3; i++) {
    char unit[16], name[64];
    snprintf(unit, sizeof unit, "%u", fc[i][1]);
    const char *p[] = {"unit", unit, NULL};
    double tl = time_layer("fully_connected", p, nnt_dim_make(64, 1, 1, fc[i][0]));
    double tg = time_gemm(64, fc[i][1], fc[i][0], 1);
    snprintf(name, sizeof name, "fc %ux%u batch 64", fc[i][0], fc[i][1]);
    report(name, 2.0 * 64 * fc[i][0] * fc[i][1], tl, tg);
  }
  /* conv2d at the Fashion-MNIST CNN's shapes, batch 32: per image one sgemm
   * of filters x (oh*ow) x (c*kh*kw); then a pointwise (1x1) conv at a
   * ResNet-like shape, which needs no im2col */
  const unsigned cv[][4] = {{1, 28, 16, 3}, {16, 14, 32, 3}, {64, 32, 64, 1}};
  for (int i = 0; i < 3; i++) {
    unsigned c = cv[i][0], hw = cv[i][1], f = cv[i][2], k = cv[i][3];
    char filters[16], ks[16], name[64];
    snprintf(filters, sizeof filters, "%u", f);
    snprintf(ks, sizeof ks, "%u", k);
    const char *p[] = {"filters", filters, "kernel_size", ks, "padding", "same", NULL};
    double tl = time_layer("conv2d", p, nnt_dim_make(32, c, hw, hw));
    double tg = time_gemm(f, (size_t)hw * hw, (size_t)c * k * k, 32);
    snprintf(name, sizeof name, "conv2d %ux%u %u->%u %ux%u batch 32", k, k, c, f, hw, hw);
    report(name, 2.0 * 32 * f * hw * hw * c * k * k, tl, tg);
  }
  return 0;
}
