/* One LSTM time step, forward and backward (lstm_core.h). */
#include "layers/lstm_core.h"
#include "layers/recurrent.h"

int nnt_lstm_step_fwd(const nnt_kernels *k, const nnt_lstm_cfg *cfg, const nnt_lstm_fwd_io *io) {
  size_t b = cfg->b, u = cfg->u, bu = b * u, g4 = 4 * u;
  float *gi = io->gates, *gg = gi + 2 * bu, *go = gg + bu;
  float ar = nnt_rnn_alpha(cfg->ract), ah = nnt_rnn_alpha(cfg->act);
  NNT_TRY(k->gemm(k, 0, 0, b, g4, cfg->feat, 1.0f, io->x, io->ldx, cfg->w_ih, g4, 0.0f, io->z,
                  g4));
  if (io->h_prev)
    NNT_TRY(k->gemm(k, 0, 0, b, g4, u, 1.0f, io->h_prev, u, cfg->w_hh, g4, 1.0f, io->z, g4));
  for (int i = 0; i < 2; i++)
    if (cfg->bias[i])
      NNT_TRY(k->add_row_vec(k, b, g4, cfg->bias[i], io->z));
  /* [b][4][u] -> [4][b][u] */
  static const unsigned perm[3] = {1, 0, 2};
  unsigned d[3] = {(unsigned)b, 4, (unsigned)u};
  NNT_TRY(k->permute3(k, 1, d, perm, io->z, io->gates));
  NNT_TRY(k->act_fwd(k, cfg->ract, ar, 2 * bu, gi, gi));
  NNT_TRY(k->act_fwd(k, cfg->act, ah, bu, gg, gg));
  NNT_TRY(k->act_fwd(k, cfg->ract, ar, bu, go, go));
  return nnt_lstm_cell(k, cfg, io->gates, io->c_prev, io->mask, io->tmp, io->c, io->h);
}

int nnt_lstm_cell(const nnt_kernels *k, const nnt_lstm_cfg *cfg, const float *gates,
                  const float *c_prev, const float *mask, float *tmp, float *c, float *h) {
  size_t bu = cfg->b * cfg->u;
  const float *gi = gates, *gf = gi + bu, *gg = gf + bu, *go = gg + bu;
  NNT_TRY(k->mul(k, bu, gi, gg, c));
  if (c_prev) {
    NNT_TRY(k->mul(k, bu, gf, c_prev, tmp));
    NNT_TRY(k->add(k, bu, tmp, c, c));
  }
  if (!h)
    return NNT_OK;
  NNT_TRY(k->act_fwd(k, cfg->act, nnt_rnn_alpha(cfg->act), bu, c, tmp));
  NNT_TRY(k->mul(k, bu, go, tmp, h));
  if (mask)
    NNT_TRY(k->mul(k, bu, h, mask, h));
  return NNT_OK;
}

int nnt_lstm_step_bwd(const nnt_kernels *k, const nnt_lstm_cfg *cfg, const nnt_lstm_bwd_io *io) {
  size_t b = cfg->b, u = cfg->u, bu = b * u, g4 = 4 * u;
  const float *gi = io->gates, *gf = gi + bu, *gg = gf + bu, *go = gg + bu;
  float ar = nnt_rnn_alpha(cfg->ract), ah = nnt_rnn_alpha(cfg->act);
  float *dhe = io->work, *tc = dhe + bu, *dct = tc + bu, *dg = dct + bu;
  float *dgi = dg, *dgf = dgi + bu, *dgg = dgf + bu, *dgo = dgg + bu;
  const float *dh = io->dh;
  if (io->mask) {
    NNT_TRY(k->mul(k, bu, dh, io->mask, dhe));
    dh = dhe;
  }
  const float *ac = io->act_c;
  if (!ac) {
    NNT_TRY(k->act_fwd(k, cfg->act, ah, bu, io->c, tc));
    ac = tc;
  }
  NNT_TRY(k->mul(k, bu, dh, ac, dgo));
  NNT_TRY(k->mul(k, bu, dh, go, dct));
  NNT_TRY(k->act_bwd(k, cfg->act, ah, bu, io->c, ac, dct, dct));
  if (io->dc)
    NNT_TRY(k->add(k, bu, dct, io->dc, dct));
  NNT_TRY(k->mul(k, bu, dct, gg, dgi));
  if (io->c_prev)
    NNT_TRY(k->mul(k, bu, dct, io->c_prev, dgf));
  else
    NNT_TRY(k->fill(k, bu, 0.0f, dgf));
  NNT_TRY(k->mul(k, bu, dct, gi, dgg));
  if (io->dc_prev)
    NNT_TRY(k->mul(k, bu, dct, gf, io->dc_prev));
  NNT_TRY(k->act_bwd(k, cfg->ract, ar, 2 * bu, NULL, gi, dgi, dgi));
  NNT_TRY(k->act_bwd(k, cfg->act, ah, bu, NULL, gg, dgg, dgg));
  NNT_TRY(k->act_bwd(k, cfg->ract, ar, bu, NULL, go, dgo, dgo));
  /* [4][b][u] -> [b][4][u] */
  static const unsigned perm[3] = {1, 0, 2};
  unsigned d[3] = {4, (unsigned)b, (unsigned)u};
  NNT_TRY(k->permute3(k, 1, d, perm, dg, io->dz));
  float beta = io->acc ? 1.0f : 0.0f;
  if (io->g_ih)
    NNT_TRY(k->gemm(k, 1, 0, cfg->feat, g4, b, 1.0f, io->x, io->ldx, io->dz, g4, beta, io->g_ih,
                    g4));
  if (io->g_hh) {
    if (io->h_prev)
      NNT_TRY(k->gemm(k, 1, 0, u, g4, b, 1.0f, io->h_prev, u, io->dz, g4, beta, io->g_hh, g4));
    else if (!io->acc)
      NNT_TRY(k->fill(k, u * g4, 0.0f, io->g_hh));
  }
  if (io->g_bias)
    NNT_TRY(k->sum_rows(k, b, g4, io->dz, beta, io->g_bias));
  if (io->dh_prev)
    NNT_TRY(k->gemm(k, 0, 1, b, u, g4, 1.0f, io->dz, g4, cfg->w_hh, g4, io->beta_dh, io->dh_prev,
                    u));
  return NNT_OK;
}
