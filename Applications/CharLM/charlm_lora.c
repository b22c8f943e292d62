/* SPDX-License-Identifier: Apache-2.0 */
/*
 * charlm_lora.c: fine-tuning with LoRA through the C API. A character model
 * trained by `charlm --skip songs-poems --save base.bin lstm.ini` has never
 * seen the fortunes package's songs and poems; here it is adapted to them
 * twice from the same start, and the two are compared:
 *
 *   LoRA: lstm_lora.ini, the same layers with the embedding and the LSTM
 *         frozen and the fully_connected layers given low-rank factors
 *         (lora_rank): only the factors train;
 *   full: the base model's own INI, every weight trains.
 *
 * Both start from the base weights (ml_train_ext_model_copy_layer_weights:
 * a LoRA layer takes the plain layer's weight and bias) and train on the same
 * windows; the program prints, for each, the trainable parameters, the
 * planned training memory (weights, optimizer state, arena), the held-out
 * cross-entropy on songs and poems before and after, and the time. It exits
 * with status 3 when LoRA does not lower the held-out cross-entropy.
 *
 *   charlm_lora [--fortunes DIR] [--target NAME] [--epochs N] [--samples N]
 *               [--held-windows N] [--save FILE] [--engine cpu|gpu]
 *               BASE_CONFIG BASE_WEIGHTS LORA_CONFIG
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nntrainer.h>
#include <nntrainer-ext.h> /* memory report, copying layers, inference: nntrainer's own */

#include "charlm_text.h"
#include "fashion_mnist.h" /* check(), fm_now(), fm_parse_size() */

typedef struct {
  const char *dir, *target, *save, *engine;
  size_t epochs, samples, held_windows;
} options;

static int usage(void) {
  fprintf(stderr, "usage: charlm_lora [--fortunes DIR] [--target NAME] [--epochs N] "
                  "[--samples N] [--held-windows N] [--save FILE] [--engine cpu|gpu] "
                  "BASE_CONFIG BASE_WEIGHTS LORA_CONFIG\n");
  return 2;
}

/* A compiled model of config, training on `feed` (which must outlive it). */
static int build(const char *config, const options *o, cl_feed *feed, ml_train_model_h *out) {
  ml_train_model_h model = NULL;
  ml_train_dataset_h data = NULL;
  int rc;
  if ((rc = check(ml_train_model_construct_with_conf(config, &model), config)) ||
      (rc = check(ml_train_dataset_create(&data), "ml_train_dataset_create")) ||
      (rc = check(ml_train_dataset_add_generator(data, ML_TRAIN_DATASET_MODE_TRAIN, cl_generator,
                                                 feed),
                  "ml_train_dataset_add_generator")))
    goto fail;
  if ((rc = check(ml_train_model_set_dataset(model, data), "ml_train_model_set_dataset")))
    goto fail;
  data = NULL;
  char engine[48] = "";
  if (o->engine)
    snprintf(engine, sizeof engine, "engine=%s", o->engine);
  unsigned batch;
  if ((rc = check(ml_train_model_compile(model, engine[0] ? engine : NULL, NULL),
                  "ml_train_model_compile")) ||
      (rc = cl_model_shape(model, &feed->steps, &batch)))
    goto fail;
  *out = model;
  return 0;
fail:
  if (data)
    ml_train_dataset_destroy(data);
  if (model)
    ml_train_model_destroy(model);
  return rc;
}

