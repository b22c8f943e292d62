/* CPU Winograd convolution F(2x2, 3x3) (the conv_wino op, and
 * conv_wino_dw for the weight gradient, at the end): a 2x2 block of
 * outputs of a 3x3 window with stride 1 and dilation 1 from a 4x4 block of
 * inputs takes 16 products per (filter, channel) instead of im2col and
 * gemm's 36. With B, G, A the F(2, 3) matrices (Lavin and Gray, 2016):
 *   U[k][f][c] = (G g[f][c] G^T)[k]     the filters, 16 slices [F, C]
 *   V[k][c][t] = (B^T d[c][t] B)[k]     the input tiles, [C, tiles]
 *   M[k]       = U[k] V[k]               16 sgemms [F, C] x [C, tiles]
 *   y[f][t]    = A^T M[.][f][t] A        (+ bias) 2x2 outputs of tile t
 * Tiles are numbered over (image, tile row, tile column), so a product
 * spans many images' tiles; outputs past an odd edge are dropped and
 * inputs outside the image (padding) are zeros.
 * All of it lives in the caller's scratch (conv2d's planned column buffer):
 * kg slices of U, V and M at a time for a chunk of tc tiles, as many as fit,
 * kg = 16 where the 16 slices of U fit (one pass: the output transform
 * stores y), else 8 slices per pass, each pass adding its part of
 * A^T M A to y (the transform is linear in M; the slices of the other
 * passes count as zeros). The filter transform of a pass is made once,
 * for every chunk. Fewer slices per pass are refused: every pass
 * transforms the filters, reads the input and adds into y again; at 1
 * slice (ResNet-18's stage 4 in its column scratch) that took twice
 * im2col's time, at 4 (conv-BN-ReLU's c3, ResNet-18's stage 3) it was
 * no faster than im2col (docs/performance.md).
 * flip: the derivative of a stride-1 3x3 convolution is one of dY with
 * the window turned by 180 degrees and filters and channels swapped; w is
 * then the forward's [C][F][3][3] (C the forward's filters, F its
 * channels) and the filter transform reads it that way.
 * Threads (cpu_pool.c): where the scratch holds two regions (a V and an M
 * each), the forward runs two runs of chunks at once, each thread taking a
 * chunk's input transform, products and output transform in its own
 * region; else the input transform splits over channels, and the kg
 * products of a pass and the output transform over two fixed halves of
 * the filters (my_part: one-thread OpenBLAS sgemms). The
 * weight gradient splits a chunk's slices: a thread makes the V and the
 * dY tiles of its slices and their products. U's transform splits over
 * filters. Every value is computed by the same arithmetic on any thread
 * count. The transforms are plain C loops over the tiles of a row
 * (contiguous in V and M), which the compiler vectorizes, or their AVX2
 * and AVX-512 copies; a slice outside the pass is written to a junk row
 * of its own. */
#include <cblas.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/kernels.h"
#include "nntrainer/compute/cpu_winograd.h"

/* Tiles of one row handled at once by the transforms (stack buffers). */
#define WB 64
/* The most tiles per chunk: V and M of a chunk stay near the L2 cache
 * (128 and 512 measured within the noise of 256 on ResNet-18's stages). */
#define WINO_MAX_TILES 256
/* The most chunks of the forward at once (see wino_plan). */
#define WINO_REGIONS 2



/* The slices of a pass, the tiles of a chunk and the regions (each a V
 * and an M for a chunk, so that that many chunks run at once: up to
 * max_regions) for len floats of scratch; 0 when not even fewest slices
 * (conv_wino's NNT_WINO_FEWEST_SLICES, conv_wino_dw's NNT_WINO_MIN_SLICES)
 * and min(tiles, NNT_WINO_MIN_TILES) tiles fit in one region (a scratch of
 * conv2d's least, NNT_WINO_MIN_SLICES slices, never takes fewer than
 * those). Two regions come before a pass of all 16 slices: a chunk
 * of the forward keeps its V and M on the thread that makes them (the
 * transforms and the products of one chunk run on one thread, two chunks
 * at once), which at two threads of a VM whose cores share no cache
 * measured faster than one pass over shared V and M (docs/performance.md).
 * The plan depends on the sizes alone, never on the thread count: the
 * same chunks and products at every count, so the same bits. */
static int wino_plan(size_t c, size_t f, size_t tiles, size_t len, unsigned max_regions,
                     unsigned fewest, unsigned *kg, size_t *tc, unsigned *regions) {
  size_t want = tiles < NNT_WINO_MIN_TILES ? tiles : NNT_WINO_MIN_TILES;
  for (unsigned k = 16; k >= fewest; k /= 2)
    for (unsigned r = max_regions; r >= 1; r--) {
      size_t u = (size_t)k * c * f;
      if (u >= len)
        continue;
      size_t t = (len - u) / ((size_t)r * k * (c + f));
      if (t < want)
        continue;
      if (t > tiles)
        t = tiles;
      if (t > WINO_MAX_TILES)
        t = WINO_MAX_TILES;
      *kg = k;
      *tc = t;
      *regions = r;
      return 1;
    }
  return 0;
}

