/* Fuzz target: weight files. The first byte picks one of the fixed models
 * below (its low 6 bits modulo their count); with its top bit set the file
 * is loaded by initialize (continue_train with save_path naming it), else
 * by nnt_model_load_weights into the initialized model, after one training
 * step when bit 6 is set (so that there are moments to keep). The rest of
 * the input is the file. The models are those of test/golden/nntrainer, whose
 * NNTrainer-written files are the seeds: fully connected layers with adam,
 * sgd, adamw and a frozen layer; conv2d + batch normalization with adam,
 * sgd and a frozen batch normalization.
 *
 * Promises checked beyond the sanitizers: a refused file leaves the model's
 * weights, moments and counters as they were; an accepted one gives the
 * model exactly the file's weights; the model then trains a step from the
 * loaded counters, and what it saves loads back to the same weights. */
#include "fuzz.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

#define HEAD                                                                              \
  "[Model]\ntype = NeuralNetwork\nepochs = 1\nbatch_size = 4\nloss = cross\n"             \
  "[train_set]\ntype = synthetic\nsamples = 4\n"
#define OPT(t, lr) "[Optimizer]\ntype = " t "\nlearning_rate = " lr "\n"
#define FC(frozen)                                                                        \
  "[fc1]\ntype = fully_connected\ninput_shape = 1:1:6\nunit = 5\nactivation = relu\n"     \
  frozen "[fc2]\ntype = fully_connected\nunit = 4\nactivation = relu\n"                   \
  "[fc3]\ntype = fully_connected\nunit = 3\nactivation = softmax\n"
#define CONV_BN(frozen)                                                                   \
  "[conv]\ntype = conv2d\ninput_shape = 1:6:6\nfilters = 2\nkernel_size = 3,3\n"          \
  "[bn]\ntype = batch_normalization\nactivation = relu\nflatten = true\n" frozen          \
  "[fc]\ntype = fully_connected\nunit = 3\nactivation = softmax\n"

static const char *const models[] = {
    HEAD OPT("adam", "0.01") FC(""),
    HEAD OPT("sgd", "0.1") FC(""),
    HEAD OPT("adamw", "0.01") FC(""),
    HEAD OPT("adam", "0.01") FC("trainable = false\n"),
    HEAD OPT("adam", "0.01") CONV_BN(""),
    HEAD OPT("sgd", "0.1") CONV_BN(""),
    HEAD OPT("adam", "0.01") CONV_BN("trainable = false\n"),
};
#define N_MODELS (sizeof models / sizeof models[0])

/* Everything a load may change. */
typedef struct snapshot {
  float *w, *opt;
  size_t nw, nopt;
  unsigned epoch, iter;
} snapshot;

static void take(const nnt_model *m, snapshot *s) {
  memset(s, 0, sizeof *s);
  s->nw = m->wpool ? m->wpool_floats : 0;
  s->nopt = m->opt_pool ? nnt_model_opt_bytes(m, m->opt_slots) / sizeof(float) : 0;
  s->w = nnt_malloc(s->nw * sizeof(float) + 1);
  s->opt = nnt_malloc(s->nopt * sizeof(float) + 1);
  if (!s->w || !s->opt)
    nnt_fuzz_fail("out of memory taking a snapshot");
  if (s->nw)
    memcpy(s->w, m->wpool, s->nw * sizeof(float));
  if (s->nopt)
    memcpy(s->opt, m->opt_pool, s->nopt * sizeof(float));
  s->epoch = m->epoch_idx;
  s->iter = m->iter;
}

static void same(const nnt_model *m, const snapshot *s, const char *msg) {
  size_t nw = m->wpool ? m->wpool_floats : 0;
  size_t nopt = m->opt_pool ? nnt_model_opt_bytes(m, m->opt_slots) / sizeof(float) : 0;
  if (nw != s->nw || (nw && memcmp(s->w, m->wpool, nw * sizeof(float))))
    nnt_fuzz_fail("a refused weight file changed the weights (%s)", msg);
  if (nopt != s->nopt || (nopt && memcmp(s->opt, m->opt_pool, nopt * sizeof(float))))
    nnt_fuzz_fail("a refused weight file changed the optimizer state (%s)", msg);
  if (m->epoch_idx != s->epoch || m->iter != s->iter)
    nnt_fuzz_fail("a refused weight file changed the counters (%s)", msg);
}

static void drop(snapshot *s) {
  nnt_free(s->w);
  nnt_free(s->opt);
}

