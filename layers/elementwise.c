/* add, subtract, multiply, divide (NNTrainer's operation layers, types 32
 * to 35): y = a op b of two inputs of the same shape (NNTrainer broadcasts
 * the second input in its forward only; its backward copies a full-size
 * derivative into the smaller one, so training needs equal shapes there
 * too: other shapes are refused, naming both). NNTrainer's keys inplace and
 * inplace_direction are accepted (the planner decides in-place itself:
 * add and subtract may run in place, multiply and divide read their inputs
 * in the backward); print is accepted and, when true, ignored with a
 * warning (the library does not print). */
#include "nntrainer/layer.h"

typedef enum ew_op { EW_ADD, EW_SUB, EW_MUL, EW_DIV } ew_op;

typedef struct ew_priv {
  int print;
} ew_priv;


static ew_op op_of(const nnt_layer *l);

static int ew_set(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  ew_priv *p = l->priv;
  int b;
  if (nnt_streq(key, "print"))
    return nnt_parse_bool(key, value, &p->print, e);
  if (nnt_streq(key, "inplace"))
    return nnt_parse_bool(key, value, &b, e);
  if (nnt_streq(key, "inplace_direction")) {
    if (nnt_streq(value, "left") || nnt_streq(value, "right"))
      return NNT_OK;
    return nnt_err_set(e, NNT_ERR_INVAL, "key 'inplace_direction': '%s' is not left or right",
                       value);
  }
  return NNT_ERR_NOKEY;
}

static void ew_log_defaults(const nnt_layer *l) {
  const ew_priv *p = l->priv;
  if (p->print)
    nnt_log(NNT_LOG_WARNING, "layer '%s' (%s): key 'print' is ignored: the library does not "
            "print tensors", l->name, l->ops->type);
}

static int ew_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  const char *type = l->ops->type;
  if (ctx->n_in != 2)
    return nnt_err_set(e, NNT_ERR_INVAL, "%s takes two inputs, not %u", type, ctx->n_in);
  nnt_dim a = ctx->in_dim[0], b = ctx->in_dim[1];
  if (!nnt_dim_eq(a, b)) {
    char sa[64], sb[64];
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "%s takes two inputs of one shape: %s and %s differ (broadcasting is "
                       "not supported in training)", type, nnt_dim_str(a, sa, sizeof sa),
                       nnt_dim_str(b, sb, sizeof sb));
  }
  ctx->out_dim[0] = a;
  ew_op op = op_of(l);
  ctx->flags = op == EW_MUL || op == EW_DIV ? NNT_LF_BWD_READS_INPUT : NNT_LF_INPLACE;
  return NNT_OK;
}

static int ew_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  const nnt_kernels *k = ctx->k;
  size_t n = nnt_tensor_len(&ctx->out[0]);
  const float *a = ctx->in[0].data, *b = ctx->in[1].data;
  float *y = ctx->out[0].data;
  switch (op_of(l)) {
  case EW_ADD: return k->add(k, n, a, b, y);
  case EW_SUB: return k->sub(k, n, a, b, y);
  case EW_MUL: return k->mul(k, n, a, b, y);
  case EW_DIV: return k->div(k, n, a, b, y);
  }
  return NNT_ERR_INVAL;
}

/* d_in[1] first: d_in[0] may share d_out's memory (in place). */
static int ew_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  const nnt_kernels *k = ctx->k;
  size_t n = nnt_tensor_len(&ctx->d_out[0]);
  const float *dy = ctx->d_out[0].data, *a = ctx->in[0].data, *b = ctx->in[1].data;
  float *da = ctx->d_in[0].data, *db = ctx->d_in[1].data;
  switch (op_of(l)) {
  case EW_ADD:
  case EW_SUB:
    if (db) {
      NNT_TRY(k->copy(k, n, dy, db));
      if (op_of(l) == EW_SUB)
        NNT_TRY(k->scale(k, n, -1.0f, db));
    }
    return da ? k->copy(k, n, dy, da) : NNT_OK;
  case EW_MUL:
    if (db)
      NNT_TRY(k->mul(k, n, dy, a, db));
    return da ? k->mul(k, n, dy, b, da) : NNT_OK;
  case EW_DIV: /* d/db (a / b) = -a / b^2 */
    if (db) {
      NNT_TRY(k->mul(k, n, dy, a, db));
      NNT_TRY(k->div(k, n, db, b, db));
      NNT_TRY(k->div(k, n, db, b, db));
      NNT_TRY(k->scale(k, n, -1.0f, db));
    }
    return da ? k->div(k, n, dy, b, da) : NNT_OK;
  }
  return NNT_ERR_INVAL;
}

#define EW_LAYER(var, name, ml, ops)                                                      \
  const nnt_layer_ops var = {                                                             \
      .type = name,                                                                       \
      .ml_type = ml,                                                                      \
      .priv_size = sizeof(ew_priv),                                                       \
      .set_property = ew_set,                                                             \
      .finalize = ew_finalize,                                                            \
      .forward = ew_forward,                                                              \
      .calc_derivative = ew_derivative,                                                   \
      .log_defaults = ew_log_defaults,                                                    \
      .kops = ops,                                                                        \
  };
EW_LAYER(nnt_layer_add, "add", 32, NNT_KOP_BIT(ADD) | NNT_KOP_BIT(COPY))
EW_LAYER(nnt_layer_subtract, "subtract", 33,
         NNT_KOP_BIT(SUB) | NNT_KOP_BIT(COPY) | NNT_KOP_BIT(SCALE))
EW_LAYER(nnt_layer_multiply, "multiply", 34, NNT_KOP_BIT(MUL))
EW_LAYER(nnt_layer_divide, "divide", 35, NNT_KOP_BIT(DIV) | NNT_KOP_BIT(MUL) | NNT_KOP_BIT(SCALE))

/* By the type's ml_type (32 add ... 35 divide), which a copy of the
 * descriptor keeps (tests wrap the functions of copies). */
static ew_op op_of(const nnt_layer *l) { return (ew_op)(l->ops->ml_type - 32); }
