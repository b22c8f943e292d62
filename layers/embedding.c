/* embedding: token indices to vectors. The input b:1:1:T holds indices as
 * floats (truncated toward zero, NNTrainer's cast); the output b:1:T:out_dim
 * holds row i of the weight "Embedding" [in_dim, out_dim] for index i.
 * zero_idx_mask = k: index k gives zeros and its row gets no gradient. The
 * gradient is a scatter-add of the output's derivative into the rows the
 * batch named (every backend adds in the same order); there is no
 * derivative into the indices, so a trainable layer before an embedding is
 * refused at compile, as NNTrainer refuses it. An index outside [0, in_dim)
 * reads nothing: its output row is NaN (the non-finite check names this
 * layer) and the CPU's forward fails with NNT_ERR_INVAL. */
#include "nntrainer/layer.h"

typedef struct emb_priv {
  unsigned in_dim, out_dim;
  int has_mask;
  unsigned mask;
  nnt_weight_props wp;
} emb_priv;

static void emb_init(nnt_layer *l) {
  emb_priv *p = l->priv;
  nnt_weight_props_init(&p->wp);
}

static int emb_set(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  emb_priv *p = l->priv;
  if (nnt_streq(key, "in_dim"))
    return nnt_parse_positive_uint(key, value, &p->in_dim, e);
  if (nnt_streq(key, "out_dim"))
    return nnt_parse_positive_uint(key, value, &p->out_dim, e);
  if (nnt_streq(key, "zero_idx_mask")) {
    int rc = nnt_parse_uint(key, value, &p->mask, e);
    p->has_mask = !rc;
    return rc;
  }
  return nnt_weight_props_set(&p->wp, key, value, e);
}

static int emb_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  emb_priv *p = l->priv;
  if (!p->in_dim)
    return nnt_err_set(e, NNT_ERR_INVAL, "in_dim: required key is missing");
  if (!p->out_dim)
    return nnt_err_set(e, NNT_ERR_INVAL, "out_dim: required key is missing");
  if (p->in_dim >= (1u << 31))
    return nnt_err_set(e, NNT_ERR_INVAL, "key 'in_dim': %u is more than 2^31 - 1", p->in_dim);
  if (p->has_mask && p->mask >= p->in_dim)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "key 'zero_idx_mask': %u is not an index below in_dim (%u)", p->mask,
                       p->in_dim);
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "embedding takes one input, not %u", ctx->n_in);
  nnt_dim in = ctx->in_dim[0];
  if (in.c != 1 || in.h != 1)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "embedding takes indices of shape 1:1:T, not %u:%u:%u (channel and "
                       "height must be 1)", in.c, in.h, in.w);
  ctx->out_dim[0] = nnt_dim_make(in.b, 1, in.w, p->out_dim);
  /* fans from the shape [in_dim, out_dim], as fully_connected's */
  unsigned fan_in = p->in_dim == 1 ? p->out_dim : p->in_dim;
  nnt_fctx_add_weight(ctx, "Embedding", nnt_dim_make(1, 1, p->in_dim, p->out_dim),
                      p->wp.weight_init, fan_in, p->out_dim,
                      p->wp.l2norm ? p->wp.l2_constant : 0, p->wp.weight_decay, 1);
  ctx->flags = NNT_LF_BWD_READS_INPUT | NNT_LF_INDEX_INPUT;
  return NNT_OK;
}

static size_t emb_mask(const emb_priv *p) { return p->has_mask ? p->mask : p->in_dim; }

static int emb_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  emb_priv *p = l->priv;
  const nnt_tensor *x = &ctx->in[0];
  return ctx->k->gather_rows(ctx->k, nnt_tensor_len(x), p->out_dim, p->in_dim, x->data,
                             ctx->w[0].data, emb_mask(p), ctx->out[0].data);
}

static int emb_gradient(nnt_layer *l, nnt_run_ctx *ctx) {
  emb_priv *p = l->priv;
  const nnt_tensor *x = &ctx->in[0];
  if (!ctx->gw[0].data)
    return NNT_OK;
  return ctx->k->scatter_add_rows(ctx->k, nnt_tensor_len(x), p->out_dim, p->in_dim, x->data,
                                  ctx->d_out[0].data, emb_mask(p), ctx->gw[0].data);
}

/* The bias keys (shared with fully_connected) change nothing here: said,
 * not silently dropped. */
static void emb_log_defaults(const nnt_layer *l) {
  const emb_priv *p = l->priv;
  if (p->wp.bias_init != NNT_INIT_ZEROS || p->wp.bias_decay != 0 || p->wp.disable_bias)
    nnt_log(NNT_LOG_WARNING,
            "layer '%s' (embedding): keys 'bias_initializer', 'bias_decay' and 'disable_bias' "
            "are ignored: the layer has no bias", l->name);
}

const nnt_layer_ops nnt_layer_embedding = {
    .type = "embedding",
    .ml_type = 10, /* ML_TRAIN_LAYER_TYPE_EMBEDDING */
    .priv_size = sizeof(emb_priv),
    .init = emb_init,
    .set_property = emb_set,
    .log_defaults = emb_log_defaults,
    .finalize = emb_finalize,
    .forward = emb_forward,
    .calc_gradient = emb_gradient,
    .kops = NNT_KOP_BIT(GATHER_ROWS) | NNT_KOP_BIT(SCATTER_ADD_ROWS),
};
