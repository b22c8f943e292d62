/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mlp_ini.c: a model from an INI file (NNTrainer's format) through the C
 * API: construct it from the file, compile, print its summary, train.
 * The file gives the layers, the optimizer, the datasets and the [Model]
 * properties; run() may override [Model] properties such as epochs.
 *
 *   capi_mlp_ini [--epochs N] [--save FILE] [--engine cpu|gpu] [CONFIG]
 *
 * CONFIG defaults to Applications/FashionMNIST/mlp.ini of the source tree.
 * Without --save the weights go to the file's save_path (relative paths in
 * the INI resolve against its folder); --save FILE overrides it. --engine
 * selects where it computes, as a compile property (engine=gpu: Vulkan).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nntrainer.h>
#include <nntrainer-ext.h> /* progress callback: nntrainer's own */

#include "fashion_mnist.h" /* check(), fm_now(), fm_parse_size() */

#ifndef MLP_INI
#define MLP_INI "Applications/FashionMNIST/mlp.ini"
#endif

static void on_progress(const ml_train_ext_progress_s *p, void *user_data) {
  (void)user_data;
  if (!p->epoch_done)
    return;
  printf("epoch %u/%u  train loss %.4f", p->epoch, p->epochs, p->loss);
  if (p->has_valid)
    printf("  valid loss %.4f  valid accuracy %.4f", p->valid_loss, p->valid_accuracy);
  printf("  %.2f ms/step\n", p->step_ms);
  fflush(stdout);
}

static int usage(void) {
  fprintf(stderr, "usage: capi_mlp_ini [--epochs N] [--save FILE] [--engine cpu|gpu] [CONFIG]\n");
  return 2;
}

int main(int argc, char **argv) {
  const char *config = MLP_INI, *save = NULL;
  char engine[32] = ""; /* "engine=gpu"; empty: as the file says */
  size_t epochs = 0; /* 0: as the file says */
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--epochs") && i + 1 < argc) {
      if (fm_parse_size(argv[i], argv[i + 1], &epochs) || epochs == 0)
        return usage();
      i++;
    } else if (!strcmp(argv[i], "--save") && i + 1 < argc) {
      save = argv[++i];
    } else if (!strcmp(argv[i], "--engine") && i + 1 < argc) {
      snprintf(engine, sizeof engine, "engine=%s", argv[++i]);
    } else if (argv[i][0] == '-') {
      return usage();
    } else {
      config = argv[i];
    }
  }

  int rc;
  ml_train_model_h model = NULL;
  char *summary = NULL;
  char overrides[4200] = "";
  double t0;

  /* 1. The model, its layers, optimizer and datasets, from the file. On
   * failure there is nothing to destroy, and ml_error() names the file,
   * the section and the key. */
  if ((rc = check(ml_train_model_construct_with_conf(config, &model),
                  "ml_train_model_construct_with_conf")))
    return 1;

  /* 2. Compile: no properties beyond the file's but the engine, when given
   * (the list is NULL-ended). */
  if ((rc = check(ml_train_model_compile(model, engine[0] ? engine : NULL, NULL),
                  "ml_train_model_compile")))
    goto out;

  /* 3. The summary: one line per layer. The text is ours to free. */
  if ((rc = check(ml_train_model_get_summary(model, ML_TRAIN_SUMMARY_MODEL, &summary),
                  "ml_train_model_get_summary")))
    goto out;
  printf("%s\n", summary);
  free(summary);

  /* 4. Train, overriding [Model] properties: "epochs=2 | save_path=x.bin"
   * in one string says the same as "epochs=2", "save_path=x.bin". */
  if (epochs)
    snprintf(overrides, sizeof overrides, "epochs=%zu", epochs);
  if (save) {
    size_t n = strlen(overrides);
    snprintf(overrides + n, sizeof overrides - n, "%ssave_path=%s", n ? " | " : "", save);
  }
  printf("training %s%s%s\n", config, overrides[0] ? " with " : "", overrides);
  t0 = fm_now();
  if ((rc = check(ml_train_ext_model_run_with_progress(model, on_progress, NULL,
                                                       overrides[0] ? overrides : NULL, NULL),
                  "ml_train_ext_model_run_with_progress")))
    goto out;
  printf("trained in %.1f s\n", fm_now() - t0);
  if (save)
    printf("weights saved to %s\n", save);
  else
    printf("weights saved to the save_path of %s (relative to its folder)\n", config);

out:
  if (check(ml_train_model_destroy(model), "ml_train_model_destroy") && !rc)
    rc = 1;
  return rc ? 1 : 0;
}
