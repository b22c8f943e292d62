/* The Vulkan backend's ops: each maps its tensor addresses to (buffer,
 * element offset), binds the whole buffers (ranges clamped to
 * chunks) with offsets and sizes as parameters, and records one dispatch
 * with the byte ranges it reads and writes, so vk_record.c puts a barrier
 * only before a dispatch that depends on an earlier one. Every op of the
 * kernel table is here. */
#include "nntrainer/vulkan/vk_impl.h"

#include <string.h>

#define WG 256 /* local size of the element-wise shaders */

/* Argument i of a dispatch is binding i: its address, how many floats the
 * shader may read or write from there, and whether it writes. */
typedef struct vk_arg {
  const void *p; /* NULL: unused */
  size_t n;
  int w;
} vk_arg;
#define RD(p, n) ((vk_arg){(p), (n), 0})
#define WR(p, n) ((vk_arg){(p), (n), 1})

/* Each argument mapped to its chunk and element offset (refused when it
 * is not an address of a live buffer of this instance, or its extent
 * leaves the chunk), then one dispatch recorded. */
static int dispatch(vk_ctx *c, const char *shader, const vk_arg *args, unsigned nargs,
                    vk_push *pc, uint32_t gx, uint32_t gy) {
  if (!gx || !gy)
    return NNT_OK;
  vk_buf *bufs[VK_BINDINGS] = {0};
  vk_span span[VK_BINDINGS];
  unsigned n_span = 0;
  pthread_mutex_lock(&c->lock);
  int rc = c->failed ? NNT_ERR_UNKNOWN : NNT_OK;
  for (unsigned i = 0; i < nargs && !rc; i++) {
    VkDeviceSize room;
    if (!args[i].p)
      continue;
    if (!(bufs[i] = nnt_vk_resolve(c, args[i].p, &pc->o[i], &room)) ||
        args[i].n > room / sizeof(float)) {
      rc = NNT_ERR_INVAL;
      break;
    }
    VkDeviceSize lo = (VkDeviceSize)pc->o[i] * sizeof(float);
    span[n_span++] = (vk_span){.serial = bufs[i]->serial,
                               .lo = lo,
                               .hi = lo + args[i].n * sizeof(float),
                               .write = (uint64_t)args[i].w};
  }
  for (unsigned i = nargs; i < VK_BINDINGS; i++)
    pc->o[i] = 0;
  for (unsigned i = 0; i < nargs; i++)
    if (!args[i].p)
      pc->o[i] = 0;
  if (!rc)
    rc = nnt_vk_record_dispatch(c, shader, bufs, span, n_span, pc, gx, gy);
  pthread_mutex_unlock(&c->lock);
  return rc;
}

/* Work groups for `items` invocations of local size wg: a second
 * dimension past the device's x limit. */
static int groups(vk_ctx *vc, size_t items, unsigned wg, uint32_t *gx, uint32_t *gy) {
  vk_ctx *c = vc;
  size_t g = (items + wg - 1) / wg;
  size_t lx = c ? c->props.limits.maxComputeWorkGroupCount[0] : 65535;
  size_t ly = c ? c->props.limits.maxComputeWorkGroupCount[1] : 65535;
  size_t x = g < lx ? g : lx, y = x ? (g + x - 1) / x : 0;
  if (y > ly || items > UINT32_MAX)
    return NNT_ERR_INVAL;
  *gx = (uint32_t)x, *gy = (uint32_t)y;
  return NNT_OK;
}

/* An element-wise shader over n items. */
static int ew(vk_ctx *vc, const char *shader, size_t n, const vk_arg *args, unsigned nargs,
              vk_push *pc) {
  uint32_t gx, gy;
  if (n > UINT32_MAX || groups(vc, n, WG, &gx, &gy))
    return NNT_ERR_INVAL;
  pc->n = (uint32_t)n;
  return dispatch(vc, shader, args, nargs, pc, gx, gy);
}

#define ARGS(...) (const vk_arg[]){__VA_ARGS__}, sizeof((vk_arg[]){__VA_ARGS__}) / sizeof(vk_arg)

/* SGEMM: vk_gemm.c chooses the variant of shaders/gemm_tile.glsl; split-k
 * writes partial sums to a scratch buffer and gemm_reduce.comp sums them
 * into C. glock keeps a call's dispatches and its scratch to itself. */
