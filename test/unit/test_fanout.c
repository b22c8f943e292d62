/* Fan-out derivatives (an output read by several layers): with
 * memory_optimization the first consumer in backward order writes the
 * producer's summed derivative itself, without a temporary of its own, and
 * each later consumer adds a temporary into it; without it every consumer
 * keeps its own derivative. The residual model's training arena is one
 * temporary smaller than the count with it, and training gives the same
 * weights bit for bit either way (a view, an in-place addition, a layer
 * reading one output twice and a shared weight among the consumers). And
 * two lifetimes that end at their last reader's step. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/ini.h"
#include "nntrainer/compute/kernels.h"
#include "nntrainer/model_impl.h"

#define HEAD(B)                                                                              \
  "[Model]\ntype = NeuralNetwork\nbatch_size = " B "\nepochs = 2\nloss = mse\nseed = 3\n" \
  "[Optimizer]\ntype = sgd\nlearning_rate = 0.001\n"

/* a's output goes to tanh b and to the addition, which is the later of the
 * two in forward: the first in backward */
#define BATCH 16
#define WIDTH 256
static const char RESIDUAL[] = HEAD("16")
    "[in]\ntype = input\ninput_shape = 1:1:4\n"
    "[a]\ntype = fully_connected\nunit = 256\n"
    "[b]\ntype = activation\nactivation = tanh\ninput_layers = a\n"
    "[add]\ntype = addition\ninput_layers = b, a\n"
    "[out]\ntype = fully_connected\nunit = 2\ninput_layers = add\n";

/* the cases that share memory: add is in place over b (input 0) and its
 * input 1 is a fan-out; add's output goes to flatten r (a view), c and c2
 * (c's weights), r being the first in backward; e reads d twice; e's
 * output goes to f and f2 (f's weights) */
static const char CASES[] = HEAD("4")
    "[in]\ntype = input\ninput_shape = 1:1:8\n"
    "[a]\ntype = fully_connected\nunit = 16\n"
    "[b]\ntype = fully_connected\nunit = 16\ninput_layers = a\n"
    "[add]\ntype = addition\ninput_layers = b, a\n"
    "[r]\ntype = flatten\ninput_layers = add\n"
    "[c]\ntype = fully_connected\nunit = 16\ninput_layers = add\n"
    "[c2]\ntype = fully_connected\nunit = 16\ninput_layers = add\nshared_from = c\n"
    "[d]\ntype = addition\ninput_layers = c, r, c2\n"
    "[e]\ntype = addition\ninput_layers = d, d\n"
    "[f]\ntype = fully_connected\nunit = 16\ninput_layers = e\n"
    "[f2]\ntype = fully_connected\nunit = 16\ninput_layers = e\nshared_from = f\n"
    "[g]\ntype = addition\ninput_layers = f, f2\n"
    "[out]\ntype = fully_connected\nunit = 3\ninput_layers = g\n";

static nnt_model *load(const char *name, const char *text, int memopt, int poison) {
  const char *path = tu_write_text(name, text);
  nnt_model *m = tu_model_for_ini(path);
  nnt_err e = {0};
  const char *ov[] = {memopt ? "memory_optimization=true" : "memory_optimization=false"};
  if (nnt_ini_load(m, path, ov, 1, &e))
    fail_msg("%s: %s", name, e.msg);
  m->poison = poison;
  nnt_dataset *ds = NULL;
  assert_int_equal(nnt_dataset_create_synthetic(3 * nnt_model_batch_size(m), 77, &ds, &e),
                   NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, &e), NNT_OK);
  if (nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("%s: %s", name, e.msg);
  m->keep_train_arena = 1;
  if (nnt_model_plan(m, NNT_MODE_TRAIN, &e) || nnt_mgr_validate(&m->mgr[NNT_MODE_TRAIN], &e))
    fail_msg("%s: %s", name, e.msg);
  return m;
}

static int has_tensor(const nnt_mgr *g, const char *name) {
  for (size_t i = 0; i < g->n; i++)
    if (!strcmp(g->t[i].name, name))
      return 1;
  return 0;
}

