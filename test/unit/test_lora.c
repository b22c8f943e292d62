/* LoRA on fully_connected (lora_rank, lora_alpha): only loraA and loraB
 * train, so the base weight and bias stay bit for bit, have no gradient and
 * no optimizer state; lora_rank = 0 is the plain layer bit for bit (same
 * weights, same file); the file with Adam's moments round-trips. And the
 * errors of the attention layers and LoRA name the key or the inputs. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer.h"
#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

#define MODEL(FC1, FC2)                                                                  \
  "[Model]\ntype = NeuralNetwork\nbatch_size = 4\nepochs = 2\nloss = cross\nseed = 5\n" \
  "[Optimizer]\ntype = adam\nlearning_rate = 0.01\n"                                   \
  "[in]\ntype = input\ninput_shape = 1:1:12\n"                                         \
  "[fc1]\ntype = fully_connected\nunit = 10\nactivation = relu\n" FC1 "\n"             \
  "[fc2]\ntype = fully_connected\nunit = 4\nactivation = softmax\n" FC2 "\n"

static nnt_model *load(const char *name, const char *text, nnt_err *e) {
  const char *path = tu_write_text(name, text);
  nnt_model *m = tu_model_for_ini(path);
  if (nnt_ini_load(m, path, NULL, 0, e))
    fail_msg("%s: %s", name, e->msg);
  nnt_dataset *ds = NULL;
  assert_int_equal(nnt_dataset_create_synthetic(16, 77, &ds, e), NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, e), NNT_OK);
  return m;
}

static nnt_model *ready(const char *name, const char *text) {
  nnt_err e = {0};
  nnt_model *m = load(name, text, &e);
  if (nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("%s: %s", name, e.msg);
  return m;
}

static void test_only_the_factors_train(void **state) {
  (void)state;
  nnt_model *m = ready("lora.ini", MODEL("lora_rank = 2\nlora_alpha = 4", "lora_rank = 3"));
  nnt_model *full = ready("full.ini", MODEL("", ""));
  /* fc1: weight, bias, loraA [12, 2], loraB [2, 10]; fc2: weight, bias,
   * loraA [10, 3], loraB [3, 4] */
  assert_int_equal(m->n_w, 8);
  const char *names[] = {"weight", "bias", "loraA", "loraB"};
  for (size_t i = 0; i < 8; i++) {
    assert_string_equal(m->wspec[i].name, names[i % 4]);
    assert_int_equal(nnt_model_weight_trains(m, i), i % 4 >= 2);
  }
  size_t lora = 12 * 2 + 2 * 10 + 10 * 3 + 3 * 4, base = 12 * 10 + 10 + 10 * 4 + 4;
  assert_int_equal(m->wpool_floats, lora + base);
  assert_int_equal(nnt_model_opt_bytes(m, 2), 2 * lora * sizeof(float));
  assert_int_equal(nnt_model_opt_bytes(full, 2), 2 * base * sizeof(float));
  nnt_err e = {0};
  if (nnt_model_plan(m, NNT_MODE_TRAIN, &e) || nnt_model_plan(full, NNT_MODE_TRAIN, &e))
    fail_msg("%s", e.msg);
  size_t g_lora = nnt_mgr_kind_bytes(&m->mgr[NNT_MODE_TRAIN], NNT_TK_GRADIENT);
  size_t g_full = nnt_mgr_kind_bytes(&full->mgr[NNT_MODE_TRAIN], NNT_TK_GRADIENT);
  print_message("LoRA: optimizer state %zu bytes against %zu, gradients %zu against %zu\n",
                nnt_model_opt_bytes(m, 2), nnt_model_opt_bytes(full, 2), g_lora, g_full);
  assert_int_equal(g_lora, lora * sizeof(float));
  float *before = tu_weights_of(m);
  assert_int_equal(nnt_model_train(m, NULL, NULL, &e), NNT_OK);
  float *after = tu_weights_of(m);
  size_t at = 0;
  for (size_t i = 0; i < m->n_w; i++) {
    size_t n = nnt_dim_len(m->wspec[i].dim);
    int same = memcmp(before + at, after + at, n * sizeof(float)) == 0;
    if (i % 4 >= 2)
      assert_false(same); /* loraA from zeros, loraB */
    else
      assert_true(same); /* the base, bit for bit */
    at += n;
  }
  assert_int_equal(m->omgr.arena_bytes, 2 * lora * sizeof(float));
  /* the file: weights in order, "adam", the factors' moments, counters */
  const char *p = tu_path_in("lora.bin");
  assert_int_equal(nnt_model_save_weights(m, p, 1, &e), NNT_OK);
  size_t n;
  unsigned char *bytes = tu_file_bytes(p, &n);
  assert_int_equal(n, (lora + base) * 4 + 4 + 2 * lora * 4 + 8);
  assert_memory_equal(bytes + m->wpool_floats * 4, "adam", 4);
  nnt_model *g = ready("lora.ini", MODEL("lora_rank = 2\nlora_alpha = 4", "lora_rank = 3"));
  if (nnt_model_load_weights(g, p, &e))
    fail_msg("%s", e.msg);
  const char *q = tu_path_in("lora2.bin");
  assert_int_equal(nnt_model_save_weights(g, q, 1, &e), NNT_OK);
  tu_assert_same_file(p, q);
  free(bytes);
  free(before);
  free(after);
  nnt_model_destroy(m);
  nnt_model_destroy(full);
  nnt_model_destroy(g);
}

