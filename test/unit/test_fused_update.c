/* Updates fused with the gradient (schedule.c fused_rows, train.c
 * fused_gradient): a fully_connected weight whose gradient is over 64 KiB
 * is updated a block of rows at a time inside calc_gradient, so its whole
 * gradient is never planned. Checked: which weights are fused and which
 * are not (clip_grad_by_norm, a regularizer, memory_optimization=false,
 * kernels whose split products change bits), the training plan's one
 * block and the schedule's order (the derivative before the update), the
 * weights bitwise those of whole gradients with SGD, Adam and AdamW, and
 * with check_finite a gradient whose bound leaves no room (run twice:
 * checked, then applied) and one that is not finite (named, not applied). */
#include "test_util.h"

#include <cblas.h>

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/compute/kernels.h"
#include "nntrainer/model_impl.h"

/* Samples of in_len inputs and 10 labels: a pattern, or `value` and
 * `label` everywhere when value is not 0. */
typedef struct feed {
  unsigned in_len, per_epoch;
  float value, label;
  long calls;
} feed;

static int feed_cb(float **in, float **label, bool *last, void *ud) {
  feed *f = ud;
  long k = f->calls++;
  for (unsigned i = 0; i < f->in_len; i++)
    in[0][i] = f->value ? f->value : (float)((k * 7 + i * 3) % 13) / 13.0f - 0.5f;
  for (unsigned i = 0; i < 10; i++)
    label[0][i] = f->value ? f->label : (float)(i == (unsigned)k % 10);
  *last = (unsigned long)(k + 1) % f->per_epoch == 0;
  return 0;
}

/* in (1:1:40) -> fc0 (300) -> fc1 (64, relu) -> fc2 (10), mse, batch 4,
 * epochs of 8 samples: fc1's weight (300 x 64, 75 KiB) is the one a block
 * of rows can take; fc0 trains, so fc1 computes a derivative too. extra:
 * more [Model] properties or fc1 keys ("fc1.KEY", value), NULL-terminated.
 * fc1_init: fc1's weight initializer, without its relu, fc0's and fc2's
 * weights then ones. */
static nnt_model *make(const char *opt, int fuse_off, const char *const *extra, feed *f,
                       const char *fc1_init) {
  nnt_err e = {0};
  nnt_model *m;
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  m->fuse_off = fuse_off;
  const char *mp[] = {"batch_size", "4", "loss", "mse", "epochs", "2", NULL};
  for (size_t i = 0; mp[i]; i += 2)
    assert_int_equal(nnt_model_set_property(m, mp[i], mp[i + 1], &e), NNT_OK);
  const char *names[] = {"in", "fc0", "fc1", "fc2"};
  const char *types[] = {"input", "fully_connected", "fully_connected", "fully_connected"};
  for (int l = 0; l < 4; l++) {
    nnt_layer *y;
    assert_int_equal(nnt_layer_create(types[l], &y, &e), NNT_OK);
    assert_int_equal(nnt_layer_set_property(y, "name", names[l], &e), NNT_OK);
    if (l == 0)
      assert_int_equal(nnt_layer_set_property(y, "input_shape", "1:1:40", &e), NNT_OK);
    else
      assert_int_equal(nnt_layer_set_property(y, "unit", l == 1 ? "300" : l == 2 ? "64" : "10",
                                              &e),
                       NNT_OK);
    if (l == 2 && fc1_init) {
      assert_int_equal(nnt_layer_set_property(y, "weight_initializer", fc1_init, &e), NNT_OK);
    } else if (l == 2) {
      assert_int_equal(nnt_layer_set_property(y, "activation", "relu", &e), NNT_OK);
    }
    if ((l == 1 || l == 3) && fc1_init)
      assert_int_equal(nnt_layer_set_property(y, "weight_initializer", "ones", &e), NNT_OK);
    for (size_t i = 0; extra && extra[i]; i += 2)
      if (l == 2 && !strncmp(extra[i], "fc1.", 4) &&
          nnt_layer_set_property(y, extra[i] + 4, extra[i + 1], &e))
        fail_msg("%s", e.msg);
    assert_int_equal(nnt_model_add_layer(m, y, &e), NNT_OK);
  }
  for (size_t i = 0; extra && extra[i]; i += 2)
    if (strncmp(extra[i], "fc1.", 4) && nnt_model_set_property(m, extra[i], extra[i + 1], &e))
      fail_msg("%s", e.msg);
  nnt_optimizer *o;
  assert_int_equal(nnt_optimizer_create(opt, &o, &e), NNT_OK);
  assert_int_equal(nnt_optimizer_set_property(o, "learning_rate", "0.01", &e), NNT_OK);
  if (!strcmp(opt, "adamw"))
    assert_int_equal(nnt_optimizer_set_property(o, "weight_decay", "0.1", &e), NNT_OK);
  assert_int_equal(nnt_model_set_optimizer(m, o, &e), NNT_OK);
  nnt_dataset *ds;
  f->calls = 0;
  f->in_len = 40;
  if (!f->per_epoch)
    f->per_epoch = 8;
  assert_int_equal(nnt_dataset_create_generator(feed_cb, f, &ds, &e), NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, &e), NNT_OK);
  if (nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("%s", e.msg);
  return m;
}

