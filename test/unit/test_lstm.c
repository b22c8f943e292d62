/* lstm and lstmcell: against PyTorch (test/golden/gen_layers.py writes
 * test/golden/layers/lstm*.bin; its comment gives each file's layout), their
 * weights' names, shapes and order (NNTrainer's, so its .bin files load),
 * the errors of bad keys, and the paths the op harness does not take: the
 * backward of a frozen lstm (calc_derivative without calc_gradient) and the
 * forward without the training-only scratch (inference).
 *
 * Tolerance 1e-5 relative to max(1, |reference|): the reference is float64
 * rounded once; a few time steps of float32 stay within some 1e-7. */
#include "test_util.h"
#include "nntrainer/layer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-5

typedef struct run {
  nnt_layer *l;
  nnt_finalize_ctx fc;
  nnt_run_ctx ctx;
  nnt_tensor in[3], out[2], din[3], dout[2], w[NNT_MAX_WEIGHTS], gw[NNT_MAX_WEIGHTS],
      scratch[NNT_MAX_SCRATCH];
} run;

static void alloc_t(nnt_tensor *t, nnt_dim d) {
  t->dim = d;
  t->data = calloc(nnt_dim_len(d), sizeof(float));
  assert_non_null(t->data);
}

/* props: "key", "value", ..., NULL. */
static int setup(run *r, const char *type, const char *const *props, unsigned n_in,
                 const nnt_dim *in, nnt_err *e) {
  memset(r, 0, sizeof *r);
  assert_int_equal(nnt_layer_create(type, &r->l, e), NNT_OK);
  for (size_t i = 0; props && props[i]; i += 2) {
    int rc = nnt_layer_set_property(r->l, props[i], props[i + 1], e);
    if (rc)
      return rc;
  }
  r->fc.batch = in[0].b;
  r->fc.n_in = n_in;
  for (unsigned i = 0; i < n_in; i++)
    r->fc.in_dim[i] = in[i];
  r->fc.n_out = 1;
  r->fc.trainable = 1;
  int rc = r->l->ops->finalize(r->l, &r->fc, e);
  if (rc)
    return rc;
  for (unsigned i = 0; i < n_in; i++)
    alloc_t(&r->in[i], in[i]), alloc_t(&r->din[i], in[i]);
  for (unsigned o = 0; o < r->fc.n_out; o++)
    alloc_t(&r->out[o], r->fc.out_dim[o]), alloc_t(&r->dout[o], r->fc.out_dim[o]);
  for (unsigned w = 0; w < r->fc.n_w; w++)
    alloc_t(&r->w[w], r->fc.w[w].dim), alloc_t(&r->gw[w], r->fc.w[w].dim);
  for (unsigned s = 0; s < r->fc.n_scratch; s++)
    alloc_t(&r->scratch[s], r->fc.scratch_dim[s]);
  nnt_run_ctx *c = &r->ctx;
  c->k = nnt_kernels_cpu();
  c->n_in = n_in, c->n_out = r->fc.n_out, c->n_w = r->fc.n_w, c->n_scratch = r->fc.n_scratch;
  c->in = r->in, c->out = r->out, c->d_in = r->din, c->d_out = r->dout;
  c->w = r->w, c->gw = r->gw, c->scratch = r->scratch;
  c->training = 1, c->seed = 5;
  return NNT_OK;
}

static void teardown(run *r) {
  for (unsigned i = 0; i < 3; i++)
    free(r->in[i].data), free(r->din[i].data);
  for (unsigned o = 0; o < 2; o++)
    free(r->out[o].data), free(r->dout[o].data);
  for (unsigned w = 0; w < NNT_MAX_WEIGHTS; w++)
    free(r->w[w].data), free(r->gw[w].data);
  for (unsigned s = 0; s < NNT_MAX_SCRATCH; s++)
    free(r->scratch[s].data);
  nnt_layer_destroy(r->l);
}

