// NNTrainer's sinusoid table (pos_encoding): b0 = table [rows, cols], n =
// rows * cols; value (i, j) = sin(a) (even j) or cos(a) (odd j), a = i /
// 10000^(2 floor(j / 2) / cols).
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
void main() {
  uint e = flat_id();
  if (e >= p.n)
    return;
  uint i = e / p.cols, j = e % p.cols, jj = (j >> 1) << 1;
  float a = float(i) / pow(10000.0, float(jj) / float(p.cols));
  b0.v[p.o0 + e] = (j & 1u) != 0u ? cos(a) : sin(a);
}
