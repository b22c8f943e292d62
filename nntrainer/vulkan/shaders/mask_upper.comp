// The causal mask of attention: over mats matrices [rows, cols] one after
// the other, y[i][j] = v where j > i. One invocation per element (n =
// mats * rows * cols); b0 = y, f0 = v.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
void main() {
  uint e = flat_id();
  if (e >= p.n)
    return;
  uint j = e % p.cols, i = (e / p.cols) % p.rows;
  if (j > i)
    b0.v[p.o0 + e] = p.f0;
}
