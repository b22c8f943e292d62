/* Weights and optimizer state in memory the host cannot dereference: the
 * fake device's opaque buffer type (fake_device.h: addresses that fault
 * when read, the real bytes in a private allocation that set/get/memset
 * copy) holds them, on the CPU backend whose arenas stay host memory for
 * the kernels.
 * Initializing, saving, loading and copying weights, the C API's weight
 * getter and the non-finite checks must all work and give the same bytes
 * and messages as with the host buffer type: nothing outside the backend
 * reads a tensor's `data`. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/src/capi.h"
#include "capi_harness.h"
#include "fake_device.h"
#include "nntrainer/model_impl.h"

/* The CPU backend (its kernels and host arenas) with the weights and the
 * optimizer state in opaque memory. */
static void off_host(nnt_model *m) {
  nnt_err e = {0};
  if (nnt_model_set_state_buffer_type(m, fdev_buffer_type(), &e))
    fail_msg("%s", e.msg);
}

/* ---- models ------------------------------------------------------------ */

/* in 1:1:6 → fc1 (5) → bn → fc2 (4, relu) → fc3 (3, softmax), cross
 * entropy, Adam, batch 4, 16 synthetic samples; opaque: weights and
 * optimizer state in the opaque buffer type. */
static nnt_model *model(int opaque) {
  nnt_model *m;
  nnt_err e = {0};
  const char *layers[][7] = {
      {"input", "in", "input_shape", "1:1:6", NULL},
      {"fully_connected", "fc1", "unit", "5", NULL},
      {"batch_normalization", "bn", NULL},
      {"fully_connected", "fc2", "unit", "4", "activation", "relu"},
      {"fully_connected", "fc3", "unit", "3", "activation", "softmax"},
  };
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  const char *props[] = {"batch_size", "4", "epochs", "2", "loss", "cross", "seed", "11", NULL};
  for (size_t i = 0; props[i]; i += 2)
    assert_int_equal(nnt_model_set_property(m, props[i], props[i + 1], &e), NNT_OK);
  for (size_t i = 0; i < NNT_ARRAY_LEN(layers); i++)
    tu_add_layer(m, layers[i], NNT_ARRAY_LEN(layers[i]), &e);
  nnt_optimizer *o;
  assert_int_equal(nnt_optimizer_create("adam", &o, &e), NNT_OK);
  assert_int_equal(nnt_optimizer_set_property(o, "learning_rate", "0.01", &e), NNT_OK);
  assert_int_equal(nnt_model_set_optimizer(m, o, &e), NNT_OK);
  nnt_dataset *ds;
  assert_int_equal(nnt_dataset_create_synthetic(16, 7, &ds, &e), NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, &e), NNT_OK);
  if (opaque)
    off_host(m);
  if (nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("%s", e.msg);
  return m;
}

static void assert_same_weights(nnt_model *a, nnt_model *b) {
  assert_int_equal(a->wpool_floats, b->wpool_floats);
  float *x = tu_weights_of(a), *y = tu_weights_of(b);
  assert_memory_equal(x, y, a->wpool_floats * sizeof *x);
  free(x);
  free(y);
}

/* ---- tests ------------------------------------------------------------- */

/* The weights are drawn on the host and written through the buffer: the
 * same values as in host memory, at addresses nothing may read. */
static void test_initialize(void **state) {
  (void)state;
  nnt_model *h = model(0), *o = model(1);
  for (size_t i = 0; i < o->n_w; i++) {
    assert_true(fdev_is_opaque(o->w[i].data));
    assert_null(nnt_tensor_host(&o->w[i]));
    assert_non_null(nnt_tensor_host(&h->w[i]));
  }
  assert_same_weights(h, o);
  nnt_model_destroy(h);
  nnt_model_destroy(o);
}

/* A trained host model's file (weights, Adam's moments, counters) loaded
 * into the opaque model and saved again gives the same bytes; so does a
 * save of the weights alone. */
static void test_save_load(void **state) {
  (void)state;
  nnt_model *h = model(0), *o = model(1);
  nnt_err e = {0};
  if (nnt_model_train(h, NULL, NULL, &e))
    fail_msg("%s", e.msg);
  const char *hp = tu_path_in("host.bin"), *op = tu_path_in("opaque.bin");
  assert_int_equal(nnt_model_save_weights(h, hp, 1, &e), NNT_OK);
  size_t gets = fdev_count.gets, sets = fdev_count.sets;
  assert_int_equal(nnt_model_load_weights(o, hp, &e), NNT_OK);
  assert_true(fdev_count.sets > sets);
  assert_non_null(o->obuf);
  assert_ptr_equal(o->obuf->type, fdev_buffer_type());
  assert_true(fdev_is_opaque(o->opt_pool));
  assert_int_equal(o->iter, h->iter);
  assert_same_weights(h, o);
  assert_int_equal(nnt_model_save_weights(o, op, 1, &e), NNT_OK);
  assert_true(fdev_count.gets > gets); /* staged through get, never read in place */
  tu_assert_same_file(hp, op);
  assert_int_equal(nnt_model_save_weights(h, hp, 0, &e), NNT_OK);
  assert_int_equal(nnt_model_save_weights(o, op, 0, &e), NNT_OK);
  tu_assert_same_file(hp, op);
  nnt_model_destroy(h);
  nnt_model_destroy(o);
}

