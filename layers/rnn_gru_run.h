/* What rnn, gru and their one-step cells (rnncell, grucell) share beyond
 * recurrent.h: the keys each type takes (NNTrainer's), the weights
 * (NNTrainer's names, shapes and order), and the drivers that run a kind's
 * one-step math over time (the sequence layers) or once (the cells). A
 * kind (rnn.c, gru.c) gives only its step forward and backward. Internal
 * to layers/. */
#ifndef NNT_RNN_GRU_RUN_H
#define NNT_RNN_GRU_RUN_H

#include "layers/recurrent.h"

/* Which keys a type takes beyond unit, hidden_state_activation,
 * dropout_rate, integrate_bias and the shared weight keys (NNTrainer gives
 * none of these types bidirectional or max_timestep). */
enum {
  NNT_RG_K_RETURN_SEQ = 1u << 0, /* return_sequences (rnn, gru) */
  NNT_RG_K_RECURRENT = 1u << 1,  /* recurrent_activation (gru, grucell) */
  NNT_RG_K_RESET = 1u << 2,      /* reset_after (gru, grucell) */
};

typedef struct nnt_rg_props {
  nnt_rnn_props r;  /* unit, activations (tanh, sigmoid), return_sequences,
                     * dropout_rate, integrate_bias */
  int reset_after;  /* default true */
  nnt_weight_props wp;
} nnt_rg_props;

/* The weights as the run context holds them: weight_ih [F, G*U],
 * weight_hh [U, G*U], then bias_h [G*U] (integrate_bias) or bias_ih and
 * bias_hh [G*U] (none with disable_bias). The g pointers are the
 * gradients, NULL where none is computed. */
typedef struct nnt_rg_w {
  const float *wih, *whh, *bh, *bih, *bhh;
  float *gwih, *gwhh, *gbh, *gbih, *gbhh;
} nnt_rg_w;

/* One time step over B rows. Forward writes h and gates; backward reads
 * them (and x, hprev), turns dh into d and dhprev and adds to the
 * gradients of w. */
typedef struct nnt_rg_step {
  const nnt_kernels *k;
  const nnt_rg_props *p;
  const nnt_rg_w *w;
  size_t B, F;
  const float *x;       /* x_t: B rows of F floats, ldx apart */
  size_t ldx;
  const float *hprev;   /* [B, U]; NULL: zeros (the first step) */
  float *h;             /* [B, U]: the new state, after dropout */
  float *gates;         /* [saved, B, U]: what the backward reads (h when saved is 0) */
  const float *mask;    /* [B, U] dropout mask, NULL: none */
  /* backward */
  float *dh;            /* [B, U] dL/dh (overwritten) */
  float *d;             /* [B, G*U] dL/d(the pre-activations), as weight_ih's columns */
  float *dhprev;        /* [B, U] dL/dhprev (overwritten); NULL: not wanted */
  float *work;          /* [G + 1, B, U] of work */
} nnt_rg_step;

typedef struct nnt_rg_kind {
  const char *type;
  unsigned keys;   /* NNT_RG_K_* */
  unsigned gates;  /* G: weight columns per unit */
  /* [B, U] blocks per step that the forward keeps for the backward */
  unsigned (*saved)(const nnt_rg_props *p);
  /* bwd writes d only after its last read of the step's gates: where a
   * step keeps G blocks, d may then be their memory (rnn_gru_run.c, dz_over) */
  int d_after_gates;
  int (*fwd)(const nnt_rg_step *s);
  int (*bwd)(const nnt_rg_step *s);
  /* The new state h from the step's kept gates, hprev and mask, with the
   * ops fwd ends with (so the same bits), or NULL (the kind keeps h
   * itself: rnn). With it a sequence layer keeps its states only every
   * K-th step, and the backward computes each segment's again. */
  int (*state)(const nnt_rg_step *s);
} nnt_rg_kind;

/* A layer's private state (priv_size). */
typedef struct nnt_rg_priv {
  nnt_rg_props p;
  unsigned T, B, F;                 /* time steps (1: a cell), batch, features */
  unsigned K, nck;                  /* the backward's segments: K steps each (K^2 >= T),
                                     * nck states kept; K = 0: none */
  int s_hs, s_gates, s_mask, s_bwd; /* scratch indices, -1: none */
} nnt_rg_priv;

