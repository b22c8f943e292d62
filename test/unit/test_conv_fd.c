/* conv2d, conv1d and pooling2d against central finite differences of
 * J = sum(out * R), over window combinations test_layers_fd.c leaves out
 * (stride with dilation, asymmetric strides and padding, padded pooling),
 * plus gradient overwrite, frozen weights and finalize errors. */
#include "fd_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/layer.h"

static void fd(const char *type, const char *const *props, nnt_dim in, nnt_dim want_out,
               float eps) {
  fd_layer_check(type, props, in, &want_out, eps, 3e-3, 1);
}

#define D nnt_dim_make

static void test_conv2d(void **state) {
  (void)state;
  /* stride 2 with dilation 2, same padding, c=2, filters=3, batch 2 */
  const char *a[] = {"filters", "3", "kernel_size", "3,3", "stride", "2,2", "dilation", "2,2",
                     "padding", "same", NULL};
  fd("conv2d", a, D(2, 2, 5, 7), D(2, 3, 3, 4), 1e-2f);
  /* asymmetric stride and kernel, explicit "p,p" padding */
  const char *b[] = {"filters", "3", "kernel_size", "3,2", "stride", "1,2", "padding", "0,1",
                     NULL};
  fd("conv2d", b, D(2, 2, 5, 7), D(2, 3, 3, 4), 1e-2f);
  /* explicit t,b,l,r with stride 2 */
  const char *c[] = {"filters", "2", "kernel_size", "3", "stride", "2", "padding", "2,0,1,2",
                     NULL};
  fd("conv2d", c, D(2, 2, 5, 7), D(2, 2, 3, 4), 1e-2f);
  /* 1x1 kernel, l2norm regularizer props accepted */
  const char *d[] = {"filters", "4", "kernel_size", "1", "weight_regularizer", "l2norm",
                     "weight_regularizer_constant", "0.01", NULL};
  fd("conv2d", d, D(2, 3, 3, 2), D(2, 4, 3, 2), 1e-2f);
  /* 1x1 kernel with strides 2 and 3 (ResNet's shortcuts; the CPU's
   * forward on its subsampling product where nnt_conv_sub_runs says) */
  const char *sc[] = {"filters", "7", "kernel_size", "1", "stride", "2,3", NULL};
  fd("conv2d", sc, D(2, 5, 7, 9), D(2, 7, 4, 3), 1e-2f);
  /* its weight gradient in halves of 2 and 3 images, groups of 3 */
  fd("conv2d", sc, D(5, 3, 4, 4), D(5, 7, 2, 2), 1e-2f);
  /* 16 channels, 3x3, stride 2 (ResNet's downsampling): the CPU's forward
   * and derivative on its strided kernels where nnt_conv_str_runs says
   * (AVX-512) */
  const char *s2[] = {"filters", "16", "kernel_size", "3", "stride", "2", "padding", "1",
                      NULL};
  fd("conv2d", s2, D(1, 16, 8, 16), D(1, 16, 4, 8), 1e-2f);
  /* stride 1 with a kernel 4 or 5 wide: the direct backward on the CPU
   * (conv_bwd_w; conv_bwd_x from 4 input channels) */
  const char *e5[] = {"filters", "3", "kernel_size", "5,5", "padding", "same", NULL};
  fd("conv2d", e5, D(2, 4, 6, 7), D(2, 3, 6, 7), 1e-2f);
  const char *e4[] = {"filters", "5", "kernel_size", "3,4", "padding", "1,0,2,1", NULL};
  fd("conv2d", e4, D(2, 3, 5, 6), D(2, 5, 4, 6), 1e-2f);
  /* 24 channels and filters, 3x3, stride 1: the CPU's Winograd derivative
   * and weight gradient (conv_wino, conv_wino_dw; test_conv_wino checks
   * this shape takes them; its forward, too few tiles for Winograd, is
   * im2col's), odd width, uneven padding */
  const char *w[] = {"filters", "24", "kernel_size", "3", "padding", "1,1,0,1", NULL};
  fd("conv2d", w, D(1, 24, 8, 8), D(1, 24, 8, 7), 1e-2f);
}

