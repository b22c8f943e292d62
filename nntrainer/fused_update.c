/* Updates fused with the gradient (schedule.c, fused_rows): a weight
 * whose gradient the layer hands over a block of rows at a time
 * (nnt_run_ctx.grad_rows) is updated block by block inside calc_gradient,
 * so its whole gradient is never planned. */
#include "nntrainer/model_impl.h"

#include <float.h>

static int calc_failed(const nnt_node *nd, int rc, nnt_err *e) {
  return nnt_err_set(e, rc, "[%s] %s: calc_gradient failed: %s", nd->layer->name,
                     nd->layer->ops->type, nnt_strerror(rc));
}

/* With check_finite the step must not apply a gradient that is not
 * finite: where the bound of every gradient value from its factors
 * (nnt_finalize_ctx.grad_tiles: sums over the input's rows of input times
 * output-derivative values) leaves room below FLT_MAX, none can be; else
 * calc_gradient runs twice, the first time only checking each block and
 * the node's other gradients, the second applying (a NaN or inf in the
 * step, or values near float's limit: rare enough in training that a
 * second run is no cost worth planning a whole gradient for). */
typedef struct fused_job {
  nnt_model *m;
  nnt_node *nd;
  int check;           /* 1: look for a value that is not finite, apply none */
  int bad;             /* found: */
  unsigned bad_w;      /* the weight, */
  size_t bad_at;       /* the element of its gradient */
  float bad_v;         /* and the value */
} fused_job;

static int fused_rows_cb(const nnt_run_ctx *c, unsigned w, size_t off, size_t n,
                         const float *g) {
  fused_job *j = c->grad_arg;
  if (w >= j->nd->fc.n_w || !j->nd->gtile[w] || off + n > nnt_dim_len(j->nd->fc.w[w].dim))
    return NNT_ERR_INVAL;
  if (!j->check)
    return nnt_model_apply_range(j->m, j->nd->w_first + w, off, n, g);
  size_t k = j->bad ? n : nnt_first_nonfinite(g, n);
  if (k < n)
    j->bad = 1, j->bad_w = w, j->bad_at = off + k, j->bad_v = g[k];
  return NNT_OK;
}

/* Can no gradient value of the node be other than finite? Each is a sum
 * over the input's rows of products of values bounded by the inputs' and
 * output derivatives' largest (or of output-derivative values): finite
 * where rows times that bound leaves room for the rounding of the sums. */
static int fused_bounded(const nnt_node *nd) {
  const nnt_tensor *x = &nd->in[0], *dy = &nd->dout[0];
  float mx = 0, my = 0;
  if (!x->data || !dy->data || !nnt_max_abs_finite(x->data, nnt_tensor_len(x), &mx) ||
      !nnt_max_abs_finite(dy->data, nnt_tensor_len(dy), &my))
    return 0;
  double rows = (double)(nnt_tensor_len(x) / (x->dim.w ? x->dim.w : 1));
  double b = rows * my * (mx > 1.0f ? mx : 1.0);
  return b < FLT_MAX / 4.0;
}

int nnt_fused_gradient(nnt_model *m, nnt_node *nd, nnt_err *e) {
  fused_job j = {.m = m, .nd = nd};
  nnt_run_ctx *c = &nd->ctx;
  int rc = NNT_OK;
  c->grad_rows = fused_rows_cb;
  c->grad_arg = &j;
  if (m->check_finite && !fused_bounded(nd)) {
    j.check = 1;
    if ((rc = nd->layer->ops->calc_gradient(nd->layer, c)))
      rc = calc_failed(nd, rc, e);
    else if (j.bad)
      rc = nnt_err_set(e, NNT_ERR_RANGE,
                       "the gradient of weight '%s' of layer '%s' is not finite (%s at "
                       "element %zu of %zu); it was not applied",
                       nd->fc.w[j.bad_w].name, nd->layer->name, nnt_nonfinite_name(j.bad_v),
                       j.bad_at, nnt_dim_len(nd->fc.w[j.bad_w].dim));
    else
      rc = nnt_check_gradients(nd, e); /* the node's whole ones */
    j.check = 0;
  }
  if (!rc && (rc = nd->layer->ops->calc_gradient(nd->layer, c)))
    rc = calc_failed(nd, rc, e);
  c->grad_rows = NULL;
  c->grad_arg = NULL;
  return rc;
}
