/* The transform loops of cpu_winograd4.c, included there once per code
 * path: NL(name) gives each copy its own names, and the includer sets the
 * target (plain x86-64, AVX2 or AVX-512) around the include. No include
 * guard: it is meant to be included more than once. ISO C with no
 * contraction into fused multiply-adds: every copy gives the same bits.
 * The AVX-512 copy (W4_LOOPS_AVX512 defined) gathers a run's inputs with
 * intrinsics instead (gather6e): data movement only, the same values.
 * The arrays are restrict parameters: gcc vectorizes a loop over them
 * without checking them for overlap (restrict on local pointers it does
 * not honour, and twelve arrays pass its limit of ten checks). */

/* B^T down six rows d0..d5 into o0..o5 (see bt6 in cpu_winograd4.c). */
static void NL(bt6_loop)(size_t n, const float *restrict d0, const float *restrict d1,
                         const float *restrict d2, const float *restrict d3,
                         const float *restrict d4, const float *restrict d5,
                         float *restrict o0, float *restrict o1, float *restrict o2,
                         float *restrict o3, float *restrict o4, float *restrict o5) {
  for (size_t q = 0; q < n; q++) {
    float a = d4[q] - 4.0f * d2[q], b = d3[q] - 4.0f * d1[q];
    float c = d4[q] - d2[q], e = 2.0f * (d3[q] - d1[q]);
    o0[q] = 4.0f * d0[q] - 5.0f * d2[q] + d4[q];
    o1[q] = a + b;
    o2[q] = a - b;
    o3[q] = c + e;
    o4[q] = c - e;
    o5[q] = 4.0f * d1[q] - 5.0f * d3[q] + d5[q];
  }
}

#ifndef W4_LOOPS_AVX512
/* Columns 4q .. 4q + 5 of row for tiles q in [0, n) into d0..d5 (the
 * inner tiles of a run: no edge). */
static void NL(gather6)(size_t n, const float *restrict row, float *restrict d0,
                        float *restrict d1, float *restrict d2, float *restrict d3,
                        float *restrict d4, float *restrict d5) {
  for (size_t q = 0; q < n; q++) {
    d0[q] = row[4 * q], d1[q] = row[4 * q + 1], d2[q] = row[4 * q + 2];
    d3[q] = row[4 * q + 3], d4[q] = row[4 * q + 4], d5[q] = row[4 * q + 5];
  }
}
#endif

/* A run's six rows of inputs (w4_span) for tiles q in [0, n): column p
 * of tile q in row r into d[(6 r + p) ld + q], zeros outside the image. */
#ifdef W4_LOOPS_AVX512
/* The lanes k of a load from column c with c + k in [lo, hi). */
static __mmask16 NL(lanes)(long lo, long hi, long c) {
  long a = lo - c, e = hi - c;
  a = a < 0 ? 0 : a > 16 ? 16 : a;
  e = e < 0 ? 0 : e > 16 ? 16 : e;
  return (__mmask16)(((1u << e) - 1) & ~((1u << a) - 1));
}

/* The permutes that pick columns 0, 1, 2, 3 of eight tiles (4 apart)
 * from two registers of 16 columns. */
static void NL(pick4)(__m512i at[4]) {
  at[0] = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
  for (int p = 1; p < 4; p++)
    at[p] = _mm512_add_epi32(at[0], _mm512_set1_epi32(p));
}

/* np of those columns of r0:r1 into o, o + ld, ..., the lanes of out. */
static void NL(put)(float *o, size_t ld, __mmask16 out, __m512 r0, __m512 r1,
                    const __m512i at[4], int np) {
  for (int p = 0; p < np; p++)
    _mm512_mask_storeu_ps(o + p * ld, out, _mm512_permutex2var_ps(r0, at[p], r1));
}

/* Eight tiles a step: their 34 columns in three masked loads (lanes
 * outside [lo, hi) read as zeros and touch no memory), columns p, p + 4,
 * ... picked by one two-register permute each (p + 4 from the loads moved
 * along by four lanes), and eight lanes stored. */
