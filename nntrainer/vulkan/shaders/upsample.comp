// Nearest upsampling of [rows, h, w] by (kh, kw) (i0 = h, i1 = w,
// i2 = kh, i3 = kw). k = 0 forward, one invocation per element of y:
// y[r][i][j] = x[r][i / kh][j / kw]; k = 1 backward, one per element of
// dx: the sum of its kh x kw block of dy in row-major order.
// b0 = x or dy, b1 = y or dx.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
void main() {
  uint q = flat_id();
  if (q >= p.n)
    return;
  uint h = p.i0, w = p.i1, kh = p.i2, kw = p.i3, ow = w * kw;
  if (p.k == 0u) {
    uint j = q % ow, i = (q / ow) % (h * kh), r = q / (ow * h * kh);
    b1.v[p.o1 + q] = b0.v[p.o0 + (r * h + i / kh) * w + j / kw];
    return;
  }
  uint j = q % w, i = (q / w) % h, r = q / (w * h);
  float s = 0.0;
  for (uint a = 0u; a < kh; a++)
    for (uint c = 0u; c < kw; c++)
      s += b0.v[p.o0 + (r * h * kh + i * kh + a) * ow + j * kw + c];
  b1.v[p.o1 + q] = s;
}
