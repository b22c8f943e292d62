/* CPU Winograd convolution F(2x2, 3x3) (the conv_wino op): a 2x2 block of
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
 * stores y), else 8, 4, 2 or 1 slices per pass, each pass adding its
 * part of A^T M A to y (the transform is linear in M; the slices of the
 * other passes count as zeros). The filter transform of a pass is made
 * once, for every chunk.
 * flip: the derivative of a stride-1 3x3 convolution is one of dY with
 * the window turned by 180 degrees and filters and channels swapped; w is
 * then the forward's [C][F][3][3] (C the forward's filters, F its
 * channels) and the filter transform reads it that way.
 * Threads (cpu_pool.c): the transforms split over channels, filters or
 * filters of U; the kg products of a pass run one per part (one-thread
 * OpenBLAS sgemms), a single product is split by columns as the gemm op
 * does. Every value is computed by the same arithmetic on any thread
 * count. The transforms are plain C loops over the tiles of a row
 * (contiguous in V and M), which the compiler vectorizes. */
#include <cblas.h>
#include <string.h>

#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/kernels.h"

/* Tiles of one row handled at once by the transforms (stack buffers). */
#define WB 64
/* The most tiles per chunk: V and M of a chunk stay near the L2 cache. */
#define WINO_MAX_TILES 256

typedef struct wino_job {
  const nnt_conv_geom *g;
  size_t n, f, c, th, tw;
  int flip;
  const float *w, *bias, *x;
  float *y;
  float *u, *v, *m; /* kg slices: [kg][f][c], [kg][c][tc], [kg][f][tc] */
  unsigned k0, kg;
  size_t t0, tc; /* the chunk: tiles [t0, t0 + tc); tc is also V's, M's row length */
  int first;     /* the first pass: store y (+ bias), else add */
} wino_job;

/* The slices of a pass and the tiles of a chunk for len floats of scratch
 * (0 when not even one slice and min(tiles, NNT_WINO_MIN_TILES) fit). */
static int wino_plan(size_t c, size_t f, size_t tiles, size_t len, unsigned *kg, size_t *tc) {
  size_t want = tiles < NNT_WINO_MIN_TILES ? tiles : NNT_WINO_MIN_TILES;
  for (unsigned k = 16; k >= 1; k /= 2) {
    size_t u = (size_t)k * c * f;
    if (u >= len)
      continue;
    size_t t = (len - u) / ((size_t)k * (c + f));
    if (t < want)
      continue;
    if (t > tiles)
      t = tiles;
    if (t > WINO_MAX_TILES)
      t = WINO_MAX_TILES;
    *kg = k;
    *tc = t;
    return 1;
  }
  return 0;
}

/* U for slices [k0, k0 + kg) of filters [f0, f1). */
static void u_part(void *arg, size_t f0, size_t f1) {
  const wino_job *j = arg;
  for (size_t f = f0; f < f1; f++)
    for (size_t c = 0; c < j->c; c++) {
      const float *src = j->flip ? j->w + (c * j->f + f) * 9 : j->w + (f * j->c + c) * 9;
      float g[9], t[4][3], u[16];
      for (int q = 0; q < 9; q++)
        g[q] = j->flip ? src[8 - q] : src[q];
      for (int b = 0; b < 3; b++) { /* G g: rows */
        t[0][b] = g[b];
        t[1][b] = 0.5f * (g[b] + g[3 + b] + g[6 + b]);
        t[2][b] = 0.5f * (g[b] - g[3 + b] + g[6 + b]);
        t[3][b] = g[6 + b];
      }
      for (int a = 0; a < 4; a++) { /* (G g) G^T: columns */
        u[4 * a] = t[a][0];
        u[4 * a + 1] = 0.5f * (t[a][0] + t[a][1] + t[a][2]);
        u[4 * a + 2] = 0.5f * (t[a][0] - t[a][1] + t[a][2]);
        u[4 * a + 3] = t[a][2];
      }
      for (unsigned k = 0; k < j->kg; k++)
        j->u[(k * j->f + f) * j->c + c] = u[j->k0 + k];
    }
}

