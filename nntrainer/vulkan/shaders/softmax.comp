// Softmax over rows of length cols, one invocation per row.
// i0 = 0 forward: b0 = x, b1 = y (y may alias x).
// i0 = 1 backward: dx = y (dy - sum(dy y)): b0 = y, b1 = dy, b2 = dx.
#version 450
layout(local_size_x = 64) in;
#include "common.glsl"
void main() {
  uint r = flat_id();
  if (r >= p.rows)
    return;
  uint base = r * p.cols;
  if (p.i0 == 0u) {
    float mx = b0.v[p.o0 + base];
    for (uint c = 1u; c < p.cols; c++)
      mx = max(mx, b0.v[p.o0 + base + c]);
    float s = 0.0;
    for (uint c = 0u; c < p.cols; c++) {
      float e = exp(b0.v[p.o0 + base + c] - mx);
      b1.v[p.o1 + base + c] = e;
      s += e;
    }
    float inv = 1.0 / s;
    for (uint c = 0u; c < p.cols; c++)
      b1.v[p.o1 + base + c] *= inv;
  } else {
    float s = 0.0;
    for (uint c = 0u; c < p.cols; c++)
      s += b1.v[p.o1 + base + c] * b0.v[p.o0 + base + c];
    for (uint c = 0u; c < p.cols; c++) {
      float y = b0.v[p.o0 + base + c];
      b2.v[p.o2 + base + c] = y * (b1.v[p.o1 + base + c] - s);
    }
  }
}
