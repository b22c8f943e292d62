/* Allocation failure across a whole job of the core library (issue 10):
 * load an INI (convolution, batch normalization, pooling, a residual
 * branch, dropout, Adam with a learning-rate schedule, a training set from
 * a raw file and a validation set from IDX files) with an override,
 * compile at one batch size and train at another, two epochs with a
 * checkpoint each, evaluate, infer, save the weights with the optimizer
 * state and the model as an INI, then load both into a second model and
 * copy a layer over. The sweep (alloc_sweep.h) fails each allocation in
 * turn: every failure is NNT_ERR_NOMEM with a message, nothing leaks or
 * stays running, a file left behind is one the reference run wrote, and a
 * run that succeeds gives the reference's weights, files, loss and
 * summary. In the retry sweep a call that failed is made again with
 * memory back (all but loading an INI and training, which may have done
 * part of their work) and the job must end as the reference: a failed
 * call leaves nothing half done. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "alloc_sweep.h"
#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"
#include "test_util.h"

static const char *const model_ini =
    "[Model]\n"
    "type = NeuralNetwork\n"
    "epochs = 2\n"
    "batch_size = 2\n"
    "loss = cross\n"
    "seed = 7\n"
    "save_path = ckpt.bin\n"
    "\n"
    "[Optimizer]\n"
    "type = adam\n"
    "\n"
    "[LearningRateScheduler]\n"
    "type = exponential\n"
    "learning_rate = 0.01\n"
    "decay_rate = 0.5\n"
    "decay_steps = 2\n"
    "\n"
    "[train_set]\n"
    "type = file\n"
    "path = train.dat\n"
    "buffer_size = 2\n"
    "\n"
    "[valid_set]\n"
    "type = idx\n"
    "images = valid-images.idx\n"
    "labels = valid-labels.idx\n"
    "\n"
    "[in]\n"
    "type = input\n"
    "input_shape = 1:4:4\n"
    "\n"
    "[conv]\n"
    "type = conv2d\n"
    "filters = 2\n"
    "kernel_size = 3,3\n"
    "padding = same\n"
    "\n"
    "[bn]\n"
    "type = batch_normalization\n"
    "activation = relu\n"
    "\n"
    "# the residual branch: conv's output feeds bn and the sum\n"
    "[res]\n"
    "type = addition\n"
    "input_layers = conv, bn\n"
    "\n"
    "[pool]\n"
    "type = pooling2d\n"
    "pooling = max\n"
    "pool_size = 2,2\n"
    "stride = 2,2\n"
    "flatten = true\n"
    "\n"
    "[drop]\n"
    "type = dropout\n"
    "dropout_rate = 0.25\n"
    "\n"
    "[out]\n"
    "type = fully_connected\n"
    "unit = 3\n"
    "activation = softmax\n";

typedef struct core_ctx {
  char *dir;
  char ini[512], ckpt[512], bin[512], out_ini[512];
  sw_out *partial; /* the reference run records the checkpoint of epoch 1 */
  int retry;       /* a call that fails is made again with memory back */
  long retried;
} core_ctx;

static void on_progress(const nnt_progress *p, void *ud) {
  core_ctx *c = ud;
  if (c->partial && p->epoch_done && p->epoch == 1)
    sw_put_file(c->partial, "ckpt.bin", c->ckpt);
}

/* A call failed with e: in the retry sweep it must be out of memory with
 * a message, and is then made again with every allocation succeeding
 * (@return 1); otherwise the job ends (@return 0). */
static int retry_after(core_ctx *c, int rc, const char *call, const nnt_err *e) {
  if (!c->retry)
    return 0;
  if (rc != NNT_ERR_NOMEM || e->code != rc)
    fail_msg("%s: %d (e.code %d), not NNT_ERR_NOMEM: %s", call, rc, e->code, e->msg);
  if (!strstr(e->msg, "memory") && !strstr(e->msg, "allocate"))
    fail_msg("%s: out of memory, but the message is '%s'", call, e->msg);
  nnt_alloc_fail_after(-1);
  c->retried++;
  return 1;
}