static void test_conv1d(void **state) {
  (void)state;
  const char *a[] = {"filters", "3", "kernel_size", "3", "dilation", "2", "padding", "2,1", NULL};
  fd("conv1d", a, D(2, 2, 1, 9), D(2, 3, 1, 8), 1e-2f);
  const char *b[] = {"filters", "2", "kernel_size", "4", "stride", "3", NULL};
  fd("conv1d", b, D(2, 2, 1, 11), D(2, 2, 1, 3), 1e-2f);
  const char *c5[] = {"filters", "2", "kernel_size", "5", NULL}; /* the direct backward, both */
  fd("conv1d", c5, D(2, 4, 1, 9), D(2, 2, 1, 5), 1e-2f);
}

static void test_pooling2d(void **state) {
  (void)state;
  const char *modes[] = {"max", "average"};
  for (int i = 0; i < 2; i++) {
    /* padded windows: max ignores padding, average counts it */
    const char *a[] = {"pooling", modes[i], "pool_size", "3", "stride", "2", "padding", "1",
                       NULL};
    fd("pooling2d", a, D(2, 2, 5, 7), D(2, 2, 3, 4), 1e-3f);
    /* overlapping windows, asymmetric pool and stride */
    const char *b[] = {"pooling", modes[i], "pool_size", "2,3", "stride", "1,2", NULL};
    fd("pooling2d", b, D(2, 2, 5, 7), D(2, 2, 4, 3), 1e-3f);
    /* the defaults: pool_size 2,2 and NNTrainer's stride 1 (not the pool
     * size), padding valid */
    const char *c[] = {"pooling", modes[i], NULL};
    fd("pooling2d", c, D(1, 3, 5, 7), D(1, 3, 4, 6), 1e-3f);
  }
  const char *g[] = {"pooling", "global_max", NULL};
  fd("pooling2d", g, D(2, 2, 5, 7), D(2, 2, 1, 1), 1e-3f);
  const char *ga[] = {"pooling", "global_average", NULL};
  fd("pooling2d", ga, D(2, 2, 5, 7), D(2, 2, 1, 1), 1e-3f);
}

/* Average pooling divides by the whole window, padding included
 * (PyTorch's count_include_pad=True). */
static void test_average_counts_padding(void **state) {
  (void)state;
  fd_harness h;
  const char *a[] = {"pooling", "average", "pool_size", "2", "stride", "2", "padding", "1",
                     NULL};
  fd_setup(&h, "pooling2d", a, D(1, 1, 2, 2), 1);
  for (int i = 0; i < 4; i++)
    h.in.data[i] = 4.0f;
  assert_int_equal(h.l->ops->forward(h.l, &h.ctx), NNT_OK);
  assert_int_equal(nnt_tensor_len(&h.out), 4);
  for (int i = 0; i < 4; i++)
    assert_float_equal(h.out.data[i], 1.0f, 1e-6);
  fd_teardown(&h);
}

/* A frozen filter (gw data NULL) still gets its bias gradient and dX. */
static void test_conv_frozen_weight(void **state) {
  (void)state;
  fd_harness h;
  const char *a[] = {"filters", "2", "kernel_size", "3", "padding", "same", NULL};
  fd_setup(&h, "conv2d", a, D(2, 1, 4, 4), 1);
  fd_objective(&h);
  memcpy(h.dout.data, h.r, nnt_tensor_len(&h.dout) * sizeof(float));
  float *keep = h.gw[0].data;
  h.gw[0].data = NULL;
  assert_int_equal(h.l->ops->calc_gradient(h.l, &h.ctx), NNT_OK);
  assert_int_equal(h.l->ops->calc_derivative(h.l, &h.ctx), NNT_OK);
  h.gw[0].data = keep;
  for (int f = 0; f < 2; f++) {
    double s = 0;
    for (unsigned b = 0; b < 2; b++)
      for (int i = 0; i < 16; i++)
        s += h.dout.data[(b * 2 + f) * 16 + i];
    assert_float_equal(h.gw[1].data[f], s, 1e-4);
  }
  fd_teardown(&h);
}

/* A pointwise conv (1x1, stride 1, no padding) skips im2col and col2im
 * and asks for no scratch; its output, filter gradient (accumulated over
 * the images) and dX must be bitwise those of explicit im2col + gemm (+
 * col2im) through the same kernel table. A 1x1 stride-2 conv still gets
 * its two column buffers. */
