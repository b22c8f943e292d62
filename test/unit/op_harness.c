/* The op harness (op_harness.h): placing a case's tensors in guarded
 * buffers, running the layer through one wrapper, checking guards after
 * every call, comparing with the reference run, finite differences. */
#include "op_harness.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_device.h"
#include "fd_harness.h"

#define OH_GUARD_MIN 64 /* bytes of pattern around every tensor, at least */
#define OH_MAX_SLOTS (4 * NNT_MAX_IO + 2 * NNT_MAX_WEIGHTS + NNT_MAX_SCRATCH + 2)
#define OH_MAX_VALS (4 * NNT_MAX_IO + 2 * NNT_MAX_WEIGHTS + 1)

#ifdef NNT_HAVE_VULKAN
/* The Vulkan instance every case shares, opened at the first call (test
 * state, released by oh_backends_release). */
static nnt_backend *oh_gpu;
static int oh_gpu_tried;
#endif

unsigned oh_backends(const nnt_backend *out[OH_MAX_BACKENDS]) {
  unsigned n = 0;
  out[n++] = nnt_backend_cpu();
  /* memory the host cannot dereference, computed on by the CPU's kernels:
   * a layer reading a tensor's address faults here (fake_device.h) */
  out[n++] = fdev_backend();
#ifdef NNT_HAVE_VULKAN
  if (!oh_gpu_tried) {
    nnt_err e = {0};
    oh_gpu_tried = 1;
    setenv("NNTRAINER_VULKAN_VALIDATION", "1", 0);
    /* oh_backends_release closes the last device */
    tu_keep_vulkan_driver();
    if (nnt_backend_get(NNT_ENGINE_GPU, &oh_gpu, &e))
      oh_gpu = NULL; /* no device here: the harness runs without it */
  }
  if (oh_gpu)
    out[n++] = oh_gpu;
#endif
  return n;
}

void oh_backends_release(void) {
#ifdef NNT_HAVE_VULKAN
  nnt_backend *be = oh_gpu;
  oh_gpu = NULL, oh_gpu_tried = 0;
  if (be)
    tu_backend_free_checked(be);
#endif
}

/* A tensor of a run and its name in messages ("out[0]", "weight 'bias'"). */
typedef struct oh_slot {
  nnt_tensor *t;
  char name[48];
} oh_slot;

/* Bytes [off, off + len) of buf hold the guard pattern. */
typedef struct oh_guard {
  nnt_buffer *buf;
  size_t off, len;
  const char *before, *after; /* the neighbours' names */
} oh_guard;

/* Host copies of a run's results, in the same order in every run. */
typedef struct oh_vals {
  unsigned n;
  char name[OH_MAX_VALS][64];
  size_t len[OH_MAX_VALS];
  float *v[OH_MAX_VALS];
} oh_vals;

typedef struct oh_run {
  const nnt_backend *be;
  nnt_layer *l;
  nnt_finalize_ctx fc;
  nnt_run_ctx ctx;
  nnt_tensor in[NNT_MAX_IO], out[NNT_MAX_IO], din[NNT_MAX_IO], dout[NNT_MAX_IO],
      w[NNT_MAX_WEIGHTS], gw[NNT_MAX_WEIGHTS], scratch[NNT_MAX_SCRATCH], label, loss_t;
  oh_slot slot[OH_MAX_SLOTS];
  unsigned n_slot;
  nnt_buffer *buf[OH_MAX_SLOTS];
  unsigned n_buf;
  oh_guard guard[2 * OH_MAX_SLOTS];
  unsigned n_guard;
  nnt_rng rng;
  int is_loss;
  float loss; /* what the last forward gave */
  const char *what; /* "run" or "reference", for messages */
  oh_report *r;
} oh_run;

/* The case's inputs, weights, output derivatives and label, made once. */
typedef struct oh_data {
  float *in[NNT_MAX_IO], *w[NNT_MAX_WEIGHTS], *dout[NNT_MAX_IO], *label;
} oh_data;

