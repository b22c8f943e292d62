// Batch normalization at inference, element-wise over [outer, ch, inner]
// (cols = ch, rows = inner): y = x g + (beta - mean g), g = gamma /
// sqrt(var + f0). b0 = x, b1 = mean, b2 = var, b3 = gamma, b4 = beta, b5 = y.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
void main() {
  uint i = flat_id();
  if (i >= p.n)
    return;
  uint c = (i / p.rows) % p.cols;
  float is = 1.0 / sqrt(b2.v[p.o2 + c] + p.f0), g = b3.v[p.o3 + c] * is;
  float b = b4.v[p.o4 + c] - b1.v[p.o1 + c] * g;
  b5.v[p.o5 + i] = b0.v[p.o0 + i] * g + b;
}
