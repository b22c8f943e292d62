/* Forward passes that keep less where no backward runs (inference,
 * evaluation, frozen layers with no trainable layer before them): a
 * conv2d whose output is no larger than its input writes it over the
 * input (NNT_LF_INPLACE_FWD, layers/conv.c conv_forward_inplace: image
 * groups staged in scratch, the permute, pointwise, one-image and direct
 * paths), and batch normalization's xhat is planned only where its
 * backward reads it. On the CPU, the fake device and Vulkan (engine=gpu,
 * lavapipe in CI; inference and frozen training): the convs that may
 * run in place do (and share their input's memory), the others do not,
 * no xhat is requested without a backward, and training steps and
 * inference give bitwise what memory_optimization=false gives. */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

#include "fake_device.h"
#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

/* c0 grows the image (3 -> 8 channels: not in place); c1 one image per
 * gemm at 16x16 (staged in its own scratch); c2 stride 2, two images per
 * gemm (permute scratch); c3 pointwise; c4 the CPU's direct convolution
 * (4 channels, 5x5, 16 filters), all four images in one group. FROZEN is
 * "trainable = false" or "". */
#define NET(FROZEN)                                                                        \
  "[Model]\ntype = NeuralNetwork\nepochs = 1\nbatch_size = 4\nloss = cross\nseed = 9\n"     \
  "[Optimizer]\ntype = adam\nlearning_rate = 0.01\n"                                       \
  "[in]\ntype = input\ninput_shape = 3:16:16\n"                                            \
  "[c0]\ntype = conv2d\nfilters = 8\nkernel_size = 3,3\npadding = 1,1\n" FROZEN "\n"       \
  "[b0]\ntype = batch_normalization\nactivation = relu\n" FROZEN "\n"                      \
  "[c1]\ntype = conv2d\nfilters = 8\nkernel_size = 3,3\npadding = 1,1\n" FROZEN "\n"       \
  "[b1]\ntype = batch_normalization\nactivation = relu\n" FROZEN "\n"                      \
  "[c2]\ntype = conv2d\nfilters = 4\nkernel_size = 3,3\nstride = 2,2\npadding = 1,1\n"     \
  FROZEN "\n"                                                                              \
  "[c3]\ntype = conv2d\nfilters = 4\nkernel_size = 1,1\nactivation = relu\n" FROZEN "\n"  \
  "[c4]\ntype = conv2d\nfilters = 16\nkernel_size = 5,5\nstride = 2,2\npadding = 2,2\n"    \
  FROZEN "\n"                                                                              \
  "[fl]\ntype = flatten\n"                                                                 \
  "[fc]\ntype = fully_connected\nunit = 5\nactivation = softmax\n"

static const char *const convs[] = {"c0", "c1", "c2", "c3", "c4"};

/* the backends: the CPU, the fake device, and engine=gpu where built */
#ifdef NNT_HAVE_VULKAN
#define BACKENDS 3
#else
#define BACKENDS 2
#endif

/* fake: 0 the CPU, 1 the fake device, 2 engine=gpu */
static nnt_model *load(int frozen, int fake, int unoptimized, nnt_mode mode) {
  nnt_err e = {0};
  const char *path = tu_write_text(frozen ? "frozen.ini" : "all.ini",
                                   frozen ? NET("trainable = false") : NET(""));
  const char *ov[2] = {"memory_optimization=false"};
  unsigned nov = unoptimized ? 1 : 0;
  if (fake == 2)
    ov[nov++] = "engine=gpu";
  nnt_model *m = tu_model_for_ini(path);
  if (nnt_ini_load(m, path, ov, nov, &e))
    fail_msg("%s: %s", path, e.msg);
  /* every tensor NaN once its life ends: an output pinned to its input's
   * start (c2's) keeps what the rest of the plan may reuse, and the
   * model's output lives until the caller has read it */
  m->poison = 1;
  nnt_dataset *ds = NULL;
  assert_int_equal(nnt_dataset_create_synthetic(8, 5, &ds, &e), NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, &e), NNT_OK);
  if (fake == 1)
    assert_int_equal(nnt_model_set_backend(m, fdev_backend(), &e), NNT_OK);
  if (nnt_model_compile(m, &e) || nnt_model_initialize(m, &e) || nnt_model_plan(m, mode, &e))
    fail_msg("compile: %s", e.msg);
  return m;
}

/* Which convs run over their input in mode, as the bits of convs[], and
 * check that such a conv's output shares its input's memory. */
static unsigned inplace_convs(const nnt_model *m, nnt_mode mode) {
  unsigned bits = 0;
  const nnt_mgr *g = &m->mgr[mode];
  for (unsigned i = 0; i < NNT_ARRAY_LEN(convs); i++) {
    const nnt_node *nd = tu_node(m, convs[i]);
    /* the same memory: one root, or (an output smaller than its input)
     * pinned to its input's start (nnt_mgr_pin); their lives meet at the
     * conv's step, so the same offset is the same memory */
    int ro = nnt_mgr_root(g, nd->t_out[0]), ri = nnt_mgr_root(g, nd->t_in[0]);
    int shared = ro == ri || (g->t[ro].pin_to == ri && g->t[ro].offset == g->t[ri].offset);
    assert_int_equal(shared, nd->inplace);
    bits |= (unsigned)nd->inplace << i;
  }
  return bits;
}

