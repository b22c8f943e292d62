/* What every recurrent layer (lstm, gru, rnn and their cells) shares: the
 * keys NNTrainer gives them (unit, hidden_state_activation,
 * recurrent_activation, return_sequences, bidirectional, dropout_rate,
 * integrate_bias, max_timestep), the time axis of a batch-first sequence
 * [batch, 1, T, feature], the position a step of either direction reads,
 * and the moves between a layer's output and the hidden states it keeps.
 *
 * Layout of the hidden states every sequence layer here keeps (and of
 * their derivatives): [T][dirs][batch][unit], by position in the input
 * (not by step), direction 0 forward, 1 reverse; so one step's hidden
 * state is a contiguous [batch, unit] matrix. */
#ifndef NNT_RECURRENT_H
#define NNT_RECURRENT_H

#include "nntrainer/layer.h"

typedef struct nnt_rnn_props {
  unsigned unit;            /* required, > 0 */
  nnt_act act;              /* hidden_state_activation (lstm, gru: tanh) */
  nnt_act ract;             /* recurrent_activation (lstm, gru: sigmoid) */
  int return_sequences;     /* default false */
  int bidirectional;        /* default false */
  float dropout_rate;       /* dropout_rate, [0, 1), default 0 */
  int integrate_bias;       /* default false: bias_ih and bias_hh */
  unsigned max_timestep;    /* 0: not given */
} nnt_rnn_props;

void nnt_rnn_props_init(nnt_rnn_props *p, nnt_act act, nnt_act ract);
/* One of the keys above. @return NNT_OK, NNT_ERR_NOKEY for another key, or
 * NNT_ERR_INVAL naming the key and value. An activation must have a
 * backward that reads its output only (nnt_act_bwd_needs_output_only:
 * none, relu, leaky_relu, sigmoid, tanh), as the layers keep activated
 * values only. */
int nnt_rnn_props_set(nnt_rnn_props *p, const char *key, const char *value, nnt_err *e);

/* The slope act_fwd/act_bwd take for a (leaky_relu: NNTrainer's 0.01). */
float nnt_rnn_alpha(nnt_act a);

/* For finalize of a sequence layer: one input [b, 1, T, feature]; *T the
 * steps. max_timestep larger than the input's height is refused (the
 * layer would read past its input). type names the layer type. */
int nnt_rnn_check_input(const nnt_rnn_props *p, const nnt_finalize_ctx *ctx, const char *type,
                        unsigned *T, nnt_err *e);

/* The position step s of direction dir (0 forward, 1 reverse) reads, and
 * the position of the step before it (s > 0). */
static inline size_t nnt_rnn_pos(size_t T, unsigned dir, size_t s) {
  return dir ? T - 1 - s : s;
}
static inline size_t nnt_rnn_prev(size_t T, unsigned dir, size_t s) {
  return dir ? T - s : s - 1;
}

/* The backward's segment length for T steps where a layer keeps its
 * states only every K-th step and computes each segment's again (lstm,
 * gru): the least K with K^2 >= T (about 2 sqrt(T) states held). */
static inline size_t nnt_rnn_seg(size_t T) {
  size_t K = 1;
  while (K * K < T)
    K++;
  return K;
}

/* The output y [b, T or 1, dirs * u] from the hidden states h
 * [T][dirs][b][u]: every position, or (return_sequences off) position
 * T - 1 only, the hidden state of both directions side by side. One
 * permute3. */
int nnt_rnn_out_fwd(const nnt_kernels *k, size_t T, unsigned dirs, size_t b, size_t u,
                    int return_sequences, const float *h, float *y);
/* Its adjoint, one position at a time: into dh [b][u] the derivative
 * reaching the hidden state of position pos, direction d, from the output
 * dy [b, T or 1, dirs * u] (rows of T dirs u floats, or dirs u without
 * return_sequences), or zeros where the output does not hold that
 * position. One copy2d or fill: a backward through time reads the
 * output's derivative as it reaches each position. */
int nnt_rnn_dh_in(const nnt_kernels *k, const float *dy, size_t T, unsigned dirs, size_t b,
                  size_t u, int return_sequences, size_t pos, unsigned d, float *dh);
/* dx [b, T, feat] = sum over directions of dz(dir) W(dir)^T, where dz is
 * [T][dirs][b][g] (g = gates x unit, the derivative of each step's
 * pre-activations, by position) and W(dir) is [feat, g]: one gemm a
 * position and direction. */
int nnt_rnn_dx(const nnt_kernels *k, size_t T, unsigned dirs, size_t b, size_t feat, size_t g,
               const float *dz, const float *const *w, float *dx);

#define NNT_RNN_KOPS (NNT_KOP_BIT(PERMUTE3) | NNT_KOP_BIT(FILL) | NNT_KOP_BIT(GEMM))

#endif