void nnt_rg_init(nnt_layer *l);
int nnt_rg_set(nnt_layer *l, const nnt_rg_kind *kd, const char *key, const char *value,
               nnt_err *e);
/* The sequence layers: input [B, 1, T, F], output [B, 1, T or 1, U]. */
int nnt_rg_seq_finalize(nnt_layer *l, const nnt_rg_kind *kd, nnt_finalize_ctx *ctx, nnt_err *e);
int nnt_rg_seq_forward(nnt_layer *l, const nnt_rg_kind *kd, nnt_run_ctx *ctx);
int nnt_rg_seq_gradient(nnt_layer *l, const nnt_rg_kind *kd, nnt_run_ctx *ctx);
int nnt_rg_seq_derivative(nnt_layer *l, const nnt_rg_kind *kd, nnt_run_ctx *ctx);
/* The cells: inputs x [B, 1, 1, F] and the previous state [B, 1, 1, U],
 * output the new state [B, 1, 1, U]. */
int nnt_rg_cell_finalize(nnt_layer *l, const nnt_rg_kind *kd, nnt_finalize_ctx *ctx,
                         nnt_err *e);
int nnt_rg_cell_forward(nnt_layer *l, const nnt_rg_kind *kd, nnt_run_ctx *ctx);
int nnt_rg_cell_gradient(nnt_layer *l, const nnt_rg_kind *kd, nnt_run_ctx *ctx);
int nnt_rg_cell_derivative(nnt_layer *l, const nnt_rg_kind *kd, nnt_run_ctx *ctx);

/* The kernel ops the drivers and the kinds' steps call. */
#define NNT_RG_KOPS                                                                       \
  (NNT_RNN_KOPS | NNT_KOP_BIT(ADD_ROW_VEC) | NNT_KOP_BIT(SUM_ROWS) | NNT_KOP_BIT(ACT_FWD) | \
   NNT_KOP_BIT(ACT_BWD) | NNT_KOP_BIT(MUL) | NNT_KOP_BIT(ADD) | NNT_KOP_BIT(SUB) |          \
   NNT_KOP_BIT(SCALE) | NNT_KOP_BIT(COPY) | NNT_KOP_BIT(DROPOUT_MASK) | NNT_KOP_BIT(COPY2D) | \
   NNT_KOP_BIT(FILL))

/* The descriptor nnt_layer_<name> of a kind's sequence layer (form seq)
 * or cell (form cell), answering to ml_train_layer_type_e value ml. */
#define NNT_RG_LAYER(name, kind, form, ml)                                                \
  static int name##_set(nnt_layer *l, const char *key, const char *value, nnt_err *e) {   \
    return nnt_rg_set(l, &kind, key, value, e);                                           \
  }                                                                                       \
  static int name##_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {           \
    return nnt_rg_##form##_finalize(l, &kind, ctx, e);                                    \
  }                                                                                       \
  static int name##_forward(nnt_layer *l, nnt_run_ctx *ctx) {                             \
    return nnt_rg_##form##_forward(l, &kind, ctx);                                        \
  }                                                                                       \
  static int name##_gradient(nnt_layer *l, nnt_run_ctx *ctx) {                            \
    return nnt_rg_##form##_gradient(l, &kind, ctx);                                       \
  }                                                                                       \
  static int name##_derivative(nnt_layer *l, nnt_run_ctx *ctx) {                          \
    return nnt_rg_##form##_derivative(l, &kind, ctx);                                     \
  }                                                                                       \
  const nnt_layer_ops nnt_layer_##name = {                                                \
      .type = #name,                                                                      \
      .ml_type = ml,                                                                      \
      .priv_size = sizeof(nnt_rg_priv),                                                   \
      .init = nnt_rg_init,                                                                \
      .set_property = name##_set,                                                         \
      .finalize = name##_finalize,                                                        \
      .forward = name##_forward,                                                          \
      .calc_gradient = name##_gradient,                                                   \
      .calc_derivative = name##_derivative,                                               \
      .kops = NNT_RG_KOPS,                                                                \
  }

#endif