static int oh_fail(oh_report *r, const char *fmt, ...) {
  if (!r->failed) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
  }
  r->failed = 1;
  return 1;
}

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

static unsigned char guard_byte(size_t off) { return (unsigned char)(0x5A + 13 * off); }

static float *host_floats(size_t n) {
  float *p = calloc(n ? n : 1, sizeof(float));
  assert_non_null(p);
  return p;
}

const char *oh_case_name(const oh_case *c, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "%s", c->type);
  for (unsigned i = 0; i < OH_MAX_PROPS && c->props[i] && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, " %s", c->props[i]);
  for (unsigned i = 0; i < OH_MAX_IN && c->in[i] && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, " [%u:%s]", c->batch ? c->batch : 2, c->in[i]);
  return buf;
}

/* ---- the layer ---- */

static int make_layer(const oh_case *c, nnt_layer **out, oh_report *r) {
  nnt_err e = {0};
  nnt_layer *l = NULL;
  if (c->ops) { /* a test-only type, not in the registry */
    l = calloc(1, sizeof *l);
    assert_non_null(l);
    l->ops = c->ops;
    l->trainable = 1;
  } else if (nnt_layer_create(c->type, &l, &e)) {
    return oh_fail(r, "%s: %s", c->type, e.msg);
  }
  *out = l;
  snprintf(l->name, sizeof l->name, "%s", c->type);
  for (unsigned i = 0; i < OH_MAX_PROPS && c->props[i]; i++) {
    char key[64];
    const char *eq = strchr(c->props[i], '=');
    if (!eq || (size_t)(eq - c->props[i]) >= sizeof key)
      return oh_fail(r, "%s: property '%s' is not key=value", c->type, c->props[i]);
    memcpy(key, c->props[i], (size_t)(eq - c->props[i]));
    key[eq - c->props[i]] = '\0';
    if (nnt_layer_set_property(l, key, eq + 1, &e))
      return oh_fail(r, "%s: %s", c->type, e.msg);
  }
  return 0;
}

static void free_layer(const oh_case *c, nnt_layer *l) {
  if (c->ops && l)
    free(l);
  else
    nnt_layer_destroy(l);
}

/* ---- placement ---- */

static void add_slot(oh_run *u, nnt_tensor *t, nnt_dim d, const char *fmt, ...) {
  t->dim = d;
  oh_slot *s = &u->slot[u->n_slot++];
  s->t = t;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->name, sizeof s->name, fmt, ap);
  va_end(ap);
}

static void list_slots(oh_run *u) {
  nnt_finalize_ctx *fc = &u->fc;
  for (unsigned i = 0; i < fc->n_in; i++)
    add_slot(u, &u->in[i], fc->in_dim[i], "in[%u]", i);
  for (unsigned o = 0; o < fc->n_out; o++)
    add_slot(u, &u->out[o], fc->out_dim[o], "out[%u]", o);
  for (unsigned w = 0; w < fc->n_w; w++)
    add_slot(u, &u->w[w], fc->w[w].dim, "weight '%s'", fc->w[w].name);
  for (unsigned s = 0; s < fc->n_scratch; s++)
    add_slot(u, &u->scratch[s], fc->scratch_dim[s], "scratch[%u]", s);
  if (u->is_loss) {
    add_slot(u, &u->label, fc->out_dim[0], "label");
    add_slot(u, &u->loss_t, nnt_dim_make(1, 1, 1, 1), "loss");
  }
  for (unsigned o = 0; o < fc->n_out; o++)
    add_slot(u, &u->dout[o], fc->out_dim[o], "d_out[%u]", o);
  for (unsigned w = 0; w < fc->n_w; w++) /* frozen state gets no gradient: data NULL */
    if (fc->w[w].trainable)
      add_slot(u, &u->gw[w], fc->w[w].dim, "gradient of '%s'", fc->w[w].name);
  for (unsigned i = 0; i < fc->n_in; i++)
    add_slot(u, &u->din[i], fc->in_dim[i], "d_in[%u]", i);
}