static int v_gemm(const nnt_kernels *self, int ta, int tb, size_t m, size_t n, size_t k,
                  float alpha, const float *a, size_t lda, const float *b, size_t ldb, float beta,
                  float *c, size_t ldc) {
  vk_ctx *vc = self->ctx;
  if (!m || !n)
    return NNT_OK;
  if (!c || m > UINT32_MAX || n > UINT32_MAX || k > UINT32_MAX || lda > UINT32_MAX ||
      ldb > UINT32_MAX || ldc > UINT32_MAX || ldc < n ||
      (k && (!a || !b || lda < (ta ? m : k) || ldb < (tb ? k : n))))
    return NNT_ERR_INVAL;
  pthread_mutex_lock(&vc->glock);
  vk_gemm_plan pl;
  float *scratch = NULL;
  int rc = nnt_vk_gemm_plan(vc, m, n, k, vc->gemm_force, &pl);
  if (!rc && pl.path == VK_GEMM_SPLITK &&
      !(scratch = nnt_vk_gemm_scratch(vc, (size_t)pl.slices * m * n)))
    rc = nnt_vk_gemm_plan(vc, m, n, k, VK_GEMM_TILE64, &pl); /* no scratch: one pass */
  if (rc)
    goto out;
  vk_push pc = {.rows = (uint32_t)m, .cols = (uint32_t)n, .k = (uint32_t)k,
                .i0 = (uint32_t)lda, .i1 = (uint32_t)ldb, .i2 = (uint32_t)ldc,
                .i3 = (ta ? 1u : 0u) | (tb ? 2u : 0u), .u0 = pl.chunk, .u1 = pl.tiles_m,
                .f0 = alpha, .f1 = beta};
  size_t ea = k ? (ta ? (k - 1) * lda + m : (m - 1) * lda + k) : 0;
  size_t eb = k ? (tb ? (n - 1) * ldb + k : (k - 1) * ldb + n) : 0;
  size_t ec = (m - 1) * ldc + n, parts = (size_t)pl.slices * m * n;
  if (pl.path == VK_GEMM_SPLITK) {
    rc = dispatch(vc, pl.shader, ARGS(RD(a, ea), RD(b, eb), WR(scratch, parts)), &pc, pl.gx,
                  pl.gy);
    vk_push pr = {.cols = (uint32_t)n, .i0 = pl.slices, .i2 = (uint32_t)ldc, .f0 = alpha,
                  .f1 = beta};
    if (!rc)
      rc = ew(vc, "gemm_reduce", m * n, ARGS(RD(scratch, parts), WR(c, ec)), &pr);
  } else {
    rc = dispatch(vc, pl.shader, ARGS(RD(k ? a : NULL, ea), RD(k ? b : NULL, eb), WR(c, ec)),
                  &pc, pl.gx, pl.gy);
  }
  if (!rc)
    nnt_vk_gemm_count(vc, pl.path);
out:
  pthread_mutex_unlock(&vc->glock);
  return rc;
}

static int v_fill(const nnt_kernels *self, size_t n, float v, float *y) {
  vk_ctx *vc = self->ctx;
  vk_push pc = {.f0 = v};
  return ew(vc, "fill", n, ARGS(WR(y, n)), &pc);
}
static int v_copy(const nnt_kernels *self, size_t n, const float *x, float *y) {
  vk_ctx *vc = self->ctx;
  vk_push pc = {0};
  return x == y ? NNT_OK : ew(vc, "copy", n, ARGS(RD(x, n), WR(y, n)), &pc);
}
static int v_scale(const nnt_kernels *self, size_t n, float a, float *y) {
  vk_ctx *vc = self->ctx;
  vk_push pc = {.f0 = a};
  return ew(vc, "scale", n, ARGS(WR(y, n)), &pc);
}
static int v_clip_scale(const nnt_kernels *self, size_t n, float max_norm, const float *sumsq,
                        float *y) {
  vk_ctx *vc = self->ctx;
  vk_push pc = {.i0 = 1, .f0 = max_norm};
  return ew(vc, "scale", n, ARGS(WR(y, n), RD(sumsq, 1)), &pc);
}
static int v_axpy(const nnt_kernels *self, size_t n, float a, const float *x, float *y) {
  vk_ctx *vc = self->ctx;
  vk_push pc = {.f0 = a};
  return ew(vc, "axpy", n, ARGS(RD(x, n), WR(y, n)), &pc);
}
static int binop(vk_ctx *vc, unsigned op, float f, size_t n, const float *a, const float *b,
                 float *y) {
  vk_push pc = {.i0 = op, .f0 = f};
  return ew(vc, "binop", n, ARGS(RD(a, n), RD(b, n), WR(y, n)), &pc);
}
static int v_add(const nnt_kernels *self, size_t n, const float *a, const float *b, float *y) {
  vk_ctx *vc = self->ctx;
  return binop(vc, 0, 0, n, a, b, y);
}
static int v_sub(const nnt_kernels *self, size_t n, const float *a, const float *b, float *y) {
  vk_ctx *vc = self->ctx;
  return binop(vc, 1, 0, n, a, b, y);
}
static int v_mul(const nnt_kernels *self, size_t n, const float *a, const float *b, float *y) {
  vk_ctx *vc = self->ctx;
  return binop(vc, 2, 0, n, a, b, y);
}

/* One work group reduces n values into *out (reduce.comp). */
static int reduce(vk_ctx *vc, unsigned mode, size_t n, size_t rows, const float *a, const float *b,
                  float *out) {
  if (!out || n > UINT32_MAX || rows > UINT32_MAX)
    return NNT_ERR_INVAL;
  vk_push pc = {.n = (uint32_t)n, .rows = (uint32_t)rows, .i0 = mode};
  return dispatch(vc, "reduce", ARGS(RD(a, n), RD(b, n), WR(out, 1)), &pc, 1, 1);
}
static int v_dot(const nnt_kernels *self, size_t n, const float *x, const float *y, float *out) {
  vk_ctx *vc = self->ctx;
  return reduce(vc, 0, n, 1, x, y, out);
}
static int v_sum(const nnt_kernels *self, size_t n, const float *x, float *out) {
  vk_ctx *vc = self->ctx; return reduce(vc, 1, n, 1, x, NULL, out); }

static int v_add_row_vec(const nnt_kernels *self, size_t rows, size_t cols, const float *bias,
                         float *y) {
  vk_ctx *vc = self->ctx;
  if (cols > UINT32_MAX || (rows && cols > SIZE_MAX / rows))
    return NNT_ERR_INVAL;
  vk_push pc = {.cols = (uint32_t)cols, .i0 = 0};
  return ew(vc, "add_vec", rows * cols, ARGS(RD(bias, cols), WR(y, rows * cols)), &pc);
}

