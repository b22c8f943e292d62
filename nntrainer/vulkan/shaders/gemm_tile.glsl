// SGEMM, register-blocked: C = alpha op(A) op(B) + beta C, row-major.
// Compiled once per variant with -D BM, BN (the work group's tile of C),
// BK (the depth of one shared-memory slice), TM, TN (each invocation's
// block of C, held in registers) and SPLITK (write partial sums; see
// below): CMakeLists.txt lists the variants, vk_gemm.c picks one.
// b0 = A, b1 = B, b2 = C; rows = m, cols = n, k; i0 = lda, i1 = ldb,
// i2 = ldc, i3 = trans_a | trans_b << 1; f0 = alpha, f1 = beta (0: C is
// not read); k == 0 gives beta C (0 when beta is 0).
// SPLITK: the y work groups are (slice, tile row) pairs, u1 tile rows per
// slice; slice z sums l in [z u0, min(k, (z + 1) u0)) and writes its raw
// sum to b2[o2 + z m n + row n + col] (every element, so the scratch needs
// no clearing); gemm_reduce.comp applies alpha and beta.
//
// Layout: the slices are stored k-major as vec4s, As[l][i / 4][i % 4] and
// Bs[l][j / 4][j % 4], padded so that the transposing stores do not collide
// in a bank. Invocation (tx, ty) owns rows 4 (ty + TY g) + 0..3 and columns
// 4 (tx + TX g) + 0..3 (groups of 4 interleaved across the tile, TM and TN
// multiples of 4), so the inner loop reads whole vec4s, neighbouring
// invocations read neighbouring vec4s of Bs (no bank conflicts) and a warp
// reads one or two vec4s of As (broadcast); the final stores run along a
// row of C. The global
// loads run along the contiguous dimension of each operand (l for a plain
// A and a transposed B, i or j otherwise), so a warp reads whole segments,
// and the next slice's loads are issued before the current slice's
// products (held in registers until its turn): on an H100 that took
// SGEMM from 11.6-17.6 to 16.9-27.7 TFLOP/s (docs/performance.md).
#version 450
// [[unroll]]: the register arrays are indexed by loop counters only, so
// the loops over them must unroll for acc, ra and rb to stay in registers
#extension GL_EXT_control_flow_attributes : require
#define TX (BN / TN)
#define TY (BM / TM)
#define NT (TX * TY)
#if (BM * BK) % NT != 0 || (BN * BK) % NT != 0 || TM % 4 != 0 || TN % 4 != 0
#error "each invocation loads whole shares of a slice; TM and TN are multiples of 4"
#endif
#ifndef PAD
#define PAD 4
#endif
layout(local_size_x = NT) in;
#include "common.glsl"

shared vec4 As[BK][(BM + PAD) / 4];
shared vec4 Bs[BK][(BN + PAD) / 4];

// Where an invocation's share e of a slice lies: row i of A (column j of
// B) and depth l, along the operand's contiguous dimension (l for a plain
// A and a transposed B, i or j otherwise).
void a_slot(uint e, bool tra, out uint i, out uint l) {
  i = tra ? e % BM : e / BK;
  l = tra ? e / BM : e % BK;
}
void b_slot(uint e, bool trb, out uint j, out uint l) {
  j = trb ? e / BK : e % BN;
  l = trb ? e % BK : e / BN;
}

// The slices of A (BM x BK) and B (BK x BN) at depth k0 into registers,
// (BM BK) / NT and (BN BK) / NT values per invocation, zeros outside the
// matrices or past ke.
void load_slices(uint k0, uint ke, uint bm, uint bn, uint m, uint n, bool tra, bool trb,
                 uint lid, out float pa[BM * BK / NT], out float pb[BN * BK / NT]) {
  [[unroll]] for (uint q = 0u; q < BM * BK / NT; q++) {
    uint i, l;
    a_slot(lid + q * NT, tra, i, l);
    float a = 0.0;
    if (bm + i < m && k0 + l < ke)
      a = tra ? b0.v[p.o0 + (k0 + l) * p.i0 + bm + i] : b0.v[p.o0 + (bm + i) * p.i0 + k0 + l];
    pa[q] = a;
  }
  [[unroll]] for (uint q = 0u; q < BN * BK / NT; q++) {
    uint j, l;
    b_slot(lid + q * NT, trb, j, l);
    float b = 0.0;
    if (bn + j < n && k0 + l < ke)
      b = trb ? b1.v[p.o1 + (bn + j) * p.i1 + k0 + l] : b1.v[p.o1 + (k0 + l) * p.i1 + bn + j];
    pb[q] = b;
  }
}