/* Consumer c's input k writes producer p's d_out itself. */
static void assert_direct(const nnt_node *c, unsigned k, const nnt_node *p) {
  assert_int_equal(c->dmode[k], NNT_D_DIRECT);
  assert_true(p->t_dout[0] >= 0);
  assert_int_equal(c->t_din[k], p->t_dout[0]);
  assert_int_equal(c->t_dsum[k], -1);
}

/* Consumer c's input k adds into producer p's d_out itself
 * (NNT_LF_DERIV_ADDS). */
static void assert_accum(const nnt_node *c, unsigned k, const nnt_node *p) {
  assert_true(c->fc.flags & NNT_LF_DERIV_ADDS);
  assert_int_equal(c->dmode[k], NNT_D_ACCUM);
  assert_true(p->t_dout[0] >= 0);
  assert_int_equal(c->t_din[k], p->t_dout[0]);
  assert_int_equal(c->t_dsum[k], -1);
  assert_true(c->ctx.d_add >> k & 1);
}

/* Consumer c's input k writes a temporary that mode adds or copies in. */
static void assert_temporary(const nnt_node *c, unsigned k, const nnt_node *p, nnt_dmode mode) {
  assert_int_equal(c->dmode[k], mode);
  assert_true(c->t_din[k] >= 0);
  assert_int_not_equal(c->t_din[k], p->t_dout[0]);
  assert_int_equal(c->t_dsum[k], p->t_dout[0]);
}

/* The most bytes live at one step (each memory group once, over its whole
 * life), with extra bytes added at step at: what the planner cannot go
 * under. */
static size_t live_max(const nnt_mgr *g, unsigned at, size_t extra) {
  size_t best = 0;
  for (unsigned s = 0; s < 1000; s++) {
    size_t sum = s == at ? extra : 0;
    for (size_t i = 0; i < g->n; i++) {
      unsigned f, l;
      nnt_mgr_life(g, (int)i, &f, &l);
      if (nnt_mgr_root(g, (int)i) == (int)i && f <= s && s <= l)
        sum += g->t[i].bytes;
    }
    if (sum > best)
      best = sum;
  }
  return best;
}

static unsigned step_of(const nnt_model *m, const nnt_node *nd, nnt_step_kind kind) {
  unsigned i = (unsigned)(nd - m->nodes);
  for (unsigned s = 0; s < m->n_steps[NNT_MODE_TRAIN]; s++)
    if (m->sched[NNT_MODE_TRAIN][s].node == i && m->sched[NNT_MODE_TRAIN][s].kind == kind)
      return s;
  fail_msg("node '%s' has no %s step", nd->layer->name, nnt_step_kind_name(kind));
  return 0;
}

static unsigned deriv_step(const nnt_model *m, const nnt_node *nd) {
  return step_of(m, nd, NNT_STEP_CALC_DERIVATIVE);
}

/* Every fan-out of m's training plan: the consumer input whose
 * calc_derivative runs first (the lower input index within a node) writes
 * the sum itself with memory_optimization, or a temporary copied in
 * without; every other one a temporary added in. @return the fan-outs;
 * first[] receives each one's first consumer (up to 8). */
static unsigned check_fanouts(const nnt_model *m, const nnt_node **first) {
  unsigned n = 0;
  for (size_t pi = 0; pi < m->n_nodes; pi++) {
    const nnt_node *p = &m->nodes[pi];
    if (p->n_consumers[0] < 2 || !p->needs_d)
      continue;
    const nnt_node *fc = NULL;
    unsigned fk = 0, fs = 0, readers = 0;
    for (size_t ci = 0; ci < m->n_nodes; ci++) {
      const nnt_node *c = &m->nodes[ci];
      for (unsigned k = 0; k < c->n_in; k++) {
        if (c->in_node[k] != pi || c->in_idx[k] != 0 || !c->do_deriv)
          continue;
        unsigned s = deriv_step(m, c);
        readers++;
        if (!fc || s < fs)
          fc = c, fk = k, fs = s;
      }
    }
    assert_int_equal(readers, p->n_consumers[0]);
    for (size_t ci = 0; ci < m->n_nodes; ci++) {
      const nnt_node *c = &m->nodes[ci];
      for (unsigned k = 0; k < c->n_in; k++) {
        if (c->in_node[k] != pi || c->in_idx[k] != 0 || !c->do_deriv)
          continue;
        if ((c != fc || k != fk) && m->memory_optimization &&
            (c->fc.flags & NNT_LF_DERIV_ADDS))
          assert_accum(c, k, p);
        else if (c != fc || k != fk)
          assert_temporary(c, k, p, NNT_D_ADD);
        else if (m->memory_optimization)
          assert_direct(c, k, p);
        else
          assert_temporary(c, k, p, NNT_D_COPY);
      }
    }
    if (n < 8)
      first[n] = fc;
    n++;
  }
  return n;
}