static int v_add_col_vec(const nnt_kernels *self, size_t rows, size_t cols, const float *v,
                         float *y) {
  vk_ctx *vc = self->ctx;
  if (cols > UINT32_MAX || (rows && cols > SIZE_MAX / rows))
    return NNT_ERR_INVAL;
  vk_push pc = {.cols = (uint32_t)cols, .i0 = 1};
  return ew(vc, "add_vec", rows * cols, ARGS(RD(v, rows), WR(y, rows * cols)), &pc);
}

static int sum_axis(vk_ctx *vc, unsigned mode, size_t rows, size_t cols, const float *x, float beta,
                    float *out) {
  uint32_t gx, gy;
  if (rows > UINT32_MAX || cols > UINT32_MAX || groups(vc, mode ? rows : cols, 64, &gx, &gy))
    return NNT_ERR_INVAL;
  vk_push pc = {.rows = (uint32_t)rows, .cols = (uint32_t)cols, .i0 = mode, .f0 = beta};
  return dispatch(vc, "sum_axis", ARGS(RD(x, rows * cols), WR(out, mode ? rows : cols)), &pc,
                  gx, gy);
}
static int v_sum_rows(const nnt_kernels *self, size_t rows, size_t cols, const float *x, float beta,
                      float *out) {
  vk_ctx *vc = self->ctx;
  return sum_axis(vc, 0, rows, cols, x, beta, out);
}
static int v_sum_cols(const nnt_kernels *self, size_t rows, size_t cols, const float *x, float beta,
                      float *out) {
  vk_ctx *vc = self->ctx;
  return sum_axis(vc, 1, rows, cols, x, beta, out);
}

/* The activations act.comp computes: all but softmax (its own entries). */
static int act_ok(nnt_act a) { return (unsigned)a < NNT_ACT__COUNT && a != NNT_ACT_SOFTMAX; }

static int v_act_fwd(const nnt_kernels *self, nnt_act a, float alpha, size_t n, const float *x,
                     float *y) {
  vk_ctx *vc = self->ctx;
  if (a == NNT_ACT_SOFTMAX || a == NNT_ACT_NONE)
    return v_copy(self, n, x, y);
  if (!act_ok(a))
    return NNT_ERR_INVAL;
  vk_push pc = {.i0 = 0, .i1 = (uint32_t)a, .f0 = alpha};
  return ew(vc, "act", n, ARGS(RD(x, n), WR(y, n)), &pc);
}
static int v_act_bwd(const nnt_kernels *self, nnt_act a, float alpha, size_t n, const float *x,
                     const float *y, const float *dy, float *dx) {
  vk_ctx *vc = self->ctx;
  if (a == NNT_ACT_SOFTMAX || a == NNT_ACT_NONE)
    return v_copy(self, n, dy, dx);
  if (!act_ok(a))
    return NNT_ERR_INVAL;
  vk_push pc = {.i0 = 1, .i1 = (uint32_t)a, .f0 = alpha};
  return ew(vc, "act", n, ARGS(RD(x, n), RD(y, n), RD(dy, n), WR(dx, n)), &pc);
}

/* The mask: one invocation per 32-bit word, so no word has two writers. */
static int v_act_mask(const nnt_kernels *self, size_t n, const float *y, float *mask) {
  vk_ctx *vc = self->ctx;
  if (n > UINT32_MAX)
    return NNT_ERR_INVAL;
  size_t words = nnt_mask_words(n);
  vk_push pc = {.i0 = 3, .k = (uint32_t)n};
  return ew(vc, "act", words, ARGS(WR(mask, words), RD(y, n)), &pc);
}
static int v_act_bwd_mask(const nnt_kernels *self, nnt_act a, float alpha, size_t n,
                          const float *mask, const float *dy, float *dx) {
  vk_ctx *vc = self->ctx;
  if (!nnt_act_bwd_sign_only(a))
    return NNT_ERR_INVAL;
  vk_push pc = {.i0 = 2, .i1 = (uint32_t)a, .f0 = alpha};
  return ew(vc, "act", n, ARGS(RD(mask, nnt_mask_words(n)), RD(NULL, 0), RD(dy, n), WR(dx, n)),
            &pc);
}

static int softmax(vk_ctx *vc, unsigned mode, size_t rows, size_t cols, const float *a,
                   const float *b, float *c) {
  uint32_t gx, gy;
  if (rows > UINT32_MAX || cols > UINT32_MAX || groups(vc, rows, 64, &gx, &gy))
    return NNT_ERR_INVAL;
  if (!cols)
    return NNT_OK;
  vk_push pc = {.rows = (uint32_t)rows, .cols = (uint32_t)cols, .i0 = mode};
  size_t len = rows * cols;
  return dispatch(vc, "softmax", ARGS(RD(a, len), mode ? RD(b, len) : WR(b, len), WR(c, len)), &pc,
                  gx, gy);
}
static int v_softmax_fwd(const nnt_kernels *self, size_t rows, size_t cols, const float *x,
                         float *y) {
  vk_ctx *vc = self->ctx;
  return softmax(vc, 0, rows, cols, x, y, NULL);
}
static int v_softmax_bwd(const nnt_kernels *self, size_t rows, size_t cols, const float *y,
                         const float *dy, float *dx) {
  vk_ctx *vc = self->ctx;
  return softmax(vc, 1, rows, cols, y, dy, dx);
}