/* Copy n floats from *at into t, advancing *at. */
static void take(const float **at, nnt_tensor *t) {
  size_t n = nnt_tensor_len(t);
  memcpy(t->data, *at, n * sizeof(float));
  *at += n;
}

static void expect(const char *what, const nnt_tensor *t, const float **at) {
  size_t n = nnt_tensor_len(t);
  double err = tu_max_rel_err(t->data, *at, n);
  if (err > TOL)
    fail_msg("%s: max relative error %g > %g", what, err, TOL);
  *at += n;
}

static void backward(run *r) {
  assert_int_equal(r->l->ops->calc_gradient(r->l, &r->ctx), NNT_OK);
  assert_int_equal(r->l->ops->calc_derivative(r->l, &r->ctx), NNT_OK);
}

static void lstm_case(const char *name, unsigned b, unsigned T, unsigned feat, unsigned unit,
                      int seq, int bidir, const char *bias) {
  size_t n;
  float *g = tu_read_floats(tu_data_path("golden/layers/lstm_%s.bin", name), &n);
  char u[16];
  snprintf(u, sizeof u, "%u", unit);
  const char *props[] = {"unit", u, "return_sequences", seq ? "true" : "false",
                         "bidirectional", bidir ? "true" : "false",
                         "integrate_bias", strcmp(bias, "integrate") ? "false" : "true",
                         "disable_bias", strcmp(bias, "none") ? "false" : "true", NULL};
  nnt_dim in = nnt_dim_make(b, 1, T, feat);
  run r;
  nnt_err e = {0};
  assert_int_equal(setup(&r, "lstm", props, 1, &in, &e), NNT_OK);
  assert_true(nnt_dim_eq(r.out[0].dim, nnt_dim_make(b, 1, seq ? T : 1, (bidir ? 2 : 1) * unit)));
  const float *at = g;
  take(&at, &r.in[0]);
  for (unsigned w = 0; w < r.fc.n_w; w++)
    take(&at, &r.w[w]);
  take(&at, &r.dout[0]);
  assert_int_equal(r.l->ops->forward(r.l, &r.ctx), NNT_OK);
  backward(&r);
  char what[96];
  snprintf(what, sizeof what, "lstm_%s out", name);
  expect(what, &r.out[0], &at);
  snprintf(what, sizeof what, "lstm_%s dx", name);
  expect(what, &r.din[0], &at);
  for (unsigned w = 0; w < r.fc.n_w; w++) {
    snprintf(what, sizeof what, "lstm_%s d%s", name, r.fc.w[w].name);
    expect(what, &r.gw[w], &at);
  }
  assert_int_equal((size_t)(at - g), n);
  teardown(&r);
  free(g);
}

static void test_lstm_golden(void **state) {
  (void)state;
  lstm_case("seq", 2, 5, 3, 4, 1, 0, "separate");
  lstm_case("last_int", 3, 4, 2, 3, 0, 0, "integrate");
  lstm_case("bidir_seq", 2, 4, 3, 2, 1, 1, "separate");
  lstm_case("bidir_last_nobias", 2, 3, 2, 3, 0, 1, "none");
}

