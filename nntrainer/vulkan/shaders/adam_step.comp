// Adam: b0 = g, b1 = m, b2 = v, b3 = w; f0 = lr_t, f1 = b1, f2 = b2, f3 = eps,
// f4 = the weight's scale first (AdamW's decay, 1: none); i1 = 1: nothing
// when the skip flag b4[o4] is not 0. What is stored below the smallest
// normal float is 0, as on the CPU (kernels.h nnt_flush_subnormal).
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
float flush(float x) { return abs(x) < 1.17549435e-38 ? 0.0 : x; }
void main() {
  uint i = flat_id();
  if (i >= p.n || (p.i1 == 1u && b4.v[p.o4] != 0.0))
    return;
  if (p.f4 != 1.0)
    b3.v[p.o3 + i] *= p.f4;
  float g = b0.v[p.o0 + i];
  float m = flush(p.f1 * b1.v[p.o1 + i] + (1.0 - p.f1) * g);
  float v = flush(p.f2 * b2.v[p.o2 + i] + (1.0 - p.f2) * g * g);
  b1.v[p.o1 + i] = m;
  b2.v[p.o2 + i] = v;
  b3.v[p.o3 + i] = flush(b3.v[p.o3 + i] - p.f0 * m / (sqrt(v) + p.f3));
}