static int v_normalize_rows(const nnt_kernels *self, size_t rows, size_t cols, unsigned mode,
                            const float *x, float *y) {
  vk_ctx *vc = self->ctx;
  uint32_t gx, gy;
  if (rows > UINT32_MAX || cols > UINT32_MAX || (rows && !cols) ||
      (mode & ~(unsigned)(NNT_NORM_MINMAX | NNT_NORM_STANDARD)) || groups(vc, rows, 64, &gx, &gy))
    return NNT_ERR_INVAL;
  vk_push pc = {.rows = (uint32_t)rows, .cols = (uint32_t)cols, .i0 = mode};
  return dispatch(vc, "normalize_rows", ARGS(RD(x, rows * cols), WR(y, rows * cols)), &pc, gx,
                  gy);
}

static int v_xent_softmax_fwd(const nnt_kernels *self, size_t rows, size_t cols, const float *prob,
                              const float *label, float *loss) {
  vk_ctx *vc = self->ctx;
  if (!rows || (cols && rows > SIZE_MAX / cols))
    return NNT_ERR_INVAL;
  return reduce(vc, 3, rows * cols, rows, prob, label, loss);
}
static int v_xent_softmax_bwd(const nnt_kernels *self, size_t rows, size_t cols, const float *prob,
                              const float *label, float *dx) {
  vk_ctx *vc = self->ctx;
  if (cols && rows > SIZE_MAX / cols)
    return NNT_ERR_INVAL;
  return binop(vc, 3, 1.0f / (float)rows, rows * cols, prob, label, dx);
}
static int v_mse_fwd(const nnt_kernels *self, size_t n, const float *y, const float *label,
                     float *loss) {
  vk_ctx *vc = self->ctx;
  return n ? reduce(vc, 2, n, 1, y, label, loss) : NNT_ERR_INVAL;
}
static int v_mse_bwd(const nnt_kernels *self, size_t n, const float *y, const float *label,
                     float *dx) {
  vk_ctx *vc = self->ctx;
  return binop(vc, 3, 2.0f / (float)n, n, y, label, dx);
}
static int v_argmax_match(const nnt_kernels *self, size_t rows, size_t cols, const float *y,
                          const float *label, float *count) {
  vk_ctx *vc = self->ctx;
  if (!count || rows > UINT32_MAX || cols > UINT32_MAX || (rows && !cols))
    return NNT_ERR_INVAL;
  vk_push pc = {.rows = (uint32_t)rows, .cols = (uint32_t)cols};
  return dispatch(vc, "argmax_match",
                  ARGS(RD(y, rows * cols), RD(label, rows * cols), WR(count, 1)), &pc, 1, 1);
}

static int v_xent_sigmoid_fwd(const nnt_kernels *self, size_t rows, size_t cols, const float *x,
                              const float *label, float *loss) {
  vk_ctx *vc = self->ctx;
  if (!rows || !cols || rows > SIZE_MAX / cols)
    return NNT_ERR_INVAL;
  return reduce(vc, 4, rows * cols, rows, x, label, loss);
}
static int v_xent_sigmoid_bwd(const nnt_kernels *self, size_t rows, size_t cols, const float *x,
                              const float *label, float *dx) {
  vk_ctx *vc = self->ctx;
  if (cols && rows > SIZE_MAX / cols)
    return NNT_ERR_INVAL;
  return binop(vc, 4, 1.0f / (float)(rows * cols), rows * cols, x, label, dx);
}

static int v_dropout_mask(const nnt_kernels *self, size_t n, float rate, uint64_t key,
                          uint64_t stream, float *mask) {
  vk_ctx *vc = self->ctx;
  if (!(rate >= 0 && rate <= 1))
    return NNT_ERR_INVAL;
  vk_push pc = {.i0 = (uint32_t)key, .i1 = (uint32_t)(key >> 32), .i2 = (uint32_t)stream,
                .i3 = (uint32_t)(stream >> 32), .f0 = rate,
                .f1 = rate < 1 ? 1.0f / (1.0f - rate) : 0};
  return ew(vc, "dropout_mask", n, ARGS(WR(mask, n)), &pc);
}

/* Batch normalization: one work group per channel (bn.comp). */
static int bn_dims(vk_ctx *vc, size_t outer, size_t ch, size_t inner, vk_push *pc) {
  vk_ctx *c = vc;
  if (outer > UINT32_MAX || ch > UINT32_MAX || inner > UINT32_MAX ||
      (outer && inner > UINT32_MAX / outer) ||
      (c && ch > c->props.limits.maxComputeWorkGroupCount[0]))
    return NNT_ERR_INVAL;
  pc->k = (uint32_t)outer, pc->cols = (uint32_t)ch, pc->rows = (uint32_t)inner;
  return NNT_OK;
}
/* bn.comp's variant: work groups of 1024 where the device has them (the
 * tests may turn c->bn_narrow on to run the other). */
