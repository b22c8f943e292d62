/* CPU Winograd convolution F(4x4, 3x3), which the CPU's conv_wino takes
 * where an image has enough tiles and the scratch holds one pass of it
 * (nnt_cpu_wino4_takes; kernels.h NNT_WINO4_IMAGE_TILES): a 4x4 block
 * of outputs of a 3x3 window with stride 1 and dilation 1 from a 6x6
 * block of inputs takes 36 products per (filter, channel) instead of
 * im2col's 144 and F(2x2, 3x3)'s 64 (cpu_winograd.c). With B, G, A the
 * F(4, 3) matrices of Lavin and Gray (2016), interpolation points 0, 1,
 * -1, 2, -2 and infinity:
 *   U[k][f][c] = (G g[f][c] G^T)[k]     the filters, 36 slices [F, C]
 *   V[k][c][t] = (B^T d[c][t] B)[k]     the input tiles, [C, tiles]
 *   M[k]       = U[k] V[k]               36 sgemms [F, C] x [C, tiles]
 *   y[f][t]    = A^T M[.][f][t] A        (+ bias) 4x4 outputs of tile t
 * Tiles are numbered over (image, tile row, tile column); outputs past an
 * edge are dropped and inputs outside the image (padding) are zeros. One
 * pass holds all 36 slices: U whole, and V and M for a chunk of tiles
 * (nnt_wino4_scratch). Chunks keep to one image (a call over n images
 * computes what calls over any groups of them do, bit for bit), and an
 * image's tiles split into chunks as even as they go.
 * The transforms run over blocks of W4_VB of the chunk's tiles: each
 * tile's 6x6 inputs are gathered into 36 rows of the block's length (a
 * run along a tile row at a time, zeros outside the image: gather6e), so
 * that every step of B^T d B and of A^T M A is a loop over contiguous
 * tiles; the outputs go back a tile row at a time.
 * flip: as conv_wino's, the derivative of a stride-1 3x3 convolution (w
 * the forward's [C][F][3][3], turned by 180 degrees).
 * conv_wino_dw takes its weight gradient (at the end) where the scratch
 * holds it, whatever the tiles an image: one call over the batch.
 * Its rounding: the points 2 and -2 give transforms with entries up to 8
 * (A) and 1/24 (G), so errors grow with the values' spread more than
 * F(2, 3)'s (docs/performance.md gives what was measured against im2col). */
#include <cblas.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#endif

#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/kernels.h"

/* A run of tiles' six rows of inputs for gather6e: the channel's plane
 * (w columns, h rows), the run's first input row y0 and column x0 (from
 * the padding: negative at the top and left edges), and the run's columns
 * [lo, hi) (of 4 tiles + 2) that lie inside the image. */
typedef struct w4_span {
  const float *plane;
  size_t w, h;
  long y0, x0, lo, hi;
} w4_span;

/* The transform loops (cpu_winograd4_loops.h) in plain x86-64, AVX2 and
 * AVX-512 copies; w4_pick chooses by the CPU and nnt_cpu_vec_path. */
#define NL(name) name##_c
#include "nntrainer/compute/cpu_winograd4_loops.h"
#undef NL
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define W4_HAVE_AVX 1
#pragma GCC push_options
#pragma GCC target("avx2")
#define NL(name) name##_avx2
#include "nntrainer/compute/cpu_winograd4_loops.h"
#undef NL
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f")
#define W4_LOOPS_AVX512 1
#define NL(name) name##_avx512
#include "nntrainer/compute/cpu_winograd4_loops.h"
#undef NL
#undef W4_LOOPS_AVX512
#pragma GCC pop_options
#endif

