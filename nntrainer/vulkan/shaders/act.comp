// Element-wise activations (the formulas of nntrainer/compute/cpu_kernels.c),
// i1 = the nnt_act value (kernels.h), f0 = alpha.
// i0 = 0 forward: b0 = x, b1 = y (may alias x).
// i0 = 1 backward: b0 = x, b1 = y, b2 = dy, b3 = dx (dx may alias dy).
// i0 = 2 backward from a mask (relu, leaky_relu): b0 = the mask's words,
// b2 = dy, b3 = dx; the bit of element i stands for y > 0.
// i0 = 3 the mask: one invocation per 32-bit word (n words, k elements),
// b0 = mask, b1 = y; no two invocations write the same word.
// GLSL has no erf, expm1 or log1p: erf is Abramowitz-Stegun 7.1.26
// (absolute error below 1.5e-7); tanh and softplus use forms that cannot
// overflow.
#version 450
layout(local_size_x = 256) in;
#include "common.glsl"

const uint NONE = 0u, RELU = 1u, LEAKY = 2u, SIGMOID = 3u, TANH = 4u, SOFTMAX = 5u,
           SWISH = 6u, GELU = 7u, ELU = 8u, SELU = 9u, SOFTPLUS = 10u, MISH = 11u;
const float SELU_ALPHA = 1.6732632423543772, SELU_SCALE = 1.0507009873554805;

float sigm(float x) {
  if (x >= 0.0)
    return 1.0 / (1.0 + exp(-x));
  float e = exp(x);
  return e / (1.0 + e);
}
float tanh_s(float x) {
  float t = exp(-2.0 * abs(x));
  return sign(x) * (1.0 - t) / (1.0 + t);
}
float softplus(float x) { return x > 0.0 ? x + log(1.0 + exp(-x)) : log(1.0 + exp(x)); }
float erf_as(float x) {
  float a = abs(x), t = 1.0 / (1.0 + 0.3275911 * a);
  float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t +
                   0.254829592) * t * exp(-a * a);
  return sign(x) * y;
}

float fwd(uint a, float x) {
  if (a == RELU) return x > 0.0 ? x : 0.0;
  if (a == LEAKY) return x > 0.0 ? x : p.f0 * x;
  if (a == SIGMOID) return sigm(x);
  if (a == TANH) return tanh_s(x);
  if (a == SWISH) return x * sigm(x);
  if (a == GELU) return 0.5 * x * (1.0 + erf_as(x * 0.70710678118654752));
  if (a == ELU) return x > 0.0 ? x : p.f0 * (exp(x) - 1.0);
  if (a == SELU) return SELU_SCALE * (x > 0.0 ? x : SELU_ALPHA * (exp(x) - 1.0));
  if (a == SOFTPLUS) return softplus(x);
  if (a == MISH) return x * tanh_s(softplus(x));
  return x; // none, softmax (softmax goes through its own shader)
}

float bwd(uint a, float x, float y, float dy) {
  if (a == RELU) return y > 0.0 ? dy : 0.0;
  if (a == LEAKY) return y > 0.0 ? dy : p.f0 * dy;
  if (a == SIGMOID) return dy * y * (1.0 - y);
  if (a == TANH) return dy * (1.0 - y * y);
  if (a == SWISH) {
    float s = sigm(x);
    return dy * (s + x * s * (1.0 - s));
  }
  if (a == GELU) {
    float cdf = 0.5 * (1.0 + erf_as(x * 0.70710678118654752));
    float pdf = 0.3989422804014327 * exp(-0.5 * x * x);
    return dy * (cdf + x * pdf);
  }
  if (a == ELU) return x > 0.0 ? dy : dy * p.f0 * exp(x);
  if (a == SELU) return dy * SELU_SCALE * (x > 0.0 ? 1.0 : SELU_ALPHA * exp(x));
  if (a == SOFTPLUS) return dy * sigm(x);
  if (a == MISH) {
    float t = tanh_s(softplus(x));
    return dy * (t + x * (1.0 - t * t) * sigm(x));
  }
  return dy;
}

void main() {
  uint i = flat_id();
  if (i >= p.n)
    return;
  if (p.i0 == 3u) {
    uint lo = i * 32u, len = min(p.k - lo, 32u), u = 0u;
    for (uint b = 0u; b < len; b++)
      u |= (b1.v[p.o1 + lo + b] > 0.0 ? 1u : 0u) << b;
    b0.v[p.o0 + i] = uintBitsToFloat(u);
  } else if (p.i0 == 2u) {
    bool set = ((floatBitsToUint(b0.v[p.o0 + (i >> 5)]) >> (i & 31u)) & 1u) != 0u;
    float dy = b2.v[p.o2 + i];
    b3.v[p.o3 + i] = set ? dy : (p.i1 == LEAKY ? p.f0 * dy : 0.0);
  } else if (p.i0 == 0u) {
    b1.v[p.o1 + i] = fwd(p.i1, b0.v[p.o0 + i]);
  } else {
    bool need_x = p.i1 >= SWISH;
    float x = need_x ? b0.v[p.o0 + i] : 0.0, y = need_x ? 0.0 : b1.v[p.o1 + i];
    b3.v[p.o3 + i] = bwd(p.i1, x, y, b2.v[p.o2 + i]);
  }
}
