/* conv2d and conv1d: im2col then gemms over groups of images. The filter
 * is [filters, c, kh, kw] (NNTrainer's layout) and the bias [filters];
 * conv1d is conv2d over the width of a b:c:1:w input.
 * The columns of nb images lie side by side ([patch, nb*plane]), so each
 * gemm has nb*plane columns (forward, derivative) or a depth of nb*plane
 * (gradient) instead of one image's plane: at a small plane (ResNet's
 * 4x4) a per-image gemm streams the whole filter, or the whole dW
 * accumulator, once per image. The forward writes [filters, nb*plane] and
 * permutes it into the images' [nb][filters][plane]; the backward gathers
 * dY the other way. nb is fixed at finalize: as many images as fit
 * CONV_GROUP_BYTES of scratch (columns plus the permuted output) up to
 * CONV_GROUP_COLS columns, at least one; a layer whose single image needs more runs one image at a
 * time with no permute scratch, as before. The last group of a batch that
 * nb does not divide is smaller. The backward, where training's memory
 * peak lies (a weight gradient is live), has its own groups of bnb <= nb
 * images and takes the patch rows a block of bc input channels at a time
 * (im2col is per channel): dW's columns of the block = dY x block^T, the
 * block's dcol = (W's columns of the block)^T x dY, folded into those
 * channels of dX. bnb and bc keep the block's columns plus the gathered
 * dY within one image's columns [patch, plane] (bnb = 1: no dY to gather,
 * one block), so the backward's scratch never exceeds what one image at a
 * time took, except in a strided layer, which may take the forward's nb
 * images' columns (conv_scratch.c); dX and db are bitwise those of
 * unblocked groups, dW equal up to rounding (the blocks' gemms are
 * narrower). The scratch tensors are
 * planned by the manager: columns and output for forward, a block's
 * columns and dY recomputed in the backward pass, so no column buffer
 * lives across the step.
 * Where one image a group is the rule (nb = 1) and an image's products are
 * too small to split well over the compute threads, the CPU runs whole
 * images on them instead (k->parallel; img_job): each image's im2col,
 * product and bias, or its product and col2im, on one thread, in a slot
 * of pnb images' columns (CONV_PAR_IMAGES); a pointwise layer needs no
 * slot. Each image's ops are those of the loop over images, so the
 * results are bitwise the same at any thread count and on any kernels.
 * A downsampling layer whose forward takes groups of images (nb > 1) runs
 * whole groups on the threads the same way, CONV_PAR_GROUPS of them at a
 * time, each in its own slot of the columns and of the permute scratch
 * (nnt_conv_fwd_groups): the loop's groups and products, so one thread
 * gives the loop's bits; a last group alone splits its ops over the
 * threads as the loop splits every group.
 * A pointwise convolution (1x1 window, stride 1, no padding) has columns
 * equal to the image itself ([c, h*w]): it skips im2col and col2im, runs
 * one image's gemms on the input and on dX directly, and asks for no
 * scratch (the same products on the same numbers as explicit one-image
 * im2col, gemm and col2im: results are bitwise those).
 * Where no backward runs (inference, evaluation, a frozen layer with no
 * trainable layer before it) and an image's output is no larger than its
 * input, the forward may write its output over its input
 * (NNT_LF_INPLACE_FWD, conv_forward_inplace): the planner decides.
 * The forward of a layer with few input channels (see use_direct) runs
 * the backend's conv_fwd where it has one (the CPU's direct convolution:
 * no im2col copies, which cost more than the
 * product there; within rounding of im2col and gemm). Likewise its
 * backward, for stride 1 and a kernel 4 or 5 wide (see use_direct_bwd;
 * also 3x3 and 5x5 windows where conv_rows and conv_rows_dw say),
 * runs conv_bwd_w and conv_bwd_x where the backend has them (no im2col,
 * no col2im; within rounding).
 * A 3x3 window with stride 1 and dilation 1 and at least CONV_WINO_MIN_C
 * channels and filters runs the backend's Winograd F(2x2, 3x3) ops where
 * it has them (the CPU: conv_wino, conv_wino_dw in cpu_winograd.c; 16
 * products per 2x2 outputs instead of 36; the CPU's conv_wino and
 * conv_wino_dw take F(4x4, 3x3), 36 per 4x4 outputs, where the scratch
 * holds its one pass: ResNet-18's stages 1 and 2, in the scratch planned
 * below): the forward as is, the
 * derivative as a convolution of dY with the filters turned by 180
 * degrees (padding 2 - p), the weight gradient from the same transforms.
 * They work inside the column scratch planned above (the forward's for
 * the forward, the backward's block for the other two), the backward's
 * raised to all 16 slices where that is at most 3 times the layer's input
 * (conv_scratch.c: ResNet-18's stage 3, whose arena stays the same). The
 * forward of an image with few tiles runs over groups of wnb images, more
 * than im2col's nb, where that scratch is also at most 1.5 times the input
 * (conv_scratch.c: ResNet-18's stages 2 and 3); a wide layer's forward
 * (ResNet-18's stage 4) runs over the batch where that scratch is at most
 * the layer's own tensors (filters, input and output). A pass whose
 * scratch is too small for them (ResNet-18's stage 4 backward: the
 * transformed filters alone are 8 or 16 x filters x channels) keeps
 * im2col; there the derivative runs over groups of images in a scratch of
 * its own (conv_scratch.c). A frozen layer's forward takes less
 * (conv_scratch.c, nnt_conv_wino_fwd_scratch). Results are within
 * rounding of im2col's (docs/performance.md). */
