/* gru and grucell, with NNTrainer's gate order z (update), r (reset),
 * g (candidate) in the columns of weight_ih [F, 3U], weight_hh [U, 3U] and
 * the biases [3U]:
 *   z = ract(x W_xz + h W_hz + b_z),  r = ract(x W_xr + h W_hr + b_r)
 *   reset_after (default): g = hact(x W_xg + b_ih_g + r * (h W_hg + b_hh_g))
 *   otherwise:             g = hact(x W_xg + (r * h) W_hg + b_ih_g + b_hh_g)
 *   h' = z * h + (1 - z) * g
 * where b_z is bias_ih + bias_hh (or bias_h with integrate_bias, whose g
 * part is added outside r * (...)). gru runs a [B, 1, T, F] sequence from a
 * zero state (rnn_gru_run.c); grucell is one step from the state given as
 * its second input. A step keeps its gates [z, r, g] after their
 * activations, as three [B, U] blocks, for the backward, which recomputes
 * h W_hg + b_hh_g (reset_after) rather than keeping it, works on the gate
 * blocks, then lays their derivatives side by side as weight_ih's
 * columns (one permute, after the last read of the gates, which it may
 * overwrite: rnn_gru_run.c) for the products of the weight gradients. */
#include "layers/rnn_gru_run.h"

static unsigned gru_saved(const nnt_rg_props *p) {
  (void)p;
  return 3;
}

/* Column block j of a [rows, 3U] matrix. */
#define COL(m, j) ((m) + (size_t)(j) * U)

/* reset_after's h W_hg + b_hh_g into n [B, U] (zeros and the bias for the
 * zero state), for the forward and again for the backward. */
static int gru_hg(const nnt_rg_step *s, float *n) {
  const nnt_kernels *k = s->k;
  const nnt_rg_w *w = s->w;
  size_t B = s->B, U = s->p->r.unit, U3 = 3 * U;
  if (s->hprev)
    NNT_TRY(k->gemm(k, 0, 0, B, U, U, 1.0f, s->hprev, U, COL(w->whh, 2), U3, 0.0f, n, U));
  else
    NNT_TRY(k->fill(k, B * U, 0.0f, n));
  return w->bhh ? k->add_row_vec(k, B, U, COL(w->bhh, 2), n) : NNT_OK;
}

/* h' = g + z * (h - g), times the mask, from the kept z and g: the end of
 * the forward step, and the backward's recomputation of a state. */
static int gru_state(const nnt_rg_step *s) {
  const nnt_kernels *k = s->k;
  size_t bu = s->B * s->p->r.unit;
  const float *z = s->gates, *g = z + 2 * bu, *hp = s->hprev;
  float *h = s->h;
  if (hp) {
    NNT_TRY(k->sub(k, bu, hp, g, h));
    NNT_TRY(k->mul(k, bu, z, h, h));
    NNT_TRY(k->add(k, bu, g, h, h));
  } else {
    NNT_TRY(k->mul(k, bu, z, g, h));
    NNT_TRY(k->sub(k, bu, g, h, h));
  }
  return s->mask ? k->mul(k, bu, h, s->mask, h) : NNT_OK;
}

