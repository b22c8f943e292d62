// Rows of a table by index (gather_rows): b0 = idx [rows], b1 = table
// [k, cols], b2 = y [rows, cols]; n = rows * cols; i0 = the masked row
// (k or more: none). An index outside [0, k) (NaN included) reads nothing
// and gives a row of NaN.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
void main() {
  uint i = flat_id();
  if (i >= p.n)
    return;
  uint r = i / p.cols, c = i % p.cols;
  float v = b0.v[p.o0 + r];
  if (!(v >= 0.0) || !(v < float(p.k))) {
    b2.v[p.o2 + i] = uintBitsToFloat(0x7fc00000u);
    return;
  }
  uint row = uint(v);
  if (row >= p.k) {
    b2.v[p.o2 + i] = uintBitsToFloat(0x7fc00000u);
    return;
  }
  b2.v[p.o2 + i] = row == p.i0 ? 0.0 : b1.v[p.o1 + row * p.cols + c];
}
