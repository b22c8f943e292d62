// im2col of n images side by side (n in p.k):
// col[(c kh + a) kw + b][img oh ow + oy ow + ox] = x[img][c][iy][ix] (0 in
// the padding), one invocation per element of col; image img starts at
// img * G_CS channels (a block of G_C channels of G_CS). b0 = x, b1 = col.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
#include "window.glsl"
void main() {
  uint i = flat_id();
  if (i >= p.n)
    return;
  uint plane = G_OH * G_OW, ld = plane * p.k, q = i % ld, r = i / ld;
  uint img = q / plane;
  q = q % plane;
  uint oy = q / G_OW, ox = q % G_OW;
  uint b = r % G_KW, a = (r / G_KW) % G_KH, c = r / (G_KW * G_KH);
  int iy = int(oy * G_SH) - int(G_PT) + int(a * G_DH);
  int ix = int(ox * G_SW) - int(G_PL) + int(b * G_DW);
  float v = 0.0;
  if (iy >= 0 && iy < int(G_H) && ix >= 0 && ix < int(G_W))
    v = b0.v[p.o0 + ((img * G_CS + c) * G_H + uint(iy)) * G_W + uint(ix)];
  b1.v[p.o1 + i] = v;
}
