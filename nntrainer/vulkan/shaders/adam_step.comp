// Adam: b0 = g, b1 = m, b2 = v, b3 = w; f0 = lr_t, f1 = b1, f2 = b2, f3 = eps.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
void main() {
  uint i = flat_id();
  if (i >= p.n)
    return;
  float g = b0.v[p.o0 + i];
  float m = p.f1 * b1.v[p.o1 + i] + (1.0 - p.f1) * g;
  float v = p.f2 * b2.v[p.o2 + i] + (1.0 - p.f2) * g * g;
  b1.v[p.o1 + i] = m;
  b2.v[p.o2 + i] = v;
  b3.v[p.o3 + i] -= p.f0 * m / (sqrt(v) + p.f3);
}
