/* rnn, gru, rnncell and grucell against PyTorch (test/golden/gen_layers.py
 * writes test/golden/layers/rec_*.bin; its comment gives the layout):
 * torch.nn.GRU/RNN/GRUCell/RNNCell with NNTrainer's weights mapped to them,
 * and for reset_after=false, which PyTorch lacks, the script's own float64
 * formula (the same formula gives torch.nn.GRU's values with reset_after,
 * which the script asserts). Output, dX (and a cell's d of the previous
 * state) and every weight gradient, with the weights loaded in NNTrainer's
 * order and layout, within 1e-5 of max(1, |reference|). A frozen layer's
 * calc_derivative, with no calc_gradient before it, gives the same dX,
 * with the forward's own scratch and the output (where the backward does
 * not declare it reads it) NaN. */
#include "test_util.h"
#include "nntrainer/layer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-5

typedef struct rec_case {
  const char *name, *type;
  const char *props[12]; /* key, value, ..., NULL */
  unsigned b, t, f, u;   /* t 0: a cell */
  unsigned n_w;          /* weights the layer asks for */
} rec_case;

static float *host(nnt_tensor *t, nnt_dim d, const float *from) {
  t->dim = d;
  t->data = calloc(nnt_dim_len(d), sizeof(float));
  assert_non_null(t->data);
  if (from)
    memcpy(t->data, from, nnt_dim_len(d) * sizeof(float));
  return t->data;
}

static void run_case(const rec_case *c) {
  size_t n;
  float *g = tu_read_floats(tu_data_path("golden/layers/rec_%s.bin", c->name), &n);
  nnt_err e = {0};
  nnt_layer *l;
  assert_int_equal(nnt_layer_create(c->type, &l, &e), NNT_OK);
  for (size_t i = 0; c->props[i]; i += 2)
    if (nnt_layer_set_property(l, c->props[i], c->props[i + 1], &e))
      fail_msg("%s: %s", c->name, e.msg);
  int cell = c->t == 0;
  nnt_finalize_ctx fc = {.batch = c->b, .n_in = cell ? 2 : 1, .n_out = 1, .trainable = 1};
  fc.in_dim[0] = nnt_dim_make(c->b, 1, cell ? 1 : c->t, c->f);
  fc.in_dim[1] = nnt_dim_make(c->b, 1, 1, c->u);
  if (l->ops->finalize(l, &fc, &e))
    fail_msg("%s: finalize: %s", c->name, e.msg);
  assert_int_equal(fc.n_w, c->n_w);

  /* the file: inputs, weights, R, out, d of the inputs, weight gradients */
  nnt_tensor in[2], din[2], out, dout, w[NNT_MAX_WEIGHTS], gw[NNT_MAX_WEIGHTS],
      sc[NNT_MAX_SCRATCH];
  const float *p = g;
  for (unsigned i = 0; i < fc.n_in; i++) {
    host(&in[i], fc.in_dim[i], p);
    host(&din[i], fc.in_dim[i], NULL);
    p += nnt_dim_len(fc.in_dim[i]);
  }
  for (unsigned k = 0; k < fc.n_w; k++) {
    host(&w[k], fc.w[k].dim, p);
    host(&gw[k], fc.w[k].dim, NULL);
    p += nnt_dim_len(fc.w[k].dim);
  }
  size_t no = nnt_dim_len(fc.out_dim[0]);
  host(&dout, fc.out_dim[0], p);
  host(&out, fc.out_dim[0], NULL);
  const float *want_out = p + no;
  p += 2 * no;
  for (unsigned s = 0; s < fc.n_scratch; s++)
    host(&sc[s], fc.scratch_dim[s], NULL);
  nnt_run_ctx ctx = {.k = nnt_kernels_cpu(), .n_in = fc.n_in, .n_out = 1, .n_w = fc.n_w,
                     .n_scratch = fc.n_scratch, .in = in, .out = &out, .d_out = &dout,
                     .d_in = din, .w = w, .gw = gw, .scratch = sc, .training = 1};
  assert_int_equal(l->ops->forward(l, &ctx), NNT_OK);
  assert_int_equal(l->ops->calc_gradient(l, &ctx), NNT_OK);
  assert_int_equal(l->ops->calc_derivative(l, &ctx), NNT_OK);
  tu_expect_close(out.data, want_out, no, TOL, "%s out", c->name);
  for (unsigned i = 0; i < fc.n_in; i++) {
    tu_expect_close(din[i].data, p, nnt_dim_len(fc.in_dim[i]), TOL, "%s %s", c->name,
                    i ? "d of the previous state" : "dx");
    p += nnt_dim_len(fc.in_dim[i]);
  }
  for (unsigned k = 0; k < fc.n_w; k++) {
    tu_expect_close(gw[k].data, p, nnt_dim_len(fc.w[k].dim), TOL, "%s %s", c->name, fc.w[k].name);
    p += nnt_dim_len(fc.w[k].dim);
  }
  assert_int_equal((size_t)(p - g), n);

  /* frozen (no weight gradient, so no calc_gradient before it):
   * calc_derivative runs the backward itself and gives the same bits */
  float *first[2];
  float *saved_gw[NNT_MAX_WEIGHTS];
  for (unsigned i = 0; i < fc.n_in; i++) {
    size_t len = nnt_dim_len(fc.in_dim[i]);
    first[i] = malloc(len * sizeof(float));
    assert_non_null(first[i]);
    memcpy(first[i], din[i].data, len * sizeof(float));
    for (size_t j = 0; j < len; j++)
      din[i].data[j] = NAN;
  }
  for (unsigned s = 0; s < fc.n_scratch; s++)
    if (fc.scratch_life[s] == NNT_SCRATCH_BWD)
      for (size_t j = 0; j < nnt_tensor_len(&sc[s]); j++)
        sc[s].data[j] = NAN;
  for (unsigned k = 0; k < fc.n_w; k++)
    saved_gw[k] = gw[k].data, gw[k].data = NULL;
  assert_int_equal(l->ops->forward(l, &ctx), NNT_OK);
  /* what the backward does not read may be gone: the forward's own
   * scratch (a gru's states: its backward makes each segment's again from
   * the states it kept), and the output unless the layer reads it */
  for (unsigned s = 0; s < fc.n_scratch; s++)
    if (fc.scratch_life[s] == NNT_SCRATCH_FWD)
      for (size_t j = 0; j < nnt_tensor_len(&sc[s]); j++)
        sc[s].data[j] = NAN;
  if (!(fc.flags & NNT_LF_BWD_READS_OUTPUT))
    for (size_t j = 0; j < no; j++)
      out.data[j] = NAN;
  assert_int_equal(l->ops->calc_derivative(l, &ctx), NNT_OK);
  for (unsigned i = 0; i < fc.n_in; i++) {
    if (memcmp(first[i], din[i].data, nnt_dim_len(fc.in_dim[i]) * sizeof(float)))
      fail_msg("%s: d_in[%u] without calc_gradient differs", c->name, i);
    free(first[i]);
  }
  for (unsigned k = 0; k < fc.n_w; k++)
    gw[k].data = saved_gw[k];

  for (unsigned i = 0; i < fc.n_in; i++)
    free(in[i].data), free(din[i].data);
  for (unsigned k = 0; k < fc.n_w; k++)
    free(w[k].data), free(gw[k].data);
  for (unsigned s = 0; s < fc.n_scratch; s++)
    free(sc[s].data);
  free(out.data), free(dout.data), free(g);
  nnt_layer_destroy(l);
}