#include <stdint.h>
#include "layers/conv_impl.h"

/* The scratch a group of images may take (columns and the permuted output
 * or dY), in bytes: chosen by measurement (docs/performance.md). */
#define CONV_GROUP_BYTES ((size_t)2 << 20)
/* A group stops growing once its gemms have this many columns: enough for
 * OpenBLAS's kernels to reuse the filter (ResNet-18's 8x8 planes take 3
 * images; its 4x4 ones would take 12, the byte cap gives 6), and no
 * scratch beyond that, which at a large
 * plane (LeNet-5's, the Fashion-MNIST CNN's) keeps one image per gemm and
 * the planned arena as it was (docs/performance.md). */
#define CONV_GROUP_COLS 192
/* On a GPU (engine=gpu) each product must fill the device: one of a
 * group of one image has too few columns (ResNet-18's 64 filters x 1024
 * positions: 16 work groups of 64 x 64 on an H100's 132 multiprocessors)
 * and every dispatch costs a few microseconds however small. There groups
 * take up to this much scratch with no column cap, and the backward takes
 * the forward's groups with every channel in one block (docs/gpu.md). */
#define CONV_GPU_GROUP_BYTES ((size_t)32 << 20)
/* A layer whose forward takes one image a group (nb = 1) on im2col holds
 * up to this many images' columns, each image's im2col and product run
 * whole on one of the compute threads (k->parallel): one image's product
 * is too small to split well (conv-BN-ReLU's c1 and ResNet-18's res2a_sc
 * ran slower on two threads than on one, docs/performance.md). Only where
 * an image's columns are no larger than its output (patch <= filters: the
 * extra scratch is at most what the step writes anyway; LeNet-5's c1, 25
 * values a patch for 6 filters, raised its inference plan by 12 KB) or the
 * window strides (a downsampling layer: ResNet-18's res2a_c1, 576 values a
 * patch for 128 filters, forward 0.54-0.61 -> 0.82-0.85 of a bare sgemm on
 * two threads, every plan of the repo's INIs the same), and no more than
 * CONV_GROUP_BYTES of them. Two: four left the Fashion-MNIST
 * CNN's training plan at batch 8 10.7% above its lower bound (the
 * placement, not the bound; two and three do not), and three images on
 * two threads split 2 + 1. More threads than slots share the images of a
 * call as far as they go. */
#define CONV_PAR_IMAGES 2
/* A downsampling layer whose forward takes groups of images (nb > 1)
 * holds this many groups' columns and outputs, each group's im2col,
 * product, bias and permute run whole on one of the compute threads: a
 * group's product split over two threads had each core read columns the
 * other wrote (ResNet-18's res3a_c1, 11 groups of 3 images: its forward
 * took 16.8 ms on one thread and 13.8 on two, docs/performance.md). */
#define CONV_PAR_GROUPS 2

static int is_1d(const nnt_layer *l) { return l->ops == &nnt_layer_conv1d; }

/* Whether the window moves by more than one position (a downsampling
 * layer: its backward's blocks, see backward_blocks). */