/* A call that leaves everything as it was when it fails. */
#define CALL(x)                                                                  \
  do {                                                                           \
    if ((rc = (x)) && (!retry_after(c, rc, #x, &e) || (rc = (x))))              \
      goto done;                                                                 \
  } while (0)
/* A call that may leave part of its work done (loading an INI adds the
 * sections read before the failure; training changes the weights): on
 * failure the job ends. */
#define ONCE(x)                                                                  \
  do {                                                                           \
    if ((rc = (x)))                                                              \
      goto done;                                                                 \
  } while (0)

static int core_job(void *vc, sw_out *out, char *msg) {
  core_ctx *c = vc;
  unlink(c->ckpt);
  unlink(c->bin);
  unlink(c->out_ini);
  nnt_err e = {0};
  nnt_model *m = NULL, *m2 = NULL;
  char *sum = NULL;
  size_t sum_len = 0;
  float loss = 0, acc = 0, y[2 * 3];
  int rc;
  /* compiled for batch 3, trained at 2: the graph is finalized again */
  const char *ov[] = {"batch_size=3"};
  CALL(nnt_model_create(&m, &e));
  CALL(nnt_model_set_base_dir(m, c->dir, &e));
  ONCE(nnt_ini_load(m, c->ini, ov, 1, &e));
  CALL(nnt_model_compile(m, &e));
  CALL(nnt_model_initialize(m, &e));
  CALL(nnt_model_set_property(m, "batch_size", "2", &e));
  ONCE(nnt_model_train(m, on_progress, c, &e));
  CALL(nnt_model_evaluate(m, NNT_DS_VALID, &loss, &acc, &e));
  {
    float x[2 * 16];
    for (int i = 0; i < 32; i++)
      x[i] = (float)((i * 5) % 13) / 13.0f - 0.5f;
    const float *in[] = {x};
    float *outs[] = {y};
    CALL(nnt_model_infer(m, in, outs, &e));
  }
  CALL(nnt_model_save_weights(m, c->bin, 1, &e));
  CALL(nnt_model_save_ini(m, c->out_ini, "out.bin", &e));
  FILE *ms = open_memstream(&sum, &sum_len);
  assert_non_null(ms);
  nnt_model_print_summary(ms, m, 2);
  fclose(ms);
  /* the second model: the saved INI, then the saved weights and state,
   * then a layer copied over (its Adam moments restart from zero) */
  CALL(nnt_model_create(&m2, &e));
  CALL(nnt_model_set_base_dir(m2, c->dir, &e));
  ONCE(nnt_ini_load(m2, c->out_ini, NULL, 0, &e));
  CALL(nnt_model_compile(m2, &e));
  CALL(nnt_model_initialize(m2, &e));
  CALL(nnt_model_load_weights(m2, c->bin, &e));
  const char *copied[] = {"conv"};
  CALL(nnt_model_copy_layer_weights(m2, m, copied, 1, &e));
  sw_put(out, "weights", m->wpool, m->wpool_floats * sizeof(float));
  sw_put(out, "adam", m->opt_pool, nnt_model_opt_bytes(m, m->opt_slots));
  sw_put(out, "loss", &loss, sizeof loss);
  sw_put(out, "accuracy", &acc, sizeof acc);
  sw_put(out, "inference", y, sizeof y);
  sw_put(out, "summary", sum, sum_len);
  const nnt_mgr *g = &m->mgr[NNT_MODE_EVAL]; /* what evaluate planned (inference ran in it) */
  size_t plan[2] = {g->arena_bytes, g->lower_bound};
  sw_put(out, "evaluation plan", plan, sizeof plan);
  sw_put(out, "weights of the second model", m2->wpool, m2->wpool_floats * sizeof(float));
  sw_put(out, "adam of the second model", m2->opt_pool,
         nnt_model_opt_bytes(m2, m2->opt_slots));
done:
  if (rc)
    snprintf(msg, SW_MSG_MAX, "%s", e.msg);
  /* files left behind: on success all three, on failure any of them */
  sw_put_file(out, "ckpt.bin", c->ckpt);
  sw_put_file(out, "out.bin", c->bin);
  sw_put_file(out, "out.ini", c->out_ini);
  free(sum);
  nnt_model_destroy(m2);
  nnt_model_destroy(m);
  return rc;
}

static int setup(void **state) {
  core_ctx *c = calloc(1, sizeof *c);
  c->dir = sw_mkdtemp();
  snprintf(c->ini, sizeof c->ini, "%s/model.ini", c->dir);
  snprintf(c->ckpt, sizeof c->ckpt, "%s/ckpt.bin", c->dir);
  snprintf(c->bin, sizeof c->bin, "%s/out.bin", c->dir);
  snprintf(c->out_ini, sizeof c->out_ini, "%s/out.ini", c->dir);
  FILE *f = fopen(c->ini, "w");
  assert_non_null(f);
  fputs(model_ini, f);
  fclose(f);
  char p[600];
  snprintf(p, sizeof p, "%s/train.dat", c->dir);
  sw_write_raw(p, 6, 1);
  /* 4 images of 4 x 4 bytes and their classes, in IDX files */
  unsigned char img[16 + 4 * 16] = {0, 0, 8, 3, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4};
  unsigned char lab[8 + 4] = {0, 0, 8, 1, 0, 0, 0, 4, 0, 1, 2, 1};
  for (int i = 0; i < 4 * 16; i++)
    img[16 + i] = (unsigned char)(i * 37 % 256);
  const char *names[] = {"valid-images.idx", "valid-labels.idx"};
  const unsigned char *bytes[] = {img, lab};
  size_t sizes[] = {sizeof img, sizeof lab};
  for (int k = 0; k < 2; k++) {
    snprintf(p, sizeof p, "%s/%s", c->dir, names[k]);
    f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes[k], 1, sizes[k], f), sizes[k]);
    fclose(f);
  }
  *state = c;
  return 0;
}

static int teardown(void **state) {
  core_ctx *c = *state;
  tu_rmdir(c->dir);
  free(c->dir);
  free(c);
  return 0;
}

static const int nomem[] = {NNT_ERR_NOMEM, 0};

static void run_core(core_ctx *c, int once, int retry) {
  sw_out partial = {0};
  c->partial = &partial;
  c->retry = 0;
  sw_out ref = {0};
  char msg[SW_MSG_MAX] = "";
  /* the checkpoint of epoch 1, from a run of its own */
  assert_int_equal(core_job(c, &ref, msg), NNT_OK);
  sw_out_free(&ref);
  c->partial = NULL;
  assert_int_equal(partial.n, 1);
  c->retry = retry;
  c->retried = 0;
  sw_config cfg = {.name = retry ? "core job, calls retried" : "core job", .job = core_job,
                   .ctx = c, .codes = nomem, .partial = &partial, .once = once,
                   .max_trials = 20000};
  sw_stats st = sw_run(&cfg, NULL);
  assert_true(st.trials > 100);
  if (retry) { /* failures in a load or a run end the job; the others are made again */
    assert_true(c->retried > 0);
    assert_int_equal(st.absorbed, c->retried);
  } else {
    assert_int_equal(st.absorbed, 0);
  }
  sw_out_free(&partial);
}

static void test_core_fail_from_n(void **state) { run_core(*state, 0, 0); }
static void test_core_fail_once(void **state) { run_core(*state, 1, 0); }
static void test_core_fail_once_retry(void **state) { run_core(*state, 1, 1); }

/* A batch change after compile that runs out of memory, with memory short
 * from then on (so that putting the old batch back cannot allocate
 * either): the model keeps its batch and its inputs and trains, once
 * memory is back, exactly as a model that never tried. (The change used to
 * leave the model with no inputs, which a later run reported as a dataset
 * of 0 inputs.) */
static void test_batch_change_out_of_memory(void **state) {
  core_ctx *c = *state;
  nnt_model *m[2];
  nnt_err e = {0};
  for (int i = 0; i < 2; i++) {
    const char *ov[] = {"epochs=1", "save_path="};
    if (nnt_model_create(&m[i], &e) || nnt_model_set_base_dir(m[i], c->dir, &e) ||
        nnt_ini_load(m[i], c->ini, ov, 2, &e) || nnt_model_compile(m[i], &e) ||
        nnt_model_initialize(m[i], &e))
      fail_msg("%s", e.msg);
  }
  nnt_dim before[2], after[2];
  assert_int_equal(nnt_model_input_dims(m[1], before, 2), 1);
  nnt_alloc_fail_after(0);
  int rc = nnt_model_set_property(m[1], "batch_size", "3", &e);
  nnt_alloc_fail_after(-1);
  assert_int_equal(rc, NNT_ERR_NOMEM);
  tu_assert_contains(e.msg, "batch_size");
  tu_assert_contains(e.msg, "out of memory");
  assert_int_equal(nnt_model_batch_size(m[1]), 2);
  assert_int_equal(nnt_model_input_dims(m[1], after, 2), 1);
  assert_memory_equal(before, after, sizeof before[0]);
  for (int i = 0; i < 2; i++)
    if (nnt_model_train(m[i], NULL, NULL, &e))
      fail_msg("model %d: %s", i, e.msg);
  assert_int_equal(m[0]->wpool_floats, m[1]->wpool_floats);
  assert_memory_equal(m[0]->wpool, m[1]->wpool, m[0]->wpool_floats * sizeof(float));
  nnt_model_destroy(m[0]);
  nnt_model_destroy(m[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_core_fail_from_n, setup, teardown),
      cmocka_unit_test_setup_teardown(test_core_fail_once, setup, teardown),
      cmocka_unit_test_setup_teardown(test_core_fail_once_retry, setup, teardown),
      cmocka_unit_test_setup_teardown(test_batch_change_out_of_memory, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
