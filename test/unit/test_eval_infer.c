/* Evaluation and inference have their own plans: the evaluation plan runs
 * the forward steps with the labels and the loss values; the inference
 * plan holds neither (a loss layer gives its output only). Evaluation's
 * loss and accuracy are those validation computes in the training arena,
 * inference gives evaluation's forward outputs bitwise, and neither
 * changes what the other or a later training run computes. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

/* One model per loss layer type; the first has batch normalization and
 * dropout, whose forward differs between training and evaluation. */
static const char *const models[] = {
    "[Model]\ntype = NeuralNetwork\nbatch_size = 8\nepochs = 2\nloss = cross\nseed = 11\n"
    "[Optimizer]\ntype = adam\nlearning_rate = 0.01\n"
    "[in]\ntype = input\ninput_shape = 1:1:12\n"
    "[fc1]\ntype = fully_connected\nunit = 16\n"
    "[bn]\ntype = batch_normalization\nactivation = relu\n"
    "[drop]\ntype = dropout\ndropout_rate = 0.2\n"
    "[fc2]\ntype = fully_connected\nunit = 4\nactivation = softmax\n",
    "[Model]\ntype = NeuralNetwork\nbatch_size = 4\nepochs = 2\nloss = mse\nseed = 12\n"
    "[Optimizer]\ntype = sgd\nlearning_rate = 0.1\n"
    "[in]\ntype = input\ninput_shape = 1:1:6\n"
    "[fc1]\ntype = fully_connected\nunit = 8\nactivation = tanh\n"
    "[fc2]\ntype = fully_connected\nunit = 3\n",
    "[Model]\ntype = NeuralNetwork\nbatch_size = 5\nepochs = 2\nloss = cross\nseed = 13\n"
    "[Optimizer]\ntype = sgd\nlearning_rate = 0.5\n"
    "[in]\ntype = input\ninput_shape = 1:2:5\n"
    "[fc1]\ntype = fully_connected\nunit = 6\nactivation = relu\n"
    "[fc2]\ntype = fully_connected\nunit = 3\nactivation = sigmoid\n",
};
#define N_MODELS NNT_ARRAY_LEN(models)

/* Compiled and initialized, with synthetic training, validation and test
 * sets (seeded). */
