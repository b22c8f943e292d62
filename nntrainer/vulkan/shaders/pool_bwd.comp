// Pooling backward as a gather, one invocation per element of dx (which
// it overwrites): the outputs whose window holds it, in increasing output
// order as the CPU adds them; k = 0 max takes dy where idx names this
// position, k = 1 average takes dy * f0. b0 = dy, b1 = idx, b2 = dx.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
#include "window.glsl"
void main() {
  uint i = flat_id();
  if (i >= p.n)
    return;
  uint in_plane = G_H * G_W, q = i % in_plane, pl = i / in_plane;
  int iy = int(q / G_W), ix = int(q % G_W);
  uint obase = pl * G_OH * G_OW;
  precise float s = 0.0; // no fused multiply-add: the CPU's rounding
  for (uint a = G_KH; a-- > 0u;)
    for (uint b = G_KW; b-- > 0u;) {
      uint oy, ox;
      if (!tap_out(iy, ix, a, b, oy, ox))
        continue;
      uint o = obase + oy * G_OW + ox;
      if (p.k == 0u) {
        if (b1.v[p.o1 + o] == float(q))
          s += b0.v[p.o0 + o];
      } else {
        s += b0.v[p.o0 + o] * p.f0;
      }
    }
  b2.v[p.o2 + i] = s;
}