static void pointwise_case(const char *type, const char *const *props, nnt_dim in) {
  fd_harness h;
  fd_setup(&h, type, props, in, 0);
  /* no scratch but the output staging of a forward over its own input
   * (for an output no larger than the input) */
  assert_int_equal(h.fc.n_scratch, h.fc.out_dim[0].c <= in.c);
  if (h.fc.n_scratch)
    assert_int_equal(h.fc.scratch_life[0], NNT_SCRATCH_INPLACE);
  const nnt_kernels *k = h.ctx.k;
  unsigned f = h.fc.out_dim[0].c;
  size_t plane = (size_t)in.h * in.w, in_len = (size_t)in.c * plane, out_len = f * plane;
  nnt_conv_geom g = {.c = in.c, .h = in.h, .w = in.w, .kh = 1, .kw = 1, .sh = 1, .sw = 1,
                     .dh = 1, .dw = 1, .oh = in.h, .ow = in.w};
  size_t nin = nnt_dim_len(in), nout = nnt_dim_len(h.fc.out_dim[0]), nw = (size_t)f * in.c;
  float *col = calloc(in_len, sizeof(float)), *y = calloc(nout, sizeof(float)),
        *gw = calloc(nw, sizeof(float)), *dx = calloc(nin, sizeof(float));
  assert_int_equal(h.l->ops->forward(h.l, &h.ctx), NNT_OK);
  nnt_rng r;
  nnt_rng_seed(&r, 7);
  tu_fill_uniform(&r, h.dout.data, nout, -1, 1);
  memset(h.din.data, 0x7f, nin * sizeof(float)); /* junk the layer must overwrite */
  assert_int_equal(h.l->ops->calc_gradient(h.l, &h.ctx), NNT_OK);
  assert_int_equal(h.l->ops->calc_derivative(h.l, &h.ctx), NNT_OK);
  assert_int_equal(k->fill(k, nin, 0.0f, dx), NNT_OK);
  for (unsigned b = 0; b < in.b; b++) {
    assert_int_equal(k->im2col(k, &g, 1, h.in.data + b * in_len, col), NNT_OK);
    assert_int_equal(k->gemm(k, 0, 0, f, plane, in.c, 1.0f, h.w[0].data, in.c, col, plane, 0.0f,
                             y + b * out_len, plane),
                     NNT_OK);
    if (h.fc.n_w > 1)
      assert_int_equal(k->add_col_vec(k, f, plane, h.w[1].data, y + b * out_len), NNT_OK);
    assert_int_equal(k->gemm(k, 0, 1, f, in.c, plane, 1.0f, h.dout.data + b * out_len, plane, col,
                             plane, b ? 1.0f : 0.0f, gw, in.c),
                     NNT_OK);
    assert_int_equal(k->gemm(k, 1, 0, in.c, plane, f, 1.0f, h.w[0].data, in.c,
                             h.dout.data + b * out_len, plane, 0.0f, col, plane),
                     NNT_OK);
    assert_int_equal(k->col2im(k, &g, 1, col, dx + b * in_len), NNT_OK);
  }
  assert_memory_equal(h.out.data, y, nout * sizeof(float));
  assert_memory_equal(h.gw[0].data, gw, nw * sizeof(float));
  assert_memory_equal(h.din.data, dx, nin * sizeof(float));
  free(col), free(y), free(gw), free(dx);
  fd_teardown(&h);
}