/* lora_rank = 0 is the plain layer: the same weights after training and
 * the same file, bit for bit. */
static void test_rank_zero_is_plain(void **state) {
  (void)state;
  nnt_model *a = ready("plain.ini", MODEL("", ""));
  nnt_model *b = ready("zero.ini", MODEL("lora_rank = 0", "lora_rank = 0\nlora_alpha = 8"));
  nnt_err e = {0};
  assert_int_equal(nnt_model_train(a, NULL, NULL, &e), NNT_OK);
  assert_int_equal(nnt_model_train(b, NULL, NULL, &e), NNT_OK);
  assert_int_equal(a->wpool_floats, b->wpool_floats);
  const char *p = tu_path_in("plain.bin"), *q = tu_path_in("zero.bin");
  assert_int_equal(nnt_model_save_weights(a, p, 1, &e), NNT_OK);
  assert_int_equal(nnt_model_save_weights(b, q, 1, &e), NNT_OK);
  tu_assert_same_file(p, q);
  nnt_model_destroy(a);
  nnt_model_destroy(b);
}

/* A LoRA model starts from its base: copying the layers of a trained plain
 * model gives the LoRA model its weight and bias bit for bit while its
 * factors keep their initial values; the other way (a LoRA layer into a
 * plain one) stays refused, naming the layer. */
