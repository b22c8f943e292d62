/* concat: inputs joined along an axis (1 channel, 2 height, 3 width;
 * default as NNTrainer's: width when the first input has more than one
 * channel, else channel). split: one input cut into split_number equal
 * parts along an axis (default 3; NNTrainer requires axis). Both move
 * blocks of contiguous values, so they share one helper. */
#include <stdint.h>
#include "nntrainer/layer.h"

typedef struct cat_priv {
  unsigned axis, parts;
  int axis_set; /* axis given; concat picks its default at finalize */
} cat_priv;

static void cat_init(nnt_layer *l) {
  cat_priv *p = l->priv;
  p->axis = 3;
  p->parts = 0;
  p->axis_set = 0;
}

static void split_log_defaults(const nnt_layer *l) {
  if (!nnt_layer_has_key(l, "axis"))
    nnt_layer_notice_default(l, "axis", "3 (width)", "NNTrainer has no default: give it");
  if (!nnt_layer_has_key(l, "split_number"))
    nnt_layer_notice_default(l, "split_number", "the number of outputs the model reads",
                             "NNTrainer uses the length of the axis and refuses a model that "
                             "reads another number of outputs");
}

static int cat_set(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  cat_priv *p = l->priv;
  int rc;
  if (nnt_streq(key, "axis")) {
    unsigned a;
    if ((rc = nnt_parse_uint(key, value, &a, e)))
      return rc;
    if (a < 1 || a > 3)
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'axis': %s is not 1, 2 or 3", value);
    p->axis = a;
    p->axis_set = 1;
    return NNT_OK;
  }
  if (nnt_streq(key, "split_number") && l->ops == &nnt_layer_split) {
    if ((rc = nnt_parse_uint(key, value, &p->parts, e)))
      return rc;
    return p->parts ? NNT_OK
                    : nnt_err_set(e, NNT_ERR_INVAL, "key 'split_number': must be positive");
  }
  return NNT_ERR_NOKEY;
}

static unsigned *axis_ref(nnt_dim *d, unsigned axis) {
  return axis == 1 ? &d->c : axis == 2 ? &d->h : &d->w;
}

/* Elements before the axis (rows) and per row for a dim with that axis. */
static size_t rows_of(nnt_dim d, unsigned axis) {
  size_t r = d.b;
  if (axis >= 2)
    r *= d.c;
  if (axis >= 3)
    r *= d.h;
  return r;
}
static size_t row_len(nnt_dim d, unsigned axis) { return nnt_dim_len(d) / rows_of(d, axis); }

/* Move part (rows x len) between a whole tensor (rows x total, at column
 * offset off) and a part tensor; to_whole picks the direction. */
static int move_part(const nnt_kernels *k, float *whole, size_t total, float *part, size_t rows,
                     size_t len, size_t off, int to_whole) {
  for (size_t r = 0; r < rows; r++) {
    float *w = whole + r * total + off, *p = part + r * len;
    if (to_whole)
      NNT_TRY(k->copy(k, len, p, w));
    else
      NNT_TRY(k->copy(k, len, w, p));
  }
  return NNT_OK;
}

static int cat_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  cat_priv *p = l->priv;
  if (!p->axis_set) /* NNTrainer's default */
    p->axis = ctx->in_dim[0].c > 1 ? 3 : 1;
  nnt_dim out = ctx->in_dim[0];
  *axis_ref(&out, p->axis) = 0;
  for (unsigned k = 0; k < ctx->n_in; k++) {
    nnt_dim a = ctx->in_dim[k], b = ctx->in_dim[0];
    *axis_ref(&a, p->axis) = 0;
    *axis_ref(&b, p->axis) = 0;
    if (!nnt_dim_eq(a, b)) {
      char s1[64], s2[64];
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "axis: input %u is %s and input 0 is %s; they may differ only on "
                         "axis %u", k, nnt_dim_str(ctx->in_dim[k], s1, sizeof s1),
                         nnt_dim_str(ctx->in_dim[0], s2, sizeof s2), p->axis);
    }
    nnt_dim in = ctx->in_dim[k];
    unsigned *sum = axis_ref(&out, p->axis), add = *axis_ref(&in, p->axis);
    if (*sum > UINT32_MAX - add)
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "axis: the inputs add up to more than %u along axis %u (at input %u)",
                         UINT32_MAX, p->axis, k);
    *sum += add;
  }
  ctx->out_dim[0] = out;
  ctx->flags = 0;
  return NNT_OK;
}

