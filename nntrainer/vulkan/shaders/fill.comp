// y = v (fill): b0 = y, f0 = v.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
void main() {
  uint i = flat_id();
  if (i < p.n)
    b0.v[p.o0 + i] = p.f0;
}
