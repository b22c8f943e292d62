/* The Vulkan backend's SGEMM variants (nntrainer/vulkan/vk_gemm.c) on
 * whatever device the machine has (lavapipe in CI), with the validation
 * layer on: the choice by shape (a table of shapes and the variant each
 * gets, split-k's slices covering k exactly, work-group limits refused);
 * every variant, forced, against the CPU's gemm at the edges of its tile
 * (1, tile - 1, tile, tile + 1, k not a multiple of the slice depth, k = 0),
 * in the four transpose forms, with leading dimensions wider than the
 * rows, nonzero buffer offsets, beta 0 over NaN and beta 0.5, and the
 * padding between rows of C left alone; each variant chosen by shape once,
 * and nnt_vulkan_gemm_report saying which ran; two threads' split-k calls
 * on one instance kept apart. A build without Vulkan has nothing to test. */
#include "test_util.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/compute/backend.h"

#ifndef NNT_HAVE_VULKAN

int main(void) { return tu_main_without_vulkan(); }

#else

#include "nntrainer/vulkan/vk.h"
#include "nntrainer/vulkan/vk_impl.h"

/* ---- the choice by shape ------------------------------------------------- */

static void test_plan_by_shape(void **state) {
  (void)state;
  static const struct {
    size_t m, n, k;
    vk_gemm_path want;
  } T[] = {
      {2048, 2048, 2048, VK_GEMM_TILE128}, /* 256 tiles of 128 x 128 */
      {1536, 1408, 1024, VK_GEMM_TILE128}, /* 12 x 11 = 132 of them */
      {1536, 1408, 1023, VK_GEMM_TILE64},  /* too shallow for them */
      {576, 11264, 64, VK_GEMM_TILE64},    /* a convolution's derivative */
      {1024, 1024, 1024, VK_GEMM_TILE64}, /* 64 big tiles: too few; 256 small */
      {300, 300, 300, VK_GEMM_TILE64},
      {33, 33, 5, VK_GEMM_TILE64},
      {32, 4096, 4096, VK_GEMM_SMALL32},  /* a dense layer's batch of 32 */
      {4096, 8, 100, VK_GEMM_SMALL32},
      {1, 1, 1, VK_GEMM_SMALL32},
      {64, 64, 50000, VK_GEMM_SPLITK},    /* a weight gradient */
      {16, 16, 4096, VK_GEMM_SPLITK},
      {256, 512, 4096, VK_GEMM_SPLITK},   /* 32 tiles of 64 x 64 */
      {256, 576, 4096, VK_GEMM_SPLITK},   /* 36 of them: too few for the GPU */
      {64, 11264, 576, VK_GEMM_SPLITK},   /* a convolution's forward: 176 */
      {1024, 960, 512, VK_GEMM_SPLITK},   /* 240 */
      {1024, 1024, 512, VK_GEMM_TILE64},  /* 256 */
      {64, 11264, 511, VK_GEMM_TILE64},   /* too shallow to split */
      {64, 64, 500, VK_GEMM_TILE64},
      {8, 300, 1000, VK_GEMM_SMALL32},    /* k below 1024, m below 33 */
  };
  for (size_t i = 0; i < sizeof T / sizeof *T; i++) {
    vk_gemm_plan pl;
    assert_int_equal(nnt_vk_gemm_plan(NULL, T[i].m, T[i].n, T[i].k, VK_GEMM_AUTO, &pl), NNT_OK);
    if (pl.path != T[i].want)
      fail_msg("m=%zu n=%zu k=%zu: path %d, want %d", T[i].m, T[i].n, T[i].k, pl.path, T[i].want);
    if (pl.path == VK_GEMM_SPLITK) {
      /* the slices cover k, none empty, depth a multiple of 16 */
      assert_true(pl.slices >= 2 && pl.chunk % 16 == 0);
      assert_true((size_t)pl.slices * pl.chunk >= T[i].k);
      assert_true((size_t)(pl.slices - 1) * pl.chunk < T[i].k);
      assert_int_equal(pl.tiles_m, (T[i].m + 63) / 64);
      assert_int_equal(pl.gy, pl.tiles_m * pl.slices);
    }
  }
  vk_gemm_plan pl;
  /* a weight gradient: 64 slices of 784 */
  assert_int_equal(nnt_vk_gemm_plan(NULL, 64, 64, 50000, VK_GEMM_AUTO, &pl), NNT_OK);
  assert_int_equal(pl.slices, 64);
  assert_int_equal(pl.chunk, 784);
  /* forced split-k: slices of 64; with k = 0 nothing to split */
  assert_int_equal(nnt_vk_gemm_plan(NULL, 10, 10, 300, VK_GEMM_SPLITK, &pl), NNT_OK);
  assert_int_equal(pl.path, VK_GEMM_SPLITK);
  assert_int_equal(pl.slices, 5);
  assert_int_equal(nnt_vk_gemm_plan(NULL, 10, 10, 0, VK_GEMM_SPLITK, &pl), NNT_OK);
  assert_int_equal(pl.path, VK_GEMM_TILE64);
  /* nor when the partial sums would pass the scratch limit (4 Mi floats) */
  assert_int_equal(nnt_vk_gemm_plan(NULL, 2048, 1024, 128, VK_GEMM_SPLITK, &pl), NNT_OK);
  assert_int_equal(pl.path, VK_GEMM_SPLITK);
  assert_int_equal(nnt_vk_gemm_plan(NULL, 2048, 1024, 129, VK_GEMM_SPLITK, &pl), NNT_OK);
  assert_int_equal(pl.path, VK_GEMM_TILE64);
  assert_int_equal(nnt_vk_gemm_plan(NULL, (size_t)1 << 32, (size_t)1 << 32, 64, VK_GEMM_SPLITK,
                                    &pl),
                   NNT_ERR_INVAL); /* no overflow in m n: too many groups for tile64 */
  /* more work groups than the device allows (65535 with no device) */
  assert_int_equal(nnt_vk_gemm_plan(NULL, 1, 65535u * 32 + 1, 1, VK_GEMM_AUTO, &pl),
                   NNT_ERR_INVAL);
  assert_int_equal(nnt_vk_gemm_plan(NULL, 1, 65535u * 32, 1, VK_GEMM_AUTO, &pl), NNT_OK);
  assert_int_equal(pl.gx, 65535);
}