/* The rule and the plan: fc1's weight in blocks of 240 rows (a multiple
 * of 48 within 64 KiB), its bias and the small weights whole; none with
 * clipping, l2norm, memory_optimization=false or fuse_off; the derivative
 * step before the gradient step; the plan's gradient bytes smaller by the
 * rows a block leaves out. On kernels whose split products change bits
 * nothing is fused. */
static void test_blocks_planned(void **state) {
  (void)state;
  feed f = {0};
  nnt_err e = {0};
  size_t q = nnt_cpu_blas_row_quantum();
  int exact = q && NNT_GEMM_ROW_BLOCK % q == 0;
  print_message("kernels: %s, row quantum: %zu\n", openblas_get_corename(), q);
  nnt_model *m = make("adam", 0, NULL, &f, NULL), *w = make("adam", 1, NULL, &f, NULL);
  const nnt_node *fc1 = tu_node(m, "fc1");
  assert_int_equal(fc1->gtile[0], exact ? 240 : 0);
  assert_int_equal(fc1->gtile[1], 0);
  assert_int_equal(tu_node(m, "fc0")->gtile[0], 0); /* 40 x 300: one block of 48 rows */
  assert_int_equal(tu_node(w, "fc1")->gtile[0], 0);
  assert_true(fc1->do_deriv);
  if (exact)
    assert_true(tu_step_of(m, "fc1", NNT_STEP_CALC_DERIVATIVE) <
                tu_step_of(m, "fc1", NNT_STEP_CALC_GRADIENT));
  assert_true(tu_step_of(w, "fc1", NNT_STEP_CALC_GRADIENT) <
              tu_step_of(w, "fc1", NNT_STEP_CALC_DERIVATIVE));
  assert_int_equal(nnt_model_plan(m, NNT_MODE_TRAIN, &e), NNT_OK);
  assert_int_equal(nnt_model_plan(w, NNT_MODE_TRAIN, &e), NNT_OK);
  size_t gm = nnt_mgr_kind_bytes(&m->mgr[NNT_MODE_TRAIN], NNT_TK_GRADIENT);
  size_t gw = nnt_mgr_kind_bytes(&w->mgr[NNT_MODE_TRAIN], NNT_TK_GRADIENT);
  assert_int_equal(gm, gw - (exact ? 60 * 64 * sizeof(float) : 0));
  assert_true(m->mgr[NNT_MODE_TRAIN].lower_bound <= w->mgr[NNT_MODE_TRAIN].lower_bound);
  nnt_model_destroy(m);
  nnt_model_destroy(w);
  /* batches of 256: fc1's input derivative (256 x 300) outweighs the
   * gradient rows a block leaves out (60 x 64), and it would live beside
   * the input in the derivative-first order */
  const char *b256[] = {"batch_size", "256", NULL};
  m = make("adam", 0, b256, &f, NULL);
  assert_int_equal(tu_node(m, "fc1")->gtile[0], 0);
  nnt_model_destroy(m);
  const char *const off[][3] = {{"clip_grad_by_norm", "1", NULL},
                                {"fc1.weight_regularizer", "l2norm", NULL},
                                {"memory_optimization", "false", NULL}};
  for (size_t i = 0; i < sizeof off / sizeof *off; i++) {
    m = make("sgd", 0, off[i], &f, NULL);
    assert_int_equal(tu_node(m, "fc1")->gtile[0], 0);
    nnt_model_destroy(m);
  }
}

/* Two epochs of 2 steps: the fused model's weights are bitwise those of
 * whole gradients, with SGD, Adam and AdamW, check_finite on and off. */
static void test_bitwise(void **state) {
  (void)state;
  const char *opts[] = {"sgd", "adam", "adamw"};
  for (size_t o = 0; o < 3; o++)
    for (int check = 0; check < 2; check++) {
      const char *x[] = {"check_finite", check ? "true" : "false", NULL};
      feed fa = {0}, fb = {0};
      nnt_model *a = make(opts[o], 0, x, &fa, NULL), *b = make(opts[o], 1, x, &fb, NULL);
      nnt_err e = {0};
      if (nnt_model_train(a, NULL, NULL, &e) || nnt_model_train(b, NULL, NULL, &e))
        fail_msg("%s: %s", opts[o], e.msg);
      assert_int_equal(a->wpool_floats, b->wpool_floats);
      assert_memory_equal(a->wpool, b->wpool, a->wpool_floats * sizeof(float));
      nnt_model_destroy(a);
      nnt_model_destroy(b);
    }
}

/* Inputs of `value`, fc0 (ones) gives fc1 40 x value, fc1 (zeros) and
 * fc2 (ones) give 0 against labels of 1e18: every output and the loss
 * (1e36) stay finite; fc2's derivative is -2e18 / 20, fc1's ten times
 * that, and fc1's weight gradient 2 x 40 value x -1e18: -1e38 at value
 * 1.25e18 (finite, but its bound leaves no room: checked, then applied),
 * -inf at 1.25e19. One step of 2 samples with SGD. */