static int gru_fwd(const nnt_rg_step *s) {
  const nnt_kernels *k = s->k;
  const nnt_rg_w *w = s->w;
  size_t B = s->B, U = s->p->r.unit, bu = B * U, U3 = 3 * U;
  nnt_act act = s->p->r.act, ract = s->p->r.ract;
  float *z = s->gates, *r = z + bu, *g = r + bu, *h = s->h; /* h is work until the end */
  const float *hp = s->hprev;
  for (int j = 0; j < 3; j++) {
    float *blk = z + j * bu;
    NNT_TRY(k->gemm(k, 0, 0, B, U, s->F, 1.0f, s->x, s->ldx, COL(w->wih, j), U3, 0.0f, blk, U));
    if (hp && j < 2)
      NNT_TRY(k->gemm(k, 0, 0, B, U, U, 1.0f, hp, U, COL(w->whh, j), U3, 1.0f, blk, U));
    if (w->bh)
      NNT_TRY(k->add_row_vec(k, B, U, COL(w->bh, j), blk));
    if (w->bih)
      NNT_TRY(k->add_row_vec(k, B, U, COL(w->bih, j), blk));
    if (w->bhh && (j < 2 || !s->p->reset_after))
      NNT_TRY(k->add_row_vec(k, B, U, COL(w->bhh, j), blk));
  }
  NNT_TRY(k->act_fwd(k, ract, nnt_rnn_alpha(ract), 2 * bu, z, z));
  if (s->p->reset_after) {
    NNT_TRY(gru_hg(s, h));
    NNT_TRY(k->mul(k, bu, h, r, h));
    NNT_TRY(k->add(k, bu, g, h, g));
  } else if (hp) {
    NNT_TRY(k->mul(k, bu, r, hp, h));
    NNT_TRY(k->gemm(k, 0, 0, B, U, U, 1.0f, h, U, COL(w->whh, 2), U3, 1.0f, g, U));
  }
  NNT_TRY(k->act_fwd(k, act, nnt_rnn_alpha(act), bu, g, g));
  return gru_state(s);
}

/* The candidate's recurrent part: dg (after hact's derivative) into dr
 * (before ract's), dhprev and the g columns of the gradients; tmp is
 * [B, U] of work. */
static int gru_bwd_candidate(const nnt_rg_step *s, const float *dg, float *dr, float *tmp) {
  const nnt_kernels *k = s->k;
  const nnt_rg_w *w = s->w;
  size_t B = s->B, U = s->p->r.unit, bu = B * U, U3 = 3 * U;
  const float *r = s->gates + bu, *hp = s->hprev;
  if (s->p->reset_after) {
    /* n = h W_hg + b_hh_g again; dr = dg * n; dn = dg * r */
    NNT_TRY(gru_hg(s, tmp));
    NNT_TRY(k->mul(k, bu, dg, tmp, dr));
    NNT_TRY(k->mul(k, bu, dg, r, tmp));
    if (w->gbhh)
      NNT_TRY(k->sum_rows(k, B, U, tmp, 1.0f, COL(w->gbhh, 2)));
    if (hp && w->gwhh)
      NNT_TRY(k->gemm(k, 1, 0, U, U, B, 1.0f, hp, U, tmp, U, 1.0f, COL(w->gwhh, 2), U3));
    if (s->dhprev)
      NNT_TRY(k->gemm(k, 0, 1, B, U, U, 1.0f, tmp, U, COL(w->whh, 2), U3, 1.0f, s->dhprev, U));
    return NNT_OK;
  }
  if (w->gbhh)
    NNT_TRY(k->sum_rows(k, B, U, dg, 1.0f, COL(w->gbhh, 2)));
  if (!hp)
    return k->fill(k, bu, 0.0f, dr);
  /* d(r * h) = dg W_hg^T */
  NNT_TRY(k->gemm(k, 0, 1, B, U, U, 1.0f, dg, U, COL(w->whh, 2), U3, 0.0f, tmp, U));
  NNT_TRY(k->mul(k, bu, tmp, hp, dr));
  if (s->dhprev) {
    NNT_TRY(k->mul(k, bu, tmp, r, tmp));
    NNT_TRY(k->add(k, bu, s->dhprev, tmp, s->dhprev));
  }
  if (w->gwhh) {
    NNT_TRY(k->mul(k, bu, r, hp, tmp));
    NNT_TRY(k->gemm(k, 1, 0, U, U, B, 1.0f, tmp, U, dg, U, 1.0f, COL(w->gwhh, 2), U3));
  }
  return NNT_OK;
}

