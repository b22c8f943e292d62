/* The Vulkan backend's SGEMM choices: which variant of
 * shaders/gemm_tile.glsl a shape runs (big tiles for big m and n, small
 * tiles for a skinny m or n, split-k for few tiles over a long k), the
 * split-k scratch buffer, and the count of calls per variant behind
 * nnt_vulkan_gemm_report. vk_ops.c's v_gemm records the dispatches. */
#include "nntrainer/vulkan/vk_impl.h"

#include <stdio.h>
#include <string.h>

typedef struct variant {
  const char *name;   /* in the report */
  const char *shader; /* the embedded SPIR-V's name (CMakeLists.txt) */
  uint32_t bm, bn;    /* tile of C per work group */
} variant;

static const variant VARIANTS[VK_GEMM__COUNT] = {
    [VK_GEMM_TILE128] = {"tile128", "gemm_tile128", 128, 128},
    [VK_GEMM_TILE64] = {"tile64", "gemm_tile64", 64, 64},
    [VK_GEMM_SMALL32] = {"small32", "gemm_small32", 32, 32},
    [VK_GEMM_SPLITK] = {"splitk", "gemm_splitk", 64, 64},
};

/* split-k: the depth of a slice is a multiple of the shader's BK (16);
 * the scratch holds at most this many floats (16 MiB). */
#define SPLIT_BK 16
#define SPLIT_MAX_FLOATS ((size_t)4 << 20)
/* split-k is chosen when k is at least SPLIT_MIN_K and the 64 x 64 tiles
 * of C are at most SPLIT_TILES (before small32: a weight gradient of a
 * dense layer), or, where neither m nor n is at most 32, when k is at
 * least FILL_MIN_K and the tiles are fewer than SPLIT_GROUPS: a product
 * with fewer work groups leaves a large GPU idle (an H100 has 132
 * multiprocessors: the forward products of ResNet-18's convolutions, 64 to
 * 176 tiles over k = 576 to 4608, ran at 3.8 to 7.4 TFLOP/s on tile64 at
 * batch 32). It aims at SPLIT_GROUPS work groups in all, with slices at
 * least SPLIT_MIN_DEPTH deep (a forced split-k uses SPLIT_FORCED_DEPTH, so
 * that tests see several slices at small k). */
#define SPLIT_MIN_K 1024
#define SPLIT_TILES 32
#define FILL_MIN_K 512
#define SPLIT_GROUPS 256
#define SPLIT_MIN_DEPTH 256
#define SPLIT_FORCED_DEPTH 64
/* tile128 when it still gives BIG_GROUPS work groups over k of at least
 * BIG_MIN_K; else tile64, which has 4 times more: on an H100 tile64 ran
 * ResNet-18's input-derivative products (k = 64 to 512, 440 to 1584 groups
 * of tile128) at 10.0 to 16.5 TFLOP/s against tile128's 8.4 to 10.8
 * (docs/performance.md). */
#define BIG_GROUPS 128
#define BIG_MIN_K 1024

static size_t cdiv(size_t a, size_t b) { return (a + b - 1) / b; }

/* The scratch's floats: SPLIT_MAX_FLOATS, or one chunk where that is less
 * (a binding reaches no further). */
static size_t scratch_floats(const vk_ctx *c) {
  return c && c->chunk / sizeof(float) < SPLIT_MAX_FLOATS ? c->chunk / sizeof(float)
                                                          : SPLIT_MAX_FLOATS;
}

/* The slices of a split-k (0 when it does not fit the scratch limit). */
static int split(size_t m, size_t n, size_t k, int forced, size_t maxf, vk_gemm_plan *pl) {
  size_t tiles = cdiv(m, 64) * cdiv(n, 64), s, depth;
  if (forced) {
    depth = SPLIT_FORCED_DEPTH;
  } else {
    s = SPLIT_GROUPS / tiles;
    s = s < 2 ? 2 : s > 64 ? 64 : s;
    depth = cdiv(cdiv(k, s), SPLIT_BK) * SPLIT_BK;
    if (depth < SPLIT_MIN_DEPTH)
      depth = SPLIT_MIN_DEPTH;
  }
  s = cdiv(k, depth);
  if (m > maxf || n > maxf / m || s > maxf / (m * n) ||
      (!forced && s < 2))
    return 0;
  pl->slices = (uint32_t)s, pl->chunk = (uint32_t)depth, pl->tiles_m = (uint32_t)cdiv(m, 64);
  return 1;
}