/* ---- every variant against the CPU --------------------------------------- */

typedef struct shape {
  size_t m, n, k;
} shape;

#define MAXE (320 * 330) /* floats in each test buffer */

typedef struct bufs {
  nnt_backend *be;
  nnt_buffer *a, *b, *c;
  float *ha, *hb, *hc, *ref;
  nnt_rng r;
} bufs;

static void bufs_open(bufs *t, nnt_backend *be) {
  nnt_err e = {0};
  t->be = be;
  assert_int_equal(nnt_buffer_alloc(be->buft, MAXE * 4 + 256, "a", &t->a, &e), NNT_OK);
  assert_int_equal(nnt_buffer_alloc(be->buft, MAXE * 4 + 256, "b", &t->b, &e), NNT_OK);
  assert_int_equal(nnt_buffer_alloc(be->buft, MAXE * 4 + 256, "c", &t->c, &e), NNT_OK);
  t->ha = malloc(MAXE * 4), t->hb = malloc(MAXE * 4), t->hc = malloc(MAXE * 4);
  t->ref = malloc(MAXE * 4);
  nnt_rng_seed(&t->r, 12);
}

static void bufs_close(bufs *t) {
  nnt_buffer_free(t->a), nnt_buffer_free(t->b), nnt_buffer_free(t->c);
  free(t->ha), free(t->hb), free(t->hc), free(t->ref);
}

/* One gemm on the GPU and the CPU; A, B and C sit 64, 128 and 192 bytes
 * into their buffers (nonzero element offsets), leading dimensions 3, 5
 * and 2 wider than needed. Fails with the case named. */