/* g_row and u_part: gcc would turn g_row's copies (rows 0 and 3) into
 * memcpy calls of a few dozen bytes (rep movs, slow to start); it keeps
 * them vector loops with this. */
#if defined(__GNUC__) && !defined(__clang__)
#define WINO_NO_MEMCPY __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define WINO_NO_MEMCPY
#endif

/* Row i of G times (a, b, c) for n columns: G's rows are (1, 0, 0),
 * (1/2, 1/2, 1/2), (1/2, -1/2, 1/2), (0, 0, 1). */
WINO_NO_MEMCPY static void g_row(unsigned i, const float *a, const float *b, const float *c,
                                 float *out, size_t n) {
  for (size_t q = 0; q < n; q++)
    out[q] = i == 0   ? a[q]
             : i == 1 ? 0.5f * (a[q] + b[q] + c[q])
             : i == 2 ? 0.5f * (a[q] - b[q] + c[q])
                      : c[q];
}

void nnt_cpu_wino_taps(const float *w, int flip, size_t f, size_t nf, size_t c, size_t c0,
                       size_t nc, size_t ld, float *g) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (nnt_cpu_vec_avx512()) {
    nnt_wino_taps_avx512(w, flip, f, nf, c, c0, nc, ld, g);
    return;
  }
#endif
  for (size_t cc = 0; cc < nc; cc++) {
    const float *src = flip ? w + ((c0 + cc) * nf + f) * 9 : w + (f * c + c0 + cc) * 9;
    for (int q = 0; q < 9; q++)
      g[q * ld + cc] = flip ? src[8 - q] : src[q];
  }
}

/* Channels per block of the filter transform. */
#define UB 32

/* U for slices [k0, k0 + kg) of filters [f0, f1): slice 4i + e is
 * (G g G^T)[i][e], the same arithmetic whatever slices a pass holds; a
 * block of UB channels at a time, the filters' taps gathered first so the
 * arithmetic runs along the channels. */
WINO_NO_MEMCPY static void u_part(void *arg, size_t f0, size_t f1) {
  const wino_job *j = arg;
  float g[9][UB], t[3][UB];
  size_t rows = j->u_rows ? j->u_rows : j->f;
  for (size_t f = f0; f < f1; f++)
    for (size_t c0 = 0; c0 < j->c; c0 += UB) {
      size_t nc = j->c - c0 < UB ? j->c - c0 : UB;
      nnt_cpu_wino_taps(j->w, j->flip, f, j->f, j->c, c0, nc, UB, g[0]);
      for (unsigned i = j->k0 / 4; i <= (j->k0 + j->kg - 1) / 4; i++) {
        for (int b = 0; b < 3; b++) /* row i of G g */
          g_row(i, g[b], g[3 + b], g[6 + b], t[b], nc);
        for (unsigned k = 4 * i; k < 4 * i + 4; k++)
          if (k >= j->k0 && k < j->k0 + j->kg) /* times column k % 4 of G^T */
            g_row(k % 4, t[0], t[1], t[2],
                  j->u + ((k - j->k0) * rows + f - j->u_f0) * j->c + c0, nc);
      }
    }
}

/* u_part over filters [u_f0 + f0, u_f0 + f1) of the block. */
static void u_block_part(void *arg, size_t f0, size_t f1) {
  const wino_job *j = arg;
  u_part(arg, j->u_f0 + f0, j->u_f0 + f1);
}

/* The chunk's segments (at most WINO_MAX_TILES: one per tile at worst). */
static size_t segments(const wino_job *j, wino_seg *seg) {
  size_t per = j->th * j->tw, ns = 0;
  for (size_t t = j->t0, end = j->t0 + j->tc; t < end; ns++) {
    size_t r = t % per, tx = r % j->tw, len = j->tw - tx;
    if (len > end - t)
      len = end - t;
    seg[ns] = (wino_seg){(unsigned)(t / per), (unsigned)(r / j->tw), (unsigned)tx,
                         (unsigned)len, (unsigned)(t - j->t0)};
    t += len;
  }
  return ns;
}

/* Row a of B^T d B for tiles [q0, q1) of a block, into o[0..3] (its 4
 * slices); the tiles' columns 2q .. 2q + 3 of the rows p readable. Row a
 * of B^T d is x + sg y with x, y two of the rows and sg +-1 (an exact
 * product): B^T's rows are (1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0),
 * (0, 1, 0, -1). */
