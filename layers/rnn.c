/* rnn and rnncell: h_t = act(x_t W_ih + h_{t-1} W_hh + b), act the
 * hidden_state_activation (tanh), with NNTrainer's weights weight_ih
 * [F, U], weight_hh [U, U] and bias_h [U] (integrate_bias) or bias_ih and
 * bias_hh [U]. rnn runs a [B, 1, T, F] sequence from a zero state
 * (rnn_gru_run.c); rnncell is one step from the state given as its second
 * input, for the recurrent realizer to unroll. The backward takes the
 * activation's derivative from its output: the new state itself, or,
 * under dropout, the unmasked value the forward keeps. */
#include "layers/rnn_gru_run.h"

/* The unmasked activations are kept only under dropout. */
static unsigned rnn_saved(const nnt_rg_props *p) { return p->r.dropout_rate > 0; }

static int rnn_fwd(const nnt_rg_step *s) {
  const nnt_kernels *k = s->k;
  const nnt_rg_w *w = s->w;
  size_t B = s->B, U = s->p->r.unit, bu = B * U;
  nnt_act act = s->p->r.act;
  float *a = s->gates;
  NNT_TRY(k->gemm(k, 0, 0, B, U, s->F, 1.0f, s->x, s->ldx, w->wih, U, 0.0f, a, U));
  if (s->hprev)
    NNT_TRY(k->gemm(k, 0, 0, B, U, U, 1.0f, s->hprev, U, w->whh, U, 1.0f, a, U));
  if (w->bh)
    NNT_TRY(k->add_row_vec(k, B, U, w->bh, a));
  if (w->bih) {
    NNT_TRY(k->add_row_vec(k, B, U, w->bih, a));
    NNT_TRY(k->add_row_vec(k, B, U, w->bhh, a));
  }
  NNT_TRY(k->act_fwd(k, act, nnt_rnn_alpha(act), bu, a, a));
  if (s->mask)
    return k->mul(k, bu, a, s->mask, s->h);
  return a == s->h ? NNT_OK : k->copy(k, bu, a, s->h);
}

static int rnn_bwd(const nnt_rg_step *s) {
  const nnt_kernels *k = s->k;
  const nnt_rg_w *w = s->w;
  size_t B = s->B, U = s->p->r.unit, bu = B * U;
  nnt_act act = s->p->r.act;
  float *d = s->d;
  if (s->mask)
    NNT_TRY(k->mul(k, bu, s->dh, s->mask, s->dh));
  NNT_TRY(k->act_bwd(k, act, nnt_rnn_alpha(act), bu, NULL, s->gates, s->dh, d));
  float *gb[3] = {w->gbh, w->gbih, w->gbhh};
  for (int i = 0; i < 3; i++)
    if (gb[i])
      NNT_TRY(k->sum_rows(k, B, U, d, 1.0f, gb[i]));
  if (w->gwih)
    NNT_TRY(k->gemm(k, 1, 0, s->F, U, B, 1.0f, s->x, s->ldx, d, U, 1.0f, w->gwih, U));
  if (s->hprev && w->gwhh)
    NNT_TRY(k->gemm(k, 1, 0, U, U, B, 1.0f, s->hprev, U, d, U, 1.0f, w->gwhh, U));
  if (s->dhprev)
    NNT_TRY(k->gemm(k, 0, 1, B, U, U, 1.0f, d, U, w->whh, U, 0.0f, s->dhprev, U));
  return NNT_OK;
}

static const nnt_rg_kind rnn_kind = {
    .type = "rnn", .keys = NNT_RG_K_RETURN_SEQ, .gates = 1,
    .saved = rnn_saved, .fwd = rnn_fwd, .bwd = rnn_bwd};
static const nnt_rg_kind rnncell_kind = {
    .type = "rnncell", .keys = 0, .gates = 1,
    .saved = rnn_saved, .fwd = rnn_fwd, .bwd = rnn_bwd};

/* ML_TRAIN_LAYER_TYPE_RNN and ML_TRAIN_LAYER_TYPE_RNNCELL */
NNT_RG_LAYER(rnn, rnn_kind, seq, 11);
NNT_RG_LAYER(rnncell, rnncell_kind, cell, 22);
