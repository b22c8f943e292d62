/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mlp_layers.c: the Fashion-MNIST MLP of Applications/FashionMNIST/mlp.ini
 * (784 -> 256 -> 128 -> 100 -> 10, Adam 0.001, batch 64), built layer by
 * layer through the C API, fed by a data generator callback that reads the
 * IDX files itself (fashion_mnist.c) and shuffles the training set every
 * epoch.
 *
 *   capi_mlp [--data DIR] [--train-samples N] [--test-samples N]
 *            [--epochs N] [--save FILE] [--engine cpu|gpu]
 *
 * Defaults: the whole training set (60,000), the whole test set (10,000),
 * 10 epochs, no saving. The test images are the validation set of every
 * epoch (whole batches only: 9,984 of them); the test accuracy at the end
 * is computed on all of them through inference. --save writes the weights
 * for capi_fine_tune --weights. --engine selects where it computes (the
 * compile property engine=...; gpu is Vulkan, docs/gpu.md).
 */
#include <stdio.h>
#include <string.h>

#include <nntrainer.h>
#include <nntrainer-ext.h> /* progress callback and inference: nntrainer's own */

#include "fashion_mnist.h"

/* Create a layer, set its properties (one '|'-separated string) and add it
 * to the model. Once added, the model owns the layer; until then it is
 * ours to destroy. */
static int add_layer(ml_train_model_h model, ml_train_layer_type_e type, const char *props) {
  ml_train_layer_h layer;
  int rc = check(ml_train_layer_create(&layer, type), "ml_train_layer_create");
  if (rc)
    return rc;
  if ((rc = check(ml_train_layer_set_property_with_single_param(layer, props), props)) ||
      (rc = check(ml_train_model_add_layer(model, layer), "ml_train_model_add_layer")))
    check(ml_train_layer_destroy(layer), "ml_train_layer_destroy");
  return rc;
}

/* Called by ml_train_ext_model_run_with_progress() after every batch and at
 * the end of every epoch, in the thread that runs the model. */
static void on_progress(const ml_train_ext_progress_s *p, void *user_data) {
  float *last_valid_accuracy = user_data;
  if (!p->epoch_done)
    return;
  printf("epoch %u/%u  train loss %.4f", p->epoch, p->epochs, p->loss);
  if (p->has_valid) {
    printf("  valid loss %.4f  valid accuracy %.4f", p->valid_loss, p->valid_accuracy);
    *last_valid_accuracy = p->valid_accuracy;
  }
  printf("  %.2f ms/step\n", p->step_ms);
  fflush(stdout);
}

static int usage(void) {
  fprintf(stderr, "usage: capi_mlp [--data DIR] [--train-samples N] [--test-samples N] "
                  "[--epochs N] [--save FILE] [--engine cpu|gpu]\n");
  return 2;
}