static void v_row(unsigned a, const float *const p[4], size_t q0, size_t q1,
                  float *const o[4]) {
  static const unsigned xs[4] = {0, 1, 2, 1}, ys[4] = {2, 2, 1, 3};
  static const float sgs[4] = {-1.0f, 1.0f, -1.0f, -1.0f};
  const float *restrict x = p[xs[a]], *restrict y = p[ys[a]];
  const float sg = sgs[a];
  float *restrict o0 = o[0], *restrict o1 = o[1], *restrict o2 = o[2], *restrict o3 = o[3];
  /* row a's even and odd columns from 2 q0 (ev, od) and from 2 q0 + 2 (ev1,
   * od1): each loop reads the input in pairs and the last one reads the
   * four where the first two stored them (no shifted reloads) */
  float ev[WB], od[WB], ev1[WB], od1[WB];
  size_t n = q1 - q0;
  x += 2 * q0, y += 2 * q0, o0 += q0, o1 += q0, o2 += q0, o3 += q0;
  for (size_t q = 0; q < n; q++) {
    ev[q] = x[2 * q] + sg * y[2 * q];
    od[q] = x[2 * q + 1] + sg * y[2 * q + 1];
  }
  const float *restrict x2 = x + 2, *restrict y2 = y + 2;
  for (size_t q = 0; q < n; q++) {
    ev1[q] = x2[2 * q] + sg * y2[2 * q];
    od1[q] = x2[2 * q + 1] + sg * y2[2 * q + 1];
  }
  for (size_t q = 0; q < n; q++) {
    o0[q] = ev[q] - ev1[q];
    o1[q] = od[q] + ev1[q];
    o2[q] = ev1[q] - od[q];
    o3[q] = od[q] - od1[q];
  }
}

/* V of channels [c0, c1) for the chunk's tiles: a block of up to WB tiles
 * of a tile row reads 2 WB + 2 columns of 4 input rows where they lie;
 * rows outside the image read zeros, and the tiles whose columns leave
 * the image read a copy of theirs padded with zeros. */
static void v_part_c(void *arg, size_t c0, size_t c1) {
  const wino_job *j = arg;
  const nnt_conv_geom *g = j->g;
  static const float zeros[2 * WB + 2];
  float junk[16][WB]; /* a slice outside the pass: one each (restrict) */
  for (size_t c = c0; c < c1; c++)
    for (size_t sg = 0; sg < j->nseg; sg++) {
      size_t i = j->seg[sg].i, ty = j->seg[sg].ty, tx = j->seg[sg].tx, len = j->seg[sg].len;
      size_t tl = j->seg[sg].tl;
      const float *xc = j->x + (i * j->c + c) * g->h * g->w;
      for (size_t b = 0; b < len; b += WB) {
        size_t nt = len - b < WB ? len - b : WB;
        long x0 = 2 * (long)(tx + b) - (long)g->pl;
        /* the tiles [q0, q1) whose 4 columns lie inside the image */
        long lo = x0 < 0 ? -x0 : 0, hi = (long)g->w - x0;
        size_t q0 = (size_t)(lo + 1) / 2, q1 = hi >= 4 ? (size_t)(hi - 4) / 2 + 1 : 0;
        if (q1 > nt)
          q1 = nt;
        if (q1 < q0)
          q1 = q0;
        const float *p[4];
        for (int a = 0; a < 4; a++) {
          long iy = 2 * (long)ty - (long)g->pt + a;
          /* column 0 of the block (only [lo, hi) is read) */
          p[a] = iy < 0 || iy >= (long)g->h ? zeros : xc + (size_t)iy * g->w + x0;
        }
        float *o[16]; /* the pass's slices at the block's first tile */
        nnt_wino_slices(j, j->v, j->c, c, tl + b, junk[0], WB, o);
        for (unsigned a = 0; a < 4; a++)
          if (4 * a + 3 >= j->k0 && 4 * a < j->k0 + j->kg) /* a slice of row a */
            v_row(a, p, q0, q1, o + 4 * a);
        for (size_t q = 0; q < nt; q++) { /* the edge tiles, padded */
          if (q == q0 && q1 > q0)
            q = q1;
          if (q >= nt)
            break;
          float d[4][4], t[4][4];
          for (int r = 0; r < 4; r++)
            for (int x = 0; x < 4; x++) {
              long col = 2 * (long)q + x;
              d[r][x] = col >= lo && col < hi ? p[r][col] : 0.0f;
            }
          for (int x = 0; x < 4; x++) { /* as v_row: x + sg y, then columns */
            t[0][x] = d[0][x] + -1.0f * d[2][x];
            t[1][x] = d[1][x] + 1.0f * d[2][x];
            t[2][x] = d[2][x] + -1.0f * d[1][x];
            t[3][x] = d[1][x] + -1.0f * d[3][x];
          }
          for (int a = 0; a < 4; a++) {
            o[4 * a][q] = t[a][0] - t[a][2];
            o[4 * a + 1][q] = t[a][1] + t[a][2];
            o[4 * a + 2][q] = t[a][2] - t[a][1];
            o[4 * a + 3][q] = t[a][1] - t[a][3];
          }
        }
      }
    }
}

/* The widest path the hand-vectorized transforms may take
 * (nnt_cpu_vec_path), and whether they take AVX-512 now. */
static _Atomic int vec_path = NNT_BLAS_AVX512;

int nnt_cpu_vec_path(int path) { return atomic_exchange(&vec_path, path); }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
static int probe_avx2(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") != 0;
}
static int probe_avx512(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") != 0;
}

/* Whether the CPU has a feature (probe, asked once into *have; racing
 * threads store the same) and nnt_cpu_vec_path allows path. */
static int vec_allows(_Atomic int *have, int (*probe)(void), int path) {
  if (atomic_load_explicit(have, memory_order_relaxed) < 0)
    atomic_store_explicit(have, probe(), memory_order_relaxed);
  return atomic_load_explicit(have, memory_order_relaxed) &&
         atomic_load_explicit(&vec_path, memory_order_relaxed) >= path;
}
#endif