static int strided(const nnt_conv_geom *g) { return g->sh > 1 || g->sw > 1; }

/* Whether conv_fwd takes the layer's geometry and widths (use_direct). */
static int direct_geom(const conv_priv *p) {
  const nnt_conv_geom *g = &p->g;
  size_t patch = (size_t)g->c * g->kh * g->kw;
  return conv_rows(p, 0) || conv_sub(p) || conv_str(p) ||
         (!is_pointwise(g) && g->c <= CONV_DIRECT_MAX_C && g->ow <= 256 &&
          patch >= CONV_DIRECT_MIN_PATCH && patch <= NNT_CONV_DIRECT_MAX_PATCH &&
          p->filters >= CONV_DIRECT_MIN_FILTERS);
}

/* Whether the plan leaves out the forward's im2col groups for conv_fwd:
 * not for a subsampling 1x1 layer or a strided 3x3 one, whose conv_fwd
 * depends on the CPU (conv_sub, conv_str): their im2col scratch is
 * planned on every machine (and the backward runs in it), so a model's
 * plan is the same on every CPU. */
static int direct_planned(const conv_priv *p) {
  return direct_geom(p) && !conv_sub(p) && !conv_str(p);
}

/* Whether conv_wino may take the layer's forward (nnt_conv_use_wino's widths). */
static int wino_widths(const conv_priv *p) {
  return nnt_wino_geom_ok(&p->g) && p->g.c >= CONV_WINO_MIN_C && p->filters >= CONV_WINO_MIN_C;
}

static void conv_init(nnt_layer *l) {
  conv_priv *p = l->priv;
  nnt_window_props_init(&p->win);
  nnt_weight_props_init(&p->wp);
}

static int conv_set(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  conv_priv *p = l->priv;
  if (nnt_streq(key, "filters")) {
    int rc = nnt_parse_uint(key, value, &p->filters, e);
    if (!rc && !p->filters)
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'filters': must be positive");
    return rc;
  }
  int rc = nnt_window_props_set(&p->win, key, "kernel_size", value, is_1d(l), e);
  if (rc != NNT_ERR_NOKEY)
    return rc;
  return nnt_weight_props_set(&p->wp, key, value, e);
}