static const rec_case cases[] = {
    {"gru_seq", "gru", {"unit", "5", "return_sequences", "true", NULL}, 2, 4, 3, 5, 4},
    {"gru_last_integrate", "gru", {"unit", "4", "integrate_bias", "true", NULL}, 3, 5, 2, 4, 3},
    {"gru_reset_before", "gru",
     {"unit", "5", "return_sequences", "true", "reset_after", "false", NULL}, 2, 4, 3, 5, 4},
    {"gru_reset_before_integrate", "gru",
     {"unit", "3", "reset_after", "false", "integrate_bias", "true", NULL}, 2, 3, 4, 3, 3},
    {"rnn_seq", "rnn", {"unit", "5", "return_sequences", "true", NULL}, 2, 4, 3, 5, 4},
    {"rnn_last_relu_integrate", "rnn",
     {"unit", "4", "hidden_state_activation", "relu", "integrate_bias", "true", NULL}, 3, 5, 2,
     4, 3},
    {"grucell", "grucell", {"unit", "5", NULL}, 3, 0, 4, 5, 4},
    {"grucell_reset_before_integrate", "grucell",
     {"unit", "4", "reset_after", "false", "integrate_bias", "true", NULL}, 2, 0, 3, 4, 3},
    {"rnncell", "rnncell", {"unit", "5", NULL}, 3, 0, 4, 5, 4},
    {"rnncell_integrate", "rnncell", {"unit", "4", "integrate_bias", "true", NULL}, 2, 0, 3, 4,
     3},
};

static void test_against_pytorch(void **state) {
  (void)state;
  for (size_t i = 0; i < NNT_ARRAY_LEN(cases); i++)
    run_case(&cases[i]);
}

int main(void) {
  assert_int_equal(nnt_cpu_set_threads(1, NULL), NNT_OK);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_against_pytorch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