int nnt_cpu_vec_avx2(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static _Atomic int have = -1;
  return vec_allows(&have, probe_avx2, NNT_BLAS_AVX2);
#else
  return 0;
#endif
}

int nnt_cpu_vec_avx512(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static _Atomic int have = -1;
  return vec_allows(&have, probe_avx512, NNT_BLAS_AVX512);
#else
  return 0;
#endif
}

/* V of channels [c0, c1): v_part_avx512 where the CPU has AVX-512 (2.1
 * times v_part_c's speed on ResNet-18, 446 -> 212 perf samples of a
 * one-thread run: v_part_c's loops over the 14 inner tiles of a stage-1
 * row were mostly overhead; docs/performance.md), else v_part_c; the same
 * bits. */
static void v_part(void *arg, size_t c0, size_t c1) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (nnt_cpu_vec_avx512()) {
    nnt_wino_v_part_avx512(arg, c0, c1);
    return;
  }
  if (nnt_cpu_vec_avx2()) {
    nnt_wino_v_part_avx2(arg, c0, c1);
    return;
  }
#endif
  v_part_c(arg, c0, c1);
}

void nnt_cpu_wino_products(size_t f, size_t f0, size_t f1, size_t t, size_t c, const float *u,
                           const float *v, float *m, size_t k0, size_t k1) {
  for (size_t k = k0; k < k1; k++)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(f1 - f0), (int)t, (int)c, 1.0f,
                u + (k * f + f0) * c, (int)c, v + k * c * t, (int)t, 0.0f, m + (k * f + f0) * t,
                (int)t);
}

/* The products M[k] = U[k] V[k] of slices [k0, k1) of the pass. */
static void m_part(void *arg, size_t k0, size_t k1) {
  const wino_job *j = arg;
  nnt_cpu_wino_products(j->f, 0, j->f, j->tc, j->c, j->u, j->v, j->m, k0, k1);
}

/* The one-region forward's products and outputs in WINO_FPARTS fixed
 * parts of the filters, each part's kg products and its output transform
 * on one thread: a part's M is read where it was made, and a chunk takes
 * two jobs, not three. ResNet-18's step at two threads on a Zen 2 (pairs
 * alternating against split products by slices and outputs by filters):
 * 707-717 -> 662-669 ms with the cores apart, 622-627 -> 634-658 with
 * them sharing a cache; stage 3 at one thread 6-7% slower (products of
 * half the rows). The parts depend on the sizes alone: the same products
 * at any thread count. */
#define WINO_FPARTS 2

static void y_part(void *arg, size_t f0, size_t f1);

/* Filter parts [p0, p1) of WINO_FPARTS: M[k] of their filters, then y. */
static void my_part(void *arg, size_t p0, size_t p1) {
  const wino_job *j = arg;
  for (size_t p = p0; p < p1; p++) {
    size_t f0 = p * j->f / WINO_FPARTS, f1 = (p + 1) * j->f / WINO_FPARTS;
    nnt_cpu_wino_products(j->f, f0, f1, j->tc, j->c, j->u, j->v, j->m, 0, j->kg);
    y_part(arg, f0, f1);
  }
}

/* A^T M A for nt tiles of the 16 slices m: rows 0 and 1 of each tile's
 * 2x2 outputs, side by side, into o0 and o1. A^T's rows are (1, 1, 1, 0)
 * and (0, 1, -1, -1). */
static void at_m_a(const float *const m[16], size_t nt, float *restrict o0,
                   float *restrict o1) {
  const float *restrict m0 = m[0], *restrict m1 = m[1], *restrict m2 = m[2];
  const float *restrict m3 = m[3], *restrict m4 = m[4], *restrict m5 = m[5];
  const float *restrict m6 = m[6], *restrict m7 = m[7], *restrict m8 = m[8];
  const float *restrict m9 = m[9], *restrict m10 = m[10], *restrict m11 = m[11];
  const float *restrict m12 = m[12], *restrict m13 = m[13], *restrict m14 = m[14];
  const float *restrict m15 = m[15];
  for (size_t q = 0; q < nt; q++) {
    float a0 = m0[q] + m4[q] + m8[q], a1 = m1[q] + m5[q] + m9[q]; /* A^T M: rows */
    float a2 = m2[q] + m6[q] + m10[q], a3 = m3[q] + m7[q] + m11[q];
    float b0 = m4[q] - m8[q] - m12[q], b1 = m5[q] - m9[q] - m13[q];
    float b2 = m6[q] - m10[q] - m14[q], b3 = m7[q] - m11[q] - m15[q];
    o0[2 * q] = a0 + a1 + a2; /* (A^T M) A: columns */
    o0[2 * q + 1] = a1 - a2 - a3;
    o1[2 * q] = b0 + b1 + b2;
    o1[2 * q + 1] = b1 - b2 - b3;
  }
}

/* y of filters [f0, f1) for the chunk's tiles: A^T M A of the pass's
 * slices (the others zero), stored with the bias on the first pass, else
 * added. */
