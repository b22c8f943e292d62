// The second pass of split-k SGEMM (gemm_tile.glsl with SPLITK): one
// invocation per element of C sums the i0 partial products of
// b0[o0 + z n + e] (z < i0, n = rows cols, e = row cols + col) and writes
// C = alpha sum + beta C into b1 (o1, ldc i2; beta == 0: C is not read);
// f0 = alpha, f1 = beta.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
void main() {
  uint e = flat_id();
  if (e >= p.n)
    return;
  float s = 0.0;
  for (uint z = 0u; z < p.i0; z++)
    s += b0.v[p.o0 + z * p.n + e];
  uint o = p.o1 + (e / p.cols) * p.i2 + e % p.cols;
  b1.v[o] = p.f1 == 0.0 ? p.f0 * s : p.f0 * s + p.f1 * b1.v[o];
}
