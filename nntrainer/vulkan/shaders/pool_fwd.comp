// Pooling forward, one invocation per output of the n * c planes: k = 0
// max (the first largest value in tap order, its position iy * w + ix in
// idx, -1 and 0 for a window of padding only), k = 1 average (the sum
// times f0 = 1 / (kh kw)). b0 = x, b1 = y, b2 = idx.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
#include "window.glsl"
void main() {
  uint i = flat_id();
  if (i >= p.n)
    return;
  uint plane = G_OH * G_OW, q = i % plane, pl = i / plane;
  uint oy = q / G_OW, ox = q % G_OW;
  uint base = p.o0 + pl * G_H * G_W;
  float best = -3.402823466e+38, sum = 0.0;
  int at = -1;
  for (uint a = 0u; a < G_KH; a++) {
    int iy = int(oy * G_SH) - int(G_PT) + int(a * G_DH);
    if (iy < 0 || iy >= int(G_H))
      continue;
    for (uint b = 0u; b < G_KW; b++) {
      int ix = int(ox * G_SW) - int(G_PL) + int(b * G_DW);
      if (ix < 0 || ix >= int(G_W))
        continue;
      int pos = iy * int(G_W) + ix;
      float v = b0.v[base + uint(pos)];
      sum += v;
      if (v > best) {
        best = v;
        at = pos;
      }
    }
  }
  if (p.k == 0u) {
    b1.v[p.o1 + i] = at < 0 ? 0.0 : best;
    b2.v[p.o2 + i] = float(at);
  } else {
    b1.v[p.o1 + i] = sum * p.f0;
  }
}
