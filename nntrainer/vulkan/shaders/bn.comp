// Batch normalization over [outer, ch, inner], one work group of WG
// invocations per channel (k = outer, cols = ch, rows = inner); compiled
// as bn (256) and bn1024 (CMakeLists.txt), vk_ops.c takes bn1024 where
// the device allows work groups of 1024: a channel's sums over a large
// batch had too few invocations in flight. Sums are per-invocation partial
// sums then a tree in shared memory (float; the CPU sums in double).
// i0 = 0 training: mean, biased variance, invstd = 1 / sqrt(var + f0),
//   xhat = (x - mean) invstd, y = gamma xhat + beta (y may alias x);
//   b0 = x, b1 = gamma, b2 = beta, b3 = mean, b4 = var, b5 = invstd,
//   b6 = xhat, b7 = y.
// i0 = 1 backward: dgamma = sum(dy xhat) (i1 bit 0), dbeta = sum(dy)
//   (bit 1), dx = gamma invstd (dy - mean(dy) - xhat mean(dy xhat))
//   (bit 2; dx may alias dy); b0 = dy, b1 = xhat, b2 = invstd,
//   b3 = gamma, b4 = dx, b5 = dgamma, b6 = dbeta.
#version 450
#ifndef WG
#define WG 256
#endif
layout(local_size_x = WG) in;
#include "common.glsl"
shared float s0[WG], s1[WG];

uint at(uint e, uint c) { return (e / p.rows * p.cols + c) * p.rows + e % p.rows; }

void tree(uint t) {
  for (uint h = WG / 2u; h > 0u; h >>= 1) {
    if (t < h) {
      s0[t] += s0[t + h];
      s1[t] += s1[t + h];
    }
    barrier();
  }
}

void main() {
  uint c = gl_WorkGroupID.x, t = gl_LocalInvocationID.x, n = p.k * p.rows;
  float fn = float(n);
  if (p.i0 == 0u) {
    float s = 0.0;
    for (uint e = t; e < n; e += WG)
      s += b0.v[p.o0 + at(e, c)];
    s0[t] = s;
    s1[t] = 0.0;
    barrier();
    tree(t);
    float mu = s0[0] / fn;
    barrier();
    float q = 0.0;
    for (uint e = t; e < n; e += WG) {
      float d = b0.v[p.o0 + at(e, c)] - mu;
      q += d * d;
    }
    s0[t] = q;
    barrier();
    tree(t);
    float v = s0[0] / fn, is = 1.0 / sqrt(v + p.f0);
    if (t == 0u) {
      b3.v[p.o3 + c] = mu;
      b4.v[p.o4 + c] = v;
      b5.v[p.o5 + c] = is;
    }
    float g = b1.v[p.o1 + c], bt = b2.v[p.o2 + c];
    for (uint e = t; e < n; e += WG) {
      uint j = at(e, c);
      float h = (b0.v[p.o0 + j] - mu) * is;
      b6.v[p.o6 + j] = h;
      b7.v[p.o7 + j] = g * h + bt;
    }
  } else {
    float sd = 0.0, sx = 0.0;
    for (uint e = t; e < n; e += WG) {
      uint j = at(e, c);
      float d = b0.v[p.o0 + j];
      sd += d;
      sx += d * b1.v[p.o1 + j];
    }
    s0[t] = sd;
    s1[t] = sx;
    barrier();
    tree(t);
    sd = s0[0];
    sx = s1[0];
    if (t == 0u && (p.i1 & 1u) != 0u)
      b5.v[p.o5 + c] = sx;
    if (t == 0u && (p.i1 & 2u) != 0u)
      b6.v[p.o6 + c] = sd;
    if ((p.i1 & 4u) == 0u)
      return;
    float kk = b3.v[p.o3 + c] * b2.v[p.o2 + c], mdy = sd / fn, mdyx = sx / fn;
    for (uint e = t; e < n; e += WG) {
      uint j = at(e, c);
      b4.v[p.o4 + j] = kk * (b0.v[p.o0 + j] - mdy - b1.v[p.o1 + j] * mdyx);
    }
  }
}
