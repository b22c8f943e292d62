// y = x (copy): b0 = x, b1 = y.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
void main() {
  uint i = flat_id();
  if (i < p.n)
    b1.v[p.o1 + i] = b0.v[p.o0 + i];
}
