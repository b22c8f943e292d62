/* Winograd convolution's job (cpu_winograd.c), shared with its AVX-512
 * transforms (cpu_winograd_avx512.c). Internal to the CPU backend. */
#ifndef NNT_CPU_WINOGRAD_H
#define NNT_CPU_WINOGRAD_H

#include <stddef.h>

#include "nntrainer/compute/kernels.h"

typedef struct wino_job {
  const nnt_conv_geom *g;
  size_t n, f, c, th, tw;
  int flip;
  const float *w, *bias, *x;
  float *y;
  float *u, *v, *m; /* kg slices: [kg][f][c], [kg][c][tc], [kg][f][tc] */
  /* filter blocks (u_rows > 0): U and M hold filters [u_f0, u_f0 + u_rows)
   * only, [kg][u_rows][c] and [kg][u_rows][tc]; u_rows 0: all f */
  size_t u_f0, u_rows;
  unsigned k0, kg;
  size_t t0, tc; /* the chunk: tiles [t0, t0 + tc); tc is also V's, M's row length */
  unsigned regions; /* chunks at once, each in its own V and M */
  size_t per_img, nch; /* the forward's chunks: per image (0: over all tiles), in all */
  size_t region_len; /* floats of one region (V and M) */
  int first;     /* the first pass: store y (+ bias), else add */
  struct wino_seg *seg; /* the chunk's tile rows, nseg of them */
  size_t nseg;
  const float *dy; /* conv_wino_dw: dY [n][f][oh][ow], the result dw */
  float *dw;
} wino_job;

/* Tiles [tl, tl + len) of a chunk (chunk-local numbers) are one tile row's
 * from column tx: image i, tile row ty. */
typedef struct wino_seg {
  unsigned i, ty, tx, len, tl;
} wino_seg;

/* The pass's 16 slices of row r at column col of base (kg slices of rows
 * rows of j->tc values): o[k] for slice k, or junk + k * junk_len for a
 * slice outside the pass (NULL when junk is NULL). */
static inline void nnt_wino_slices(const wino_job *j, float *base, size_t rows, size_t r,
                                   size_t col, float *junk, size_t junk_len, float *o[16]) {
  for (unsigned k = 0; k < 16; k++)
    o[k] = k >= j->k0 && k < j->k0 + j->kg ? base + ((k - j->k0) * rows + r) * j->tc + col
           : junk                          ? junk + k * junk_len
                                           : NULL;
}

/* M's rows a slice and the row of filter f (the forward's output transform). */
static inline size_t nnt_wino_m_rows(const wino_job *j) { return j->u_rows ? j->u_rows : j->f; }
static inline size_t nnt_wino_m_row(const wino_job *j, size_t f) { return f - j->u_f0; }

/* The input transform V and dY's transform (conv_wino_dw) of the job's
 * chunk on AVX-512, as the pool's parts over channels or filters: the bits
 * of cpu_winograd.c's plain C loops. Only where nnt_cpu_vec_avx512(). */
void nnt_wino_v_part_avx512(void *arg, size_t c0, size_t c1);
void nnt_wino_taps_avx512(const float *w, int flip, size_t f, size_t nf, size_t c, size_t c0,
                          size_t nc, size_t ld, float *g);
void nnt_wino_dyt_part_avx512(void *arg, size_t f0, size_t f1);
/* The output transform y (y_part) on AVX-512, as the pool's parts over
 * filters; the same bits. */
void nnt_wino_y_part_avx512(void *arg, size_t f0, size_t f1);
/* The same three on AVX2 (cpu_winograd_avx2.c), 8 tiles at a time; the
 * same bits. Only where nnt_cpu_vec_avx2(). */
void nnt_wino_v_part_avx2(void *arg, size_t c0, size_t c1);
void nnt_wino_dyt_part_avx2(void *arg, size_t f0, size_t f1);
void nnt_wino_y_part_avx2(void *arg, size_t f0, size_t f1);

#endif