static void test_copy_from_base(void **state) {
  (void)state;
  nnt_model *base = ready("full.ini", MODEL("", ""));
  nnt_model *m = ready("lora.ini", MODEL("lora_rank = 2\nlora_alpha = 4", "lora_rank = 3"));
  nnt_err e = {0};
  assert_int_equal(nnt_model_train(base, NULL, NULL, &e), NNT_OK);
  float *b = tu_weights_of(base), *before = tu_weights_of(m);
  const char *layers[] = {"fc1", "fc2"};
  if (nnt_model_copy_layer_weights(m, base, layers, 2, &e))
    fail_msg("%s", e.msg);
  float *after = tu_weights_of(m);
  /* base: fc1 weight, bias, fc2 weight, bias; LoRA: each followed by its
   * two factors */
  size_t fc1 = 12 * 10 + 10, fc1_lora = 12 * 2 + 2 * 10, fc2 = 10 * 4 + 4;
  assert_memory_equal(after, b, fc1 * 4);
  assert_memory_equal(after + fc1, before + fc1, fc1_lora * 4);
  assert_memory_equal(after + fc1 + fc1_lora, b + fc1, fc2 * 4);
  assert_memory_equal(after + fc1 + fc1_lora + fc2, before + fc1 + fc1_lora + fc2,
                      (10 * 3 + 3 * 4) * 4);
  assert_int_equal(nnt_model_copy_layer_weights(base, m, layers, 1, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "layer 'fc1' has 4 weights in the source model and 2");
  free(b);
  free(before);
  free(after);
  nnt_model_destroy(base);
  nnt_model_destroy(m);
}

/* A model that does not compile: the message has each of the words. */
static void refused(const char *text, const char *w1, const char *w2) {
  nnt_err e = {0};
  nnt_model *m = load("bad.ini", text, &e);
  assert_int_equal(nnt_model_compile(m, &e), NNT_ERR_INVAL);
  if (!strstr(e.msg, w1) || !strstr(e.msg, w2))
    fail_msg("'%s' lacks '%s' or '%s'", e.msg, w1, w2);
  nnt_model_destroy(m);
}

#define SEQ(BODY)                                                                        \
  "[Model]\ntype = NeuralNetwork\nbatch_size = 2\nloss = mse\n"                         \
  "[Optimizer]\ntype = sgd\n"                                                          \
  "[in]\ntype = input\ninput_shape = 1:4:6\n" BODY
#define SEQK(BODY) SEQ("[k]\ntype = input\ninput_shape = 1:5:6\n" BODY)

static void test_bad_values_name_the_key(void **state) {
  (void)state;
  refused(MODEL("lora_rank = 13", ""), "lora_rank", "[fc1]");
  refused(MODEL("", "lora_rank = 5"), "lora_rank", "[fc2]");
  nnt_err e = {0};
  nnt_model *m = load("ok.ini", MODEL("", ""), &e);
  nnt_layer *l;
  assert_int_equal(nnt_layer_create("fully_connected", &l, &e), NNT_OK);
  assert_int_equal(nnt_layer_set_property(l, "lora_alpha", "0", &e), NNT_ERR_INVAL);
  assert_non_null(strstr(e.msg, "lora_alpha"));
  nnt_layer_destroy(l);
  assert_int_equal(nnt_layer_create("multi_head_attention", &l, &e), NNT_OK);
  assert_int_equal(nnt_layer_set_property(l, "return_attention_weight", "middle", &e),
                   NNT_ERR_INVAL);
  assert_non_null(strstr(e.msg, "return_attention_weight"));
  assert_int_equal(nnt_layer_set_property(l, "num_heads", "0", &e), NNT_ERR_INVAL);
  assert_non_null(strstr(e.msg, "num_heads"));
  nnt_layer_destroy(l);
  nnt_model_destroy(m);
  refused(SEQ("[a]\ntype = multi_head_attention\nnum_heads = 4\ninput_layers = in, in, in\n"),
          "num_heads", "[a]");
  refused(SEQK("[a]\ntype = multi_head_attention\ninput_layers = in, k, in\n"), "key height",
          "value height");
  refused(SEQK("[a]\ntype = multi_head_attention\ninput_layers = in, k\n"), "3 or 4 inputs",
          "[a]");
  refused(SEQK("[a]\ntype = multi_head_attention\nnum_heads = 2\ninput_layers = in, k, k, in\n"),
          "mask channels", "num_heads");
  refused(SEQK("[a]\ntype = attention\ninput_layers = in, k, in\n"), "key", "value");
  refused(SEQ("[a]\ntype = attention\ninput_layers = in\n"), "2 or 3 inputs", "[a]");
}

/* The C API's layer types: attention (24) and multi_head_attention (26)
 * with their keys, and fully_connected's LoRA keys; a bad value is refused. */
static void test_capi_types(void **state) {
  (void)state;
  ml_train_layer_h l;
  assert_int_equal(ml_train_layer_create(&l, ML_TRAIN_LAYER_TYPE_MULTI_HEAD_ATTENTION), 0);
  assert_int_equal(ml_train_layer_set_property(l, "num_heads=2", "causal_mask=true",
                                               "dropout_rate=0.1", "projected_key_dim=3",
                                               "return_attention_weight=after", NULL),
                   0);
  assert_int_equal(ml_train_layer_set_property(l, "num_heads=0", NULL),
                   ML_ERROR_INVALID_PARAMETER);
  assert_int_equal(ml_train_layer_destroy(l), 0);
  assert_int_equal(ml_train_layer_create(&l, ML_TRAIN_LAYER_TYPE_ATTENTION), 0);
  assert_int_equal(
      ml_train_layer_set_property(l, "scaled_dot_product=true", "causal_mask=true", NULL), 0);
  assert_int_equal(ml_train_layer_set_property(l, "num_heads=2", NULL),
                   ML_ERROR_INVALID_PARAMETER);
  assert_int_equal(ml_train_layer_destroy(l), 0);
  assert_int_equal(ml_train_layer_create(&l, ML_TRAIN_LAYER_TYPE_FC), 0);
  assert_int_equal(ml_train_layer_set_property(l, "unit=4", "lora_rank=2", "lora_alpha=8", NULL),
                   0);
  assert_int_equal(ml_train_layer_destroy(l), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_only_the_factors_train),
      cmocka_unit_test(test_rank_zero_is_plain),
      cmocka_unit_test(test_copy_from_base),
      cmocka_unit_test(test_bad_values_name_the_key),
      cmocka_unit_test(test_capi_types),
  };
  return cmocka_run_group_tests(tests, tu_dir_setup, tu_dir_teardown);
}