static void test_pointwise_bitwise(void **state) {
  (void)state;
  const char *a[] = {"filters", "7", "kernel_size", "1", NULL};
  pointwise_case("conv2d", a, D(3, 5, 4, 6));
  const char *b[] = {"filters", "4", "kernel_size", "1,1", "stride", "1,1", "padding", "same",
                     "disable_bias", "true", NULL};
  pointwise_case("conv2d", b, D(2, 6, 3, 3));
  const char *c[] = {"filters", "3", "kernel_size", "1", NULL};
  pointwise_case("conv1d", c, D(2, 5, 1, 9));
  /* not pointwise: stride 2, or padding, keeps its column buffers (and,
   * with both images in one gemm, the permuted output; the backward, whose
   * dY of 2 images would not fit in one image's columns, runs one image at
   * a time with no dY scratch); the stride-2 one's weight gradient runs in
   * halves of the batch (conv_impl.h CONV_HALVES) in a scratch of its own:
   * each half's group of 1 image's columns (3 channels, 2x2; none where
   * the CPU's own product takes it, conv_sub_dw), and the second half's
   * dW */
  const char *s2[] = {"filters", "4", "kernel_size", "1", "stride", "2", NULL};
  const char *p1[] = {"filters", "4", "kernel_size", "1", "padding", "1", NULL};
  const char *const *np[] = {s2, p1};
  for (int i = 0; i < 2; i++) {
    fd_harness h;
    fd_setup(&h, "conv2d", np[i], D(2, 3, 4, 4), 0);
    assert_int_equal(h.fc.n_scratch, i ? 3 : 4);
    assert_int_equal(h.fc.scratch_dim[2].h, 4); /* the forward's output of 2 images */
    if (!i) {
      nnt_conv_geom g = {.c = 3, .h = 4, .w = 4, .kh = 1, .kw = 1, .sh = 2, .sw = 2,
                         .oh = 2, .ow = 2, .dh = 1, .dw = 1};
      int own = nnt_conv_sub_dw_take(&g, 4) && nnt_conv_sub_dx_runs();
      assert_int_equal(nnt_dim_len(h.fc.scratch_dim[3]), (own ? 0 : 2 * 3 * 4) + 4 * 3);
      assert_int_equal(h.fc.scratch_life[3], NNT_SCRATCH_BWD);
    }
    fd_teardown(&h);
  }
}

/* A subsampling 1x1 layer's weight gradient in halves of the batch
 * (conv_impl.h CONV_HALVES: 5 images, halves of 2 and 3, groups of up
 * to 3 with dY gathered): against sums in double, and the same bits on
 * one thread and two. */
static void test_shortcut_halves(void **state) {
  (void)state;
  const char *a[] = {"filters", "24", "kernel_size", "1", "stride", "2", NULL};
  const unsigned n = 5, c = 16, f = 24, hw = 8, o = 4;
  fd_harness h;
  fd_setup(&h, "conv2d", a, D(n, c, hw, hw), 0);
  nnt_err e = {0}; /* one thread, the BLAS's kernels chosen as a run does */
  if (nnt_cpu_set_threads(1, &e) || h.ctx.k->prepare(h.ctx.k, &e))
    fail_msg("%s", e.msg);
  size_t nout = (size_t)n * f * o * o, nw = (size_t)f * c;
  nnt_rng r;
  nnt_rng_seed(&r, 19);
  tu_fill_uniform(&r, h.dout.data, nout, -1, 1);
  assert_int_equal(h.l->ops->calc_gradient(h.l, &h.ctx), NNT_OK);
  float *one = malloc(nw * sizeof *one);
  memcpy(one, h.gw[0].data, nw * sizeof *one);
  for (unsigned fi = 0; fi < f; fi++)
    for (unsigned ci = 0; ci < c; ci++) {
      double want = 0, size = 0;
      for (unsigned b = 0; b < n; b++)
        for (unsigned y = 0; y < o; y++)
          for (unsigned x = 0; x < o; x++) {
            double t = (double)h.dout.data[((b * f + fi) * o + y) * o + x] *
                       h.in.data[((b * c + ci) * hw + 2 * y) * hw + 2 * x];
            want += t, size += fabs(t);
          }
      if (!(fabs(one[fi * c + ci] - want) <= 1e-5 * (size > 1 ? size : 1)))
        fail_msg("dW[%u][%u] %g, want %g", fi, ci, (double)one[fi * c + ci], want);
    }
  tu_two_threads();
  assert_int_equal(h.l->ops->calc_gradient(h.l, &h.ctx), NNT_OK);
  assert_true(tu_one_thread() > 0); /* the halves went to the workers */
  assert_memory_equal(h.gw[0].data, one, nw * sizeof *one);
  free(one);
  fd_teardown(&h);
}