static int conv_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  conv_priv *p = l->priv;
  if (!p->filters)
    return nnt_err_set(e, NNT_ERR_INVAL, "filters: required key is missing");
  if (!p->win.k_set)
    return nnt_err_set(e, NNT_ERR_INVAL, "kernel_size: required key is missing");
  if (ctx->n_in != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "%s takes one input, not %u", l->ops->type, ctx->n_in);
  nnt_dim in = ctx->in_dim[0];
  if (is_1d(l) && in.h != 1) {
    char a[64];
    return nnt_err_set(e, NNT_ERR_INVAL, "conv1d needs an input of height 1, not %s",
                       nnt_dim_str(in, a, sizeof a));
  }
  int rc = nnt_window_geom(&p->win, in, "kernel_size", &p->g, e);
  if (rc)
    return rc;
  nnt_conv_geom *g = &p->g;
  ctx->out_dim[0] = nnt_dim_make(in.b, p->filters, g->oh, g->ow);
  /* the gemms: [filters x patch] by [patch x plane], one per image */
  unsigned patch, plane, fan_out;
  if (nnt_axis_mul((uint64_t)in.c * g->kh, g->kw, &patch) || patch > NNT_GEMM_DIM_MAX)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "kernel_size: a patch of %u channels x %u x %u = %.0f values is more "
                       "than the %zu a matrix product takes",
                       in.c, g->kh, g->kw, (double)in.c * g->kh * g->kw, NNT_GEMM_DIM_MAX);
  if (nnt_axis_mul(g->oh, g->ow, &plane) || plane > NNT_GEMM_DIM_MAX) {
    char a[64];
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "kernel_size, stride, padding: the output plane of %u x %u = %.0f "
                       "positions over the input %s is more than the %zu a matrix product "
                       "takes",
                       g->oh, g->ow, (double)g->oh * g->ow, nnt_dim_str(in, a, sizeof a),
                       NNT_GEMM_DIM_MAX);
  }
  if ((rc = nnt_check_gemm_dim(p->filters, "filters", e)))
    return rc;
  if (nnt_axis_mul((uint64_t)p->filters * g->kh, g->kw, &fan_out))
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "filters: the fan-out %u filters x %u x %u is more than %u",
                       p->filters, g->kh, g->kw, UINT32_MAX);
  nnt_fctx_add_weight(ctx, "filter", nnt_dim_make(p->filters, in.c, g->kh, g->kw),
                      p->wp.weight_init, patch, fan_out,
                      p->wp.l2norm ? p->wp.l2_constant : 0, p->wp.weight_decay, 1);
  if (!p->wp.disable_bias)
    nnt_fctx_add_weight(ctx, "bias", nnt_dim_make(1, p->filters, 1, 1), p->wp.bias_init, patch,
                        p->filters, 0, p->wp.bias_decay, 1);
  p->nb = p->wnb = p->bnb = 1;
  p->bc = g->c;
  p->dsc = p->hsc = ~0u;
  p->hnb = 1;
  p->hdw = 0;
  p->dwino = 0;
  p->dnb = 1;
  p->fwd4 = 0;
  p->lean = 0;
  p->pnb = 1;
  p->pgr = 1;
  p->gparts = 1;
  int gpu = ctx->engine == NNT_ENGINE_GPU;
  /* a frozen layer on the CPU: its forward's scratch (conv_scratch.c) */
  int frozen = ctx->engine == NNT_ENGINE_CPU && !ctx->trainable;
  if (!is_pointwise(g)) {
    /* images per group: (patch + filters) * plane floats each */
    size_t one = ((size_t)patch + p->filters) * plane * sizeof(float);
    size_t cap = gpu ? CONV_GPU_GROUP_BYTES : CONV_GROUP_BYTES;
    if (ctx->chunk && cap > ctx->chunk) /* each scratch tensor within a chunk */
      cap = ctx->chunk;
    size_t fit = cap / one, groups;
    size_t want = gpu ? in.b : (CONV_GROUP_COLS + plane - 1) / plane;
    if (fit > want)
      fit = want;
    if (fit > 1 && in.b > 1) {
      if (fit > in.b)
        fit = in.b;
      groups = (in.b + fit - 1) / fit; /* then as even as they go */
      p->nb = (unsigned)((in.b + groups - 1) / groups);
    }
    if (gpu)
      p->bnb = p->nb; /* p->bc: every channel */
    else
      nnt_conv_backward_blocks(p, strided(g) ? (size_t)patch * p->nb : patch);
    unsigned taps = g->kh * g->kw;
    p->gparts = gpu ? 1 : conv_chan_parts(p->bc, taps);
    p->wnb = p->nb;
    if (!gpu && !frozen && p->nb == 1 && (patch <= p->filters || strided(g)) &&
        !direct_planned(p) &&
        !wino_widths(p))
      for (p->pnb = in.b < CONV_PAR_IMAGES ? in.b : CONV_PAR_IMAGES; p->pnb > 1; p->pnb--)
        if (p->pnb * ((size_t)patch * plane * sizeof(float)) <= CONV_GROUP_BYTES)
          break;
    if (!gpu && !frozen && p->nb > 1 && strided(g) && !direct_planned(p))
      p->pgr = CONV_PAR_GROUPS;
    unsigned fcols = plane * p->nb * p->pnb * p->pgr; /* the forward's columns */
    size_t wfwd = gpu ? 0 : nnt_conv_wino_fwd_scratch(p, in, frozen);
    p->lean = frozen && wfwd && wfwd < (size_t)patch * fcols;
    nnt_fctx_add_scratch(ctx,
                         wfwd > (size_t)patch * fcols || p->lean
                             ? nnt_dim_make(1, 1, 1, (unsigned)wfwd)
                             : nnt_dim_make(1, 1, patch, fcols),
                         NNT_SCRATCH_FWD);
    /* pnb > 1: bnb = 1 and bc = c, and the derivative's columns as the
     * forward's (conv_derivative) */
    unsigned bcols = plane * p->bnb * p->pnb;
    size_t bwd = (size_t)p->bc * taps * bcols, wino = gpu ? 0 : nnt_conv_wino_bwd_scratch(p, in);
    nnt_fctx_add_scratch(ctx,
                         wino > bwd ? nnt_dim_make(1, 1, 1, (unsigned)wino)
                                    : nnt_dim_make(1, 1, p->bc * taps, bcols),
                         NNT_SCRATCH_BWD);
    if (p->nb > 1) /* the permute's, and the in-place forward's stage of a group */
      nnt_fctx_add_scratch(ctx,
                           nnt_dim_make(1, 1, p->filters, (unsigned)(plane * p->wnb * p->pgr)),
                           NNT_SCRATCH_FWD);
    if (p->bnb > 1)
      nnt_fctx_add_scratch(ctx, nnt_dim_make(1, 1, p->filters, (unsigned)(plane * p->bnb)),
                           NNT_SCRATCH_BWD);
  }
  ctx->flags = NNT_LF_BWD_READS_INPUT | NNT_LF_DERIV_SKIPS_INPUT;
  /* The forward may write over its input where no backward runs
   * (conv_forward_inplace), when an image's output is no larger than its
   * input: then the shared memory is the input's, and nothing grows (a
   * larger output would hold its size from the input's first step, which
   * can raise a plan: the Fashion-MNIST CNN's second conv over pool1's
   * output, measured). nb == 1 stages one image's output in scratch. */
  if ((uint64_t)p->filters * plane <= (uint64_t)in.c * in.h * in.w) {
    ctx->flags |= NNT_LF_INPLACE_FWD;
    if (p->nb == 1)
      nnt_fctx_add_scratch(ctx, nnt_dim_make(1, 1, p->filters, plane * p->wnb),
                           NNT_SCRATCH_INPLACE);
  }
  /* A derivative on the CPU's subsampling kernel adds itself into a
   * fan-out's sum (conv_bwd_x_add; ResNet's shortcuts, whose derivative
   * is three quarters zeros): no temporary of the input's size, and no
   * pass of the training loop's add over it. */
  if (ctx->engine == NNT_ENGINE_CPU && conv_sub_dx(p))
    ctx->flags |= NNT_LF_DERIV_ADDS;
  /* a shortcut's weight gradient in halves of the batch (conv_impl.h) */
  if (!gpu && ctx->trainable && nnt_conv_sub_take(g, p->filters) && p->gparts == 1 &&
      in.b >= CONV_HALVES) {
    size_t half = (in.b + CONV_HALVES - 1) / CONV_HALVES;
    size_t deep = (CONV_HALF_COLS + plane - 1) / plane; /* images a product */
    p->hnb = (unsigned)(deep < half ? deep : half);
    p->hdw = ctx->engine == NNT_ENGINE_CPU && conv_sub_dw(p);
    size_t len = CONV_HALVES * conv_half_region(p) + (CONV_HALVES - 1) * p->filters * g->c;
    if (len <= UINT32_MAX) {
      p->hsc = ctx->n_scratch;
      nnt_fctx_add_scratch(ctx, nnt_dim_make(1, 1, 1, (unsigned)len), NNT_SCRATCH_BWD);
    }
  }
  size_t down = gpu || is_pointwise(g) ? 0 : nnt_conv_deriv_scratch(p, in, ctx->trainable);
  if (down) {
    p->dsc = ctx->n_scratch;
    nnt_fctx_add_scratch(ctx, nnt_dim_make(1, 1, 1, (unsigned)down), NNT_SCRATCH_DERIV);
  }
  return NNT_OK;
}