static int new_buffer(oh_run *u, const nnt_buffer_type *bt, size_t size, nnt_buffer **b) {
  nnt_err e = {0};
  if (nnt_buffer_alloc(bt, size, "the op harness buffer", b, &e))
    return oh_fail(u->r, "%s: %s", u->what, e.msg);
  u->buf[u->n_buf++] = *b;
  unsigned char *pat = malloc(size);
  assert_non_null(pat);
  for (size_t i = 0; i < size; i++)
    pat[i] = guard_byte(i);
  int rc = bt->set(*b, 0, pat, size, &e);
  free(pat);
  return rc ? oh_fail(u->r, "%s: writing the guard pattern: %s", u->what, e.msg) : 0;
}

static void add_guard(oh_run *u, nnt_buffer *b, size_t off, size_t end, const char *before,
                      const char *after) {
  oh_guard g = {b, off, end - off, before, after};
  u->guard[u->n_guard++] = g;
}

/* one_buffer: every slot in one buffer of bt, in slot order; otherwise a
 * buffer each, allocated in the opposite order. Guards of at least
 * OH_GUARD_MIN bytes (a multiple of the alignment) around every tensor. */
static int place(oh_run *u, const nnt_buffer_type *bt, int one_buffer) {
  size_t a = bt->alignment(bt), g = round_up(OH_GUARD_MIN, a ? a : 1), off[OH_MAX_SLOTS];
  if (one_buffer) {
    size_t end = g;
    for (unsigned s = 0; s < u->n_slot; s++) {
      off[s] = s ? round_up(end + g, g) : g;
      end = off[s] + nnt_tensor_len(u->slot[s].t) * sizeof(float);
    }
    nnt_buffer *b;
    if (new_buffer(u, bt, round_up(end + g, g), &b))
      return 1;
    for (unsigned s = 0; s < u->n_slot; s++) {
      size_t start = s ? off[s - 1] + nnt_tensor_len(u->slot[s - 1].t) * sizeof(float) : 0;
      add_guard(u, b, start, off[s], s ? u->slot[s - 1].name : "the buffer's start",
                u->slot[s].name);
      u->slot[s].t->buf = b;
      u->slot[s].t->data = nnt_buffer_at(b, off[s]);
    }
    add_guard(u, b, end, b->size, u->slot[u->n_slot - 1].name, "the buffer's end");
    return 0;
  }
  for (unsigned k = u->n_slot; k-- > 0;) {
    oh_slot *s = &u->slot[k];
    size_t bytes = nnt_tensor_len(s->t) * sizeof(float);
    nnt_buffer *b;
    if (new_buffer(u, bt, round_up(g + bytes + g, g), &b))
      return 1;
    add_guard(u, b, 0, g, "its buffer's start", s->name);
    add_guard(u, b, g + bytes, b->size, s->name, "its buffer's end");
    s->t->buf = b;
    s->t->data = nnt_buffer_at(b, g);
  }
  return 0;
}

static int check_guards(oh_run *u, const char *call) {
  for (unsigned k = 0; k < u->n_guard; k++) {
    oh_guard *g = &u->guard[k];
    unsigned char *got = malloc(g->len ? g->len : 1);
    assert_non_null(got);
    nnt_err e = {0};
    if (g->buf->type->get(g->buf, g->off, got, g->len, &e)) {
      free(got);
      return oh_fail(u->r, "%s: reading a guard: %s", u->what, e.msg);
    }
    size_t first = g->len, last = 0;
    for (size_t i = 0; i < g->len; i++)
      if (got[i] != guard_byte(g->off + i)) {
        first = first < i ? first : i;
        last = i;
      }
    free(got);
    if (first < g->len)
      return oh_fail(u->r, "%s: %s wrote guard bytes %zu to %zu of the %zu between '%s' and '%s'",
                  u->what, call, first, last, g->len, g->before, g->after);
  }
  return 0;
}

/* ---- running ---- */

/* OH_FWD_BARE: a loss layer's forward as inference runs it, without a
 * label and a loss value (ctx->label and ctx->loss NULL) */
