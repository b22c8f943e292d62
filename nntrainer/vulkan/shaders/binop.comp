// y = a op b: b0 = a, b1 = b, b2 = y; i0: 0 add, 1 sub, 2 mul,
// 3 (a - b) * f0 (the cross-entropy and mse derivatives), 4 (sigmoid(a) -
// b) * f0 (the sigmoid cross-entropy's).
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
  else if (p.i0 == 3u)
    y = p.f0 * (a - b);
  else {
    float e = exp(-abs(a)), sg = a >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
    y = (sg - b) * p.f0;
  }
  b2.v[p.o2 + i] = y;
}