int nnt_conv_swap_outer(const nnt_kernels *k, unsigned n, unsigned a, size_t c, const float *x,
                        float *y) {
  const unsigned d[3] = {n, a, (unsigned)c}, perm[3] = {1, 0, 2};
  return k->permute3(k, 1, d, perm, x, y);
}

/* Whether the forward runs conv_fwd (see above). */
static int use_direct(const nnt_kernels *k, const conv_priv *p) {
  return k->conv_fwd && direct_geom(p);
}

/* Whether the forward runs conv_wino (see nnt_conv_use_wino below), and its call
 * for the n images at x of a group: both forwards (in place or not) run
 * it on the same groups of nb images, so their outputs are bitwise the
 * same (the op's arithmetic depends on the images it is given). */
static int use_wino_fwd(const nnt_kernels *k, const conv_priv *p, const nnt_run_ctx *ctx) {
  size_t tiles = (size_t)p->wnb * ((p->g.oh + 1) / 2) * ((p->g.ow + 1) / 2);
  return !is_pointwise(&p->g) && !use_direct(k, p) &&
         (tiles >= conv_wino_fwd_min_tiles(p) || p->fwd4) &&
         nnt_conv_use_wino(k->conv_wino != NULL, &p->g, p->g.c, p->filters, p->wnb,
                           &ctx->scratch[0], NNT_WINO_MIN_SLICES);
}
/* later: a group after the first of this forward, whose call may take
 * the transformed filters the first left in the scratch (NNT_WINO_KEEP_U:
 * nothing else writes scratch[0] between the groups' calls). */
