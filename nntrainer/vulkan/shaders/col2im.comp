// col2im as a gather: each element of dx [n, c, h, w] (n in p.k) adds, in
// the CPU's order (tap a, then b), the columns of its image that read it;
// the columns of the n images lie side by side; image img of dx starts at
// img * G_CS channels (a block of G_C channels of G_CS). b0 = col, b1 = dx.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
#include "window.glsl"
void main() {
  uint i = flat_id();
  if (i >= p.n)
    return;
  uint ix = i % G_W, iy = (i / G_W) % G_H, c = (i / (G_W * G_H)) % G_C;
  uint img = i / (G_W * G_H * G_C);
  uint plane = G_OH * G_OW, ld = plane * p.k;
  uint at = p.o1 + ((img * G_CS + c) * G_H + iy) * G_W + ix;
  float s = b1.v[at];
  for (uint a = 0u; a < G_KH; a++)
    for (uint b = 0u; b < G_KW; b++) {
      uint oy, ox;
      if (tap_out(int(iy), int(ix), a, b, oy, ox))
        s += b0.v[p.o0 + ((c * G_KH + a) * G_KW + b) * ld + img * plane + oy * G_OW + ox];
    }
  b1.v[at] = s;
}
