// The window geometry (struct nnt_conv_geom) of im2col, col2im and pooling
// as vk_ops.c's window() packs it into the parameter block.
#define G_C p.rows
#define G_H p.i0
#define G_W p.i1
#define G_KH p.i2
#define G_KW p.i3
#define G_SH p.u0
#define G_SW p.u1
#define G_DH p.u2
#define G_DW p.u3
#define G_PT p.u4
#define G_PL p.u5
#define G_OH p.u6
#define G_OW p.u7
#define G_CS p.cols // im2col, col2im: channels per image of x, dx

// t / s where s divides t (false where it does not); strides 1 and 2 (the
// common ones: the branch is the same for every invocation) without an
// integer division, which is slow on a GPU.
bool on_grid(uint t, uint s, out uint q) {
  if (s == 1u) {
    q = t;
    return true;
  }
  if (s == 2u) {
    q = t >> 1;
    return (t & 1u) == 0u;
  }
  q = t / s;
  return q * s == t;
}

// The output position whose window tap (a, b) reads input (iy, ix), or
// false when there is none (not on the stride grid or outside the output).
bool tap_out(int iy, int ix, uint a, uint b, out uint oy, out uint ox) {
  int ty = iy + int(G_PT) - int(a * G_DH), tx = ix + int(G_PL) - int(b * G_DW);
  oy = 0u;
  ox = 0u;
  if (ty < 0 || tx < 0 || !on_grid(uint(ty), G_SH, oy) || !on_grid(uint(tx), G_SW, ox))
    return false;
  return oy < G_OH && ox < G_OW;
}
