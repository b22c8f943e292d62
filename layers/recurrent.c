/* The keys, shapes and time-axis moves every recurrent layer shares
 * (recurrent.h). */
#include "layers/recurrent.h"

void nnt_rnn_props_init(nnt_rnn_props *p, nnt_act act, nnt_act ract) {
  memset(p, 0, sizeof *p);
  p->act = act;
  p->ract = ract;
}

static int set_act(const char *key, const char *value, nnt_act *out, nnt_err *e) {
  nnt_act a;
  if (nnt_act_from_name(value, &a))
    return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': unknown activation '%s'", key, value);
  if (!nnt_act_bwd_needs_output_only(a) || a == NNT_ACT_SOFTMAX)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "key '%s': activation '%s' is not supported here (its derivative "
                       "needs its input; use tanh, sigmoid, relu, leaky_relu or none)",
                       key, value);
  *out = a;
  return NNT_OK;
}

int nnt_rnn_props_set(nnt_rnn_props *p, const char *key, const char *value, nnt_err *e) {
  if (nnt_streq(key, "unit"))
    return nnt_parse_positive_uint(key, value, &p->unit, e);
  if (nnt_streq(key, "hidden_state_activation"))
    return set_act(key, value, &p->act, e);
  if (nnt_streq(key, "recurrent_activation"))
    return set_act(key, value, &p->ract, e);
  if (nnt_streq(key, "return_sequences"))
    return nnt_parse_bool(key, value, &p->return_sequences, e);
  if (nnt_streq(key, "bidirectional"))
    return nnt_parse_bool(key, value, &p->bidirectional, e);
  if (nnt_streq(key, "integrate_bias"))
    return nnt_parse_bool(key, value, &p->integrate_bias, e);
  if (nnt_streq(key, "dropout_rate"))
    return nnt_parse_rate(key, value, &p->dropout_rate, e);
  if (nnt_streq(key, "max_timestep"))
    return nnt_parse_positive_uint(key, value, &p->max_timestep, e);
  return NNT_ERR_NOKEY;
}

float nnt_rnn_alpha(nnt_act a) { return a == NNT_ACT_LEAKY_RELU ? 0.01f : 1.0f; }

int nnt_rnn_check_input(const nnt_rnn_props *p, const nnt_finalize_ctx *ctx, const char *type,
                        unsigned *T, nnt_err *e) {
  if (!p->unit)
    return nnt_err_set(e, NNT_ERR_INVAL, "unit: required key is missing");
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "%s takes one input, not %u", type, ctx->n_in);
  nnt_dim in = ctx->in_dim[0];
  if (in.c != 1)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "%s: the input is %u:%u:%u; it must be 1:time:feature (one channel)",
                       type, in.c, in.h, in.w);
  if (p->max_timestep > in.h)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "key 'max_timestep': %u is more than the input's %u time steps", 
                       p->max_timestep, in.h);
  if (in.h > UINT_MAX / 2)
    return nnt_err_set(e, NNT_ERR_INVAL, "%s: %u time steps are too many", type, in.h);
  *T = in.h;
  return NNT_OK;
}

int nnt_rnn_out_fwd(const nnt_kernels *k, size_t T, unsigned dirs, size_t b, size_t u,
                    int return_sequences, const float *h, float *y) {
  static const unsigned perm[3] = {1, 0, 2};
  size_t steps = return_sequences ? T : 1;
  const float *from = return_sequences ? h : h + (T - 1) * dirs * b * u;
  unsigned d[3] = {(unsigned)(steps * dirs), (unsigned)b, (unsigned)u};
  return k->permute3(k, 1, d, perm, from, y);
}

int nnt_rnn_dh_in(const nnt_kernels *k, const float *dy, size_t T, unsigned dirs, size_t b,
                  size_t u, int return_sequences, size_t pos, unsigned d, float *dh) {
  if (!return_sequences && pos != T - 1)
    return k->fill(k, b * u, 0.0f, dh);
  size_t at = return_sequences ? pos : 0, steps = return_sequences ? T : 1;
  return k->copy2d(k, b, u, dy + (at * dirs + d) * u, steps * dirs * u, dh, u);
}

int nnt_rnn_dx(const nnt_kernels *k, size_t T, unsigned dirs, size_t b, size_t feat, size_t g,
               const float *dz, const float *const *w, float *dx) {
  for (size_t p = 0; p < T; p++)
    for (unsigned d = 0; d < dirs; d++)
      NNT_TRY(k->gemm(k, 0, 1, b, feat, g, 1.0f, dz + (p * dirs + d) * b * g, g, w[d], g,
                      d ? 1.0f : 0.0f, dx + p * feat, T * feat));
  return NNT_OK;
}