static void y_part(void *arg, size_t f0, size_t f1) {
  const wino_job *j = arg;
  const nnt_conv_geom *g = j->g;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (nnt_cpu_vec_avx512()) {
    nnt_wino_y_part_avx512(arg, f0, f1);
    return;
  }
  if (nnt_cpu_vec_avx2()) {
    nnt_wino_y_part_avx2(arg, f0, f1);
    return;
  }
#endif
  static const float zero[WB];
  float o[2][2 * WB];
  size_t plane = (size_t)g->oh * g->ow;
  for (size_t f = f0; f < f1; f++)
    for (size_t sg = 0; sg < j->nseg; sg++) {
      size_t i = j->seg[sg].i, ty = j->seg[sg].ty, tx = j->seg[sg].tx, len = j->seg[sg].len;
      size_t tl = j->seg[sg].tl;
      float *yf = j->y + (i * j->f + f) * plane;
      float bias = j->first && j->bias ? j->bias[f] : 0.0f;
      for (size_t b = 0; b < len; b += WB) {
        size_t nt = len - b < WB ? len - b : WB;
        const float *m[16];
        for (unsigned k = 0; k < 16; k++)
          m[k] = k >= j->k0 && k < j->k0 + j->kg
                     ? j->m + ((k - j->k0) * nnt_wino_m_rows(j) + nnt_wino_m_row(j, f)) * j->tc +
                           tl + b
                     : zero;
        at_m_a(m, nt, o[0], o[1]);
        size_t ox = 2 * (tx + b), cols = 2 * nt;
        if (cols > g->ow - ox)
          cols = g->ow - ox;
        for (unsigned a = 0; a < 2 && 2 * ty + a < g->oh; a++) {
          float *yr = yf + (2 * ty + a) * g->ow + ox;
          if (j->first)
            for (size_t q = 0; q < cols; q++)
              yr[q] = o[a][q] + bias;
          else
            for (size_t q = 0; q < cols; q++)
              yr[q] += o[a][q];
        }
      }
    }
}

/* The pass's slices (kg), its chunk of tiles (tc), its regions and where
 * U (or dU) and region 0's V and M (or dY's tiles) lie in the scratch; 0
 * when it is too small. Region r's V lies r * region_len floats after
 * region 0's. */
static int wino_layout(wino_job *j, size_t tiles, float *scratch, size_t scratch_len,
                       unsigned max_regions, unsigned fewest) {
  if (!wino_plan(j->c, j->f, tiles, scratch_len, max_regions, fewest, &j->kg, &j->tc,
                 &j->regions))
    return 0;
  j->u = scratch;
  j->v = j->u + (size_t)j->kg * j->f * j->c;
  j->m = j->v + (size_t)j->kg * j->c * j->tc;
  j->region_len = (size_t)j->kg * (j->c + j->f) * j->tc;
  return 1;
}

/* The chunks, as even as they go: the forward's (flip 0) with at least
 * NNT_WINO_IMAGE_TILES tiles an image per_img chunks of each image (none
 * spans two: a call over the whole batch has the chunks of calls over its
 * groups of images), else chunks over all tiles (the derivative's: its
 * one call over the batch takes wider products so, 85 tiles against 64 an
 * image of 256 on conv-BN-ReLU's c2, measured 2% of the step). Sizes
 * alone decide. */
static void chunk_plan(wino_job *j) {
  size_t tpi = j->th * j->tw, tiles = j->n * tpi;
  if (!j->flip && tpi >= NNT_WINO_IMAGE_TILES) {
    j->per_img = (tpi + j->tc - 1) / j->tc;
    j->tc = (tpi + j->per_img - 1) / j->per_img;
    j->nch = j->n * j->per_img;
  } else {
    j->per_img = 0;
    j->nch = (tiles + j->tc - 1) / j->tc;
    j->tc = (tiles + j->nch - 1) / j->nch;
  }
}

/* Chunk ci's first tile and length into j (chunk_plan's chunks; j->tc is
 * then this chunk's). */
static void chunk_at(wino_job *j, size_t chunk, size_t ci) {
  size_t tpi = j->th * j->tw, end;
  if (j->per_img) {
    size_t i = ci / j->per_img, sub = ci % j->per_img;
    j->t0 = i * tpi + sub * chunk;
    end = (i + 1) * tpi;
  } else {
    j->t0 = ci * chunk;
    end = j->n * tpi;
  }
  j->tc = end - j->t0 < chunk ? end - j->t0 : chunk;
  j->nseg = segments(j, j->seg);
}

/* Chunks of the forward for regions [r0, r1): region r takes the r-th of
 * regions runs of chunks (with chunks per image: runs of images, as the
 * loops over images split them), each chunk's transforms and products in
 * turn on this thread, in the region's V and M. */