static void lstmcell_case(const char *name, unsigned b, unsigned feat, unsigned unit,
                          int integrate) {
  size_t n;
  float *g = tu_read_floats(tu_data_path("golden/layers/lstmcell_%s.bin", name), &n);
  char u[16];
  snprintf(u, sizeof u, "%u", unit);
  const char *props[] = {"unit", u, "integrate_bias", integrate ? "true" : "false", NULL};
  nnt_dim in[3] = {nnt_dim_make(b, 1, 1, feat), nnt_dim_make(b, 1, 1, unit),
                   nnt_dim_make(b, 1, 1, unit)};
  run r;
  nnt_err e = {0};
  assert_int_equal(setup(&r, "lstmcell", props, 3, in, &e), NNT_OK);
  assert_int_equal(r.fc.n_out, 2);
  const float *at = g;
  for (unsigned i = 0; i < 3; i++)
    take(&at, &r.in[i]);
  for (unsigned w = 0; w < r.fc.n_w; w++)
    take(&at, &r.w[w]);
  take(&at, &r.dout[0]);
  take(&at, &r.dout[1]);
  assert_int_equal(r.l->ops->forward(r.l, &r.ctx), NNT_OK);
  backward(&r);
  char what[96];
  for (unsigned o = 0; o < 2; o++) {
    snprintf(what, sizeof what, "lstmcell_%s out[%u]", name, o);
    expect(what, &r.out[o], &at);
  }
  for (unsigned i = 0; i < 3; i++) {
    snprintf(what, sizeof what, "lstmcell_%s d_in[%u]", name, i);
    expect(what, &r.din[i], &at);
  }
  for (unsigned w = 0; w < r.fc.n_w; w++) {
    snprintf(what, sizeof what, "lstmcell_%s d%s", name, r.fc.w[w].name);
    expect(what, &r.gw[w], &at);
  }
  assert_int_equal((size_t)(at - g), n);
  teardown(&r);
  free(g);
}

static void test_lstmcell_golden(void **state) {
  (void)state;
  lstmcell_case("sep", 3, 4, 3, 0);
  lstmcell_case("int", 2, 3, 2, 1);
}

