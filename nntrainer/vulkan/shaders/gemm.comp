// C = alpha op(A) op(B) + beta C (beta == 0: C is not read), row-major,
// 16 x 16 tiles through shared memory: b0 = A, b1 = B, b2 = C;
// rows = m, cols = n, k; i0 = lda, i1 = ldb, i2 = ldc, i3 = trans_a | trans_b << 1;
// f0 = alpha, f1 = beta. A plain tile: the fast kernels are later work.
#version 450
layout(local_size_x = 16, local_size_y = 16) in;
#include "common.glsl"
shared float ta[16][17];
shared float tb[16][17];
void main() {
  uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
  uint row = gl_WorkGroupID.y * 16u + ly, col = gl_WorkGroupID.x * 16u + lx;
  bool tra = (p.i3 & 1u) != 0u, trb = (p.i3 & 2u) != 0u;
  float acc = 0.0;
  for (uint t = 0u; t < p.k; t += 16u) {
    uint l = t + lx; // A(row, l)
    float a = 0.0;
    if (row < p.rows && l < p.k)
      a = tra ? b0.v[p.o0 + l * p.i0 + row] : b0.v[p.o0 + row * p.i0 + l];
    ta[ly][lx] = a;
    l = t + ly; // B(l, col)
    float b = 0.0;
    if (col < p.cols && l < p.k)
      b = trb ? b1.v[p.o1 + col * p.i1 + l] : b1.v[p.o1 + l * p.i1 + col];
    tb[ly][lx] = b;
    barrier();
    for (uint q = 0u; q < 16u; q++)
      acc += ta[ly][q] * tb[q][lx];
    barrier();
  }
  if (row < p.rows && col < p.cols) {
    uint o = p.o2 + row * p.i2 + col;
    b2.v[o] = p.f1 == 0.0 ? p.f0 * acc : p.f0 * acc + p.f1 * b2.v[o];
  }
}
