/* Training that goes wrong: a value that stops being finite (in the data,
 * a layer's output, the loss, a gradient, an update, a moving statistic)
 * stops training with NNT_ERR_RANGE naming where, with the weights in
 * memory finite and the checkpoint on disk untouched; check_finite=false
 * turns that off. And stopping a training on request: before it starts,
 * from its progress callback, from another thread, from the generator and
 * while it waits for data; a later training runs normally; `nntrainer
 * train` on Ctrl-C. */
#include "test_util.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nntrainer/model_impl.h"

typedef struct lspec {
  const char *type, *name, *props[8];
} lspec;

/* A generator: per_epoch samples of in_len inputs (a small pattern, or
 * `value` everywhere when it is not 0) and a label (one-hot of the sample,
 * or label_value everywhere when it is not 0); call bad_at gets bad_value
 * in every input. Call pause_at posts `reached` and waits for `go`; call
 * stop_at asks the model to stop. */
typedef struct feed {
  unsigned in_len, label_len, per_epoch;
  long bad_at, pause_at, stop_at;
  float value, bad_value, label_value;
  atomic_long calls;
  nnt_model *m;
  sem_t reached, go;
} feed;

static void feed_init(feed *f, unsigned in_len, unsigned label_len, unsigned per_epoch) {
  memset(f, 0, sizeof *f);
  f->in_len = in_len, f->label_len = label_len, f->per_epoch = per_epoch;
  f->bad_at = f->pause_at = f->stop_at = -1;
  atomic_init(&f->calls, 0);
  sem_init(&f->reached, 0, 0);
  sem_init(&f->go, 0, 0);
}

static void feed_free(feed *f) {
  sem_destroy(&f->reached);
  sem_destroy(&f->go);
}

static int feed_cb(float **in, float **label, bool *last, void *ud) {
  feed *f = ud;
  long k = atomic_fetch_add(&f->calls, 1);
  if (k == f->pause_at) {
    sem_post(&f->reached);
    sem_wait(&f->go);
  }
  if (k == f->stop_at)
    nnt_model_request_stop(f->m);
  for (unsigned i = 0; i < f->in_len; i++)
    in[0][i] = k == f->bad_at ? f->bad_value
               : f->value     ? f->value
                              : (float)((k * 7 + i * 3) % 11) / 11.0f - 0.5f;
  for (unsigned i = 0; i < f->label_len; i++)
    label[0][i] = f->label_value ? f->label_value : (float)(i == (unsigned)k % f->label_len);
  *last = (unsigned)(k + 1) % f->per_epoch == 0;
  return 0;
}

/* A model of layers, [Model] properties, optimizer opt at lr, fed by f. */
static nnt_model *make_opt(const lspec *l, size_t n, const char *const *mprops,
                           const char *opt, const char *lr, feed *f) {
  nnt_err e = {0};
  nnt_model *m;
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  for (size_t i = 0; mprops && mprops[i]; i += 2)
    if (nnt_model_set_property(m, mprops[i], mprops[i + 1], &e))
      fail_msg("%s", e.msg);
  for (size_t i = 0; i < n; i++) {
    nnt_layer *y;
    assert_int_equal(nnt_layer_create(l[i].type, &y, &e), NNT_OK);
    assert_int_equal(nnt_layer_set_property(y, "name", l[i].name, &e), NNT_OK);
    for (size_t k = 0; l[i].props[k]; k += 2)
      if (nnt_layer_set_property(y, l[i].props[k], l[i].props[k + 1], &e))
        fail_msg("%s: %s", l[i].name, e.msg);
    assert_int_equal(nnt_model_add_layer(m, y, &e), NNT_OK);
  }
  nnt_optimizer *o;
  assert_int_equal(nnt_optimizer_create(opt, &o, &e), NNT_OK);
  assert_int_equal(nnt_optimizer_set_property(o, "learning_rate", lr, &e), NNT_OK);
  assert_int_equal(nnt_model_set_optimizer(m, o, &e), NNT_OK);
  nnt_dataset *ds;
  assert_int_equal(nnt_dataset_create_generator(feed_cb, f, &ds, &e), NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, &e), NNT_OK);
  if (nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("%s", e.msg);
  f->m = m;
  return m;
}