/* |a - b| <= tol * max(1, |b|) everywhere, else the first index. */
static void assert_close(const float *a, const float *b, size_t n, double tol) {
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - b[i]), m = fabs((double)b[i]);
    if (d > tol * (m > 1 ? m : 1))
      fail_msg("[%zu]: %.9g vs %.9g", i, a[i], b[i]);
  }
}

/* Images in groups: an 8x8 output plane takes ceil(192 / 64) = 3 images
 * per gemm (layers/conv.c's CONV_GROUP_COLS), so a batch of 7 runs as
 * 3 + 3 + 1 (a remainder group). The backward's scratch stays within one
 * image's columns: 8 filters' dY of 2 images (1024 floats) and one
 * channel's columns (1152) pass 18 x 64, so it runs one image at a time.
 * The output, dW, db and dX agree with one image at a time (explicit
 * im2col, gemm, col2im) up to summation order; a batch of 1 has no
 * permute scratch. */
static void test_image_groups(void **state) {
  (void)state;
  const char *a[] = {"filters", "8", "kernel_size", "3", NULL};
  const nnt_dim in = D(7, 2, 10, 10);
  fd_harness h;
  fd_setup(&h, "conv2d", a, in, 0);
  const unsigned f = 8, patch = 18, plane = 8 * 8, nb = 3;
  assert_int_equal(h.fc.n_scratch, 3);
  for (unsigned s = 0; s < 3; s++) { /* columns, the backward's columns, output */
    nnt_dim d = h.fc.scratch_dim[s];
    assert_int_equal(d.h, s < 2 ? patch : f);
    assert_int_equal(d.w, s == 1 ? plane : plane * nb);
  }
  const nnt_kernels *k = h.ctx.k;
  nnt_conv_geom g = {.c = 2, .h = 10, .w = 10, .kh = 3, .kw = 3, .sh = 1, .sw = 1,
                     .dh = 1, .dw = 1, .oh = 8, .ow = 8};
  size_t in_len = 2 * 10 * 10, out_len = (size_t)f * plane, nin = in.b * in_len;
  size_t nout = in.b * out_len, nw = (size_t)f * patch;
  float *col = calloc((size_t)patch * plane, sizeof(float)), *y = calloc(nout, sizeof(float));
  float *gw = calloc(nw, sizeof(float)), *gb = calloc(f, sizeof(float));
  float *dx = calloc(nin, sizeof(float));
  assert_int_equal(h.l->ops->forward(h.l, &h.ctx), NNT_OK);
  nnt_rng r;
  nnt_rng_seed(&r, 9);
  tu_fill_uniform(&r, h.dout.data, nout, -1, 1);
  memset(h.din.data, 0x7f, nin * sizeof(float));
  assert_int_equal(h.l->ops->calc_gradient(h.l, &h.ctx), NNT_OK);
  assert_int_equal(h.l->ops->calc_derivative(h.l, &h.ctx), NNT_OK);
  for (unsigned b = 0; b < in.b; b++) {
    const float *dy = h.dout.data + b * out_len;
    assert_int_equal(k->im2col(k, &g, 1, h.in.data + b * in_len, col), NNT_OK);
    assert_int_equal(k->gemm(k, 0, 0, f, plane, patch, 1.0f, h.w[0].data, patch, col, plane,
                             0.0f, y + b * out_len, plane), NNT_OK);
    assert_int_equal(k->add_col_vec(k, f, plane, h.w[1].data, y + b * out_len), NNT_OK);
    assert_int_equal(k->gemm(k, 0, 1, f, patch, plane, 1.0f, dy, plane, col, plane,
                             b ? 1.0f : 0.0f, gw, patch), NNT_OK);
    assert_int_equal(k->sum_cols(k, f, plane, dy, b ? 1.0f : 0.0f, gb), NNT_OK);
    assert_int_equal(k->gemm(k, 1, 0, patch, plane, f, 1.0f, h.w[0].data, patch, dy, plane, 0.0f,
                             col, plane), NNT_OK);
    assert_int_equal(k->col2im(k, &g, 1, col, dx + b * in_len), NNT_OK);
  }
  assert_close(h.out.data, y, nout, 1e-5);
  assert_close(h.gw[0].data, gw, nw, 1e-4);
  assert_close(h.gw[1].data, gb, f, 1e-4);
  assert_close(h.din.data, dx, nin, 1e-5);
  free(col), free(y), free(gw), free(gb), free(dx);
  fd_teardown(&h);
  fd_setup(&h, "conv2d", a, D(1, 2, 10, 10), 0);
  assert_int_equal(h.fc.n_scratch, 2);
  assert_int_equal(h.fc.scratch_dim[0].w, plane);
  fd_teardown(&h);
}