/* Put v at element k of weight wi (slot 0) or of its optimizer state slot
 * s - 1. */
static void poke(nnt_model *m, size_t wi, unsigned s, size_t k, float v) {
  nnt_err e = {0};
  nnt_tensor t = s ? nnt_model_state_tensor(m, s - 1, wi) : m->w[wi];
  assert_int_equal(nnt_tensor_set(&t, k, &v, 1, &e), NNT_OK);
}

/* The checks find the same value at the same place, with the same words,
 * in either memory; a save refuses it the same way. */
static void test_check_finite(void **state) {
  (void)state;
  nnt_model *h = model(0), *o = model(1);
  nnt_err e = {0}, eh = {0};
  if (nnt_model_train(h, NULL, NULL, &e))
    fail_msg("%s", e.msg);
  const char *hp = tu_path_in("host.bin");
  assert_int_equal(nnt_model_save_weights(h, hp, 1, &e), NNT_OK);
  assert_int_equal(nnt_model_load_weights(o, hp, &e), NNT_OK);
  assert_int_equal(nnt_check_weights(o, &e), NNT_OK);
  size_t last = h->n_w - 2; /* fc3's weight */
  const struct {
    unsigned slot;
    size_t k;
    float v;
    const char *words;
  } cases[] = {
      {0, 7, NAN, "weight 'weight' of layer 'fc3' is not finite (NaN at element 7 of 12)"},
      {1, 2, INFINITY, "the optimizer state of weight 'weight' of layer 'fc3' is not finite "
                       "(inf at element 2"},
      {2, 11, -INFINITY, "(-inf at element 11 of 12)"},
  };
  for (size_t c = 0; c < NNT_ARRAY_LEN(cases); c++) {
    float keep_h, keep_o;
    nnt_tensor th = cases[c].slot ? nnt_model_state_tensor(h, cases[c].slot - 1, last)
                                  : h->w[last];
    nnt_tensor to = cases[c].slot ? nnt_model_state_tensor(o, cases[c].slot - 1, last)
                                  : o->w[last];
    assert_int_equal(nnt_tensor_get(&th, cases[c].k, &keep_h, 1, &e), NNT_OK);
    assert_int_equal(nnt_tensor_get(&to, cases[c].k, &keep_o, 1, &e), NNT_OK);
    assert_memory_equal(&keep_h, &keep_o, sizeof keep_h);
    poke(h, last, cases[c].slot, cases[c].k, cases[c].v);
    poke(o, last, cases[c].slot, cases[c].k, cases[c].v);
    assert_int_equal(nnt_check_weights(h, &eh), NNT_ERR_RANGE);
    assert_int_equal(nnt_check_weights(o, &e), NNT_ERR_RANGE);
    tu_assert_contains(e.msg, cases[c].words);
    assert_string_equal(e.msg, eh.msg);
    assert_int_equal(nnt_model_save_weights(h, tu_path_in("bad.bin"), 1, &eh), NNT_ERR_INVAL);
    assert_int_equal(nnt_model_save_weights(o, tu_path_in("bad.bin"), 1, &e), NNT_ERR_INVAL);
    tu_assert_contains(e.msg, "not writing");
    assert_string_equal(e.msg, eh.msg);
    poke(h, last, cases[c].slot, cases[c].k, keep_h);
    poke(o, last, cases[c].slot, cases[c].k, keep_o);
  }
  assert_int_equal(nnt_check_weights(o, &e), NNT_OK);
  /* the moving statistics are copied aside before a step and put back
   * through the buffer */
  assert_int_equal(nnt_check_prepare(o, &e), NNT_OK);
  float *before = tu_weights_of(o);
  assert_int_equal(nnt_check_save_states(o, &e), NNT_OK);
  size_t changed = 0;
  for (size_t i = 0; i < o->n_w; i++)
    if (!o->wspec[i].trainable) {
      for (size_t k = 0; k < nnt_tensor_len(&o->w[i]); k++)
        poke(o, i, 0, k, 1e30f);
      changed++;
    }
  assert_int_equal(changed, 2); /* bn's moving mean and variance */
  float *poked = tu_weights_of(o);
  assert_memory_not_equal(before, poked, o->wpool_floats * sizeof *before);
  assert_int_equal(nnt_check_restore_states(o, &e), NNT_OK);
  float *after = tu_weights_of(o);
  assert_memory_equal(before, after, o->wpool_floats * sizeof *before);
  free(before);
  free(poked);
  free(after);
  nnt_model_destroy(h);
  nnt_model_destroy(o);
}

/* Copying layers between models reads and writes through the buffers, in
 * every direction, and clears the copied weights' optimizer state. */
