/* The fake device (fake_device.h): the opaque buffer type, its registry of
 * live buffers by address, and the "fakedev" backend whose kernels map
 * every tensor address to the buffer's private bytes and run the CPU's
 * kernel there. */
#include "fake_device.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

fdev_counts fdev_count;

/* ---- the opaque buffer type ---------------------------------------------- */

#define FDEV_ALIGN 64
#define FDEV_SPAN ((uint64_t)1 << 32) /* address space of one buffer */

typedef struct opaque_mem {
  unsigned k;  /* index in the registry */
  char *bytes; /* the real bytes, FDEV_ALIGN-aligned like the host's */
} opaque_mem;

/* Live buffers by index k (base FDEV_BASE + k * FDEV_SPAN); NULL once
 * freed. Buffers may be made and freed on other threads than the one
 * computing, hence the lock. */
static struct {
  pthread_mutex_t lock;
  nnt_buffer **live;
  size_t cap;
  size_t bytes; /* of the live buffers: the device's memory */
} reg = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};

static int opq_alloc(const nnt_buffer_type *t, size_t size, const char *what, nnt_buffer **out,
                     nnt_err *e) {
  nnt_buffer *b = nnt_calloc(1, sizeof *b);
  opaque_mem *mem = b ? nnt_calloc(1, sizeof *mem) : NULL;
  char *bytes = mem ? nnt_aligned_alloc(FDEV_ALIGN, size ? size : 1) : NULL;
  if (!bytes) {
    nnt_free(mem);
    nnt_free(b);
    return nnt_err_set(e, NNT_ERR_NOMEM, "cannot allocate %s (%zu bytes)", what, size);
  }
  memset(bytes, 0, size ? size : 1);
  pthread_mutex_lock(&reg.lock);
  unsigned k = ++fdev_count.buffers;
  if (k >= reg.cap) {
    size_t cap = reg.cap ? 2 * reg.cap : 256;
    while (cap <= k)
      cap *= 2;
    nnt_buffer **live = realloc(reg.live, cap * sizeof *live);
    if (!live)
      abort();
    memset(live + reg.cap, 0, (cap - reg.cap) * sizeof *live);
    reg.live = live;
    reg.cap = cap;
  }
  reg.live[k] = b;
  reg.bytes += size;
  pthread_mutex_unlock(&reg.lock);
  mem->k = k;
  mem->bytes = bytes;
  b->type = t;
  b->size = size;
  b->ctx = mem;
  *out = b;
  return NNT_OK;
}

static void opq_free(nnt_buffer *b) {
  opaque_mem *mem = b->ctx;
  pthread_mutex_lock(&reg.lock);
  reg.live[mem->k] = NULL;
  reg.bytes -= b->size;
  pthread_mutex_unlock(&reg.lock);
  nnt_free(mem->bytes);
  nnt_free(mem);
  nnt_free(b);
}

static size_t opq_alignment(const nnt_buffer_type *t) {
  (void)t;
  return FDEV_ALIGN;
}

static size_t opq_max_size(const nnt_buffer_type *t) {
  (void)t;
  return (size_t)(FDEV_SPAN - FDEV_ALIGN);
}

/* The chunk tests set (fdev_set_chunk): 0 for none. */
static size_t chunk;

void fdev_set_chunk(size_t c) { chunk = c; }

static size_t opq_chunk(const nnt_buffer_type *t) {
  (void)t;
  return chunk;
}

static int opq_is_host(const nnt_buffer_type *t) {
  (void)t;
  return 0;
}

static char *opq_base(const nnt_buffer *b) {
  const opaque_mem *mem = b->ctx;
  return (char *)(uintptr_t)(FDEV_BASE + (uint64_t)mem->k * FDEV_SPAN);
}

static int opq_range(const nnt_buffer *b, size_t off, size_t n, nnt_err *e) {
  if (off > b->size || n > b->size - off)
    return nnt_err_set(e, NNT_ERR_INVAL, "opaque buffer: bytes [%zu, %zu) outside %zu", off,
                       off + n, b->size);
  return NNT_OK;
}

static int opq_set(nnt_buffer *b, size_t off, const void *src, size_t n, nnt_err *e) {
  int rc = opq_range(b, off, n, e);
  if (!rc && n)
    memcpy(((opaque_mem *)b->ctx)->bytes + off, src, n);
  fdev_count.sets++;
  return rc;
}