static const char *bn_shader(const vk_ctx *c) {
  return c && !c->bn_narrow && c->props.limits.maxComputeWorkGroupInvocations >= 1024 &&
                 c->props.limits.maxComputeWorkGroupSize[0] >= 1024
             ? "bn1024"
             : "bn";
}
static int v_bn_fwd_train(const nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                          const float *x, const float *gamma, const float *beta, float eps,
                          float *mean, float *var, float *invstd, float *xhat, float *y) {
  vk_ctx *vc = self->ctx;
  vk_push pc = {.i0 = 0, .f0 = eps};
  if (bn_dims(vc, outer, ch, inner, &pc))
    return NNT_ERR_INVAL;
  size_t all = outer * ch * inner;
  return dispatch(vc, bn_shader(vc),
                  ARGS(RD(x, all), RD(gamma, ch), RD(beta, ch), WR(mean, ch), WR(var, ch),
                       WR(invstd, ch), WR(xhat, all), WR(y, all)),
                  &pc, (uint32_t)ch, 1);
}
static int v_bn_fwd_infer(const nnt_kernels *self, size_t outer, size_t ch, size_t inner,
                          const float *x, const float *mean, const float *var, const float *gamma,
                          const float *beta, float eps, float *y) {
  vk_ctx *vc = self->ctx;
  vk_push pc = {.f0 = eps};
  if (bn_dims(vc, outer, ch, inner, &pc) || (ch && outer * inner > UINT32_MAX / ch))
    return NNT_ERR_INVAL;
  size_t all = outer * ch * inner;
  return ew(vc, "bn_infer", all,
            ARGS(RD(x, all), RD(mean, ch), RD(var, ch), RD(gamma, ch), RD(beta, ch), WR(y, all)),
            &pc);
}
static int v_bn_bwd(const nnt_kernels *self, size_t outer, size_t ch, size_t inner, const float *dy,
                    const float *xhat, const float *invstd, const float *gamma, float *dx,
                    float *dgamma, float *dbeta) {
  vk_ctx *vc = self->ctx;
  vk_push pc = {.i0 = 1,
                .i1 = (dgamma ? 1u : 0u) | (dbeta ? 2u : 0u) | (dx ? 4u : 0u)};
  if (bn_dims(vc, outer, ch, inner, &pc))
    return NNT_ERR_INVAL;
  if (!pc.i1)
    return NNT_OK;
  size_t all = outer * ch * inner;
  return dispatch(vc, bn_shader(vc),
                  ARGS(RD(dy, all), RD(xhat, all), RD(invstd, ch), RD(gamma, ch), WR(dx, all),
                       WR(dgamma, ch), WR(dbeta, ch)),
                  &pc, (uint32_t)ch, 1);
}

static int v_copy2d(const nnt_kernels *self, size_t rows, size_t cols, const float *x,
                    size_t ldx, float *y, size_t ldy) {
  vk_ctx *vc = self->ctx;
  if (rows > 1 && (cols > ldx || cols > ldy))
    return NNT_ERR_INVAL;
  if (!rows || !cols)
    return NNT_OK;
  size_t ld = ldx > ldy ? ldx : ldy; /* >= cols >= 1 where rows > 1 */
  if (cols > UINT32_MAX || ld > UINT32_MAX || rows - 1 > (UINT32_MAX - cols) / (ld ? ld : 1))
    return NNT_ERR_INVAL;
  size_t ex = (rows - 1) * ldx + cols, ey = (rows - 1) * ldy + cols;
  vk_push pc = {.cols = (uint32_t)cols, .i0 = (uint32_t)ldx, .i1 = (uint32_t)ldy};
  return ew(vc, "copy2d", rows * cols, ARGS(RD(x, ex), WR(y, ey)), &pc);
}

static int v_permute3(const nnt_kernels *self, size_t b, const unsigned d[3],
                      const unsigned perm[3], const float *x, float *y) {
  vk_ctx *vc = self->ctx;
  size_t len = (size_t)d[0] * d[1] * d[2];
  if (perm[0] > 2 || perm[1] > 2 || perm[2] > 2 || len > UINT32_MAX ||
      (len && b > UINT32_MAX / len))
    return NNT_ERR_INVAL;
  uint32_t stride[3] = {d[1] * d[2], d[2], 1};
  vk_push pc = {.cols = (uint32_t)len, .i0 = d[perm[0]], .i1 = d[perm[1]], .i2 = d[perm[2]],
                .u0 = stride[perm[0]], .u1 = stride[perm[1]], .u2 = stride[perm[2]]};
  return ew(vc, "permute3", b * len, ARGS(RD(x, b * len), WR(y, b * len)), &pc);
}

static int upsample(vk_ctx *vc, unsigned mode, size_t rows, size_t h, size_t w, size_t kh,
                    size_t kw, const float *a, float *b) {
  size_t out = h * kh * w * kw;
  if (h > UINT32_MAX || w > UINT32_MAX || kh > UINT32_MAX || kw > UINT32_MAX ||
      (h && kh > UINT32_MAX / h) || (w && kw > UINT32_MAX / w) ||
      (h * kh != 0 && w * kw > UINT32_MAX / (h * kh)) || (out && rows > UINT32_MAX / out))
    return NNT_ERR_INVAL;
  vk_push pc = {.k = mode, .i0 = (uint32_t)h, .i1 = (uint32_t)w, .i2 = (uint32_t)kh,
                .i3 = (uint32_t)kw};
  size_t small = rows * h * w, big = rows * out;
  return ew(vc, "upsample", mode ? small : big,
            ARGS(RD(a, mode ? big : small), WR(b, mode ? small : big)), &pc);
}
static int v_upsample_nearest_fwd(const nnt_kernels *self, size_t rows, size_t h, size_t w,
                                  size_t kh, size_t kw, const float *x, float *y) {
  vk_ctx *vc = self->ctx;
  return upsample(vc, 0, rows, h, w, kh, kw, x, y);
}
static int v_upsample_nearest_bwd(const nnt_kernels *self, size_t rows, size_t h, size_t w,
                                  size_t kh, size_t kw, const float *dy, float *dx) {
  vk_ctx *vc = self->ctx;
  return upsample(vc, 1, rows, h, w, kh, kw, dy, dx);
}