static nnt_model *big(int fuse_off, float value, feed *f) {
  const char *x[] = {"batch_size", "2", "epochs", "1", NULL};
  f->per_epoch = 2;
  nnt_model *m = make("sgd", fuse_off, x, f, "zeros");
  f->value = value;
  f->label = 1e18f;
  return m;
}

static void test_bound_no_room(void **state) {
  (void)state;
  feed fa = {0}, fb = {0};
  nnt_model *a = big(0, 1.25e18f, &fa), *b = big(1, 1.25e18f, &fb);
  nnt_err e = {0};
  size_t w1 = tu_node(a, "fc1")->w_first;
  float *before = tu_dup(a->w[w1].data, 300 * 64);
  if (nnt_model_train(a, NULL, NULL, &e) || nnt_model_train(b, NULL, NULL, &e))
    fail_msg("%s", e.msg);
  assert_memory_equal(a->wpool, b->wpool, a->wpool_floats * sizeof(float));
  /* the case meant: some gradient value beyond FLT_MAX / 4 (lr 0.01) */
  double g = 0;
  for (size_t i = 0; i < 300 * 64; i++)
    g = fmax(g, fabs((double)before[i] - a->w[w1].data[i]) / 0.01);
  assert_true(g > FLT_MAX / 4.0 && g < FLT_MAX);
  free(before);
  nnt_model_destroy(a);
  nnt_model_destroy(b);
}

static void test_not_finite(void **state) {
  (void)state;
  feed f = {0};
  nnt_model *m = big(0, 1.25e19f, &f);
  const nnt_node *fc1 = tu_node(m, "fc1");
  if (nnt_cpu_blas_row_quantum())
    assert_true(fc1->gtile[0] > 0);
  size_t w1 = fc1->w_first;
  float *w = tu_dup(m->w[w1].data, 300 * 64), *bias = tu_dup(m->w[w1 + 1].data, 64);
  nnt_err e = {0};
  assert_int_equal(nnt_model_train(m, NULL, NULL, &e), NNT_ERR_RANGE);
  tu_assert_contains(e.msg, "the gradient of weight 'weight' of layer 'fc1' is not finite "
                            "(-inf at element 0 of 19200); it was not applied");
  assert_memory_equal(m->w[w1].data, w, 300 * 64 * sizeof(float));
  assert_memory_equal(m->w[w1 + 1].data, bias, 64 * sizeof(float));
  free(w);
  free(bias);
  nnt_model_destroy(m);
}

/* Batches of 256 and fc1 of 512 units: fc1's gradient (300 x 512 x 256
 * multiply-adds) and its blocks of 48 rows split over two compute threads
 * (the blocks leave out more than fc1's input derivative). The fused
 * model's weights bitwise those of whole gradients with Adam, on every
 * kernel path of OpenBLAS this CPU has (on its AVX2 kernels a product cut
 * by columns, or by rows off a multiple of 24, changes bits: gemm_rows
 * cuts fc1's products by rows at multiples of 24 only). */
static void two_threads_once(void) {
  const char *x[] = {"batch_size", "256", "fc1.unit", "512", NULL};
  feed fa = {.per_epoch = 512}, fb = {.per_epoch = 512};
  nnt_model *a = make("adam", 0, x, &fa, NULL), *b = make("adam", 1, x, &fb, NULL);
  assert_int_equal(tu_node(a, "fc1")->gtile[0], 48);
  assert_int_equal(tu_node(b, "fc1")->gtile[0], 0);
  nnt_err e = {0};
  unsigned long jobs = nnt_cpu_pool_jobs();
  if (nnt_model_train(a, NULL, NULL, &e) || nnt_model_train(b, NULL, NULL, &e))
    fail_msg("%s", e.msg);
  assert_true(nnt_cpu_pool_jobs() > jobs); /* the threads ran */
  assert_memory_equal(a->wpool, b->wpool, a->wpool_floats * sizeof(float));
  nnt_model_destroy(a);
  nnt_model_destroy(b);
}

static void test_two_threads(void **state) {
  (void)state;
  nnt_err e = {0};
  assert_int_equal(nnt_cpu_set_threads(2, &e), NNT_OK);
  print_message("kernels: %s\n", openblas_get_corename());
  two_threads_once();
  if (nnt_blas_cpu_rank() >= NNT_BLAS_AVX2) {
    assert_int_equal(nnt_blas_switch_core("Haswell"), 0);
    print_message("kernels: %s\n", openblas_get_corename());
    two_threads_once();
  }
  if (nnt_blas_cpu_rank() == NNT_BLAS_AVX512) {
    assert_int_equal(nnt_blas_switch_core("SkylakeX"), 0);
    print_message("kernels: %s\n", openblas_get_corename());
    two_threads_once();
  }
  assert_int_equal(nnt_cpu_set_threads(1, &e), NNT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_blocks_planned),
      cmocka_unit_test(test_bitwise),
      cmocka_unit_test(test_bound_no_room),
      cmocka_unit_test(test_not_finite),
      cmocka_unit_test(test_two_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