static void one(bufs *t, int ta, int tb, shape s, float beta, const char *variant) {
  const nnt_kernels *cpu = nnt_kernels_cpu();
  nnt_err e = {0};
  size_t lda = (ta ? s.m : s.k) + 3, ldb = (tb ? s.k : s.n) + 5, ldc = s.n + 2;
  size_t na = (ta ? s.k : s.m) * lda, nb = (tb ? s.n : s.k) * ldb, nc = s.m * ldc;
  assert_true(na <= MAXE && nb <= MAXE && nc <= MAXE);
  tu_fill_uniform(&t->r, t->ha, na, -1, 1);
  tu_fill_uniform(&t->r, t->hb, nb, -1, 1);
  tu_fill_uniform(&t->r, t->hc, nc, -1, 1);
  for (size_t i = 0; !beta && i < s.m; i++)
    for (size_t j = 0; j < s.n; j++)
      t->hc[i * ldc + j] = NAN; /* beta 0 does not read C */
  memcpy(t->ref, t->hc, nc * 4);
  if (na)
    assert_int_equal(t->a->type->set(t->a, 64, t->ha, na * 4, &e), NNT_OK);
  if (nb)
    assert_int_equal(t->b->type->set(t->b, 128, t->hb, nb * 4, &e), NNT_OK);
  assert_int_equal(t->c->type->set(t->c, 192, t->hc, nc * 4, &e), NNT_OK);
  const nnt_kernels *k = t->be->k;
  assert_int_equal(k->gemm(k, ta, tb, s.m, s.n, s.k, 1.5f, nnt_buffer_at(t->a, 64), lda,
                           nnt_buffer_at(t->b, 128), ldb, beta, nnt_buffer_at(t->c, 192), ldc),
                   NNT_OK);
  assert_int_equal(cpu->gemm(cpu, ta, tb, s.m, s.n, s.k, 1.5f, t->ha, lda, t->hb, ldb, beta,
                             t->ref, ldc),
                   NNT_OK);
  assert_int_equal(t->c->type->get(t->c, 192, t->hc, nc * 4, &e), NNT_OK);
  double worst = 0, big = 1;
  for (size_t i = 0; i < nc; i++)
    big = fabs(t->ref[i]) > big ? fabs(t->ref[i]) : big;
  for (size_t i = 0; i < nc; i++) {
    double d = fabs((double)t->hc[i] - t->ref[i]) / big;
    worst = d > worst || isnan(d) ? d : worst;
  }
  if (!(worst <= 1e-5))
    fail_msg("gemm %s ta=%d tb=%d m=%zu n=%zu k=%zu beta=%g: max error %g", variant, ta, tb, s.m,
             s.n, s.k, beta, worst);
}

static const struct {
  vk_gemm_path path;
  const char *name;
  shape s[8];
} CASES[] = {
    {VK_GEMM_TILE128, "tile128",
     {{129, 127, 33}, {1, 128, 8}, {128, 1, 9}, {127, 129, 7}, {130, 257, 17}, {40, 40, 0}}},
    {VK_GEMM_TILE64, "tile64",
     {{65, 63, 17}, {1, 64, 1}, {64, 65, 16}, {63, 1, 31}, {130, 129, 40}, {3, 70, 0}}},
    {VK_GEMM_SMALL32, "small32",
     {{31, 33, 15}, {1, 300, 20}, {33, 1, 17}, {32, 32, 32}, {65, 97, 50}, {5, 7, 0}}},
    /* forced split-k slices k by 64: 1, 2, 3 and 5 slices, a short last one */
    {VK_GEMM_SPLITK, "splitk",
     {{64, 64, 300}, {65, 63, 129}, {1, 1, 300}, {3, 70, 64}, {17, 5, 65}, {130, 2, 200},
      {9, 9, 0}}},
};

static void test_variants_match_cpu(void **state) {
  (void)state;
  nnt_backend *be = tu_gpu();
  vk_ctx *c = be->ctx;
  assert_true(nnt_vulkan_validation_listening(be)); /* the layer checks every dispatch */
  bufs t;
  bufs_open(&t, be);
  size_t want[VK_GEMM__COUNT] = {0};
  for (size_t v = 0; v < sizeof CASES / sizeof *CASES; v++) {
    nnt_vk_gemm_force(c, CASES[v].path);
    for (size_t i = 0; i < 8 && (CASES[v].s[i].m || CASES[v].s[i].n); i++) {
      shape s = CASES[v].s[i];
      vk_gemm_plan pl;
      assert_int_equal(nnt_vk_gemm_plan(c, s.m, s.n, s.k, CASES[v].path, &pl), NNT_OK);
      for (int q = 0; q < 8; q++) {
        one(&t, q & 1, q >> 1 & 1, s, q & 4 ? 0.5f : 0.0f, CASES[v].name);
        want[pl.path]++;
      }
    }
  }
  nnt_vk_gemm_force(c, VK_GEMM_AUTO);
  /* each ran as often as planned (k = 0 under a forced split-k runs tile64) */
  char rep[128], exp[128];
  snprintf(exp, sizeof exp, "gemm paths: tile128 %zu, tile64 %zu, small32 %zu, splitk %zu",
           want[VK_GEMM_TILE128], want[VK_GEMM_TILE64], want[VK_GEMM_SMALL32],
           want[VK_GEMM_SPLITK]);
  size_t total = nnt_vulkan_gemm_report(be, rep, sizeof rep);
  assert_string_equal(rep, exp);
  assert_int_equal(total, want[1] + want[2] + want[3] + want[4]);
  assert_true(want[VK_GEMM_SPLITK] >= 48 && want[VK_GEMM_TILE128] >= 48);
  bufs_close(&t);
  tu_backend_free_checked(be);
}