static nnt_model *load(size_t k) {
  nnt_model *m;
  nnt_err e = {0};
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  if (nnt_ini_load_text(m, "model", models[k], strlen(models[k]), NULL, 0, &e))
    fail_msg("model %zu: %s", k, e.msg);
  for (int mode = 0; mode < 3; mode++) {
    nnt_dataset *ds;
    assert_int_equal(nnt_dataset_create_synthetic(mode == NNT_DS_TRAIN ? 40 : 20,
                                                  100 * k + (unsigned)mode, &ds, &e),
                     NNT_OK);
    assert_int_equal(nnt_model_set_dataset(m, mode, ds, &e), NNT_OK);
  }
  if (nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("model %zu: %s", k, e.msg);
  return m;
}

typedef struct valid_log {
  unsigned n;
  float loss[4], acc[4];
} valid_log;

static void on_progress(const nnt_progress *p, void *ud) {
  valid_log *v = ud;
  if (p->epoch_done && p->has_valid && v->n < 4) {
    v->loss[v->n] = p->valid_loss;
    v->acc[v->n] = p->valid_accuracy;
    v->n++;
  }
}

static void train_or_fail(nnt_model *m, valid_log *v) {
  nnt_err e = {0};
  if (nnt_model_train(m, v ? on_progress : NULL, v, &e))
    fail_msg("train: %s", e.msg);
}

static void evaluate_or_fail(nnt_model *m, float *loss, float *acc) {
  nnt_err e = {0};
  if (nnt_model_evaluate(m, NNT_DS_TEST, loss, acc, &e))
    fail_msg("evaluate: %s", e.msg);
}

/* Validation during training runs in the training arena; evaluation
 * after it runs in the evaluation plan's own arena. On the validation set
 * and the same weights (the last epoch's), the two give the same loss and
 * accuracy bit for bit; the test set gives finite numbers too. */
static void test_evaluation_matches_validation(void **state) {
  (void)state;
  for (size_t k = 0; k < N_MODELS; k++) {
    nnt_model *m = load(k);
    valid_log v = {0};
    train_or_fail(m, &v);
    assert_int_equal(v.n, 2);
    float loss, acc;
    nnt_err e = {0};
    if (nnt_model_evaluate(m, NNT_DS_VALID, &loss, &acc, &e))
      fail_msg("evaluate: %s", e.msg);
    assert_int_equal(m->bound_mode, NNT_MODE_EVAL);
    if (memcmp(&loss, &v.loss[1], sizeof loss) || memcmp(&acc, &v.acc[1], sizeof acc))
      fail_msg("model %zu: evaluation gives loss %a, accuracy %a; validation in training gave "
               "%a, %a", k, loss, acc, v.loss[1], v.acc[1]);
    evaluate_or_fail(m, &loss, &acc);
    assert_true(isfinite(loss) && acc >= 0 && acc <= 1);
    nnt_model_destroy(m);
  }
}

/* Inference: no label, no loss value, no gradient, no derivative; the
 * loss layers' contexts have neither. Evaluation: exactly the label
 * streams and one loss value per loss layer, and no backward. */
static void test_plans_hold_what_they_run(void **state) {
  (void)state;
  nnt_err e = {0};
  for (size_t k = 0; k < N_MODELS; k++) {
    nnt_model *m = load(k);
    assert_int_equal(tu_loss_nodes(m), 1);
    assert_int_equal(nnt_model_plan(m, NNT_MODE_INFER, &e), NNT_OK);
    const nnt_mgr *inf = &m->mgr[NNT_MODE_INFER], *ev = &m->mgr[NNT_MODE_EVAL];
    assert_int_equal(nnt_mgr_validate(inf, &e), NNT_OK);
    assert_int_equal(nnt_mgr_kind_bytes(inf, NNT_TK_LABEL), 0);
    assert_int_equal(nnt_mgr_kind_bytes(inf, NNT_TK_GRADIENT), 0);
    assert_int_equal(nnt_mgr_kind_bytes(inf, NNT_TK_DERIVATIVE), 0);
    assert_int_equal(tu_loss_tensors(inf), 0);
    for (size_t i = 0; i < m->n_nodes; i++) {
      assert_null(m->nodes[i].ctx.label);
      assert_null(m->nodes[i].ctx.loss);
    }
    assert_int_equal(m->label_t[0], -1);
    assert_int_equal(nnt_model_plan(m, NNT_MODE_EVAL, &e), NNT_OK);
    assert_int_equal(nnt_mgr_validate(ev, &e), NNT_OK);
    size_t label_bytes = 0;
    for (unsigned i = 0; i < m->n_labels; i++)
      label_bytes += nnt_dim_len(m->label_dim[i]) * sizeof(float);
    assert_true(label_bytes > 0);
    assert_int_equal(nnt_mgr_kind_bytes(ev, NNT_TK_LABEL), label_bytes);
    assert_int_equal(nnt_mgr_kind_bytes(ev, NNT_TK_GRADIENT), 0);
    assert_int_equal(nnt_mgr_kind_bytes(ev, NNT_TK_DERIVATIVE), 0);
    assert_int_equal(tu_loss_tensors(ev), 1);
    /* the same forward tensors, plus the labels and the loss values */
    assert_int_equal(ev->n, inf->n + m->n_labels + 1);
    assert_int_equal(nnt_mgr_kind_bytes(ev, NNT_TK_ACTIVATION),
                     nnt_mgr_kind_bytes(inf, NNT_TK_ACTIVATION));
    assert_true(inf->arena_bytes < ev->arena_bytes);
    const nnt_node *loss = &m->nodes[m->n_nodes - 1];
    assert_ptr_equal(loss->ctx.label, &loss->label);
    assert_ptr_equal(loss->ctx.loss, &loss->loss);
    /* the schedules: the forward steps, in both */
    assert_int_equal(m->n_steps[NNT_MODE_EVAL], m->n_nodes);
    assert_int_equal(m->n_steps[NNT_MODE_INFER], m->n_nodes);
    nnt_model_destroy(m);
  }
}

typedef struct arena_watch {
  const nnt_model *m;
  unsigned epochs, others; /* epochs seen; of them, with another plan held */
} arena_watch;

static void watch_arenas(const nnt_progress *p, void *ud) {
  arena_watch *w = ud;
  if (!p->epoch_done)
    return;
  w->epochs++;
  w->others += w->m->mgr[NNT_MODE_INFER].planned || w->m->mgr[NNT_MODE_EVAL].planned;
}

/* A training run that validates holds the training arena only (validation
 * runs there); evaluation after it plans the evaluation arena, and an
 * inference after that runs in it instead of planning one more; a model
 * that only infers plans the inference arena alone. */
static void test_arenas_held(void **state) {
  (void)state;
  nnt_err e = {0};
  nnt_model *m = load(0);
  arena_watch w = {m, 0, 0};
  if (nnt_model_train(m, watch_arenas, &w, &e))
    fail_msg("train: %s", e.msg);
  assert_int_equal(w.epochs, 2);
  assert_int_equal(w.others, 0);
  for (int mode = 0; mode < NNT_MODE__COUNT; mode++)
    assert_false(m->mgr[mode].planned);
  float loss, acc;
  evaluate_or_fail(m, &loss, &acc);
  assert_true(m->mgr[NNT_MODE_EVAL].planned);
  assert_false(m->mgr[NNT_MODE_INFER].planned);
  float in[8 * 12] = {0}, out[8 * 4];
  const float *ins[] = {in};
  float *outs[] = {out};
  assert_int_equal(nnt_model_infer(m, ins, outs, &e), NNT_OK);
  assert_false(m->mgr[NNT_MODE_INFER].planned);
  assert_false(m->mgr[NNT_MODE_TRAIN].planned);
  nnt_model_destroy(m);

  m = load(0);
  assert_int_equal(nnt_model_infer(m, ins, outs, &e), NNT_OK);
  assert_true(m->mgr[NNT_MODE_INFER].planned);
  assert_false(m->mgr[NNT_MODE_EVAL].planned);
  assert_false(m->mgr[NNT_MODE_TRAIN].planned);
  nnt_model_destroy(m);
}

/* Inputs, outputs and one label batch of a model, on the host. */
typedef struct batch {
  size_t n_in, n_out, n_label;
  float *in, *out, *label;
} batch;

static void batch_make(const nnt_model *m, batch *b, uint64_t seed) {
  nnt_dim d = m->input_dim[0], od;
  d.b = m->batch;
  assert_int_equal(nnt_model_output_dims(m, &od, 1), 1);
  b->n_in = nnt_dim_len(d);
  b->n_out = nnt_dim_len(od);
  b->n_label = nnt_dim_len(m->label_dim[0]);
  b->in = malloc(b->n_in * sizeof(float));
  b->out = malloc(b->n_out * sizeof(float));
  b->label = calloc(b->n_label, sizeof(float));
  assert_true(b->in && b->out && b->label);
  nnt_rng r;
  nnt_rng_seed(&r, seed);
  tu_fill_uniform(&r, b->in, b->n_in, -2, 2);
  size_t cols = b->n_label / m->batch;
  for (unsigned i = 0; i < m->batch; i++)
    b->label[i * cols + nnt_rng_below(&r, (uint32_t)cols)] = 1;
}

static void batch_free(batch *b) { free(b->in), free(b->out), free(b->label); }

static float *infer_or_fail(nnt_model *m, const batch *b) {
  nnt_err e = {0};
  float *out = malloc(b->n_out * sizeof(float));
  assert_non_null(out);
  const float *ins[] = {b->in};
  float *outs[] = {out};
  if (nnt_model_infer(m, ins, outs, &e))
    fail_msg("infer: %s", e.msg);
  return out;
}

/* Evaluation's forward on the evaluation plan: the loss layer's output into
 * b->out, its loss into *loss. */
static void eval_forward(nnt_model *m, batch *b, float *loss) {
  nnt_err e = {0};
  assert_int_equal(nnt_model_plan(m, NNT_MODE_EVAL, &e), NNT_OK);
  const float *ins[] = {b->in}, *labels[] = {b->label};
  assert_int_equal(nnt_model_set_batch(m, ins, labels, &e), NNT_OK);
  assert_int_equal(nnt_model_forward(m, 0, loss, &e), NNT_OK);
  const nnt_tensor *y = &m->nodes[m->n_nodes - 1].out[0];
  assert_int_equal(nnt_tensor_len(y), b->n_out);
  assert_int_equal(nnt_tensor_get(y, 0, b->out, b->n_out, &e), NNT_OK);
}

/* Inference gives evaluation's forward outputs bitwise, on its own plan
 * and when it runs in a held evaluation or training arena, where it leaves
 * the label as it was. */
static void test_infer_equals_eval_forward(void **state) {
  (void)state;
  nnt_err e = {0};
  for (size_t k = 0; k < N_MODELS; k++) {
    nnt_model *m = load(k);
    train_or_fail(m, NULL);
    batch b;
    batch_make(m, &b, 40 + k);
    float loss;
    eval_forward(m, &b, &loss);
    assert_true(loss > 0 && loss < 100); /* a loss was computed */
    const nnt_node *ln = &m->nodes[m->n_nodes - 1];
    /* in the evaluation arena (no inference one is held) */
    float *o = infer_or_fail(m, &b);
    assert_false(m->mgr[NNT_MODE_INFER].planned);
    assert_memory_equal(o, b.out, b.n_out * sizeof(float));
    free(o);
    /* the label lives through every step of this schedule (its loss
     * layer is the last), so only a write through ctx->label changes it */
    float *lab = malloc(b.n_label * sizeof(float));
    assert_non_null(lab);
    assert_int_equal(nnt_tensor_get(&ln->label, 0, lab, b.n_label, &e), NNT_OK);
    assert_memory_equal(lab, b.label, b.n_label * sizeof(float));
    free(lab);
    assert_ptr_equal(ln->ctx.label, &ln->label);
    assert_ptr_equal(ln->ctx.loss, &ln->loss);
    /* on the inference plan */
    assert_int_equal(nnt_model_plan(m, NNT_MODE_INFER, &e), NNT_OK);
    o = infer_or_fail(m, &b);
    assert_memory_equal(o, b.out, b.n_out * sizeof(float));
    free(o);
    /* in a kept training arena */
    nnt_model_release_plan(m, NNT_MODE_INFER);
    nnt_model_release_plan(m, NNT_MODE_EVAL);
    assert_int_equal(nnt_model_plan(m, NNT_MODE_TRAIN, &e), NNT_OK);
    o = infer_or_fail(m, &b);
    assert_int_equal(m->bound_mode, NNT_MODE_TRAIN);
    assert_memory_equal(o, b.out, b.n_out * sizeof(float));
    free(o);
    batch_free(&b);
    nnt_model_destroy(m);
  }
}

/* Train, evaluate, (infer,) evaluate, train on: an inference between them
 * changes no loss, accuracy or weight. */
static void run_sequence(size_t k, int with_infer, float res[8], float **weights,
                         size_t *n_w) {
  nnt_err e = {0};
  nnt_model *m = load(k);
  train_or_fail(m, NULL);
  evaluate_or_fail(m, &res[0], &res[1]);
  if (with_infer) {
    batch b;
    batch_make(m, &b, 7);
    free(infer_or_fail(m, &b));
    assert_int_equal(nnt_model_plan(m, NNT_MODE_INFER, &e), NNT_OK);
    free(infer_or_fail(m, &b));
    batch_free(&b);
  }
  evaluate_or_fail(m, &res[2], &res[3]);
  assert_int_equal(nnt_model_set_property(m, "continue_train", "true", &e), NNT_OK);
  assert_int_equal(nnt_model_set_property(m, "epochs", "3", &e), NNT_OK);
  valid_log v = {0};
  train_or_fail(m, &v);
  assert_int_equal(v.n, 1);
  res[4] = v.loss[0], res[5] = v.acc[0];
  evaluate_or_fail(m, &res[6], &res[7]);
  *n_w = m->wpool_floats;
  *weights = malloc(*n_w * sizeof(float));
  assert_non_null(*weights);
  memcpy(*weights, m->wpool, *n_w * sizeof(float));
  nnt_model_destroy(m);
}

static void test_infer_changes_nothing(void **state) {
  (void)state;
  for (size_t k = 0; k < N_MODELS; k++) {
    float a[8], b[8], *wa, *wb;
    size_t na, nb;
    run_sequence(k, 0, a, &wa, &na);
    run_sequence(k, 1, b, &wb, &nb);
    assert_memory_equal(a, b, sizeof a);
    /* evaluating twice gives the same */
    assert_memory_equal(&a[0], &a[2], 2 * sizeof(float));
    assert_int_equal(na, nb);
    assert_memory_equal(wa, wb, na * sizeof(float));
    free(wa), free(wb);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_evaluation_matches_validation),
      cmocka_unit_test(test_plans_hold_what_they_run),
      cmocka_unit_test(test_arenas_held),
      cmocka_unit_test(test_infer_equals_eval_forward),
      cmocka_unit_test(test_infer_changes_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