typedef enum oh_step { OH_FWD_INFER, OH_FWD_TRAIN, OH_GRAD, OH_DERIV, OH_FWD_BARE } oh_step;
static const char *const step_name[] = {"forward (inference)", "forward (training)",
                                        "calc_gradient", "calc_derivative",
                                        "forward (inference, no label)"};

/* The one place the harness calls a layer's entries: each returns the
 * first kernel error; a loss layer writes its value into ctx->loss (the
 * 1-float tensor u->loss_t), read back here with nnt_tensor_get. Dropout's
 * stream is fixed, so every forward draws the same mask. */
static int layer_call(oh_run *u, oh_step s) {
  nnt_layer *l = u->l;
  nnt_run_ctx *ctx = &u->ctx;
  switch (s) {
  case OH_FWD_INFER:
  case OH_FWD_TRAIN:
  case OH_FWD_BARE: {
    ctx->training = s == OH_FWD_TRAIN;
    ctx->seed = 5;
    ctx->stream = 0;
    if (s == OH_FWD_BARE) {
      ctx->label = ctx->loss = NULL;
      int rc = l->ops->forward(l, ctx);
      ctx->label = &u->label, ctx->loss = &u->loss_t;
      return rc;
    }
    int rc = l->ops->forward(l, ctx);
    if (!rc && u->is_loss) {
      nnt_err e = {0};
      rc = nnt_tensor_get(&u->loss_t, 0, &u->loss, 1, &e);
    }
    return rc;
  }
  case OH_GRAD:
    return l->ops->calc_gradient ? l->ops->calc_gradient(l, ctx) : NNT_OK;
  case OH_DERIV: /* none: the layer passes no derivative (embedding) */
    return l->ops->calc_derivative ? l->ops->calc_derivative(l, ctx) : NNT_OK;
  }
  return NNT_ERR_INVAL;
}

/* A call, the backend's synchronize, then every guard. */
static int call(oh_run *u, oh_step s) {
  int rc = layer_call(u, s);
  if (rc)
    return oh_fail(u->r, "%s: %s returned %d", u->what, step_name[s], rc);
  nnt_err e = {0};
  if (u->be->synchronize((nnt_backend *)u->be, &e))
    return oh_fail(u->r, "%s: synchronize after %s: %s", u->what, step_name[s], e.msg);
  return check_guards(u, step_name[s]);
}

static int setup(oh_run *u, const oh_case *c, const nnt_backend *be, int one_buffer,
                 oh_report *r) {
  memset(u, 0, sizeof *u);
  u->be = be;
  u->r = r;
  u->what = one_buffer ? be->name : "reference";
  if (make_layer(c, &u->l, r))
    return 1;
  nnt_finalize_ctx *fc = &u->fc;
  unsigned outs = c->outs ? c->outs : 1;
  fc->batch = c->batch ? c->batch : 2;
  fc->n_consumers = fc->n_out_refs = outs;
  fc->trainable = 1;
  fc->n_out = 1;
  for (; fc->n_in < OH_MAX_IN && c->in[fc->n_in]; fc->n_in++) {
    nnt_err e = {0};
    nnt_dim *d = &fc->in_dim[fc->n_in];
    if (nnt_dim_parse("input", c->in[fc->n_in], d, &e))
      return oh_fail(r, "%s: %s", c->type, e.msg);
    d->b = fc->batch;
  }
  nnt_err e = {0};
  if (u->l->ops->finalize(u->l, fc, &e))
    return oh_fail(r, "%s: finalize: %s", c->type, e.msg);
  if (c->keep_less && u->l->ops->keep_less)
    u->l->ops->keep_less(u->l, fc);
  u->is_loss = (fc->flags & NNT_LF_LOSS) != 0;
  list_slots(u);
  if (place(u, be->buft, one_buffer))
    return 1;
  nnt_run_ctx *ctx = &u->ctx;
  ctx->k = be->k;
  ctx->n_in = fc->n_in;
  ctx->n_out = fc->n_out;
  ctx->n_w = fc->n_w;
  ctx->n_scratch = fc->n_scratch;
  ctx->in = u->in, ctx->out = u->out, ctx->d_in = u->din, ctx->d_out = u->dout;
  ctx->w = u->w, ctx->gw = u->gw, ctx->scratch = u->scratch;
  ctx->label = u->is_loss ? &u->label : NULL;
  ctx->loss = u->is_loss ? &u->loss_t : NULL;
  return 0;
}