static int opq_get(const nnt_buffer *b, size_t off, void *dst, size_t n, nnt_err *e) {
  int rc = opq_range(b, off, n, e);
  if (!rc && n)
    memcpy(dst, ((const opaque_mem *)b->ctx)->bytes + off, n);
  fdev_count.gets++;
  return rc;
}

static int opq_memset(nnt_buffer *b, size_t off, int v, size_t n, nnt_err *e) {
  int rc = opq_range(b, off, n, e);
  if (!rc && n)
    memset(((opaque_mem *)b->ctx)->bytes + off, v, n);
  fdev_count.memsets++;
  return rc;
}

static const nnt_buffer_type opaque_type = {
    .name = "opaque (test)",
    .alloc = opq_alloc,
    .free = opq_free,
    .alignment = opq_alignment,
    .max_size = opq_max_size,
    .chunk = opq_chunk,
    .is_host = opq_is_host,
    .base = opq_base,
    .set = opq_set,
    .get = opq_get,
    .memset = opq_memset,
};

const nnt_buffer_type *fdev_buffer_type(void) { return &opaque_type; }

int fdev_is_opaque(const void *p) { return (uintptr_t)p >= FDEV_BASE; }

static void die(const char *op, const char *arg, const void *p, const char *why) {
  fprintf(stderr, "fakedev: op '%s': argument '%s' = %p %s: a host pointer (or a stale "
          "address) was handed to a kernel\n", op, arg, p, why);
  fflush(stderr);
  abort();
}

void *fdev_host(const void *p, const char *op, const char *arg) {
  if (!p)
    return NULL;
  uintptr_t a = (uintptr_t)p;
  if (a < FDEV_BASE)
    die(op, arg, p, "is not a device address");
  uint64_t k = (a - FDEV_BASE) / FDEV_SPAN, off = (a - FDEV_BASE) % FDEV_SPAN;
  char *host = NULL;
  pthread_mutex_lock(&reg.lock);
  nnt_buffer *b = k < reg.cap ? reg.live[k] : NULL;
  if (b && off <= b->size) /* the end of a buffer: an empty tensor */
    host = ((opaque_mem *)b->ctx)->bytes + off;
  pthread_mutex_unlock(&reg.lock);
  if (!host)
    die(op, arg, p, b ? "lies past the end of its buffer" : "lies in no live buffer");
  return host;
}

/* ---- the kernels ----------------------------------------------------------- */

static const nnt_kernels *cpu;

/* 1 (and a line on stderr) when floats [p, p + n) cross a multiple of the
 * chunk in their buffer: an op refuses such an argument, as a device
 * binding one chunk at a time would have to. */
static int crosses(const char *op, const char *arg, const void *p, size_t n) {
  if (!chunk || !p || !n)
    return 0;
  uint64_t off = ((uintptr_t)p - FDEV_BASE) % FDEV_SPAN, end = off + n * sizeof(float) - 1;
  if (off / chunk == end / chunk)
    return 0;
  fprintf(stderr, "fakedev: op '%s': argument '%s' (bytes [%llu, %llu] of its buffer) crosses "
          "a multiple of the chunk of %zu bytes\n", op, arg, (unsigned long long)off,
          (unsigned long long)end, chunk);
  fdev_count.chunk_refusals++;
  return 1;
}

/* Every tensor address through fdev_host; host arrays (permute3's d and
 * perm, the convolution geometry) and scalars as they are. checks: a C(p,
 * floats) for each tensor argument, its extent checked against the chunk
 * first. */
#define H(p) fdev_host((p), op_name, #p)
#define C(p, n) || crosses(op_name, #p, (p), (n))
#define F(n, params, checks, args)                                                        \
  static int fd_##n SELF_PARAMS params {                                                  \
    static const char op_name[] = #n;                                                     \
    (void)self;                                                                           \
    fdev_count.ops++;                                                                     \
    if (0 CHECKS checks)                                                                  \
      return NNT_ERR_INVAL;                                                               \
    return cpu->n CPU_ARGS args;                                                          \
  }
