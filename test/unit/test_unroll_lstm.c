/* An lstmcell unrolled over time by the recurrent realizer (unroll_for,
 * its hidden and cell states as recurrent inputs, as_sequence or the last
 * step) trains as the lstm layer does with the same weights: the same
 * outputs and trained weights, through the INI loader and the C API, on
 * the CPU and on the fake device. A fully_connected before the cell makes
 * the input's derivative (a sum over the steps) reach a weight too. The
 * lstm model repeats that input over time with a concat (the realizer
 * gives every step the same outside input). Also: the last step's cell
 * state, read by no layer, gets no derivative tensor (the cell reads NULL
 * as zero; dead tensors are poisoned with NaN, so stale memory would
 * show); the weight file holds the cell's weights once, in NNTrainer's
 * order, and loads into the lstm layer. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_device.h"
#include "nntrainer.h"
#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

enum { B = 2, T = 5, F = 3, E = 3, U = 4, SAMPLES = 4, MAXT = 300 };

#define HEAD                                                                                  \
  "[Model]\ntype = NeuralNetwork\nbatch_size = 2\nepochs = 2\nloss = mse\n"                 \
  "[Optimizer]\ntype = sgd\nlearning_rate = 0.1\n"                                            \
  "[x]\ntype = input\ninput_shape = 1:1:3\n"                                                  \
  "[emb]\ntype = fully_connected\nunit = 3\nactivation = tanh\n"

/* The cell from a zero state (h0, c0), unrolled T times. */
static const char *const cell_ini = HEAD
    "[h0]\ntype = input\ninput_shape = 1:1:4\n"
    "[c0]\ntype = input\ninput_shape = 1:1:4\n"
    "[c]\ntype = lstmcell\nunit = 4\ninput_layers = emb, h0, c0\nunroll_for = 5\n"
    "recurrent_input = c(1), c(2)\nrecurrent_output = c(0), c(1)\n";

/* The lstm layer over the same input repeated T times along the height. */
static const char *const lstm_ini = HEAD
    "[rep]\ntype = concat\naxis = 2\ninput_layers = emb, emb, emb, emb, emb\n"
    "[s]\ntype = lstm\nunit = 4\n";

/* The data: sample i's x and label from a seed of i; zero states. The
 * model's inputs in its order, told apart by width (F != U). */
typedef struct gen {
  unsigned i, n_in, seq, steps; /* steps 0: T */
  size_t in_w[3];
} gen;

static int gen_cb(float **in, float **lab, bool *last, void *ud) {
  gen *g = ud;
  size_t steps = g->steps ? g->steps : T;
  nnt_rng r;
  nnt_rng_seed(&r, 100 + g->i);
  for (unsigned k = 0; k < g->n_in; k++)
    if (g->in_w[k] == F || g->in_w[k] == steps * F) { /* x, or x repeated */
      tu_fill_uniform(&r, in[k], F, -1, 1);
      for (size_t t = F; t < g->in_w[k]; t += F)
        memcpy(in[k] + t, in[k], F * sizeof(float));
    } else {
      memset(in[k], 0, g->in_w[k] * sizeof(float));
    }
  float y[MAXT * U];
  tu_fill_uniform(&r, y, steps * U, -1, 1);
  if (g->seq)
    memcpy(lab[0], y, steps * U * sizeof(float));
  else /* the last step's part */
    memcpy(lab[0], y + (steps - 1) * U, U * sizeof(float));
  *last = ++g->i == SAMPLES;
  if (*last)
    g->i = 0;
  return 0;
}

static void gen_init(gen *g, const nnt_model *m, int seq) {
  nnt_dim d[3];
  g->i = 0;
  g->steps = 0;
  g->seq = (unsigned)seq;
  g->n_in = nnt_model_input_dims(m, d, 3);
  for (unsigned k = 0; k < g->n_in; k++)
    g->in_w[k] = (size_t)d[k].c * d[k].h * d[k].w;
}