static void chunks_part(void *arg, size_t r0, size_t r1) {
  const wino_job *jr = arg;
  wino_seg seg[WINO_MAX_TILES];
  size_t chunk = jr->tc, nch = jr->nch;
  for (size_t r = r0; r < r1; r++) {
    wino_job j = *jr;
    j.v = jr->v + r * jr->region_len;
    j.m = j.v + (size_t)j.kg * j.c * chunk;
    j.seg = seg;
    for (size_t ci = r * nch / jr->regions; ci < (r + 1) * nch / jr->regions; ci++) {
      chunk_at(&j, chunk, ci);
      v_part(&j, 0, j.c);
      m_part(&j, 0, j.kg);
      y_part(&j, 0, j.f);
    }
  }
}

/* Filter blocks (flip 0 or 1; kernels.h nnt_wino_fb_scratch): where U's
 * 16 slices of every filter do not fit the scratch but V of every tile
 * does (ResNet-18's stage 4, 512 channels of 4x4 planes, 128 tiles: U
 * would be 16 MiB against its forward's 10 MiB of columns), one pass: V
 * of all tiles once, then per block of filters its U and M (16 slices
 * each), the 16 products, the output transform. Passes of slices instead
 * transform the input, the filters and the output once a pass, with
 * narrower products (two passes of 64-tile chunks at stage 4: 30-31 ms
 * against 26-27 in ResNet-18's one-thread step, docs/performance.md).
 * Blocks are as even as they go and depend on the sizes alone; the
 * products split over slices, the output transform over filters: the
 * same bits at any thread count. */
_Static_assert(NNT_WINO_FB_MAX_TILES <= WINO_MAX_TILES, "a block's chunk is every tile");

static int fblocks_plan(size_t c, size_t f, size_t tiles, size_t len, size_t *fb, size_t *nb) {
  if ((size_t)16 * c * f < len)
    return 0; /* all of U fits: the passes' plan takes one pass */
  return nnt_wino_fb_blocks(c, f, tiles, len, fb, nb);
}

/* Slices [k0, k1) of the block's products: M[k] rows of its filters. */
static void fb_products(void *arg, size_t k0, size_t k1) {
  const wino_job *j = arg;
  for (size_t k = k0; k < k1; k++)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)j->u_rows, (int)j->tc,
                (int)j->c, 1.0f, j->u + k * j->u_rows * j->c, (int)j->c,
                j->v + k * j->c * j->tc, (int)j->tc, 0.0f,
                j->m + k * j->u_rows * j->tc, (int)j->tc);
}

/* y_part over filters [u_f0 + f0, u_f0 + f1) of the block. */
static void fb_y(void *arg, size_t f0, size_t f1) {
  const wino_job *j = arg;
  y_part(arg, j->u_f0 + f0, j->u_f0 + f1);
}

static void conv_wino_fblocks(wino_job *j, size_t tiles, size_t fb, size_t nb,
                              float *scratch) {
  wino_seg seg[WINO_MAX_TILES];
  j->kg = 16, j->k0 = 0, j->first = 1, j->regions = 1, j->per_img = 0, j->nch = 1;
  j->v = scratch;
  j->u = j->v + (size_t)16 * j->c * tiles;
  j->m = j->u + (size_t)16 * fb * j->c;
  j->seg = seg;
  chunk_at(j, tiles, 0);
  nnt_cpu_pool_for(j->c, 1, 1, v_part, j);
  for (size_t b = 0; b < nb; b++) {
    j->u_f0 = b * j->f / nb;
    j->u_rows = (b + 1) * j->f / nb - j->u_f0;
    nnt_cpu_pool_for(j->u_rows, 1, 1, u_block_part, j);
    nnt_cpu_pool_for_products(16, 1, 1, fb_products, j);
    nnt_cpu_pool_for(j->u_rows, 1, 1, fb_y, j);
  }
}

int nnt_cpu_conv_wino(const nnt_kernels *self, const nnt_conv_geom *g, size_t n,
                      size_t filters, int flip, const float *w, const float *bias,
                      const float *x, float *y, float *scratch, size_t scratch_len) {
  if (!nnt_wino_geom_ok(g) || !w || !x || !y || !scratch || !filters)
    return NNT_ERR_INVAL;
  if (nnt_cpu_wino4_takes(g, filters, scratch_len))
    return nnt_cpu_conv_wino4(self, g, n, filters, flip, w, bias, x, y, scratch, scratch_len);
  wino_job j = {.g = g, .n = n, .f = filters, .c = g->c, .th = (g->oh + 1) / 2,
                .tw = (g->ow + 1) / 2, .flip = flip & 1, .w = w, .bias = bias, .x = x, .y = y};
  size_t tiles = n * j.th * j.tw;
  if (!tiles)
    return NNT_OK;
  size_t fb, nb;
  if (fblocks_plan(j.c, j.f, tiles, scratch_len, &fb, &nb)) {
    conv_wino_fblocks(&j, tiles, fb, nb, scratch);
    return NNT_OK;
  }
  if (!wino_layout(&j, tiles, scratch, scratch_len, WINO_REGIONS, NNT_WINO_FEWEST_SLICES))
    return NNT_ERR_INVAL;
  chunk_plan(&j);
  if (j.regions > 1) {
    for (j.k0 = 0; j.k0 < 16; j.k0 += j.kg) {
      j.first = j.k0 == 0;
      nnt_cpu_pool_for(j.f, 1, 1, u_part, &j);
      nnt_cpu_pool_for_products(j.regions, 1, 1, chunks_part, &j);
    }
    return NNT_OK;
  }
  size_t chunk = j.tc;
  wino_seg seg[WINO_MAX_TILES];
  j.seg = seg;
  for (j.k0 = 0; j.k0 < 16; j.k0 += j.kg) {
    j.first = j.k0 == 0;
    nnt_cpu_pool_for(j.f, 1, 1, u_part, &j);
    for (size_t ci = 0; ci < j.nch; ci++) {
      chunk_at(&j, chunk, ci);
      nnt_cpu_pool_for(j.c, 1, 1, v_part, &j);
      nnt_cpu_pool_for_products(WINO_FPARTS, 1, 1, my_part, &j);
    }
  }
  return NNT_OK;
}