static nnt_model *make(const lspec *l, size_t n, const char *const *mprops, const char *lr,
                       feed *f) {
  return make_opt(l, n, mprops, "sgd", lr, f);
}

static int all_finite(const float *x, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(x[i]))
      return 0;
  return 1;
}

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *fp = fopen(path, "rb");
  if (!fp)
    return NULL;
  fseek(fp, 0, SEEK_END);
  *n = (size_t)ftell(fp);
  rewind(fp);
  unsigned char *b = malloc(*n + 1);
  assert_int_equal(fread(b, 1, *n, fp), *n);
  b[*n] = 0;
  fclose(fp);
  return b;
}

/* What the progress callback saw: the weights after every step and the
 * checkpoint after every epoch. */
typedef struct seen {
  nnt_model *m;
  float *w;          /* the weights after the last step */
  unsigned steps;
  unsigned char *ckpt;
  size_t ckpt_bytes;
  const char *path;
  long stop_at_step; /* ask to stop from the callback after this step */
  long pause_at_step; /* post reached, wait for go after this step */
  sem_t reached, go;
} seen;

static void seen_init(seen *s, nnt_model *m, const char *path) {
  memset(s, 0, sizeof *s);
  s->m = m;
  s->path = path;
  s->stop_at_step = s->pause_at_step = -1;
  s->w = malloc(m->wpool_floats * sizeof(float));
  memcpy(s->w, m->wpool, m->wpool_floats * sizeof(float));
  sem_init(&s->reached, 0, 0);
  sem_init(&s->go, 0, 0);
}

static void seen_free(seen *s) {
  free(s->w);
  free(s->ckpt);
  sem_destroy(&s->reached);
  sem_destroy(&s->go);
}

static void seen_cb(const nnt_progress *p, void *ud) {
  seen *s = ud;
  if (p->epoch_done) {
    free(s->ckpt);
    s->ckpt = s->path ? slurp(s->path, &s->ckpt_bytes) : NULL;
    return;
  }
  s->steps++;
  memcpy(s->w, s->m->wpool, s->m->wpool_floats * sizeof(float));
  if ((long)s->steps == s->stop_at_step)
    nnt_model_request_stop(s->m);
  if ((long)s->steps == s->pause_at_step) {
    sem_post(&s->reached);
    sem_wait(&s->go);
  }
}

static void assert_file_is(const char *path, const unsigned char *want, size_t n) {
  size_t got_n = 0;
  unsigned char *got = slurp(path, &got_n);
  assert_non_null(got);
  assert_int_equal(got_n, n);
  assert_memory_equal(got, want, n);
  free(got);
}

static const lspec mlp[] = {
    {"input", "in", {"input_shape", "1:1:6", NULL}},
    {"fully_connected", "fc1", {"unit", "5", "activation", "sigmoid", NULL}},
    {"fully_connected", "fc2", {"unit", "3", "activation", "softmax", NULL}},
};

/* ---- not finite ----------------------------------------------------- */

/* NaN or inf in the data of epoch 2, step 3: the error names the input and
 * the sample; the weights are those after step 6 and the checkpoint of
 * epoch 1 is untouched. */
static void test_bad_input(void **state) {
  (void)state;
  const float bad[] = {NAN, INFINITY, -INFINITY};
  const char *name[] = {"NaN", "inf", "-inf"};
  for (int c = 0; c < 3; c++) {
    char *dir = tu_mkdtemp(), path[512];
    snprintf(path, sizeof path, "%s/w.bin", dir);
    const char *props[] = {"batch_size", "4", "epochs", "3", "loss", "cross",
                           "save_path", path, NULL};
    feed f;
    feed_init(&f, 6, 3, 16);
    f.bad_at = 16 + 2 * 4 + 1; /* epoch 2, batch 3, sample 1 */
    f.bad_value = bad[c];
    nnt_model *m = make(mlp, 3, props, "0.1", &f);
    seen s;
    seen_init(&s, m, path);
    nnt_err e = {0};
    assert_int_equal(nnt_model_train(m, seen_cb, &s, &e), NNT_ERR_RANGE);
    tu_assert_contains(e.msg, "train: epoch 2, iteration 7 (batch 3 of the epoch)");
    char want[128];
    snprintf(want, sizeof want, "input 0 of the batch is not finite (%s in sample 1 of 4)",
             name[c]);
    tu_assert_contains(e.msg, want);
    assert_int_equal(s.steps, 6);
    assert_int_equal(m->iter, 6);
    assert_int_equal(m->epoch_idx, 1);
    assert_memory_equal(m->wpool, s.w, m->wpool_floats * sizeof(float));
    assert_non_null(s.ckpt);
    assert_file_is(path, s.ckpt, s.ckpt_bytes);
    seen_free(&s);
    nnt_model_destroy(m);
    feed_free(&f);
    tu_rmdir(dir);
    free(dir);
  }
}

