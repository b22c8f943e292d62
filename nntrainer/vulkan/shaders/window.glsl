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

// The output position whose window tap (a, b) reads input (iy, ix), or
// false when there is none (not on the stride grid or outside the output).
bool tap_out(int iy, int ix, uint a, uint b, out uint oy, out uint ox) {
  int ty = iy + int(G_PT) - int(a * G_DH), tx = ix + int(G_PL) - int(b * G_DW);
  if (ty < 0 || tx < 0 || (uint(ty) % G_SH) != 0u || (uint(tx) % G_SW) != 0u)
    return false;
  oy = uint(ty) / G_SH;
  ox = uint(tx) / G_SW;
  return oy < G_OH && ox < G_OW;
}