typedef struct w4_loops {
  void (*bt6)(size_t, const float *restrict, const float *restrict, const float *restrict,
              const float *restrict, const float *restrict, const float *restrict,
              float *restrict, float *restrict, float *restrict, float *restrict,
              float *restrict, float *restrict);
  void (*gather6e)(size_t, const struct w4_span *, float *, size_t);
  void (*scatter4)(size_t, const float *restrict, const float *restrict,
                   const float *restrict, const float *restrict, float, float *restrict);
  void (*at6)(size_t, const float *restrict, const float *restrict, const float *restrict,
              const float *restrict, const float *restrict, const float *restrict,
              float *restrict, float *restrict, float *restrict, float *restrict);
  void (*a4)(size_t, const float *restrict, const float *restrict, const float *restrict,
             const float *restrict, float *restrict, float *restrict, float *restrict,
             float *restrict, float *restrict, float *restrict);
  void (*gather4e)(size_t, const struct w4_span *, float *, size_t);
  void (*g3)(size_t, const float *restrict, const float *restrict, const float *restrict,
             float *restrict, float *restrict, float *restrict, float *restrict,
             float *restrict, float *restrict);
} w4_loops;

/* The widest copy the CPU runs and nnt_cpu_vec_path allows. */
static const w4_loops *w4_pick(void) {
  static const w4_loops c = {bt6_loop_c, gather6e_c, scatter4_c, at6_loop_c,
                             a4_loop_c,  gather4e_c, g3_loop_c};
#ifdef W4_HAVE_AVX
  static const w4_loops avx2 = {bt6_loop_avx2, gather6e_avx2, scatter4_avx2,
                                at6_loop_avx2, a4_loop_avx2,   gather4e_avx2, g3_loop_avx2};
  static const w4_loops avx512 = {bt6_loop_avx512, gather6e_avx512, scatter4_avx512,
                                  at6_loop_avx512, a4_loop_avx512, gather4e_avx512, g3_loop_avx512};
  if (nnt_cpu_vec_avx512())
    return &avx512;
  if (nnt_cpu_vec_avx2())
    return &avx2;
#endif
  return &c;
}

/* The most tiles of a chunk. */
#define W4_MAX_TILES NNT_WINO4_MAX_TILES
/* The transforms run over blocks of W4_VB of a chunk's tiles, so that
 * their stack buffers (36 rows at most of a block each) stay in L1 where
 * whole chunks of them did not; a row is padded so that the rows do not
 * fall on the same cache sets. */
#define W4_VB 32
#define W4_VROW (W4_VB + 16)

typedef struct w4_job {
  const nnt_conv_geom *g;
  size_t n, f, c, th, tw;
  int flip;
  const float *w, *bias, *x, *dy; /* dy: the weight gradient's */
  float *y, *dw;
  float *u, *v, *m; /* [36][f][c], [36][c][tc], [36][f][tc] */
  size_t t0, tc; /* the chunk: tiles [t0, t0 + tc) of the numbering over images */
  const struct w4_loops *lp; /* the transform loops' copy */
} w4_job;

/* G applied to three rows into six, in the job's copy of the loop: G's
 * rows are (1/4, 0, 0), (-1/6, -1/6, -1/6), (-1/6, 1/6, -1/6),
 * (1/24, 1/12, 1/6), (1/24, -1/12, 1/6), (0, 0, 1). */
static void g3(const w4_job *j, const float *a, const float *b, const float *c,
               float *const o[6], size_t n) {
  j->lp->g3(n, a, b, c, o[0], o[1], o[2], o[3], o[4], o[5]);
}

/* U of filters [f0, f1): slice 6i + e is (G g G^T)[i][e], a block of UB
 * channels at a time. */
#define UB 32
static void u_part(void *arg, size_t f0, size_t f1) {
  const w4_job *j = arg;
  float g[9][UB], t[6][3][UB];
  for (size_t f = f0; f < f1; f++)
    for (size_t c0 = 0; c0 < j->c; c0 += UB) {
      size_t nc = j->c - c0 < UB ? j->c - c0 : UB;
      nnt_cpu_wino_taps(j->w, j->flip, f, j->f, j->c, c0, nc, UB, g[0]);
      for (int b = 0; b < 3; b++) { /* G g: column b */
        float *o[6] = {t[0][b], t[1][b], t[2][b], t[3][b], t[4][b], t[5][b]};
        g3(j, g[b], g[3 + b], g[6 + b], o, nc);
      }
      for (int i = 0; i < 6; i++) { /* (G g) G^T: row i */
        float *o[6];
        for (int e = 0; e < 6; e++)
          o[e] = j->u + ((size_t)(6 * i + e) * j->f + f) * j->c + c0;
        g3(j, t[i][0], t[i][1], t[i][2], o, nc);
      }
    }
}