int main(int argc, char **argv) {
  const char *data_dir = FASHION_MNIST_DIR, *save = NULL;
  char engine[32] = ""; /* "engine=gpu"; empty: the default (cpu) */
  size_t train_samples = 0, test_samples = 0, epochs = 10; /* 0: all samples */
  for (int i = 1; i < argc; i++) {
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--data") && value)
      data_dir = value;
    else if (!strcmp(argv[i], "--save") && value)
      save = value;
    else if (!strcmp(argv[i], "--engine") && value)
      snprintf(engine, sizeof engine, "engine=%s", value);
    else if (!strcmp(argv[i], "--train-samples")) {
      if (fm_parse_size(argv[i], value, &train_samples))
        return 2;
    } else if (!strcmp(argv[i], "--test-samples")) {
      if (fm_parse_size(argv[i], value, &test_samples))
        return 2;
    } else if (!strcmp(argv[i], "--epochs")) {
      if (fm_parse_size(argv[i], value, &epochs) || epochs == 0)
        return usage();
    } else
      return usage();
    i++;
  }

  fm_set train, test;
  if (fm_load_train_test(data_dir, train_samples, test_samples, &train, &test))
    return 1;

  int rc;
  ml_train_model_h model = NULL;
  ml_train_optimizer_h optimizer = NULL;
  ml_train_dataset_h dataset = NULL;
  float valid_accuracy = 0, test_accuracy = 0;
  char epochs_prop[32];
  double t0;

  /* 1. An empty model. */
  if ((rc = check(ml_train_model_construct(&model), "ml_train_model_construct")))
    goto out;

  /* 2. The layers, in order; each reads the one before it. The properties
   * are the keys of the INI format. The input layer with the variadic form,
   * NULL-ended: */
  ml_train_layer_h input;
  if ((rc = check(ml_train_layer_create(&input, ML_TRAIN_LAYER_TYPE_INPUT), "input layer")))
    goto out;
  if ((rc = check(ml_train_layer_set_property(input, "name=inputlayer", "input_shape=1:1:784",
                                              NULL),
                  "input layer properties")) ||
      (rc = check(ml_train_model_add_layer(model, input), "add the input layer"))) {
    /* not the model's: ours to destroy */
    check(ml_train_layer_destroy(input), "ml_train_layer_destroy");
    goto out;
  }
  /* ...and the others with one '|'-separated string each. `activation`
   * adds an activation layer after the fully connected one. */
  if ((rc = add_layer(model, ML_TRAIN_LAYER_TYPE_FC,
                      "name=fc1 | unit=256 | activation=relu | weight_initializer=he_uniform")) ||
      (rc = add_layer(model, ML_TRAIN_LAYER_TYPE_FC,
                      "name=fc2 | unit=128 | activation=relu | weight_initializer=he_uniform")) ||
      (rc = add_layer(model, ML_TRAIN_LAYER_TYPE_FC,
                      "name=fc3 | unit=100 | activation=relu | weight_initializer=he_uniform")) ||
      (rc = add_layer(model, ML_TRAIN_LAYER_TYPE_FC, "name=output | unit=10 | activation=softmax")))
    goto out;

  /* 3. The optimizer. set_optimizer hands it to the model. */
  if ((rc = check(ml_train_optimizer_create(&optimizer, ML_TRAIN_OPTIMIZER_TYPE_ADAM),
                  "ml_train_optimizer_create")) ||
      (rc = check(ml_train_optimizer_set_property(optimizer, "learning_rate=0.001", NULL),
                  "optimizer properties")) ||
      (rc = check(ml_train_model_set_optimizer(model, optimizer), "ml_train_model_set_optimizer")))
    goto out;
  optimizer = NULL; /* the model's now */

  /* 4. The data: one generator per mode, each with its own user data. */
  if ((rc = check(ml_train_dataset_create(&dataset), "ml_train_dataset_create")) ||
      (rc = check(ml_train_dataset_add_generator(dataset, ML_TRAIN_DATASET_MODE_TRAIN,
                                                 fm_generator, &train),
                  "training generator")) ||
      (rc = check(ml_train_dataset_add_generator(dataset, ML_TRAIN_DATASET_MODE_VALID,
                                                 fm_generator, &test),
                  "validation generator")) ||
      (rc = check(ml_train_dataset_set_property_for_mode(dataset, ML_TRAIN_DATASET_MODE_TRAIN,
                                                         "buffer_size=8", NULL),
                  "dataset properties")) ||
      (rc = check(ml_train_model_set_dataset(model, dataset), "ml_train_model_set_dataset")))
    goto out;
  dataset = NULL; /* the model's now */

  /* 5. Compile with the [Model] properties: the loss (softmax cross-entropy
   * with the softmax above), the batch size, the seed and, when given, the
   * engine (the list ends at the first NULL). */
  if ((rc = check(ml_train_model_compile(model, "loss=cross", "batch_size=64", "seed=1",
                                         engine[0] ? engine : NULL, NULL),
                  "ml_train_model_compile")))
    goto out;

  /* 6. Train; blocks until the last epoch and its validation are done. */
  snprintf(epochs_prop, sizeof epochs_prop, "epochs=%zu", epochs);
  t0 = fm_now();
  if ((rc = check(ml_train_ext_model_run_with_progress(model, on_progress, &valid_accuracy,
                                                       epochs_prop, NULL),
                  "ml_train_ext_model_run_with_progress")))
    goto out;
  printf("trained %zu epochs in %.1f s\n", epochs, fm_now() - t0);

  /* 7. Test: inference on the test set. */
  t0 = fm_now();
  if ((rc = fm_accuracy(model, &test, &test_accuracy)))
    goto out;
  printf("valid accuracy %.4f  test accuracy %.4f (inference: %.2f s)\n", valid_accuracy,
         test_accuracy, fm_now() - t0);

  /* 8. Save the weights (NNTrainer's .bin format) for capi_fine_tune. */
  if (save) {
    if ((rc = check(ml_train_model_save(model, save, ML_TRAIN_MODEL_FORMAT_BIN),
                    "ml_train_model_save")))
      goto out;
    printf("weights saved to %s\n", save);
  }

out:
  /* Destroying the model destroys its layers, optimizer and dataset. What
   * never reached the model is destroyed by us. */
  if (optimizer)
    check(ml_train_optimizer_destroy(optimizer), "ml_train_optimizer_destroy");
  if (dataset)
    check(ml_train_dataset_destroy(dataset), "ml_train_dataset_destroy");
  if (model && check(ml_train_model_destroy(model), "ml_train_model_destroy") && !rc)
    rc = 1;
  /* the generator's sets outlive the model, whose thread read them */
  fm_free(&train);
  fm_free(&test);
  return rc ? 1 : 0;
}
