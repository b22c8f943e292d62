/* Delays (nntrainer/delay.c): in the training forward of a frozen
 * residual network, a downsampling block's shortcut (a 1x1 convolution
 * with a stride, then batch normalization) runs at the block's addition
 * from a copy of the positions it reads, made at its own step. Checked:
 * the convolution's forward from that copy is bitwise its forward from the
 * input (the CPU's subsampling product on each code path this CPU runs,
 * and one image's product where the backend has no conv_fwd); which
 * branch a small model delays, that its plan shrinks and that its first
 * convolution still writes over the block's input; that training is
 * bitwise what memory_optimization=false gives (the frozen batch norms'
 * moving statistics included), with every tensor poisoned once its life
 * ends; and where nothing is delayed. */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/model_impl.h"

/* A frozen conv2d of the given window over in (c:h:w, batch in.b), its
 * weights and input random: forward into y; and from the copy
 * (nnt_conv_gather, then the forward with ctx->gathered) into y2. */
typedef struct gcase {
  const char *kernel, *stride, *padding, *filters;
  unsigned c, h, w, b;
  int one; /* one image a group on im2col (nb = 1): gathered without conv_fwd */
} gcase;

static void alloc(nnt_tensor *t, nnt_dim d, nnt_rng *r) {
  t->dim = d;
  t->buf = NULL;
  t->data = calloc(nnt_dim_len(d) ? nnt_dim_len(d) : 1, sizeof(float));
  if (r)
    tu_fill_uniform(r, t->data, nnt_dim_len(d), -1.0f, 1.0f);
}

/* Returns nnt_conv_gathers; where it is 1, checks the bits on k. */
static int gather_case(const gcase *gc, const nnt_kernels *k) {
  nnt_err e = {0};
  nnt_layer *l = NULL;
  assert_int_equal(nnt_layer_create("conv2d", &l, &e), NNT_OK);
  const char *props[] = {"filters", gc->filters, "kernel_size", gc->kernel, "stride", gc->stride,
                         "padding", gc->padding, NULL};
  for (int i = 0; props[i]; i += 2)
    assert_int_equal(nnt_layer_set_property(l, props[i], props[i + 1], &e), NNT_OK);
  nnt_finalize_ctx fc = {0};
  fc.batch = gc->b;
  fc.n_in = 1;
  fc.in_dim[0] = nnt_dim_make(gc->b, gc->c, gc->h, gc->w);
  fc.n_out = 1;
  fc.trainable = 0;
  fc.engine = NNT_ENGINE_CPU;
  if (l->ops->finalize(l, &fc, &e))
    fail_msg("finalize: %s", e.msg);
  int gathers = nnt_conv_gathers(l, k);
  if (gathers) {
    nnt_rng r;
    nnt_rng_seed(&r, gc->c + gc->h);
    nnt_tensor in, out, copy, w[NNT_MAX_WEIGHTS], scratch[NNT_MAX_SCRATCH];
    alloc(&in, fc.in_dim[0], &r);
    alloc(&out, fc.out_dim[0], NULL);
    nnt_dim cd = nnt_dim_make(gc->b, gc->c, fc.out_dim[0].h, fc.out_dim[0].w);
    alloc(&copy, cd, NULL);
    for (unsigned i = 0; i < fc.n_w; i++)
      alloc(&w[i], fc.w[i].dim, &r);
    for (unsigned i = 0; i < fc.n_scratch; i++)
      alloc(&scratch[i], fc.scratch_dim[i], NULL);
    nnt_run_ctx ctx = {.k = k, .n_in = 1, .n_out = 1, .n_w = fc.n_w,
                       .n_scratch = fc.n_scratch, .in = &in, .out = &out, .w = w,
                       .scratch = scratch, .training = 1};
    assert_int_equal(l->ops->forward(l, &ctx), NNT_OK);
    size_t n = nnt_dim_len(fc.out_dim[0]);
    float *y = malloc(n * sizeof *y);
    memcpy(y, out.data, n * sizeof *y);
    memset(out.data, 0, n * sizeof *y);
    assert_int_equal(nnt_conv_gather(l, &ctx, copy.data), NNT_OK);
    /* the copy alone: the input gone, no scratch */
    memset(in.data, 0xff, nnt_dim_len(in.dim) * sizeof(float));
    nnt_run_ctx g = ctx;
    g.in = &copy;
    g.scratch = NULL;
    g.n_scratch = 0;
    g.gathered = 1;
    assert_int_equal(l->ops->forward(l, &g), NNT_OK);
    assert_memory_equal(y, out.data, n * sizeof *y);
    /* a copy of another size is refused */
    copy.dim.w += 1;
    assert_int_equal(l->ops->forward(l, &g), NNT_ERR_INVAL);
    free(y);
    free(in.data), free(out.data), free(copy.data);
    for (unsigned i = 0; i < fc.n_w; i++)
      free(w[i].data);
    for (unsigned i = 0; i < fc.n_scratch; i++)
      free(scratch[i].data);
  }
  nnt_layer_destroy(l);
  return gathers;
}

