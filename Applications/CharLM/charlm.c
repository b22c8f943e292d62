/* SPDX-License-Identifier: Apache-2.0 */
/*
 * charlm.c: a character-level language model trained on real English text,
 * the quotes of Debian's fortunes package, through the C API. The model
 * comes from an INI file (lstm.ini: embedding -> LSTM -> fully_connected;
 * transformer.ini: embedding + positional encoding -> causal self-attention
 * blocks), takes batch:1:1:T character ids and predicts the next character
 * at every position (batch:1:T:96 probabilities, cross-entropy loss).
 *
 *   charlm [--fortunes DIR] [--epochs N] [--samples N] [--held-windows N]
 *          [--load FILE] [--save FILE] [--generate N] [--temperature X]
 *          [--seed N] [--skip NAMES] [--expect-below X] [--engine cpu|gpu] CONFIG
 *
 * Every 10th quote is held out; after training the program reports the
 * cross-entropy per character on the held-out text (nats and bits; a model
 * that knows nothing scores ln 96 = 4.56 nats) and samples a few lines.
 * --samples: training windows per epoch (default 4096); --held-windows:
 * held-out windows scored (default 0: all); --load FILE: start from these
 * weights (with --epochs 0: evaluate and sample only); --save FILE: write
 * the trained weights (NNTrainer's .bin format); --skip a,b: leave out
 * these fortune files (the LoRA example adapts a model to one it never saw);
 * --expect-below X: exit with status 3 when the held-out cross-entropy after
 * training is not below X nats (the test suite's check that it learns).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nntrainer.h>
#include <nntrainer-ext.h> /* progress callback: nntrainer's own */

#include "charlm_text.h"
#include "fashion_mnist.h" /* check(), fm_now(), fm_parse_size() */

typedef struct {
  unsigned steps;
} progress_ctx;

static void on_progress(const ml_train_ext_progress_s *p, void *user_data) {
  const progress_ctx *c = user_data;
  if (!p->epoch_done)
    return;
  /* the loss is the batch mean of the sum over the window's positions */
  printf("epoch %u/%u  train cross-entropy %.4f nats/char  %.2f ms/step\n", p->epoch, p->epochs,
         p->loss / c->steps, p->step_ms);
  fflush(stdout);
}

static int usage(void) {
  fprintf(stderr, "usage: charlm [--fortunes DIR] [--epochs N] [--samples N] [--held-windows N] "
                  "[--load FILE] [--save FILE] [--generate N] [--temperature X] [--seed N] "
                  "[--skip NAMES] [--expect-below X] [--engine cpu|gpu] CONFIG\n");
  return 2;
}

static int report(ml_train_model_h model, const cl_text *held, size_t windows, const char *when,
                  double *out) {
  double nats;
  size_t chars;
  double t0 = fm_now();
  int rc = cl_cross_entropy(model, held, windows, &nats, &chars);
  if (!rc)
    printf("%s: held-out cross-entropy %.4f nats/char (%.4f bits/char) over %zu characters "
           "(%.1f s)\n",
           when, nats, nats / 0.6931471805599453, chars, fm_now() - t0);
  if (!rc && out)
    *out = nats;
  return rc;
}

