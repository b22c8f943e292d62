/* pooling2d: max, average, global_max, global_average. Average divides by
 * the whole window, padding included. Max keeps each maximum's position in
 * a scratch tensor for the backward pass, so it reads neither its input nor
 * its output there. */
#include <stdint.h>
#include "nntrainer/layer.h"

/* Max pooling's scratch holds positions within an input plane as floats,
 * which are exact integers up to 2^24: a larger plane would route
 * gradients to the wrong place, or past the plane's end. */
#define POOL_IDX_MAX (1u << 24)

typedef struct pool_priv {
  int mode; /* -1 unset, 0 max, 1 average */
  int global;
  nnt_window_props win;
  nnt_conv_geom g;
} pool_priv;

/* Defaults: stride 1 and padding valid, as in NNTrainer (whose stride does
 * not follow the pool size); pool_size 2,2, where NNTrainer has none. */
static void pool_init(nnt_layer *l) {
  pool_priv *p = l->priv;
  p->mode = -1;
  nnt_window_props_init(&p->win);
  p->win.k[0] = p->win.k[1] = 2;
}

static void pool_log_defaults(const nnt_layer *l) {
  const pool_priv *p = l->priv;
  if (!p->global) {
    if (!nnt_layer_has_key(l, "pool_size"))
      nnt_layer_notice_default(l, "pool_size", "2,2", "NNTrainer has no default: give it");
    return;
  }
  static const char *const ignored[] = {"pool_size", "stride", "padding"};
  for (size_t i = 0; i < NNT_ARRAY_LEN(ignored); i++)
    if (nnt_layer_has_key(l, ignored[i]))
      nnt_log(NNT_LOG_WARNING,
              "layer '%s' (pooling2d): key '%s' is ignored: global pooling takes the whole "
              "input", l->name, ignored[i]);
}

static int pool_set(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  pool_priv *p = l->priv;
  if (nnt_streq(key, "pooling")) {
    static const char *const names[] = {"max", "average", "global_max", "global_average"};
    for (int i = 0; i < 4; i++)
      if (nnt_streq(value, names[i])) {
        p->mode = i % 2;
        p->global = i >= 2;
        return NNT_OK;
      }
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "key 'pooling': unknown pooling '%s' (max, average, global_max, "
                       "global_average)", value);
  }
  return nnt_window_props_set(&p->win, key, "pool_size", value, 0, e);
}

static int pool_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  pool_priv *p = l->priv;
  if (p->mode < 0)
    return nnt_err_set(e, NNT_ERR_INVAL, "pooling: required key is missing");
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "pooling2d takes one input, not %u", ctx->n_in);
  nnt_dim in = ctx->in_dim[0];
  nnt_window_props w = p->win;
  if (p->global) {
    nnt_window_props_init(&w);
    w.k[0] = in.h, w.k[1] = in.w;
  }
  int rc = nnt_window_geom(&w, in, "pool_size", &p->g, e);
  if (rc)
    return rc;
  unsigned area; /* average divides by it */
  if (nnt_axis_mul(p->g.kh, p->g.kw, &area))
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "%s: a window of %u x %u has more than %u positions",
                       p->global ? "pooling" : "pool_size", p->g.kh, p->g.kw, UINT32_MAX);
  uint64_t plane = (uint64_t)in.h * in.w;
  if (p->mode == 0 && plane > POOL_IDX_MAX)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "pooling: max pooling keeps each maximum's position as a float, exact "
                       "up to %u; the input plane %u x %u = %llu is larger",
                       POOL_IDX_MAX, in.h, in.w, (unsigned long long)plane);
  ctx->out_dim[0] = nnt_dim_make(in.b, in.c, p->g.oh, p->g.ow);
  if (p->mode == 0)
    nnt_fctx_add_scratch(ctx, ctx->out_dim[0], NNT_SCRATCH_ITER);
  ctx->flags = 0;
  return NNT_OK;
}

static int pool_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  pool_priv *p = l->priv;
  NNT_TRY(ctx->k->pool_fwd(ctx->k, &p->g, ctx->in[0].dim.b, p->mode, ctx->in[0].data,
                           ctx->out[0].data, p->mode == 0 ? ctx->scratch[0].data : NULL));
  return NNT_OK;
}

static int pool_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  pool_priv *p = l->priv;
  NNT_TRY(ctx->k->pool_bwd(ctx->k, &p->g, ctx->d_in[0].dim.b, p->mode, ctx->d_out[0].data,
                           p->mode == 0 ? ctx->scratch[0].data : NULL, ctx->d_in[0].data));
  return NNT_OK;
}

const nnt_layer_ops nnt_layer_pooling2d = {
    .type = "pooling2d",
    .ml_type = 4,
    .priv_size = sizeof(pool_priv),
    .init = pool_init,
    .set_property = pool_set,
    .finalize = pool_finalize,
    .forward = pool_forward,
    .calc_derivative = pool_derivative,
    .log_defaults = pool_log_defaults,
    .kops = NNT_KOP_BIT(POOL_FWD) | NNT_KOP_BIT(POOL_BWD),
};
