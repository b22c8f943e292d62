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
 * the training itself. Usage:
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

/* After every step, and at an epoch's end (after its validation): a step
 * is the time since the callback of the step before it in its epoch. */
static void on_progress(const nnt_progress *p, void *user) {
  drift *d = user;
  double cpu = clock_ms(CLOCK_THREAD_CPUTIME_ID), wall = clock_ms(CLOCK_MONOTONIC);
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
    rc = nnt_model_train(m, on_progress, d, &e);
  if (rc) {
    fprintf(stderr, "nnt_bench_epochs: %s\n", e.msg);
    if (d)
      free(d->epoch), free(d->cpu), free(d->wall), free(d->ra);
    free(d);
    nnt_model_destroy(m);
    return 1;
  }
  double *tmp = d->oom ? NULL : malloc((d->n ? d->n : 1) * sizeof *tmp);
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
    printf("],\"last_over_first\":%.4f,\"normalized\":%.4f}\n", med[epochs - 1] / med[0],
           norm);
  }
  free(tmp), free(med);
out:
  free(d->epoch), free(d->cpu), free(d->wall), free(d->ra);
  free(d);
  nnt_model_destroy(m);
  return rc;
}