static void test_residual_plan(void **state) {
  (void)state;
  nnt_model *m = load("residual.ini", RESIDUAL, 1, 0);
  const nnt_mgr *g = &m->mgr[NNT_MODE_TRAIN];
  const nnt_node *a = tu_node(m, "a"), *b = tu_node(m, "b"), *add = tu_node(m, "add");
  assert_int_equal(a->n_consumers[0], 2);
  /* the addition, first in backward, writes a's sum; tanh adds into it */
  assert_direct(add, 1, a);
  assert_direct(add, 0, b);
  assert_temporary(b, 0, a, NNT_D_ADD);
  assert_true(has_tensor(g, "a:d_out0"));
  assert_true(has_tensor(g, "b:d_in0"));
  assert_false(has_tensor(g, "add:d_in1"));
  const nnt_node *first[8];
  assert_int_equal(check_fanouts(m, first), 1);
  assert_ptr_equal(first[0], add);
  /* at add's calc_derivative, the peak: tanh's output (read by its
   * backward), add's d_out, b's d_out and a's sum (the input, read by a's
   * backward, is the batch itself: not in the arena; the model's output
   * ended at the loss's backward, the last step that reads it); the
   * temporary it had would have been one more */
  size_t act = (size_t)BATCH * WIDTH * sizeof(float);
  assert_true(nnt_mgr_borrowed(g, m->input_t[0]));
  size_t count = 4 * act;
  size_t before = count + act;
  assert_int_equal(live_max(g, deriv_step(m, add), 0), count);
  assert_int_equal(live_max(g, deriv_step(m, add), act), before);
  assert_int_equal(g->lower_bound, count);
  assert_int_equal(g->arena_bytes, count);
  assert_true(g->arena_bytes < before);
  nnt_model_destroy(m);

  /* memory_optimization=false keeps every consumer's own derivative: the
   * first one's is copied into the sum */
  m = load("residual.ini", RESIDUAL, 0, 0);
  g = &m->mgr[NNT_MODE_TRAIN];
  a = tu_node(m, "a"), b = tu_node(m, "b"), add = tu_node(m, "add");
  assert_temporary(add, 1, a, NNT_D_COPY);
  assert_temporary(b, 0, a, NNT_D_ADD);
  assert_true(has_tensor(g, "add:d_in1"));
  assert_int_equal(check_fanouts(m, first), 1);
  nnt_model_destroy(m);
}

/* Trains both models and destroys them: the same weights, bit for bit,
 * and none NaN (on trains under poison: a read after a tensor's death
 * would show). */
