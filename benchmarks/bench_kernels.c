/* Kernel efficiency: the fully_connected layer's forward at the MLP's shapes
 * and conv2d's forward, gradient (dW, db) and derivative (dX) at the
 * benchmark models' shapes (LeNet-5, the Fashion-MNIST CNN, the conv-BN-ReLU
 * net, ResNet-18's four stages) and a 1x1 one, each against one bare
 * cblas_sgemm of the same FLOPs (conv: the whole batch's im2col product in
 * one gemm, transposed as the layer's). Prints JSON lines with GFLOP/s and
 * their ratio (medians of 21 runs each: three blocks of 7 of the layer's
 * op alternating with three of the sgemm's, time_pair). With
 * NNTRAINER_THREADS=T > 1 the layer runs as a model's step does, its ops
 * split over the compute pool's T threads (OpenBLAS on one thread inside
 * each part: cpu_pool.c), and the bare sgemm on OpenBLAS's own T threads
 * (the pool stopped meanwhile). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nntrainer/compute/cpu_impl.h"
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

/* Aligned to a cache line, as the planner places every tensor
 * (NNT_MGR_ALIGN): malloc's 16 bytes off a line would split each vector
 * store of a layer's output in two. */
static float *rnd(size_t n) {
  size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
  float *x = aligned_alloc(64, bytes ? bytes : 64);
  if (!x)
    exit(1);
  for (size_t i = 0; i < n; i++)
    x[i] = (float)rand() / RAND_MAX - 0.5f;
  return x;
}

/* OP_DERIV_ADD: the derivative added into a fan-out's sum, as a model
 * runs it where the layer says it can (NNT_LF_DERIV_ADDS: ResNet-18's
 * shortcuts on an AVX-512 CPU) */
enum { OP_FWD, OP_GRAD, OP_DERIV, OP_DERIV_ADD };

/* Each measurement first runs its op untimed until WARM_S seconds have
 * passed (at least twice): a thread that was idle (a compute pool just
 * started, OpenBLAS's threads woken) runs at a lower clock for tens of
 * milliseconds, which a training step never sees. Measured on the Zen 4
 * VM: a fresh pool's first 8 runs of a 2 ms op (the pointwise forward at
 * two threads) took 4.3-5.0 ms each, one thread's pace, the rest 2.0-2.2. */
#define WARM_S 0.1
static int warming(double t0, int r) { return r < 2 || now_s() - t0 < WARM_S; }

/* A layer ready to time: its weights, tensors and run context. */
typedef struct lay_bench {
  nnt_layer *l;
  nnt_finalize_ctx fc;
  nnt_tensor x, dx, y, dy, w[2], gw[2], s[NNT_MAX_SCRATCH];
  nnt_run_ctx c;
  const char *type;
} lay_bench;

static void lay_setup(lay_bench *lb, const char *type, const char *const *props, nnt_dim in) {
  nnt_err e = {0};
  memset(lb, 0, sizeof *lb);
  lb->type = type;
  if (nnt_layer_create(type, &lb->l, &e))
    exit(1);
  for (size_t i = 0; props[i]; i += 2)
    if (nnt_layer_set_property(lb->l, props[i], props[i + 1], &e)) {
      fprintf(stderr, "%s\n", e.msg);
      exit(1);
    }
  nnt_finalize_ctx *fc = &lb->fc;
  fc->n_in = fc->n_out = 1, fc->in_dim[0] = in, fc->batch = in.b;
  fc->trainable = 1; /* as in a model that trains the layer */
  if (lb->l->ops->finalize(lb->l, fc, &e)) {
    fprintf(stderr, "%s\n", e.msg);
    exit(1);
  }
  lb->x = (nnt_tensor){.dim = in, .data = rnd(nnt_dim_len(in))};
  lb->dx = (nnt_tensor){.dim = in, .data = rnd(nnt_dim_len(in))};
  lb->y = (nnt_tensor){.dim = fc->out_dim[0], .data = rnd(nnt_dim_len(fc->out_dim[0]))};
  lb->dy = (nnt_tensor){.dim = fc->out_dim[0], .data = rnd(nnt_dim_len(fc->out_dim[0]))};
  for (unsigned i = 0; i < fc->n_w; i++) {
    lb->w[i] = (nnt_tensor){.dim = fc->w[i].dim, .data = rnd(nnt_dim_len(fc->w[i].dim))};
    lb->gw[i] = (nnt_tensor){.dim = fc->w[i].dim, .data = rnd(nnt_dim_len(fc->w[i].dim))};
  }
  for (unsigned i = 0; i < fc->n_scratch; i++)
    lb->s[i] = (nnt_tensor){.dim = fc->scratch_dim[i],
                            .data = rnd(nnt_dim_len(fc->scratch_dim[i]))};
  lb->c = (nnt_run_ctx){.k = nnt_kernels_cpu(), .n_in = 1, .n_out = 1, .n_w = fc->n_w,
                        .n_scratch = fc->n_scratch, .in = &lb->x, .out = &lb->y,
                        .d_in = &lb->dx, .d_out = &lb->dy, .w = lb->w, .gw = lb->gw,
                        .scratch = lb->s, .training = 1};
}

