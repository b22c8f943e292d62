/* Step time over the epochs of a training run: does training slow down as
 * it goes (weights and optimizer moments decaying into subnormals were
 * the cause once: docs/performance.md, "Epoch drift")? Trains CONFIG for
 * EPOCHS epochs (default 10) on its own datasets, or on seeded synthetic
 * ones with --synthetic=SAMPLES (validation and test sets a quarter of
 * that, as the CLI makes them), saving nothing, and prints one JSON
 * object: each epoch's median CPU time of a training step on the
 * training thread (CLOCK_THREAD_CPUTIME_ID, steadier than the wall clock
 * while other processes take the cores; the data producer's thread, the
 * validation at an epoch's end and each epoch's first step left out), its
 * mean, the median wall-clock time, and the last epoch's median CPU time
 * over the first's. A VM's speed moves by tens of percent between
 * minutes: at each epoch's end the same thread also times a fixed
 * reference (a 256^3 sgemm, median of 9), and "normalized" is the last
 * epoch's step over its reference against the first's, the drift of
 * the training itself.
 * The same question without the VM's speed in it ("replay"): the model's
 * state (weights, moving statistics, optimizer state, iteration) is
 * copied after epoch 1's first step and after the last epoch, with the
 * batches of epoch 1's first REPLAY_STEPS steps. After the last epoch,
 * REPLAY_REPS times in alternating order, each state is put back and
 * trains on those batches; the medians of those steps' CPU times give
 * "replay_last_over_first", a state's cost against the other's in the
 * same minutes (each state's losses must repeat bit for bit between its
 * runs where the model has no dropout: "replay_repeats"). Usage:
 *   nnt_bench_epochs CONFIG [EPOCHS] [--synthetic=SAMPLES] [Section.key=value ...]
 * Threads as for the CLI: NNTRAINER_THREADS (run with 1 for the CPU time
 * of every step's work on one thread). */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

#define MAX_EPOCHS 1000
#define MAX_OVERRIDES 64
#define REPLAY_STEPS 6
#define REPLAY_REPS 5

/* Every timed step: its epoch, its CPU and its wall-clock milliseconds. */
typedef struct drift {
  unsigned *epoch;
  double *cpu, *wall;
  size_t n, cap;
  int oom;
  double cpu_prev, wall_prev;
  int have_prev; /* the last callback was a step of this epoch */
  double ref[MAX_EPOCHS]; /* the reference's CPU ms at each epoch's end */
  float *ra, *rb, *rc;    /* its operands */
  /* the replay */
  nnt_model *m;
  unsigned epochs;
  float *state[2];           /* weights then optimizer state: first, last */
  unsigned state_iter[2];
  size_t state_floats, opt_floats;
  float *batch;              /* REPLAY_STEPS batches, inputs then labels */
  size_t batch_floats;       /* one batch's */
  unsigned n_batches;        /* copied */
  double replay_ms[2][REPLAY_REPS * REPLAY_STEPS];
  float replay_loss[2][REPLAY_REPS];
  int replay_rc;             /* an error of the replay (reported in main) */
  nnt_err replay_err;
  int replayed;
} drift;

#define REF_N 256
#define REF_RUNS 9

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median and the mean of epoch ep's steps' values v (scratch: tmp);
 * 0 steps: both 0. */
static size_t epoch_stats(const drift *d, const double *v, unsigned ep, double *tmp,
                          double *median, double *mean) {
  size_t k = 0;
  double sum = 0;
  for (size_t i = 0; i < d->n; i++)
    if (d->epoch[i] == ep)
      tmp[k++] = v[i], sum += v[i];
  *median = *mean = 0;
  if (!k)
    return 0;
  qsort(tmp, k, sizeof *tmp, cmp_double);
  *median = k % 2 ? tmp[k / 2] : (tmp[k / 2 - 1] + tmp[k / 2]) / 2;
  *mean = sum / (double)k;
  return k;
}