/* One case of test_channel_blocks: the layer's backward groups of bnb
 * images and blocks of bc channels, as its scratch says. */
typedef struct block_case {
  unsigned c, h, w, filters, kh, kw, pt, pb, pl, pr, batch;
  unsigned bnb, bc; /* what finalize must choose */
  unsigned stride;  /* 0: 1 */
} block_case;

/* The backward in channel blocks (layers/conv.c): each group's dW columns
 * and dcol rows come a block of channels at a time, im2col and col2im of
 * the block reading and writing its channels inside the images. Against
 * the unblocked grouped backward, run here through the same kernel table
 * (dY gathered with permute3, im2col of the group's every channel, one
 * gemm each for dW and dcol, col2im), dX and db are bitwise the same and
 * dW agrees up to rounding (1e-5). The scratch, a block's columns plus
 * the gathered dY, is at most one image's columns, or for a strided
 * layer the forward's columns of nb images (and then more than one
 * image's: the strided case uses that room). Groups of 2 in blocks of 4,
 * 4 and 3 channels with a padded window; groups of 2 in blocks of 1; one
 * image at a time; groups of 2 in blocks of 3, 3 and 1 with a 2x3 window;
 * groups of 13 in blocks of 12 with stride 2 (the groups with the widest
 * narrow side: 2 x 64 deep by 4 x 9 wide beats 3 x 64 by 3 x 9); groups
 * of 4 in one block of 48 channels with stride 2, whose weight gradient
 * runs in two parts of 24 (the widest parts at least CONV_BWD_DEEP = 64
 * deep: 4 x 16 deep by 24 x 9 wide beats 5 x 16 by 12 x 9); each with a
 * remainder group; finite differences on the 2x3 window. */