typedef struct variant {
  int seq;         /* as_sequence / return_sequences */
  int fake;        /* on the fake device */
  const char *ov;  /* one more override of both models, or NULL */
} variant;

/* Load text with the variant's overrides (the cell's named c, the lstm's
 * s), on the fake device or not, with the generator; compiled and
 * initialized, dead tensors poisoned. */
static nnt_model *load(const char *text, int cell, const variant *v, gen *g) {
  char ov[2][96];
  const char *ovp[2];
  size_t n = 0;
  const char *who = cell ? "c" : "s";
  if (v->seq)
    snprintf(ov[n], sizeof ov[n], cell ? "c.as_sequence=c" : "s.return_sequences=true"),
        ovp[n] = ov[n], n++;
  if (v->ov)
    snprintf(ov[n], sizeof ov[n], "%s.%s", who, v->ov), ovp[n] = ov[n], n++;
  nnt_model *m;
  nnt_err e = {0};
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  m->poison = 1;
  if (nnt_ini_load_text(m, cell ? "cell.ini" : "lstm.ini", text, strlen(text), ovp, n, &e))
    fail_msg("%s", e.msg);
  if (v->fake)
    assert_int_equal(nnt_model_set_backend(m, fdev_backend(), &e), NNT_OK);
  if (nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("%s", e.msg);
  gen_init(g, m, v->seq);
  nnt_dataset *ds;
  assert_int_equal(nnt_dataset_create_generator(gen_cb, g, &ds, &e), NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, &e), NNT_OK);
  return m;
}

/* The floats of a weight file. */
static float *file_floats(const char *path, size_t *n) {
  size_t bytes;
  unsigned char *b = tu_file_bytes(path, &bytes);
  assert_int_equal(bytes % sizeof(float), 0);
  *n = bytes / sizeof(float);
  return (float *)b;
}

/* The largest |a - b|, and whether every float is the same bits. */
static double max_abs(const float *a, const float *b, size_t n, int *same) {
  double d = 0;
  *same = memcmp(a, b, n * sizeof *a) == 0;
  for (size_t i = 0; i < n; i++)
    d = fmax(d, fabs((double)a[i] - b[i]));
  return d;
}

/* Inference on in; y gets the hidden state (or states). A cell model has
 * a second output: the last step's cell state, which no layer reads,
 * [b, 1, 1, U]; the outputs come in node order (nnt_model_output_dims),
 * so it is found by its node. */
static void infer0(nnt_model *m, const float *const *in, float *y) {
  static float cs[B * U];
  float *out[2] = {y, cs};
  unsigned n = 0, cell_at = 2;
  for (size_t i = 0; i < m->n_nodes; i++)
    for (unsigned o = 0; o < m->nodes[i].fc.n_out; o++)
      if (!m->nodes[i].n_consumers[o]) {
        if (!strcmp(m->nodes[i].layer->ops->type, "lstmcell")) {
          assert_int_equal(o, 1);
          assert_true(nnt_dim_eq(m->nodes[i].fc.out_dim[1], nnt_dim_make(B, 1, 1, U)));
          cell_at = n;
        }
        n++;
      }
  nnt_dim d[2];
  assert_int_equal(nnt_model_output_dims(m, d, 2), n);
  assert_true(n == 1 || (n == 2 && cell_at < 2));
  if (cell_at == 0)
    out[0] = cs, out[1] = y;
  nnt_err e = {0};
  if (nnt_model_infer(m, in, out, &e))
    fail_msg("%s", e.msg);
}

/* Both models' outputs on one batch (inference), compared. */
static double outputs_diff(nnt_model *cell, nnt_model *lstm, int seq, int *same) {
  float x[B * F], zero[B * U] = {0}, yc[B * T * U], yl[B * T * U];
  nnt_rng r;
  nnt_rng_seed(&r, 7);
  tu_fill_uniform(&r, x, B * F, -1, 1);
  nnt_dim d[3];
  unsigned ni = nnt_model_input_dims(cell, d, 3);
  assert_int_equal(ni, 3);
  const float *in_c[3], *in_l[1] = {x};
  for (unsigned k = 0; k < 3; k++)
    in_c[k] = d[k].w == F ? x : zero;
  infer0(cell, in_c, yc);
  infer0(lstm, in_l, yl);
  return max_abs(yc, yl, (size_t)B * (seq ? T : 1) * U, same);
}

