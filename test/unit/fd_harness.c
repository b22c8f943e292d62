#include "fd_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *alloc_t(nnt_tensor *t, nnt_dim d) {
  t->dim = d;
  t->data = calloc(nnt_dim_len(d), sizeof(float));
  assert_non_null(t->data);
  return t->data;
}

void fd_setup(fd_harness *h, const char *type, const char *const *props, nnt_dim in,
              int distinct) {
  memset(h, 0, sizeof *h);
  nnt_err e = {0};
  assert_int_equal(nnt_layer_create(type, &h->l, &e), NNT_OK);
  snprintf(h->l->name, sizeof h->l->name, "%s", type);
  for (size_t i = 0; props && props[i]; i += 2)
    if (nnt_layer_set_property(h->l, props[i], props[i + 1], &e))
      fail_msg("%s", e.msg);
  h->fc.batch = in.b;
  h->fc.n_in = 1;
  h->fc.in_dim[0] = in;
  h->fc.n_out = 1;
  h->fc.trainable = 1;
  if (h->l->ops->finalize(h->l, &h->fc, &e))
    fail_msg("finalize: %s", e.msg);
  nnt_rng r;
  nnt_rng_seed(&r, 99);
  alloc_t(&h->in, in);
  size_t n = nnt_dim_len(in);
  for (size_t i = 0; i < n; i++) {
    if (distinct) {
      h->in.data[i] = -1.0f + 2.0f * (float)((i * 7919) % n) / (float)n;
      continue;
    }
    float v = 0.1f + 0.9f * nnt_rng_uniform(&r);
    h->in.data[i] = nnt_rng_uniform(&r) < 0.5f ? -v : v;
  }
  alloc_t(&h->out, h->fc.out_dim[0]);
  alloc_t(&h->din, in);
  alloc_t(&h->dout, h->fc.out_dim[0]);
  h->r = calloc(nnt_dim_len(h->fc.out_dim[0]), sizeof(float));
  tu_fill_uniform(&r, h->r, nnt_dim_len(h->fc.out_dim[0]), -1, 1);
  for (unsigned w = 0; w < h->fc.n_w; w++) {
    alloc_t(&h->w[w], h->fc.w[w].dim);
    tu_fill_uniform(&r, h->w[w].data, nnt_dim_len(h->fc.w[w].dim), -0.5f, 0.5f);
    alloc_t(&h->gw[w], h->fc.w[w].dim);
  }
  for (unsigned s = 0; s < h->fc.n_scratch; s++)
    alloc_t(&h->scratch[s], h->fc.scratch_dim[s]);
  h->loss = (h->fc.flags & NNT_LF_LOSS) != 0;
  if (h->loss) {
    /* a one-hot label per row */
    alloc_t(&h->label, h->fc.out_dim[0]);
    size_t cols = h->fc.out_dim[0].w, rows = nnt_dim_len(h->fc.out_dim[0]) / cols;
    for (size_t i = 0; i < rows; i++)
      h->label.data[i * cols + nnt_rng_below(&r, (uint32_t)cols)] = 1;
  }
  nnt_run_ctx *c = &h->ctx;
  c->k = nnt_kernels_cpu();
  c->n_in = c->n_out = 1;
  c->n_w = h->fc.n_w;
  c->n_scratch = h->fc.n_scratch;
  c->in = &h->in;
  c->out = &h->out;
  c->d_in = &h->din;
  c->d_out = &h->dout;
  c->w = h->w;
  c->gw = h->gw;
  c->scratch = h->scratch;
  c->label = h->loss ? &h->label : NULL;
  c->training = 1;
  /* a fixed stream: the same dropout mask every time */
  c->seed = 5;
  c->stream = 0;
  h->losst.dim = nnt_dim_make(1, 1, 1, 1);
  h->losst.data = &h->lossv;
  c->loss = h->loss ? &h->losst : NULL;
}

void fd_teardown(fd_harness *h) {
  free(h->in.data), free(h->out.data), free(h->din.data), free(h->dout.data);
  free(h->label.data), free(h->r);
  for (unsigned w = 0; w < h->fc.n_w; w++)
    free(h->w[w].data), free(h->gw[w].data);
  for (unsigned s = 0; s < h->fc.n_scratch; s++)
    free(h->scratch[s].data);
  nnt_layer_destroy(h->l);
}

double fd_objective(fd_harness *h) {
  h->lossv = 0;
  assert_int_equal(h->l->ops->forward(h->l, &h->ctx), NNT_OK);
  if (h->loss)
    return h->lossv;
  double j = 0;
  for (size_t i = 0; i < nnt_tensor_len(&h->out); i++)
    j += (double)h->out.data[i] * h->r[i];
  return j;
}