static void test_gathered_forward(void **state) {
  (void)state;
  const gcase subs[] = {
      {"1,1", "2,2", "0,0", "48", 24, 32, 32, 3, 1}, /* ResNet-18's res2a_sc in small */
      {"1,1", "2,2", "0,0", "20", 7, 31, 29, 2, 1},  /* odd sizes: 16 x 15 positions */
      {"1,1", "2,2", "0,0", "20", 7, 15, 9, 2, 0},   /* 8 x 5: groups of images */
      {"1,1", "2,2", "0,0", "64", 32, 8, 8, 5, 0},   /* 4x4 planes (stage 4's) */
      {"1,1", "3,2", "0,0", "16", 5, 13, 11, 2, 0},  /* unequal strides */
  };
  const nnt_kernels *cpu = nnt_kernels_cpu();
  nnt_kernels gemm = *cpu;
  gemm.conv_fwd = NULL; /* im2col and products */
  for (size_t i = 0; i < NNT_ARRAY_LEN(subs); i++) {
    assert_int_equal(gather_case(&subs[i], &gemm), subs[i].one);
    /* the CPU's subsampling product where it runs here, else the same */
    assert_int_equal(gather_case(&subs[i], cpu), nnt_conv_sub_runs() ? 1 : subs[i].one);
  }
  /* a window wider than 1, padding, no stride: nothing to gather */
  const gcase none[] = {
      {"3,3", "2,2", "1,1", "16", 8, 16, 16, 2, 0},
      {"1,1", "2,2", "1,1", "16", 8, 16, 16, 2, 0},
      {"1,1", "1,1", "0,0", "16", 8, 16, 16, 2, 0},
  };
  for (size_t i = 0; i < NNT_ARRAY_LEN(none); i++) {
    assert_int_equal(gather_case(&none[i], cpu), 0);
    assert_int_equal(gather_case(&none[i], &gemm), 0);
  }
}

/* The subsampling product's every code path (plain C, AVX2, AVX-512: those
 * this CPU runs) on a gathered input against the input. */