/* An output that overflows inside fc1 (finite inputs, six of them adding
 * up to inf): fc1 is named, not the input, nor the relu that runs in place
 * over fc1's output, nor fc2 that turns it into NaN. */
static void test_layer_output_named(void **state) {
  (void)state;
  const lspec g[] = {
      {"input", "in", {"input_shape", "1:1:6", NULL}},
      {"fully_connected", "fc1",
       {"unit", "5", "activation", "relu", "weight_initializer", "ones", NULL}},
      {"fully_connected", "fc2", {"unit", "3", "activation", "softmax", NULL}},
  };
  const char *props[] = {"batch_size", "4", "loss", "cross", NULL};
  feed f;
  feed_init(&f, 6, 3, 16);
  f.bad_at = 2;
  f.bad_value = 3e38f; /* finite; six of them add up to inf */
  nnt_model *m = make(g, 3, props, "0.1", &f);
  seen s;
  seen_init(&s, m, NULL);
  nnt_err e = {0};
  assert_int_equal(nnt_model_train(m, seen_cb, &s, &e), NNT_ERR_RANGE);
  tu_assert_contains(e.msg, "epoch 1, iteration 1 ");
  tu_assert_contains(e.msg, ": layer 'fc1' (fully_connected) is the first whose output is not "
                            "finite (inf in sample 2 of 4, output 0)");
  assert_memory_equal(m->wpool, s.w, m->wpool_floats * sizeof(float)); /* the initial ones */
  seen_free(&s);
  nnt_model_destroy(m);
  feed_free(&f);
}

/* Outputs finite, the loss not: the loss layer is named. */
static void test_loss_value_named(void **state) {
  (void)state;
  const char *props[] = {"batch_size", "4", "loss", "mse", NULL};
  feed f;
  feed_init(&f, 6, 3, 16);
  f.label_value = 1e30f; /* squared: inf */
  nnt_model *m = make(mlp, 3, props, "0.1", &f);
  nnt_err e = {0};
  assert_int_equal(nnt_model_train(m, NULL, NULL, &e), NNT_ERR_RANGE);
  tu_assert_contains(e.msg, "the loss is inf: layer '");
  tu_assert_contains(e.msg, "(mse) is the first whose loss value is not finite");
  nnt_model_destroy(m);
  feed_free(&f);
}

/* Loss and outputs finite, a gradient not (x = 1.5e19, y = x: the loss
 * x^2 is finite, the weight's gradient 2 x^2 is not): named before it is
 * applied, with or without clipping by the global norm. */
static void test_gradient_named(void **state) {
  (void)state;
  const lspec g[] = {
      {"input", "in", {"input_shape", "1:1:1", NULL}},
      {"fully_connected", "fc", {"unit", "1", "weight_initializer", "ones", NULL}},
  };
  for (int clip = 0; clip < 2; clip++) {
    const char *props[] = {"batch_size", "1", "loss", "mse", "clip_grad_by_norm",
                           clip ? "1" : "0", NULL};
    feed f;
    feed_init(&f, 1, 1, 8);
    f.value = 1.5e19f;
    f.label_value = 1e-30f;
    nnt_model *m = make(g, 2, props, "0.1", &f);
    seen s;
    seen_init(&s, m, NULL);
    nnt_err e = {0};
    assert_int_equal(nnt_model_train(m, seen_cb, &s, &e), NNT_ERR_RANGE);
    tu_assert_contains(e.msg, "epoch 1, iteration 1 ");
    tu_assert_contains(e.msg, "the gradient of weight 'weight' of layer 'fc' is not finite "
                              "(inf at element 0 of 1); it was not applied");
    assert_memory_equal(m->wpool, s.w, m->wpool_floats * sizeof(float));
    seen_free(&s);
    nnt_model_destroy(m);
    feed_free(&f);
  }
}