/* Whether a batch norm's xhat ("bN:scratch0") is requested in mode. */
static int xhat_planned(const nnt_model *m, nnt_mode mode) {
  const nnt_mgr *g = &m->mgr[mode];
  for (size_t i = 0; i < g->n; i++)
    if (g->t[i].name[0] == 'b' && strstr(g->t[i].name, ":scratch0"))
      return 1;
  return 0;
}

static void test_which_run_in_place(void **state) {
  (void)state;
  for (int fake = 0; fake < BACKENDS; fake++) {
    /* frozen, training: the forward of every conv but the one that grows
     * its image; batch norm keeps no xhat */
    nnt_model *f = load(1, fake, 0, NNT_MODE_TRAIN);
    assert_int_equal(inplace_convs(f, NNT_MODE_TRAIN), 0x1eu);
    assert_false(xhat_planned(f, NNT_MODE_TRAIN));
    nnt_model_destroy(f);
    /* trainable, training: none (every conv's backward reads its input),
     * and batch norm keeps xhat for its backward */
    nnt_model *a = load(0, fake, 0, NNT_MODE_TRAIN);
    assert_int_equal(inplace_convs(a, NNT_MODE_TRAIN), 0);
    assert_true(xhat_planned(a, NNT_MODE_TRAIN));
    nnt_model_destroy(a);
    /* trainable, inference and evaluation: as the frozen forward */
    for (nnt_mode md = NNT_MODE_EVAL; md <= NNT_MODE_INFER; md++) {
      nnt_model *i = load(0, fake, 0, md);
      assert_int_equal(inplace_convs(i, md), 0x1eu);
      assert_false(xhat_planned(i, md));
      nnt_model_destroy(i);
    }
    /* memory_optimization=false: nothing in place (xhat is still left out
     * where nothing reads it: that is not an optimization to turn off) */
    nnt_model *u = load(0, fake, 1, NNT_MODE_INFER);
    assert_int_equal(inplace_convs(u, NNT_MODE_INFER), 0);
    nnt_model_destroy(u);
  }
}

/* Two Adam steps of the frozen model: every weight (the head's, and the
 * frozen batch norms' moving statistics) bitwise as without in place, on
 * each backend. */
static void test_frozen_training_bitwise(void **state) {
  (void)state;
  for (int fake = 0; fake < BACKENDS; fake++) {
    float *w[2];
    for (int u = 0; u < 2; u++) {
      nnt_model *m = load(1, fake, u, NNT_MODE_TRAIN);
      nnt_err e = {0};
      if (nnt_model_train(m, NULL, NULL, &e))
        fail_msg("train: %s", e.msg);
      w[u] = tu_weights_of(m);
      if (u)
        assert_memory_equal(w[0], w[1], m->wpool_floats * sizeof(float));
      nnt_model_destroy(m);
    }
    free(w[0]), free(w[1]);
  }
}

/* Inference of the trainable model: the probabilities bitwise as without
 * in place on each backend, and the others' close to the CPU's. */
static void test_inference_bitwise(void **state) {
  (void)state;
  const size_t n_in = 4 * 3 * 16 * 16, n_out = 4 * 5;
  float *x = malloc(n_in * sizeof *x), y[3][2][4 * 5];
  nnt_rng r;
  nnt_rng_seed(&r, 17);
  tu_fill_uniform(&r, x, n_in, -1, 1);
  for (int fake = 0; fake < BACKENDS; fake++)
    for (int u = 0; u < 2; u++) {
      nnt_model *m = load(0, fake, u, NNT_MODE_INFER);
      nnt_err e = {0};
      const float *in[] = {x};
      float *out[] = {y[fake][u]};
      if (nnt_model_infer(m, in, out, &e))
        fail_msg("infer: %s", e.msg);
      nnt_model_destroy(m);
    }
  for (int fake = 0; fake < BACKENDS; fake++)
    assert_memory_equal(y[fake][0], y[fake][1], sizeof y[0][0]);
  tu_expect_close(y[1][0], y[0][0], n_out, 1e-5, "fake device against the cpu");
  if (BACKENDS > 2)
    tu_expect_close(y[BACKENDS - 1][0], y[0][0], n_out, 1e-4, "engine=gpu against the cpu");
  free(x);
}

int main(void) {
  tu_keep_vulkan_driver();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_which_run_in_place),
      cmocka_unit_test(test_frozen_training_bitwise),
      cmocka_unit_test(test_inference_bitwise),
  };
  return cmocka_run_group_tests(tests, tu_dir_setup, tu_dir_teardown);
}
