// y[r][c] += v[c] (i0 = 0, add_row_vec) or v[r] (i0 = 1, add_col_vec):
// b0 = v, b1 = y, rows x cols, n = rows * cols.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
void main() {
  uint i = flat_id();
  if (i >= p.n)
    return;
  uint j = p.i0 == 0u ? i % p.cols : i / p.cols;
  b1.v[p.o1 + i] += b0.v[p.o0 + j];
}