static void test_sub_paths(void **state) {
  (void)state;
  const int paths[] = {NNT_BLAS_SSE, NNT_BLAS_AVX2, NNT_BLAS_AVX512};
  nnt_conv_geom g = {.c = 24, .h = 15, .w = 17, .kh = 1, .kw = 1, .sh = 2, .sw = 2, .dh = 1,
                     .dw = 1, .oh = 8, .ow = 9};
  size_t n = 3, f = 40, in_len = (size_t)g.c * g.h * g.w, plane = (size_t)g.oh * g.ow;
  float *x = malloc(n * in_len * sizeof *x), *xg = malloc(n * g.c * plane * sizeof *xg);
  float *w = malloc(f * g.c * sizeof *w), *bias = malloc(f * sizeof *bias);
  float *y = malloc(n * f * plane * sizeof *y), *y2 = malloc(n * f * plane * sizeof *y2);
  nnt_rng r;
  nnt_rng_seed(&r, 9);
  tu_fill_uniform(&r, x, n * in_len, -1.0f, 1.0f);
  tu_fill_uniform(&r, w, f * g.c, -1.0f, 1.0f);
  tu_fill_uniform(&r, bias, f, -1.0f, 1.0f);
  for (size_t i = 0; i < n; i++)
    for (unsigned c = 0; c < g.c; c++)
      for (unsigned p = 0; p < plane; p++)
        xg[(i * g.c + c) * plane + p] =
            x[i * in_len + (size_t)c * g.h * g.w + p / g.ow * 2 * g.w + p % g.ow * 2];
  unsigned ran = 0;
  for (size_t i = 0; i < NNT_ARRAY_LEN(paths); i++) {
    g.gathered = 0;
    if (nnt_cpu_conv_sub_fwd(paths[i], &g, n, f, w, bias, x, y) != NNT_OK)
      continue; /* this CPU cannot run the path */
    g.gathered = 1;
    assert_int_equal(nnt_cpu_conv_sub_fwd(paths[i], &g, n, f, w, bias, xg, y2), NNT_OK);
    assert_memory_equal(y, y2, n * f * plane * sizeof *y);
    ran++;
  }
  assert_true(ran >= 1);
  /* conv_fwd takes a gathered input on the subsampling product alone */
  const nnt_kernels *k = nnt_kernels_cpu();
  nnt_conv_geom s3 = {.c = 4, .h = 8, .w = 8, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .dh = 1,
                      .dw = 1, .pt = 1, .pb = 1, .pl = 1, .pr = 1, .oh = 8, .ow = 8,
                      .gathered = 1};
  assert_int_equal(k->conv_fwd(k, &s3, 1, 16, w, NULL, x, y), NNT_ERR_INVAL);
  free(x), free(xg), free(w), free(bias), free(y), free(y2);
}

#define CONV(NAME, K, S, P, F, FROZEN)                                                    \
  "[" NAME "]\ntype = conv2d\nfilters = " F "\nkernel_size = " K "\nstride = " S          \
  "\npadding = " P "\n" FROZEN "\n"
#define BN(NAME, ACT) "[" NAME "]\ntype = batch_normalization\n" ACT "trainable = false\n"
#define FZ "trainable = false"
/* a stem, then a block that halves the planes and doubles the channels:
 * r1c1 (3x3, stride 2) and r1c2 beside the shortcut SC */
#define NET(FROZEN0, SC)                                                                 \
  "[Model]\ntype = NeuralNetwork\nepochs = 1\nbatch_size = 4\nloss = cross\nseed = 5\n"   \
  "[Optimizer]\ntype = adam\nlearning_rate = 0.01\n"                                     \
  "[in]\ntype = input\ninput_shape = 3:32:32\n"                                          \
  CONV("c0", "3,3", "1,1", "1,1", "24", FROZEN0) BN("b0", "activation = relu\n")         \
  CONV("r1c1", "3,3", "2,2", "1,1", "48", FZ) BN("r1b1", "activation = relu\n")          \
  CONV("r1c2", "3,3", "1,1", "1,1", "48", FZ) BN("r1b2", "")                             \
  "[r1sc]\ntype = conv2d\ninput_layers = b0\nfilters = 48\n" SC "\n" FZ "\n"             \
  BN("r1sb", "")                                                                         \
  "[r1add]\ntype = addition\ninput_layers = r1b2, r1sb\nactivation = relu\n"             \
  "[pool]\ntype = pooling2d\npooling = global_average\n"                                 \
  "[fc]\ntype = fully_connected\nunit = 5\nactivation = softmax\n"

#define SUB "kernel_size = 1,1\nstride = 2,2\npadding = 0,0"
#define PLAIN NET(FZ, SUB)
#define TRAINS NET("", SUB)
/* a 3x3 shortcut with a stride: its input's positions are all read */
#define WIDE NET(FZ, "kernel_size = 3,3\nstride = 2,2\npadding = 1,1")

/* fake: the fake device; unoptimized: memory_optimization=false */
static nnt_model *load(const char *ini, int fake, int unoptimized) {
  /* no reruns (rerun.c): the block's shortcut would rerun from the input */
  return tu_load_poisoned("delay.ini", ini, fake, unoptimized, 1e-9);
}

static unsigned index_of(const nnt_model *m, const char *name) {
  return (unsigned)(tu_node(m, name) - m->nodes);
}