int fd_compare(const char *layer, const char *what, const float *x0, const float *analytic,
               size_t n, const fd_target *t, float eps, double tol, char *msg, size_t msg_len) {
  for (size_t i = 0; i < n; i++) {
    float keep = x0[i];
    t->set(t->ctx, i, keep + eps);
    double jp = t->objective(t->ctx);
    t->set(t->ctx, i, keep - eps);
    double jm = t->objective(t->ctx);
    t->set(t->ctx, i, keep);
    double num = (jp - jm) / (2.0 * eps);
    if (!(fabs(num - analytic[i]) / fmax(1.0, fabs(num)) <= tol)) {
      snprintf(msg, msg_len, "%s %s[%zu]: analytic %.6f, numeric %.6f", layer, what, i,
               analytic[i], num);
      return 1;
    }
  }
  return 0;
}

/* fd_check's target: an array of host floats. */
typedef struct fd_host {
  fd_harness *h;
  float *x;
} fd_host;

static void fd_host_set(void *ctx, size_t i, float v) { ((fd_host *)ctx)->x[i] = v; }
static double fd_host_objective(void *ctx) { return fd_objective(((fd_host *)ctx)->h); }

void fd_check(const char *what, float *x, const float *analytic, size_t n, fd_harness *h,
              float eps, double tol) {
  fd_host host = {h, x};
  fd_target t = {fd_host_set, fd_host_objective, &host};
  float *x0 = malloc(n * sizeof *x0);
  assert_non_null(x0);
  memcpy(x0, x, n * sizeof *x0);
  char msg[256];
  int bad = fd_compare(h->l->ops->type, what, x0, analytic, n, &t, eps, tol, msg, sizeof msg);
  free(x0);
  if (bad)
    fail_msg("%s", msg);
}

void fd_layer_check(const char *type, const char *const *props, nnt_dim in,
                    const nnt_dim *want_out, float eps, double tol, int distinct) {
  fd_harness h;
  fd_setup(&h, type, props, in, distinct);
  if (want_out)
    assert_true(nnt_dim_eq(h.fc.out_dim[0], *want_out));
  fd_objective(&h);
  if (!h.loss)
    memcpy(h.dout.data, h.r, nnt_tensor_len(&h.dout) * sizeof(float));
  for (size_t i = 0; i < nnt_tensor_len(&h.din); i++)
    h.din.data[i] = 123.0f;
  for (unsigned w = 0; w < h.fc.n_w; w++)
    for (size_t i = 0; i < nnt_tensor_len(&h.gw[w]); i++)
      h.gw[w].data[i] = -77.0f;
  if (h.l->ops->calc_gradient)
    assert_int_equal(h.l->ops->calc_gradient(h.l, &h.ctx), NNT_OK);
  assert_int_equal(h.l->ops->calc_derivative(h.l, &h.ctx), NNT_OK);
  size_t nin = nnt_tensor_len(&h.din);
  float *din = malloc(nin * sizeof(float));
  memcpy(din, h.din.data, nin * sizeof(float));
  fd_check("dx", h.in.data, din, nin, &h, eps, tol);
  for (unsigned w = 0; w < h.fc.n_w; w++) {
    /* weights a layer does not train (moving statistics) get no gradient */
    if (!h.fc.w[w].trainable)
      continue;
    fd_check(h.fc.w[w].name, h.w[w].data, h.gw[w].data, nnt_tensor_len(&h.w[w]), &h, eps, tol);
  }
  free(din);
  fd_teardown(&h);
}

void fd_run_golden(fd_harness *h, const char *type, const char *const *props, nnt_dim in,
                   const float *x, const float *const *w, const float *r, const float *label) {
  fd_setup(h, type, props, in, 0);
  memcpy(h->in.data, x, nnt_tensor_len(&h->in) * sizeof(float));
  for (unsigned k = 0; k < h->fc.n_w; k++)
    memcpy(h->w[k].data, w[k], nnt_tensor_len(&h->w[k]) * sizeof(float));
  if (label)
    memcpy(h->label.data, label, nnt_tensor_len(&h->label) * sizeof(float));
  h->lossv = 0;
  assert_int_equal(h->l->ops->forward(h->l, &h->ctx), NNT_OK);
  for (size_t i = 0; i < nnt_tensor_len(&h->dout); i++)
    h->dout.data[i] = r ? r[i] : NAN;
  if (h->l->ops->calc_gradient)
    assert_int_equal(h->l->ops->calc_gradient(h->l, &h->ctx), NNT_OK);
  if (h->l->ops->calc_derivative)
    assert_int_equal(h->l->ops->calc_derivative(h->l, &h->ctx), NNT_OK);
}
