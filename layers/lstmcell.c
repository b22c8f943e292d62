/* lstmcell: one LSTM time step as a layer (NNTrainer's LSTMCellLayer), for
 * a graph that unrolls it over time with shared weights. Inputs: x [b, 1,
 * 1, feature], the previous hidden state [b, 1, 1, unit] and the previous
 * cell state [b, 1, 1, unit]; outputs: the new hidden state and the new
 * cell state, each [b, 1, 1, unit]. Keys: unit, hidden_state_activation,
 * recurrent_activation, dropout_rate, integrate_bias and the weight keys;
 * weights weight_ih, weight_hh, then bias_h or bias_ih, bias_hh, as lstm's.
 * The step is lstm_core's. Scratch: 0, kept for the backward in training:
 * the activated gates and the dropout mask; 1, the forward's work (and the
 * gates where 0 is absent); 2, the backward's. calc_gradient writes dW
 * only; calc_derivative recomputes the step's element-wise backward (cheap)
 * and writes dx, d(previous hidden state) and d(previous cell state). */
#include "layers/lstm_core.h"
#include "layers/recurrent.h"

typedef struct lstmcell_priv {
  nnt_rnn_props rp;
  nnt_weight_props wp;
} lstmcell_priv;

static void lstmcell_init(nnt_layer *l) {
  lstmcell_priv *p = l->priv;
  nnt_rnn_props_init(&p->rp, NNT_ACT_TANH, NNT_ACT_SIGMOID);
  nnt_weight_props_init(&p->wp);
}

static int lstmcell_set(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  lstmcell_priv *p = l->priv;
  /* a single step: no sequence keys */
  if (nnt_streq(key, "return_sequences") || nnt_streq(key, "bidirectional") ||
      nnt_streq(key, "max_timestep"))
    return NNT_ERR_NOKEY;
  int rc = nnt_rnn_props_set(&p->rp, key, value, e);
  return rc == NNT_ERR_NOKEY ? nnt_weight_props_set(&p->wp, key, value, e) : rc;
}

static unsigned lstmcell_nw(const lstmcell_priv *p) {
  return 2u + (p->wp.disable_bias ? 0u : p->rp.integrate_bias ? 1u : 2u);
}

static int lstmcell_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  lstmcell_priv *p = l->priv;
  static const char *const what[3] = {"the input", "the hidden state", "the cell state"};
  if (!p->rp.unit)
    return nnt_err_set(e, NNT_ERR_INVAL, "unit: required key is missing");
  if (ctx->n_in != 3)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "lstmcell takes 3 inputs (the input, the hidden state, the cell "
                       "state), not %u",
                       ctx->n_in);
  unsigned u = p->rp.unit, b = ctx->in_dim[0].b, feat = ctx->in_dim[0].w;
  for (unsigned i = 0; i < 3; i++) {
    nnt_dim d = ctx->in_dim[i];
    if (d.c != 1 || d.h != 1 || (i && d.w != u))
      return nnt_err_set(e, NNT_ERR_INVAL, "lstmcell: %s (input %u) is %u:%u:%u; it must be "
                         "1:1:%s%u", what[i], i, d.c, d.h, d.w, i ? "" : "feature, not ",
                         i ? u : d.w);
  }
  int rc;
  if (u > UINT_MAX / 16 || (rc = nnt_check_gemm_dim(4 * (size_t)u, "4 x unit", e)) ||
      (rc = nnt_check_gemm_dim(feat, "input width", e)))
    return u > UINT_MAX / 16 ? nnt_err_set(e, NNT_ERR_INVAL, "key 'unit': %u is too large", u)
                             : rc;
  ctx->n_out = 2;
  ctx->out_dim[0] = ctx->out_dim[1] = nnt_dim_make(b, 1, 1, u);
  unsigned fan = feat == 1 ? 4 * u : feat, fanh = u == 1 ? 4 * u : u;
  float l2 = p->wp.l2norm ? p->wp.l2_constant : 0;
  nnt_fctx_add_weight(ctx, "weight_ih", nnt_dim_make(1, 1, feat, 4 * u), p->wp.weight_init, fan,
                      4 * u, l2, p->wp.weight_decay, 1);
  nnt_fctx_add_weight(ctx, "weight_hh", nnt_dim_make(1, 1, u, 4 * u), p->wp.weight_init, fanh,
                      4 * u, l2, p->wp.weight_decay, 1);
  static const char *const bname[3] = {"bias_h", "bias_ih", "bias_hh"};
  for (unsigned i = 2; i < lstmcell_nw(p); i++)
    nnt_fctx_add_weight(ctx, bname[p->rp.integrate_bias ? 0 : i - 1],
                        nnt_dim_make(1, 1, 1, 4 * u), p->wp.bias_init, 4 * u, 4 * u, 0,
                        p->wp.bias_decay, 1);
  nnt_fctx_add_scratch(ctx, nnt_dim_make(b, p->rp.dropout_rate > 0 ? 5 : 4, 1, u),
                       NNT_SCRATCH_SAVED);
  nnt_fctx_add_scratch(ctx, nnt_dim_make(b, 9, 1, u), NNT_SCRATCH_FWD);
  nnt_fctx_add_scratch(ctx, nnt_dim_make(b, 12, 1, u), NNT_SCRATCH_BWD);
  ctx->flags = NNT_LF_BWD_READS_INPUT | NNT_LF_BWD_READS_OUTPUT;
  return NNT_OK;
}