/* B^T applied to six rows (each n values): B^T's rows are
 * (4, 0, -5, 0, 1, 0), (0, -4, -4, 1, 1, 0), (0, 4, -4, -1, 1, 0),
 * (0, -2, -1, 2, 1, 0), (0, 2, -1, -2, 1, 0), (0, 4, 0, -5, 0, 1), in
 * the job's copy of the loop. */
static void bt6(const w4_job *j, const float *const d[6], float *const o[6], size_t n) {
  j->lp->bt6(n, d[0], d[1], d[2], d[3], d[4], d[5], o[0], o[1], o[2], o[3], o[4], o[5]);
}



/* A run of the chunk's tiles along one tile row, from its tile tl and
 * ending before its tile end: the image, tile row and tile column of its
 * first tile, its length, the rows of outputs its tiles hold (4 but at
 * the bottom edge) and how many of its tiles hold 4 columns of outputs
 * (all but one at the right edge). */
typedef struct w4_run {
  size_t img, ty, tx, len, rows, full;
} w4_run;

static w4_run run_at(const w4_job *j, size_t tl, size_t end) {
  const nnt_conv_geom *g = j->g;
  size_t tile = j->t0 + tl, per = j->th * j->tw, at = tile % per;
  w4_run r = {.img = tile / per, .ty = at / j->tw, .tx = at % j->tw};
  r.len = j->tw - r.tx < end - tl ? j->tw - r.tx : end - tl;
  r.rows = g->oh - 4 * r.ty < 4 ? g->oh - 4 * r.ty : 4;
  r.full = (g->ow - 4 * r.tx) / 4 < r.len ? (g->ow - 4 * r.tx) / 4 : r.len;
  return r;
}

/* V of channels [c0, c1) for the chunk, a block of W4_VB tiles at a time:
 * each tile's 6x6 inputs gathered into 36 rows over the block's tiles
 * (zeros outside the image; a run's six rows at a time, gather6e), then
 * B^T down each tile's rows and along its columns, each step a loop over
 * the block's tiles. */
static void v_part(void *arg, size_t c0, size_t c1) {
  const w4_job *j = arg;
  const nnt_conv_geom *g = j->g;
  float d[6][6][W4_VROW], t[6][6][W4_VROW];
  size_t n = j->tc;
  for (size_t c = c0; c < c1; c++)
    for (size_t b0 = 0; b0 < n; b0 += W4_VB) { /* a block of the chunk's tiles */
      size_t nb = n - b0 < W4_VB ? n - b0 : W4_VB;
      for (size_t tl = b0; tl < b0 + nb;) { /* a run of tiles along one tile row */
        w4_run ru = run_at(j, tl, b0 + nb);
        size_t len = ru.len, at = tl - b0;
        w4_span sp = {.plane = j->x + (ru.img * j->c + c) * g->h * g->w, .w = g->w, .h = g->h,
                      .y0 = 4 * (long)ru.ty - (long)g->pt, .x0 = 4 * (long)ru.tx - (long)g->pl};
        sp.lo = sp.x0 < 0 ? -sp.x0 : 0;
        sp.hi = (long)g->w - sp.x0;
        if (sp.hi > 4 * (long)len + 2)
          sp.hi = 4 * (long)len + 2;
        if (sp.hi < sp.lo)
          sp.hi = sp.lo;
        j->lp->gather6e(len, &sp, (float *)d + at, W4_VROW);
        tl += len;
      }
      for (int p = 0; p < 6; p++) { /* B^T d: down the rows, per column */
        const float *in[6] = {d[0][p], d[1][p], d[2][p], d[3][p], d[4][p], d[5][p]};
        float *o[6] = {t[0][p], t[1][p], t[2][p], t[3][p], t[4][p], t[5][p]};
        bt6(j, in, o, nb);
      }
      for (int a = 0; a < 6; a++) { /* (B^T d) B: along the columns */
        const float *in[6] = {t[a][0], t[a][1], t[a][2], t[a][3], t[a][4], t[a][5]};
        float *o[6];
        for (int b = 0; b < 6; b++)
          o[b] = j->v + ((size_t)(6 * a + b) * j->c + c) * n + b0;
        bt6(j, in, o, nb);
      }
    }
}