static void lay_free(lay_bench *lb) {
  free(lb->x.data), free(lb->y.data), free(lb->dx.data), free(lb->dy.data);
  for (unsigned i = 0; i < lb->fc.n_w; i++)
    free(lb->w[i].data), free(lb->gw[i].data);
  for (unsigned i = 0; i < lb->fc.n_scratch; i++)
    free(lb->s[i].data);
  nnt_layer_destroy(lb->l);
}

/* Seconds of `reps` runs of the layer's forward, calc_gradient or
 * calc_derivative (op), into t, after the untimed warm-up. */
static void lay_time(lay_bench *lb, int op, int reps, double *t) {
  nnt_err e = {0};
  if (nnt_cpu_pool_start(&e)) { /* T - 1 workers, as a run's prepare starts */
    fprintf(stderr, "%s\n", e.msg);
    exit(1);
  }
  nnt_layer *l = lb->l;
  lb->c.d_add = op == OP_DERIV_ADD;
  double w0 = now_s();
  /* r < 0: untimed (WARM_S) */
  for (int r = -1, w = 0; r < reps; r++) {
    if (r < 0 && warming(w0, w++))
      r = -2; /* one more untimed run */
    double t0 = now_s();
    int rc = op == OP_FWD    ? l->ops->forward(l, &lb->c)
             : op == OP_GRAD ? l->ops->calc_gradient(l, &lb->c)
                             : l->ops->calc_derivative(l, &lb->c);
    if (r >= 0)
      t[r] = now_s() - t0;
    if (rc) {
      fprintf(stderr, "%s: op %d failed: %s\n", lb->type, op, nnt_strerror(rc));
      exit(1);
    }
  }
  nnt_cpu_pool_stop(); /* OpenBLAS's own threads again, for the bare sgemm */
}

/* Seconds of `reps` sgemms op(A) op(B), m x n x k, into t, after the
 * warm-up. */
static void gemm_time(int ta, int tb, size_t m, size_t n, size_t k, int reps, double *t) {
  float *a = rnd(m * k), *b = rnd(k * n), *c = rnd(m * n);
  double w0 = now_s();
  for (int r = -1, w = 0; r < reps; r++) {
    if (r < 0 && warming(w0, w++))
      r = -2;
    double t0 = now_s();
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, 1.0f, a, ta ? (int)m : (int)k, b, tb ? (int)k : (int)n,
                0.0f, c, (int)n);
    if (r >= 0)
      t[r] = now_s() - t0;
  }
  free(a), free(b), free(c);
}

/* The layer's op and its bare sgemm (op(A) op(B), m x n x k) timed in
 * ROUNDS alternating blocks of `reps` runs each: the VM's speed drifts
 * over seconds (a bare sgemm measured 66 to 92 GFLOP/s within a minute
 * on the Zen 2), and one block of each would compare two different
 * machines. The medians of all runs of each, in *tl and *tg; 0 in both
 * for OP_DERIV_ADD where the layer does not add its derivative. */
