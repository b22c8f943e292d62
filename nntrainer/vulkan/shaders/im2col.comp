// im2col of n images side by side (n in p.k):
// col[(c kh + a) kw + b][img oh ow + oy ow + ox] = x[img][c][iy][ix] (0 in
// the padding); image img starts at img * G_CS channels (a block of G_C
// channels of G_CS). b0 = x, b1 = col. The work groups' y is the row of
// col ((c, a, b): its divisions once per group) and x runs along the row,
// each dimension looping where the device has fewer groups than the rows
// or the row's length needs: an invocation per element divides only to
// find its image and output position (integer division is slow on a GPU:
// the one-dimensional version, seven divisions an element, was bound by
// them).
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
#include "window.glsl"
void main() {
  uint plane = G_OH * G_OW, ld = plane * p.k, rows = G_C * G_KH * G_KW;
  for (uint r = gl_WorkGroupID.y; r < rows; r += gl_NumWorkGroups.y) {
    uint b = r % G_KW, a = (r / G_KW) % G_KH, c = r / (G_KW * G_KH);
    int dy = int(a * G_DH) - int(G_PT), dx = int(b * G_DW) - int(G_PL);
    for (uint q = gl_GlobalInvocationID.x; q < ld; q += gl_NumWorkGroups.x * 256u) {
      uint img = q / plane, s = q - img * plane;
      uint oy = s / G_OW, ox = s - oy * G_OW;
      int iy = int(oy * G_SH) + dy, ix = int(ox * G_SW) + dx;
      float v = 0.0;
      if (iy >= 0 && iy < int(G_H) && ix >= 0 && ix < int(G_W))
        v = b0.v[p.o0 + ((img * G_CS + c) * G_H + uint(iy)) * G_W + uint(ix)];
      b1.v[p.o1 + r * ld + q] = v;
    }
  }
}