/* ---- the weight gradient ----------------------------------------------------
 * y = A^T (U . V) A per tile, so dL/dU = sum over tiles of (A dY A^T) . V
 * and dW = G^T (dL/dU) G: the same input transform V, dY's 2x2 tiles made
 * 4x4 by A (outputs past an odd edge count as zeros), and 16 products
 * dU[k] += dYt[k] V[k]^T over the chunks (each a one-thread sgemm, the
 * chunks in order). kg slices of dU [kg][f][c] per pass, as the forward
 * holds U's; the last chunk of a pass adds G^T dU G of its slices to dW
 * (the first pass stores it). */

/* Row a of A dY A^T for nt tiles into o[0..3], from row a of A dY (its
 * even and odd columns x0 + sg y0 and x1 + sg y1, sg +-1 or 0: an exact
 * product). A's rows are (1, 0), (1, 1), (1, -1), (0, -1). */
static void a_dy_row(const float *restrict x0, const float *restrict y0,
                     const float *restrict x1, const float *restrict y1, float sx, float sg,
                     size_t nt, float *const o[4]) {
  float *restrict p0 = o[0], *restrict p1 = o[1], *restrict p2 = o[2], *restrict p3 = o[3];
  for (size_t q = 0; q < nt; q++) {
    float h0 = sx * x0[q] + sg * y0[q], h1 = sx * x1[q] + sg * y1[q];
    p0[q] = h0, p1[q] = h0 + h1, p2[q] = h0 - h1, p3[q] = -h1;
  }
}

/* A dY A^T of nt tiles from their even and odd columns of the two dY
 * rows (e0, d0 and e1, d1), into the 16 slices o. */
static void a_dy_at(const float *e0, const float *d0, const float *e1, const float *d1,
                    size_t nt, unsigned k0, unsigned kg, float *const o[16]) {
  static const float sx[4] = {1.0f, 1.0f, 1.0f, 0.0f}, sg[4] = {0.0f, 1.0f, -1.0f, -1.0f};
  /* rows 0, 0 + 1, 0 - 1 and - 1 of dY; only those with a slice in the pass */
  for (unsigned a = 0; a < 4; a++)
    if (4 * a + 3 >= k0 && 4 * a < k0 + kg)
      a_dy_row(e0, e1, d0, d1, sx[a], sg[a], nt, o + 4 * a);
}


/* dYt = A dY A^T for filters [f0, f1) and the chunk's tiles, the pass's
 * slices into m. A's rows are (1, 0), (1, 1), (1, -1), (0, -1). */
static void dyt_part(void *arg, size_t f0, size_t f1) {
  const wino_job *j = arg;
  const nnt_conv_geom *g = j->g;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (nnt_cpu_vec_avx512()) {
    nnt_wino_dyt_part_avx512(arg, f0, f1);
    return;
  }
  if (nnt_cpu_vec_avx2()) {
    nnt_wino_dyt_part_avx2(arg, f0, f1);
    return;
  }
#endif
  size_t plane = (size_t)g->oh * g->ow;
  float junk[16][WB], e0[WB], o0[WB], e1[WB], o1[WB];
  for (size_t f = f0; f < f1; f++)
    for (size_t sg = 0; sg < j->nseg; sg++) {
      size_t i = j->seg[sg].i, ty = j->seg[sg].ty, tx = j->seg[sg].tx, len = j->seg[sg].len;
      size_t tl = j->seg[sg].tl;
      const float *yf = j->dy + (i * j->f + f) * plane;
      const float *r0 = yf + 2 * ty * g->ow;
      const float *r1 = 2 * ty + 1 < g->oh ? r0 + g->ow : NULL;
      for (size_t b = 0; b < len; b += WB) {
        size_t nt = len - b < WB ? len - b : WB, ox = 2 * (tx + b);
        /* the tiles' even and odd columns of the two rows, zeros outside */
        size_t full = ox + 2 * nt <= g->ow ? nt : nt - 1;
        for (size_t q = 0; q < full; q++) {
          e0[q] = r0[ox + 2 * q], o0[q] = r0[ox + 2 * q + 1];
          e1[q] = r1 ? r1[ox + 2 * q] : 0.0f, o1[q] = r1 ? r1[ox + 2 * q + 1] : 0.0f;
        }
        if (full < nt) { /* the last tile of an odd width */
          e0[full] = r0[ox + 2 * full], o0[full] = 0.0f;
          e1[full] = r1 ? r1[ox + 2 * full] : 0.0f, o1[full] = 0.0f;
        }
        float *o[16];
        nnt_wino_slices(j, j->m, j->f, f, tl + b, junk[0], WB, o);
        a_dy_at(e0, o0, e1, o1, nt, j->k0, j->kg, o);
      }
    }
}