static nnt_model *build(size_t which, const char *save_path) {
  nnt_model *m;
  nnt_err e = {0};
  if (nnt_model_create(&m, &e))
    nnt_fuzz_fail("nnt_model_create: %s", e.msg);
  const char *t = models[which];
  if (nnt_model_set_base_dir(m, nnt_fuzz_tmpdir(), &e) ||
      nnt_ini_load_text(m, "weights.ini", t, strlen(t), NULL, 0, &e) ||
      (save_path && (nnt_model_set_property(m, "save_path", save_path, &e) ||
                     nnt_model_set_property(m, "continue_train", "true", &e))) ||
      nnt_model_compile(m, &e))
    nnt_fuzz_fail("fixed model %zu: %s", which, e.msg);
  return m;
}

/* An accepted file: the model holds its weights, trains on from its
 * counters, and what it saves loads back. */
static void after_load(nnt_model *m, const uint8_t *file, size_t size) {
  size_t wb = m->wpool_floats * sizeof(float);
  if (size < wb || memcmp(m->wpool, file, wb))
    nnt_fuzz_fail("an accepted weight file did not give the model its weights");
  char buf[16], path[4200];
  nnt_err e = {0};
  /* a file at the epoch counter's last value cannot be trained on: the
   * epochs key stops short of the value no load accepts (an iteration
   * counter that close to its end is refused by the training below) */
  if (m->epoch_idx >= UINT_MAX - 1) {
    snprintf(buf, sizeof buf, "%u", UINT_MAX);
    if (nnt_model_set_property(m, "epochs", buf, &e) != NNT_ERR_INVAL)
      nnt_fuzz_fail("epochs = %s was taken", buf);
    return;
  }
  snprintf(buf, sizeof buf, "%u", m->epoch_idx + 1);
  int rc;
  if ((rc = nnt_model_set_property(m, "continue_train", "true", &e)) ||
      (rc = nnt_model_set_property(m, "epochs", buf, &e)) ||
      (rc = nnt_model_set_property(m, "save_path", "", &e)))
    nnt_fuzz_fail("setting the model up to train on: %s", e.msg);
  if ((rc = nnt_model_train(m, NULL, NULL, &e))) {
    nnt_fuzz_check_err("nnt_model_train", rc, &e);
    return;
  }
  nnt_fuzz_path(path, sizeof path, "saved.bin");
  if ((rc = nnt_model_save_weights(m, path, 1, &e))) {
    nnt_fuzz_check_err("nnt_model_save_weights", rc, &e); /* not finite after the step */
    return;
  }
  snapshot s;
  take(m, &s);
  if ((rc = nnt_model_load_weights(m, path, &e)) && rc != NNT_ERR_NOMEM)
    nnt_fuzz_fail("the weights nnt_model_save_weights wrote do not load: %s", e.msg);
  if (!rc && memcmp(s.w, m->wpool, wb))
    nnt_fuzz_fail("saving and loading the weights changed them");
  if (!rc && (m->epoch_idx != s.epoch || m->iter != s.iter))
    nnt_fuzz_fail("saving and loading changed the counters from %u/%u to %u/%u", s.epoch, s.iter,
                  m->epoch_idx, m->iter);
  drop(&s);
}

int nnt_fuzz_weights(const uint8_t *data, size_t size) {
  nnt_fuzz_init();
  if (!size)
    return NNT_FUZZ_REFUSED;
  size_t which = (data[0] & 0x3f) % N_MODELS;
  int at_init = data[0] & 0x80, step_first = data[0] & 0x40;
  data++, size--;
  char path[4200];
  nnt_fuzz_path(path, sizeof path, "model.bin");
  nnt_fuzz_write(path, data, size);
  nnt_model *m = build(which, at_init ? path : NULL);
  nnt_err e = {0};
  int rc;
  if (at_init) {
    /* a refused file leaves a model that is not initialized */
    if ((rc = nnt_model_initialize(m, &e)))
      nnt_fuzz_check_err("nnt_model_initialize", rc, &e);
  } else {
    if ((rc = nnt_model_initialize(m, &e)))
      nnt_fuzz_fail("nnt_model_initialize: %s", e.msg);
    /* a step first, so that there are moments a refused file must keep */
    if (step_first) {
      if ((rc = nnt_model_train(m, NULL, NULL, &e)))
        nnt_fuzz_fail("a step of fixed model %zu: %s", which, e.msg);
    }
    snapshot s;
    take(m, &s);
    if ((rc = nnt_model_load_weights(m, path, &e))) {
      nnt_fuzz_check_err("nnt_model_load_weights", rc, &e);
      same(m, &s, e.msg);
    }
    drop(&s);
  }
  if (!rc)
    after_load(m, data, size);
  nnt_model_destroy(m);
  return rc ? NNT_FUZZ_REFUSED : NNT_FUZZ_ACCEPTED;
}