/* A learning rate so large that an update overflows from a finite
 * gradient: caught at the next step, or before the epoch's checkpoint when
 * it was the epoch's last step; either way the weight is named and the
 * checkpoint of epoch 1 stays. y = w x without bias, mse against 1e-30:
 * with x = 1e-30 (every other sample) the gradient is 0; x = 10 gives 200,
 * times 1e38. */
static void test_update_overflow(void **state) {
  (void)state;
  const lspec g[] = {
      {"input", "in", {"input_shape", "1:1:1", NULL}},
      {"fully_connected", "fc",
       {"unit", "1", "weight_initializer", "ones", "disable_bias", "true", NULL}},
  };
  for (int at_end = 0; at_end < 2; at_end++) {
    char *dir = tu_mkdtemp(), path[512];
    snprintf(path, sizeof path, "%s/w.bin", dir);
    const char *props[] = {"batch_size", "1", "epochs", "3", "loss", "mse", "save_path", path,
                           NULL};
    feed f;
    feed_init(&f, 1, 1, 4);
    f.value = 1e-30f;
    f.label_value = 1e-30f;
    f.bad_at = at_end ? 7 : 5; /* epoch 2, step 4 (its last) or step 2 */
    f.bad_value = 10;
    nnt_model *m = make(g, 2, props, "1e38", &f);
    seen s;
    seen_init(&s, m, path);
    nnt_err e = {0};
    assert_int_equal(nnt_model_train(m, seen_cb, &s, &e), NNT_ERR_RANGE);
    const char *weight = "weight 'weight' of layer 'fc' is not finite (-inf at element 0 of 1): "
                         "an update overflowed from a finite gradient (learning rate too "
                         "large?)";
    tu_assert_contains(e.msg, at_end ? "train: epoch 2, before its checkpoint: "
                                     : "train: epoch 2, iteration 7 (batch 3 of the epoch): "
                                       "the loss is inf: ");
    tu_assert_contains(e.msg, weight);
    assert_int_equal(m->epoch_idx, 1);
    assert_file_is(path, s.ckpt, s.ckpt_bytes);
    seen_free(&s);
    nnt_model_destroy(m);
    feed_free(&f);
    tu_rmdir(dir);
    free(dir);
  }
}

/* Adam's second moment overflows (a gradient of 8e20 squared) while the
 * weight stays finite (its step is m / sqrt(inf) = 0): caught before the
 * checkpoint, which would carry the moments. */
static void test_optimizer_state(void **state) {
  (void)state;
  const lspec g[] = {
      {"input", "in", {"input_shape", "1:1:1", NULL}},
      {"fully_connected", "fc",
       {"unit", "1", "weight_initializer", "ones", "disable_bias", "true", NULL}},
  };
  char *dir = tu_mkdtemp(), path[512];
  snprintf(path, sizeof path, "%s/w.bin", dir);
  const char *props[] = {"batch_size", "1", "epochs", "2", "loss", "mse", "save_path", path,
                         NULL};
  feed f;
  feed_init(&f, 1, 1, 4);
  f.value = 2e10f;
  f.label_value = 1e-30f;
  nnt_model *m = make_opt(g, 2, props, "adam", "0.001", &f);
  nnt_err e = {0};
  assert_int_equal(nnt_model_train(m, NULL, NULL, &e), NNT_ERR_RANGE);
  tu_assert_contains(e.msg, "train: epoch 1, before its checkpoint: the optimizer state of "
                            "weight 'weight' of layer 'fc' is not finite (inf at element 0 of "
                            "1)");
  assert_true(all_finite(m->wpool, m->wpool_floats));
  FILE *fp = fopen(path, "rb");
  assert_null(fp); /* no checkpoint was written */
  nnt_model_destroy(m);
  feed_free(&f);
  tu_rmdir(dir);
  free(dir);
}