/* The geometry into the parameter block as shaders/window.glsl reads it;
 * every index the shaders form (planes of n images, the columns of n
 * images) fits 32 bits. */
static int window(const nnt_conv_geom *g, size_t n, vk_push *pc) {
  if (!g || !g->sh || !g->sw)
    return NNT_ERR_INVAL;
  uint64_t in = (uint64_t)g->c * g->h * g->w, out = (uint64_t)g->c * g->oh * g->ow;
  uint64_t col = out * g->kh * g->kw * (n ? n : 1), big = n ? (in > out ? in : out) * n : 0;
  uint64_t reach = (uint64_t)g->oh * g->sh + (uint64_t)g->kh * g->dh + g->pt + g->h +
                   (uint64_t)g->ow * g->sw + (uint64_t)g->kw * g->dw + g->pl + g->w;
  uint64_t imgs = n ? nnt_conv_img_stride(g) * (uint64_t)n : 0; /* im2col's x, col2im's dx */
  if (col > UINT32_MAX || big > UINT32_MAX || in > UINT32_MAX || reach > INT32_MAX ||
      imgs > UINT32_MAX || (g->cs && g->cs < g->c))
    return NNT_ERR_INVAL;
  *pc = (vk_push){.rows = g->c, .i0 = g->h, .i1 = g->w, .i2 = g->kh, .i3 = g->kw,
                  .u0 = g->sh, .u1 = g->sw, .u2 = g->dh, .u3 = g->dw, .u4 = g->pt,
                  .u5 = g->pl, .u6 = g->oh, .u7 = g->ow, .cols = g->cs ? g->cs : g->c};
  return NNT_OK;
}
/* The extent of im2col's x or col2im's dx: n images nnt_conv_img_stride
 * apart, the last one's block of c channels. */
static size_t window_imgs(const nnt_conv_geom *g, size_t n) {
  return n ? (n - 1) * nnt_conv_img_stride(g) + (size_t)g->c * g->h * g->w : 0;
}
/* The columns of n images side by side: the number of images in k; the
 * channels per image of x and dx (g->cs, a block) in cols. */
static int v_im2col(const nnt_kernels *self, const nnt_conv_geom *g, size_t n, const float *x,
                    float *col) {
  vk_ctx *vc = self->ctx;
  vk_push pc;
  if (window(g, n, &pc))
    return NNT_ERR_INVAL;
  pc.k = (uint32_t)n;
  size_t rows = (size_t)g->c * g->kh * g->kw, ld = (size_t)g->oh * g->ow * n;
  size_t lx = vc ? vc->props.limits.maxComputeWorkGroupCount[0] : 65535;
  size_t ly = vc ? vc->props.limits.maxComputeWorkGroupCount[1] : 65535;
  size_t gx = (ld + WG - 1) / WG; /* the shader loops past the limits */
  return dispatch(vc, "im2col", ARGS(RD(x, window_imgs(g, n)), WR(col, rows * ld)), &pc,
                  (uint32_t)(gx < lx ? gx : lx), (uint32_t)(rows < ly ? rows : ly));
}
static int v_col2im(const nnt_kernels *self, const nnt_conv_geom *g, size_t n, const float *col,
                    float *dx) {
  vk_ctx *vc = self->ctx;
  vk_push pc;
  if (window(g, n, &pc))
    return NNT_ERR_INVAL;
  pc.k = (uint32_t)n;
  size_t img = (size_t)g->c * g->h * g->w * n;
  return ew(vc, "col2im", img,
            ARGS(RD(col, (size_t)g->c * g->kh * g->kw * g->oh * g->ow * n),
                 WR(dx, window_imgs(g, n))),
            &pc);
}
static int v_pool_fwd(const nnt_kernels *self, const nnt_conv_geom *g, size_t n, int mode,
                      const float *x, float *y, float *idx) {
  vk_ctx *vc = self->ctx;
  vk_push pc;
  if ((mode != 0 && mode != 1) || window(g, n, &pc))
    return NNT_ERR_INVAL;
  pc.k = (uint32_t)mode, pc.f0 = 1.0f / (float)(g->kh * g->kw);
  size_t in = n * g->c * g->h * g->w, out = n * g->c * g->oh * g->ow;
  return ew(vc, "pool_fwd", out, ARGS(RD(x, in), WR(y, out), WR(mode ? NULL : idx, out)), &pc);
}
static int v_pool_bwd(const nnt_kernels *self, const nnt_conv_geom *g, size_t n, int mode,
                      const float *dy, const float *idx, float *dx) {
  vk_ctx *vc = self->ctx;
  vk_push pc;
  if ((mode != 0 && mode != 1) || window(g, n, &pc))
    return NNT_ERR_INVAL;
  pc.k = (uint32_t)mode, pc.f0 = 1.0f / (float)(g->kh * g->kw);
  size_t in = n * g->c * g->h * g->w, out = n * g->c * g->oh * g->ow;
  return ew(vc, "pool_bwd", in, ARGS(RD(dy, out), RD(mode ? NULL : idx, out), WR(dx, in)), &pc);
}

