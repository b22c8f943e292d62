/* The transform loops of cpu_winograd4.c, included there once per code
 * path: NL(name) gives each copy its own names, and the includer sets the
 * target (plain x86-64, AVX2 or AVX-512) around the include. No include
 * guard: it is meant to be included more than once. ISO C with no
 * contraction into fused multiply-adds: every copy gives the same bits.
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

/* Columns 4q .. 4q + 3 of row for tiles q in [0, n) into d0..d3 (the
 * inner tiles of a run of dY: no edge). */
static void NL(gather4)(size_t n, const float *restrict row, float *restrict d0,
                        float *restrict d1, float *restrict d2, float *restrict d3) {
  for (size_t q = 0; q < n; q++) {
    d0[q] = row[4 * q], d1[q] = row[4 * q + 1];
    d2[q] = row[4 * q + 2], d3[q] = row[4 * q + 3];
  }
}

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
