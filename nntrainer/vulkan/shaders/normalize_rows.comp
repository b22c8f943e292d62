// The input layer's per-row normalization (kernels.h normalize_rows), one
// invocation per row, in place on y after a copy from x (y may alias x):
// i0 bit 0 min-max to [0, 1], bit 1 zero mean and unit population standard
// deviation (after min-max when both). A constant row becomes zeros.
// b0 = x, b1 = y, rows x cols.
#version 450
layout(local_size_x = 64) in;
#include "common.glsl"
void main() {
  uint r = flat_id();
  if (r >= p.rows)
    return;
  uint x = p.o0 + r * p.cols, y = p.o1 + r * p.cols;
  for (uint c = 0u; c < p.cols; c++)
    b1.v[y + c] = b0.v[x + c];
  if ((p.i0 & 1u) != 0u) {
    float lo = b1.v[y], hi = b1.v[y];
    for (uint c = 1u; c < p.cols; c++) {
      lo = min(lo, b1.v[y + c]);
      hi = max(hi, b1.v[y + c]);
    }
    float range = hi - lo;
    for (uint c = 0u; c < p.cols; c++)
      b1.v[y + c] = range > 0.0 ? (b1.v[y + c] - lo) / range : 0.0;
  }
  if ((p.i0 & 2u) != 0u) {
    float s = 0.0;
    for (uint c = 0u; c < p.cols; c++)
      s += b1.v[y + c];
    float mean = s / float(p.cols), var = 0.0;
    for (uint c = 0u; c < p.cols; c++) {
      float d = b1.v[y + c] - mean;
      var += d * d;
    }
    float sd = sqrt(var / float(p.cols));
    for (uint c = 0u; c < p.cols; c++)
      b1.v[y + c] = sd > 0.0 ? (b1.v[y + c] - mean) / sd : 0.0;
  }
}
