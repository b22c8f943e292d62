/* Reruns (nntrainer/rerun.c): in the training forward of a frozen
 * residual network, each block's addition computes its skip input again
 * image by image, so that the block's first convolution is that input's
 * last reader and writes over it. Checked on a small ResNet-like model
 * whose convolutions compute each image alone (c0: the direct
 * convolution of 3 channels; the blocks': Winograd chunks of one 32x32
 * image): which additions rerun, that the plan shrinks, that training is
 * bitwise what memory_optimization=false gives (the moving statistics of
 * the frozen batch norms included), and where nothing reruns: a layer in
 * the chain that cannot run alone on one image (dropout), a chain whose
 * backward runs, another backend, memory_optimization=false. */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

#include "nntrainer/model_impl.h"

#define CONV(NAME, FROZEN) \
  "[" NAME "]\ntype = conv2d\nfilters = 24\nkernel_size = 3,3\npadding = 1,1\n" FROZEN "\n"
#define BN(NAME, ACT, FROZEN) "[" NAME "]\ntype = batch_normalization\n" ACT FROZEN "\n"
/* STEM: what the first block's skip comes from (b0, or a dropout after
 * it); FROZEN0: the stem's and the first convolution's trainable key */
#define NET(STEM_EXTRA, SKIP, FROZEN0)                                                    \
  "[Model]\ntype = NeuralNetwork\nepochs = 1\nbatch_size = 4\nloss = cross\nseed = 5\n"    \
  "[Optimizer]\ntype = adam\nlearning_rate = 0.01\n"                                      \
  "[in]\ntype = input\ninput_shape = 3:32:32\n" CONV("c0", FROZEN0)                       \
  BN("b0", "activation = relu\n", "trainable = false") STEM_EXTRA                         \
  CONV("r1c1", "trainable = false") BN("r1b1", "activation = relu\n", "trainable = false") \
  CONV("r1c2", "trainable = false") BN("r1b2", "", "trainable = false")                  \
  "[r1add]\ntype = addition\ninput_layers = r1b2, " SKIP "\nactivation = relu\n"          \
  CONV("r2c1", "trainable = false") BN("r2b1", "activation = relu\n", "trainable = false") \
  CONV("r2c2", "trainable = false") BN("r2b2", "", "trainable = false")                  \
  "[r2add]\ntype = addition\ninput_layers = r2b2, r1add\nactivation = relu\n"             \
  "[pool]\ntype = pooling2d\npooling = global_average\n"                                 \
  "[fc]\ntype = fully_connected\nunit = 5\nactivation = softmax\n"

#define PLAIN NET("", "b0", "trainable = false")
#define DROPOUT NET("[drop]\ntype = dropout\ndropout_rate = 0.25\n", "drop", "trainable = false")
#define TRAINS NET("", "b0", "")

/* fake: the fake device; unoptimized: memory_optimization=false */
static nnt_model *load(const char *ini, int fake, int unoptimized) {
  /* the second block's chain is half this small model's FLOPs */
  return tu_load_poisoned("rerun.ini", ini, fake, unoptimized, 0.6);
}

static unsigned index_of(const nnt_model *m, const char *name) {
  return (unsigned)(tu_node(m, name) - m->nodes);
}

static void test_which_rerun(void **state) {
  (void)state;
  nnt_model *m = load(PLAIN, 0, 0);
  /* both additions, each for its skip input (input 1) */
  assert_int_equal(m->n_reruns, 2);
  const nnt_node *a1 = tu_node(m, "r1add"), *a2 = tu_node(m, "r2add");
  assert_int_equal(a1->rerun, 1);
  assert_int_equal(a2->rerun, 2);
  const nnt_rerun *r1 = &m->reruns[0], *r2 = &m->reruns[1];
  assert_int_equal(r1->node, index_of(m, "r1add"));
  assert_int_equal(r1->k, 1);
  assert_int_equal(r2->k, 1);
  /* r1: in, c0, b0 and its relu; r2: all the nodes before r2c1 */
  assert_int_equal(r1->n, 4);
  assert_int_equal(r1->chain[1], index_of(m, "c0"));
  assert_int_equal(r2->n, index_of(m, "r2c1"));
  assert_int_equal(r2->chain[r2->n - 1], index_of(m, "r2c1") - 1);
  /* three slots of one image in r2 (b0's relu, r1b1's, r1b2's), the
   * batch norms and activations and the addition in place */
  assert_int_equal(r2->n_slots, 3);
  assert_int_equal(r2->slot_floats, 24 * 32 * 32);
  /* the blocks' first convolutions are their inputs' last readers */
  assert_true(tu_node(m, "r1c1")->inplace);
  assert_true(tu_node(m, "r2c1")->inplace);
  /* the plan is smaller than without, which the reruns were chosen for */
  size_t with, without;
  nnt_err e = {0};
  assert_int_equal(nnt_model_train_total(m, &with, &e), NNT_OK);
  nnt_rerun_clear(m);
  assert_int_equal(nnt_model_train_total(m, &without, &e), NNT_OK);
  assert_true(with < without);
  assert_false(tu_node(m, "r1c1")->inplace);
  nnt_model_destroy(m);
}

static void test_no_rerun(void **state) {
  (void)state;
  /* dropout in the first skip's chain, and so in the second's: neither */
  nnt_model *m = load(DROPOUT, 0, 0);
  assert_int_equal(m->n_reruns, 0);
  nnt_model_destroy(m);
  /* c0 trains: every node after it passes its derivative back */
  m = load(TRAINS, 0, 0);
  assert_int_equal(m->n_reruns, 0);
  nnt_model_destroy(m);
  /* the fake device, and memory_optimization=false */
  m = load(PLAIN, 1, 0);
  assert_int_equal(m->n_reruns, 0);
  nnt_model_destroy(m);
  m = load(PLAIN, 0, 1);
  assert_int_equal(m->n_reruns, 0);
  nnt_model_destroy(m);
}

/* Two Adam steps: every weight (the head's, and the frozen batch norms'
 * moving statistics) bitwise as with memory_optimization=false; the same
 * for the model whose dropout leaves it without reruns, on the CPU and
 * the fake device. */
static void test_training_bitwise(void **state) {
  (void)state;
  const char *nets[] = {PLAIN, DROPOUT};
  for (int t = 0; t < 2; t++)
    for (int fake = 0; fake < 2; fake++) {
      float *w[2];
      size_t n = 0;
      for (int u = 0; u < 2; u++) {
        nnt_model *m = load(nets[t], fake, u);
        assert_int_equal(m->n_reruns, !t && !fake && !u ? 2 : 0);
        nnt_err e = {0};
        if (nnt_model_train(m, NULL, NULL, &e))
          fail_msg("train: %s", e.msg);
        w[u] = tu_weights_of(m);
        n = m->wpool_floats;
        nnt_model_destroy(m);
      }
      assert_memory_equal(w[0], w[1], n * sizeof(float));
      free(w[0]), free(w[1]);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_which_rerun),
      cmocka_unit_test(test_no_rerun),
      cmocka_unit_test(test_training_bitwise),
  };
  return cmocka_run_group_tests(tests, tu_dir_setup, tu_dir_teardown);
}