static void test_channel_blocks(void **state) {
  (void)state;
  const block_case cs[] = {
      {11, 9, 8, 2, 3, 3, 1, 0, 0, 2, 7, 2, 4, 0},
      {4, 10, 10, 4, 3, 3, 0, 0, 0, 0, 7, 2, 1, 0},
      {2, 10, 10, 8, 3, 3, 0, 0, 0, 0, 7, 1, 2, 0},
      {7, 5, 12, 2, 2, 3, 0, 1, 1, 1, 5, 2, 3, 0},
      {24, 6, 6, 8, 3, 3, 1, 1, 1, 1, 25, 13, 12, 2},
      {48, 8, 8, 16, 3, 3, 1, 1, 1, 1, 5, 4, 48, 2},
  };
  for (size_t t = 0; t < NNT_ARRAY_LEN(cs); t++) {
    const block_case *q = &cs[t];
    unsigned st = q->stride ? q->stride : 1;
    char fs[16], ks[16], pad[32], sd[32];
    snprintf(fs, sizeof fs, "%u", q->filters);
    snprintf(ks, sizeof ks, "%u,%u", q->kh, q->kw);
    snprintf(pad, sizeof pad, "%u,%u,%u,%u", q->pt, q->pb, q->pl, q->pr);
    snprintf(sd, sizeof sd, "%u,%u", st, st);
    const char *a[] = {"filters", fs, "kernel_size", ks, "padding", pad, "stride", sd, NULL};
    nnt_conv_geom g = {.c = q->c, .h = q->h, .w = q->w, .kh = q->kh, .kw = q->kw, .sh = st,
                       .sw = st, .dh = 1, .dw = 1, .pt = q->pt, .pb = q->pb, .pl = q->pl,
                       .pr = q->pr};
    g.oh = (q->h + q->pt + q->pb - q->kh) / st + 1;
    g.ow = (q->w + q->pl + q->pr - q->kw) / st + 1;
    const nnt_dim in = D(q->batch, q->c, q->h, q->w);
    fd_harness h;
    fd_setup(&h, "conv2d", a, in, 0);
    const nnt_kernels *k = h.ctx.k;
    unsigned f = q->filters, taps = q->kh * q->kw, patch = q->c * taps;
    size_t plane = (size_t)g.oh * g.ow, in_len = (size_t)q->c * q->h * q->w;
    size_t out_len = f * plane, nin = nnt_dim_len(in), nout = q->batch * out_len;
    size_t nw = (size_t)f * patch;
    /* the backward's scratch: a block's columns, then dY when gathered */
    nnt_dim bcol = h.fc.scratch_dim[1];
    assert_int_equal(bcol.h, q->bc * taps);
    assert_int_equal(bcol.w, plane * q->bnb);
    size_t bwd = nnt_dim_len(bcol);
    if (q->bnb > 1) {
      assert_int_equal(h.fc.n_scratch, 4);
      assert_int_equal(h.fc.scratch_dim[3].h, f);
      assert_int_equal(h.fc.scratch_dim[3].w, plane * q->bnb);
      bwd += nnt_dim_len(h.fc.scratch_dim[3]);
    }
    size_t nb = h.fc.scratch_dim[0].w / plane; /* the forward's images per group */
    assert_true(bwd <= (size_t)patch * plane * (st > 1 ? nb : 1));
    if (st > 1)
      assert_true(bwd > (size_t)patch * plane);
    assert_int_equal(h.l->ops->forward(h.l, &h.ctx), NNT_OK);
    nnt_rng r;
    nnt_rng_seed(&r, 11);
    tu_fill_uniform(&r, h.dout.data, nout, -1, 1);
    memset(h.din.data, 0x7f, nin * sizeof(float));
    memset(h.gw[0].data, 0x7f, nw * sizeof(float));
    assert_int_equal(h.l->ops->calc_gradient(h.l, &h.ctx), NNT_OK);
    assert_int_equal(h.l->ops->calc_derivative(h.l, &h.ctx), NNT_OK);
    /* the unblocked grouped backward */
    size_t gcols = q->bnb * plane;
    float *col = calloc((size_t)patch * gcols, sizeof(float));
    float *dyg = calloc(f * gcols, sizeof(float)), *gw = calloc(nw, sizeof(float));
    float *gb = calloc(f, sizeof(float)), *dx = calloc(nin, sizeof(float));
    for (unsigned b = 0; b < q->batch; b += q->bnb) {
      unsigned n = q->batch - b < q->bnb ? q->batch - b : q->bnb;
      const float *dy = h.dout.data + b * out_len;
      if (q->bnb > 1) {
        const unsigned d[3] = {n, f, (unsigned)plane}, perm[3] = {1, 0, 2};
        assert_int_equal(k->permute3(k, 1, d, perm, dy, dyg), NNT_OK);
        dy = dyg;
      }
      float beta = b ? 1.0f : 0.0f;
      assert_int_equal(k->im2col(k, &g, n, h.in.data + b * in_len, col), NNT_OK);
      assert_int_equal(k->gemm(k, 0, 1, f, patch, n * plane, 1.0f, dy, n * plane, col,
                               n * plane, beta, gw, patch), NNT_OK);
      assert_int_equal(k->sum_cols(k, f, n * plane, dy, beta, gb), NNT_OK);
      assert_int_equal(k->gemm(k, 1, 0, patch, n * plane, f, 1.0f, h.w[0].data, patch, dy,
                               n * plane, 0.0f, col, n * plane), NNT_OK);
      assert_int_equal(k->col2im(k, &g, n, col, dx + b * in_len), NNT_OK);
    }
    /* dW's blocks are gemms of fewer columns, which OpenBLAS's edge
     * kernels may sum in another order: equal up to rounding */
    assert_close(h.gw[0].data, gw, nw, 1e-5);
    assert_memory_equal(h.gw[1].data, gb, f * sizeof(float));
    assert_memory_equal(h.din.data, dx, nin * sizeof(float));
    free(col), free(dyg), free(gw), free(gb), free(dx);
    fd_teardown(&h);
  }
  /* finite differences where the blocks are 3, 3 and 1 channels */
  const char *a[] = {"filters", "2", "kernel_size", "2,3", "padding", "0,1,1,1", NULL};
  fd("conv2d", a, D(5, 7, 5, 12), D(5, 2, 5, 12), 1e-2f);
}

