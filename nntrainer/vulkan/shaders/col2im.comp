// col2im as a gather: each element of dx [c, h, w] adds, in the CPU's order
// (tap a, then b), the columns that read it. b0 = col, b1 = dx.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
#include "window.glsl"
void main() {
  uint i = flat_id();
  if (i >= p.n)
    return;
  uint ix = i % G_W, iy = (i / G_W) % G_H, c = i / (G_W * G_H);
  uint plane = G_OH * G_OW;
  float s = b1.v[p.o1 + i];
  for (uint a = 0u; a < G_KH; a++)
    for (uint b = 0u; b < G_KW; b++) {
      uint oy, ox;
      if (tap_out(int(iy), int(ix), a, b, oy, ox))
        s += b0.v[p.o0 + ((c * G_KH + a) * G_KW + b) * plane + oy * G_OW + ox];
    }
  b1.v[p.o1 + i] = s;
}