static void NL(gather6e)(size_t n, const w4_span *sp, float *d, size_t ld) {
  __m512i at[4];
  NL(pick4)(at);
  __mmask16 in[3 * ((4 * NNT_WINO4_MAX_TILES + 47) / 32)];
  for (size_t q = 0, k = 0; q < n; q += 8) /* the loads' masks, the same for every row */
    for (int b = 0; b < 3; b++, k++)
      in[k] = NL(lanes)(sp->lo, sp->hi, 4 * (long)q + 16 * b);
  for (int r = 0; r < 6; r++) {
    long iy = sp->y0 + r;
    float *dr = d + (size_t)(6 * r) * ld;
    if (iy < 0 || iy >= (long)sp->h) {
      for (int p = 0; p < 6; p++)
        memset(dr + p * ld, 0, n * sizeof *dr);
      continue;
    }
    /* the address by integers: column x0 may lie before the row */
    uintptr_t row = (uintptr_t)(sp->plane + (size_t)iy * sp->w) + (uintptr_t)(sp->x0 * 4);
    for (size_t q = 0, k = 0; q < n; q += 8, k += 3) {
      __mmask16 out = (__mmask16)(n - q < 8 ? (1u << (n - q)) - 1 : 0xff);
      __m512 r0 = _mm512_maskz_loadu_ps(in[k], (const float *)(row + 16 * q));
      __m512 r1 = _mm512_maskz_loadu_ps(in[k + 1], (const float *)(row + 16 * q + 64));
      __m512 r2 = _mm512_maskz_loadu_ps(in[k + 2], (const float *)(row + 16 * q + 128));
      __m512 s0 = _mm512_castsi512_ps(
          _mm512_alignr_epi32(_mm512_castps_si512(r1), _mm512_castps_si512(r0), 4));
      __m512 s1 = _mm512_castsi512_ps(
          _mm512_alignr_epi32(_mm512_castps_si512(r2), _mm512_castps_si512(r1), 4));
      NL(put)(dr + q, ld, out, r0, r1, at, 4);
      NL(put)(dr + q + 4 * ld, ld, out, s0, s1, at, 2);
    }
  }
}
#else
/* Each row: gather6 from the row where the whole run lies inside it,
 * else from the row copied into a zero-padded one. */
static void NL(gather6e)(size_t n, const w4_span *sp, float *d, size_t ld) {
  size_t cols = 4 * n + 2;
  float pad[4 * NNT_WINO4_MAX_TILES + 2];
  for (int r = 0; r < 6; r++) {
    long iy = sp->y0 + r;
    const float *row = iy >= 0 && iy < (long)sp->h ? sp->plane + (size_t)iy * sp->w : NULL;
    const float *src = pad;
    float *dr = d + (size_t)(6 * r) * ld;
    if (row && sp->lo == 0 && sp->hi == (long)cols) {
      src = row + sp->x0;
    } else {
      memset(pad, 0, cols * sizeof *pad);
      if (row && sp->hi > sp->lo)
        memcpy(pad + sp->lo, row + sp->x0 + sp->lo, (size_t)(sp->hi - sp->lo) * sizeof *pad);
    }
    NL(gather6)(n, src, dr, dr + ld, dr + 2 * ld, dr + 3 * ld, dr + 4 * ld, dr + 5 * ld);
  }
}
#endif

/* Row i of n tiles' 4x4 outputs (o0..o3 their columns) plus bias into
 * 4 n values of y. */
static void NL(scatter4)(size_t n, const float *restrict o0, const float *restrict o1,
                         const float *restrict o2, const float *restrict o3, float bias,
                         float *restrict y) {
  for (size_t q = 0; q < n; q++) {
    y[4 * q] = o0[q] + bias, y[4 * q + 1] = o1[q] + bias;
    y[4 * q + 2] = o2[q] + bias, y[4 * q + 3] = o3[q] + bias;
  }
}

/* A^T down six rows m0..m5 into o0..o3 (see at6). */
static void NL(at6_loop)(size_t n, const float *restrict m0, const float *restrict m1,
                         const float *restrict m2, const float *restrict m3,
                         const float *restrict m4, const float *restrict m5,
                         float *restrict o0, float *restrict o1, float *restrict o2,
                         float *restrict o3) {
  for (size_t q = 0; q < n; q++) {
    float s12 = m1[q] + m2[q], d12 = m1[q] - m2[q];
    float s34 = m3[q] + m4[q], d34 = m3[q] - m4[q];
    o0[q] = m0[q] + s12 + s34;
    o1[q] = d12 + 2.0f * d34;
    o2[q] = s12 + 4.0f * s34;
    o3[q] = d12 + 8.0f * d34 + m5[q];
  }
}