/* ---- chosen by shape ------------------------------------------------------ */

/* One shape of each variant with nothing forced: each runs once, matches
 * the CPU (tile128 needs 128 work groups over k >= 1024: 1536 x 1408 x
 * 1024). */
static void test_each_variant_chosen_and_reported(void **state) {
  (void)state;
  nnt_backend *be = tu_gpu();
  const nnt_kernels *cpu = nnt_kernels_cpu();
  nnt_err e = {0};
  char rep[128];
  assert_int_equal(nnt_vulkan_gemm_report(be, rep, sizeof rep), 0);
  assert_string_equal(rep, "gemm paths: tile128 0, tile64 0, small32 0, splitk 0");
  static const shape S[] = {{1536, 1408, 1024}, {100, 90, 50}, {8, 200, 40}, {16, 24, 4096}};
  size_t most = 1536 * 1408;
  float *a = malloc(most * 4), *b = malloc(most * 4), *c = malloc(most * 4),
        *ref = malloc(most * 4);
  nnt_buffer *ba, *bb, *bc;
  assert_int_equal(nnt_buffer_alloc(be->buft, most * 4, "a", &ba, &e), NNT_OK);
  assert_int_equal(nnt_buffer_alloc(be->buft, most * 4, "b", &bb, &e), NNT_OK);
  assert_int_equal(nnt_buffer_alloc(be->buft, most * 4, "c", &bc, &e), NNT_OK);
  nnt_rng r;
  nnt_rng_seed(&r, 3);
  for (size_t i = 0; i < sizeof S / sizeof *S; i++) {
    size_t m = S[i].m, n = S[i].n, k = S[i].k;
    tu_fill_uniform(&r, a, m * k, -1, 1);
    tu_fill_uniform(&r, b, k * n, -1, 1);
    tu_fill_uniform(&r, c, m * n, -1, 1);
    memcpy(ref, c, m * n * 4);
    assert_int_equal(ba->type->set(ba, 0, a, m * k * 4, &e), NNT_OK);
    assert_int_equal(bb->type->set(bb, 0, b, k * n * 4, &e), NNT_OK);
    assert_int_equal(bc->type->set(bc, 0, c, m * n * 4, &e), NNT_OK);
    assert_int_equal(be->k->gemm(be->k, 0, 0, m, n, k, 0.5f, nnt_buffer_at(ba, 0), k,
                                 nnt_buffer_at(bb, 0), n, -2.0f, nnt_buffer_at(bc, 0), n),
                     NNT_OK);
    assert_int_equal(cpu->gemm(cpu, 0, 0, m, n, k, 0.5f, a, k, b, n, -2.0f, ref, n), NNT_OK);
    assert_int_equal(bc->type->get(bc, 0, c, m * n * 4, &e), NNT_OK);
    double worst = 0, big = 1;
    for (size_t j = 0; j < m * n; j++)
      big = fabs(ref[j]) > big ? fabs(ref[j]) : big;
    for (size_t j = 0; j < m * n; j++) {
      double d = fabs((double)c[j] - ref[j]) / big;
      worst = d > worst || isnan(d) ? d : worst;
    }
    if (!(worst <= 1e-5))
      fail_msg("gemm m=%zu n=%zu k=%zu: max error %g", m, n, k, worst);
  }
  assert_int_equal(nnt_vulkan_gemm_report(be, rep, sizeof rep), 4);
  assert_string_equal(rep, "gemm paths: tile128 1, tile64 1, small32 1, splitk 1");
  /* truncated to the room given; a backend that is not Vulkan's has none */
  assert_int_equal(nnt_vulkan_gemm_report(be, rep, 12), 4);
  assert_string_equal(rep, "gemm paths:");
  nnt_backend *cpu_be;
  assert_int_equal(nnt_backend_get(NNT_ENGINE_CPU, &cpu_be, &e), NNT_OK);
  assert_int_equal(nnt_vulkan_gemm_report(cpu_be, rep, sizeof rep), 0);
  assert_string_equal(rep, "");
  nnt_backend_free(cpu_be);
  nnt_buffer_free(ba), nnt_buffer_free(bb), nnt_buffer_free(bc);
  free(a), free(b), free(c), free(ref);
  tu_backend_free_checked(be);
}