/* A^T applied to six rows into four: A^T's rows are (1, 1, 1, 1, 1, 0),
 * (0, 1, -1, 2, -2, 0), (0, 1, 1, 4, 4, 0), (0, 1, -1, 8, -8, 1). */

static void at6(const w4_job *j, const float *const m[6], float *const o[4], size_t n) {
  j->lp->at6(n, m[0], m[1], m[2], m[3], m[4], m[5], o[0], o[1], o[2], o[3]);
}

/* y of filters [f0, f1) for the chunk: A^T M A of each tile, each step
 * a loop over the chunk's tiles, then each tile's 4x4 outputs stored
 * (+ bias) where they lie inside the output. */
static void y_part(void *arg, size_t f0, size_t f1) {
  const w4_job *j = arg;
  const nnt_conv_geom *g = j->g;
  size_t plane = (size_t)g->oh * g->ow, n = j->tc;
  float s[4][6][W4_VROW], o[4][4][W4_VROW];
  for (size_t f = f0; f < f1; f++) {
    float bias = j->bias ? j->bias[f] : 0.0f;
    for (size_t b0 = 0; b0 < n; b0 += W4_VB) { /* a block of the chunk's tiles */
      size_t nb = n - b0 < W4_VB ? n - b0 : W4_VB;
      for (int b = 0; b < 6; b++) { /* A^T M: down the rows */
        const float *m[6];
        for (int a = 0; a < 6; a++)
          m[a] = j->m + ((size_t)(6 * a + b) * j->f + f) * n + b0;
        float *os[4] = {s[0][b], s[1][b], s[2][b], s[3][b]};
        at6(j, m, os, nb);
      }
      for (int i = 0; i < 4; i++) { /* (A^T M) A: along the columns */
        const float *m[6] = {s[i][0], s[i][1], s[i][2], s[i][3], s[i][4], s[i][5]};
        float *os[4] = {o[i][0], o[i][1], o[i][2], o[i][3]};
        at6(j, m, os, nb);
      }
      for (size_t tl = b0; tl < b0 + nb;) { /* a run of tiles along one tile row */
        w4_run ru = run_at(j, tl, b0 + nb);
        size_t at = tl - b0;
        float *yt = j->y + (ru.img * j->f + f) * plane + 4 * ru.ty * g->ow + 4 * ru.tx;
        for (size_t i = 0; i < ru.rows; i++) { /* the inner tiles, then the last */
          float *yr = yt + i * g->ow;
          j->lp->scatter4(ru.full, o[i][0] + at, o[i][1] + at, o[i][2] + at, o[i][3] + at,
                          bias, yr);
          for (size_t q = ru.full; q < ru.len; q++)
            for (size_t c = 0; c < 4 && 4 * (ru.tx + q) + c < g->ow; c++)
              yr[4 * q + c] = o[i][c][at + q] + bias;
        }
        tl += ru.len;
      }
    }
  }
}

size_t nnt_wino4_scratch(size_t c, size_t f, size_t tiles) {
  if (tiles > W4_MAX_TILES)
    tiles = W4_MAX_TILES;
  return 36 * (c * f + (c + f) * tiles);
}

/* The most tiles of a chunk whose V and M (or dYt) fit in len floats
 * beside the 36 slices of U (or dU), at most W4_MAX_TILES; 0 when U alone
 * does not fit. */
static size_t w4_most(size_t c, size_t f, size_t len) {
  if (len <= 36 * c * f)
    return 0;
  size_t most = (len - 36 * c * f) / (36 * (c + f));
  return most < W4_MAX_TILES ? most : W4_MAX_TILES;
}

/* A chunk of the forward (or the derivative): rows tile rows of one
 * image (imgs 1) where an image has NNT_WINO4_IMAGE_TILES tiles or more,
 * its rows split as evenly as chunks of at most W4_MAX_TILES tiles that
 * the scratch holds allow, a whole image at least where that is no more
 * than W4_MAX_TILES; else imgs whole images (rows th), as many as the
 * scratch holds, NNT_WINO4_MIN_CHUNK tiles or more. 0 when the scratch
 * holds neither beside the filters' transform. slots: chunks of at most
 * a slots-th of what the scratch holds (as many as its tiles' share of
 * the scratch allows, the whole-image rule on the whole scratch). */
