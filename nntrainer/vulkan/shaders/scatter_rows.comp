// The adjoint of gather_rows (scatter_add_rows): b0 = idx [rows], b1 = dy
// [rows, cols], b2 = dtable [k, cols], overwritten; n = k * cols; i0 = the
// masked row. One invocation per element of dtable adds the dy of the rows
// naming its row in increasing order: no atomics, the CPU's order.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
void main() {
  uint i = flat_id();
  if (i >= p.n)
    return;
  uint row = i / p.cols, c = i % p.cols;
  float s = 0.0;
  if (row != p.i0)
    for (uint r = 0u; r < p.rows; r++) {
      float v = b0.v[p.o0 + r];
      if (v >= 0.0 && v < float(p.k) && uint(v) == row)
        s += b1.v[p.o1 + r * p.cols + c];
    }
  b2.v[p.o2 + i] = s;
}