static void test_which_delay(void **state) {
  (void)state;
  nnt_model *m = load(PLAIN, 0, 0);
  assert_int_equal(m->n_reruns, 0);
  assert_int_equal(m->n_delays, 1);
  const nnt_delay *d = &m->delays[0];
  assert_int_equal(d->node, index_of(m, "r1add"));
  assert_int_equal(d->k, 1);
  assert_int_equal(d->n, 2);
  assert_int_equal(d->chain[0], index_of(m, "r1sc"));
  assert_int_equal(d->chain[1], index_of(m, "r1sb"));
  assert_int_equal(tu_node(m, "r1add")->delay, 1);
  assert_int_equal(tu_node(m, "r1sb")->delayed, 1);
  assert_true(tu_node(m, "r1sc")->t_gather >= 0);
  /* the shortcut runs first in node order, yet r1c1 is the block input's
   * last reader and writes over it */
  assert_true(index_of(m, "r1sc") < index_of(m, "r1c1"));
  assert_true(tu_node(m, "r1c1")->inplace);
  /* the copy: 24 channels of 16 x 16, a quarter of the input */
  nnt_dim cd = nnt_delay_dim(tu_node(m, "r1sc"));
  assert_int_equal(nnt_dim_len(cd), 4 * 24 * 16 * 16);
  /* the plan is smaller than without, which the delay was chosen for */
  size_t with, without;
  nnt_err e = {0};
  assert_int_equal(nnt_model_train_total(m, &with, &e), NNT_OK);
  nnt_delay_clear(m);
  assert_int_equal(nnt_model_train_total(m, &without, &e), NNT_OK);
  assert_true(with < without);
  assert_int_equal(tu_node(m, "r1sc")->t_gather, -1);
  nnt_model_destroy(m);
}

static void test_no_delay(void **state) {
  (void)state;
  /* c0 trains: every node after it passes its derivative back */
  nnt_model *m = load(TRAINS, 0, 0);
  assert_int_equal(m->n_delays, 0);
  nnt_model_destroy(m);
  /* a shortcut that reads every position */
  m = load(WIDE, 0, 0);
  assert_int_equal(m->n_delays, 0);
  nnt_model_destroy(m);
  /* the fake device, and memory_optimization=false */
  m = load(PLAIN, 1, 0);
  assert_int_equal(m->n_delays, 0);
  nnt_model_destroy(m);
  m = load(PLAIN, 0, 1);
  assert_int_equal(m->n_delays, 0);
  nnt_model_destroy(m);
}

/* Two Adam steps: every weight (the head's, and the frozen batch norms'
 * moving statistics, the shortcut's among them) bitwise as with
 * memory_optimization=false, on the CPU and the fake device. */
static void test_training_bitwise(void **state) {
  (void)state;
  for (int fake = 0; fake < 2; fake++) {
    float *w[2];
    size_t n = 0;
    for (int u = 0; u < 2; u++) {
      nnt_model *m = load(PLAIN, fake, u);
      assert_int_equal(m->n_delays, !fake && !u ? 1 : 0);
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

/* A loss that is not finite is replayed layer by layer (train_check.c)
 * through the same forward as training: the delayed branch runs at its
 * addition's step and its outputs are checked there, not at its own step.
 * The head's weight and bias overflow its output (its inputs come from a
 * relu): the head is named. (With the layer's own forward the replay
 * fails here; with reruns it read a skip input already written over, which
 * in these small models is still finite: no test catches that case.) */
static void test_replay_names_the_head(void **state) {
  (void)state;
  nnt_model *m = load(PLAIN, 0, 0);
  assert_int_equal(m->n_delays, 1);
  tu_overflow_weights(m, "fc");
  nnt_err e = {0};
  assert_int_equal(nnt_model_train(m, NULL, NULL, &e), NNT_ERR_RANGE);
  tu_assert_contains(e.msg, ": layer 'fc' (fully_connected) is the first whose output is not "
                            "finite");
  nnt_model_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gathered_forward),
      cmocka_unit_test(test_sub_paths),
      cmocka_unit_test(test_which_delay),
      cmocka_unit_test(test_no_delay),
      cmocka_unit_test(test_training_bitwise),
      cmocka_unit_test(test_replay_names_the_head),
  };
  return cmocka_run_group_tests(tests, tu_dir_setup, tu_dir_teardown);
}