void main() {
  uint lid = gl_LocalInvocationID.x;
  uint tx = lid % TX, ty = lid / TX;
  uint m = p.rows, n = p.cols;
  bool tra = (p.i3 & 1u) != 0u, trb = (p.i3 & 2u) != 0u;
#ifdef SPLITK
  uint z = gl_WorkGroupID.y / p.u1;
  uint bm = (gl_WorkGroupID.y % p.u1) * BM;
  uint kb = z * p.u0, ke = min(p.k, kb + p.u0);
#else
  uint bm = gl_WorkGroupID.y * BM;
  uint kb = 0u, ke = p.k;
#endif
  uint bn = gl_WorkGroupID.x * BN;

  float acc[TM][TN];
  [[unroll]] for (uint i = 0u; i < TM; i++)
    [[unroll]] for (uint j = 0u; j < TN; j++)
      acc[i][j] = 0.0;

  // The next slice's values are read from global memory into registers
  // while the current one is multiplied from shared memory, so the
  // loads' latency overlaps the arithmetic.
  float pa[BM * BK / NT], pb[BN * BK / NT];
  load_slices(kb, ke, bm, bn, m, n, tra, trb, lid, pa, pb);
  for (uint k0 = kb; k0 < ke; k0 += BK) {
    [[unroll]] for (uint q = 0u; q < BM * BK / NT; q++) {
      uint i, l;
      a_slot(lid + q * NT, tra, i, l);
      As[l][i >> 2][i & 3u] = pa[q];
    }
    [[unroll]] for (uint q = 0u; q < BN * BK / NT; q++) {
      uint j, l;
      b_slot(lid + q * NT, trb, j, l);
      Bs[l][j >> 2][j & 3u] = pb[q];
    }
    barrier();
    if (k0 + BK < ke)
      load_slices(k0 + BK, ke, bm, bn, m, n, tra, trb, lid, pa, pb);
    [[unroll]] for (uint l = 0u; l < BK; l++) {
      vec4 ra[TM / 4], rb[TN / 4];
      [[unroll]] for (uint g = 0u; g < TM / 4; g++)
        ra[g] = As[l][ty + TY * g];
      [[unroll]] for (uint g = 0u; g < TN / 4; g++)
        rb[g] = Bs[l][tx + TX * g];
      [[unroll]] for (uint i = 0u; i < TM; i++)
        [[unroll]] for (uint j = 0u; j < TN; j++)
          acc[i][j] = fma(ra[i >> 2][i & 3u], rb[j >> 2][j & 3u], acc[i][j]);
    }
    barrier();
  }

  [[unroll]] for (uint i = 0u; i < TM; i++) {
    uint row = bm + 4u * (ty + TY * (i >> 2)) + (i & 3u);
    if (row >= m)
      break;
    [[unroll]] for (uint j = 0u; j < TN; j++) {
      uint col = bn + 4u * (tx + TX * (j >> 2)) + (j & 3u);
      if (col >= n)
        break;
#ifdef SPLITK
      b2.v[p.o2 + z * m * n + row * n + col] = acc[i][j];
#else
      uint o = p.o2 + row * p.i2 + col;
      if (p.k == 0u)
        b2.v[o] = p.f1 == 0.0 ? 0.0 : p.f1 * b2.v[o];
      else
        b2.v[o] = p.f1 == 0.0 ? p.f0 * acc[i][j] : p.f0 * acc[i][j] + p.f1 * b2.v[o];
#endif
    }
  }
}