static int finalize_err(const char *type, const char *const *props, nnt_dim in, nnt_err *e) {
  nnt_layer *l;
  assert_int_equal(nnt_layer_create(type, &l, e), NNT_OK);
  for (size_t i = 0; props && props[i]; i += 2)
    assert_int_equal(nnt_layer_set_property(l, props[i], props[i + 1], e), NNT_OK);
  nnt_finalize_ctx fc = {0};
  fc.n_in = 1;
  fc.n_out = 1;
  fc.batch = in.b;
  fc.in_dim[0] = in;
  int rc = l->ops->finalize(l, &fc, e);
  nnt_layer_destroy(l);
  return rc;
}

static void test_errors(void **state) {
  (void)state;
  nnt_err e = {0};
  const char *big[] = {"filters", "2", "kernel_size", "5", NULL};
  assert_int_equal(finalize_err("conv2d", big, D(1, 1, 3, 3), &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "kernel_size: 5x5");
  tu_assert_contains(e.msg, "padded input 3x3");
  tu_assert_contains(e.msg, "1:1:3:3");
  /* dilation makes a fitting kernel too wide */
  const char *dil[] = {"filters", "2", "kernel_size", "3", "dilation", "2", NULL};
  assert_int_equal(finalize_err("conv2d", dil, D(1, 1, 4, 4), &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "kernel_size");
  const char *nof[] = {"kernel_size", "3", NULL};
  assert_int_equal(finalize_err("conv2d", nof, D(1, 1, 3, 3), &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "filters: required key is missing");
  const char *c1[] = {"filters", "2", "kernel_size", "3", NULL};
  assert_int_equal(finalize_err("conv1d", c1, D(1, 1, 2, 8), &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "height 1");
  assert_int_equal(finalize_err("conv1d", c1, D(1, 1, 1, 2), &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "kernel_size");
  assert_int_equal(finalize_err("pooling2d", NULL, D(1, 1, 3, 3), &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "pooling: required key is missing");
  const char *pbig[] = {"pooling", "max", "pool_size", "4", NULL};
  assert_int_equal(finalize_err("pooling2d", pbig, D(1, 1, 3, 3), &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "pool_size");
  /* property errors */
  nnt_layer *l;
  assert_int_equal(nnt_layer_create("pooling2d", &l, &e), NNT_OK);
  assert_int_equal(nnt_layer_set_property(l, "pooling", "median", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "median");
  nnt_layer_destroy(l);
  assert_int_equal(nnt_layer_create("conv1d", &l, &e), NNT_OK);
  assert_int_equal(nnt_layer_set_property(l, "kernel_size", "3,3", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "kernel_size");
  assert_int_equal(nnt_layer_set_property(l, "filters", "0", &e), NNT_ERR_INVAL);
  nnt_layer_destroy(l);
}

static void test_registry(void **state) {
  (void)state;
  assert_ptr_equal(nnt_layer_ops_find("conv2d"), &nnt_layer_conv2d);
  assert_ptr_equal(nnt_layer_ops_find("conv1d"), &nnt_layer_conv1d);
  assert_ptr_equal(nnt_layer_ops_find("pooling2d"), &nnt_layer_pooling2d);
  assert_ptr_equal(nnt_layer_ops_find_ml(3), &nnt_layer_conv2d);
  assert_ptr_equal(nnt_layer_ops_find_ml(19), &nnt_layer_conv1d);
  assert_ptr_equal(nnt_layer_ops_find_ml(4), &nnt_layer_pooling2d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv2d),
      cmocka_unit_test(test_conv1d),
      cmocka_unit_test(test_pooling2d),
      cmocka_unit_test(test_average_counts_padding),
      cmocka_unit_test(test_conv_frozen_weight),
      cmocka_unit_test(test_pointwise_bitwise),
      cmocka_unit_test(test_shortcut_halves),
      cmocka_unit_test(test_image_groups),
      cmocka_unit_test(test_channel_blocks),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_registry),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