#define CHECKS(...) __VA_ARGS__
/* (a, b) -> (const nnt_kernels *self, a, b) and (a, b) -> (cpu, a, b) */
#define SELF_PARAMS(...) (const nnt_kernels *self, __VA_ARGS__)
#define CPU_ARGS(...) (cpu, __VA_ARGS__)
typedef const float *cf;
typedef const struct nnt_conv_geom *cg;
/* the extent of a matrix of r rows, c columns and leading dimension ld */
static size_t mat(size_t r, size_t c, size_t ld) { return r && c ? (r - 1) * ld + c : 0; }
#define GEO_IN(g) ((size_t)(g)->c * (g)->h * (g)->w)
#define GEO_OUT(g) ((size_t)(g)->oh * (g)->ow)
#define GEO_COL(g) ((size_t)(g)->c * (g)->kh * (g)->kw * GEO_OUT(g))
/* im2col's x and col2im's dx: n images nnt_conv_img_stride apart, the last
 * one's block of c channels */
#define GEO_IMGS(g, n) ((n) ? ((n) - 1) * nnt_conv_img_stride(g) + GEO_IN(g) : 0)
F(gemm, (int ta, int tb, size_t m, size_t n, size_t k, float al, cf a, size_t lda, cf b,
         size_t ldb, float be, float *c, size_t ldc),
  (C(a, mat(ta ? k : m, ta ? m : k, lda)) C(b, mat(tb ? n : k, tb ? k : n, ldb))
   C(c, mat(m, n, ldc))),
  (ta, tb, m, n, k, al, H(a), lda, H(b), ldb, be, H(c), ldc))
F(gemm_rows, (int ta, int tb, size_t m, size_t n, size_t k, float al, cf a, size_t lda, cf b,
              size_t ldb, float be, float *c, size_t ldc),
  (C(a, mat(ta ? k : m, ta ? m : k, lda)) C(b, mat(tb ? n : k, tb ? k : n, ldb))
   C(c, mat(m, n, ldc))),
  (ta, tb, m, n, k, al, H(a), lda, H(b), ldb, be, H(c), ldc))
F(fill, (size_t n, float v, float *y), (C(y, n)), (n, v, H(y)))
F(copy, (size_t n, cf x, float *y), (C(x, n) C(y, n)), (n, H(x), H(y)))
F(copy2d, (size_t r, size_t c, cf x, size_t ldx, float *y, size_t ldy),
  (C(x, mat(r, c, ldx)) C(y, mat(r, c, ldy))), (r, c, H(x), ldx, H(y), ldy))
F(scale, (size_t n, float a, float *y), (C(y, n)), (n, a, H(y)))
F(axpy, (size_t n, float a, cf x, float *y), (C(x, n) C(y, n)), (n, a, H(x), H(y)))
F(add, (size_t n, cf a, cf b, float *y), (C(a, n) C(b, n) C(y, n)), (n, H(a), H(b), H(y)))
F(sub, (size_t n, cf a, cf b, float *y), (C(a, n) C(b, n) C(y, n)), (n, H(a), H(b), H(y)))
F(mul, (size_t n, cf a, cf b, float *y), (C(a, n) C(b, n) C(y, n)), (n, H(a), H(b), H(y)))
F(dot, (size_t n, cf x, cf y, float *o), (C(x, n) C(y, n) C(o, 1)), (n, H(x), H(y), H(o)))
F(sum, (size_t n, cf x, float *o), (C(x, n) C(o, 1)), (n, H(x), H(o)))
F(add_row_vec, (size_t r, size_t c, cf v, float *y), (C(v, c) C(y, r * c)),
  (r, c, H(v), H(y)))
F(add_col_vec, (size_t r, size_t c, cf v, float *y), (C(v, r) C(y, r * c)),
  (r, c, H(v), H(y)))
F(sum_cols, (size_t r, size_t c, cf x, float b, float *o), (C(x, r * c) C(o, r)),
  (r, c, H(x), b, H(o)))
F(sum_rows, (size_t r, size_t c, cf x, float b, float *o), (C(x, r * c) C(o, c)),
  (r, c, H(x), b, H(o)))
F(act_fwd, (nnt_act a, float al, size_t n, cf x, float *y), (C(x, n) C(y, n)),
  (a, al, n, H(x), H(y)))
F(act_bwd, (nnt_act a, float al, size_t n, cf x, cf y, cf dy, float *dx),
  (C(x, n) C(y, n) C(dy, n) C(dx, n)), (a, al, n, H(x), H(y), H(dy), H(dx)))
