// i0 = 0: out[c] = beta out[c] + sum_r x[r][c] (sum_rows), one invocation
// per column; i0 = 1: out[r] = sum_c x[r][c] + beta out[r] (sum_cols), one
// per row. beta == 0 does not read out. b0 = x, b1 = out, f0 = beta.
#version 450
layout(local_size_x = 64) in;
#include "common.glsl"
void main() {
  uint j = flat_id();
  if (p.i0 == 0u) {
    if (j >= p.cols)
      return;
    float s = p.f0 == 0.0 ? 0.0 : p.f0 * b1.v[p.o1 + j];
    for (uint r = 0u; r < p.rows; r++)
      s += b0.v[p.o0 + r * p.cols + j];
    b1.v[p.o1 + j] = s;
  } else {
    if (j >= p.rows)
      return;
    float s = 0.0;
    for (uint c = 0u; c < p.cols; c++)
      s += b0.v[p.o0 + j * p.cols + c];
    b1.v[p.o1 + j] = s + (p.f0 == 0.0 ? 0.0 : p.f0 * b1.v[p.o1 + j]);
  }
}
