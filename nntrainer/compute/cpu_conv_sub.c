/* The CPU's forward of a 1x1 convolution with a stride (a subsampling
 * 1x1: ResNet's shortcuts) as a product of our own, for conv_fwd where
 * nnt_conv_sub_take says. im2col of such a layer copies every sh-th row's
 * every sw-th value into columns that OpenBLAS then copies again into its
 * own panels; here the subsampled values go straight into the panels the
 * micro-kernel reads, and the input's rows for the next panels are
 * fetched while the products run (ResNet-18's shortcuts on one thread of
 * a Zen 2: 0.54-0.83 of a bare sgemm of the same size -> 0.71-0.90; of an
 * Emerald Rapids, AVX-512: 0.67-0.76 -> 0.84-1.02, docs/performance.md).
 *
 * y[i] = W x sub(x[i]) is a sum of tiles of mr filters by SUB_NR output
 * positions (AVX-512: two such tiles at once): for every input channel k
 * in order, mr weights (W's rows, read where they lie) broadcast times a
 * packed row of SUB_NR subsampled input values, added into the tile's
 * accumulators from zero; the bias added last. A chunk packs as many
 * tiles as fit, an image's positions from a tile of their own; a part is
 * an image, its outputs written by it alone: the same bits on any number
 * of threads, and on AVX-512 as on AVX2, within rounding of im2col and
 * gemm. The code is chosen by the CPU's features (AVX-512, AVX2 with FMA,
 * else portable C). */
#include <string.h>

#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/kernels.h"
#include "nntrainer/compute/cpu_conv_vec.h"

#define SUB_MR 6
#define SUB_NR 16
/* The most rows and tiles of any micro-kernel (the AVX-512 one's). */
#define SUB_MAX_MR 8
#define SUB_MAX_NT 2
/* The tiles a chunk packs: at most SUB_PACK floats and SUB_MAX_TILES. */
#define SUB_MAX_TILES 64

/* Where a kernel's sums go: tile v's row r (filter f0 + r) to
 * y[v] + r * ld, its first nq[v] positions, for rows r < fr and tiles
 * whose y is not NULL; bias (f0's, or NULL) added to each sum. */
typedef struct sub_out {
  float *y[SUB_MAX_NT];
  size_t ld;
  unsigned nq[SUB_MAX_NT], fr;
  const float *bias;
  /* The derivative (AVX-512 only): a tile row's 16 sums spread over four
   * vectors of dX stored at y + xoff[q], lane l the sum xidx[q][l] (16 and
   * above: zero), instead of the above. add: each vector added into
   * what dX holds there (conv_bwd_x_add) instead of stored; a vector
   * whose lanes are all zeros (bit q of zq) only where dX holds a -0,
   * the one value that adding 0 changes. */
  int expand, add;
  unsigned zq;
  size_t xoff[4];
  int32_t xidx[4][SUB_NR];
} sub_out;

/* For tile v (of the kernel's nt, its packed rows at b + v * bs) and row
 * r: the sum over k < kn, in order, of a[r][k] times the tile's row k,
 * each product added into its sum from zero by a fused multiply-add where
 * the code has vectors (the same bits on each of them), then the bias;
 * stored as out says. bs 0: the tiles past the first repeat it (computed,
 * not stored). */
typedef void (*sub_mk_fn)(size_t kn, const float *const *a, const float *b, size_t bs,
                          const sub_out *out);

/* out's rows from t[v][r][SUB_NR] (mr rows a tile). */
static void sub_store(const float *t, unsigned mr, const sub_out *out) {
  for (unsigned v = 0; v < SUB_MAX_NT; v++)
    for (unsigned r = 0; out->y[v] && r < out->fr; r++) {
      float *yr = out->y[v] + r * out->ld;
      const float *tr = t + (v * mr + r) * SUB_NR;
      if (out->bias)
        for (unsigned q = 0; q < out->nq[v]; q++)
          yr[q] = tr[q] + out->bias[r];
      else if (out->nq[v] == SUB_NR)
        memcpy(yr, tr, SUB_NR * sizeof *yr); /* fixed size: plain moves */
      else
        for (unsigned q = 0; q < out->nq[v]; q++)
          yr[q] = tr[q];
    }
}

