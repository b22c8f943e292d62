/* Scratch of calc_derivative alone (NNT_SCRATCH_DERIV; layers/conv.c
 * wino_deriv_scratch): a wide conv2d whose backward scratch is too small
 * for Winograd asks for its derivative's own, no larger than its weight
 * gradient. Checked: the trainable conv that computes a derivative gets
 * one and runs calc_derivative before calc_gradient; the plan holds it in
 * that step alone, before the gradient's first step, and not in
 * inference; a frozen conv (no gradient to make room) and a conv without
 * a derivative (the first layer) plan none; training gives bitwise what
 * memory_optimization=false gives. And how many of Winograd's slices
 * the backward's own scratch holds. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/compute/kernels.h"
#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

/* 256 channels on 4x4 images, 16 a batch (64 tiles): c1's backward
 * scratch stays below Winograd's least, its derivative's own (4 slices a
 * pass, 2 MiB) within its 2.25 MiB gradient. */
#define NET(C1)                                                                            \
  "[Model]\ntype = NeuralNetwork\nepochs = 1\nbatch_size = 16\nloss = mse\nseed = 3\n"      \
  "[Optimizer]\ntype = sgd\nlearning_rate = 0.01\n"                                        \
  "[in]\ntype = input\ninput_shape = 256:4:4\n"                                            \
  "[c0]\ntype = conv2d\nfilters = 256\nkernel_size = 3,3\npadding = 1,1\n"                 \
  "[c1]\ntype = conv2d\nfilters = 256\nkernel_size = 3,3\npadding = 1,1\n" C1 "\n"         \
  "[fl]\ntype = flatten\n"                                                                 \
  "[fc]\ntype = fully_connected\nunit = 5\n"

static nnt_model *load(int frozen, int unoptimized) {
  nnt_err e = {0};
  const char *path = tu_write_text(frozen ? "dfrozen.ini" : "dall.ini",
                                   frozen ? NET("trainable = false") : NET(""));
  const char *ov[] = {"memory_optimization=false"};
  nnt_model *m = tu_model_for_ini(path);
  if (nnt_ini_load(m, path, ov, unoptimized ? 1 : 0, &e))
    fail_msg("%s: %s", path, e.msg);
  nnt_dataset *ds = NULL;
  assert_int_equal(nnt_dataset_create_synthetic(32, 7, &ds, &e), NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, &e), NNT_OK);
  if (nnt_model_compile(m, &e) || nnt_model_initialize(m, &e) ||
      nnt_model_plan(m, NNT_MODE_TRAIN, &e))
    fail_msg("compile: %s", e.msg);
  return m;
}

/* The node's derivative scratch index, or -1. */
static int deriv_scratch(const nnt_node *nd) {
  int at = -1;
  for (unsigned c = 0; c < nd->fc.n_scratch; c++)
    if (nd->fc.scratch_life[c] == NNT_SCRATCH_DERIV) {
      assert_int_equal(at, -1);
      at = (int)c;
    }
  return at;
}

static void test_planned(void **state) {
  (void)state;
  nnt_model *m = load(0, 0);
  const nnt_node *c0 = tu_node(m, "c0"), *c1 = tu_node(m, "c1");
  int d1 = deriv_scratch(c1);
  assert_true(d1 >= 0);
  assert_true(c1->do_grad && c1->do_deriv && !c0->do_deriv);
  unsigned sd = tu_step_of(m, "c1", NNT_STEP_CALC_DERIVATIVE);
  unsigned sg = tu_step_of(m, "c1", NNT_STEP_CALC_GRADIENT);
  assert_true(sd < sg);
  /* c0 computes no derivative: the usual order, its scratch not planned */
  assert_true(tu_step_of(m, "c0", NNT_STEP_CALC_GRADIENT) <
              tu_step_of(m, "c0", NNT_STEP_CALC_DERIVATIVE));
  int d0 = deriv_scratch(c0);
  assert_true(d0 < 0 || c0->t_scratch[d0] < 0);
  const nnt_mgr *g = &m->mgr[NNT_MODE_TRAIN];
  const nnt_mgr_tensor *s = &g->t[c1->t_scratch[d1]], *gw = &g->t[c1->t_gw[0]];
  assert_int_equal(s->first, sd);
  assert_int_equal(s->last, sd);
  assert_true(gw->first > sd);
  size_t grad = (size_t)256 * 256 * 9 * sizeof(float);
  assert_int_equal(gw->bytes, grad);
  assert_true(s->bytes <= grad && s->bytes >= grad / 2);
  /* inference runs no derivative */
  nnt_err e = {0};
  assert_int_equal(nnt_model_plan(m, NNT_MODE_INFER, &e), NNT_OK);
  assert_int_equal(tu_node(m, "c1")->t_scratch[d1], -1);
  nnt_model_destroy(m);
  /* frozen: no gradient, no scratch of its own, the usual order */
  m = load(1, 0);
  c1 = tu_node(m, "c1");
  assert_true(!c1->do_grad && c1->do_deriv);
  assert_int_equal(deriv_scratch(c1), -1);
  nnt_model_destroy(m);
}