static int wino_fwd(const conv_priv *p, nnt_run_ctx *ctx, unsigned n, const float *x, float *y,
                    int later) {
  const nnt_kernels *k = ctx->k;
  return k->conv_wino(k, &p->g, n, p->filters, later ? NNT_WINO_KEEP_U : 0, ctx->w[0].data,
                      ctx->n_w > 1 ? ctx->w[1].data : NULL, x, y, ctx->scratch[0].data,
                      nnt_tensor_len(&ctx->scratch[0]));
}

/* The forward with out[0] over in[0] (NNT_LF_INPLACE_FWD: no backward
 * runs, nobody reads the input after this layer, and an image's output is
 * no larger than its input): a group of images is computed into scratch
 * (the permute scratch of nb > 1, else the one-image output scratch) once
 * its inputs are read, then lands on input images already read (in batch
 * order, group g's output ends before group g + 1's input starts). The
 * same products as conv_forward, so the same bits. */
static int conv_forward_inplace(conv_priv *p, nnt_run_ctx *ctx) {
  const nnt_conv_geom *g = &p->g;
  const nnt_kernels *k = ctx->k;
  size_t patch = (size_t)g->c * g->kh * g->kw, plane = (size_t)g->oh * g->ow;
  size_t in_len = nnt_dim_feature_len(ctx->in[0].dim), out_len = p->filters * plane;
  unsigned batch = ctx->in[0].dim.b;
  int pw = is_pointwise(g), direct = use_direct(k, p), wino = use_wino_fwd(k, p, ctx);
  float *stage = ctx->scratch[pw ? 0 : 2].data; /* [filters, nb*plane] or one image */
  const float *bias = ctx->n_w > 1 ? ctx->w[1].data : NULL;
  unsigned grp = wino ? p->wnb : p->nb;
  if (out_len > in_len || !stage || (p->lean && !wino && !direct))
    return NNT_ERR_INVAL; /* finalize allows none (lean: a CPU's forward) */
  for (unsigned b = 0; b < batch; b += grp) {
    unsigned n = batch - b < grp ? batch - b : grp;
    const float *x = ctx->in[0].data + b * in_len;
    float *y = ctx->out[0].data + b * out_len;
    if (direct) {
      NNT_TRY(k->conv_fwd(k, g, n, p->filters, ctx->w[0].data, bias, x, stage));
      NNT_TRY(k->copy(k, n * out_len, stage, y));
      continue;
    }
    if (wino) {
      NNT_TRY(wino_fwd(p, ctx, n, x, stage, b > 0));
      NNT_TRY(k->copy(k, n * out_len, stage, y));
      continue;
    }
    const float *col = x;
    if (!pw) {
      NNT_TRY(k->im2col(k, g, n, x, ctx->scratch[0].data));
      col = ctx->scratch[0].data;
    }
    NNT_TRY(k->gemm(k, 0, 0, p->filters, n * plane, patch, 1.0f, ctx->w[0].data, patch, col,
                    n * plane, 0.0f, stage, n * plane));
    if (bias)
      NNT_TRY(k->add_col_vec(k, p->filters, n * plane, bias, stage));
    if (p->nb > 1)
      NNT_TRY(nnt_conv_swap_outer(k, p->filters, n, plane, stage, y));
    else
      NNT_TRY(k->copy(k, out_len, stage, y));
  }
  return NNT_OK;
}

int nnt_conv_use_wino(int have, const nnt_conv_geom *g, size_t c, size_t filters,
                      unsigned batch, const nnt_tensor *s, unsigned slices) {
  size_t tiles = (size_t)batch * ((g->oh + 1) / 2) * ((g->ow + 1) / 2);
  return have && nnt_wino_geom_ok(g) && c >= CONV_WINO_MIN_C && filters >= CONV_WINO_MIN_C &&
         s->data && nnt_tensor_len(s) >= nnt_wino_scratch(slices, 1, c, filters, tiles);
}