static void sub_mk_c(size_t kn, const float *const *a, const float *b, size_t bs,
                     const sub_out *out) {
  (void)bs;
  float acc[SUB_MR][SUB_NR] = {{0}};
  for (size_t k = 0; k < kn; k++, b += SUB_NR)
    for (unsigned r = 0; r < SUB_MR; r++) {
      float x = a[r][k];
      for (unsigned j = 0; j < SUB_NR; j++)
        acc[r][j] += x * b[j];
    }
  sub_store(&acc[0][0], SUB_MR, out);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SUB_FMA2(r)                                                                             \
  do {                                                                                          \
    __m256 x = _mm256_broadcast_ss(a##r + o);                                                   \
    c##r##0 = _mm256_fmadd_ps(x, b0, c##r##0);                                                  \
    c##r##1 = _mm256_fmadd_ps(x, b1, c##r##1);                                                  \
  } while (0)
/* Row r's sums into out's one tile: plain stores (a masked store is
 * microcoded on AMD's Zen 2). */
#define SUB_ST256(r)                                                                            \
  do {                                                                                          \
    if ((r) < out->fr) {                                                                        \
      __m256 bv = _mm256_set1_ps(out->bias ? out->bias[r] : 0.0f);                              \
      __m256 v0 = out->bias ? _mm256_add_ps(c##r##0, bv) : c##r##0;                             \
      __m256 v1 = out->bias ? _mm256_add_ps(c##r##1, bv) : c##r##1;                             \
      float *yr = out->y[0] + (r) * out->ld;                                                    \
      nnt_cv_storen256(yr, v0, nq);                                                             \
      if (nq > 8)                                                                               \
        nnt_cv_storen256(yr + 8, v1, nq - 8);                                                   \
    }                                                                                           \
  } while (0)
NNT_CV_AVX2 static void sub_mk_avx2(size_t kn, const float *const *a, const float *b, size_t bs,
                                    const sub_out *out) {
  (void)bs;
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
  for (size_t o = 0; o < kn; o++, b += SUB_NR) {
    __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    SUB_FMA2(0);
    SUB_FMA2(1);
    SUB_FMA2(2);
    SUB_FMA2(3);
    SUB_FMA2(4);
    SUB_FMA2(5);
  }
  unsigned nq = out->nq[0];
  SUB_ST256(0);
  SUB_ST256(1);
  SUB_ST256(2);
  SUB_ST256(3);
  SUB_ST256(4);
  SUB_ST256(5);
}

/* AVX-512: 8 rows by two tiles of 16 positions, one vector each: 16 sums
 * in registers, 10 loads (two tiles' rows, eight broadcasts) for 16
 * multiply-adds, two k a pass; the sums stored from the registers. Row r's
 * k-th weight at a[r][k * lda], tile row k at b + k * ldb (the forward:
 * W's rows, packed tiles; the derivative: W's columns, dY's rows). */
#define SUB_FMA512(r, k)                                                                        \
  do {                                                                                          \
    __m512 x = _mm512_set1_ps(a##r[(k)*lda]);                                                   \
    c##r##0 = _mm512_fmadd_ps(x, b0, c##r##0);                                                  \
    c##r##1 = _mm512_fmadd_ps(x, b1, c##r##1);                                                  \
  } while (0)
#define SUB_STEP512(k)                                                                          \
  do {                                                                                          \
    __m512 b0 = _mm512_loadu_ps(b + (k)*ldb), b1 = _mm512_loadu_ps(b2 + (k)*ldb);              \
    SUB_FMA512(0, k);                                                                           \
    SUB_FMA512(1, k);                                                                           \
    SUB_FMA512(2, k);                                                                           \
    SUB_FMA512(3, k);                                                                           \
    SUB_FMA512(4, k);                                                                           \
    SUB_FMA512(5, k);                                                                           \
    SUB_FMA512(6, k);                                                                           \
    SUB_FMA512(7, k);                                                                           \
  } while (0)
#define SUB_ST512(r)                                                                            \
  do {                                                                                          \
    if ((r) < out->fr) {                                                                        \
      __m512 bv = _mm512_set1_ps(out->bias ? out->bias[r] : 0.0f);                              \
      if (out->y[0])                                                                            \
        _mm512_mask_storeu_ps(out->y[0] + (r)*out->ld, m0,                                     \
                              out->bias ? _mm512_add_ps(c##r##0, bv) : c##r##0);                \
      if (out->y[1])                                                                            \
        _mm512_mask_storeu_ps(out->y[1] + (r)*out->ld, m1,                                     \
                              out->bias ? _mm512_add_ps(c##r##1, bv) : c##r##1);                \
    }                                                                                           \
  } while (0)
#define SUB_EX512(r)                                                                            \
  do {                                                                                          \
    for (unsigned q = 0; (r) < out->fr && q < 4; q++) {                                         \
      if (out->y[0])                                                                            \
        sub_put512(out, q, out->y[0] + (r)*out->ld + out->xoff[q], c##r##0, xi[q]);            \
      if (out->y[1])                                                                            \
        sub_put512(out, q, out->y[1] + (r)*out->ld + out->xoff[q], c##r##1, xi[q]);            \
    }                                                                                           \
  } while (0)
/* Vector q of a tile row's sums c (lanes picked by xi, zeros past 15)
 * stored at p, or added into what p holds (out->add): the bits of an add
 * of the stored vector into it. */
static inline __attribute__((always_inline)) NNT_CV_AVX512 void
sub_put512(const sub_out *out, unsigned q, float *p, __m512 c, __m512i xi) {
  __m512 zero = _mm512_setzero_ps();
  if (!out->add) {
    _mm512_storeu_ps(p, _mm512_permutex2var_ps(c, xi, zero));
  } else if (out->zq >> q & 1) {
    __m512i v = _mm512_loadu_si512(p); /* x + 0 is x but for x = -0 */
    if (_mm512_cmpeq_epi32_mask(v, _mm512_set1_epi32(INT32_MIN)))
      _mm512_storeu_ps(p, _mm512_add_ps(_mm512_castsi512_ps(v), zero));
  } else {
    _mm512_storeu_ps(p, _mm512_add_ps(_mm512_loadu_ps(p), _mm512_permutex2var_ps(c, xi, zero)));
  }
}
static inline __attribute__((always_inline)) NNT_CV_AVX512 void
sub_mk512(size_t kn, const float *const *a, size_t lda, const float *b, size_t ldb, size_t bs,
          const sub_out *out) {
  __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m512 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  __m512 c60 = c00, c61 = c00, c70 = c00, c71 = c00;
  const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
  const float *a6 = a[6], *a7 = a[7], *b2 = b + bs;
  size_t o = 0;
  for (; o + 2 <= kn; o += 2) {
    SUB_STEP512(0);
    SUB_STEP512(1);
    a0 += 2 * lda, a1 += 2 * lda, a2 += 2 * lda, a3 += 2 * lda;
    a4 += 2 * lda, a5 += 2 * lda, a6 += 2 * lda, a7 += 2 * lda;
    b += 2 * ldb, b2 += 2 * ldb;
  }
  if (o < kn)
    SUB_STEP512(0);
  if (out->expand) {
    __m512i xi[4];
    for (unsigned q = 0; q < 4; q++)
      xi[q] = _mm512_loadu_si512(out->xidx[q]);
    SUB_EX512(0);
    SUB_EX512(1);
    SUB_EX512(2);
    SUB_EX512(3);
    SUB_EX512(4);
    SUB_EX512(5);
    SUB_EX512(6);
    SUB_EX512(7);
    return;
  }
  __mmask16 m0 = nnt_cv_mask512(0, out->nq[0]), m1 = nnt_cv_mask512(0, out->nq[1]);
  SUB_ST512(0);
  SUB_ST512(1);
  SUB_ST512(2);
  SUB_ST512(3);
  SUB_ST512(4);
  SUB_ST512(5);
  SUB_ST512(6);
  SUB_ST512(7);
}
NNT_CV_AVX512 static void sub_mk_avx512(size_t kn, const float *const *a, const float *b,
                                        size_t bs, const sub_out *out) {
  sub_mk512(kn, a, 1, b, SUB_NR, bs, out);
}
#endif

/* A micro-kernel and its tile: mr rows (filters) by nt tiles. */
typedef void (*sub_pack_fn)(const nnt_conv_geom *g, const float *xi, size_t p0, size_t np,
                            float *b);
static void sub_pack_x(const nnt_conv_geom *g, const float *xi, size_t p0, size_t np, float *b);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
static void sub_pack_x512(const nnt_conv_geom *g, const float *xi, size_t p0, size_t np,
                          float *b);
#endif

/* A micro-kernel, its tile (mr rows, filters, by nt tiles) and the
 * packing of its positions. */
typedef struct sub_mk {
  sub_mk_fn fn;
  unsigned mr, nt;
  sub_pack_fn pack;
} sub_mk;

/* The micro-kernel of a path; fn NULL when this CPU cannot run it. */
static sub_mk sub_mk_of(int path) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (path >= NNT_BLAS_AVX512)
    return (sub_mk){__builtin_cpu_supports("avx512f") ? sub_mk_avx512 : NULL, 8, 2,
                    sub_pack_x512};
  if (path >= NNT_BLAS_AVX2)
    return (sub_mk){__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? sub_mk_avx2
                                                                                     : NULL,
                    SUB_MR, 1, sub_pack_x};
#else
  if (path >= NNT_BLAS_AVX2)
    return (sub_mk){NULL, SUB_MR, 1, sub_pack_x};
#endif
  return (sub_mk){sub_mk_c, SUB_MR, 1, sub_pack_x};
}

typedef struct sub_job {
  const nnt_conv_geom *g;
  size_t n, filters, plane, in_len;
  const float *w, *bias, *x;
  float *y;
  sub_mk mk;
} sub_job;

/* Packed panels on the stack: at most SUB_PACK floats (32 KiB). */
#define SUB_PACK 8192

/* The kn rows of A from row r0 of mr: row r at base + (r0 + r) * rs, the
 * rows past mr repeating the last (computed, not stored). */
static void sub_rows(const float *base, size_t r0, unsigned mr, unsigned kn, size_t rs,
                     const float **a) {
  for (unsigned r = 0; r < kn; r++)
    a[r] = base + (r0 + (r < mr ? r : mr - 1)) * rs;
}

/* dst[k] = src[k * s] for k < n. */
static inline void sub_take(const float *src, size_t s, size_t n, float *dst) {
  if (s == 2)
    for (size_t k = 0; k < n; k++)
      dst[k] = src[2 * k];
  else
    for (size_t k = 0; k < n; k++)
      dst[k] = src[k * s];
}

/* Positions [p0, p0 + np) of image xi (all g->c channels) packed as tiles
 * [tile][c][SUB_NR]: a channel's positions read along its rows; the
 * columns of a last tile past np zero. */
static void sub_pack_x(const nnt_conv_geom *g, const float *xi, size_t p0, size_t np, float *b) {
  size_t hw = (size_t)g->h * g->w, c = g->c, pad = (SUB_NR - np % SUB_NR) % SUB_NR;
  for (size_t ch = 0; ch < c; ch++) {
    const float *xc = xi + ch * hw;
    size_t oh = p0 / g->ow, ow = p0 % g->ow;
    for (size_t q = 0; q < np;) {
      size_t run = SUB_NR - q % SUB_NR;
      if (run > g->ow - ow)
        run = g->ow - ow;
      if (run > np - q)
        run = np - q;
      sub_take(xc + oh * g->sh * g->w + ow * g->sw, g->sw, run,
               b + q / SUB_NR * c * SUB_NR + ch * SUB_NR + q % SUB_NR);
      q += run, ow += run;
      if (ow == g->ow)
        ow = 0, oh++;
    }
    for (size_t q = np; q < np + pad; q++)
      b[q / SUB_NR * c * SUB_NR + ch * SUB_NR + q % SUB_NR] = 0.0f;
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* sub_pack_x on AVX-512. Where an output row is shorter than a tile
 * (stage 3's and 4's shortcuts: 8 and 4 positions) each tile's channel is
 * one gather, by offsets worked out once a tile, its lanes past np zero. */
NNT_CV_AVX512 static void sub_pack_x512(const nnt_conv_geom *g, const float *xi, size_t p0,
                                        size_t np, float *b) {
  if (g->ow > SUB_NR || (size_t)g->h * g->w > INT32_MAX) {
    sub_pack_x(g, xi, p0, np, b);
    return;
  }
  size_t hw = (size_t)g->h * g->w, c = g->c, nt = (np + SUB_NR - 1) / SUB_NR;
  __m512i idx[SUB_MAX_TILES];
  __mmask16 m[SUB_MAX_TILES];
  for (size_t t = 0; t < nt; t++) {
    int32_t off[SUB_NR] = {0};
    size_t nq = np - t * SUB_NR < SUB_NR ? np - t * SUB_NR : SUB_NR;
    for (size_t q = 0; q < nq; q++) {
      size_t pq = p0 + t * SUB_NR + q;
      off[q] = (int32_t)(pq / g->ow * g->sh * g->w + pq % g->ow * g->sw);
    }
    idx[t] = _mm512_loadu_si512(off), m[t] = nnt_cv_mask512(0, (unsigned)nq);
  }
  for (size_t ch = 0; ch < c; ch++) {
    const float *xc = xi + ch * hw;
    for (size_t t = 0; t < nt; t++)
      _mm512_storeu_ps(b + (t * c + ch) * SUB_NR,
                       _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m[t], idx[t], xc, 4));
  }
}
#endif

/* The lines of the input rows that the next chunk reads (output rows
 * [oh0, oh1) of image xi), fetched a few at a time while this chunk's
 * products run: the packing then finds them in cache instead of waiting
 * on memory for each channel's rows in turn. */
typedef struct sub_pf {
  const nnt_conv_geom *g;
  const float *xi;
  size_t oh0, oh1, per_row, ch, oh, line, each;
} sub_pf;

/* xi NULL: nothing to fetch. calls: how many sub_pf_some share them. */
static void sub_pf_start(sub_pf *f, const nnt_conv_geom *g, const float *xi, size_t p0,
                         size_t np, size_t calls) {
  *f = (sub_pf){.g = g, .xi = xi, .per_row = ((size_t)g->w * sizeof(float) + 63) / 64};
  if (!np || !xi) {
    f->ch = g->c;
    return;
  }
  f->oh0 = f->oh = p0 / g->ow, f->oh1 = (p0 + np - 1) / g->ow + 1;
  size_t lines = g->c * (f->oh1 - f->oh0) * f->per_row;
  f->each = (lines + calls - 1) / calls;
}

static inline void sub_pf_some(sub_pf *f) {
  const nnt_conv_geom *g = f->g;
  for (size_t k = 0; k < f->each && f->ch < g->c; k++) {
    const float *row = f->xi + (f->ch * g->h + f->oh * g->sh) * g->w;
    __builtin_prefetch((const char *)row + f->line * 64, 0, 3);
    if (++f->line < f->per_row)
      continue;
    f->line = 0;
    if (++f->oh < f->oh1)
      continue;
    f->oh = f->oh0, f->ch++;
  }
}


/* Positions [p0, p0 + np) of image i, packed from tile t0 on. */
typedef struct sub_seg {
  size_t i, p0, np, t0;
} sub_seg;

/* Tile u's image, first position and positions (of at most SUB_NR), from
 * the segment *s on (u no lower than the last call's). */
static void sub_tile(const sub_seg *seg, size_t *s, size_t u, size_t *i, size_t *p, size_t *nq) {
  while (u >= seg[*s].t0 + (seg[*s].np + SUB_NR - 1) / SUB_NR)
    ++*s;
  size_t q = (u - seg[*s].t0) * SUB_NR;
  *i = seg[*s].i, *p = seg[*s].p0 + q;
  *nq = seg[*s].np - q < SUB_NR ? seg[*s].np - q : SUB_NR;
}

/* A chunk holds as many tiles as fit, each image's positions from a tile
 * of their own (a small plane, as stage 4's 4x4, shares a chunk with the
 * next images: the two-tile kernel finds its pairs). */
static void sub_fwd_part(void *arg, size_t i0, size_t i1) {
  const sub_job *j = arg;
  const nnt_conv_geom *g = j->g;
  size_t c = g->c, tiles = SUB_PACK / (c * SUB_NR), mr = j->mk.mr, nt = j->mk.nt;
  if (tiles > SUB_MAX_TILES)
    tiles = SUB_MAX_TILES;
  float b[SUB_PACK];
  const float *a[SUB_MAX_MR];
  sub_seg seg[SUB_MAX_TILES];
  for (size_t i = i0, p = 0; i < i1;) {
    size_t ns = 0, used = 0;
    while (i < i1 && used < tiles) {
      size_t np = j->plane - p < (tiles - used) * SUB_NR ? j->plane - p : (tiles - used) * SUB_NR;
      j->mk.pack(g, j->x + i * j->in_len, p, np, b + used * c * SUB_NR);
      seg[ns++] = (sub_seg){i, p, np, used};
      used += (np + SUB_NR - 1) / SUB_NR, p += np;
      if (p == j->plane)
        i++, p = 0;
    }
    sub_pf pf; /* the next chunk's first image */
    size_t np2 = j->plane - p < tiles * SUB_NR ? j->plane - p : tiles * SUB_NR;
    sub_pf_start(&pf, g, i < i1 ? j->x + i * j->in_len : NULL, p, np2,
                 (used + nt - 1) / nt * ((j->filters + mr - 1) / mr));
    size_t s = 0;
    for (size_t u0 = 0; u0 < used; u0 += nt) {
      size_t un = used - u0 < nt ? used - u0 : nt;
      sub_out out = {.ld = j->plane};
      float *y0[SUB_MAX_NT] = {NULL}; /* the tiles' outputs at filter 0 */
      for (size_t v = 0; v < un; v++) {
        size_t ii, pp, nq;
        sub_tile(seg, &s, u0 + v, &ii, &pp, &nq);
        y0[v] = j->y + ii * j->filters * j->plane + pp, out.nq[v] = (unsigned)nq;
      }
      const float *bu = b + u0 * c * SUB_NR;
      size_t bs = un > 1 ? c * SUB_NR : 0;
      for (size_t f0 = 0; f0 < j->filters; f0 += mr) {
        out.fr = j->filters - f0 < mr ? (unsigned)(j->filters - f0) : (unsigned)mr;
        out.bias = j->bias ? j->bias + f0 : NULL;
        for (size_t v = 0; v < un; v++)
          out.y[v] = y0[v] + f0 * j->plane;
        sub_rows(j->w, f0, out.fr, (unsigned)mr, c, a);
        j->mk.fn(c, a, bu, bs, &out);
        sub_pf_some(&pf);
      }
    }
  }
}

/* Parts of at least about 64K multiply-adds. */
static size_t sub_min_part(size_t per) { return per >= 65536 ? 1 : 65536 / (per + 1) + 1; }

static int sub_job_init(int path, const nnt_conv_geom *g, size_t n, size_t filters,
                        sub_job *j) {
  sub_mk mk = sub_mk_of(path);
  if (!mk.fn || !nnt_conv_sub_take(g, filters))
    return NNT_ERR_INVAL;
  *j = (sub_job){.g = g,
                 .n = n,
                 .filters = filters,
                 .plane = (size_t)g->oh * g->ow,
                 .in_len = nnt_conv_img_stride(g),
                 .mk = mk};
  return NNT_OK;
}

int nnt_cpu_conv_sub_fwd(int path, const nnt_conv_geom *g, size_t n, size_t filters,
                         const float *w, const float *bias, const float *x, float *y) {
  sub_job j;
  int rc = sub_job_init(path, g, n, filters, &j);
  if (rc || !n || !j.plane)
    return rc;
  /* a gathered input: the positions packed from where they lie, [c][oh][ow]
   * an image, into the same panels (the same sums, so the same bits) */
  nnt_conv_geom pre = *g;
  if (g->gathered) {
    pre.h = g->oh, pre.w = g->ow, pre.sh = pre.sw = 1, pre.gathered = 0;
    j.g = &pre;
    j.in_len = (size_t)g->c * g->oh * g->ow;
  }
  j.w = w, j.bias = bias, j.x = x, j.y = y;
  nnt_cpu_pool_for(n, 1, sub_min_part(j.plane * filters * g->c), sub_fwd_part, &j);
  return NNT_OK;
}

int nnt_conv_sub_runs(void) {
  return nnt_blas_cpu_rank() >= NNT_BLAS_AVX2; /* AVX-512's or AVX2's kernel runs */
}

/* ---- The derivative on AVX-512: dX = W^T dY spread over the even rows'
 * even columns, zeros elsewhere, for a stride of 2 whose input is its
 * output's size twice over (ResNet's shortcuts). Tiles of 16 output
 * positions of one image, two at a time (an image's last beside the
 * next's first), by 8 input channels; dY's rows and W's columns are read
 * where they lie, and each tile row's 16 sums go out as four vectors of
 * dX (its output rows' stretch of the input: 64 floats when a row fills
 * 16 positions or fewer, else two half rows of 32, with the odd rows
 * after them) by a permutation with zeros. Every dX value is written
 * once, by one part: the same bits on any number of threads. Measured
 * against gemm and col2im in docs/performance.md. */
int nnt_conv_sub_dx_take(const nnt_conv_geom *g, size_t filters) {
  if (!nnt_conv_sub_take(g, filters) || g->sh != 2 || g->sw != 2 ||
      g->h != 2 * (size_t)g->oh || g->w != 2 * (size_t)g->ow)
    return 0;
  return (size_t)g->oh * g->ow % SUB_NR == 0 && (g->ow % SUB_NR == 0 || SUB_NR % g->ow == 0);
}

int nnt_conv_sub_dx_runs(void) { return nnt_blas_cpu_rank() >= NNT_BLAS_AVX512; }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
typedef struct sub_dx_job {
  const nnt_conv_geom *g;
  size_t filters, plane, hw;
  const float *w, *dy;
  float *dx;
  sub_out tmpl; /* expand, xoff and xidx */
} sub_dx_job;

NNT_CV_AVX512 static void sub_dx_part(void *arg, size_t i0, size_t i1) {
  const sub_dx_job *j = arg;
  const nnt_conv_geom *g = j->g;
  size_t c = g->c, tpi = j->plane / SUB_NR, total = (i1 - i0) * tpi;
  const float *a[SUB_MAX_MR];
  for (size_t u = 0; u < total; u += SUB_MAX_NT) {
    size_t un = total - u < SUB_MAX_NT ? total - u : SUB_MAX_NT;
    const float *bt[SUB_MAX_NT] = {NULL};
    float *y0[SUB_MAX_NT] = {NULL};
    for (size_t v = 0; v < un; v++) {
      size_t i = i0 + (u + v) / tpi, p0 = (u + v) % tpi * SUB_NR;
      bt[v] = j->dy + i * j->filters * j->plane + p0;
      y0[v] = j->dx + i * c * j->hw + 2 * (p0 / g->ow) * g->w + 2 * (p0 % g->ow);
    }
    sub_out out = j->tmpl;
    out.ld = j->hw;
    for (size_t c0 = 0; c0 < c; c0 += SUB_MAX_MR) {
      out.fr = c - c0 < SUB_MAX_MR ? (unsigned)(c - c0) : SUB_MAX_MR;
      for (size_t v = 0; v < un; v++)
        out.y[v] = y0[v] + c0 * j->hw;
      sub_rows(j->w, c0, out.fr, SUB_MAX_MR, 1, a); /* W's columns c0 + r */
      sub_mk512(j->filters, a, c, bt[0], j->plane, un > 1 ? (size_t)(bt[1] - bt[0]) : 0, &out);
    }
  }
}
#endif

int nnt_cpu_conv_sub_dx(int path, const nnt_conv_geom *g, size_t n, size_t filters,
                        const float *w, const float *dy, float *dx, int add) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (path < NNT_BLAS_AVX512 || !__builtin_cpu_supports("avx512f") ||
      !nnt_conv_sub_dx_take(g, filters))
    return NNT_ERR_INVAL;
  sub_dx_job j = {.g = g,
                  .filters = filters,
                  .plane = (size_t)g->oh * g->ow,
                  .hw = (size_t)g->h * g->w,
                  .w = w,
                  .dy = dy,
                  .dx = dx,
                  .tmpl = {.expand = 1, .add = add}};
  /* lane l of vector q: dX value e = 16 q + l of the tile's stretch (of a
   * half row when rows are longer than a tile) */
  for (unsigned q = 0; q < 4; q++) {
    int half = g->ow % SUB_NR == 0;
    unsigned zeros = 0; /* tiles of a half row: its even row, then its odd */
    j.tmpl.xoff[q] = half ? (q / 2) * (size_t)g->w + (q % 2) * SUB_NR : q * (size_t)SUB_NR;
    for (unsigned l = 0; l < SUB_NR; l++) {
      size_t e = (half ? (q % 2) : q) * SUB_NR + l;
      size_t row = half ? q / 2 : e / g->w, col = half ? e : e % g->w;
      j.tmpl.xidx[q][l] =
          row % 2 || col % 2 ? SUB_NR : (int32_t)((half ? 0 : row / 2 * g->ow) + col / 2);
      zeros += j.tmpl.xidx[q][l] == SUB_NR;
    }
    j.tmpl.zq |= (unsigned)(zeros == SUB_NR) << q;
  }
  if (n && g->c)
    nnt_cpu_pool_for(n, 1, sub_min_part(j.plane * filters * g->c), sub_dx_part, &j);
  return NNT_OK;
#else
  (void)path, (void)g, (void)n, (void)filters, (void)w, (void)dy, (void)dx, (void)add;
  return NNT_ERR_INVAL;
#endif
}

/* ---- The weight gradient on AVX-512: dW = sum over images and output
 * positions k of dY[f][k] times the subsampled input sub(x)[c][k], for
 * what nnt_conv_sub_take takes. The positions go in blocks of at most
 * SUB_DW_KB (an image's, or whole images of a small plane): a block's
 * subsampled inputs, 32 channels at a time, are gathered into a panel on
 * the stack (a row per position, its 32 channels across two vectors),
 * and each tile of SUB_DW_NR filters by those 32 channels runs over the
 * block: a filter's dY at a position broadcast times the panel's row,
 * added into the tile's accumulators (from zero at the first block, else
 * from dW). So the input is gathered once, dY read where it lies, and
 * neither is copied again for a product (im2col's columns and OpenBLAS's
 * panels of both before). Every dW value is a sum over the positions in
 * order, images first, by fused multiply-adds, whatever the blocks and
 * whichever part runs it: parts are runs of 32 channels, each the same
 * bits on any number of threads. Measured against im2col and gemm in
 * docs/performance.md. */
#define SUB_DW_KB 256
#define SUB_DW_NR 12

int nnt_conv_sub_dw_take(const nnt_conv_geom *g, size_t filters) {
  /* a gather's offsets reach 15 channels on: within int32 */
  return nnt_conv_sub_take(g, filters) && (size_t)g->h * g->w * 16 <= INT32_MAX;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
typedef struct sub_dw_job {
  const nnt_conv_geom *g;
  size_t n, filters, plane, hw, in_len;
  const float *x, *dy;
  float *dw;
} sub_dw_job;

/* Positions [p0, p0 + np) of images [0, nn) from xi (channels c0 on, of
 * which cn < 32 past the first are zeros), packed as rows of 32. */
NNT_CV_AVX512 static void sub_dw_pack(const sub_dw_job *j, const float *xi, size_t nn, size_t p0,
                                      size_t np, size_t cn, float *panel) {
  const nnt_conv_geom *g = j->g;
  int32_t off[SUB_NR];
  for (unsigned l = 0; l < SUB_NR; l++)
    off[l] = (int32_t)(l * j->hw);
  __m512i idx = _mm512_loadu_si512(off);
  __mmask16 m0 = nnt_cv_mask512(0, cn < 16 ? (unsigned)cn : 16);
  __mmask16 m1 = nnt_cv_mask512(0, cn > 16 ? (unsigned)cn - 16 : 0);
  __m512 zero = _mm512_setzero_ps();
  for (size_t i = 0; i < nn; i++, xi += j->in_len) {
    size_t oh = p0 / g->ow, ow = p0 % g->ow;
    for (size_t q = 0; q < np; q++, panel += 32) {
      const float *at = xi + oh * g->sh * g->w + ow * g->sw;
      _mm512_store_ps(panel, _mm512_mask_i32gather_ps(zero, m0, idx, at, 4));
      _mm512_store_ps(panel + 16, _mm512_mask_i32gather_ps(zero, m1, idx, at + 16 * j->hw, 4));
      if (++ow == g->ow)
        ow = 0, oh++;
    }
  }
}

/* Filters [0, NR) from dy (row f at dy + f * plane, image i at
 * dy + i * filters * plane, positions [0, np) of each) by the panel's 32
 * channels, into dw (row f at dw + f * ldw, its lanes past m0 and m1
 * untouched); from 0 or from what dw holds (load). */
#define SUB_DW_MK(NR)                                                                           \
  NNT_CV_AVX512 static void sub_dw_mk##NR(const float *panel, const float *dy, size_t nn,     \
                                          size_t np, size_t istr, size_t rstr, float *dw,       \
                                          size_t ldw, __mmask16 m0, __mmask16 m1, int load) {   \
    __m512 c0[NR], c1[NR];                                                                      \
    _Pragma("GCC unroll 12") for (unsigned f = 0; f < NR; f++) {                               \
      c0[f] = load ? _mm512_maskz_loadu_ps(m0, dw + f * ldw) : _mm512_setzero_ps();             \
      c1[f] = load ? _mm512_maskz_loadu_ps(m1, dw + f * ldw + 16) : _mm512_setzero_ps();        \
    }                                                                                           \
    for (size_t i = 0; i < nn; i++, dy += istr)                                                 \
      for (size_t q = 0; q < np; q++, panel += 32) {                                            \
        __m512 b0 = _mm512_load_ps(panel), b1 = _mm512_load_ps(panel + 16);                     \
        _Pragma("GCC unroll 12") for (unsigned f = 0; f < NR; f++) {                           \
          __m512 a = _mm512_set1_ps(dy[f * rstr + q]);                                          \
          c0[f] = _mm512_fmadd_ps(a, b0, c0[f]);                                                \
          c1[f] = _mm512_fmadd_ps(a, b1, c1[f]);                                                \
        }                                                                                       \
      }                                                                                         \
    _Pragma("GCC unroll 12") for (unsigned f = 0; f < NR; f++) {                               \
      _mm512_mask_storeu_ps(dw + f * ldw, m0, c0[f]);                                           \
      _mm512_mask_storeu_ps(dw + f * ldw + 16, m1, c1[f]);                                      \
    }                                                                                           \
  }
SUB_DW_MK(12)
SUB_DW_MK(8)
SUB_DW_MK(4)
SUB_DW_MK(1)

/* Parts are runs of 32 channels; each takes the blocks of positions in
 * order, and in each its channels' panels in turn. */
NNT_CV_AVX512 static void sub_dw_part(void *arg, size_t i0, size_t i1) {
  const sub_dw_job *j = arg;
  size_t c = j->g->c, f = j->filters, plane = j->plane, istr = f * plane;
  size_t per = plane >= SUB_DW_KB ? 1 : SUB_DW_KB / plane; /* images a block */
  size_t span = plane >= SUB_DW_KB ? SUB_DW_KB : plane;    /* positions an image a block */
  float panel[SUB_DW_KB * 32] __attribute__((aligned(64)));
  for (size_t b = 0; b < j->n; b += per) {
    size_t nn = j->n - b < per ? j->n - b : per;
    for (size_t p0 = 0; p0 < plane; p0 += span) {
      size_t np = plane - p0 < span ? plane - p0 : span;
      int load = b || p0;
      for (size_t t = i0; t < i1; t++) {
        size_t c0 = t * 32, cn = c - c0 < 32 ? c - c0 : 32;
        __mmask16 m0 = nnt_cv_mask512(0, cn < 16 ? (unsigned)cn : 16);
        __mmask16 m1 = nnt_cv_mask512(0, cn > 16 ? (unsigned)cn - 16 : 0);
        sub_dw_pack(j, j->x + b * j->in_len + c0 * j->hw, nn, p0, np, cn, panel);
        const float *d = j->dy + b * istr + p0;
        float *w = j->dw + c0;
        size_t r = 0;
        for (; r + 12 <= f; r += 12)
          sub_dw_mk12(panel, d + r * plane, nn, np, istr, plane, w + r * c, c, m0, m1, load);
        for (; r + 8 <= f; r += 8)
          sub_dw_mk8(panel, d + r * plane, nn, np, istr, plane, w + r * c, c, m0, m1, load);
        for (; r + 4 <= f; r += 4)
          sub_dw_mk4(panel, d + r * plane, nn, np, istr, plane, w + r * c, c, m0, m1, load);
        for (; r < f; r++)
          sub_dw_mk1(panel, d + r * plane, nn, np, istr, plane, w + r * c, c, m0, m1, load);
      }
    }
  }
}
#endif

int nnt_cpu_conv_sub_dw(int path, const nnt_conv_geom *g, size_t n, size_t filters,
                        const float *x, const float *dy, float *dw) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (path < NNT_BLAS_AVX512 || !__builtin_cpu_supports("avx512f") ||
      !nnt_conv_sub_dw_take(g, filters))
    return NNT_ERR_INVAL;
  sub_dw_job j = {.g = g,
                  .n = n,
                  .filters = filters,
                  .plane = (size_t)g->oh * g->ow,
                  .hw = (size_t)g->h * g->w,
                  .in_len = nnt_conv_img_stride(g),
                  .x = x,
                  .dy = dy,
                  .dw = dw};
  if (!n || !j.plane) { /* no position: the sums are zeros */
    memset(dw, 0, filters * g->c * sizeof *dw);
    return NNT_OK;
  }
  size_t panels = (g->c + 31) / 32;
  nnt_cpu_pool_for(panels, 1, sub_min_part(n * j.plane * filters * 32), sub_dw_part, &j);
  return NNT_OK;
#else
  (void)path, (void)g, (void)n, (void)filters, (void)x, (void)dy, (void)dw;
  return NNT_ERR_INVAL;
#endif
}