/* ---- two threads ---------------------------------------------------------- */

/* Two threads' split-k calls on one instance share its scratch: each call
 * keeps it to itself until its reduce pass is recorded, so each thread's
 * results are its own: C += A B, WREPS times, A all ones and B all 2 (3),
 * is exactly WREPS 2 WK (3 WK) everywhere; a reduce that read the other
 * thread's partial sums would add 3 (2) WK somewhere. The threads start
 * together, so their calls interleave. */
typedef struct worker {
  nnt_backend *be;
  nnt_buffer *buf; /* A (m x k), B (k x n), C (m x n) */
  float val;
  pthread_barrier_t *go;
  int ok;
} worker;

enum { WM = 20, WN = 20, WK = 2048, WREPS = 40 };

static void *work(void *arg) {
  worker *w = arg;
  nnt_err e = {0};
  float *a = nnt_buffer_at(w->buf, 0), *b = a + WM * WK, *c = b + WK * WN;
  w->ok = 1;
  pthread_barrier_wait(w->go);
  for (int i = 0; i < WREPS; i++)
    if (w->be->k->gemm(w->be->k, 0, 0, WM, WN, WK, 1.0f, a, WK, b, WN, 1.0f, c, WN))
      w->ok = 0;
  float got[WM * WN];
  if (w->be->synchronize(w->be, &e) || w->buf->type->get(w->buf, (WM * WK + WK * WN) * 4, got,
                                                      sizeof got, &e))
    w->ok = 0;
  for (int i = 0; i < WM * WN; i++)
    if (got[i] != w->val * WK * WREPS)
      w->ok = 0;
  return NULL;
}

static void test_two_threads_split_k(void **state) {
  (void)state;
  nnt_backend *be = tu_gpu();
  nnt_err e = {0};
  worker w[2];
  pthread_barrier_t go;
  assert_int_equal(pthread_barrier_init(&go, NULL, 2), 0);
  size_t floats = WM * WK + WK * WN + WM * WN;
  float *h = malloc(floats * 4);
  for (int t = 0; t < 2; t++) {
    w[t] = (worker){.be = be, .val = (float)(t + 2), .go = &go};
    assert_int_equal(nnt_buffer_alloc(be->buft, floats * 4, "w", &w[t].buf, &e), NNT_OK);
    for (size_t i = 0; i < floats; i++)
      h[i] = i < WM * WK ? 1.0f : i < WM * WK + WK * WN ? (float)(t + 2) : 0.0f;
    assert_int_equal(w[t].buf->type->set(w[t].buf, 0, h, floats * 4, &e), NNT_OK);
  }
  pthread_t th[2];
  for (int t = 0; t < 2; t++)
    assert_int_equal(pthread_create(&th[t], NULL, work, &w[t]), 0);
  for (int t = 0; t < 2; t++) {
    pthread_join(th[t], NULL);
    assert_true(w[t].ok);
    nnt_buffer_free(w[t].buf);
  }
  char rep[128];
  assert_int_equal(nnt_vulkan_gemm_report(be, rep, sizeof rep), 2 * WREPS);
  tu_assert_contains(rep, "splitk 80");
  pthread_barrier_destroy(&go);
  free(h);
  tu_backend_free_checked(be);
}

int main(void) {
  setenv("NNTRAINER_VULKAN_VALIDATION", "1", 1);
  tu_keep_vulkan_driver();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plan_by_shape),
      cmocka_unit_test(test_variants_match_cpu),
      cmocka_unit_test(test_each_variant_chosen_and_reported),
      cmocka_unit_test(test_two_threads_split_k),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
