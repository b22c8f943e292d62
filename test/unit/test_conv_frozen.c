/* conv2d's forward scratch for a frozen layer on the CPU (layers/conv_scratch.c,
 * above nnt_conv_wino_fwd_scratch): ResNet-18's four stages and a downsampling
 * layer, frozen against trainable, by their planned scratch; a frozen
 * stage 1 in F(4x4, 3x3)'s scratch for one image (below one image's
 * columns), bitwise the trainable layer's output, and refused rather
 * than run on a backend without conv_wino. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/compute/kernels.h"
#include "nntrainer/layer.h"

typedef struct layer_run {
  nnt_layer *l;
  nnt_finalize_ctx fc;
  nnt_tensor in, out, w[NNT_MAX_WEIGHTS], scratch[NNT_MAX_SCRATCH];
  nnt_run_ctx ctx;
} layer_run;

/* A 3x3 conv2d (stride s, padding 1, no bias) of f filters over b:c:h:w. */
static void setup(layer_run *r, unsigned b, unsigned c, unsigned h, unsigned f, const char *s,
                  int trainable) {
  nnt_err e = {0};
  memset(r, 0, sizeof *r);
  assert_int_equal(nnt_layer_create("conv2d", &r->l, &e), NNT_OK);
  char fs[16];
  snprintf(fs, sizeof fs, "%u", f);
  const char *props[] = {"filters", fs, "kernel_size", "3,3", "stride", s, "padding", "1,1",
                         "disable_bias", "true", NULL};
  for (int i = 0; props[i]; i += 2)
    assert_int_equal(nnt_layer_set_property(r->l, props[i], props[i + 1], &e), NNT_OK);
  r->fc.batch = b;
  r->fc.n_in = 1;
  r->fc.in_dim[0] = nnt_dim_make(b, c, h, h);
  r->fc.n_out = 1;
  r->fc.trainable = trainable;
  r->fc.engine = NNT_ENGINE_CPU;
  if (r->l->ops->finalize(r->l, &r->fc, &e))
    fail_msg("finalize: %s", e.msg);
}

static size_t scratch0(const layer_run *r) { return nnt_dim_len(r->fc.scratch_dim[0]); }

static size_t columns(const layer_run *r) { /* one image's: patch x plane */
  return (size_t)r->fc.in_dim[0].c * 9 * r->fc.out_dim[0].h * r->fc.out_dim[0].w;
}

static void alloc(nnt_tensor *t, nnt_dim d, nnt_rng *g) {
  t->dim = d;
  t->data = calloc(nnt_dim_len(d), sizeof(float));
  if (g)
    tu_fill_uniform(g, t->data, nnt_dim_len(d), -1.0f, 1.0f);
}

/* Tensors for the forward, the input and weights from seed. */
static void bind(layer_run *r, const nnt_kernels *k, unsigned seed) {
  nnt_rng g;
  nnt_rng_seed(&g, seed);
  alloc(&r->in, r->fc.in_dim[0], &g);
  alloc(&r->out, r->fc.out_dim[0], NULL);
  for (unsigned i = 0; i < r->fc.n_w; i++)
    alloc(&r->w[i], r->fc.w[i].dim, &g);
  for (unsigned i = 0; i < r->fc.n_scratch; i++)
    alloc(&r->scratch[i], r->fc.scratch_dim[i], NULL);
  r->ctx = (nnt_run_ctx){.k = k, .n_in = 1, .n_out = 1, .n_w = r->fc.n_w,
                         .n_scratch = r->fc.n_scratch, .in = &r->in, .out = &r->out,
                         .w = r->w, .scratch = r->scratch, .training = 1};
}

static void teardown(layer_run *r) {
  free(r->in.data), free(r->out.data);
  for (unsigned i = 0; i < r->fc.n_w; i++)
    free(r->w[i].data);
  for (unsigned i = 0; i < r->fc.n_scratch; i++)
    free(r->scratch[i].data);
  nnt_layer_destroy(r->l);
}

/* Stage 1 (64 channels of 32x32): F(4x4, 3x3) over one image's 64 tiles,
 * 1.69 MiB at batch 32 instead of one image's 2.25 MiB of columns, in
 * which the trainable layer runs the same chunks: the same bits. */
