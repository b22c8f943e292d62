// A matrix between two row strides: y[r ldy + c] = x[r ldx + c] for the
// n = rows cols elements; cols, i0 = ldx, i1 = ldy. b0 = x, b1 = y.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
void main() {
  uint q = flat_id();
  if (q >= p.n)
    return;
  uint r = q / p.cols, c = q % p.cols;
  b1.v[p.o1 + r * p.i1 + c] = b0.v[p.o0 + r * p.i0 + c];
}