static void teardown(oh_run *u, const oh_case *c) {
  for (unsigned b = 0; b < u->n_buf; b++)
    nnt_buffer_free(u->buf[b]);
  free_layer(c, u->l);
}

static void make_data(oh_data *d, const oh_run *u, const oh_case *c) {
  const nnt_finalize_ctx *fc = &u->fc;
  nnt_rng r;
  nnt_rng_seed(&r, 99);
  for (unsigned i = 0; i < fc->n_in; i++) {
    size_t n = nnt_dim_len(fc->in_dim[i]);
    d->in[i] = host_floats(n);
    for (size_t k = 0; k < n; k++) {
      if (c->indices) { /* every index, some more than once, some with a fraction */
        d->in[i][k] = (float)((k * 5 + i) % c->indices) + (k % 3 ? 0.0f : 0.5f);
        continue;
      }
      if (c->distinct) { /* all different, apart by 2 / n */
        d->in[i][k] = -1.0f + 2.0f * (float)((k * 7919 + i) % n) / (float)n;
        continue;
      }
      float v = 0.1f + 0.9f * nnt_rng_uniform(&r); /* away from relu's kink */
      d->in[i][k] = nnt_rng_uniform(&r) < 0.5f ? -v : v;
    }
  }
  for (unsigned w = 0; w < fc->n_w; w++) {
    size_t n = nnt_dim_len(fc->w[w].dim);
    d->w[w] = host_floats(n);
    /* scale-like weights (gamma, a moving variance) stay positive */
    if (fc->w[w].init == NNT_INIT_ONES)
      tu_fill_uniform(&r, d->w[w], n, 0.5f, 1.5f);
    else
      tu_fill_uniform(&r, d->w[w], n, -0.5f, 0.5f);
  }
  for (unsigned o = 0; o < fc->n_out; o++) {
    size_t n = nnt_dim_len(fc->out_dim[o]);
    d->dout[o] = host_floats(n);
    tu_fill_uniform(&r, d->dout[o], n, -1, 1);
    if (u->is_loss) /* a loss layer must not read d_out */
      for (size_t k = 0; k < n; k++)
        d->dout[o][k] = NAN;
  }
  if (u->is_loss) { /* a one-hot label per row */
    size_t cols = fc->out_dim[0].w, rows = nnt_dim_len(fc->out_dim[0]) / cols;
    d->label = host_floats(rows * cols);
    for (size_t i = 0; i < rows; i++)
      d->label[i * cols + nnt_rng_below(&r, (uint32_t)cols)] = 1;
  }
}

static void free_data(oh_data *d) {
  for (unsigned i = 0; i < NNT_MAX_IO; i++)
    free(d->in[i]), free(d->dout[i]);
  for (unsigned w = 0; w < NNT_MAX_WEIGHTS; w++)
    free(d->w[w]);
  free(d->label);
}

static int put(oh_run *u, const nnt_tensor *t, const float *v, const char *name) {
  nnt_err e = {0};
  return nnt_tensor_set(t, 0, v, nnt_tensor_len(t), &e)
             ? oh_fail(u->r, "%s: writing %s: %s", u->what, name, e.msg) : 0;
}

/* Inputs, weights, d_out and label from d; everything a layer writes NaN,
 * so a value it should have written and did not shows. */