static int w4_chunks(size_t c, size_t f, size_t th, size_t tw, size_t len, size_t slots,
                     size_t *rows, size_t *imgs) {
  size_t tpi = th * tw, most = w4_most(c, f, len) / slots;
  if (!tpi || !most)
    return 0;
  if (tpi < NNT_WINO4_IMAGE_TILES) {
    *rows = th;
    *imgs = most / tpi;
    return *imgs * tpi >= NNT_WINO4_MIN_CHUNK;
  }
  if (len < nnt_wino4_scratch(c, f, tpi) || most < tw)
    return 0;
  size_t parts = (th + most / tw - 1) / (most / tw);
  *rows = (th + parts - 1) / parts;
  *imgs = 1;
  return 1;
}

/* Not where an image has fewer 4x4 tiles than NNT_WINO4_IMAGE_TILES but
 * NNT_WINO_IMAGE_TILES 2x2 ones or more: F(2, 3) keeps its chunks to one
 * image there, and callers rely on it (kernels.h). */
int nnt_cpu_wino4_takes(const nnt_conv_geom *g, size_t filters, size_t scratch_len) {
  size_t th = (g->oh + 3) / 4, tw = (g->ow + 3) / 4, rows, imgs;
  size_t tpi2 = (size_t)((g->oh + 1) / 2) * ((g->ow + 1) / 2);
  if (th * tw < NNT_WINO4_IMAGE_TILES && tpi2 >= NNT_WINO_IMAGE_TILES)
    return 0;
  return nnt_wino_geom_ok(g) && w4_chunks(g->c, filters, th, tw, scratch_len, 1, &rows, &imgs);
}

/* The forward's (or the derivative's) chunks run in W4_SLOTS slots of
 * the scratch where each slot holds a chunk (w4_chunks with slots), each
 * slot's run of chunks whole on one of the compute threads: a chunk's
 * transforms, its 36 products and its outputs on the thread that made
 * its transforms. Split inside each chunk instead (transforms by
 * channels, products by slices, outputs by filters), every product read
 * the transforms of both threads and every output both threads'
 * products: ResNet-18's stage 1 forward and derivative ran at 1.05x one
 * thread's speed on two cores that share no cache (docs/performance.md,
 * eighteenth round). The chunks are the same at any thread count, so the
 * results are bitwise the same too. Where a slot would hold too little
 * (ResNet-18's stage 2: whole images, NNT_WINO4_MIN_CHUNK tiles), one
 * slot: each chunk's input transform split by channels, then its
 * products and outputs by two fixed halves of the filters (w4_my_part). */
#define W4_SLOTS 2

typedef struct w4_run_job {
  const w4_job *j;
  size_t rows, imgs, per; /* a chunk's tile rows and images; chunks an image (imgs 1) */
  size_t chunks, slot;    /* chunks in all; floats a slot */
} w4_run_job;

/* The tiles of chunk q: t0 and tc of j. */
static void w4_chunk_at(const w4_run_job *r, size_t q, w4_job *j) {
  size_t tpi = j->th * j->tw;
  if (r->imgs > 1) {
    j->t0 = q * r->imgs * tpi;
    j->tc = (j->n - q * r->imgs < r->imgs ? j->n - q * r->imgs : r->imgs) * tpi;
    return;
  }
  size_t r0 = q % r->per * r->rows;
  j->t0 = q / r->per * tpi + r0 * j->tw;
  j->tc = (j->th - r0 < r->rows ? j->th - r0 : r->rows) * j->tw;
}

/* Slots [s0, s1): slot s's run of chunks, each whole on this thread. */
static void w4_slot_part(void *arg, size_t s0, size_t s1) {
  const w4_run_job *r = arg;
  for (size_t s = s0; s < s1; s++) {
    w4_job j = *r->j;
    size_t ct = r->rows * j.tw * r->imgs;
    j.v = r->j->v + s * r->slot;
    j.m = j.v + 36 * j.c * ct;
    for (size_t q = r->chunks * s / W4_SLOTS; q < r->chunks * (s + 1) / W4_SLOTS; q++) {
      w4_chunk_at(r, q, &j);
      v_part(&j, 0, j.c);
      nnt_cpu_wino_products(j.f, 0, j.f, j.tc, j.c, j.u, j.v, j.m, 0, 36);
      y_part(&j, 0, j.f);
    }
  }
}