/* NNTrainer's weight names, shapes and order (lstm.cpp, lstmcell.cpp). */
static void test_weights(void **state) {
  (void)state;
  static const struct {
    const char *type, *bias, *bidir;
    unsigned n;
    const char *names[8];
  } cases[] = {
      {"lstm", "false", "false", 4, {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}},
      {"lstm", "true", "false", 3, {"weight_ih", "weight_hh", "bias_h"}},
      {"lstm", "true", "true", 6, {"weight_ih", "weight_hh", "bias_h", "reverse_weight_ih",
                                   "reverse_weight_hh", "reverse_bias_h"}},
      {"lstm", "false", "true", 8, {"weight_ih", "weight_hh", "bias_ih", "bias_hh",
                                    "reverse_weight_ih", "reverse_weight_hh",
                                    "reverse_bias_ih", "reverse_bias_hh"}},
      {"lstmcell", "false", NULL, 4, {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}},
      {"lstmcell", "true", NULL, 3, {"weight_ih", "weight_hh", "bias_h"}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const char *props[] = {"unit", "5", "integrate_bias", cases[c].bias,
                           cases[c].bidir ? "bidirectional" : NULL, cases[c].bidir, NULL};
    int cell = !strcmp(cases[c].type, "lstmcell");
    nnt_dim in[3] = {nnt_dim_make(2, 1, cell ? 1 : 4, 3), nnt_dim_make(2, 1, 1, 5),
                     nnt_dim_make(2, 1, 1, 5)};
    run r;
    nnt_err e = {0};
    assert_int_equal(setup(&r, cases[c].type, props, cell ? 3 : 1, in, &e), NNT_OK);
    assert_int_equal(r.fc.n_w, cases[c].n);
    for (unsigned w = 0; w < r.fc.n_w; w++) {
      const char *nm = cases[c].names[w];
      assert_string_equal(r.fc.w[w].name, nm);
      int ih = strstr(nm, "weight_ih") != NULL, hh = strstr(nm, "weight_hh") != NULL;
      nnt_dim want = nnt_dim_make(1, 1, ih ? 3 : hh ? 5 : 1, 20);
      assert_true(nnt_dim_eq(r.fc.w[w].dim, want));
      assert_int_equal(r.fc.w[w].init, ih || hh ? NNT_INIT_XAVIER_UNIFORM : NNT_INIT_ZEROS);
    }
    teardown(&r);
  }
}

/* A bad value is an error naming its key. */
static void test_bad_keys(void **state) {
  (void)state;
  static const struct {
    const char *type, *key, *value;
  } cases[] = {
      {"lstm", "unit", "0"},
      {"lstm", "unit", "x"},
      {"lstm", "hidden_state_activation", "gelu"},
      {"lstm", "hidden_state_activation", "nope"},
      {"lstm", "recurrent_activation", "softmax"},
      {"lstm", "return_sequences", "maybe"},
      {"lstm", "bidirectional", "2"},
      {"lstm", "dropout_rate", "1"},
      {"lstm", "dropout_rate", "-0.1"},
      {"lstm", "integrate_bias", "yes please"},
      {"lstm", "max_timestep", "0"},
      {"lstmcell", "unit", "-3"},
      {"lstmcell", "dropout_rate", "1.5"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    nnt_layer *l;
    nnt_err e = {0};
    assert_int_equal(nnt_layer_create(cases[c].type, &l, &e), NNT_OK);
    int rc = nnt_layer_set_property(l, cases[c].key, cases[c].value, &e);
    if (rc != NNT_ERR_INVAL || !strstr(e.msg, cases[c].key))
      fail_msg("%s %s=%s: code %d, '%s'", cases[c].type, cases[c].key, cases[c].value, rc,
               e.msg);
    nnt_layer_destroy(l);
  }
  /* a single step has no sequence keys */
  static const char *const seq_keys[] = {"return_sequences", "bidirectional", "max_timestep"};
  for (size_t c = 0; c < 3; c++) {
    nnt_layer *l;
    nnt_err e = {0};
    assert_int_equal(nnt_layer_create("lstmcell", &l, &e), NNT_OK);
    assert_int_not_equal(nnt_layer_set_property(l, seq_keys[c], "1", &e), NNT_OK);
    assert_non_null(strstr(e.msg, seq_keys[c]));
    nnt_layer_destroy(l);
  }
  /* at finalize: max_timestep past the input, a missing unit, shapes */
  run r;
  nnt_err e = {0};
  nnt_dim in[3] = {nnt_dim_make(2, 1, 4, 3), nnt_dim_make(2, 1, 1, 5), nnt_dim_make(2, 1, 1, 4)};
  const char *mt[] = {"unit", "2", "max_timestep", "5", NULL};
  assert_int_equal(setup(&r, "lstm", mt, 1, in, &e), NNT_ERR_INVAL);
  assert_non_null(strstr(e.msg, "max_timestep"));
  teardown(&r);
  const char *none[] = {NULL};
  assert_int_equal(setup(&r, "lstm", none, 1, in, &e), NNT_ERR_INVAL);
  assert_non_null(strstr(e.msg, "unit"));
  teardown(&r);
  nnt_dim two = nnt_dim_make(2, 2, 4, 3);
  const char *u2[] = {"unit", "2", NULL};
  assert_int_equal(setup(&r, "lstm", u2, 1, &two, &e), NNT_ERR_INVAL);
  assert_non_null(strstr(e.msg, "one channel"));
  teardown(&r);
  const char *u5[] = {"unit", "5", NULL};
  in[0].h = 1;
  assert_int_equal(setup(&r, "lstmcell", u5, 3, in, &e), NNT_ERR_INVAL);
  assert_non_null(strstr(e.msg, "the cell state"));
  teardown(&r);
}

static void fill(nnt_tensor *t, float scale, unsigned seed) {
  nnt_rng g;
  nnt_rng_seed(&g, seed);
  tu_fill_uniform(&g, t->data, nnt_tensor_len(t), -scale, scale);
}

/* A frozen lstm's calc_derivative (no calc_gradient before it, no
 * gradients) gives the dx it gives after calc_gradient; a forward without
 * the training-only scratch (inference) gives the training output. The
 * backward reads neither the output nor the forward's states (both are
 * NaN here when it runs): it recomputes each segment's states from the
 * ones kept at its start. Its scratch holds no sequence: backpropagation
 * writes each position's dz over its gates in the kept scratch and reads
 * the output's derivative one position at a time. */
static void test_frozen_and_inference(void **state) {
  (void)state;
  const char *props[] = {"unit", "3", "bidirectional", "true", "return_sequences", "true",
                         NULL};
  nnt_dim in = nnt_dim_make(2, 1, 5, 4);
  run r;
  nnt_err e = {0};
  assert_int_equal(setup(&r, "lstm", props, 1, &in, &e), NNT_OK);
  fill(&r.in[0], 1, 1), fill(&r.dout[0], 1, 2);
  for (unsigned w = 0; w < r.fc.n_w; w++)
    fill(&r.w[w], 0.5f, 3 + w);
  size_t no = nnt_tensor_len(&r.out[0]), ni = nnt_tensor_len(&r.in[0]);
  assert_int_equal(r.l->ops->forward(r.l, &r.ctx), NNT_OK);
  float *y = malloc(no * sizeof *y), *dx = malloc(ni * sizeof *dx);
  memcpy(y, r.out[0].data, no * sizeof *y);
  backward(&r);
  memcpy(dx, r.din[0].data, ni * sizeof *dx);
  assert_int_equal(r.fc.scratch_life[0], NNT_SCRATCH_FWD);
  assert_false(r.fc.flags & NNT_LF_BWD_READS_OUTPUT);
  /* kept: the gates (5 positions x 2 directions x 4 gates), then per
   * direction c and h before the second of the segments of 3 steps */
  assert_int_equal(nnt_tensor_len(&r.scratch[1]), (size_t)2 * 3 * (5 * 2 * 4 + 2 * 1 * 2));
  /* the backward's: dh twice, dc, the step's work (7), a segment's c, h
   * and act(c) */
  assert_int_equal(nnt_tensor_len(&r.scratch[3]), (size_t)2 * 3 * (10 + 3 * 3));
  /* frozen, after a forward (the backward wrote dz over the gates): the
   * scratch of the backward, the forward's states and the output dirty,
   * no gradients */
  assert_int_equal(r.l->ops->forward(r.l, &r.ctx), NNT_OK);
  for (size_t i = 0; i < nnt_tensor_len(&r.scratch[3]); i++)
    r.scratch[3].data[i] = NAN;
  for (size_t i = 0; i < nnt_tensor_len(&r.scratch[0]); i++)
    r.scratch[0].data[i] = NAN;
  for (size_t i = 0; i < no; i++)
    r.out[0].data[i] = NAN;
  memset(r.din[0].data, 0, ni * sizeof(float));
  nnt_tensor gw_none[NNT_MAX_WEIGHTS];
  memset(gw_none, 0, sizeof gw_none);
  r.ctx.gw = gw_none;
  assert_int_equal(r.l->ops->calc_derivative(r.l, &r.ctx), NNT_OK);
  assert_memory_equal(r.din[0].data, dx, ni * sizeof *dx);
  r.ctx.gw = r.gw;
  /* inference: no scratch 1 or 3 */
  nnt_tensor s[NNT_MAX_SCRATCH];
  memcpy(s, r.scratch, sizeof s);
  s[1].data = s[3].data = NULL;
  r.ctx.scratch = s;
  r.ctx.training = 0;
  memset(r.out[0].data, 0, no * sizeof(float));
  assert_int_equal(r.l->ops->forward(r.l, &r.ctx), NNT_OK);
  assert_memory_equal(r.out[0].data, y, no * sizeof *y);
  r.ctx.scratch = r.scratch;
  free(y), free(dx);
  teardown(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lstm_golden),
      cmocka_unit_test(test_lstmcell_golden),
      cmocka_unit_test(test_weights),
      cmocka_unit_test(test_bad_keys),
      cmocka_unit_test(test_frozen_and_inference),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
