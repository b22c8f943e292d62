/* Helpers shared by the C API tests. */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

#include "capi_harness.h"
#include "api/src/api_internal.h"

/* Every kind of handle is gone. */
void assert_no_handles(void) {
  for (int k = NNT_H_MODEL; k <= NNT_H_TENSORS_DATA; k++)
    if (nnt_h_count((nnt_hkind)k))
      fail_msg("%zu live handles of kind %d", nnt_h_count((nnt_hkind)k), k);
}

/* The last error's message contains needle. */
void assert_error(const char *needle) {
  const char *m = ml_error();
  if (!m)
    fail_msg("expected an error message containing '%s', got none", needle);
  tu_assert_contains(m, needle);
}

int gen_cb(float **input, float **label, bool *last, void *ud) {
  gen *g = ud;
  if (g->fail_at >= 0 && g->given == (unsigned)g->fail_at)
    return g->fail_code;
  float s[3] = {0, 0, 0};
  for (int i = 0; i < 8; i++) {
    input[0][i] = nnt_rng_uniform(&g->rng) * 2 - 1;
    s[i % 3] += input[0][i];
  }
  int best = s[1] > s[0] ? 1 : 0;
  best = s[2] > s[best] ? 2 : best;
  for (int k = 0; k < 3; k++)
    label[0][k] = k == best ? 1.0f : 0.0f;
  g->given++;
  /* last comes with the last sample, as in NNTrainer */
  *last = false;
  if (g->given == g->samples && !(g->never_last_after_first && g->epochs_done)) {
    *last = true;
    g->given = 0;
    g->epochs_done++;
  }
  return 0;
}

void gen_init(gen *g, unsigned samples, uint64_t seed) {
  memset(g, 0, sizeof *g);
  g->samples = samples;
  g->fail_at = -1;
  nnt_rng_seed(&g->rng, seed);
}

/* A model built through the API: input 1:1:8, fc 16 relu, fc 3 softmax,
 * adam with an exponential scheduler, generators for train and valid. */

void build(built *b, int memopt) {
  gen_init(&b->train, 256, 1);
  gen_init(&b->valid, 64, 2);
  OK(ml_train_model_construct(&b->model));
  OK(ml_train_layer_create(&b->in, ML_TRAIN_LAYER_TYPE_INPUT));
  OK(ml_train_layer_set_property(b->in, "name=in", "input_shape=1:1:8", NULL));
  OK(ml_train_layer_create(&b->fc1, ML_TRAIN_LAYER_TYPE_FC));
  /* several properties in one string, separated by '|' */
  OK(ml_train_layer_set_property(b->fc1, "name = fc1 | unit = 16", "activation=relu",
                                 "weight_initializer=he_uniform", NULL));
  OK(ml_train_layer_create(&b->out, ML_TRAIN_LAYER_TYPE_FC));
  OK(ml_train_layer_set_property_with_single_param(b->out, "name=out|unit=3|activation=softmax"));
  OK(ml_train_model_add_layer(b->model, b->in));
  OK(ml_train_model_add_layer(b->model, b->fc1));
  OK(ml_train_model_add_layer(b->model, b->out));
  OK(ml_train_optimizer_create(&b->opt, ML_TRAIN_OPTIMIZER_TYPE_ADAM));
  OK(ml_train_optimizer_set_property(b->opt, "learning_rate=0.02", "beta1=0.9", NULL));
  OK(ml_train_lr_scheduler_create(&b->lrs, ML_TRAIN_LR_SCHEDULER_TYPE_EXPONENTIAL));
  OK(ml_train_lr_scheduler_set_property(b->lrs, "learning_rate=0.02", "decay_rate=0.5",
                                        "decay_steps=64", NULL));
  OK(ml_train_optimizer_set_lr_scheduler(b->opt, b->lrs));
  OK(ml_train_model_set_optimizer(b->model, b->opt));
  OK(ml_train_dataset_create(&b->ds));
  OK(ml_train_dataset_add_generator(b->ds, ML_TRAIN_DATASET_MODE_TRAIN, gen_cb, &b->train));
  OK(ml_train_dataset_add_generator(b->ds, ML_TRAIN_DATASET_MODE_VALID, gen_cb, &b->valid));
  OK(ml_train_dataset_set_property_for_mode(b->ds, ML_TRAIN_DATASET_MODE_TRAIN, "buffer_size=4",
                                            NULL));
  OK(ml_train_model_set_dataset(b->model, b->ds));
  OK(ml_train_model_compile(b->model, "loss=cross", "batch_size=8", "seed=3",
                            memopt ? "memory_optimization=true" : "memory_optimization=false",
                            NULL));
}