static int gru_bwd(const nnt_rg_step *s) {
  const nnt_kernels *k = s->k;
  const nnt_rg_w *w = s->w;
  size_t B = s->B, U = s->p->r.unit, bu = B * U, U3 = 3 * U;
  nnt_act act = s->p->r.act, ract = s->p->r.ract;
  const float *z = s->gates, *g = z + 2 * bu, *hp = s->hprev;
  float *dz = s->work, *dr = dz + bu, *dg = dr + bu, *tmp = dg + bu, *dh = s->dh;
  if (s->mask)
    NNT_TRY(k->mul(k, bu, dh, s->mask, dh));
  /* dg = dh * (1 - z); dz = dh * (h - g); dhprev = dh * z */
  NNT_TRY(k->mul(k, bu, dh, z, dg));
  NNT_TRY(k->sub(k, bu, dh, dg, dg));
  if (hp) {
    NNT_TRY(k->sub(k, bu, hp, g, dz));
    NNT_TRY(k->mul(k, bu, dz, dh, dz));
  } else {
    NNT_TRY(k->mul(k, bu, g, dh, dz));
    NNT_TRY(k->scale(k, bu, -1.0f, dz));
  }
  if (s->dhprev)
    NNT_TRY(k->mul(k, bu, dh, z, s->dhprev));
  NNT_TRY(k->act_bwd(k, ract, nnt_rnn_alpha(ract), bu, NULL, z, dz, dz));
  NNT_TRY(k->act_bwd(k, act, nnt_rnn_alpha(act), bu, NULL, g, dg, dg));
  NNT_TRY(gru_bwd_candidate(s, dg, dr, tmp));
  NNT_TRY(k->act_bwd(k, ract, nnt_rnn_alpha(ract), bu, NULL, z + bu, dr, dr));
  if (w->gbhh)
    for (int j = 0; j < 2; j++)
      NNT_TRY(k->sum_rows(k, B, U, dz + j * bu, 1.0f, COL(w->gbhh, j)));
  /* [z, r, g] blocks side by side: d [B, 3U] */
  static const unsigned perm[3] = {1, 0, 2};
  const unsigned dims[3] = {3, (unsigned)B, (unsigned)U};
  float *d = s->d;
  NNT_TRY(k->permute3(k, 1, dims, perm, dz, d));
  if (w->gbh)
    NNT_TRY(k->sum_rows(k, B, U3, d, 1.0f, w->gbh));
  if (w->gbih)
    NNT_TRY(k->sum_rows(k, B, U3, d, 1.0f, w->gbih));
  if (w->gwih)
    NNT_TRY(k->gemm(k, 1, 0, s->F, U3, B, 1.0f, s->x, s->ldx, d, U3, 1.0f, w->gwih, U3));
  if (hp && w->gwhh)
    NNT_TRY(k->gemm(k, 1, 0, U, 2 * U, B, 1.0f, hp, U, d, U3, 1.0f, w->gwhh, U3));
  if (s->dhprev)
    NNT_TRY(k->gemm(k, 0, 1, B, U, 2 * U, 1.0f, d, U3, w->whh, U3, 1.0f, s->dhprev, U));
  return NNT_OK;
}

static const nnt_rg_kind gru_kind = {
    .type = "gru", .keys = NNT_RG_K_RETURN_SEQ | NNT_RG_K_RECURRENT | NNT_RG_K_RESET, .gates = 3,
    .saved = gru_saved, .d_after_gates = 1, .fwd = gru_fwd, .bwd = gru_bwd, .state = gru_state};
static const nnt_rg_kind grucell_kind = {
    .type = "grucell", .keys = NNT_RG_K_RECURRENT | NNT_RG_K_RESET, .gates = 3,
    .saved = gru_saved, .d_after_gates = 1, .fwd = gru_fwd, .bwd = gru_bwd};

/* ML_TRAIN_LAYER_TYPE_GRU and ML_TRAIN_LAYER_TYPE_GRUCELL */
NNT_RG_LAYER(gru, gru_kind, seq, 14);
NNT_RG_LAYER(grucell, grucell_kind, cell, 21);