/* dU[k] (+)= dYt[k] V[k]^T for slices [k0, k1): the first chunk stores. */
static void du_part(void *arg, size_t k0, size_t k1) {
  const wino_job *j = arg;
  for (size_t k = k0; k < k1; k++)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)j->f, (int)j->c, (int)j->tc,
                1.0f, j->m + k * j->f * j->tc, (int)j->tc, j->v + k * j->c * j->tc,
                (int)j->tc, j->t0 ? 1.0f : 0.0f, j->u + k * j->f * j->c, (int)j->c);
}

/* Slices [s0, s1) of the pass for the chunk (multiples of 4: rows of the
 * transforms): their V, their dY tiles and their products, on one thread,
 * so that a slice's V and dY tiles stay where they are made. */
static void dw_slices_part(void *arg, size_t s0, size_t s1) {
  const wino_job *jp = arg;
  wino_job j = *jp;
  j.k0 = jp->k0 + (unsigned)s0;
  j.kg = (unsigned)(s1 - s0);
  j.u = jp->u + s0 * j.f * j.c;
  j.v = jp->v + s0 * j.c * j.tc;
  j.m = jp->m + s0 * j.f * j.tc;
  v_part(&j, 0, j.c);
  dyt_part(&j, 0, j.f);
  du_part(&j, 0, j.kg);
}

/* dW of filters [f0, f1) (+)= G^T dU G of the pass's slices (the others
 * zero). G^T's rows are (1, 1/2, 1/2, 0), (0, 1/2, -1/2, 0), (0, 1/2, 1/2, 1). */
static void dw_part(void *arg, size_t f0, size_t f1) {
  const wino_job *j = arg;
  for (size_t f = f0; f < f1; f++)
    for (size_t c = 0; c < j->c; c++) {
      float d[16] = {0}, t[4][3];
      for (unsigned k = j->k0; k < j->k0 + j->kg; k++)
        d[k] = j->u[((k - j->k0) * j->f + f) * j->c + c];
      for (int a = 0; a < 4; a++) { /* dU G: columns */
        t[a][0] = d[4 * a] + 0.5f * (d[4 * a + 1] + d[4 * a + 2]);
        t[a][1] = 0.5f * (d[4 * a + 1] - d[4 * a + 2]);
        t[a][2] = 0.5f * (d[4 * a + 1] + d[4 * a + 2]) + d[4 * a + 3];
      }
      float *w = j->dw + (f * j->c + c) * 9;
      for (int b = 0; b < 3; b++) { /* G^T (dU G): rows */
        float r0 = t[0][b] + 0.5f * (t[1][b] + t[2][b]), r1 = 0.5f * (t[1][b] - t[2][b]);
        float r2 = 0.5f * (t[1][b] + t[2][b]) + t[3][b];
        if (j->first)
          w[b] = r0, w[3 + b] = r1, w[6 + b] = r2;
        else
          w[b] += r0, w[3 + b] += r1, w[6 + b] += r2;
      }
    }
}

int nnt_cpu_conv_wino_dw(const nnt_kernels *self, const nnt_conv_geom *g, size_t n,
                         size_t filters, const float *dy, const float *x, float *dw,
                         float *scratch, size_t scratch_len) {
  (void)self;
  if (!nnt_wino_geom_ok(g) || !dy || !x || !dw || !scratch || !filters)
    return NNT_ERR_INVAL;
  if (nnt_cpu_wino4_dw_takes(g, n, filters, scratch_len))
    return nnt_cpu_conv_wino4_dw(self, g, n, filters, dy, x, dw, scratch, scratch_len);
  wino_job j = {.g = g, .n = n, .f = filters, .c = g->c, .th = (g->oh + 1) / 2,
                .tw = (g->ow + 1) / 2, .x = x, .dy = dy, .dw = dw};
  size_t tiles = n * j.th * j.tw;
  if (!tiles) {
    memset(dw, 0, filters * j.c * 9 * sizeof *dw);
    return NNT_OK;
  }
  if (!wino_layout(&j, tiles, scratch, scratch_len, 1, NNT_WINO_MIN_SLICES))
    return NNT_ERR_INVAL;
  size_t chunk = j.tc;
  wino_seg seg[WINO_MAX_TILES];
  j.seg = seg;
  for (j.k0 = 0; j.k0 < 16; j.k0 += j.kg) {
    j.first = j.k0 == 0;
    for (j.t0 = 0; j.t0 < tiles; j.t0 += chunk) {
      j.tc = tiles - j.t0 < chunk ? tiles - j.t0 : chunk;
      j.nseg = segments(&j, seg);
      nnt_cpu_pool_for_products(j.kg, 4, 4, dw_slices_part, &j);
    }
    nnt_cpu_pool_for(j.f, 1, 1, dw_part, &j);
  }
  return NNT_OK;
}
