/* A counter-based random generator (Philox-4x32 with 10 rounds, Salmon et
 * al., SC'11): the value at (key, counter) is a pure function of the two,
 * so any backend can compute element i of a random tensor on its own, in
 * any order, and a run is reproduced from the seed alone. Header-only so
 * that kernels (and, later, shaders written to the same recipe) share it. */
#ifndef NNT_PHILOX_H
#define NNT_PHILOX_H

#include <stdint.h>

typedef struct nnt_philox_out {
  uint32_t v[4];
} nnt_philox_out;

/* The four 32-bit words at counter (ctr_hi:ctr_lo) under key. */
static inline nnt_philox_out nnt_philox(uint64_t key, uint64_t ctr_hi, uint64_t ctr_lo) {
  uint32_t c0 = (uint32_t)ctr_lo, c1 = (uint32_t)(ctr_lo >> 32);
  uint32_t c2 = (uint32_t)ctr_hi, c3 = (uint32_t)(ctr_hi >> 32);
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1, c3 = (uint32_t)p0;
    c0 = n0, c2 = n2;
    k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
  }
  nnt_philox_out o = {{c0, c1, c2, c3}};
  return o;
}

/* A uniform float in [0, 1) from 24 random bits. */
static inline float nnt_philox_u01(uint32_t bits) {
  return (float)(bits >> 8) * (1.0f / 16777216.0f);
}

/* Uniform [0, 1) value number i of the stream (key, stream): four values
 * per Philox call, element i uses word i % 4 of counter (stream, i / 4). */
static inline float nnt_philox_uniform_at(uint64_t key, uint64_t stream, uint64_t i) {
  return nnt_philox_u01(nnt_philox(key, stream, i >> 2).v[i & 3]);
}

#endif