static int cat_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  cat_priv *p = l->priv;
  size_t rows = rows_of(ctx->out[0].dim, p->axis), total = row_len(ctx->out[0].dim, p->axis);
  size_t off = 0;
  for (unsigned k = 0; k < ctx->n_in; k++) {
    size_t len = row_len(ctx->in[k].dim, p->axis);
    NNT_TRY(move_part(ctx->k, ctx->out[0].data, total, ctx->in[k].data, rows, len, off, 1));
    off += len;
  }
  return NNT_OK;
}

static int cat_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  cat_priv *p = l->priv;
  size_t rows = rows_of(ctx->d_out[0].dim, p->axis), total = row_len(ctx->d_out[0].dim, p->axis);
  size_t off = 0;
  for (unsigned k = 0; k < ctx->n_in; k++) {
    size_t len = row_len(ctx->d_in[k].dim, p->axis);
    if (ctx->d_in[k].data)
      NNT_TRY(move_part(ctx->k, ctx->d_out[0].data, total, ctx->d_in[k].data, rows, len, off, 0));
    off += len;
  }
  return NNT_OK;
}

const nnt_layer_ops nnt_layer_concat = {
    .type = "concat",
    .ml_type = 8,
    .priv_size = sizeof(cat_priv),
    .init = cat_init,
    .set_property = cat_set,
    .finalize = cat_finalize,
    .forward = cat_forward,
    .calc_derivative = cat_derivative,
    .kops = NNT_KOP_BIT(COPY),
};

static int split_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  cat_priv *p = l->priv;
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "split takes one input, not %u", ctx->n_in);
  unsigned parts = p->parts ? p->parts : ctx->n_out_refs;
  nnt_dim in = ctx->in_dim[0];
  unsigned size = *axis_ref(&in, p->axis);
  if (parts > NNT_MAX_IO)
    return nnt_err_set(e, NNT_ERR_INVAL, "split_number: %u parts are more than the %d outputs "
                       "a layer may have", parts, NNT_MAX_IO);
  if (size % parts) {
    char s[64];
    return nnt_err_set(e, NNT_ERR_INVAL, "split_number: %u parts do not divide axis %u of %s",
                       parts, p->axis, nnt_dim_str(in, s, sizeof s));
  }
  ctx->n_out = parts;
  for (unsigned o = 0; o < parts; o++) {
    ctx->out_dim[o] = in;
    *axis_ref(&ctx->out_dim[o], p->axis) = size / parts;
  }
  ctx->flags = 0;
  return NNT_OK;
}

static int split_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  cat_priv *p = l->priv;
  size_t rows = rows_of(ctx->in[0].dim, p->axis), total = row_len(ctx->in[0].dim, p->axis);
  size_t len = total / ctx->n_out;
  for (unsigned o = 0; o < ctx->n_out; o++)
    NNT_TRY(move_part(ctx->k, ctx->in[0].data, total, ctx->out[o].data, rows, len, o * len, 0));
  return NNT_OK;
}

static int split_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  cat_priv *p = l->priv;
  size_t rows = rows_of(ctx->d_in[0].dim, p->axis), total = row_len(ctx->d_in[0].dim, p->axis);
  size_t len = total / ctx->n_out;
  for (unsigned o = 0; o < ctx->n_out; o++) {
    if (ctx->d_out[o].data)
      NNT_TRY(move_part(ctx->k, ctx->d_in[0].data, total, ctx->d_out[o].data, rows, len,
                        o * len, 1));
    else
      for (size_t r = 0; r < rows; r++)
        NNT_TRY(ctx->k->fill(ctx->k, len, 0, ctx->d_in[0].data + r * total + o * len));
  }
  return NNT_OK;
}

const nnt_layer_ops nnt_layer_split = {
    .type = "split",
    .ml_type = 13,
    .priv_size = sizeof(cat_priv),
    .init = cat_init,
    .set_property = cat_set,
    .finalize = split_finalize,
    .forward = split_forward,
    .calc_derivative = split_derivative,
    .log_defaults = split_log_defaults,
    .kops = NNT_KOP_BIT(COPY) | NNT_KOP_BIT(FILL),
};
