/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fine_tune.c: transfer learning through the C API. The feature layers of
 * the Fashion-MNIST MLP (fc1, fc2, fc3) are trained on the 10 classes, then
 * frozen and reused under a new head for another task: clothing, footwear
 * or bag (3 classes).
 *
 *   phase 1: train the base model (features + a 10-class output) and save
 *           its weights; with --weights FILE, build the base model and
 *           load FILE into it instead;
 *   phase 2: build features (trainable=false) + a 3-class head, copy the
 *           features' weights from the base model with
 *           ml_train_ext_model_copy_layer_weights(), train: only the head
 *           learns. Check with ml_train_model_get_weight() that the features
 *           did not change and the head did; save the result.
 *
 *   capi_fine_tune [--data DIR] [--weights FILE] [--base-out FILE] [--out FILE]
 *                  [--train-samples N] [--test-samples N]
 *                  [--base-epochs N] [--epochs N] [--engine cpu|gpu]
 *
 * --weights takes the file that `capi_mlp --save FILE` writes (the same
 * model as the base). Defaults: all samples, 2 base epochs, 2 head epochs,
 * base weights to fine_tune_base.bin and the result to fine_tune_head.bin
 * in the current folder. --engine selects where both models compute, as a
 * compile property (engine=gpu: Vulkan, docs/gpu.md).
 *
 * A weight file in NNTrainer's .bin format holds the weights in graph order
 * and no names, so ml_train_model_load() takes only a file of the model's
 * own shape (the base model's file does not fit the 3-class model, and is
 * refused). Layers move between models of different shapes by name, with
 * their shapes checked: ml_train_ext_model_copy_layer_weights() (nntrainer's
 * own; see docs/capi.md).
 */
#include <stdio.h>
#include <string.h>

#include <nntrainer.h>
#include <nntrainer-ext.h> /* inference (for accuracy), copying layers: nntrainer's own */

#include "fashion_mnist.h"

/* NULL-ended, as ml_train_ext_model_copy_layer_weights() takes them */
static const char *const features[] = {"fc1", "fc2", "fc3", NULL};
#define N_FEATURES 3

/* The new task: T-shirt, trouser, pullover, dress, coat and shirt are
 * clothing (0); sandal, sneaker and ankle boot footwear (1); bag is 2. */
static const unsigned char coarse_class[FM_CLASSES] = {0, 0, 0, 0, 0, 1, 0, 1, 2, 1};
#define COARSE_CLASSES 3

static int add_layer(ml_train_model_h model, ml_train_layer_type_e type, const char *props) {
  ml_train_layer_h layer;
  int rc = check(ml_train_layer_create(&layer, type), "ml_train_layer_create");
  if (rc)
    return rc;
  if ((rc = check(ml_train_layer_set_property_with_single_param(layer, props), props)) ||
      (rc = check(ml_train_model_add_layer(model, layer), "ml_train_model_add_layer")))
    /* not in the model: ours to destroy */
    check(ml_train_layer_destroy(layer), "ml_train_layer_destroy");
  return rc;
}

/* Build and compile features + head: the MLP of mlp.ini with a head of
 * head_units named head_name, Adam, the set as training data, on engine
 * ("engine=gpu"; NULL: the default). */
static int build(ml_train_model_h *out, bool freeze_features, const char *head_name,
                 unsigned head_units, fm_set *train, const char *engine) {
  ml_train_model_h model;
  ml_train_optimizer_h optimizer = NULL;
  ml_train_dataset_h dataset = NULL;
  const char *trainable = freeze_features ? "false" : "true";
  char props[256];
  int rc;
  if ((rc = check(ml_train_model_construct(&model), "ml_train_model_construct")))
    return rc;
  if ((rc = add_layer(model, ML_TRAIN_LAYER_TYPE_INPUT, "name=inputlayer | input_shape=1:1:784")))
    goto fail;
  static const unsigned units[N_FEATURES] = {256, 128, 100};
  for (unsigned i = 0; i < N_FEATURES; i++) {
    /* trainable=false freezes a layer: no gradient, no update */
    snprintf(props, sizeof props,
             "name=%s | unit=%u | activation=relu | weight_initializer=he_uniform | trainable=%s",
             features[i], units[i], trainable);
    if ((rc = add_layer(model, ML_TRAIN_LAYER_TYPE_FC, props)))
      goto fail;
  }
  snprintf(props, sizeof props, "name=%s | unit=%u | activation=softmax", head_name, head_units);
  if ((rc = add_layer(model, ML_TRAIN_LAYER_TYPE_FC, props)))
    goto fail;

  if ((rc = check(ml_train_optimizer_create(&optimizer, ML_TRAIN_OPTIMIZER_TYPE_ADAM),
                  "ml_train_optimizer_create")) ||
      (rc = check(ml_train_optimizer_set_property(optimizer, "learning_rate=0.001", NULL),
                  "optimizer properties")) ||
      (rc = check(ml_train_model_set_optimizer(model, optimizer), "ml_train_model_set_optimizer")))
    goto fail;
  optimizer = NULL; /* the model's now */

  if ((rc = check(ml_train_dataset_create(&dataset), "ml_train_dataset_create")) ||
      (rc = check(ml_train_dataset_add_generator(dataset, ML_TRAIN_DATASET_MODE_TRAIN,
                                                 fm_generator, train),
                  "training generator")) ||
      (rc = check(ml_train_model_set_dataset(model, dataset), "ml_train_model_set_dataset")))
    goto fail;
  dataset = NULL;

  if ((rc = check(ml_train_model_compile(model, "loss=cross", "batch_size=64", "seed=1", engine,
                                         NULL),
                  "ml_train_model_compile")))
    goto fail;
  *out = model;
  return ML_ERROR_NONE;
fail:
  if (optimizer)
    check(ml_train_optimizer_destroy(optimizer), "ml_train_optimizer_destroy");
  if (dataset)
    check(ml_train_dataset_destroy(dataset), "ml_train_dataset_destroy");
  check(ml_train_model_destroy(model), "ml_train_model_destroy");
  return rc;
}