/* Inputs of +-1e20: batch-norm's variance overflows, its output and the
 * loss stay finite, its moving variance would not: put back and named. */
static void test_moving_statistics(void **state) {
  (void)state;
  const lspec g[] = {
      {"input", "in", {"input_shape", "1:1:4", NULL}},
      {"batch_normalization", "bn", {NULL}},
      {"fully_connected", "fc", {"unit", "2", "activation", "softmax", NULL}},
  };
  const char *props[] = {"batch_size", "2", "loss", "cross", NULL};
  feed f;
  feed_init(&f, 4, 2, 8);
  f.value = 1e20f;
  f.bad_at = 1; /* the second sample of the first batch: -1e20 */
  f.bad_value = -1e20f;
  nnt_model *m = make(g, 3, props, "0.1", &f);
  seen s;
  seen_init(&s, m, NULL);
  nnt_err e = {0};
  assert_int_equal(nnt_model_train(m, seen_cb, &s, &e), NNT_ERR_RANGE);
  tu_assert_contains(e.msg, "epoch 1, iteration 1 ");
  tu_assert_contains(e.msg, "the forward pass made weight 'moving_variance' of layer 'bn' not "
                            "finite (inf at element 0 of 4); it was put back");
  assert_memory_equal(m->wpool, s.w, m->wpool_floats * sizeof(float));
  seen_free(&s);
  nnt_model_destroy(m);
  feed_free(&f);
}

/* check_finite=false (also after compile): the NaN goes through; the key
 * survives writing the model as an INI. */