static void test_stage1(void **state) {
  (void)state;
  layer_run fz, tr;
  setup(&fz, 32, 64, 32, 64, "1,1", 0);
  setup(&tr, 32, 64, 32, 64, "1,1", 1);
  assert_int_equal(scratch0(&fz), nnt_wino4_scratch(64, 64, 64));
  assert_true(scratch0(&fz) < columns(&fz));
  assert_int_equal(scratch0(&tr), columns(&tr));
  teardown(&fz), teardown(&tr);
  const nnt_kernels *cpu = nnt_kernels_cpu();
  setup(&fz, 16, 64, 32, 64, "1,1", 0); /* the least batch with room (half the input) */
  setup(&tr, 16, 64, 32, 64, "1,1", 1);
  assert_true(scratch0(&fz) < scratch0(&tr));
  bind(&fz, cpu, 3), bind(&tr, cpu, 3);
  assert_int_equal(fz.l->ops->forward(fz.l, &fz.ctx), NNT_OK);
  assert_int_equal(tr.l->ops->forward(tr.l, &tr.ctx), NNT_OK);
  assert_memory_equal(fz.out.data, tr.out.data, nnt_tensor_len(&fz.out) * sizeof(float));
  /* without conv_wino its scratch holds no columns: refused */
  nnt_kernels bare = *cpu;
  bare.conv_wino = NULL;
  fz.ctx.k = &bare;
  assert_int_equal(fz.l->ops->forward(fz.l, &fz.ctx), NNT_ERR_INVAL);
  fz.ctx.out = &fz.in; /* in place too */
  assert_int_equal(fz.l->ops->forward(fz.l, &fz.ctx), NNT_ERR_INVAL);
  teardown(&fz), teardown(&tr);
}

/* Stage 2 (128 of 16x16, 4 MiB at batch 32): F(2x2, 3x3) over groups of
 * 4 images, all 16 slices in one pass (2 MiB, half the input) instead of
 * F(4x4, 3x3)'s 4.5 MiB; stage 3 (256 of 8x8) as a trainable layer;
 * stage 4 (512 of 4x4) on im2col (groups of images, 2 MiB at most)
 * instead of 10 MiB of Winograd, which counted the filters' gradient. */
static void test_stages(void **state) {
  (void)state;
  layer_run fz, tr;
  setup(&fz, 32, 128, 16, 128, "1,1", 0);
  setup(&tr, 32, 128, 16, 128, "1,1", 1);
  assert_int_equal(scratch0(&fz), 2 * nnt_wino_min_scratch(128, 128, 4 * 64));
  assert_true(scratch0(&tr) > scratch0(&fz));
  /* it runs: the forward finds its conv_wino scratch */
  bind(&fz, nnt_kernels_cpu(), 4);
  assert_int_equal(fz.l->ops->forward(fz.l, &fz.ctx), NNT_OK);
  teardown(&fz), teardown(&tr);
  setup(&fz, 32, 256, 8, 256, "1,1", 0);
  setup(&tr, 32, 256, 8, 256, "1,1", 1);
  assert_int_equal(scratch0(&fz), scratch0(&tr));
  teardown(&fz), teardown(&tr);
  setup(&fz, 32, 512, 4, 512, "1,1", 0);
  setup(&tr, 32, 512, 4, 512, "1,1", 1);
  assert_true(scratch0(&fz) * sizeof(float) <= ((size_t)2 << 20));
  assert_int_equal(scratch0(&fz) % (512 * 9), 0); /* columns of whole images */
  assert_true(scratch0(&tr) > 4 * scratch0(&fz));
  teardown(&fz), teardown(&tr);
}

/* A downsampling 3x3 layer (ResNet-18's res2a_c1): one image's columns at
 * a time where it is frozen, two (one a compute thread) where it trains. */
static void test_strided(void **state) {
  (void)state;
  layer_run fz, tr;
  setup(&fz, 32, 64, 32, 128, "2,2", 0);
  setup(&tr, 32, 64, 32, 128, "2,2", 1);
  assert_int_equal(scratch0(&fz), columns(&fz));
  assert_int_equal(scratch0(&tr), 2 * columns(&tr));
  teardown(&fz), teardown(&tr);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stage1),
      cmocka_unit_test(test_stages),
      cmocka_unit_test(test_strided),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