static int run_epochs(ml_train_model_h model, size_t epochs) {
  char prop[32];
  snprintf(prop, sizeof prop, "epochs=%zu", epochs);
  double t0 = fm_now();
  int rc = check(ml_train_model_run(model, prop, NULL), "ml_train_model_run");
  if (!rc)
    printf("  trained %zu epoch(s) in %.1f s\n", epochs, fm_now() - t0);
  return rc;
}

/* A copy of a layer's weights (weight and bias) and their shapes. */
typedef struct {
  ml_tensors_data_h data;
  ml_tensors_info_h info;
} weights_s;

static int get_weights(ml_train_model_h model, const char *layer, weights_s *w) {
  char what[64];
  snprintf(what, sizeof what, "ml_train_model_get_weight(%s)", layer);
  return check(ml_train_model_get_weight(model, layer, &w->data, &w->info), what);
}

static void free_weights(weights_s *w) {
  if (w->data)
    check(ml_tensors_data_destroy(w->data), "ml_tensors_data_destroy");
  if (w->info)
    check(ml_tensors_info_destroy(w->info), "ml_tensors_info_destroy");
  w->data = w->info = NULL;
}

/* *same: whether two copies of a layer's weights are bitwise equal. */
static int weights_same(const weights_s *a, const weights_s *b, bool *same) {
  unsigned count;
  int rc = check(ml_tensors_info_get_count(a->info, &count), "ml_tensors_info_get_count");
  *same = true;
  for (unsigned i = 0; !rc && i < count && *same; i++) {
    void *pa, *pb;
    size_t na, nb;
    if ((rc = check(ml_tensors_data_get_tensor_data(a->data, i, &pa, &na), "weight data")) ||
        (rc = check(ml_tensors_data_get_tensor_data(b->data, i, &pb, &nb), "weight data")))
      break;
    *same = na == nb && !memcmp(pa, pb, na);
  }
  return rc;
}

static int usage(void) {
  fprintf(stderr, "usage: capi_fine_tune [--data DIR] [--weights FILE] [--base-out FILE] "
                  "[--out FILE] [--train-samples N] [--test-samples N] [--base-epochs N] "
                  "[--epochs N] [--engine cpu|gpu]\n");
  return 2;
}

