// One work group reduces n values to one float b2[o2]:
// i0 = 0 dot(b0, b1); 1 sum(b0); 2 mean((b0 - b1)^2) (mse_fwd);
// 3 -sum(b1 log(b0 + 1e-20)) / rows (xent_softmax_fwd; b0 = prob,
// b1 = label); 4 mean(max(x, 0) - x l + log(1 + exp(-|x|))) (xent_sigmoid_fwd;
// b0 = logits x, b1 = label). Per-invocation partial sums, then a tree in shared memory.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"
shared float part[256];
void main() {
  uint t = gl_LocalInvocationID.x;
  float s = 0.0;
  for (uint i = t; i < p.n; i += 256u) {
    float a = b0.v[p.o0 + i];
    if (p.i0 == 0u) {
      s += a * b1.v[p.o1 + i];
    } else if (p.i0 == 1u) {
      s += a;
    } else if (p.i0 == 2u) {
      float d = a - b1.v[p.o1 + i];
      s += d * d;
    } else if (p.i0 == 4u) {
      s += max(a, 0.0) - a * b1.v[p.o1 + i] + log(1.0 + exp(-abs(a)));
    } else {
      float l = b1.v[p.o1 + i];
      if (l != 0.0)
        s -= l * log(a + 1e-20);
    }
  }
  part[t] = s;
  barrier();
  for (uint h = 128u; h > 0u; h >>= 1) {
    if (t < h)
      part[t] += part[t + h];
    barrier();
  }
  if (t == 0u) {
    float r = part[0];
    if (p.i0 == 2u || p.i0 == 4u)
      r /= float(p.n);
    else if (p.i0 == 3u)
      r /= float(p.rows);
    b2.v[p.o2] = r;
  }
}