/* Two steps: the same bits as memory_optimization=false, whose plan keeps
 * every tensor apart (the same kernels and scratch sizes run). */
static void test_bitwise(void **state) {
  (void)state;
  nnt_model *a = load(0, 0), *b = load(0, 1);
  nnt_err e = {0};
  if (nnt_model_train(a, NULL, NULL, &e) || nnt_model_train(b, NULL, NULL, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(a->wpool_floats, b->wpool_floats);
  float *wa = tu_weights_of(a), *wb = tu_weights_of(b);
  assert_memory_equal(wa, wb, a->wpool_floats * sizeof(float));
  free(wa);
  free(wb);
  nnt_model_destroy(a);
  nnt_model_destroy(b);
}

/* The backward's scratch where it holds conv_wino and conv_wino_dw
 * (wino_bwd_scratch), at ResNet-18's shapes (batch 32), whose training
 * plan stays the same: F(4x4, 3x3) with chunks of the most tiles (up to
 * 256) whose scratch is at most 1.25 times the layer's input, stage 1
 * (64 channels, 32x32: 256 tiles, 5 MiB against 8 MiB) and stage 2 (128,
 * 16x16: 64 tiles, 4.5 MiB against 4); else F(2x2, 3x3)'s 16 slices of
 * 64 tiles in one pass where that is at most three times the input, stage
 * 3 (256, 8x8: 6 MiB against 2); with half the batch stage 3's input is
 * too small for even 8 slices and the backward keeps its column blocks. */
static void test_wino_slices(void **state) {
  (void)state;
  static const struct {
    unsigned c, hw, batch, f4, tiles;
  } L[] = {{64, 32, 32, 1, 256}, {128, 16, 32, 1, 64}, {256, 8, 32, 0, 64}, {256, 8, 16, 0, 0}};
  for (size_t i = 0; i < NNT_ARRAY_LEN(L); i++) {
    nnt_err e = {0};
    nnt_layer *l = NULL;
    char f[16];
    snprintf(f, sizeof f, "%u", L[i].c);
    const char *props[] = {"filters", f, "kernel_size", "3,3", "padding", "1,1", NULL};
    assert_int_equal(nnt_layer_create("conv2d", &l, &e), NNT_OK);
    for (size_t p = 0; props[p]; p += 2)
      assert_int_equal(nnt_layer_set_property(l, props[p], props[p + 1], &e), NNT_OK);
    nnt_finalize_ctx fc = {.n_in = 1, .n_out = 1, .batch = L[i].batch, .trainable = 1};
    fc.in_dim[0] = nnt_dim_make(L[i].batch, L[i].c, L[i].hw, L[i].hw);
    assert_int_equal(l->ops->finalize(l, &fc, &e), NNT_OK);
    size_t bwd = nnt_dim_len(fc.scratch_dim[1]), c = L[i].c;
    if (L[i].f4)
      assert_int_equal(bwd, nnt_wino4_scratch(c, c, L[i].tiles));
    else if (L[i].tiles)
      assert_int_equal(bwd, 2 * nnt_wino_min_scratch(c, c, L[i].tiles));
    else
      assert_true(bwd < nnt_wino_min_scratch(c, c, 64));
    nnt_layer_destroy(l);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_planned),
      cmocka_unit_test(test_bitwise),
      cmocka_unit_test(test_wino_slices),
  };
  return cmocka_run_group_tests(tests, tu_dir_setup, tu_dir_teardown);
}
