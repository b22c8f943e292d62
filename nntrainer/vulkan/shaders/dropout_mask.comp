// Dropout mask: mask[i] = u_i < f0 ? 0 : f1 (f1 = 1 / (1 - rate)), u_i =
// nnt_philox_uniform_at(key, stream, i) of nntrainer/philox.h computed the
// same way: Philox-4x32-10 at counter (stream, i / 4), word i % 4, its top
// 24 bits times 2^-24. i0, i1 = key (low, high word); i2, i3 = stream.
// b0 = mask.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
void main() {
  uint i = flat_id();
  if (i >= p.n)
    return;
  uint c0 = i >> 2, c1 = 0u, c2 = p.i2, c3 = p.i3, k0 = p.i0, k1 = p.i1;
  for (int r = 0; r < 10; r++) {
    uint hi0, lo0, hi1, lo1;
    umulExtended(0xD2511F53u, c0, hi0, lo0);
    umulExtended(0xCD9E8D57u, c2, hi1, lo1);
    uint n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c1 = lo1;
    c3 = lo0;
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  uint w = i & 3u;
  uint bits = w == 0u ? c0 : w == 1u ? c1 : w == 2u ? c2 : c3;
  float u = float(bits >> 8) * (1.0 / 16777216.0);
  b0.v[p.o0 + i] = u < p.f0 ? 0.0 : p.f1;
}