/* Train the cell model (built by the caller) and the lstm model from the
 * cell's initial weights; compare outputs and trained weights. *bitwise:
 * whether the trained weight files are the same bytes. */
static void compare(nnt_model *cell, const variant *v, int *bitwise) {
  gen gl;
  nnt_model *lstm = load(lstm_ini, 0, v, &gl);
  char *dir = tu_mkdtemp(), p0[1200], pc[1200], pl[1200];
  snprintf(p0, sizeof p0, "%s/init.bin", dir);
  snprintf(pc, sizeof pc, "%s/cell.bin", dir);
  snprintf(pl, sizeof pl, "%s/lstm.bin", dir);
  nnt_err e = {0};
  assert_int_equal(nnt_model_save_weights(cell, p0, 0, &e), NNT_OK);
  /* emb's weight and bias, then the cell's once: weight_ih, weight_hh,
   * bias_ih, bias_hh (NNTrainer's order, the lstm layer's) */
  size_t n;
  float *w0 = file_floats(p0, &n);
  assert_int_equal(n, F * E + E + E * 4 * U + U * 4 * U + 4 * U + 4 * U);
  const nnt_node *c0 = tu_node(cell, "c/0");
  static const char *const names[] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
  assert_int_equal(c0->fc.n_w, 4);
  size_t at = F * E + E;
  for (unsigned w = 0; w < 4; w++) {
    assert_string_equal(c0->fc.w[w].name, names[w]);
    size_t len = nnt_tensor_len(&cell->w[c0->w_first + w]);
    float *got = malloc(len * sizeof *got);
    assert_int_equal(nnt_tensor_get(&cell->w[c0->w_first + w], 0, got, len, &e), NNT_OK);
    assert_memory_equal(got, w0 + at, len * sizeof *got);
    at += len;
    free(got);
  }
  free(w0);
  if (nnt_model_load_weights(lstm, p0, &e))
    fail_msg("%s", e.msg);
  int same;
  double d0 = outputs_diff(cell, lstm, v->seq, &same);
  if (d0 > 1e-6)
    fail_msg("before training: outputs differ by %g", d0);
  if (nnt_model_train(cell, NULL, NULL, &e) || nnt_model_train(lstm, NULL, NULL, &e))
    fail_msg("%s", e.msg);
  /* the last step's cell state: no reader, no derivative tensor */
  char last[32];
  snprintf(last, sizeof last, "c/%d", T - 1);
  const nnt_node *ln = tu_node(cell, last);
  assert_int_equal(ln->n_consumers[1], 0);
  assert_int_equal(ln->t_dout[1], -1);
  assert_null(ln->dout[1].data);
  assert_int_equal(nnt_model_save_weights(cell, pc, 0, &e), NNT_OK);
  assert_int_equal(nnt_model_save_weights(lstm, pl, 0, &e), NNT_OK);
  size_t nc, nl, ni;
  float *wc = file_floats(pc, &nc), *wl = file_floats(pl, &nl), *wi = file_floats(p0, &ni);
  assert_int_equal(nc, nl);
  double dw = max_abs(wc, wl, nc, bitwise);
  /* weight_ih and weight_hh: their per-step products are added in the
   * same order (the lstm's gemm with beta 1, the cell's product then the
   * shared sum), so the same bits; the biases' (the lstm adds rows into
   * its running sum, the cell sums a step's rows first) and emb's (the
   * input's derivative summed over steps in another order) may differ in
   * the last bits */
  int w_same;
  size_t w_at = F * E + E, w_len = E * 4 * U + U * 4 * U;
  max_abs(wc + w_at, wl + w_at, w_len, &w_same);
  if (!w_same)
    fail_msg("seq %d fake %d: weight_ih, weight_hh not the same bits", v->seq, v->fake);
  /* training moved every weight group */
  int untouched;
  max_abs(wc, wi, nc, &untouched);
  assert_false(untouched);
  assert_true(max_abs(wc, wi, F * E, &untouched) > 1e-4); /* emb's weight too */
  if (dw > 1e-6)
    fail_msg("seq %d fake %d %s: trained weights differ by %g", v->seq, v->fake,
             v->ov ? v->ov : "", dw);
  double d1 = outputs_diff(cell, lstm, v->seq, &same);
  if (d1 > 1e-6)
    fail_msg("after training: outputs differ by %g", d1);
  free(wc), free(wl), free(wi);
  nnt_model_destroy(lstm);
  tu_rmdir(dir);
  free(dir);
}