int nnt_vk_gemm_plan(const vk_ctx *c, size_t m, size_t n, size_t k, vk_gemm_path force,
                     vk_gemm_plan *out) {
  vk_gemm_plan pl = {0};
  vk_gemm_path path = force;
  size_t maxf = scratch_floats(c);
  if (path == VK_GEMM_SPLITK && !(k && split(m, n, k, 1, maxf, &pl)))
    path = VK_GEMM_TILE64; /* k = 0 or a scratch too big: nothing to split */
  if ((unsigned)path >= VK_GEMM__COUNT || path == VK_GEMM_AUTO) {
    if (k >= SPLIT_MIN_K && cdiv(m, 64) * cdiv(n, 64) <= SPLIT_TILES &&
        split(m, n, k, 0, maxf, &pl))
      path = VK_GEMM_SPLITK;
    else if (m <= 32 || n <= 32)
      path = VK_GEMM_SMALL32;
    else if (k >= FILL_MIN_K && cdiv(m, 64) * cdiv(n, 64) < SPLIT_GROUPS &&
             split(m, n, k, 0, maxf, &pl))
      path = VK_GEMM_SPLITK;
    else if (cdiv(m, 128) * cdiv(n, 128) >= BIG_GROUPS && k >= BIG_MIN_K)
      path = VK_GEMM_TILE128;
    else
      path = VK_GEMM_TILE64;
  }
  const variant *v = &VARIANTS[path];
  size_t gx = cdiv(n, v->bn), gy = cdiv(m, v->bm) * (path == VK_GEMM_SPLITK ? pl.slices : 1);
  size_t lx = c ? c->props.limits.maxComputeWorkGroupCount[0] : 65535;
  size_t ly = c ? c->props.limits.maxComputeWorkGroupCount[1] : 65535;
  if (gx > lx || gy > ly)
    return NNT_ERR_INVAL;
  pl.path = path, pl.shader = v->shader, pl.gx = (uint32_t)gx, pl.gy = (uint32_t)gy;
  *out = pl;
  return NNT_OK;
}

/* Allocated once at its largest (a buffer freed or grown later would drop
 * the recorded steps, which name it). */
float *nnt_vk_gemm_scratch(vk_ctx *c, size_t floats) {
  nnt_buffer *b = c->gemm_scratch;
  if (b)
    return b->size >= floats * sizeof(float) ? nnt_buffer_at(b, 0) : NULL;
  nnt_err e = {0};
  /* the buffer code takes c->lock, which is not held here */
  if (floats > scratch_floats(c) ||
      nnt_buffer_alloc(&c->buft, scratch_floats(c) * sizeof(float), "the SGEMM split-k scratch",
                       &c->gemm_scratch, &e)) {
    c->gemm_scratch = NULL;
    return NULL;
  }
  return nnt_buffer_at(c->gemm_scratch, 0);
}

void nnt_vk_gemm_count(vk_ctx *c, vk_gemm_path path) {
  pthread_mutex_lock(&c->lock);
  c->gemm_runs[path]++;
  pthread_mutex_unlock(&c->lock);
}

void nnt_vk_gemm_force(vk_ctx *c, vk_gemm_path path) {
  pthread_mutex_lock(&c->glock);
  c->gemm_force = path;
  pthread_mutex_unlock(&c->glock);
}

void nnt_vk_gemm_release(vk_ctx *c) {
  pthread_mutex_lock(&c->glock);
  nnt_buffer *b = c->gemm_scratch;
  c->gemm_scratch = NULL;
  pthread_mutex_unlock(&c->glock);
  nnt_buffer_free(b);
}

size_t nnt_vulkan_gemm_report(const nnt_backend *be, char *buf, size_t n) {
  vk_ctx *c = nnt_vk_of(be);
  if (buf && n)
    buf[0] = '\0';
  if (!c)
    return 0;
  size_t runs[VK_GEMM__COUNT], total = 0;
  pthread_mutex_lock(&c->lock);
  memcpy(runs, c->gemm_runs, sizeof runs);
  pthread_mutex_unlock(&c->lock);
  size_t len = 0;
  for (int p = VK_GEMM_AUTO + 1; p < VK_GEMM__COUNT; p++) {
    total += runs[p];
    if (buf && len < n) {
      int w = snprintf(buf + len, n - len, "%s%s %zu",
                       p == VK_GEMM_AUTO + 1 ? "gemm paths: " : ", ",
                       VARIANTS[p].name, runs[p]);
      len += w > 0 ? (size_t)w : 0;
    }
  }
  return total;
}