int main(int argc, char **argv) {
  const char *dir = CL_FORTUNES_DIR, *config = NULL, *load = NULL, *save = NULL;
  char engine[32] = "";
  size_t epochs = (size_t)-1, samples = 4096, held_windows = 0, generate = 300, seed = 7;
  double temperature = 0.8, expect_below = 0;
  char skip_buf[1024] = "";
  const char *skip[64] = {NULL};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--fortunes") && v)
      dir = argv[++i];
    else if (!strcmp(a, "--load") && v)
      load = argv[++i];
    else if (!strcmp(a, "--save") && v)
      save = argv[++i];
    else if (!strcmp(a, "--engine") && v) {
      snprintf(engine, sizeof engine, "engine=%s", v);
      i++;
    } else if (!strcmp(a, "--skip") && v) {
      /* a comma-separated list of file names */
      snprintf(skip_buf, sizeof skip_buf, "%s", v);
      size_t n = 0;
      for (char *tok = strtok(skip_buf, ","); tok && n + 1 < 64; tok = strtok(NULL, ","))
        skip[n++] = tok;
      i++;
    } else if ((!strcmp(a, "--temperature") || !strcmp(a, "--expect-below")) && v) {
      char *end;
      double x = strtod(v, &end);
      if (*end || !(x > 0)) {
        fprintf(stderr, "error: %s needs a positive number, not '%s'\n", a, v);
        return 2;
      }
      *(!strcmp(a, "--temperature") ? &temperature : &expect_below) = x;
      i++;
    } else if ((!strcmp(a, "--epochs") || !strcmp(a, "--samples") ||
                !strcmp(a, "--held-windows") || !strcmp(a, "--generate") ||
                !strcmp(a, "--seed")) && v) {
      size_t *to = !strcmp(a, "--epochs")    ? &epochs
                   : !strcmp(a, "--samples") ? &samples
                   : !strcmp(a, "--generate") ? &generate
                   : !strcmp(a, "--seed")    ? &seed
                                              : &held_windows;
      if (fm_parse_size(a, v, to))
        return 2;
      i++;
    } else if (a[0] != '-' && !config)
      config = a;
    else
      return usage();
  }
  if (!config || !samples || !seed)
    return usage();

  cl_text train, held;
  if (cl_load(dir, cl_fortune_files, skip, 10, &train, &held))
    return 1;
  printf("text: %zu training and %zu held-out characters from %s\n", train.len, held.len, dir);

  ml_train_model_h model = NULL;
  ml_train_dataset_h data = NULL;
  int rc;
  unsigned steps = 0, batch = 0;
  /* the generator reads feed.steps only when training runs, after compile */
  cl_feed feed = {.t = &train, .samples = samples, .rng = 0x9e3779b97f4a7c15ull ^ seed};
  if ((rc = check(ml_train_model_construct_with_conf(config, &model), config)) ||
      (rc = check(ml_train_dataset_create(&data), "ml_train_dataset_create")) ||
      (rc = check(ml_train_dataset_add_generator(data, ML_TRAIN_DATASET_MODE_TRAIN, cl_generator,
                                                 &feed),
                  "ml_train_dataset_add_generator")))
    goto out;
  if ((rc = check(ml_train_model_set_dataset(model, data), "ml_train_model_set_dataset")))
    goto out;
  data = NULL; /* the model owns it now */
  if ((rc = check(ml_train_model_compile(model, engine[0] ? engine : NULL, NULL),
                  "ml_train_model_compile")) ||
      (rc = cl_model_shape(model, &steps, &batch)))
    goto out;
  feed.steps = steps;
  if (load && (rc = check(ml_train_model_load(model, load, ML_TRAIN_MODEL_FORMAT_BIN), load)))
    goto out;
  printf("model %s: windows of %u characters, batch %u\n", config, steps, batch);

  double after = 0;
  if ((rc = report(model, &held, held_windows, "before training", NULL)))
    goto out;
  if (epochs) {
    char prop[64] = "";
    if (epochs != (size_t)-1)
      snprintf(prop, sizeof prop, "epochs=%zu", epochs);
    progress_ctx pc = {steps};
    double t0 = fm_now();
    if ((rc = check(ml_train_ext_model_run_with_progress(model, on_progress, &pc,
                                                         prop[0] ? prop : NULL, NULL),
                    "ml_train_ext_model_run_with_progress")))
      goto out;
    printf("training took %.1f s\n", fm_now() - t0);
  }
  if ((rc = report(model, &held, held_windows, "after training", &after)))
    goto out;
  if (expect_below > 0 && !(after < expect_below)) {
    fprintf(stderr, "error: held-out cross-entropy %.4f nats/char is not below %.4f\n", after,
            expect_below);
    rc = 3;
    goto out;
  }
  if (save && (rc = check(ml_train_model_save(model, save, ML_TRAIN_MODEL_FORMAT_BIN), save)))
    goto out;
  if (generate) {
    static const char *const prompts[] = {"The ", "A man ", "Life is "};
    uint64_t rng = 0x2545f4914f6cdd1dull ^ seed;
    for (size_t k = 0; k < sizeof prompts / sizeof *prompts && !rc; k++) {
      printf("--- sample %zu (temperature %.2f) ---\n", k + 1, temperature);
      rc = cl_sample(model, prompts[k], generate / 3, temperature, &rng);
    }
  }
out:
  if (data)
    ml_train_dataset_destroy(data);
  if (model)
    ml_train_model_destroy(model);
  cl_text_free(&train);
  cl_text_free(&held);
  return rc == 3 ? 3 : rc ? 1 : 0;
}