/* One slot's products and outputs in W4_FPARTS fixed halves of the
 * filters, each half's 36 products and its output transform on one
 * thread (cpu_winograd.c's my_part): the same products at any thread
 * count. */
#define W4_FPARTS 2

static void w4_my_part(void *arg, size_t p0, size_t p1) {
  const w4_job *j = arg;
  for (size_t p = p0; p < p1; p++) {
    size_t f0 = p * j->f / W4_FPARTS, f1 = (p + 1) * j->f / W4_FPARTS;
    nnt_cpu_wino_products(j->f, f0, f1, j->tc, j->c, j->u, j->v, j->m, 0, 36);
    y_part(arg, f0, f1);
  }
}

int nnt_cpu_conv_wino4(const nnt_kernels *self, const nnt_conv_geom *g, size_t n,
                       size_t filters, int flip, const float *w, const float *bias,
                       const float *x, float *y, float *scratch, size_t scratch_len) {
  (void)self;
  if (!nnt_wino_geom_ok(g) || !w || !x || !y || !scratch || !filters)
    return NNT_ERR_INVAL;
  w4_job j = {.g = g, .n = n, .f = filters, .c = g->c, .th = (g->oh + 3) / 4,
              .tw = (g->ow + 3) / 4, .flip = flip & 1, .w = w, .bias = bias, .x = x, .y = y,
              .lp = w4_pick()};
  w4_run_job r = {.j = &j};
  size_t slots = W4_SLOTS;
  if (!w4_chunks(j.c, j.f, j.th, j.tw, scratch_len, 1, &r.rows, &r.imgs))
    return NNT_ERR_INVAL;
  if (!w4_chunks(j.c, j.f, j.th, j.tw, scratch_len, slots, &r.rows, &r.imgs)) {
    slots = 1;
    w4_chunks(j.c, j.f, j.th, j.tw, scratch_len, 1, &r.rows, &r.imgs);
  }
  if (!n)
    return NNT_OK;
  if (r.imgs > 1) { /* the call's images in chunks as even as they go */
    size_t nch = (n + r.imgs - 1) / r.imgs;
    r.imgs = (n + nch - 1) / nch;
  }
  j.u = scratch;
  j.v = j.u + 36 * j.f * j.c;
  j.m = j.v + 36 * j.c * r.rows * j.tw * r.imgs;
  if (!(flip & NNT_WINO_KEEP_U)) /* else the previous call's U, the same bits */
    nnt_cpu_pool_for(j.f, 1, 1, u_part, &j);
  r.per = (j.th + r.rows - 1) / r.rows;
  r.chunks = r.imgs > 1 ? (n + r.imgs - 1) / r.imgs : n * r.per;
  r.slot = 36 * (j.c + j.f) * r.rows * j.tw * r.imgs;
  if (slots > 1) {
    nnt_cpu_pool_for_products(W4_SLOTS, 1, 1, w4_slot_part, &r);
    return NNT_OK;
  }
  for (size_t q = 0; q < r.chunks; q++) { /* one slot: each chunk split over the threads */
    w4_chunk_at(&r, q, &j);
    nnt_cpu_pool_for(j.c, 1, 1, v_part, &j);
    nnt_cpu_pool_for_products(W4_FPARTS, 1, 1, w4_my_part, &j);
  }
  return NNT_OK;
}

/* ---- the weight gradient ----------------------------------------------------
 * y = A^T (U . V) A per tile, so dL/dU = the sum over tiles of
 * (A dY A^T) . V, and dW = G^T (dL/dU) G: the forward's V, dY's 4x4 tiles
 * made 6x6 by A (outputs past an edge count as zeros), and 36 products
 * dU[k] (+)= dYt[k] V[k]^T over the chunks in order (each a one-thread
 * sgemm; the first chunk stores). The chunks span images (one call over
 * the batch: no groups to agree with). dU [36][f][c] stays in the scratch
 * for the whole call, V and dYt for a chunk beside it. */