int main(int argc, char **argv) {
  const char *data_dir = FASHION_MNIST_DIR, *weights = NULL;
  const char *base_out = "fine_tune_base.bin", *out_path = "fine_tune_head.bin";
  size_t train_samples = 0, test_samples = 0, base_epochs = 2, epochs = 2;
  char engine_prop[32] = "";
  for (int i = 1; i < argc; i++) {
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    size_t *number = NULL;
    if (!value)
      return usage();
    if (!strcmp(argv[i], "--data"))
      data_dir = value;
    else if (!strcmp(argv[i], "--weights"))
      weights = value;
    else if (!strcmp(argv[i], "--base-out"))
      base_out = value;
    else if (!strcmp(argv[i], "--out"))
      out_path = value;
    else if (!strcmp(argv[i], "--engine"))
      snprintf(engine_prop, sizeof engine_prop, "engine=%s", value);
    else if (!strcmp(argv[i], "--train-samples"))
      number = &train_samples;
    else if (!strcmp(argv[i], "--test-samples"))
      number = &test_samples;
    else if (!strcmp(argv[i], "--base-epochs"))
      number = &base_epochs;
    else if (!strcmp(argv[i], "--epochs"))
      number = &epochs;
    else
      return usage();
    if (number && fm_parse_size(argv[i], value, number))
      return 2;
    if ((number == &base_epochs || number == &epochs) && *number == 0)
      return usage(); /* samples 0 means all; epochs must be positive */
    i++;
  }

  fm_set train, test;
  if (fm_load_train_test(data_dir, train_samples, test_samples, &train, &test))
    return 1;

  int rc = ML_ERROR_NONE, violated = 0;
  ml_train_model_h base = NULL, model = NULL;
  weights_s before[N_FEATURES + 1] = {{0}}, after[N_FEATURES + 1] = {{0}};
  float accuracy;

  /* ---- phase 1: the base model, 10 classes: trained, or from a file ---- */
  printf("phase 1: base model (features + 10-class output)\n");
  const char *engine = engine_prop[0] ? engine_prop : NULL;
  if ((rc = build(&base, false, "output", FM_CLASSES, &train, engine)))
    goto out;
  if (weights) {
    /* the file must be one of this model's: other shapes are refused */
    if ((rc = check(ml_train_model_load(base, weights, ML_TRAIN_MODEL_FORMAT_BIN),
                    "ml_train_model_load")))
      goto out;
    printf("  base weights loaded from %s\n", weights);
  } else {
    if ((rc = run_epochs(base, base_epochs)))
      goto out;
    if ((rc = check(ml_train_model_save(base, base_out, ML_TRAIN_MODEL_FORMAT_BIN),
                    "ml_train_model_save")))
      goto out;
    printf("  base weights saved to %s\n", base_out);
  }
  if ((rc = fm_accuracy(base, &test, &accuracy)))
    goto out;
  printf("  base test accuracy (10 classes) %.4f\n", accuracy);

  /* ---- phase 2: frozen features, a new head for 3 classes ---- */
  printf("phase 2: frozen features + 3-class head\n");
  train.class_map = test.class_map = coarse_class;
  train.classes = test.classes = COARSE_CLASSES;
  train.next = 0; /* the generator starts phase 2 at a set's beginning */
  if ((rc = build(&model, true, "head", COARSE_CLASSES, &train, engine)))
    goto out;
  /* after compile (the weights exist from compile on): the features by
   * name, their shapes checked; the head keeps its initialization */
  if ((rc = check(ml_train_ext_model_copy_layer_weights(model, base, features),
                  "ml_train_ext_model_copy_layer_weights")))
    goto out;
  rc = check(ml_train_model_destroy(base), "ml_train_model_destroy");
  base = NULL;
  if (rc)
    goto out;
  for (unsigned i = 0; i < N_FEATURES; i++)
    if ((rc = get_weights(model, features[i], &before[i])))
      goto out;
  if ((rc = get_weights(model, "head", &before[N_FEATURES])) ||
      (rc = fm_accuracy(model, &test, &accuracy)))
    goto out;
  printf("  test accuracy (3 classes) before training the head %.4f\n", accuracy);

  if ((rc = run_epochs(model, epochs)) || (rc = fm_accuracy(model, &test, &accuracy)))
    goto out;
  printf("  test accuracy (3 classes) after training the head  %.4f\n", accuracy);

  /* The frozen layers must be as loaded; the head must have learned. */
  for (unsigned i = 0; i <= N_FEATURES; i++) {
    const char *name = i < N_FEATURES ? features[i] : "head";
    bool same;
    if ((rc = get_weights(model, name, &after[i])) ||
        (rc = weights_same(&before[i], &after[i], &same)))
      goto out;
    bool ok = i < N_FEATURES ? same : !same;
    printf("  %-4s %-9s %s\n", name, same ? "unchanged" : "changed",
           ok ? "(as expected)" : "(WRONG)");
    violated |= !ok;
  }

  if ((rc = check(ml_train_model_save(model, out_path, ML_TRAIN_MODEL_FORMAT_BIN),
                  "ml_train_model_save")))
    goto out;
  printf("  fine-tuned weights saved to %s\n", out_path);

out:
  for (unsigned i = 0; i <= N_FEATURES; i++) {
    free_weights(&before[i]);
    free_weights(&after[i]);
  }
  if (model && check(ml_train_model_destroy(model), "ml_train_model_destroy") && !rc)
    rc = 1;
  if (base && check(ml_train_model_destroy(base), "ml_train_model_destroy") && !rc)
    rc = 1;
  fm_free(&train);
  fm_free(&test);
  if (violated)
    fprintf(stderr, "error: the frozen layers changed or the head did not\n");
  return rc || violated ? 1 : 0;
}