static double clock_ms(clockid_t id) {
  struct timespec t;
  clock_gettime(id, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Copy the model's state into (to = 1) or out of the copy k. */
static void state_copy(drift *d, int k, int to) {
  nnt_model *m = d->m;
  float *c = d->state[k];
  if (to) {
    memcpy(c, m->wpool, m->wpool_floats * sizeof *c);
    if (d->opt_floats)
      memcpy(c + m->wpool_floats, m->opt_pool, d->opt_floats * sizeof *c);
    d->state_iter[k] = m->iter;
  } else {
    memcpy(m->wpool, c, m->wpool_floats * sizeof *c);
    if (d->opt_floats)
      memcpy(m->opt_pool, c + m->wpool_floats, d->opt_floats * sizeof *c);
    m->iter = d->state_iter[k];
  }
}

/* After epoch 1's first step: its state, and room for the batches. */
static int replay_begin(drift *d) {
  nnt_model *m = d->m;
  nnt_ds_shape s;
  nnt_model_ds_shape(m, &s);
  size_t n = 0;
  for (unsigned i = 0; i < s.n_in; i++)
    n += s.in_len[i];
  for (unsigned i = 0; i < s.n_label; i++)
    n += s.label_len[i];
  d->batch_floats = n * m->batch;
  d->opt_floats = m->obuf ? m->obuf->size / sizeof(float) : 0;
  d->state_floats = m->wpool_floats + d->opt_floats;
  d->state[0] = malloc(2 * d->state_floats * sizeof(float));
  d->batch = malloc(REPLAY_STEPS * d->batch_floats * sizeof(float));
  if (!d->state[0] || !d->batch)
    return nnt_err_set(&d->replay_err, NNT_ERR_NOMEM, "out of memory for the replay");
  d->state[1] = d->state[0] + d->state_floats;
  state_copy(d, 0, 1);
  return NNT_OK;
}

/* The batch step b (from 1) of epoch 1 trained on, copied. */
static int replay_keep_batch(drift *d, size_t b) {
  nnt_model *m = d->m;
  const float *in[NNT_DS_MAX_STREAMS], *label[NNT_DS_MAX_STREAMS];
  int rc = nnt_dataset_held_batch(nnt_model_dataset(m, NNT_DS_TRAIN), in, label,
                                  &d->replay_err);
  if (rc)
    return rc;
  nnt_ds_shape s;
  nnt_model_ds_shape(m, &s);
  float *p = d->batch + (b - 1) * d->batch_floats;
  for (unsigned i = 0; i < s.n_in; i++, p += s.in_len[i - 1] * m->batch)
    memcpy(p, in[i], s.in_len[i] * m->batch * sizeof *p);
  for (unsigned i = 0; i < s.n_label; i++, p += s.label_len[i - 1] * m->batch)
    memcpy(p, label[i], s.label_len[i] * m->batch * sizeof *p);
  d->n_batches = (unsigned)b;
  return NNT_OK;
}

/* After the last epoch: its state, then each state trains on the batches
 * in turn; the last epoch's state is put back at the end. */
static int replay_run(drift *d) {
  nnt_model *m = d->m;
  nnt_ds_shape s;
  nnt_model_ds_shape(m, &s);
  state_copy(d, 1, 1);
  int rc = NNT_OK;
  for (unsigned r = 0; !rc && r < REPLAY_REPS; r++)
    for (unsigned j = 0; !rc && j < 2; j++) {
      int k = (int)((r + j) % 2); /* first-last, then last-first */
      state_copy(d, k, 0);
      float loss = 0;
      for (unsigned b = 0; !rc && b < d->n_batches; b++) {
        const float *in[NNT_DS_MAX_STREAMS], *label[NNT_DS_MAX_STREAMS];
        const float *p = d->batch + b * d->batch_floats;
        for (unsigned i = 0; i < s.n_in; p += s.in_len[i] * m->batch, i++)
          in[i] = p;
        for (unsigned i = 0; i < s.n_label; p += s.label_len[i] * m->batch, i++)
          label[i] = p;
        double t0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
        float l;
        rc = nnt_model_train_batch(m, NULL, in, label, &l, &d->replay_err);
        d->replay_ms[k][r * d->n_batches + b] = clock_ms(CLOCK_THREAD_CPUTIME_ID) - t0;
        loss += l;
      }
      d->replay_loss[k][r] = loss;
    }
  state_copy(d, 1, 0);
  d->replayed = !rc;
  return rc;
}

/* After every step, and at an epoch's end (after its validation): a step
 * is the time since the callback of the step before it in its epoch. */
static void on_progress(const nnt_progress *p, void *user) {
  drift *d = user;
  double cpu = clock_ms(CLOCK_THREAD_CPUTIME_ID), wall = clock_ms(CLOCK_MONOTONIC);
  if (!d->replay_rc && p->epoch_done && p->epoch == d->epochs && d->n_batches)
    d->replay_rc = replay_run(d);
  if (p->epoch_done) {
    d->have_prev = 0;
    double t[REF_RUNS];
    for (int r = 0; r < REF_RUNS; r++) {
      double t0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, REF_N, REF_N, REF_N, 1.0f, d->ra,
                  REF_N, d->rb, REF_N, 0.0f, d->rc, REF_N);
      t[r] = clock_ms(CLOCK_THREAD_CPUTIME_ID) - t0;
    }
    qsort(t, REF_RUNS, sizeof *t, cmp_double);
    if (p->epoch - 1 < MAX_EPOCHS)
      d->ref[p->epoch - 1] = t[REF_RUNS / 2];
    return;
  }
  if (d->have_prev && d->n == d->cap && !d->oom) {
    size_t cap = d->cap ? 2 * d->cap : 4096;
    unsigned *ep = realloc(d->epoch, cap * sizeof *ep);
    double *c = ep ? realloc(d->cpu, cap * sizeof *c) : NULL;
    double *w = c ? realloc(d->wall, cap * sizeof *w) : NULL;
    if (ep)
      d->epoch = ep;
    if (c)
      d->cpu = c;
    if (w)
      d->wall = w, d->cap = cap;
    else
      d->oom = 1;
  }
  if (d->have_prev && d->n < d->cap) {
    d->epoch[d->n] = p->epoch - 1;
    d->cpu[d->n] = cpu - d->cpu_prev;
    d->wall[d->n++] = wall - d->wall_prev;
  }
  d->cpu_prev = cpu, d->wall_prev = wall;
  d->have_prev = 1;
  if (!d->replay_rc && p->epoch == 1 && p->batch <= REPLAY_STEPS) {
    if (p->batch == 1)
      d->replay_rc = replay_begin(d);
    if (!d->replay_rc)
      d->replay_rc = replay_keep_batch(d, p->batch);
    /* the copies are not the next step's time */
    d->cpu_prev = clock_ms(CLOCK_THREAD_CPUTIME_ID), d->wall_prev = clock_ms(CLOCK_MONOTONIC);
  }
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: nnt_bench_epochs CONFIG [EPOCHS] [--synthetic=SAMPLES] "
                    "[Section.key=value ...]\n");
    return 2;
  }
  int a = 2;
  long epochs = 10;
  if (argc > 2 && argv[2][0] >= '0' && argv[2][0] <= '9')
    epochs = strtol(argv[a++], NULL, 10);
  if (epochs < 2 || epochs > MAX_EPOCHS) {
    fprintf(stderr, "nnt_bench_epochs: EPOCHS must be 2 to %d\n", MAX_EPOCHS);
    return 2;
  }
  unsigned long synthetic = 0;
  char ep[32];
  snprintf(ep, sizeof ep, "Model.epochs=%ld", epochs);
  const char *ov[MAX_OVERRIDES] = {ep, "Model.save_path="};
  int n_ov = 2;
  for (; a < argc; a++) {
    if (!strncmp(argv[a], "--synthetic=", 12)) {
      synthetic = strtoul(argv[a] + 12, NULL, 10);
      if (!synthetic || synthetic > 1u << 30) {
        fprintf(stderr, "nnt_bench_epochs: --synthetic takes 1 to 2^30 samples\n");
        return 2;
      }
    } else if (n_ov < MAX_OVERRIDES) {
      ov[n_ov++] = argv[a];
    } else {
      fprintf(stderr, "nnt_bench_epochs: more than %d overrides\n", MAX_OVERRIDES);
      return 2;
    }
  }
  const char *t = getenv("NNTRAINER_THREADS");
  nnt_err e = {0};
  if (nnt_cpu_set_threads(t ? (unsigned)atoi(t) : 0, &e)) {
    fprintf(stderr, "nnt_bench_epochs: %s\n", e.msg);
    return 1;
  }
  nnt_model *m;
  if (nnt_model_create(&m, &e)) {
    fprintf(stderr, "nnt_bench_epochs: %s\n", e.msg);
    return 1;
  }
  char *copy = strdup(argv[1]);
  int rc = copy ? nnt_model_set_base_dir(m, dirname(copy), &e)
                : nnt_err_set(&e, NNT_ERR_NOMEM, "out of memory");
  free(copy);
  if (!rc)
    rc = nnt_ini_load(m, argv[1], ov, (size_t)n_ov, &e);
  for (int mode = 0; !rc && synthetic && mode < 3; mode++) {
    if (mode != NNT_DS_TRAIN && !nnt_model_dataset(m, mode))
      continue;
    nnt_dataset *ds;
    unsigned long n = mode == NNT_DS_TRAIN ? synthetic : (synthetic / 4 ? synthetic / 4 : 1);
    rc = nnt_dataset_create_synthetic((unsigned)n, 0x5157ULL + (unsigned)mode, &ds, &e);
    if (!rc)
      rc = nnt_model_set_dataset(m, mode, ds, &e);
  }
  if (!rc)
    rc = nnt_model_compile(m, &e);
  if (!rc)
    rc = nnt_model_initialize(m, &e);
  drift *d = rc ? NULL : calloc(1, sizeof *d);
  size_t rn = (size_t)REF_N * REF_N;
  if (d && (d->ra = malloc(3 * rn * sizeof(float)))) {
    d->rb = d->ra + rn, d->rc = d->rb + rn;
    for (size_t i = 0; i < 2 * rn; i++) /* 1/8 to 1: nothing subnormal */
      d->ra[i] = 0.125f + (float)(i % 7) / 8;
  }
  if (!rc && (!d || !d->ra))
    rc = nnt_err_set(&e, NNT_ERR_NOMEM, "out of memory");
  if (!rc)
    d->m = m, d->epochs = (unsigned)epochs;
  if (!rc)
    rc = nnt_model_train(m, on_progress, d, &e);
  if (rc) {
    fprintf(stderr, "nnt_bench_epochs: %s\n", e.msg);
    if (d)
      free(d->epoch), free(d->cpu), free(d->wall), free(d->ra), free(d->state[0]),
          free(d->batch);
    free(d);
    nnt_model_destroy(m);
    return 1;
  }
  size_t n_tmp = d->n > REPLAY_REPS * REPLAY_STEPS ? d->n : REPLAY_REPS * REPLAY_STEPS;
  double *tmp = d->oom ? NULL : malloc(n_tmp * sizeof *tmp);
  double *med = tmp ? calloc((size_t)epochs * 3, sizeof *med) : NULL;
  if (!med) {
    fprintf(stderr, "nnt_bench_epochs: out of memory for the steps' times\n");
    free(tmp);
    rc = 1;
    goto out;
  }
  double *mean = med + epochs, *wmed = mean + epochs, wmean;
  size_t first_steps = 0;
  for (long i = 0; i < epochs; i++) {
    size_t k = epoch_stats(d, d->cpu, (unsigned)i, tmp, &med[i], &mean[i]);
    epoch_stats(d, d->wall, (unsigned)i, tmp, &wmed[i], &wmean);
    if (!i)
      first_steps = k;
    if (!k) {
      fprintf(stderr, "nnt_bench_epochs: epoch %ld has no timed step (an epoch needs 2 "
                      "batches or more: its first is left out)\n", i + 1);
      rc = 1;
    }
  }
  if (d->replay_rc || !d->replayed) {
    fprintf(stderr, "nnt_bench_epochs: replay: %s\n",
            d->replay_rc ? d->replay_err.msg : "epoch 1 gave no batch to replay");
    rc = 1;
  }
  if (!rc) {
    char blas[160];
    nnt_cpu_blas_describe(blas, sizeof blas);
    printf("{\"config\":\"%s\",\"blas\":\"%s\",\"epochs\":%ld,\"steps_per_epoch\":%zu",
           argv[1], blas, epochs, first_steps);
    const char *name[3] = {"cpu_ms_median", "cpu_ms_mean", "wall_ms_median"};
    for (int r = 0; r < 3; r++) {
      printf(",\"%s\":[", name[r]);
      for (long i = 0; i < epochs; i++)
        printf("%s%.4f", i ? "," : "", med[r * epochs + i]);
      printf("]");
    }
    printf(",\"ref_ms\":[");
    for (long i = 0; i < epochs; i++)
      printf("%s%.4f", i ? "," : "", d->ref[i]);
    double norm = d->ref[0] > 0 && d->ref[epochs - 1] > 0
                      ? med[epochs - 1] / d->ref[epochs - 1] / (med[0] / d->ref[0])
                      : 0.0;
    printf("],\"last_over_first\":%.4f,\"normalized\":%.4f", med[epochs - 1] / med[0], norm);
    size_t n = (size_t)REPLAY_REPS * d->n_batches;
    double rmed[2];
    int repeats = 1;
    for (int k = 0; k < 2; k++) {
      memcpy(tmp, d->replay_ms[k], n * sizeof *tmp);
      qsort(tmp, n, sizeof *tmp, cmp_double);
      rmed[k] = n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
      for (int r = 1; r < REPLAY_REPS; r++)
        repeats &= !memcmp(&d->replay_loss[k][r], &d->replay_loss[k][0], sizeof(float));
    }
    printf(",\"replay_steps\":%u,\"replay_reps\":%d,\"replay_first_ms\":%.4f,"
           "\"replay_last_ms\":%.4f,\"replay_last_over_first\":%.4f,\"replay_repeats\":%s}\n",
           d->n_batches, REPLAY_REPS, rmed[0], rmed[1], rmed[1] / rmed[0],
           repeats ? "true" : "false");
  }
  free(tmp), free(med);
out:
  free(d->epoch), free(d->cpu), free(d->wall), free(d->ra), free(d->state[0]), free(d->batch);
  free(d);
  nnt_model_destroy(m);
  return rc;
}