static void test_check_off(void **state) {
  (void)state;
  const char *props[] = {"batch_size", "4", "loss", "cross", "check_finite", "false", NULL};
  feed f;
  feed_init(&f, 6, 3, 16);
  f.bad_at = 1;
  f.bad_value = NAN;
  nnt_model *m = make(mlp, 3, props, "0.1", &f);
  nnt_err e = {0};
  assert_int_equal(nnt_model_train(m, NULL, NULL, &e), NNT_OK);
  assert_false(all_finite(m->wpool, m->wpool_floats));
  char *dir = tu_mkdtemp(), ini[512];
  snprintf(ini, sizeof ini, "%s/m.ini", dir);
  assert_int_equal(nnt_model_save_ini(m, ini, NULL, &e), NNT_OK);
  size_t n;
  unsigned char *text = slurp(ini, &n);
  tu_assert_contains((char *)text, "check_finite = false\n");
  free(text);
  tu_rmdir(dir);
  free(dir);
  nnt_model_destroy(m);
  feed_free(&f);
  /* on by default; the key may change between runs of a compiled model */
  const char *on[] = {"batch_size", "4", "loss", "cross", NULL};
  feed_init(&f, 6, 3, 16);
  f.bad_at = 1;
  f.bad_value = NAN;
  m = make(mlp, 3, on, "0.1", &f);
  assert_int_equal(nnt_model_train(m, NULL, NULL, &e), NNT_ERR_RANGE);
  assert_int_equal(nnt_model_set_property(m, "check_finite", "maybe", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "check_finite");
  assert_int_equal(nnt_model_set_property(m, "check_finite", "false", &e), NNT_OK);
  assert_int_equal(nnt_model_train(m, NULL, NULL, &e), NNT_OK);
  nnt_model_destroy(m);
  feed_free(&f);
}

/* ---- stop ------------------------------------------------------------ */

static const char *const stop_props[] = {"batch_size", "4", "epochs", "3", "loss", "cross",
                                         NULL};

/* From the progress callback after step 6 (epoch 2): the run stops there,
 * the checkpoint of epoch 1 stays as it was, and a second run is normal. */
static void test_stop_from_progress(void **state) {
  (void)state;
  char *dir = tu_mkdtemp(), path[512];
  snprintf(path, sizeof path, "%s/w.bin", dir);
  const char *props[] = {"batch_size", "4", "epochs", "3", "loss", "cross", "save_path", path,
                         NULL};
  feed f;
  feed_init(&f, 6, 3, 16);
  nnt_model *m = make(mlp, 3, props, "0.1", &f);
  seen s;
  seen_init(&s, m, path);
  s.stop_at_step = 6;
  nnt_err e = {0};
  assert_int_equal(nnt_model_train(m, seen_cb, &s, &e), NNT_ERR_CANCELED);
  tu_assert_contains(e.msg, "stopped on request in epoch 2 after 2 of its steps (iteration 6)");
  assert_int_equal(s.steps, 6);
  assert_int_equal(m->iter, 6);
  assert_int_equal(m->epoch_idx, 1);
  assert_memory_equal(m->wpool, s.w, m->wpool_floats * sizeof(float));
  assert_file_is(path, s.ckpt, s.ckpt_bytes);
  /* the request was for that run: the next one trains all its epochs
   * (the generator goes on from where the producer left it, so its first
   * epoch ends at the generator's next last) */
  s.stop_at_step = -1;
  s.steps = 0;
  assert_int_equal(nnt_model_train(m, seen_cb, &s, &e), NNT_OK);
  assert_int_equal(m->epoch_idx, 3);
  assert_true(s.steps > 8);
  seen_free(&s);
  nnt_model_destroy(m);
  feed_free(&f);
  tu_rmdir(dir);
  free(dir);
}

typedef struct runner {
  nnt_model *m;
  seen *s;
  int rc;
  nnt_err e;
} runner;

static void *run_train(void *arg) {
  runner *r = arg;
  r->rc = nnt_model_train(r->m, seen_cb, r->s, &r->e);
  return NULL;
}

/* From another thread, synchronised with the progress callback: the run
 * ends after the step in progress. */
static void test_stop_from_thread(void **state) {
  (void)state;
  feed f;
  feed_init(&f, 6, 3, 16);
  nnt_model *m = make(mlp, 3, stop_props, "0.1", &f);
  seen s;
  seen_init(&s, m, NULL);
  s.pause_at_step = 5;
  runner r = {m, &s, 0, {0}};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, run_train, &r), 0);
  sem_wait(&s.reached); /* the run is inside step 5's callback */
  nnt_model_request_stop(m);
  sem_post(&s.go);
  pthread_join(t, NULL);
  assert_int_equal(r.rc, NNT_ERR_CANCELED);
  assert_int_equal(s.steps, 5);
  seen_free(&s);
  nnt_model_destroy(m);
  feed_free(&f);
}

/* While the training waits for data: the generator is held inside its
 * callback while the stop is asked; once it returns, the producer makes no
 * further call and the run ends. From the generator itself too. */
static void test_stop_while_waiting_and_from_generator(void **state) {
  (void)state;
  for (int from_gen = 0; from_gen < 2; from_gen++) {
    feed f;
    feed_init(&f, 6, 3, 64);
    nnt_model *m = make(mlp, 3, stop_props, "0.1", &f);
    seen s;
    seen_init(&s, m, NULL);
    runner r = {m, &s, 0, {0}};
    if (from_gen) {
      f.stop_at = 21;
      r.rc = nnt_model_train(m, seen_cb, &s, &r.e);
    } else {
      f.pause_at = 21;
      pthread_t t;
      assert_int_equal(pthread_create(&t, NULL, run_train, &r), 0);
      sem_wait(&f.reached);
      nnt_model_request_stop(m);
      sem_post(&f.go);
      pthread_join(t, NULL);
    }
    assert_int_equal(r.rc, NNT_ERR_CANCELED);
    tu_assert_contains(r.e.msg, "stopped on request in epoch 1");
    assert_int_equal(atomic_load(&f.calls), 22); /* no call after the request */
    assert_true(s.steps <= 5);                  /* samples 20, 21 make no batch */
    seen_free(&s);
    nnt_model_destroy(m);
    feed_free(&f);
  }
}

/* A request made while nothing runs stops the next run before its first
 * step; nnt_model_clear_stop forgets it. */