static const variant variants[] = {
    {1, 0, NULL},
    {0, 0, NULL},
    {1, 1, NULL},
    {0, 1, NULL},
    {1, 0, "hidden_state_activation=sigmoid"},
    {0, 1, "recurrent_activation=tanh"},
};

/* (a) INI: each variant; the weights the same bits or within 1e-6. */
static void test_ini(void **state) {
  (void)state;
  for (size_t i = 0; i < NNT_ARRAY_LEN(variants); i++) {
    gen g;
    nnt_model *cell = load(cell_ini, 1, &variants[i], &g);
    int bitwise;
    compare(cell, &variants[i], &bitwise);
    print_message("variant %zu: trained weights %s\n", i,
                  bitwise ? "bitwise equal" : "within 1e-6");
    nnt_model_destroy(cell);
  }
}

/* (b) as_sequence past NNT_MAX_IO steps: a tree of concats, each with a
 * step's own output first (so each takes the single concat's axis). 64
 * steps: the root c/concat_0 joins step 0 and four concats of 16, 16, 16
 * and 15 steps, giving b:64:1:4; training equals the lstm layer's over
 * the input repeated 64 times (within 1e-6). 300 steps: three levels. */
static const char *const long_cell = "[Model]\ntype = NeuralNetwork\nbatch_size = 2\n"
    "epochs = 1\nloss = mse\n[Optimizer]\ntype = sgd\nlearning_rate = 0.1\n"
    "[x]\ntype = input\ninput_shape = 1:1:3\n"
    "[h0]\ntype = input\ninput_shape = 1:1:4\n"
    "[c0]\ntype = input\ninput_shape = 1:1:4\n"
    "[c]\ntype = lstmcell\nunit = 4\ninput_layers = x, h0, c0\nunroll_for = %u\n"
    "recurrent_input = c(1), c(2)\nrecurrent_output = c(0), c(1)\nas_sequence = c\n";
static const char *const long_lstm = "[Model]\ntype = NeuralNetwork\nbatch_size = 2\n"
    "epochs = 1\nloss = mse\n[Optimizer]\ntype = sgd\nlearning_rate = 0.1\n"
    "[x]\ntype = input\ninput_shape = 1:%u:3\n"
    "[s]\ntype = lstm\nunit = 4\nreturn_sequences = true\n";

static nnt_model *load_long(const char *fmt, unsigned steps, const char *ov, gen *g) {
  char text[1024];
  snprintf(text, sizeof text, fmt, steps);
  nnt_model *m;
  nnt_err e = {0};
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  m->poison = 1;
  if (nnt_ini_load_text(m, "long.ini", text, strlen(text), &ov, ov ? 1 : 0, &e) ||
      nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("%s", e.msg);
  gen_init(g, m, 1);
  g->steps = steps;
  nnt_dataset *ds;
  assert_int_equal(nnt_dataset_create_generator(gen_cb, g, &ds, &e), NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, &e), NNT_OK);
  return m;
}

