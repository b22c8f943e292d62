// y *= a (scale): b0 = y, f0 = a. With i0 = 1 (clip_scale): s = sqrt(b1[o1]),
// y *= f0 / s when s > f0 (f0 = the largest norm), as the CPU computes it.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
void main() {
  uint i = flat_id();
  if (i >= p.n)
    return;
  if (p.i0 == 1u) {
    float s = sqrt(b1.v[p.o1]);
    if (s > p.f0)
      b0.v[p.o0 + i] *= p.f0 / s;
  } else {
    b0.v[p.o0 + i] *= p.f0;
  }
}
