// Permute the last three axes: output element (n, i, j, l) of dims
// (k0 = i0, i1, i2) is input n * cols + i u0 + j u1 + l u2 (the input
// strides of the permuted axes; cols = one tensor's length). b0 = x, b1 = y.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
void main() {
  uint q = flat_id();
  if (q >= p.n)
    return;
  uint r = q % p.cols, nb = q / p.cols;
  uint l = r % p.i2, j = (r / p.i2) % p.i1, i = r / (p.i2 * p.i1);
  b1.v[p.o1 + q] = b0.v[p.o0 + nb * p.cols + i * p.u0 + j * p.u1 + l * p.u2];
}