/* The tiles [t, t + len) of one tile row: image *i, row *ty, from column
 * *tx; the next segment of [t, end) (the chunk). */
static size_t segment(const wino_job *j, size_t t, size_t end, size_t *i, size_t *ty,
                      size_t *tx) {
  size_t per = j->th * j->tw, r = t % per;
  *i = t / per;
  *ty = r / j->tw;
  *tx = r % j->tw;
  size_t len = j->tw - *tx;
  return len < end - t ? len : end - t;
}

/* V of channels [c0, c1) for the chunk's tiles. */
static void v_part(void *arg, size_t c0, size_t c1) {
  const wino_job *j = arg;
  const nnt_conv_geom *g = j->g;
  float r[4][2 * WB + 2], t[4][2 * WB + 2], junk[WB];
  for (size_t c = c0; c < c1; c++)
    for (size_t tt = j->t0, end = j->t0 + j->tc; tt < end;) {
      size_t i, ty, tx, len = segment(j, tt, end, &i, &ty, &tx);
      const float *xc = j->x + (i * j->c + c) * g->h * g->w;
      for (size_t b = 0; b < len; b += WB) {
        size_t nt = len - b < WB ? len - b : WB, L = 2 * nt + 2;
        long x0 = 2 * (long)(tx + b) - (long)g->pl;
        for (int a = 0; a < 4; a++) { /* the 4 input rows, zeros outside */
          long iy = 2 * (long)ty - (long)g->pt + a;
          if (iy < 0 || iy >= (long)g->h) {
            memset(r[a], 0, L * sizeof(float));
            continue;
          }
          const float *row = xc + (size_t)iy * g->w;
          long lo = x0 < 0 ? -x0 : 0, hi = (long)g->w - x0;
          if (hi > (long)L)
            hi = (long)L;
          if (hi < lo)
            hi = lo;
          memset(r[a], 0, (size_t)lo * sizeof(float));
          if (hi > lo)
            memcpy(r[a] + lo, row + x0 + lo, (size_t)(hi - lo) * sizeof(float));
          memset(r[a] + hi, 0, (L - (size_t)hi) * sizeof(float));
        }
        for (size_t q = 0; q < L; q++) { /* B^T d: rows */
          t[0][q] = r[0][q] - r[2][q];
          t[1][q] = r[1][q] + r[2][q];
          t[2][q] = r[2][q] - r[1][q];
          t[3][q] = r[1][q] - r[3][q];
        }
        for (unsigned a = 0; a < 4; a++) { /* (B^T d) B: columns */
          float *o[4];
          for (unsigned e = 0; e < 4; e++) {
            unsigned k = 4 * a + e;
            o[e] = k >= j->k0 && k < j->k0 + j->kg
                       ? j->v + ((k - j->k0) * j->c + c) * j->tc + (tt - j->t0) + b
                       : junk;
          }
          const float *s = t[a];
          for (size_t q = 0; q < nt; q++) {
            o[0][q] = s[2 * q] - s[2 * q + 2];
            o[1][q] = s[2 * q + 1] + s[2 * q + 2];
            o[2][q] = s[2 * q + 2] - s[2 * q + 1];
            o[3][q] = s[2 * q + 1] - s[2 * q + 3];
          }
        }
      }
      tt += len;
    }
}

/* The products M[k] = U[k] V[k] of slices [k0, k1) of the pass. */
static void m_part(void *arg, size_t k0, size_t k1) {
  const wino_job *j = arg;
  for (size_t k = k0; k < k1; k++)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)j->f, (int)j->tc, (int)j->c,
                1.0f, j->u + k * j->f * j->c, (int)j->c, j->v + k * j->c * j->tc, (int)j->tc,
                0.0f, j->m + k * j->f * j->tc, (int)j->tc);
}