/* input 1:1:8 and fc 3 softmax with sgd; *opt_out gets the optimizer */
void small_model_opt(ml_train_model_h *model, ml_train_optimizer_h *opt_out) {
  ml_train_layer_h in, out;
  ml_train_optimizer_h opt;
  OK(ml_train_model_construct(model));
  OK(ml_train_layer_create(&in, ML_TRAIN_LAYER_TYPE_INPUT));
  OK(ml_train_layer_set_property(in, "input_shape=1:1:8", NULL));
  OK(ml_train_layer_create(&out, ML_TRAIN_LAYER_TYPE_FC));
  OK(ml_train_layer_set_property(out, "unit=3", "activation=softmax", NULL));
  OK(ml_train_model_add_layer(*model, in));
  OK(ml_train_model_add_layer(*model, out));
  OK(ml_train_optimizer_create(&opt, ML_TRAIN_OPTIMIZER_TYPE_SGD));
  OK(ml_train_model_set_optimizer(*model, opt));
  if (opt_out)
    *opt_out = opt;
}

void small_model(ml_train_model_h *model) { small_model_opt(model, NULL); }


/* The message left by the last failing call: non-NULL, mentioning needle,
 * and cleared by reading it. */
void expect_msg(const char *needle) {
  const char *m = ml_error();
  if (!m)
    fail_msg("no ml_error() message; expected one mentioning '%s'", needle);
  tu_assert_contains(m, needle);
  assert_null(ml_error());
}


ml_tensors_info_h new_info(unsigned count) {
  ml_tensors_info_h info = NULL;
  OK(ml_tensors_info_create(&info));
  assert_non_null(info);
  if (count)
    OK(ml_tensors_info_set_count(info, count));
  return info;
}

/* Two float32 tensors 2:3:4 ("a") and 5 ("b") plus a uint8 tensor 7:1:3. */
ml_tensors_info_h sample_info(void) {
  ml_tensors_info_h info = new_info(3);
  ml_tensor_dimension d0 = {2, 3, 4}, d1 = {5}, d2 = {7, 1, 3};
  OK(ml_tensors_info_set_tensor_type(info, 0, ML_TENSOR_TYPE_FLOAT32));
  OK(ml_tensors_info_set_tensor_type(info, 1, ML_TENSOR_TYPE_FLOAT32));
  OK(ml_tensors_info_set_tensor_type(info, 2, ML_TENSOR_TYPE_UINT8));
  OK(ml_tensors_info_set_tensor_dimension(info, 0, d0));
  OK(ml_tensors_info_set_tensor_dimension(info, 1, d1));
  OK(ml_tensors_info_set_tensor_dimension(info, 2, d2));
  OK(ml_tensors_info_set_tensor_name(info, 0, "a"));
  OK(ml_tensors_info_set_tensor_name(info, 1, "b"));
  return info;
}

void assert_name(ml_tensors_info_h info, unsigned i, const char *want) {
  char *name = (char *)"sentinel";
  OK(ml_tensors_info_get_tensor_name(info, i, &name));
  if (!want) {
    assert_null(name);
    return;
  }
  assert_non_null(name);
  assert_string_equal(name, want);
  free(name);
}