int nnt_conv_fwd_per_image(const nnt_layer *l, const nnt_kernels *k, nnt_dim s0) {
  const conv_priv *p = l->priv;
  if (use_direct(k, p))
    return 1; /* conv_fwd computes each image alone */
  float probe = 0;
  nnt_tensor scratch = {.dim = s0, .data = &probe};
  nnt_run_ctx ctx = {.scratch = &scratch};
  if (use_wino_fwd(k, p, &ctx)) /* chunks of tiles within one image */
    return ((size_t)(p->g.oh + 1) / 2) * ((p->g.ow + 1) / 2) >= NNT_WINO_IMAGE_TILES;
  return p->nb == 1; /* im2col and a product per image */
}

/* A 1x1 window with a stride and no padding over every channel: the
 * forward reads a subsampled copy of its input. */
static int subsamples(const nnt_conv_geom *g) {
  return g->kh == 1 && g->kw == 1 && strided(g) && !g->pt && !g->pb && !g->pl && !g->pr &&
         (!g->cs || g->cs == g->c);
}

int nnt_conv_gathers(const nnt_layer *l, const nnt_kernels *k) {
  const conv_priv *p = l->priv;
  if (!subsamples(&p->g))
    return 0;
  return use_direct(k, p) ? conv_sub(p) : p->nb == 1 && p->pnb == 1;
}

int nnt_conv_gather(const nnt_layer *l, const nnt_run_ctx *ctx, float *dst) {
  const conv_priv *p = l->priv;
  const nnt_kernels *k = ctx->k;
  size_t in_len = nnt_dim_feature_len(ctx->in[0].dim);
  size_t cols = (size_t)p->g.c * p->g.oh * p->g.ow;
  for (unsigned b = 0; b < ctx->in[0].dim.b; b++)
    NNT_TRY(k->im2col(k, &p->g, 1, ctx->in[0].data + b * in_len, dst + b * cols));
  return NNT_OK;
}

/* The forward from a gathered input (nnt_conv_gathers): the subsampling
 * product reading it where it lies, else each image's product on it as on
 * its im2col columns (nnt_conv_group_fwd's ops for one image). */
static int conv_forward_gathered(conv_priv *p, nnt_run_ctx *ctx) {
  const nnt_kernels *k = ctx->k;
  nnt_conv_geom g = p->g;
  unsigned batch = ctx->out[0].dim.b;
  size_t plane = (size_t)g.oh * g.ow, cols = g.c * plane, out_len = p->filters * plane;
  const float *bias = ctx->n_w > 1 ? ctx->w[1].data : NULL;
  if (!subsamples(&g) || nnt_dim_feature_len(ctx->in[0].dim) != cols)
    return NNT_ERR_INVAL;
  g.gathered = 1;
  if (use_direct(k, p))
    return k->conv_fwd(k, &g, batch, p->filters, ctx->w[0].data, bias, ctx->in[0].data,
                       ctx->out[0].data);
  if (p->nb != 1)
    return NNT_ERR_INVAL; /* nnt_conv_gathers refuses groups */
  for (unsigned b = 0; b < batch; b++) {
    float *y = ctx->out[0].data + b * out_len;
    NNT_TRY(k->gemm(k, 0, 0, p->filters, plane, g.c, 1.0f, ctx->w[0].data, g.c,
                    ctx->in[0].data + b * cols, plane, 0.0f, y, plane));
    if (bias)
      NNT_TRY(k->add_col_vec(k, p->filters, plane, bias, y));
  }
  return NNT_OK;
}