#define ROUNDS 3
#define MAX_REPS 7
static void time_pair(const char *type, const char *const *props, nnt_dim in, int op, int reps,
                      int ta, int tb, size_t m, size_t n, size_t k, double *tl, double *tg) {
  double l[ROUNDS * MAX_REPS], g[ROUNDS * MAX_REPS];
  if (reps > MAX_REPS)
    reps = MAX_REPS;
  lay_bench lb;
  lay_setup(&lb, type, props, in);
  *tl = *tg = 0;
  if (op == OP_DERIV_ADD && !(lb.fc.flags & NNT_LF_DERIV_ADDS)) {
    lay_free(&lb);
    return;
  }
  for (int i = 0; i < ROUNDS; i++) {
    lay_time(&lb, op, reps, l + i * reps);
    gemm_time(ta, tb, m, n, k, reps, g + i * reps);
  }
  lay_free(&lb);
  qsort(l, ROUNDS * reps, sizeof *l, cmp_double);
  qsort(g, ROUNDS * reps, sizeof *g, cmp_double);
  *tl = l[ROUNDS * reps / 2], *tg = g[ROUNDS * reps / 2];
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
  nnt_cpu_pool_hold(); /* as a model does: the layer's ops run on the pool */
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
    double tl, tg;
    time_pair("fully_connected", p, nnt_dim_make(64, 1, 1, fc[i][0]), OP_FWD, 7, 0, 0, 64,
              fc[i][1], fc[i][0], &tl, &tg);
    snprintf(name, sizeof name, "fc %ux%u batch 64", fc[i][0], fc[i][1]);
    report(name, 2.0 * 64 * fc[i][0] * fc[i][1], tl, tg);
  }
  /* conv2d at the benchmark models' shapes, batch 32: forward is
   * filters x (32 plane) x patch, gradient filters x patch x (32 plane),
   * derivative patch x (32 plane) x filters (patch = c kh kw) */
  static const struct {
    const char *model;
    unsigned c, hw, f, k, pad, stride;
  } cv[] = {
      {"lenet5 c1", 1, 28, 6, 5, 2, 1},    {"lenet5 c2", 6, 14, 16, 5, 0, 1},
      {"fmnist_cnn c1", 1, 28, 16, 3, 1, 1}, {"fmnist_cnn c2", 16, 14, 32, 3, 1, 1},
      {"convbn c1", 3, 64, 32, 3, 1, 1},   {"convbn c2", 32, 32, 64, 3, 1, 1},
      {"convbn c3", 64, 16, 128, 3, 1, 1}, {"resnet18 stage1", 64, 32, 64, 3, 1, 1},
      {"resnet18 stage2", 128, 16, 128, 3, 1, 1}, {"resnet18 stage3", 256, 8, 256, 3, 1, 1},
      {"resnet18 stage4", 512, 4, 512, 3, 1, 1}, {"pointwise", 64, 32, 64, 1, 0, 1},
      /* ResNet-18's downsampling: each stage's first conv and its shortcut */
      {"resnet18 res2a_c1", 64, 32, 128, 3, 1, 2}, {"resnet18 res3a_c1", 128, 16, 256, 3, 1, 2},
      {"resnet18 res4a_c1", 256, 8, 512, 3, 1, 2}, {"resnet18 res2a_sc", 64, 32, 128, 1, 0, 2},
      {"resnet18 res3a_sc", 128, 16, 256, 1, 0, 2}, {"resnet18 res4a_sc", 256, 8, 512, 1, 0, 2},
  };
  const char *opname[] = {"forward", "gradient", "derivative", "derivative added into a sum"};
  const char *only = getenv("BENCH_CONV_ONLY"); /* a substring of the model name */
  for (size_t i = 0; i < sizeof cv / sizeof cv[0]; i++) {
    unsigned c = cv[i].c, hw = cv[i].hw, f = cv[i].f, k = cv[i].k, pad = cv[i].pad;
    unsigned st = cv[i].stride;
    if (only && !strstr(cv[i].model, only))
      continue;
    unsigned o = (hw + 2 * pad - k) / st + 1;
    char filters[16], ks[16], pd[16], sd[16], name[128];
    snprintf(filters, sizeof filters, "%u", f);
    snprintf(ks, sizeof ks, "%u", k);
    snprintf(pd, sizeof pd, "%u", pad);
    snprintf(sd, sizeof sd, "%u", st);
    const char *p[] = {"filters", filters, "kernel_size", ks, "padding", pd, "stride", sd, NULL};
    size_t np = (size_t)32 * o * o, patch = (size_t)c * k * k;
    for (int op = 0; op <= OP_DERIV_ADD; op++) {
      double tl, tg;
      nnt_dim in = nnt_dim_make(32, c, hw, hw);
      if (op == OP_FWD)
        time_pair("conv2d", p, in, op, 7, 0, 0, f, np, patch, &tl, &tg);
      else if (op == OP_GRAD)
        time_pair("conv2d", p, in, op, 7, 0, 1, f, patch, np, &tl, &tg);
      else
        time_pair("conv2d", p, in, op, 7, 1, 0, patch, np, f, &tl, &tg);
      if (!tl)
        continue;
      snprintf(name, sizeof name, "conv2d %s %ux%u%s %u->%u %ux%u batch 32 %s", cv[i].model, k,
               k, st > 1 ? " stride 2" : "", c, f, hw, hw, opname[op]);
      report(name, 2.0 * np * f * patch, tl, tg);
    }
  }
  return 0;
}