static void lstmcell_cfg(const lstmcell_priv *p, const nnt_run_ctx *ctx, nnt_lstm_cfg *cfg) {
  unsigned nw = lstmcell_nw(p);
  cfg->b = ctx->in[0].dim.b, cfg->u = p->rp.unit, cfg->feat = ctx->in[0].dim.w;
  cfg->act = p->rp.act, cfg->ract = p->rp.ract;
  cfg->w_ih = ctx->w[0].data, cfg->w_hh = ctx->w[1].data;
  cfg->bias[0] = nw > 2 ? ctx->w[2].data : NULL;
  cfg->bias[1] = nw > 3 ? ctx->w[3].data : NULL;
}

static int lstmcell_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  lstmcell_priv *p = l->priv;
  const nnt_kernels *k = ctx->k;
  nnt_lstm_cfg cfg;
  lstmcell_cfg(p, ctx, &cfg);
  size_t bu = cfg.b * cfg.u;
  float *S = ctx->scratch[0].data, *F = ctx->scratch[1].data;
  nnt_lstm_fwd_io io = {.x = ctx->in[0].data, .ldx = cfg.feat, .h_prev = ctx->in[1].data,
                        .c_prev = ctx->in[2].data, .z = F, .tmp = F + 4 * bu,
                        .gates = S ? S : F + 5 * bu, .h = ctx->out[0].data,
                        .c = ctx->out[1].data};
  if (ctx->training && S && p->rp.dropout_rate > 0) {
    NNT_TRY(k->dropout_mask(k, bu, p->rp.dropout_rate, ctx->seed, ctx->stream, S + 4 * bu));
    io.mask = S + 4 * bu;
  }
  return nnt_lstm_step_fwd(k, &cfg, &io);
}

/* The step's backward: dz into scratch 2; d is 0 in calc_gradient (dW),
 * 1 in calc_derivative (the state derivatives). */
static int lstmcell_bwd(lstmcell_priv *p, nnt_run_ctx *ctx, int d) {
  const nnt_kernels *k = ctx->k;
  nnt_lstm_cfg cfg;
  lstmcell_cfg(p, ctx, &cfg);
  size_t bu = cfg.b * cfg.u;
  float *S = ctx->scratch[0].data, *B = ctx->scratch[2].data;
  const float *dh = ctx->d_out[0].data;
  if (!dh) { /* no consumer of the hidden state */
    NNT_TRY(k->fill(k, bu, 0.0f, B + 11 * bu));
    dh = B + 11 * bu;
  }
  nnt_lstm_bwd_io io = {.x = ctx->in[0].data, .ldx = cfg.feat, .h_prev = ctx->in[1].data,
                        .c_prev = ctx->in[2].data, .gates = S, .c = ctx->out[1].data,
                        .dh = dh, .dc = ctx->d_out[1].data, .dz = B, .work = B + 4 * bu};
  io.mask = p->rp.dropout_rate > 0 ? S + 4 * bu : NULL;
  if (d) {
    io.dh_prev = ctx->d_in[1].data, io.dc_prev = ctx->d_in[2].data;
  } else {
    unsigned nw = lstmcell_nw(p);
    io.g_ih = ctx->gw[0].data, io.g_hh = ctx->gw[1].data;
    io.g_bias = nw > 2 ? ctx->gw[2].data : NULL;
  }
  NNT_TRY(nnt_lstm_step_bwd(k, &cfg, &io));
  if (!d && lstmcell_nw(p) > 3 && io.g_bias)
    NNT_TRY(k->copy(k, 4 * cfg.u, ctx->gw[2].data, ctx->gw[3].data));
  return NNT_OK;
}

static int lstmcell_gradient(nnt_layer *l, nnt_run_ctx *ctx) {
  return lstmcell_bwd(l->priv, ctx, 0);
}

static int lstmcell_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  lstmcell_priv *p = l->priv;
  NNT_TRY(lstmcell_bwd(p, ctx, 1));
  if (!ctx->d_in[0].data)
    return NNT_OK;
  size_t b = ctx->in[0].dim.b, feat = ctx->in[0].dim.w, g4 = 4 * (size_t)p->rp.unit;
  return ctx->k->gemm(ctx->k, 0, 1, b, feat, g4, 1.0f, ctx->scratch[2].data, g4,
                      ctx->w[0].data, g4, 0.0f, ctx->d_in[0].data, feat);
}

const nnt_layer_ops nnt_layer_lstmcell = {
    .type = "lstmcell",
    .ml_type = 20, /* ML_TRAIN_LAYER_TYPE_LSTMCELL */
    .priv_size = sizeof(lstmcell_priv),
    .init = lstmcell_init,
    .set_property = lstmcell_set,
    .finalize = lstmcell_finalize,
    .forward = lstmcell_forward,
    .calc_gradient = lstmcell_gradient,
    .calc_derivative = lstmcell_derivative,
    .kops = NNT_LSTM_CORE_KOPS | NNT_KOP_BIT(DROPOUT_MASK) | NNT_KOP_BIT(COPY),
};
