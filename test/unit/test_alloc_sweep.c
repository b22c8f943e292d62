/* Allocation failure across a whole job of the core library (issue 10):
 * load an INI (convolution, batch normalization, pooling, a residual
 * branch, dropout, Adam with a learning-rate schedule, training and
 * validation sets from raw files), compile, initialize, train two epochs
 * with a checkpoint each epoch, evaluate, save the weights with the
 * optimizer state and the model as an INI, then load both into a second
 * model. The sweep (alloc_sweep.h) fails each allocation in turn: every
 * failure is NNT_ERR_NOMEM with a message, nothing leaks or stays running,
 * a file left behind is one the reference run wrote, and a run that
 * succeeds gives the reference's weights, files, loss and summary. */
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
    "type = file\n"
    "path = valid.dat\n"
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
} core_ctx;

/* n samples of 16 inputs and a one-hot label of 3, little-endian floats. */
static void write_raw(const char *path, unsigned n, unsigned seed) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  nnt_rng r;
  nnt_rng_seed(&r, seed);
  for (unsigned s = 0; s < n; s++) {
    float x[16 + 3] = {0};
    tu_fill_uniform(&r, x, 16, -1, 1);
    x[16 + s % 3] = 1;
    assert_int_equal(fwrite(x, sizeof x, 1, f), 1);
  }
  fclose(f);
}

static void on_progress(const nnt_progress *p, void *ud) {
  core_ctx *c = ud;
  if (c->partial && p->epoch_done && p->epoch == 1)
    sw_put_file(c->partial, "ckpt.bin", c->ckpt);
}

static int core_job(void *vc, sw_out *out, char *msg) {
  core_ctx *c = vc;
  unlink(c->ckpt);
  unlink(c->bin);
  unlink(c->out_ini);
  nnt_err e = {0};
  nnt_model *m = NULL, *m2 = NULL;
  char *sum = NULL;
  size_t sum_len = 0;
  float loss = 0, acc = 0;
  int rc;
  if ((rc = nnt_model_create(&m, &e)) || (rc = nnt_model_set_base_dir(m, c->dir, &e)) ||
      (rc = nnt_ini_load(m, c->ini, NULL, 0, &e)) || (rc = nnt_model_compile(m, &e)) ||
      (rc = nnt_model_initialize(m, &e)) || (rc = nnt_model_train(m, on_progress, c, &e)) ||
      (rc = nnt_model_evaluate(m, NNT_DS_VALID, &loss, &acc, &e)) ||
      (rc = nnt_model_save_weights(m, c->bin, 1, &e)) ||
      (rc = nnt_model_save_ini(m, c->out_ini, "out.bin", &e)))
    goto done;
  FILE *ms = open_memstream(&sum, &sum_len);
  assert_non_null(ms);
  nnt_model_print_summary(ms, m, 2);
  fclose(ms);
  /* the second model: the saved INI, then the saved weights and state */
  if ((rc = nnt_model_create(&m2, &e)) || (rc = nnt_model_set_base_dir(m2, c->dir, &e)) ||
      (rc = nnt_ini_load(m2, c->out_ini, NULL, 0, &e)) || (rc = nnt_model_compile(m2, &e)) ||
      (rc = nnt_model_initialize(m2, &e)) || (rc = nnt_model_load_weights(m2, c->bin, &e)))
    goto done;
  sw_put(out, "weights", m->wpool, m->wpool_floats * sizeof(float));
  sw_put(out, "adam", m->opt_pool, (size_t)m->opt_slots * m->wpool_floats * sizeof(float));
  sw_put(out, "loss", &loss, sizeof loss);
  sw_put(out, "accuracy", &acc, sizeof acc);
  sw_put(out, "summary", sum, sum_len);
  const nnt_mgr *g = &m->mgr[NNT_MODE_INFER]; /* what evaluate planned */
  size_t plan[2] = {g->arena_bytes, g->lower_bound};
  sw_put(out, "inference plan", plan, sizeof plan);
  sw_put(out, "weights of the second model", m2->wpool, m2->wpool_floats * sizeof(float));
  sw_put(out, "adam of the second model", m2->opt_pool,
         (size_t)m2->opt_slots * m2->wpool_floats * sizeof(float));
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
  write_raw(p, 6, 1);
  snprintf(p, sizeof p, "%s/valid.dat", c->dir);
  write_raw(p, 4, 2);
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

static void run_core(core_ctx *c, int once) {
  sw_out partial = {0};
  c->partial = &partial;
  sw_out ref = {0};
  char msg[SW_MSG_MAX] = "";
  /* the checkpoint of epoch 1, from a run of its own */
  assert_int_equal(core_job(c, &ref, msg), NNT_OK);
  sw_out_free(&ref);
  c->partial = NULL;
  assert_int_equal(partial.n, 1);
  sw_config cfg = {.name = "core job", .job = core_job, .ctx = c, .codes = nomem,
                   .partial = &partial, .once = once, .max_trials = 20000};
  sw_stats st = sw_run(&cfg, NULL);
  assert_true(st.trials > 100);
  assert_int_equal(st.trials, st.failed + st.absorbed);
  sw_out_free(&partial);
}

static void test_core_fail_from_n(void **state) { run_core(*state, 0); }
static void test_core_fail_once(void **state) { run_core(*state, 1); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_core_fail_from_n, setup, teardown),
      cmocka_unit_test_setup_teardown(test_core_fail_once, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