/* A down four rows (dY's) into six: A's rows are (1, 0, 0, 0),
 * (1, 1, 1, 1), (1, -1, 1, -1), (1, 2, 4, 8), (1, -2, 4, -8), (0, 0, 0, 1). */
static void a4(const w4_job *j, const float *const d[4], float *const o[6], size_t n) {
  j->lp->a4(n, d[0], d[1], d[2], d[3], o[0], o[1], o[2], o[3], o[4], o[5]);
}

/* dYt = A dY A^T of filters [f0, f1) for the chunk: each tile's 4x4 dY
 * gathered into 16 rows over the chunk's tiles (zeros past the output's
 * edges), then A down the rows and along the columns. */
static void dyt_part(void *arg, size_t f0, size_t f1) {
  const w4_job *j = arg;
  const nnt_conv_geom *g = j->g;
  size_t plane = (size_t)g->oh * g->ow, n = j->tc;
  float d[4][4][W4_VROW], s[6][4][W4_VROW];
  for (size_t f = f0; f < f1; f++)
    for (size_t b0 = 0; b0 < n; b0 += W4_VB) { /* a block of the chunk's tiles */
      size_t nb = n - b0 < W4_VB ? n - b0 : W4_VB;
      for (size_t tl = b0; tl < b0 + nb;) { /* a run of tiles along one tile row */
        w4_run ru = run_at(j, tl, b0 + nb);
        size_t at = tl - b0;
        w4_span sp = {.plane = j->dy + (ru.img * j->f + f) * plane, .w = g->ow, .h = g->oh,
                      .y0 = 4 * (long)ru.ty, .x0 = 4 * (long)ru.tx};
        sp.hi = (long)g->ow - sp.x0 < 4 * (long)ru.len ? (long)g->ow - sp.x0 : 4 * (long)ru.len;
        j->lp->gather4e(ru.len, &sp, (float *)d + at, W4_VROW);
        tl += ru.len;
      }
      for (int x = 0; x < 4; x++) { /* A dY: down the rows, per column */
        const float *in[4] = {d[0][x], d[1][x], d[2][x], d[3][x]};
        float *o[6] = {s[0][x], s[1][x], s[2][x], s[3][x], s[4][x], s[5][x]};
        a4(j, in, o, nb);
      }
      for (int i = 0; i < 6; i++) { /* (A dY) A^T: along the columns */
        const float *in[4] = {s[i][0], s[i][1], s[i][2], s[i][3]};
        float *o[6];
        for (int e = 0; e < 6; e++)
          o[e] = j->m + ((size_t)(6 * i + e) * j->f + f) * n + b0;
        a4(j, in, o, nb);
      }
    }
}

/* dU[k] (+)= dYt[k] V[k]^T for slices [k0, k1): the first chunk stores. */
static void du_part(void *arg, size_t k0, size_t k1) {
  const w4_job *j = arg;
  for (size_t k = k0; k < k1; k++)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)j->f, (int)j->c, (int)j->tc,
                1.0f, j->m + k * j->f * j->tc, (int)j->tc, j->v + k * j->c * j->tc,
                (int)j->tc, j->t0 ? 1.0f : 0.0f, j->u + k * j->f * j->c, (int)j->c);
}

/* G^T down six rows into three, for n values: G^T's rows are
 * (1/4, -1/6, -1/6, 1/24, 1/24, 0), (0, -1/6, 1/6, 1/12, -1/12, 0),
 * (0, -1/6, -1/6, 1/6, 1/6, 1). */
static void gt6(const float *const d[6], float *const o[3], size_t n) {
  for (size_t q = 0; q < n; q++) {
    float s12 = d[1][q] + d[2][q], s34 = d[3][q] + d[4][q];
    o[0][q] = 0.25f * d[0][q] - (1.0f / 6) * s12 + (1.0f / 24) * s34;
    o[1][q] = (1.0f / 6) * (d[2][q] - d[1][q]) + (1.0f / 12) * (d[3][q] - d[4][q]);
    o[2][q] = (1.0f / 6) * (s34 - s12) + d[5][q];
  }
}

