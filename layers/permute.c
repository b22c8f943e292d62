/* permute: reorder the c, h, w axes; direction lists the input axis (1 c,
 * 2 h, 3 w) of each output axis, as NNTrainer writes it ("3,1,2"). */
#include "nntrainer/layer.h"

typedef struct permute_priv {
  int set;
  unsigned perm[3], inv[3], in_d[3], out_d[3];
} permute_priv;

static int permute_set(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  permute_priv *p = l->priv;
  if (!nnt_streq(key, "direction"))
    return NNT_ERR_NOKEY;
  unsigned v[3], n, seen = 0;
  int rc = nnt_parse_uint_list(key, value, v, 3, &n, e);
  if (rc)
    return rc;
  for (unsigned i = 0; i < n; i++)
    if (v[i] >= 1 && v[i] <= 3)
      seen |= 1u << v[i];
  if (n != 3 || seen != 0xe)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "key 'direction': '%s' is not a permutation of 1,2,3", value);
  for (unsigned i = 0; i < 3; i++) {
    p->perm[i] = v[i] - 1;
    p->inv[v[i] - 1] = i;
  }
  p->set = 1;
  return NNT_OK;
}

static int permute_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  permute_priv *p = l->priv;
  if (!p->set)
    return nnt_err_set(e, NNT_ERR_INVAL, "direction: required key is missing");
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "permute takes one input, not %u", ctx->n_in);
  nnt_dim d = ctx->in_dim[0];
  p->in_d[0] = d.c, p->in_d[1] = d.h, p->in_d[2] = d.w;
  for (unsigned i = 0; i < 3; i++)
    p->out_d[i] = p->in_d[p->perm[i]];
  ctx->out_dim[0] = nnt_dim_make(d.b, p->out_d[0], p->out_d[1], p->out_d[2]);
  ctx->flags = 0;
  return NNT_OK;
}

static int permute_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  permute_priv *p = l->priv;
  NNT_TRY(ctx->k->permute3(ctx->k, ctx->in[0].dim.b, p->in_d, p->perm, ctx->in[0].data,
                           ctx->out[0].data));
  return NNT_OK;
}

static int permute_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  permute_priv *p = l->priv;
  NNT_TRY(ctx->k->permute3(ctx->k, ctx->d_out[0].dim.b, p->out_d, p->inv, ctx->d_out[0].data,
                           ctx->d_in[0].data));
  return NNT_OK;
}

const nnt_layer_ops nnt_layer_permute = {
    .type = "permute",
    .ml_type = 15,
    .priv_size = sizeof(permute_priv),
    .set_property = permute_set,
    .finalize = permute_finalize,
    .forward = permute_forward,
    .calc_derivative = permute_derivative,
    .kops = NNT_KOP_BIT(PERMUTE3),
};
