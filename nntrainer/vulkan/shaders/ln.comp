// Layer normalization over rows of length cols (ln_fwd, ln_bwd); sums in
// float, in order (the CPU sums in double).
// i0 = 0 forward, one invocation per row: mean, invstd = 1 / sqrt(biased
//   var + f0) (written when i1 bit 0), y = (x - mean) invstd gamma + beta;
//   b0 = x, b1 = gamma, b2 = beta, b3 = mean, b4 = invstd, b5 = y.
// i0 = 1 backward, one invocation per column: dgamma = sum_r dy xhat
//   (i1 bit 0), dbeta = sum_r dy (bit 1).
// i0 = 2 backward, one invocation per row: dx = invstd (g - mean(g) -
//   xhat mean(g xhat)), g = gamma dy.
//   Backward: b0 = x, b1 = dy, b2 = mean, b3 = invstd, b4 = gamma, b5 = dx,
//   b6 = dgamma, b7 = dbeta.
#version 450
layout(local_size_x = 64) in;
#include "common.glsl"
void main() {
  uint j = flat_id();
  uint C = p.cols;
  if (p.i0 == 1u) {
    if (j >= C)
      return;
    float sg = 0.0, sb = 0.0;
    for (uint r = 0u; r < p.rows; r++) {
      float d = b1.v[p.o1 + r * C + j];
      sg += d * ((b0.v[p.o0 + r * C + j] - b2.v[p.o2 + r]) * b3.v[p.o3 + r]);
      sb += d;
    }
    if ((p.i1 & 1u) != 0u)
      b6.v[p.o6 + j] = sg;
    if ((p.i1 & 2u) != 0u)
      b7.v[p.o7 + j] = sb;
    return;
  }
  if (j >= p.rows)
    return;
  uint x0 = j * C;
  if (p.i0 == 0u) {
    float s = 0.0;
    for (uint c = 0u; c < C; c++)
      s += b0.v[p.o0 + x0 + c];
    float mu = s / float(C), v = 0.0;
    for (uint c = 0u; c < C; c++) {
      float d = b0.v[p.o0 + x0 + c] - mu;
      v += d * d;
    }
    float is = 1.0 / sqrt(v / float(C) + p.f0);
    if ((p.i1 & 1u) != 0u) {
      b3.v[p.o3 + j] = mu;
      b4.v[p.o4 + j] = is;
    }
    for (uint c = 0u; c < C; c++)
      b5.v[p.o5 + x0 + c] = (b0.v[p.o0 + x0 + c] - mu) * is * b1.v[p.o1 + c] + b2.v[p.o2 + c];
    return;
  }
  float mu = b2.v[p.o2 + j], is = b3.v[p.o3 + j], s1 = 0.0, s2 = 0.0;
  for (uint c = 0u; c < C; c++) {
    float g = b1.v[p.o1 + x0 + c] * b4.v[p.o4 + c];
    s1 += g;
    s2 += g * ((b0.v[p.o0 + x0 + c] - mu) * is);
  }
  float m1 = s1 / float(C), m2 = s2 / float(C);
  for (uint c = 0u; c < C; c++) {
    float g = b1.v[p.o1 + x0 + c] * b4.v[p.o4 + c];
    float xh = (b0.v[p.o0 + x0 + c] - mu) * is;
    b5.v[p.o5 + x0 + c] = is * (g - m1 - xh * m2);
  }
}
