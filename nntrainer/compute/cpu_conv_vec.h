/* Vector helpers the CPU's direct convolutions share (cpu_conv_direct.c,
 * cpu_conv_rows.c, cpu_conv_rows_dw.c): masked loads and stores of a row's
 * lanes on AVX-512 and AVX2, and the portable "vectors" of plain floats
 * that their code for any CPU is written with. */
#ifndef NNT_CPU_CONV_VEC_H
#define NNT_CPU_CONV_VEC_H

#include <stdint.h>
#include <string.h>

/* The portable vectors of P: P##_vec, LANES plain floats (the compiler
 * makes its own vectors of them where it can); P##_rng, a mask, the lane
 * range [lo, hi); zero, set1, madd (acc + a * b, the product rounded
 * before the add), add, load and store of all lanes, loadm (the mask's
 * lanes of row from column off, zeros elsewhere; no other lane read) and
 * storen (the first nl lanes); each file uses some of them. */
#if defined(__GNUC__) || defined(__clang__)
#define NNT_CV_MAYBE_UNUSED __attribute__((unused))
#else
#define NNT_CV_MAYBE_UNUSED
#endif
#define NNT_CV_PORTABLE(P, LANES)                                                              \
  typedef struct P##_vec {                                                                     \
    float v[LANES];                                                                            \
  } P##_vec;                                                                                   \
  typedef struct P##_rng {                                                                     \
    unsigned lo, hi;                                                                           \
  } P##_rng;                                                                                   \
  NNT_CV_MAYBE_UNUSED static inline P##_rng P##_mask(unsigned lo, unsigned hi) {               \
    return (P##_rng){lo, hi};                                                                  \
  }                                                                                            \
  NNT_CV_MAYBE_UNUSED static inline P##_vec P##_zero(void) {                                   \
    P##_vec r;                                                                                 \
    memset(&r, 0, sizeof r);                                                                   \
    return r;                                                                                  \
  }                                                                                            \
  NNT_CV_MAYBE_UNUSED static inline P##_vec P##_set1(float x) {                                \
    P##_vec r;                                                                                 \
    for (unsigned i = 0; i < (LANES); i++)                                                     \
      r.v[i] = x;                                                                              \
    return r;                                                                                  \
  }                                                                                            \
  NNT_CV_MAYBE_UNUSED static inline P##_vec P##_madd(P##_vec a, P##_vec b, P##_vec acc) {      \
    for (unsigned i = 0; i < (LANES); i++)                                                     \
      acc.v[i] += a.v[i] * b.v[i];                                                             \
    return acc;                                                                                \
  }                                                                                            \
  NNT_CV_MAYBE_UNUSED static inline P##_vec P##_add(P##_vec a, P##_vec b) {                    \
    for (unsigned i = 0; i < (LANES); i++)                                                     \
      a.v[i] += b.v[i];                                                                        \
    return a;                                                                                  \
  }                                                                                            \
  NNT_CV_MAYBE_UNUSED static inline P##_vec P##_load(const float *p) {                         \
    P##_vec r;                                                                                 \
    memcpy(r.v, p, sizeof r.v);                                                                \
    return r;                                                                                  \
  }                                                                                            \
  NNT_CV_MAYBE_UNUSED static inline void P##_store(float *p, P##_vec v) {                      \
    memcpy(p, v.v, sizeof v.v);                                                                \
  }                                                                                            \
  NNT_CV_MAYBE_UNUSED static inline P##_vec P##_loadm(const float *row, long off, P##_rng m) { \
    P##_vec r = P##_zero();                                                                    \
    for (unsigned i = m.lo; i < m.hi; i++)                                                     \
      r.v[i] = row[off + (long)i];                                                             \
    return r;                                                                                  \
  }                                                                                            \
  NNT_CV_MAYBE_UNUSED static inline void P##_storen(float *p, P##_vec v, unsigned nl) {        \
    memcpy(p, v.v, nl * sizeof *p);                                                            \
  }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define NNT_CV_AVX2 __attribute__((target("avx2,fma")))
#define NNT_CV_AVX512 __attribute__((target("avx512f")))
/* The lanes [lo, hi) of 16 (AVX-512) or 8 (AVX2); a row's address is
 * formed only for the lanes read: the masked loads touch no other. */
NNT_CV_AVX512 static inline __mmask16 nnt_cv_mask512(unsigned lo, unsigned hi) {
  return (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}
NNT_CV_AVX512 static inline __m512 nnt_cv_loadm512(const float *row, long off, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, (const float *)((uintptr_t)row + (uintptr_t)off * 4u));
}
NNT_CV_AVX512 static inline void nnt_cv_storen512(float *p, __m512 v, unsigned nl) {
  _mm512_mask_storeu_ps(p, (__mmask16)((1u << nl) - 1u), v);
}
NNT_CV_AVX2 static inline __m256i nnt_cv_mask256(unsigned lo, unsigned hi) {
  __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)hi), iota),
                          _mm256_cmpgt_epi32(iota, _mm256_set1_epi32((int)lo - 1)));
}
NNT_CV_AVX2 static inline __m256 nnt_cv_loadm256(const float *row, long off, __m256i m) {
  return _mm256_maskload_ps((const float *)((uintptr_t)row + (uintptr_t)off * 4u), m);
}
/* Plain stores of 8, 4, 2 and 1 lanes: a masked store (vmaskmovps) is
 * microcoded on AMD's Zen 2, many times a plain store's cost. AVX2 alone
 * (no FMA), so that the Winograd and window code built for AVX2 inlines
 * it too (cpu_winograd_avx2.c, cpu_window_avx2.c). */
#define NNT_CV_AVX2_ONLY __attribute__((target("avx2")))
NNT_CV_AVX2_ONLY static inline void nnt_cv_storen256(float *p, __m256 v, unsigned nl) {
  if (nl >= 8) {
    _mm256_storeu_ps(p, v);
    return;
  }
  __m128 lo = _mm256_castps256_ps128(v);
  if (nl >= 4) {
    _mm_storeu_ps(p, lo);
    lo = _mm256_extractf128_ps(v, 1);
    p += 4, nl -= 4;
  }
  if (nl >= 2) {
    _mm_storel_pi((__m64 *)(void *)p, lo);
    lo = _mm_movehl_ps(lo, lo);
    p += 2, nl -= 2;
  }
  if (nl)
    _mm_store_ss(p, lo);
}
#endif

#endif