static void train_alike(nnt_model *on, nnt_model *off) {
  nnt_err e = {0};
  if (nnt_model_train(on, NULL, NULL, &e) || nnt_model_train(off, NULL, NULL, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(on->wpool_floats, off->wpool_floats);
  for (size_t i = 0; i < on->wpool_floats; i++)
    if (isnan(on->wpool[i]))
      fail_msg("weight %zu is NaN under poison mode", i);
  assert_memory_equal(on->wpool, off->wpool, on->wpool_floats * sizeof(float));
  nnt_model_destroy(on);
  nnt_model_destroy(off);
}

static void test_cases_bitwise(void **state) {
  (void)state;
  nnt_model *on = load("cases.ini", CASES, 1, 1), *off = load("cases.ini", CASES, 0, 0);
  const nnt_node *first[8];
  /* a's sum: add (in place over b); add's: flatten r (a view); d's: e
   * (reading it twice); e's: a layer of a shared weight */
  assert_true(tu_node(on, "add")->inplace);
  assert_true(tu_node(on, "r")->inplace);
  assert_int_equal(check_fanouts(on, first), 4);
  assert_ptr_equal(first[0], tu_node(on, "add"));
  assert_ptr_equal(first[1], tu_node(on, "r"));
  assert_ptr_equal(first[2], tu_node(on, "e"));
  assert_true(first[3] == tu_node(on, "f") || first[3] == tu_node(on, "f2"));
  assert_int_equal(tu_node(on, "e")->dmode[0], NNT_D_DIRECT);
  assert_int_equal(tu_node(on, "e")->dmode[1], NNT_D_ADD);
  assert_int_equal(check_fanouts(off, first), 4);
  train_alike(on, off);
}

/* Self-attention: query, key and value are a's output. With the
 * residual addition after it (first in backward) all three add into a's
 * sum themselves; without it the query writes the sum and the key and
 * value add into it in the same calc_derivative. No temporary either way,
 * and the weights of memory_optimization=false bit for bit. */
#define ATTN(RESIDUAL)                                                                         \
  HEAD("4")                                                                                    \
  "[in]\ntype = input\ninput_shape = 1:8:16\n"                                                 \
  "[a]\ntype = fully_connected\nunit = 16\n"                                                   \
  "[att]\ntype = multi_head_attention\nnum_heads = 2\ninput_layers = a, a, a\n" RESIDUAL     \
  "[out]\ntype = fully_connected\nunit = 3\n"
static const char ATTN_RES[] = ATTN("[add]\ntype = addition\ninput_layers = a, att\n");
static const char ATTN_ONLY[] = ATTN("");

static void test_attention_adds(void **state) {
  (void)state;
  for (int res = 0; res < 2; res++) {
    const char *text = res ? ATTN_RES : ATTN_ONLY, *name = res ? "attn_res.ini" : "attn.ini";
    nnt_model *on = load(name, text, 1, 1), *off = load(name, text, 0, 0);
    const nnt_mgr *g = &on->mgr[NNT_MODE_TRAIN];
    const nnt_node *a = tu_node(on, "a"), *att = tu_node(on, "att"), *first[8];
    assert_int_equal(a->n_consumers[0], res ? 4 : 3);
    assert_int_equal(check_fanouts(on, first), 1);
    assert_ptr_equal(first[0], res ? tu_node(on, "add") : att);
    if (res)
      assert_accum(att, 0, a);
    else
      assert_direct(att, 0, a);
    assert_accum(att, 1, a);
    assert_accum(att, 2, a);
    assert_false(has_tensor(g, "att:d_in0"));
    assert_false(has_tensor(g, "att:d_in1"));
    assert_false(has_tensor(g, "att:d_in2"));
    assert_int_equal(check_fanouts(off, first), 1);
    assert_true(has_tensor(&off->mgr[NNT_MODE_TRAIN], "att:d_in2"));
    assert_int_equal(tu_node(off, "att")->ctx.d_add, 0);
    train_alike(on, off);
  }
}

/* A downsampling residual block (ResNet's): a's output goes to the
 * strided convolution c1 and to the 1x1 stride-2 shortcut sc, whose
 * derivative comes second in backward. Where the CPU's subsampling
 * derivative takes sc (an AVX-512 CPU), it adds itself into a's sum
 * (conv_bwd_x_add) without a temporary; elsewhere it writes one that the
 * loop adds. The weights of memory_optimization=false either way, bit
 * for bit. */
static const char DOWN[] = HEAD("4")
    "[in]\ntype = input\ninput_shape = 4:16:16\n"
    "[a]\ntype = conv2d\nfilters = 16\nkernel_size = 3,3\npadding = 1,1\n"
    "[c1]\ntype = conv2d\ninput_layers = a\nfilters = 32\nkernel_size = 3,3\nstride = 2,2\n"
    "padding = 1,1\n"
    "[sc]\ntype = conv2d\ninput_layers = a\nfilters = 32\nkernel_size = 1,1\nstride = 2,2\n"
    "[add]\ntype = addition\ninput_layers = c1, sc\n"
    "[flat]\ntype = flatten\n"
    "[out]\ntype = fully_connected\nunit = 3\n";

static void test_shortcut_adds(void **state) {
  (void)state;
  nnt_model *on = load("down.ini", DOWN, 1, 1), *off = load("down.ini", DOWN, 0, 0);
  const nnt_node *a = tu_node(on, "a"), *sc = tu_node(on, "sc"), *first[8];
  assert_int_equal(check_fanouts(on, first), 1);
  assert_ptr_equal(first[0], tu_node(on, "c1"));
  nnt_conv_geom g = {.c = 16, .h = 16, .w = 16, .kh = 1, .kw = 1, .sh = 2, .sw = 2,
                     .dh = 1, .dw = 1, .oh = 8, .ow = 8};
  int adds = nnt_conv_sub_dx_take(&g, 32) && nnt_conv_sub_dx_runs();
  assert_int_equal(!!(sc->fc.flags & NNT_LF_DERIV_ADDS), adds);
  if (adds)
    assert_accum(sc, 0, a);
  else
    assert_temporary(sc, 0, a, NNT_D_ADD);
  assert_int_equal(has_tensor(&on->mgr[NNT_MODE_TRAIN], "sc:d_in0"), !adds);
  assert_true(has_tensor(&off->mgr[NNT_MODE_TRAIN], "sc:d_in0"));
  assert_int_equal(tu_node(off, "sc")->ctx.d_add, 0);
  train_alike(on, off);
}

/* A relu whose output the next layer's calc_gradient reads: the training
 * plan keeps its bit mask (smaller than keeping the output to the relu's
 * own derivative), so the output ends at that read; a fully_connected
 * layer's input ends at its calc_gradient (its dX needs dY and the
 * weights alone). Training under poison (each dead tensor NaN) gives the
 * weights of memory_optimization=false bit for bit. */
static const char CHAIN[] = HEAD("64")
    "[in]\ntype = input\ninput_shape = 1:1:16\n"
    "[a]\ntype = fully_connected\nunit = 256\n"
    "[r]\ntype = activation\nactivation = relu\n"
    "[b]\ntype = fully_connected\nunit = 8\n"
    "[out]\ntype = fully_connected\nunit = 2\n";

static void test_lifetimes_end_at_the_last_read(void **state) {
  (void)state;
  nnt_model *on = load("chain.ini", CHAIN, 1, 1), *off = load("chain.ini", CHAIN, 0, 0);
  const nnt_mgr *g = &on->mgr[NNT_MODE_TRAIN];
  /* the peak would be b's calc_derivative: r's output (64 x 256), the
   * derivative b writes (as large) */
  const nnt_node *r = tu_node(on, "r"), *b = tu_node(on, "b"), *c = tu_node(on, "out");
  unsigned f, l;
  assert_int_equal(r->fc.n_scratch, 1); /* the mask */
  assert_false(r->fc.flags & NNT_LF_BWD_READS_OUTPUT);
  nnt_mgr_life(g, r->t_out[0], &f, &l);
  assert_int_equal(l, step_of(on, b, NNT_STEP_CALC_GRADIENT));
  assert_true(l < deriv_step(on, r));
  nnt_mgr_life(g, c->t_in[0], &f, &l);
  assert_int_equal(l, step_of(on, c, NNT_STEP_CALC_GRADIENT));
  assert_true(l < deriv_step(on, c));
  /* without memory_optimization the relu keeps its output */
  assert_true(tu_node(off, "r")->fc.flags & NNT_LF_BWD_READS_OUTPUT);
  train_alike(on, off);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_residual_plan),
      cmocka_unit_test(test_cases_bitwise),
      cmocka_unit_test(test_lifetimes_end_at_the_last_read),
      cmocka_unit_test(test_attention_adds),
      cmocka_unit_test(test_shortcut_adds),
  };
  return cmocka_run_group_tests(tests, tu_dir_setup, tu_dir_teardown);
}