F(act_mask, (size_t n, cf y, float *m), (C(y, n) C(m, nnt_mask_words(n))), (n, H(y), H(m)))
F(act_bwd_mask, (nnt_act a, float al, size_t n, cf m, cf dy, float *dx),
  (C(m, nnt_mask_words(n)) C(dy, n) C(dx, n)), (a, al, n, H(m), H(dy), H(dx)))
F(softmax_fwd, (size_t r, size_t c, cf x, float *y), (C(x, r * c) C(y, r * c)),
  (r, c, H(x), H(y)))
F(softmax_bwd, (size_t r, size_t c, cf y, cf dy, float *dx),
  (C(y, r * c) C(dy, r * c) C(dx, r * c)), (r, c, H(y), H(dy), H(dx)))
F(normalize_rows, (size_t r, size_t c, unsigned mode, cf x, float *y),
  (C(x, r * c) C(y, r * c)), (r, c, mode, H(x), H(y)))
F(xent_softmax_fwd, (size_t r, size_t c, cf p, cf l, float *o),
  (C(p, r * c) C(l, r * c) C(o, 1)), (r, c, H(p), H(l), H(o)))
F(xent_softmax_bwd, (size_t r, size_t c, cf p, cf l, float *dx),
  (C(p, r * c) C(l, r * c) C(dx, r * c)), (r, c, H(p), H(l), H(dx)))
F(xent_sigmoid_fwd, (size_t r, size_t c, cf x, cf l, float *o),
  (C(x, r * c) C(l, r * c) C(o, 1)), (r, c, H(x), H(l), H(o)))
F(xent_sigmoid_bwd, (size_t r, size_t c, cf x, cf l, float *dx),
  (C(x, r * c) C(l, r * c) C(dx, r * c)), (r, c, H(x), H(l), H(dx)))
F(mse_fwd, (size_t n, cf y, cf l, float *o), (C(y, n) C(l, n) C(o, 1)), (n, H(y), H(l), H(o)))
F(mse_bwd, (size_t n, cf y, cf l, float *dx), (C(y, n) C(l, n) C(dx, n)),
  (n, H(y), H(l), H(dx)))
F(argmax_match, (size_t r, size_t c, cf y, cf l, float *o), (C(y, r * c) C(l, r * c) C(o, 1)),
  (r, c, H(y), H(l), H(o)))
F(dropout_mask, (size_t n, float rate, uint64_t key, uint64_t st, float *mask), (C(mask, n)),
  (n, rate, key, st, H(mask)))
F(bn_fwd_train, (size_t o, size_t ch, size_t in, cf x, cf g, cf b, float eps, float *mean,
                 float *var, float *invstd, float *xhat, float *y),
  (C(x, o * ch * in) C(g, ch) C(b, ch) C(mean, ch) C(var, ch) C(invstd, ch)
   C(xhat, o * ch * in) C(y, o * ch * in)),
  (o, ch, in, H(x), H(g), H(b), eps, H(mean), H(var), H(invstd), H(xhat), H(y)))
F(bn_fwd_infer, (size_t o, size_t ch, size_t in, cf x, cf mean, cf var, cf g, cf b, float eps,
                 float *y),
  (C(x, o * ch * in) C(mean, ch) C(var, ch) C(g, ch) C(b, ch) C(y, o * ch * in)),
  (o, ch, in, H(x), H(mean), H(var), H(g), H(b), eps, H(y)))
F(bn_bwd, (size_t o, size_t ch, size_t in, cf dy, cf xhat, cf invstd, cf g, float *dx,
           float *dg, float *db),
  (C(dy, o * ch * in) C(xhat, o * ch * in) C(invstd, ch) C(g, ch) C(dx, o * ch * in)
   C(dg, ch) C(db, ch)),
  (o, ch, in, H(dy), H(xhat), H(invstd), H(g), H(dx), H(dg), H(db)))
F(bn_bwd_means, (size_t o, size_t ch, size_t in, cf dy, cf xhat, cf invstd, cf g, float *dx,
                 float *dg, float *db, float *means),
  (C(dy, o * ch * in) C(xhat, o * ch * in) C(invstd, ch) C(g, ch) C(dx, o * ch * in)
   C(dg, ch) C(db, ch) C(means, 2 * ch)),
  (o, ch, in, H(dy), H(xhat), H(invstd), H(g), H(dx), H(dg), H(db), H(means)))