/* dW of filters [f0, f1) = G^T dU G, a block of UB channels at a time. */
static void dw_part(void *arg, size_t f0, size_t f1) {
  const w4_job *j = arg;
  float t[6][3][UB], r[3][3][UB];
  for (size_t f = f0; f < f1; f++)
    for (size_t c0 = 0; c0 < j->c; c0 += UB) {
      size_t nc = j->c - c0 < UB ? j->c - c0 : UB;
      for (int i = 0; i < 6; i++) { /* dU G: row i */
        const float *d[6];
        for (int e = 0; e < 6; e++)
          d[e] = j->u + ((size_t)(6 * i + e) * j->f + f) * j->c + c0;
        float *o[3] = {t[i][0], t[i][1], t[i][2]};
        gt6(d, o, nc);
      }
      for (int b = 0; b < 3; b++) { /* G^T (dU G): column b */
        const float *d[6] = {t[0][b], t[1][b], t[2][b], t[3][b], t[4][b], t[5][b]};
        float *o[3] = {r[0][b], r[1][b], r[2][b]};
        gt6(d, o, nc);
      }
      for (size_t cc = 0; cc < nc; cc++) {
        float *w = j->dw + (f * j->c + c0 + cc) * 9;
        for (int a = 0; a < 3; a++)
          for (int b = 0; b < 3; b++)
            w[3 * a + b] = r[a][b][cc];
      }
    }
}

/* Tiles of a weight gradient's chunk for len floats of scratch (c
 * channels, f filters, of tiles in all); 0 when fewer than
 * min(tiles, NNT_WINO_MIN_TILES) fit beside dU. */
static size_t w4_dw_chunk(size_t c, size_t f, size_t tiles, size_t len) {
  size_t least = tiles < NNT_WINO_MIN_TILES ? tiles : NNT_WINO_MIN_TILES;
  size_t most = w4_most(c, f, len);
  if (!least)
    return 0;
  if (most > tiles)
    most = tiles;
  return most >= least ? most : 0;
}

int nnt_cpu_wino4_dw_takes(const nnt_conv_geom *g, size_t n, size_t filters,
                           size_t scratch_len) {
  size_t tiles = n * ((g->oh + 3) / 4) * ((g->ow + 3) / 4);
  return nnt_wino_geom_ok(g) && w4_dw_chunk(g->c, filters, tiles, scratch_len) > 0;
}

int nnt_cpu_conv_wino4_dw(const nnt_kernels *self, const nnt_conv_geom *g, size_t n,
                          size_t filters, const float *dy, const float *x, float *dw,
                          float *scratch, size_t scratch_len) {
  (void)self;
  if (!nnt_wino_geom_ok(g) || !dy || !x || !dw || !scratch || !filters)
    return NNT_ERR_INVAL;
  w4_job j = {.g = g, .n = n, .f = filters, .c = g->c, .th = (g->oh + 3) / 4,
              .tw = (g->ow + 3) / 4, .x = x, .dy = dy, .dw = dw, .lp = w4_pick()};
  size_t tiles = n * j.th * j.tw;
  if (!tiles) {
    memset(dw, 0, filters * j.c * 9 * sizeof *dw);
    return NNT_OK;
  }
  size_t chunk = w4_dw_chunk(j.c, j.f, tiles, scratch_len);
  if (!chunk)
    return NNT_ERR_INVAL;
  size_t nch = (tiles + chunk - 1) / chunk; /* as even as they go */
  chunk = (tiles + nch - 1) / nch;
  j.u = scratch;
  j.v = j.u + 36 * j.f * j.c;
  j.m = j.v + 36 * j.c * chunk;
  for (j.t0 = 0; j.t0 < tiles; j.t0 += chunk) {
    j.tc = tiles - j.t0 < chunk ? tiles - j.t0 : chunk;
    nnt_cpu_pool_for(j.c, 1, 1, v_part, &j);
    nnt_cpu_pool_for(j.f, 1, 1, dyt_part, &j);
    nnt_cpu_pool_for_products(36, 1, 1, du_part, &j);
  }
  nnt_cpu_pool_for(j.f, 1, 1, dw_part, &j);
  return NNT_OK;
}