static void test_long_sequence(void **state) {
  (void)state;
  gen gc, gl;
  enum { S = 64 };
  nnt_model *cell = load_long(long_cell, S, NULL, &gc),
            *lstm = load_long(long_lstm, S, NULL, &gl);
  const nnt_node *root = tu_node(cell, "c/concat_0");
  assert_int_equal(root->n_in, 5);
  assert_string_equal(cell->nodes[root->in_node[0]].layer->name, "c/0");
  static const unsigned first[] = {1, 17, 33, 49}, len[] = {16, 16, 16, 15};
  for (unsigned j = 0; j < 4; j++) {
    char want[32];
    snprintf(want, sizeof want, "c/concat_0/%u", j + 1);
    const nnt_node *leaf = &cell->nodes[root->in_node[j + 1]];
    assert_string_equal(leaf->layer->name, want);
    assert_int_equal(leaf->n_in, len[j]);
    for (unsigned k = 0; k < len[j]; k++) {
      snprintf(want, sizeof want, "c/%u", first[j] + k);
      assert_string_equal(cell->nodes[leaf->in_node[k]].layer->name, want);
      assert_int_equal(leaf->in_idx[k], 0);
    }
  }
  nnt_dim od[2];
  assert_int_equal(nnt_model_output_dims(cell, od, 2), 2);
  assert_true(nnt_dim_eq(od[1], nnt_dim_make(B, S, 1, U)));
  char *dir = tu_mkdtemp(), p0[1200], pc[1200], pl[1200];
  snprintf(p0, sizeof p0, "%s/init.bin", dir);
  snprintf(pc, sizeof pc, "%s/cell.bin", dir);
  snprintf(pl, sizeof pl, "%s/lstm.bin", dir);
  nnt_err e = {0};
  if (nnt_model_save_weights(cell, p0, 0, &e) || nnt_model_load_weights(lstm, p0, &e))
    fail_msg("%s", e.msg);
  /* outputs of every step, in order */
  static float x[B * F], xs[B * MAXT * F], zero[B * U], yc[B * MAXT * U], yl[B * MAXT * U];
  nnt_rng r;
  nnt_rng_seed(&r, 9);
  tu_fill_uniform(&r, x, B * F, -1, 1);
  for (unsigned b = 0; b < B; b++)
    for (unsigned t = 0; t < S; t++)
      memcpy(xs + (b * S + t) * F, x + b * F, F * sizeof(float));
  nnt_dim d[3];
  assert_int_equal(nnt_model_input_dims(cell, d, 3), 3);
  const float *in_c[3], *in_l[1] = {xs};
  for (unsigned k = 0; k < 3; k++)
    in_c[k] = d[k].w == F ? x : zero;
  infer0(cell, in_c, yc);
  infer0(lstm, in_l, yl);
  int same;
  double dy = max_abs(yc, yl, B * S * U, &same);
  if (dy > 1e-6)
    fail_msg("64 steps: outputs differ by %g", dy);
  if (nnt_model_train(cell, NULL, NULL, &e))
    fail_msg("cell: %s", e.msg);
  if (nnt_model_train(lstm, NULL, NULL, &e))
    fail_msg("lstm: %s", e.msg);
  assert_int_equal(nnt_model_save_weights(cell, pc, 0, &e), NNT_OK);
  assert_int_equal(nnt_model_save_weights(lstm, pl, 0, &e), NNT_OK);
  size_t nc, nl, ni;
  float *wc = file_floats(pc, &nc), *wl = file_floats(pl, &nl), *wi = file_floats(p0, &ni);
  assert_int_equal(nc, nl);
  assert_true(max_abs(wc, wi, nc, &same) > 1e-4);
  double dw = max_abs(wc, wl, nc, &same);
  if (dw > 1e-6)
    fail_msg("64 steps: trained weights differ by %g", dw);
  free(wc), free(wl), free(wi);
  nnt_model_destroy(cell);
  nnt_model_destroy(lstm);
  tu_rmdir(dir);
  free(dir);
  /* 300 steps: the root, 15 groups of 20 or 19 steps, each a concat of a
   * step and concats */
  nnt_model *big = load_long(long_cell, 300, NULL, &gc);
  root = tu_node(big, "c/concat_0");
  assert_int_equal(root->n_in, 16);
  const nnt_node *mid = &big->nodes[root->in_node[1]];
  assert_string_equal(mid->layer->ops->type, "concat");
  assert_string_equal(big->nodes[mid->in_node[0]].layer->name, "c/1");
  assert_string_equal(big->nodes[mid->in_node[1]].layer->ops->type, "concat");
  assert_int_equal(nnt_model_output_dims(big, od, 2), 2);
  assert_true(nnt_dim_eq(od[1], nnt_dim_make(B, 300, 1, U)));
  gc.steps = 300;
  if (nnt_model_train(big, NULL, NULL, &e))
    fail_msg("%s", e.msg);
  nnt_model_destroy(big);
}

