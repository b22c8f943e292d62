/* SGEMM throughput of the Vulkan backend: C = op(A) op(B) for square
 * n x n matrices (defaults 1024, 2048, 4096) or m x n x k shapes. Each run records `calls` gemm calls
 * through the backend's kernel table and waits for them (synchronize: one
 * vkQueueSubmit and a fence wait); a run's time is its wall time over
 * calls. Prints per size the variant that ran, the median of the runs in
 * ms per call and TFLOP/s (2 n^3 flops per call), then the backend's gemm
 * report. benchmarks/gemm_peer.py times torch.matmul on CUDA at the same
 * sizes.
 *   nnt_bench_vk_gemm [--sizes 1024,2048,4096 | --shapes MxNxK,...] [--runs 9]
 *                     [--calls 5] [--path auto|tile128|tile64|small32|splitk]
 *                     [--ta] [--tb]
 * NNTRAINER_VULKAN_DEVICE picks the device (docs/gpu.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nntrainer/compute/backend.h"
#include "nntrainer/vulkan/vk.h"
#include "nntrainer/vulkan/vk_impl.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static const char *const PATHS[VK_GEMM__COUNT] = {"auto", "tile128", "tile64", "small32",
                                                   "splitk"};

static int usage(void) {
  fprintf(stderr, "usage: nnt_bench_vk_gemm [--sizes N,N,... | --shapes MxNxK,...] [--runs R] "
                  "[--calls C] [--path auto|tile128|tile64|small32|splitk] [--ta] [--tb]\n");
  return 2;
}

int main(int argc, char **argv) {
  size_t shp[32][3] = {{1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096}}, n_sizes = 3;
  int runs = 9, calls = 5, ta = 0, tb = 0;
  vk_gemm_path force = VK_GEMM_AUTO;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
      n_sizes = 0;
      for (char *s = strtok(argv[++i], ","); s && n_sizes < 32; s = strtok(NULL, ",")) {
        size_t v = strtoul(s, NULL, 10);
        shp[n_sizes][0] = shp[n_sizes][1] = shp[n_sizes][2] = v;
        n_sizes++;
      }
    } else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) {
      n_sizes = 0;
      for (char *s = strtok(argv[++i], ","); s && n_sizes < 32; s = strtok(NULL, ",")) {
        size_t *d = shp[n_sizes++];
        if (sscanf(s, "%zux%zux%zu", &d[0], &d[1], &d[2]) != 3)
          return usage();
      }
    } else if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
      runs = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--calls") && i + 1 < argc) {
      calls = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--path") && i + 1 < argc) {
      const char *p = argv[++i];
      int k = 0;
      while (k < VK_GEMM__COUNT && strcmp(PATHS[k], p))
        k++;
      if (k == VK_GEMM__COUNT)
        return usage();
      force = (vk_gemm_path)k;
    } else if (!strcmp(argv[i], "--ta")) {
      ta = 1;
    } else if (!strcmp(argv[i], "--tb")) {
      tb = 1;
    } else {
      return usage();
    }
  }
  if (runs < 1 || calls < 1 || !n_sizes)
    return usage();
  nnt_backend *be;
  nnt_err e = {0};
  if (nnt_backend_get(NNT_ENGINE_GPU, &be, &e)) {
    fprintf(stderr, "%s\n", e.msg);
    return 1;
  }
  printf("device: %s\n", be->device);
  vk_ctx *c = be->ctx;
  nnt_vk_gemm_force(c, force);
  int rc = 0;
  for (size_t s = 0; s < n_sizes && !rc; s++) {
    size_t m = shp[s][0], n = shp[s][1], k = shp[s][2];
    size_t na = m * k, nb = k * n, nc = m * n, big = na > nb ? na : nb;
    big = big > nc ? big : nc;
    nnt_buffer *ba = NULL, *bb = NULL, *bc = NULL;
    float *h = malloc(big * sizeof(float));
    for (size_t i = 0; h && i < big; i++)
      h[i] = (float)rand() / RAND_MAX - 0.5f;
    if (!h || nnt_buffer_alloc(be->buft, na * sizeof(float), "A", &ba, &e) ||
        nnt_buffer_alloc(be->buft, nb * sizeof(float), "B", &bb, &e) ||
        nnt_buffer_alloc(be->buft, nc * sizeof(float), "C", &bc, &e) ||
        ba->type->set(ba, 0, h, na * sizeof(float), &e) ||
        bb->type->set(bb, 0, h, nb * sizeof(float), &e)) {
      fprintf(stderr, "%zux%zux%zu: %s\n", m, n, k, e.msg);
      rc = 1;
    }
    vk_gemm_plan pl = {0};
    double *t = calloc((size_t)runs, sizeof *t);
    if (!rc && (!t || nnt_vk_gemm_plan(c, m, n, k, force, &pl)))
      rc = 1;
    size_t lda = ta ? m : k, ldb = tb ? k : n;
    /* one warm-up run (pipeline creation, first touch), then the timed ones */
    for (int r = -1; r < runs && !rc; r++) {
      double t0 = now_s();
      for (int q = 0; q < calls && !rc; q++)
        rc = be->k->gemm(be->k, ta, tb, m, n, k, 1.0f, nnt_buffer_at(ba, 0), lda,
                         nnt_buffer_at(bb, 0), ldb, 0.0f, nnt_buffer_at(bc, 0), n);
      if (!rc)
        rc = be->synchronize(be, &e);
      if (r >= 0)
        t[r] = (now_s() - t0) / calls;
    }
    if (rc) {
      fprintf(stderr, "%zux%zux%zu: gemm failed (%d) %s\n", m, n, k, rc, e.msg);
    } else {
      qsort(t, (size_t)runs, sizeof *t, cmp_double);
      double med = t[runs / 2], flops = 2.0 * m * n * k;
      if (m == n && n == k)
        printf("sgemm n=%zu", n);
      else
        printf("sgemm %zux%zux%zu", m, n, k);
      printf(" ta=%d tb=%d path=%s: median %.3f ms (min %.3f, max %.3f; %d runs x "
             "%d calls) %.3f TFLOP/s\n",
             ta, tb, PATHS[pl.path], med * 1e3, t[0] * 1e3, t[runs - 1] * 1e3, runs, calls,
             flops / med / 1e12);
    }
    free(t), free(h);
    nnt_buffer_free(ba), nnt_buffer_free(bb), nnt_buffer_free(bc);
  }
  char rep[192];
  nnt_vulkan_gemm_report(be, rep, sizeof rep);
  printf("%s\n", rep);
  nnt_backend_free(be);
  return rc;
}