/* A down four rows d0..d3 into six o0..o5 (see a4 in cpu_winograd4.c). */
static void NL(a4_loop)(size_t n, const float *restrict d0, const float *restrict d1,
                        const float *restrict d2, const float *restrict d3, float *restrict o0,
                        float *restrict o1, float *restrict o2, float *restrict o3,
                        float *restrict o4, float *restrict o5) {
  for (size_t q = 0; q < n; q++) {
    float s02 = d0[q] + d2[q], s13 = d1[q] + d3[q];
    float t02 = d0[q] + 4.0f * d2[q], t13 = 2.0f * d1[q] + 8.0f * d3[q];
    o0[q] = d0[q];
    o1[q] = s02 + s13;
    o2[q] = s02 - s13;
    o3[q] = t02 + t13;
    o4[q] = t02 - t13;
    o5[q] = d3[q];
  }
}

#ifndef W4_LOOPS_AVX512
/* Columns 4q .. 4q + 3 of row for tiles q in [0, n) into d0..d3 (the
 * inner tiles of a run of dY: no edge). */
static void NL(gather4)(size_t n, const float *restrict row, float *restrict d0,
                        float *restrict d1, float *restrict d2, float *restrict d3) {
  for (size_t q = 0; q < n; q++) {
    d0[q] = row[4 * q], d1[q] = row[4 * q + 1];
    d2[q] = row[4 * q + 2], d3[q] = row[4 * q + 3];
  }
}
#endif

/* A run's four rows of dY (w4_span, lo 0) for tiles q in [0, n): column p
 * of tile q in row r into d[(4 r + p) ld + q], zeros past the output's
 * edges. */
#ifdef W4_LOOPS_AVX512
/* Eight tiles a step: two masked loads, one permute a column. */
static void NL(gather4e)(size_t n, const w4_span *sp, float *d, size_t ld) {
  __m512i at[4];
  NL(pick4)(at);
  for (int r = 0; r < 4; r++) {
    long iy = sp->y0 + r;
    float *dr = d + (size_t)(4 * r) * ld;
    if (iy >= (long)sp->h) {
      for (int p = 0; p < 4; p++)
        memset(dr + p * ld, 0, n * sizeof *dr);
      continue;
    }
    const float *row = sp->plane + (size_t)iy * sp->w + sp->x0;
    for (size_t q = 0; q < n; q += 8) {
      __mmask16 out = (__mmask16)(n - q < 8 ? (1u << (n - q)) - 1 : 0xff);
      __m512 r0 = _mm512_maskz_loadu_ps(NL(lanes)(0, sp->hi, 4 * (long)q), row + 4 * q);
      __m512 r1 = _mm512_maskz_loadu_ps(NL(lanes)(0, sp->hi, 4 * (long)q + 16), row + 4 * q + 16);
      NL(put)(dr + q, ld, out, r0, r1, at, 4);
    }
  }
}
#else
/* Each row: gather4 for the tiles whose four columns lie inside, then
 * the rest one by one. */
static void NL(gather4e)(size_t n, const w4_span *sp, float *d, size_t ld) {
  size_t full = (size_t)sp->hi / 4 < n ? (size_t)sp->hi / 4 : n;
  for (int r = 0; r < 4; r++) {
    long iy = sp->y0 + r;
    float *dr = d + (size_t)(4 * r) * ld;
    int in = iy < (long)sp->h;
    const float *row = in ? sp->plane + (size_t)iy * sp->w + sp->x0 : NULL;
    if (in)
      NL(gather4)(full, row, dr, dr + ld, dr + 2 * ld, dr + 3 * ld);
    for (size_t q = in ? full : 0; q < n; q++)
      for (size_t c = 0; c < 4; c++)
        dr[c * ld + q] = in && (long)(4 * q + c) < sp->hi ? row[4 * q + c] : 0.0f;
  }
}
#endif

/* G down three rows a, b, c into six o0..o5 (see g3 in cpu_winograd4.c). */
static void NL(g3_loop)(size_t n, const float *restrict a, const float *restrict b,
                        const float *restrict c, float *restrict o0, float *restrict o1,
                        float *restrict o2, float *restrict o3, float *restrict o4,
                        float *restrict o5) {
  for (size_t q = 0; q < n; q++) {
    float s = a[q] + c[q];
    o0[q] = 0.25f * a[q];
    o1[q] = (-1.0f / 6) * (s + b[q]);
    o2[q] = (-1.0f / 6) * (s - b[q]);
    o3[q] = (1.0f / 24) * a[q] + (1.0f / 12) * b[q] + (1.0f / 6) * c[q];
    o4[q] = (1.0f / 24) * a[q] - (1.0f / 12) * b[q] + (1.0f / 6) * c[q];
    o5[q] = c[q];
  }
}