static void test_copy_layers(void **state) {
  (void)state;
  nnt_model *src = model(0), *o = model(1), *h = model(0), *o2 = model(1);
  nnt_err e = {0};
  if (nnt_model_train(src, NULL, NULL, &e))
    fail_msg("%s", e.msg);
  const char *all[] = {"fc1", "bn", "fc2", "fc3"};
  assert_int_equal(nnt_model_copy_layer_weights(o, src, all, 4, &e), NNT_OK);
  assert_same_weights(src, o);
  assert_int_equal(nnt_model_copy_layer_weights(h, o, all, 4, &e), NNT_OK);
  assert_same_weights(src, h);
  assert_int_equal(nnt_model_copy_layer_weights(o2, o, all, 4, &e), NNT_OK);
  assert_same_weights(src, o2);
  /* a value that is not finite in the opaque source is named */
  poke(o, 1, 0, 3, NAN);
  const char *fc1[] = {"fc1"};
  assert_int_equal(nnt_model_copy_layer_weights(h, o, fc1, 1, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "layer 'fc1' weight 'bias' of the source model holds nan at index 3");
  /* the optimizer state of copied weights starts afresh */
  const char *hp = tu_path_in("host.bin");
  assert_int_equal(nnt_model_save_weights(src, hp, 1, &e), NNT_OK);
  assert_int_equal(nnt_model_load_weights(o2, hp, &e), NNT_OK);
  const char *fc3[] = {"fc3"};
  assert_int_equal(nnt_model_copy_layer_weights(o2, src, fc3, 1, &e), NNT_OK);
  size_t wi = o2->n_w - 2;
  for (unsigned s = 0; s < 2; s++) {
    nnt_tensor t = nnt_model_state_tensor(o2, s, wi);
    float v[12], zero[12] = {0};
    assert_int_equal(nnt_tensor_len(&t), 12);
    assert_int_equal(nnt_tensor_get(&t, 0, v, 12, &e), NNT_OK);
    assert_memory_equal(v, zero, sizeof v);
  }
  nnt_model_destroy(src);
  nnt_model_destroy(o);
  nnt_model_destroy(h);
  nnt_model_destroy(o2);
}

static const char *capi_ini =
    "[Model]\ntype = NeuralNetwork\nbatch_size = 4\nloss = cross\nseed = 5\n\n"
    "[Optimizer]\ntype = adam\nlearning_rate = 0.01\n\n"
    "[in]\ntype = input\ninput_shape = 1:1:6\n\n"
    "[fc1]\ntype = fully_connected\nunit = 5\n\n"
    "[fc2]\ntype = fully_connected\nunit = 3\nactivation = softmax\n";

/* ml_train_model_get_weight reads through the buffer: the same tensors
 * from either memory. */
static void test_capi_get_weight(void **state) {
  (void)state;
  const char *ini = tu_write_text("m.ini", capi_ini);
  ml_train_model_h mh, mo;
  OK(ml_train_model_construct_with_conf(ini, &mh));
  OK(ml_train_model_construct_with_conf(ini, &mo));
  off_host(((capi_model *)mo)->m);
  OK(ml_train_model_compile(mh, NULL));
  OK(ml_train_model_compile(mo, NULL));
  assert_true(fdev_is_opaque(((capi_model *)mo)->m->w[0].data));
  const char *names[] = {"fc1", "fc2"};
  for (int l = 0; l < 2; l++) {
    ml_tensors_data_h dh, dop;
    ml_tensors_info_h ih, io;
    size_t gets = fdev_count.gets;
    OK(ml_train_model_get_weight(mh, names[l], &dh, &ih));
    OK(ml_train_model_get_weight(mo, names[l], &dop, &io));
    assert_true(fdev_count.gets >= gets + 2);
    for (unsigned t = 0; t < 2; t++) {
      void *ph, *po;
      size_t sh, so;
      OK(ml_tensors_data_get_tensor_data(dh, t, &ph, &sh));
      OK(ml_tensors_data_get_tensor_data(dop, t, &po, &so));
      assert_int_equal(sh, so);
      assert_memory_equal(ph, po, sh);
    }
    OK(ml_tensors_data_destroy(dh));
    OK(ml_tensors_data_destroy(dop));
    OK(ml_tensors_info_destroy(ih));
    OK(ml_tensors_info_destroy(io));
  }
  OK(ml_train_model_destroy(mh));
  OK(ml_train_model_destroy(mo));
  assert_no_handles();
}

/* The hook is refused once the model is compiled. */
static void test_hook_before_compile(void **state) {
  (void)state;
  nnt_model *o = model(1);
  nnt_err e = {0};
  assert_int_equal(nnt_model_set_state_buffer_type(o, fdev_buffer_type(), &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "set it before compile");
  nnt_model_destroy(o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_initialize),
      cmocka_unit_test_setup_teardown(test_save_load, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_check_finite, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_copy_layers, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_capi_get_weight, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test(test_hook_before_compile),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
