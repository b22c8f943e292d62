// y = a / b (div): b0 = a, b1 = b, b2 = y (may alias a or b exactly).
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
void main() {
  uint i = flat_id();
  if (i >= p.n)
    return;
  b2.v[p.o2 + i] = b0.v[p.o0 + i] / b1.v[p.o1 + i];
}
