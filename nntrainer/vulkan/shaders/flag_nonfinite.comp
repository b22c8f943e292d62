// b1[o1] = 1 and (i0 = 1) b2[o2] = 1 when one of b0[o0 .. o0 + n) is NaN or
// infinite (flag_nonfinite); every invocation that finds one writes the same
// value, so the race is harmless.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
void main() {
  uint i = flat_id();
  if (i >= p.n)
    return;
  float x = b0.v[p.o0 + i];
  if (isnan(x) || isinf(x)) {
    b1.v[p.o1] = 1.0;
    if (p.i0 == 1u)
      b2.v[p.o2] = 1.0;
  }
}
