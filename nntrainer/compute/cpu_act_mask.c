/* The CPU's ReLU masks on one thread (cpu_kernels.c splits them over the
 * compute threads at word boundaries): act_mask packs y > 0 into bits,
 * act_bwd_mask selects dy (or relu's 0, leaky relu's alpha dy) by them. */
#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/kernels.h"

#include <stdint.h>
#include <string.h>

/* The mask's words are written and read as uint32_t only; the tensor's
 * float slots merely hold them. Bit b of a word is mask_bit[b]: with the
 * bits taken from a table (not 1 << b) the compiler vectorizes both
 * loops over a word (a compare or an and per lane). */
static const uint32_t mask_bit[32] = {
    1u << 0,  1u << 1,  1u << 2,  1u << 3,  1u << 4,  1u << 5,  1u << 6,  1u << 7,
    1u << 8,  1u << 9,  1u << 10, 1u << 11, 1u << 12, 1u << 13, 1u << 14, 1u << 15,
    1u << 16, 1u << 17, 1u << 18, 1u << 19, 1u << 20, 1u << 21, 1u << 22, 1u << 23,
    1u << 24, 1u << 25, 1u << 26, 1u << 27, 1u << 28, 1u << 29, 1u << 30, 1u << 31};

static inline uint32_t mask_word(const float *y, size_t len) {
  uint32_t u = 0;
  for (size_t b = 0; b < len; b++)
    u |= y[b] > 0 ? mask_bit[b] : 0u;
  return u;
}

int nnt_cpu_act_mask1(size_t n, const float *y, float *mask) {
  uint32_t *m = (uint32_t *)(void *)mask;
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    m[i >> 5] = mask_word(y + i, 32);
  if (i < n)
    m[i >> 5] = mask_word(y + i, n - i);
  return NNT_OK;
}

/* The same selects as k_act_bwd's relu and leaky_relu, on the bit that
 * stands for y[i] > 0, made without a branch: a branch on such a bit
 * mispredicts about every other element (it took a third of LeNet-5's
 * training step). Each result's bits are dy's, or the other choice's
 * (+0 or alpha * dy), picked by an all-ones or all-zeros word: the same
 * values as the select. */
static inline void bwd_mask_word(uint32_t u, size_t len, int leaky, float alpha, const float *dy,
                                 float *dx) {
  for (size_t b = 0; b < len; b++) {
    float g = dy[b], o = leaky ? alpha * g : 0.0f;
    uint32_t keep = (u & mask_bit[b]) ? ~0u : 0u, gb, ob;
    memcpy(&gb, &g, sizeof gb);
    memcpy(&ob, &o, sizeof ob);
    gb = (gb & keep) | (ob & ~keep);
    memcpy(dx + b, &gb, sizeof gb);
  }
}

int nnt_cpu_act_bwd_mask1(nnt_act a, float alpha, size_t n, const float *mask, const float *dy,
                          float *dx) {
  const uint32_t *m = (const uint32_t *)(const void *)mask;
  if (a != NNT_ACT_RELU && a != NNT_ACT_LEAKY_RELU)
    return NNT_ERR_INVAL;
  int leaky = a == NNT_ACT_LEAKY_RELU;
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    bwd_mask_word(m[i >> 5], 32, leaky, alpha, dy + i, dx + i);
  if (i < n)
    bwd_mask_word(m[i >> 5], n - i, leaky, alpha, dy + i, dx + i);
  return NNT_OK;
}