static int v_sgd_step(const nnt_kernels *self, size_t n, float lr, const float *g, float *w,
                      const float *skip) {
  vk_ctx *vc = self->ctx;
  vk_push pc = {.i0 = 1, .i1 = skip ? 1u : 0u, .f0 = lr};
  return ew(vc, "axpy", n, ARGS(RD(g, n), WR(w, n), RD(skip, 1)), &pc);
}
static int v_adam_step(const nnt_kernels *self, size_t n, float lr_t, float b1, float b2, float eps,
                       float wscale, const float *g, float *m, float *v, float *w,
                       const float *skip) {
  vk_ctx *vc = self->ctx;
  vk_push pc = {.i1 = skip ? 1u : 0u, .f0 = lr_t, .f1 = b1, .f2 = b2, .f3 = eps, .f4 = wscale};
  return ew(vc, "adam_step", n, ARGS(RD(g, n), WR(m, n), WR(v, n), WR(w, n), RD(skip, 1)), &pc);
}
static int v_flag_nonfinite(const nnt_kernels *self, size_t n, const float *x, float *flag,
                            float *any) {
  vk_ctx *vc = self->ctx;
  if (!flag)
    return NNT_ERR_INVAL;
  vk_push pc = {.i0 = any ? 1u : 0u};
  return ew(vc, "flag_nonfinite", n, ARGS(RD(x, n), WR(flag, 1), WR(any, 1)), &pc);
}

static int v_mask_upper(const nnt_kernels *self, size_t mats, size_t rows, size_t cols, float v,
                        float *y) {
  vk_ctx *vc = self->ctx;
  if (rows > UINT32_MAX || cols > UINT32_MAX || (rows && cols && mats > SIZE_MAX / rows / cols))
    return NNT_ERR_INVAL;
  vk_push pc = {.rows = (uint32_t)rows, .cols = (uint32_t)cols, .f0 = v};
  size_t n = mats * rows * cols;
  return ew(vc, "mask_upper", n, ARGS(WR(y, n)), &pc);
}

/* Embedding's rows: the shader reads the rows indices in idx and the n_src floats
 * of src and writes the n_dst floats of dst, one invocation per value of
 * dst. The sizes must fit the shaders' 32-bit indices; the masked row goes
 * as a 32-bit value (n or more: none). */
static int rows_op(const nnt_kernels *self, const char *shader, size_t rows, size_t cols,
                   size_t n, size_t mask, const float *idx, const float *src, size_t n_src,
                   float *dst, size_t n_dst) {
  if (rows > UINT32_MAX || cols > UINT32_MAX || n >= INT32_MAX || rows * cols > UINT32_MAX ||
      n * cols > UINT32_MAX)
    return NNT_ERR_INVAL;
  vk_push pc = {.rows = (uint32_t)rows, .cols = (uint32_t)cols, .k = (uint32_t)n,
                .i0 = mask < n ? (uint32_t)mask : UINT32_MAX};
  return ew(self->ctx, shader, n_dst, ARGS(RD(idx, rows), RD(src, n_src), WR(dst, n_dst)), &pc);
}
static int v_gather_rows(const nnt_kernels *self, size_t rows, size_t cols, size_t n,
                         const float *idx, const float *table, size_t mask, float *y) {
  return rows_op(self, "gather_rows", rows, cols, n, mask, idx, table, n * cols, y, rows * cols);
}
static int v_scatter_add_rows(const nnt_kernels *self, size_t rows, size_t cols, size_t n,
                              const float *idx, const float *dy, size_t mask, float *dtable) {
  return rows_op(self, "scatter_rows", rows, cols, n, mask, idx, dy, rows * cols, dtable,
                 n * cols);
}

/* Layer normalization: ln.comp, one invocation per row (forward, dx) or
 * per column (dgamma, dbeta); the stats are written only where given. */