static int load(oh_run *u, const oh_data *d) {
  for (unsigned s = 0; s < u->n_slot; s++) {
    nnt_err e = {0};
    if (nnt_tensor_memset(u->slot[s].t, 0xff, &e))
      return oh_fail(u->r, "%s: filling %s: %s", u->what, u->slot[s].name, e.msg);
  }
  int bad = 0;
  for (unsigned i = 0; i < u->fc.n_in; i++)
    bad |= put(u, &u->in[i], d->in[i], "an input");
  for (unsigned w = 0; w < u->fc.n_w; w++)
    bad |= put(u, &u->w[w], d->w[w], "a weight");
  for (unsigned o = 0; o < u->fc.n_out; o++)
    bad |= put(u, &u->dout[o], d->dout[o], "d_out");
  if (u->is_loss)
    bad |= put(u, &u->label, d->label, "the label");
  return bad;
}

static int keep(oh_run *u, oh_vals *v, const nnt_tensor *t, const char *after, const char *fmt,
                unsigned idx) {
  unsigned k = v->n++;
  char what[40];
  snprintf(what, sizeof what, fmt, idx);
  snprintf(v->name[k], sizeof v->name[k], "%s after %s", what, after);
  v->len[k] = nnt_tensor_len(t);
  v->v[k] = host_floats(v->len[k]);
  nnt_err e = {0};
  return nnt_tensor_get(t, 0, v->v[k], v->len[k], &e)
             ? oh_fail(u->r, "%s: reading %s: %s", u->what, v->name[k], e.msg) : 0;
}

static void keep_loss(oh_run *u, oh_vals *v, const char *after) {
  unsigned k = v->n++;
  snprintf(v->name[k], sizeof v->name[k], "the loss after %s", after);
  v->len[k] = 1;
  v->v[k] = host_floats(1);
  v->v[k][0] = u->loss;
}

/* A loss layer's forward without a label (inference) writes no loss
 * value: the slot keeps load's fill. */
static int check_no_loss(oh_run *u) {
  float f;
  unsigned char b[sizeof f];
  nnt_err e = {0};
  if (nnt_tensor_get(&u->loss_t, 0, &f, 1, &e))
    return oh_fail(u->r, "%s: reading the loss: %s", u->what, e.msg);
  memcpy(b, &f, sizeof b);
  for (size_t i = 0; i < sizeof b; i++)
    if (b[i] != 0xff)
      return oh_fail(u->r, "%s: %s wrote the loss value", u->what, step_name[OH_FWD_BARE]);
  return 0;
}

/* ... and gives the same output, bit for bit, as with one. Its outputs
 * are v's first values, those of the inference forward with a label the
 * n_out after them. */
static int check_bare(oh_run *u, const oh_vals *v) {
  for (unsigned o = 0; o < u->fc.n_out; o++)
    if (memcmp(v->v[o], v->v[u->fc.n_out + o], v->len[o] * sizeof(float)))
      return oh_fail(u->r, "%s: %s differs from %s", u->what, v->name[o],
                     v->name[u->fc.n_out + o]);
  return 0;
}

/* Every call once; results into v. */
static int execute(oh_run *u, const oh_data *d, oh_vals *v) {
  const nnt_finalize_ctx *fc = &u->fc;
  if (load(u, d))
    return 1;
  if (u->is_loss) {
    if (call(u, OH_FWD_BARE) || check_no_loss(u))
      return 1;
    for (unsigned o = 0; o < fc->n_out; o++)
      if (keep(u, v, &u->out[o], step_name[OH_FWD_BARE], "out[%u]", o))
        return 1;
  }
  for (oh_step s = OH_FWD_INFER; s <= OH_FWD_TRAIN; s++) {
    if (call(u, s))
      return 1;
    for (unsigned o = 0; o < fc->n_out; o++)
      if (keep(u, v, &u->out[o], step_name[s], "out[%u]", o))
        return 1;
    if (u->is_loss)
      keep_loss(u, v, step_name[s]);
    if (s == OH_FWD_INFER && u->is_loss && check_bare(u, v))
      return 1;
  }
  for (unsigned w = 0; w < fc->n_w; w++) /* moving statistics change in training */
    if (keep(u, v, &u->w[w], step_name[OH_FWD_TRAIN], "weight %u", w))
      return 1;
  if (call(u, OH_GRAD))
    return 1;
  for (unsigned w = 0; w < fc->n_w; w++)
    if (fc->w[w].trainable && keep(u, v, &u->gw[w], step_name[OH_GRAD], "gradient %u", w))
      return 1;
  if (call(u, OH_DERIV))
    return 1;
  for (unsigned i = 0; u->l->ops->calc_derivative && i < fc->n_in; i++)
    if (keep(u, v, &u->din[i], step_name[OH_DERIV], "d_in[%u]", i))
      return 1;
  return 0;
}

