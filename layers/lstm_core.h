/* One LSTM time step, forward and backward, for a batch: the math lstm and
 * lstmcell share, through the kernel table only.
 *
 * NNTrainer's gates and layout: z = x W_ih + h_prev W_hh (+ biases), W_ih
 * [feature, 4 unit] and W_hh [unit, 4 unit] with the gate columns in the
 * order i, f, g, o (PyTorch's order, transposed); i, f, o take the
 * recurrent activation (sigmoid), g the hidden-state activation (tanh);
 * c = f c_prev + i g, h = o act(c), then h *= the dropout mask.
 * The activated gates are kept gate-major, [4][batch][unit] (one permute
 * of z), so each gate is one contiguous matrix for the element-wise ops. */
#ifndef NNT_LSTM_CORE_H
#define NNT_LSTM_CORE_H

#include "nntrainer/layer.h"

typedef struct nnt_lstm_cfg {
  size_t b, u, feat;
  nnt_act act, ract; /* hidden-state and recurrent activations */
  const float *w_ih, *w_hh;
  const float *bias[2]; /* added to z; NULL: none (bias_h, or bias_ih and bias_hh) */
} nnt_lstm_cfg;

typedef struct nnt_lstm_fwd_io {
  const float *x;       /* [b, feat], rows ldx apart */
  size_t ldx;
  const float *h_prev;  /* [b, u], NULL: zeros */
  const float *c_prev;  /* [b, u], NULL: zeros */
  const float *mask;    /* [b, u] dropout on h, NULL: none */
  float *z;             /* work [b, 4u] */
  float *tmp;           /* work [b, u] */
  float *gates;         /* out: activated i, f, g, o, [4][b][u] */
  float *c, *h;         /* out [b, u]; not aliasing c_prev, h_prev */
} nnt_lstm_fwd_io;

/* The work floats a forward step needs (z, tmp). */
static inline size_t nnt_lstm_fwd_work(size_t b, size_t u) { return 5 * b * u; }
int nnt_lstm_step_fwd(const nnt_kernels *k, const nnt_lstm_cfg *cfg, const nnt_lstm_fwd_io *io);
/* The step's last part, from its activated gates: c = f c_prev + i g and,
 * unless h is NULL, h = o act(c) (times mask), leaving act(c) in tmp
 * (work [b, u]). The forward step ends with it, and the lstm's backward
 * recomputes the states it did not keep with it: the same ops, so the
 * same bits. */
int nnt_lstm_cell(const nnt_kernels *k, const nnt_lstm_cfg *cfg, const float *gates,
                  const float *c_prev, const float *mask, float *tmp, float *c, float *h);

typedef struct nnt_lstm_bwd_io {
  /* what the forward step had and gave */
  const float *x;
  size_t ldx;
  const float *h_prev, *c_prev, *mask; /* NULL as in the forward */
  const float *gates, *c;
  const float *act_c;   /* act(c) where the caller has it, NULL: computed */
  /* derivatives in */
  const float *dh;      /* of the step's h (before the mask), [b, u] */
  const float *dc;      /* reaching c from outside (the next step), NULL: 0 */
  /* out, each NULL to skip */
  float *dc_prev;       /* = dc_total * f; may alias dc */
  float *dh_prev;       /* = dz W_hh^T + beta_dh * dh_prev */
  float beta_dh;
  float *g_ih, *g_hh, *g_bias; /* weight gradients, += when acc, else = */
  int acc;
  /* dz: out, the pre-activations' derivative [b, 4u] (natural layout); it
   * may be the gates' memory: it is written after their last read */
  float *dz;
  float *work;          /* nnt_lstm_bwd_work floats */
} nnt_lstm_bwd_io;

static inline size_t nnt_lstm_bwd_work(size_t b, size_t u) { return 7 * b * u; }
int nnt_lstm_step_bwd(const nnt_kernels *k, const nnt_lstm_cfg *cfg, const nnt_lstm_bwd_io *io);

#define NNT_LSTM_CORE_KOPS                                                                   \
  (NNT_KOP_BIT(GEMM) | NNT_KOP_BIT(ADD_ROW_VEC) | NNT_KOP_BIT(PERMUTE3) |                    \
   NNT_KOP_BIT(ACT_FWD) | NNT_KOP_BIT(ACT_BWD) | NNT_KOP_BIT(MUL) | NNT_KOP_BIT(ADD) |       \
   NNT_KOP_BIT(FILL) | NNT_KOP_BIT(SUM_ROWS))

#endif
