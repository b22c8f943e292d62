// The rows whose first largest value in y (b0) and in label (b1) sit in the
// same column, counted into b2[o2] as a float. One work group.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
shared uint part[256];
void main() {
  uint t = gl_LocalInvocationID.x, ok = 0u;
  for (uint r = t; r < p.rows; r += 256u) {
    uint ia = 0u, ib = 0u, base = r * p.cols;
    for (uint c = 1u; c < p.cols; c++) {
      if (b0.v[p.o0 + base + c] > b0.v[p.o0 + base + ia])
        ia = c;
      if (b1.v[p.o1 + base + c] > b1.v[p.o1 + base + ib])
        ib = c;
    }
    ok += ia == ib ? 1u : 0u;
  }
  part[t] = ok;
  barrier();
  for (uint h = 128u; h > 0u; h >>= 1) {
    if (t < h)
      part[t] += part[t + h];
    barrier();
  }
  if (t == 0u)
    b2.v[p.o2] = float(part[0]);
}