static void free_vals(oh_vals *v) {
  for (unsigned k = 0; k < v->n; k++)
    free(v->v[k]);
}

/* max |a - b| / max(1, max |ref|), every value finite. */
static int compare(const oh_vals *a, const oh_vals *ref, double tol, oh_report *r,
                   const char *be) {
  if (a->n != ref->n)
    return oh_fail(r, "%s: %u results, the reference %u", be, a->n, ref->n);
  for (unsigned k = 0; k < a->n; k++) {
    double diff = 0, scale = 1;
    size_t at = 0;
    for (size_t i = 0; i < a->len[k]; i++) {
      if (!isfinite(a->v[k][i]) || !isfinite(ref->v[k][i]))
        return oh_fail(r, "%s: %s: [%zu] is %g, the reference %g (not finite)", be, a->name[k],
                    i, a->v[k][i], ref->v[k][i]);
      double dd = fabs((double)a->v[k][i] - ref->v[k][i]);
      if (dd > diff)
        diff = dd, at = i;
      scale = fmax(scale, fabs(ref->v[k][i]));
    }
    if (diff / scale > tol)
      return oh_fail(r, "%s: %s differs from the reference: normalised error %.3g > %.3g "
                  "([%zu]: %g, the reference %g)", be, a->name[k], diff / scale, tol, at,
                  a->v[k][at], ref->v[k][at]);
  }
  return 0;
}

/* ---- finite differences on the placed run ---- */

typedef struct oh_fd {
  oh_run *u;
  const nnt_tensor *x;
  const oh_data *d;
} oh_fd;

static void fd_put(void *p, size_t i, float v) {
  oh_fd *f = p;
  nnt_err e = {0};
  if (nnt_tensor_set(f->x, i, &v, 1, &e))
    oh_fail(f->u->r, "%s: finite differences: %s", f->u->what, e.msg);
}

/* J = sum over outputs of out * d_out, or the loss. NaN after a failure. */
static double fd_obj(void *p) {
  oh_fd *f = p;
  oh_run *u = f->u;
  if (u->r->failed || call(u, OH_FWD_TRAIN))
    return NAN;
  if (u->is_loss)
    return u->loss;
  double j = 0;
  for (unsigned o = 0; o < u->fc.n_out; o++) {
    size_t n = nnt_tensor_len(&u->out[o]);
    float *y = host_floats(n);
    nnt_err e = {0};
    if (nnt_tensor_get(&u->out[o], 0, y, n, &e))
      oh_fail(u->r, "%s: finite differences: %s", u->what, e.msg);
    for (size_t i = 0; i < n; i++)
      j += (double)y[i] * f->d->dout[o][i];
    free(y);
  }
  return j;
}