/* y of filters [f0, f1) for the chunk's tiles: A^T M A of the pass's
 * slices (the others zero), stored with the bias on the first pass, else
 * added. */
static void y_part(void *arg, size_t f0, size_t f1) {
  const wino_job *j = arg;
  const nnt_conv_geom *g = j->g;
  static const float zero[WB];
  float o[2][2 * WB];
  size_t plane = (size_t)g->oh * g->ow;
  for (size_t f = f0; f < f1; f++)
    for (size_t tt = j->t0, end = j->t0 + j->tc; tt < end;) {
      size_t i, ty, tx, len = segment(j, tt, end, &i, &ty, &tx);
      float *yf = j->y + (i * j->f + f) * plane;
      float bias = j->first && j->bias ? j->bias[f] : 0.0f;
      for (size_t b = 0; b < len; b += WB) {
        size_t nt = len - b < WB ? len - b : WB;
        const float *m[16];
        for (unsigned k = 0; k < 16; k++)
          m[k] = k >= j->k0 && k < j->k0 + j->kg
                     ? j->m + ((k - j->k0) * j->f + f) * j->tc + (tt - j->t0) + b
                     : zero;
        for (size_t q = 0; q < nt; q++) {
          float s0[4], s1[4];
          for (int e = 0; e < 4; e++) { /* A^T M: rows */
            s0[e] = m[e][q] + m[4 + e][q] + m[8 + e][q];
            s1[e] = m[4 + e][q] - m[8 + e][q] - m[12 + e][q];
          }
          o[0][2 * q] = s0[0] + s0[1] + s0[2]; /* (A^T M) A: columns */
          o[0][2 * q + 1] = s0[1] - s0[2] - s0[3];
          o[1][2 * q] = s1[0] + s1[1] + s1[2];
          o[1][2 * q + 1] = s1[1] - s1[2] - s1[3];
        }
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
      tt += len;
    }
}

int nnt_cpu_conv_wino(const nnt_kernels *self, const nnt_conv_geom *g, size_t n,
                      size_t filters, int flip, const float *w, const float *bias,
                      const float *x, float *y, float *scratch, size_t scratch_len) {
  if (!nnt_wino_geom_ok(g) || !w || !x || !y || !scratch || !filters)
    return NNT_ERR_INVAL;
  wino_job j = {.g = g, .n = n, .f = filters, .c = g->c, .th = (g->oh + 1) / 2,
                .tw = (g->ow + 1) / 2, .flip = flip, .w = w, .bias = bias, .x = x, .y = y};
  size_t tiles = n * j.th * j.tw;
  if (!tiles)
    return NNT_OK;
  if (!wino_plan(j.c, j.f, tiles, scratch_len, &j.kg, &j.tc))
    return NNT_ERR_INVAL;
  j.u = scratch;
  j.v = j.u + (size_t)j.kg * j.f * j.c;
  j.m = j.v + (size_t)j.kg * j.c * j.tc;
  size_t chunk = j.tc;
  for (j.k0 = 0; j.k0 < 16; j.k0 += j.kg) {
    j.first = j.k0 == 0;
    nnt_cpu_pool_for(j.f, 1, 1, u_part, &j);
    for (j.t0 = 0; j.t0 < tiles; j.t0 += chunk) {
      j.tc = tiles - j.t0 < chunk ? tiles - j.t0 : chunk;
      nnt_cpu_pool_for(j.c, 1, 1, v_part, &j);
      if (j.kg > 1) {
        nnt_cpu_pool_for_products(j.kg, 1, 1, m_part, &j);
      } else {
        int rc = self->gemm(self, 0, 0, j.f, j.tc, j.c, 1.0f, j.u, j.c, j.v, j.tc, 0.0f, j.m,
                            j.tc);
        if (rc)
          return rc;
      }
      nnt_cpu_pool_for(j.f, 1, 1, y_part, &j);
    }
  }
  return NNT_OK;
}