static int conv_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  conv_priv *p = l->priv;
  if (ctx->gathered)
    return conv_forward_gathered(p, ctx);
  if (ctx->out[0].data == ctx->in[0].data)
    return conv_forward_inplace(p, ctx);
  const nnt_conv_geom *g = &p->g;
  const nnt_kernels *k = ctx->k;
  size_t plane = (size_t)g->oh * g->ow;
  size_t in_len = nnt_dim_feature_len(ctx->in[0].dim), out_len = p->filters * plane;
  int pw = is_pointwise(g);
  unsigned batch = ctx->in[0].dim.b;
  if (use_direct(k, p))
    return k->conv_fwd(k, g, batch, p->filters, ctx->w[0].data,
                       ctx->n_w > 1 ? ctx->w[1].data : NULL, ctx->in[0].data, ctx->out[0].data);
  int wino = use_wino_fwd(k, p, ctx);
  if (p->lean && !wino)
    return NNT_ERR_INVAL; /* its scratch holds no columns (a CPU's forward) */
  /* one call over the batch where its chunks of tiles keep to images (the
   * same products as the in-place forward's calls per group): the filters
   * transformed once, and each thread's run of chunks a run of images */
  if (wino && ((size_t)(g->oh + 1) / 2) * ((g->ow + 1) / 2) >= NNT_WINO_IMAGE_TILES)
    return wino_fwd(p, ctx, batch, ctx->in[0].data, ctx->out[0].data, 0);
  if (!wino && p->nb == 1 && (pw || p->pnb > 1)) /* whole images on the threads */
    return nnt_conv_fwd_images(p, ctx, batch, pw ? batch : p->pnb);
  if (!wino && p->pgr > 1) /* whole groups on the threads */
    return nnt_conv_fwd_groups(p, ctx, batch);
  unsigned grp = wino ? p->wnb : p->nb;
  for (unsigned b = 0; b < batch; b += grp) {
    unsigned n = batch - b < grp ? batch - b : grp;
    if (wino)
      NNT_TRY(wino_fwd(p, ctx, n, ctx->in[0].data + b * in_len, ctx->out[0].data + b * out_len,
                       b > 0));
    else
      NNT_TRY(nnt_conv_group_fwd(p, ctx, b, n, ctx->scratch[0].data,
                                 p->nb > 1 ? ctx->scratch[2].data : NULL));
  }
  return NNT_OK;
}

const nnt_layer_ops nnt_layer_conv2d = {
    .type = "conv2d",
    .ml_type = 3,
    .priv_size = sizeof(conv_priv),
    .init = conv_init,
    .set_property = conv_set,
    .finalize = conv_finalize,
    .forward = conv_forward,
    .calc_gradient = nnt_conv_gradient,
    .calc_derivative = nnt_conv_derivative,
    .kops = NNT_KOP_BIT(IM2COL) | NNT_KOP_BIT(COL2IM) | NNT_KOP_BIT(GEMM) |
            NNT_KOP_BIT(ADD_COL_VEC) | NNT_KOP_BIT(SUM_COLS) | NNT_KOP_BIT(FILL) |
            NNT_KOP_BIT(PERMUTE3) | NNT_KOP_BIT(COPY),
    .opt_kops = NNT_KOP_BIT(CONV_FWD) | NNT_KOP_BIT(CONV_BWD_X) | NNT_KOP_BIT(CONV_BWD_W) |
                NNT_KOP_BIT(CONV_WINO) | NNT_KOP_BIT(CONV_WINO_DW) | NNT_KOP_BIT(COL2IM_SET) |
                NNT_KOP_BIT(CONV_BWD_X_ADD),
};

const nnt_layer_ops nnt_layer_conv1d = {
    .type = "conv1d",
    .ml_type = 19,
    .priv_size = sizeof(conv_priv),
    .init = conv_init,
    .set_property = conv_set,
    .finalize = conv_finalize,
    .forward = conv_forward,
    .calc_gradient = nnt_conv_gradient,
    .calc_derivative = nnt_conv_derivative,
    .kops = NNT_KOP_BIT(IM2COL) | NNT_KOP_BIT(COL2IM) | NNT_KOP_BIT(GEMM) |
            NNT_KOP_BIT(ADD_COL_VEC) | NNT_KOP_BIT(SUM_COLS) | NNT_KOP_BIT(FILL) |
            NNT_KOP_BIT(PERMUTE3) | NNT_KOP_BIT(COPY),
    .opt_kops = NNT_KOP_BIT(CONV_FWD) | NNT_KOP_BIT(CONV_BWD_X) | NNT_KOP_BIT(CONV_BWD_W) |
                NNT_KOP_BIT(CONV_WINO) | NNT_KOP_BIT(CONV_WINO_DW) | NNT_KOP_BIT(COL2IM_SET) |
                NNT_KOP_BIT(CONV_BWD_X_ADD),
};