F(bn_affine, (size_t o, size_t ch, size_t in, cf xhat, cf g, cf b, float *y),
  (C(xhat, o * ch * in) C(g, ch) C(b, ch) C(y, o * ch * in)),
  (o, ch, in, H(xhat), H(g), H(b), H(y)))
F(bn_fwd_stats, (size_t o, size_t ch, size_t in, cf x, cf mean, cf is, cf g, cf b, float *y),
  (C(x, o * ch * in) C(mean, ch) C(is, ch) C(g, ch) C(b, ch) C(y, o * ch * in)),
  (o, ch, in, H(x), H(mean), H(is), H(g), H(b), H(y)))
F(permute3, (size_t b, const unsigned d[3], const unsigned p[3], cf x, float *y),
  (C(x, b * d[0] * d[1] * d[2]) C(y, b * d[0] * d[1] * d[2])), (b, d, p, H(x), H(y)))
F(upsample_nearest_fwd, (size_t r, size_t h, size_t w, size_t kh, size_t kw, cf x, float *y),
  (C(x, r * h * w) C(y, r * h * kh * w * kw)), (r, h, w, kh, kw, H(x), H(y)))
F(upsample_nearest_bwd, (size_t r, size_t h, size_t w, size_t kh, size_t kw, cf dy, float *dx),
  (C(dy, r * h * kh * w * kw) C(dx, r * h * w)), (r, h, w, kh, kw, H(dy), H(dx)))
F(im2col, (cg g, size_t n, cf x, float *col), (C(x, GEO_IMGS(g, n)) C(col, n * GEO_COL(g))),
  (g, n, H(x), H(col)))
F(col2im, (cg g, size_t n, cf col, float *dx), (C(col, n * GEO_COL(g)) C(dx, GEO_IMGS(g, n))),
  (g, n, H(col), H(dx)))
F(col2im_set, (cg g, size_t n, cf col, float *dx),
  (C(col, n * GEO_COL(g)) C(dx, GEO_IMGS(g, n))), (g, n, H(col), H(dx)))
F(conv_fwd, (cg g, size_t n, size_t f, cf w, cf b, cf x, float *y),
  (C(w, f * g->c * g->kh * g->kw) C(b, b ? f : 0) C(x, n * GEO_IN(g)) C(y, n * f * GEO_OUT(g))),
  (g, n, f, H(w), H(b), H(x), H(y)))
F(conv_bwd_x, (cg g, size_t n, size_t f, cf w, cf dy, float *dx),
  (C(w, f * g->c * g->kh * g->kw) C(dy, n * f * GEO_OUT(g)) C(dx, n * GEO_IN(g))),
  (g, n, f, H(w), H(dy), H(dx)))
F(conv_bwd_x_add, (cg g, size_t n, size_t f, cf w, cf dy, float *dx),
  (C(w, f * g->c * g->kh * g->kw) C(dy, n * f * GEO_OUT(g)) C(dx, n * GEO_IN(g))),
  (g, n, f, H(w), H(dy), H(dx)))
F(conv_bwd_w, (cg g, size_t n, size_t f, cf x, cf dy, float *dw),
  (C(x, n * GEO_IN(g)) C(dy, n * f * GEO_OUT(g)) C(dw, f * g->c * g->kh * g->kw)),
  (g, n, f, H(x), H(dy), H(dw)))
F(pool_fwd, (cg g, size_t n, int mode, cf x, float *y, float *idx),
  (C(x, n * GEO_IN(g)) C(y, n * g->c * GEO_OUT(g)) C(idx, n * g->c * GEO_OUT(g))),
  (g, n, mode, H(x), H(y), H(idx)))
F(pool_bwd, (cg g, size_t n, int mode, cf dy, cf idx, float *dx),
  (C(dy, n * g->c * GEO_OUT(g)) C(idx, n * g->c * GEO_OUT(g)) C(dx, n * GEO_IN(g))),
  (g, n, mode, H(dy), H(idx), H(dx)))
F(sgd_step, (size_t n, float lr, cf g, float *w, cf skip), (C(g, n) C(w, n) C(skip, 1)),
  (n, lr, H(g), H(w), H(skip)))
F(adam_step, (size_t n, float lr, float b1, float b2, float eps, float ws, cf g, float *m, float *v,
              float *w, cf skip),
  (C(g, n) C(m, n) C(v, n) C(w, n) C(skip, 1)),
  (n, lr, b1, b2, eps, ws, H(g), H(m), H(v), H(w), H(skip)))
