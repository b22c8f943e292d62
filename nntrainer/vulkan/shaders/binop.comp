// y = a op b: b0 = a, b1 = b, b2 = y; i0: 0 add, 1 sub, 2 mul,
// 3 (a - b) * f0 (the cross-entropy and mse derivatives).
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
void main() {
  uint i = flat_id();
  if (i >= p.n)
    return;
  float a = b0.v[p.o0 + i], b = b1.v[p.o1 + i], y;
  if (p.i0 == 0u)
    y = a + b;
  else if (p.i0 == 1u)
    y = a - b;
  else if (p.i0 == 2u)
    y = a * b;
  else
    y = p.f0 * (a - b);
  b2.v[p.o2 + i] = y;
}