static void test_stop_before_run(void **state) {
  (void)state;
  feed f;
  feed_init(&f, 6, 3, 16);
  nnt_model *m = make(mlp, 3, stop_props, "0.1", &f);
  float *w0 = malloc(m->wpool_floats * sizeof(float));
  memcpy(w0, m->wpool, m->wpool_floats * sizeof(float));
  nnt_err e = {0};
  nnt_model_request_stop(m);
  assert_int_equal(nnt_model_train(m, NULL, NULL, &e), NNT_ERR_CANCELED);
  tu_assert_contains(e.msg, "after 0 of its steps");
  assert_int_equal(m->iter, 0);
  assert_memory_equal(m->wpool, w0, m->wpool_floats * sizeof(float));
  nnt_model_request_stop(m);
  nnt_model_clear_stop(m);
  assert_int_equal(nnt_model_train(m, NULL, NULL, &e), NNT_OK);
  assert_int_equal(m->iter, 12);
  nnt_model_request_stop(NULL); /* no-ops */
  nnt_model_clear_stop(NULL);
  free(w0);
  nnt_model_destroy(m);
  feed_free(&f);
}

/* `nntrainer train` gets SIGINT once its first epoch is done (its line is
 * on stderr): it stops, says so and exits with 130; the save file holds a
 * checkpoint. */
static void test_cli_sigint(void **state) {
  (void)state;
  char *dir = tu_mkdtemp(), ini[512], bin[512];
  snprintf(ini, sizeof ini, "%s/m.ini", dir);
  snprintf(bin, sizeof bin, "%s/out.bin", dir);
  FILE *fp = fopen(ini, "w");
  assert_non_null(fp);
  fputs("[Model]\ntype = NeuralNetwork\nepochs = 1000000\nbatch_size = 8\nloss = cross\n"
        "save_path = out.bin\n[Optimizer]\ntype = sgd\nlearning_rate = 0.1\n"
        "[train_set]\ntype = synthetic\nsamples = 64\n"
        "[in]\ntype = input\ninput_shape = 1:1:8\n"
        "[out]\ntype = fully_connected\nunit = 3\nactivation = softmax\n",
        fp);
  fclose(fp);
  int pfd[2];
  assert_int_equal(pipe(pfd), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(pfd[1], STDERR_FILENO);
    dup2(pfd[1], STDOUT_FILENO);
    close(pfd[0]);
    close(pfd[1]);
    execl(NNT_CLI_PATH, NNT_CLI_PATH, "train", ini, (char *)NULL);
    _exit(127);
  }
  close(pfd[1]);
  FILE *out = fdopen(pfd[0], "r");
  char line[1024], all[8192] = "";
  int signalled = 0;
  while (fgets(line, sizeof line, out)) {
    strncat(all, line, sizeof all - strlen(all) - 1);
    if (!signalled && strstr(line, "epoch 1/1000000")) {
      kill(pid, SIGINT);
      signalled = 1;
    }
  }
  fclose(out);
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 130)
    fail_msg("status %d: %s", st, all);
  tu_assert_contains(all, "nntrainer: training stopped (interrupted): train: stopped on request");
  tu_assert_contains(all, "holds the weights of epoch");
  size_t n;
  unsigned char *w = slurp(bin, &n);
  assert_non_null(w);
  assert_true(n >= (8 * 3 + 3) * sizeof(float));
  free(w);
  tu_rmdir(dir);
  free(dir);
}

/* ---- counters at their end ------------------------------------------- */

/* The iteration counter stops a step short of its largest value (a weight
 * file holding it would not load back, and training on would wrap it); the
 * epochs key cannot ask for the epoch counter's largest value. */