F(clip_scale, (size_t n, float mx, cf sq, float *y), (C(sq, 1) C(y, n)), (n, mx, H(sq), H(y)))
F(flag_nonfinite, (size_t n, cf x, float *flag, float *any), (C(x, n) C(flag, 1) C(any, 1)),
  (n, H(x), H(flag), H(any)))
F(mask_upper, (size_t mats, size_t rows, size_t cols, float v, float *y),
  (C(y, mats * rows * cols)), (mats, rows, cols, v, H(y)))
F(gather_rows, (size_t r, size_t c, size_t n, cf idx, cf t, size_t mask, float *y),
  (C(idx, r) C(t, n * c) C(y, r * c)), (r, c, n, H(idx), H(t), mask, H(y)))
F(scatter_add_rows, (size_t r, size_t c, size_t n, cf idx, cf dy, size_t mask, float *dt),
  (C(idx, r) C(dy, r * c) C(dt, n * c)), (r, c, n, H(idx), H(dy), mask, H(dt)))
F(ln_fwd, (size_t r, size_t c, cf x, cf g, cf b, float eps, float *mean, float *is, float *y),
  (C(x, r * c) C(g, c) C(b, c) C(mean, r) C(is, r) C(y, r * c)),
  (r, c, H(x), H(g), H(b), eps, H(mean), H(is), H(y)))
F(ln_bwd, (size_t r, size_t c, cf x, cf dy, cf mean, cf is, cf g, float *dx, float *dg,
           float *db),
  (C(x, r * c) C(dy, r * c) C(mean, r) C(is, r) C(g, c) C(dx, r * c) C(dg, c) C(db, c)),
  (r, c, H(x), H(dy), H(mean), H(is), H(g), H(dx), H(dg), H(db)))
F(pos_encoding, (size_t t, size_t d, float *tab), (C(tab, t * d)), (t, d, H(tab)))
F(div, (size_t n, cf a, cf b, float *y), (C(a, n) C(b, n) C(y, n)), (n, H(a), H(b), H(y)))
F(conv_wino, (cg g, size_t n, size_t f, int flip, cf w, cf b, cf x, float *y, float *s, size_t sl),
  (C(w, f * g->c * 9) C(b, b ? f : 0) C(x, n * GEO_IN(g)) C(y, n * f * GEO_OUT(g)) C(s, sl)),
  (g, n, f, flip, H(w), H(b), H(x), H(y), H(s), sl))
F(conv_wino_dw, (cg g, size_t n, size_t f, cf dy, cf x, float *dw, float *s, size_t sl),
  (C(dy, n * f * GEO_OUT(g)) C(x, n * GEO_IN(g)) C(dw, f * g->c * 9) C(s, sl)),
  (g, n, f, H(dy), H(x), H(dw), H(s), sl))
#undef F
#undef H
#undef C
#undef CHECKS

static nnt_kernels table;

/* ---- the backend ----------------------------------------------------------- */

static int fdev_synchronize(nnt_backend *be, nnt_err *e) {
  (void)be, (void)e; /* every op has finished when it returns */
  return NNT_OK;
}

static int fdev_supports(const nnt_backend *be, nnt_kop op) {
  (void)be;
  return (unsigned)op < NNT_KOP__COUNT;
}

/* Device memory: the bytes of its live buffers; it stages nothing. */
static void fdev_memory(const nnt_backend *be, nnt_mem_usage *out) {
  (void)be;
  pthread_mutex_lock(&reg.lock);
  out->device = reg.bytes;
  pthread_mutex_unlock(&reg.lock);
  out->host = 0;
}

static nnt_backend fake = {
    .name = "fakedev",
    .engine = "cpu",
    .buft = &opaque_type,
    .k = &table,
    .synchronize = fdev_synchronize,
    .supports = fdev_supports,
    .memory = fdev_memory,
};

static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void make_table(void) {
  cpu = nnt_kernels_cpu();
  table = *cpu; /* name and prepare */
  table.name = "fakedev";
  table.parallel = NULL; /* a device: no host threads of its own */
#define SET(E, n) table.n = fd_##n;
  NNT_KOP_LIST(SET)
#undef SET
}

nnt_backend *fdev_backend(void) {
  pthread_once(&table_once, make_table);
  return &fake;
}