/* (c) the memory planner sees every step: a 64-step lstmcell with
 * as_sequence (batch 8, 16 features, 32 units, the tree of concats)
 * plans its training and inference arenas within 1% of their lower
 * bounds (the most bytes live at one execution order). */
static void test_long_sequence_plan(void **state) {
  (void)state;
  static const char *const ov[] = {"batch_size=8", "x.input_shape=1:1:16",
                                   "h0.input_shape=1:1:32", "c0.input_shape=1:1:32",
                                   "c.unit=32"};
  char text[1024];
  snprintf(text, sizeof text, long_cell, 64u);
  nnt_model *m;
  nnt_err e = {0};
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  if (nnt_ini_load_text(m, "long.ini", text, strlen(text), ov, NNT_ARRAY_LEN(ov), &e) ||
      nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("%s", e.msg);
  static const nnt_mode modes[] = {NNT_MODE_TRAIN, NNT_MODE_INFER};
  for (size_t i = 0; i < 2; i++) {
    if (nnt_model_plan(m, modes[i], &e))
      fail_msg("%s", e.msg);
    const nnt_mgr *g = &m->mgr[modes[i]];
    assert_true(g->lower_bound > 0);
    double ratio = (double)g->arena_bytes / (double)g->lower_bound;
    print_message("mode %d: arena %zu, lower bound %zu, ratio %.4f\n", (int)modes[i],
                  g->arena_bytes, g->lower_bound, ratio);
    if (ratio > 1.01)
      fail_msg("mode %d: arena %zu bytes, %.4f times its lower bound %zu", (int)modes[i],
               g->arena_bytes, ratio, g->lower_bound);
  }
  nnt_model_destroy(m);
}

#define OK(x) assert_int_equal((x), ML_ERROR_NONE)

static ml_train_layer_h add(ml_train_model_h m, ml_train_layer_type_e type, const char *name,
                            const char *k1, const char *k2, const char *k3) {
  ml_train_layer_h l;
  OK(ml_train_layer_create(&l, type));
  OK(ml_train_layer_set_property(l, name, k1, k2, k3, NULL));
  OK(ml_train_model_add_layer(m, l));
  return l;
}

/* (b) the C API: the cell model built with ml_train_* calls (the keys set
 * one call each), trained by ml_train_model_run from its saved initial
 * weights, against the INI lstm model from the same file. */
static void test_capi(void **state) {
  (void)state;
  for (int seq = 0; seq < 2; seq++) {
    ml_train_model_h m;
    OK(ml_train_model_construct(&m));
    add(m, ML_TRAIN_LAYER_TYPE_INPUT, "name=x", "input_shape=1:1:3", NULL, NULL);
    add(m, ML_TRAIN_LAYER_TYPE_FC, "name=emb", "unit=3", "activation=tanh", NULL);
    add(m, ML_TRAIN_LAYER_TYPE_INPUT, "name=h0", "input_shape=1:1:4", NULL, NULL);
    add(m, ML_TRAIN_LAYER_TYPE_INPUT, "name=c0", "input_shape=1:1:4", NULL, NULL);
    ml_train_layer_h c = add(m, ML_TRAIN_LAYER_TYPE_LSTMCELL, "name=c", "unit=4",
                             "input_layers=emb, h0, c0", NULL);
    OK(ml_train_layer_set_property(c, "unroll_for=5", NULL));
    OK(ml_train_layer_set_property(c, "recurrent_input=c(1), c(2)", NULL));
    OK(ml_train_layer_set_property(c, "recurrent_output=c(0), c(1)", NULL));
    if (seq)
      OK(ml_train_layer_set_property(c, "as_sequence=c", NULL));
    ml_train_optimizer_h o;
    OK(ml_train_optimizer_create(&o, ML_TRAIN_OPTIMIZER_TYPE_SGD));
    OK(ml_train_optimizer_set_property(o, "learning_rate=0.1", NULL));
    OK(ml_train_model_set_optimizer(m, o));
    gen g = {.seq = (unsigned)seq};
    ml_train_dataset_h ds;
    OK(ml_train_dataset_create(&ds));
    OK(ml_train_dataset_add_generator(ds, ML_TRAIN_DATASET_MODE_TRAIN, gen_cb, &g));
    OK(ml_train_model_set_dataset(m, ds));
    OK(ml_train_model_compile(m, "batch_size=2", "loss=mse", NULL));
    /* the inputs in the model's order (the graph's, not the order added) */
    ml_tensors_info_h info;
    OK(ml_train_model_get_input_tensors_info(m, &info));
    OK(ml_tensors_info_get_count(info, &g.n_in));
    assert_int_equal(g.n_in, 3);
    for (unsigned k = 0; k < 3; k++) {
      ml_tensor_dimension d;
      OK(ml_tensors_info_get_tensor_dimension(info, k, d));
      g.in_w[k] = d[3];
    }
    assert_int_equal((g.in_w[0] == F) + (g.in_w[1] == F) + (g.in_w[2] == F), 1);
    OK(ml_tensors_info_destroy(info));
    char *dir = tu_mkdtemp(), p0[1200], pc[1200], pl[1200];
    snprintf(p0, sizeof p0, "%s/init.bin", dir);
    snprintf(pc, sizeof pc, "%s/cell.bin", dir);
    snprintf(pl, sizeof pl, "%s/lstm.bin", dir);
    OK(ml_train_model_save(m, p0, ML_TRAIN_MODEL_FORMAT_BIN));
    OK(ml_train_model_run(m, "epochs=2", NULL));
    OK(ml_train_model_save(m, pc, ML_TRAIN_MODEL_FORMAT_BIN));
    OK(ml_train_model_destroy(m));
    variant v = {seq, 0, NULL};
    gen gl;
    nnt_model *lstm = load(lstm_ini, 0, &v, &gl);
    nnt_err e = {0};
    if (nnt_model_load_weights(lstm, p0, &e) || nnt_model_train(lstm, NULL, NULL, &e))
      fail_msg("%s", e.msg);
    assert_int_equal(nnt_model_save_weights(lstm, pl, 0, &e), NNT_OK);
    size_t nc, nl, ni;
    float *wc = file_floats(pc, &nc), *wl = file_floats(pl, &nl), *wi = file_floats(p0, &ni);
    /* the API's saves end with the epoch and iteration counters (two
     * uint32), as NNTrainer's */
    assert_int_equal(nc, ni);
    assert_int_equal(nc, nl + 2);
    int same;
    double dw = max_abs(wc, wl, nl, &same), moved = max_abs(wc, wi, F * E, &same);
    assert_true(moved > 1e-4); /* emb's weight too: the input was not zeros */
    if (dw > 1e-6)
      fail_msg("C API, seq %d: trained weights differ by %g", seq, dw);
    free(wc), free(wl), free(wi);
    nnt_model_destroy(lstm);
    tu_rmdir(dir);
    free(dir);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ini),
      cmocka_unit_test(test_capi),
      cmocka_unit_test(test_long_sequence),
      cmocka_unit_test(test_long_sequence_plan),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