static int fd_run(oh_run *u, const oh_case *c, const oh_data *d, const oh_vals *v) {
  float eps = c->fd_eps > 0 ? c->fd_eps : 1e-2f;
  double tol = c->fd_tol > 0 ? c->fd_tol : 3e-3;
  const nnt_finalize_ctx *fc = &u->fc;
  oh_fd f = {u, NULL, d};
  fd_target t = {fd_put, fd_obj, &f};
  char msg[256];
  /* the analytic values: v's gradients, then d_in, in execute's order */
  unsigned n_din = u->l->ops->calc_derivative ? fc->n_in : 0;
  unsigned k = v->n - n_din;
  for (unsigned i = 0; i < n_din; i++, k++) {
    char what[24];
    snprintf(what, sizeof what, "d_in[%u]", i);
    f.x = &u->in[i];
    if (fd_compare(c->type, what, d->in[i], v->v[k], v->len[k], &t, eps, tol, msg, sizeof msg))
      return u->r->failed ? 1 : oh_fail(u->r, "%s: %s", u->what, msg);
  }
  k = v->n - n_din;
  for (unsigned w = 0; w < fc->n_w; w++)
    k -= fc->w[w].trainable;
  for (unsigned w = 0; w < fc->n_w; w++) {
    if (!fc->w[w].trainable)
      continue;
    f.x = &u->w[w];
    if (fd_compare(c->type, fc->w[w].name, d->w[w], v->v[k], v->len[k], &t, eps, tol, msg,
                   sizeof msg))
      return u->r->failed ? 1 : oh_fail(u->r, "%s: %s", u->what, msg);
    k++;
  }
  return 0;
}

/* The layer type of c (its test-only ops or the registry's), NULL if none. */
static const nnt_layer_ops *case_ops(const oh_case *c) {
  if (c->ops)
    return c->ops;
  for (const nnt_layer_ops *const *p = nnt_layer_ops_all(); *p; p++)
    if (nnt_streq(c->type, (*p)->type))
      return *p;
  return NULL;
}

int oh_run_case(const oh_case *c, const nnt_backend *be, int fd, oh_report *r) {
  memset(r, 0, sizeof *r);
  const nnt_layer_ops *lo = case_ops(c);
  for (unsigned op = 0; lo && op < NNT_KOP__COUNT; op++)
    if ((lo->kops >> op & 1) && !be->supports(be, (nnt_kop)op)) {
      r->skipped = 1;
      snprintf(r->msg, sizeof r->msg, "%s: backend '%s' does not support the op '%s'", c->type,
               be->name, nnt_kop_name((nnt_kop)op));
      return 0;
    }
  oh_run *u = calloc(2, sizeof *u);
  oh_vals *v = calloc(2, sizeof *v);
  oh_data d;
  memset(&d, 0, sizeof d);
  assert_true(u && v);
  /* the run under test: one buffer of be; the reference: separate host
   * buffers, the other way round */
  if (!setup(&u[0], c, be, 1, r) && !setup(&u[1], c, nnt_backend_cpu(), 0, r)) {
    make_data(&d, &u[0], c);
    if (!execute(&u[0], &d, &v[0]) && !execute(&u[1], &d, &v[1]) &&
        !compare(&v[0], &v[1], c->tol > 0 ? c->tol : 1e-5, r, be->name) && fd && !c->no_fd)
      fd_run(&u[0], c, &d, &v[0]);
  }
  for (int k = 0; k < 2; k++) {
    teardown(&u[k], c);
    free_vals(&v[k]);
  }
  free_data(&d);
  free(u);
  free(v);
  return r->failed;
}

void oh_missing_types(const oh_case *cases, size_t n, char *missing, size_t len) {
  size_t k = 0;
  missing[0] = '\0';
  for (const nnt_layer_ops *const *p = nnt_layer_ops_all(); *p; p++) {
    int seen = 0;
    for (size_t i = 0; i < n && !seen; i++)
      seen = !cases[i].ops && nnt_streq(cases[i].type, (*p)->type);
    if (!seen && k < len)
      k += (size_t)snprintf(missing + k, len - k, "%s%s", k ? ", " : "", (*p)->type);
  }
}

int oh_same_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  (void)l, (void)e;
  ctx->out_dim[0] = ctx->in_dim[0];
  ctx->flags = 0;
  return NNT_OK;
}

int oh_copy_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  (void)l;
  return ctx->k->copy(ctx->k, nnt_tensor_len(&ctx->in[0]), ctx->in[0].data, ctx->out[0].data);
}

int oh_copy_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  (void)l;
  return ctx->k->copy(ctx->k, nnt_tensor_len(&ctx->d_out[0]), ctx->d_out[0].data,
                      ctx->d_in[0].data);
}