/* Adapt a copy of base with config; print what it costs and gives. */
static int adapt(const char *what, const char *config, ml_train_model_h base, const cl_text *train,
                 const cl_text *held, const options *o, const char *save, double *after) {
  cl_feed feed = {.t = train, .samples = o->samples, .rng = 0x9e3779b97f4a7c15ull};
  ml_train_model_h model = NULL;
  char **names = NULL;
  int rc = build(config, o, &feed, &model);
  if (rc)
    return rc;
  ml_train_ext_memory_report_s mem;
  if ((rc = check(ml_train_ext_model_get_layer_names(base, &names), "layer names")) ||
      (rc = check(ml_train_ext_model_copy_layer_weights(model, base, (const char *const *)names),
                  "ml_train_ext_model_copy_layer_weights")) ||
      (rc = check(ml_train_ext_model_get_memory_report(model, ML_TRAIN_EXT_MODE_TRAIN, &mem),
                  "memory report")))
    goto out;
  /* every trainable weight has a gradient of its size */
  printf("%s (%s): %zu trainable parameters; planned for training: weights %.1f KiB, "
         "optimizer state %.1f KiB, arena %.1f KiB, total %.1f KiB\n",
         what, config, mem.gradient_bytes / sizeof(float), mem.weight_bytes / 1024.0,
         mem.optimizer_bytes / 1024.0, mem.arena_bytes / 1024.0, mem.total_bytes / 1024.0);
  char prop[48];
  snprintf(prop, sizeof prop, "epochs=%zu", o->epochs);
  double t0 = fm_now();
  if ((rc = check(ml_train_model_run(model, prop, NULL), "ml_train_model_run")))
    goto out;
  double secs = fm_now() - t0, nats;
  size_t chars;
  if ((rc = cl_cross_entropy(model, held, o->held_windows, &nats, &chars)))
    goto out;
  printf("%s: held-out cross-entropy after adapting %.4f nats/char (%.4f bits/char), "
         "trained in %.1f s\n",
         what, nats, nats / 0.6931471805599453, secs);
  *after = nats;
  if (save && (rc = check(ml_train_model_save(model, save, ML_TRAIN_MODEL_FORMAT_BIN), save)))
    goto out;
out:
  free(names);
  ml_train_model_destroy(model);
  return rc;
}

int main(int argc, char **argv) {
  options o = {.dir = CL_FORTUNES_DIR, .target = "songs-poems", .epochs = 2, .samples = 2048};
  const char *pos[3] = {NULL, NULL, NULL};
  size_t npos = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--fortunes") && v)
      o.dir = argv[++i];
    else if (!strcmp(a, "--target") && v)
      o.target = argv[++i];
    else if (!strcmp(a, "--save") && v)
      o.save = argv[++i];
    else if (!strcmp(a, "--engine") && v)
      o.engine = argv[++i];
    else if ((!strcmp(a, "--epochs") || !strcmp(a, "--samples") || !strcmp(a, "--held-windows")) &&
             v) {
      size_t *to = !strcmp(a, "--epochs") ? &o.epochs
                   : !strcmp(a, "--samples") ? &o.samples
                                             : &o.held_windows;
      if (fm_parse_size(a, v, to))
        return 2;
      i++;
    } else if (a[0] != '-' && npos < 3)
      pos[npos++] = a;
    else
      return usage();
  }
  if (npos != 3 || !o.epochs || !o.samples)
    return usage();

  const char *only[] = {o.target, NULL};
  cl_text train, held;
  if (cl_load(o.dir, only, NULL, 10, &train, &held))
    return 1;
  printf("task: %s, %zu training and %zu held-out characters\n", o.target, train.len, held.len);

  cl_feed unused = {.t = &train, .samples = o.samples, .rng = 1};
  ml_train_model_h base = NULL;
  int rc = build(pos[0], &o, &unused, &base);
  double nats = 0;
  size_t chars;
  if (!rc && !(rc = check(ml_train_model_load(base, pos[1], ML_TRAIN_MODEL_FORMAT_BIN), pos[1])) &&
      !(rc = cl_cross_entropy(base, &held, o.held_windows, &nats, &chars)))
    printf("base model (%s): held-out cross-entropy %.4f nats/char (%.4f bits/char) over %zu "
           "characters\n",
           pos[1], nats, nats / 0.6931471805599453, chars);
  double lora = 0, full = 0;
  if (!rc)
    rc = adapt("LoRA", pos[2], base, &train, &held, &o, o.save, &lora);
  if (!rc)
    rc = adapt("full fine-tuning", pos[0], base, &train, &held, &o, NULL, &full);
  if (!rc && !(lora < nats)) {
    /* the point of the example: the test suite runs it */
    fprintf(stderr, "error: LoRA did not adapt the model: held-out cross-entropy %.4f, the "
                    "base's %.4f\n", lora, nats);
    rc = 3;
  }
  if (base)
    ml_train_model_destroy(base);
  cl_text_free(&train);
  cl_text_free(&held);
  return rc == 3 ? 3 : rc ? 1 : 0;
}