static void test_counters_at_their_end(void **state) {
  (void)state;
  feed f;
  feed_init(&f, 6, 3, 12);
  const char *props[] = {"batch_size", "4", "loss", "cross", "continue_train", "true", NULL};
  nnt_model *m = make(mlp, NNT_ARRAY_LEN(mlp), props, "0.1", &f);
  nnt_err e = {0};
  m->iter = UINT_MAX - 3; /* as if loaded from a file of a long run */
  assert_int_equal(nnt_model_train(m, NULL, NULL, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "iteration counter is at 4294967294");
  assert_int_equal(m->iter, UINT_MAX - 1); /* two steps trained, the third refused */
  assert_int_equal(nnt_model_set_property(m, "epochs", "4294967295", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "4294967294");
  assert_int_equal(nnt_model_set_property(m, "epochs", "4294967294", &e), NNT_OK);
  nnt_model_destroy(m);
  feed_free(&f);
}

/* ---- a kernel that fails ------------------------------------------------ */

/* The CPU table with one entry that refuses its arguments. */
static nnt_kernels failing;
static int bad_gemm(const nnt_kernels *self, int ta, int tb, size_t m, size_t n, size_t k,
                    float alpha, const float *a, size_t lda, const float *b, size_t ldb, float beta,
                    float *c, size_t ldc) {
  (void)self;
  (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b;
  (void)ldb, (void)beta, (void)c, (void)ldc;
  return NNT_ERR_INVAL;
}
static int bad_sgd(const nnt_kernels *self, size_t n, float lr, const float *g, float *w,
                   const float *skip) {
  (void)self;
  (void)n, (void)lr, (void)g, (void)w, (void)skip;
  return NNT_ERR_INVAL;
}
static int bad_argmax(const nnt_kernels *self, size_t rows, size_t cols, const float *y,
                      const float *l, float *c) {
  (void)self;
  (void)rows, (void)cols, (void)y, (void)l, (void)c;
  return NNT_ERR_INVAL;
}

static void use_failing(nnt_model *m) {
  m->k = &failing;
  for (size_t i = 0; i < m->n_nodes; i++)
    m->nodes[i].ctx.k = &failing;
}

/* A kernel's error code stops training or evaluation with that code and a
 * message naming the layer and the pass; the weights stay as they were. */
static void test_kernel_error_named(void **state) {
  (void)state;
  const char *props[] = {"batch_size", "4", "epochs", "2", "loss", "cross", NULL};
  for (int c = 0; c < 3; c++) {
    failing = *nnt_kernels_cpu();
    if (c == 0)
      failing.gemm = bad_gemm;
    else if (c == 1)
      failing.sgd_step = bad_sgd;
    else
      failing.argmax_match = bad_argmax;
    feed f;
    feed_init(&f, 6, 3, 16);
    nnt_model *m = make(mlp, 3, props, "0.1", &f);
    float *w0 = malloc(m->wpool_floats * sizeof(float));
    memcpy(w0, m->wpool, m->wpool_floats * sizeof(float));
    use_failing(m);
    nnt_err e = {0};
    if (c < 2) {
      assert_int_equal(nnt_model_train(m, NULL, NULL, &e), NNT_ERR_INVAL);
      tu_assert_contains(e.msg, "train: epoch 1, iteration 1 (batch 1 of the epoch): ");
      tu_assert_contains(e.msg, c == 0 ? "[fc1] fully_connected: forward failed"
                                       : "] fully_connected: the optimizer's update failed");
      if (c == 0)
        assert_memory_equal(m->wpool, w0, m->wpool_floats * sizeof(float));
      assert_int_equal(m->iter, 0);
    } else {
      float loss, acc;
      assert_int_equal(nnt_model_evaluate(m, NNT_DS_TRAIN, &loss, &acc, &e), NNT_ERR_INVAL);
      tu_assert_contains(e.msg, "the accuracy count failed");
    }
    free(w0);
    nnt_model_destroy(m);
    feed_free(&f);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_layer_output_named),
      cmocka_unit_test(test_loss_value_named),
      cmocka_unit_test(test_gradient_named),
      cmocka_unit_test(test_update_overflow),
      cmocka_unit_test(test_optimizer_state),
      cmocka_unit_test(test_moving_statistics),
      cmocka_unit_test(test_check_off),
      cmocka_unit_test(test_stop_from_progress),
      cmocka_unit_test(test_stop_from_thread),
      cmocka_unit_test(test_stop_while_waiting_and_from_generator),
      cmocka_unit_test(test_stop_before_run),
      cmocka_unit_test(test_cli_sigint),
      cmocka_unit_test(test_counters_at_their_end),
      cmocka_unit_test(test_kernel_error_named),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