static int ln_dims(size_t rows, size_t cols, vk_push *pc) {
  if (rows > UINT32_MAX || cols > UINT32_MAX || (cols && rows > UINT32_MAX / cols))
    return NNT_ERR_INVAL;
  pc->rows = (uint32_t)rows, pc->cols = (uint32_t)cols;
  return NNT_OK;
}
static int v_ln_fwd(const nnt_kernels *self, size_t rows, size_t cols, const float *x,
                    const float *gamma, const float *beta, float eps, float *mean, float *invstd,
                    float *y) {
  vk_ctx *vc = self->ctx;
  vk_push pc = {.i0 = 0, .i1 = mean && invstd ? 1u : 0u, .f0 = eps};
  uint32_t gx, gy;
  if ((!mean) != (!invstd) || ln_dims(rows, cols, &pc) || groups(vc, rows, 64, &gx, &gy))
    return NNT_ERR_INVAL;
  size_t all = rows * cols;
  return dispatch(vc, "ln",
                  ARGS(RD(x, all), RD(gamma, cols), RD(beta, cols), WR(mean, rows),
                       WR(invstd, rows), WR(y, all)),
                  &pc, gx, gy);
}
static int v_ln_bwd(const nnt_kernels *self, size_t rows, size_t cols, const float *x,
                    const float *dy, const float *mean, const float *invstd, const float *gamma,
                    float *dx, float *dgamma, float *dbeta) {
  vk_ctx *vc = self->ctx;
  vk_push pc = {.i0 = 1, .i1 = (dgamma ? 1u : 0u) | (dbeta ? 2u : 0u)};
  uint32_t gx, gy;
  if (ln_dims(rows, cols, &pc))
    return NNT_ERR_INVAL;
  size_t all = rows * cols;
  int rc = NNT_OK;
  if (pc.i1 && groups(vc, cols, 64, &gx, &gy))
    return NNT_ERR_INVAL;
  if (pc.i1)
    rc = dispatch(vc, "ln",
                  ARGS(RD(x, all), RD(dy, all), RD(mean, rows), RD(invstd, rows), RD(NULL, 0),
                       RD(NULL, 0), WR(dgamma, cols), WR(dbeta, cols)),
                  &pc, gx, gy);
  if (rc || !dx)
    return rc;
  pc.i0 = 2;
  if (groups(vc, rows, 64, &gx, &gy))
    return NNT_ERR_INVAL;
  return dispatch(vc, "ln",
                  ARGS(RD(x, all), RD(dy, all), RD(mean, rows), RD(invstd, rows),
                       RD(gamma, cols), WR(dx, all)),
                  &pc, gx, gy);
}
static int v_pos_encoding(const nnt_kernels *self, size_t t, size_t d, float *table) {
  vk_ctx *vc = self->ctx;
  if (d > UINT32_MAX || (d && t > UINT32_MAX / d))
    return NNT_ERR_INVAL;
  vk_push pc = {.rows = (uint32_t)t, .cols = (uint32_t)d};
  return ew(vc, "pos_enc", t * d, ARGS(WR(table, t * d)), &pc);
}
static int v_div(const nnt_kernels *self, size_t n, const float *a, const float *b, float *y) {
  vk_ctx *vc = self->ctx;
  vk_push pc = {0};
  return ew(vc, "div", n, ARGS(RD(a, n), RD(b, n), WR(y, n)), &pc);
}

static const nnt_kernels vk_kernels = {
    .name = "vulkan",
    .gemm = v_gemm,
    .fill = v_fill,
    .copy = v_copy,
    .scale = v_scale,
    .clip_scale = v_clip_scale,
    .axpy = v_axpy,
    .add = v_add,
    .sub = v_sub,
    .mul = v_mul,
    .dot = v_dot,
    .sum = v_sum,
    .add_row_vec = v_add_row_vec,
    .add_col_vec = v_add_col_vec,
    .sum_cols = v_sum_cols,
    .sum_rows = v_sum_rows,
    .act_fwd = v_act_fwd,
    .act_bwd = v_act_bwd,
    .act_mask = v_act_mask,
    .act_bwd_mask = v_act_bwd_mask,
    .softmax_fwd = v_softmax_fwd,
    .softmax_bwd = v_softmax_bwd,
    .normalize_rows = v_normalize_rows,
    .xent_softmax_fwd = v_xent_softmax_fwd,
    .xent_softmax_bwd = v_xent_softmax_bwd,
    .mse_fwd = v_mse_fwd,
    .mse_bwd = v_mse_bwd,
    .argmax_match = v_argmax_match,
    .xent_sigmoid_fwd = v_xent_sigmoid_fwd,
    .xent_sigmoid_bwd = v_xent_sigmoid_bwd,
    .dropout_mask = v_dropout_mask,
    .bn_fwd_train = v_bn_fwd_train,
    .bn_fwd_infer = v_bn_fwd_infer,
    .bn_bwd = v_bn_bwd,
    .permute3 = v_permute3,
    .copy2d = v_copy2d,
    .im2col = v_im2col,
    .col2im = v_col2im,
    .pool_fwd = v_pool_fwd,
    .pool_bwd = v_pool_bwd,
    .upsample_nearest_fwd = v_upsample_nearest_fwd,
    .upsample_nearest_bwd = v_upsample_nearest_bwd,
    .sgd_step = v_sgd_step,
    .adam_step = v_adam_step,
    .flag_nonfinite = v_flag_nonfinite,
    .mask_upper = v_mask_upper,
    .gather_rows = v_gather_rows,
    .scatter_add_rows = v_scatter_add_rows,
    .ln_fwd = v_ln_fwd,
    .ln_bwd = v_ln_bwd,
    .pos_encoding = v_pos_encoding,
    .div = v_div,
};

void nnt_vk_kernels_init(vk_ctx *c) {
  c->k = vk_kernels;
  c->k.ctx = c;
}

/* Every op of the kernel table has a shader, but bn_affine: a shader's
 * gamma * xhat + beta may be contracted differently from bn.comp's, so
 * the GPU keeps batch normalization's output instead of recomputing it;
 * and conv_fwd, conv_bwd_x, conv_bwd_w, conv_wino, conv_wino_dw and
 * col2im_set (optional, left NULL): conv2d runs im2col, gemm, fill and
 * col2im; and bn_bwd_means (optional): batch norm calls bn_bwd twice;
 * and conv_bwd_x_add (optional): a convolution's derivative at a fan-out
 * is added in by the training loop. */
int nnt_vk_supports(const nnt_backend *be, nnt_kop op) {
  (void)be;
  return (unsigned)op < NNT_KOP__COUNT && op != NNT_KOP_BN_AFFINE && op != NNT_KOP_CONV_FWD &&
         op != NNT_KOP_CONV_BWD_X && op != NNT_KOP_CONV_BWD_W && op != NNT_KOP_CONV_WINO &&
         op != NNT_KOP_CONV_WINO_DW && op != NNT_KOP_COL2IM_SET && op != NNT_KOP_BN_BWD_MEANS &&
         op != NNT_KOP_CONV_BWD_X_ADD;
}
