// y += a * x (axpy): b0 = x, b1 = y, f0 = a. With i0 = 1, w -= lr * g
// (sgd_step: b0 = g, b1 = w, f0 = lr), the CPU's exact expression, below the
// smallest normal float stored as 0 (kernels.h); i1 = 1: nothing when the
// skip flag b2[o2] is not 0.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
void main() {
  uint i = flat_id();
  if (i >= p.n || (p.i1 == 1u && b2.v[p.o2] != 0.0))
    return;
  if (p.i0 == 1u) {
    float w = b1.v[p.o1 + i] - p.f0 * b0.v[p.o0 + i];
    b1.v[p.o1 + i] = abs(w) < 1.17549435e-38 ? 0.0 : w;
  } else
    b1.v[p.o1 + i] += p.f0 * b0.v[p.o0 + i];
}
