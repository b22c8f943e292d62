/* conv2d's and conv1d's backward (calc_gradient, calc_derivative): the
 * groups, channel blocks and paths that conv.c's header describes and its
 * finalize plans. */
#include <stdatomic.h>

#include "layers/conv_impl.h"

/* The backward takes conv_bwd_w (gradient) and conv_bwd_x (derivative),
 * where the backend has them, for stride 1 and dilation 1, at most
 * CONV_DIRECT_MAX_C input channels (the derivative at least
 * CONV_DIRECT_BWD_X_MIN_C: it fills blocks of 8 channels) and a kernel
 * CONV_DIRECT_BWD_MIN_KW to NNT_CONV_BWD_MAX_KW wide: chosen by
 * measurement (docs/performance.md; LeNet-5's 5x5 c1 and c2 gain, a
 * one-channel derivative loses, the Fashion-MNIST CNN's 3x3 c1 and c2
 * measured the same as im2col, gemm and col2im); and where conv_rows
 * (the derivative) and conv_rows_dw (the gradient) say: the CPU's row
 * kernels for 3x3 and 5x5 windows of up to CONV_ROWS_MAX_C channels. */
#define CONV_DIRECT_BWD_MIN_KW 4
#define CONV_DIRECT_BWD_X_MIN_C 4

static int use_direct_bwd(const conv_priv *p, int have, unsigned min_c) {
  const nnt_conv_geom *g = &p->g;
  return have && g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 && g->c >= min_c &&
         g->c <= CONV_DIRECT_MAX_C && g->kw >= CONV_DIRECT_BWD_MIN_KW &&
         g->kw <= NNT_CONV_BWD_MAX_KW && g->ow <= 256 && g->w <= 256 &&
         (size_t)p->filters * g->kh * g->kw <= NNT_CONV_BWD_MAX_FTAPS;
}

/* dY of images [b, b+n) as [filters, n*plane]: the images' own when the
 * backward groups are single images, else gathered into the last scratch. */
static const float *group_dy(conv_priv *p, nnt_run_ctx *ctx, unsigned b, unsigned n,
                             size_t plane, int *rc) {
  const float *dy = ctx->d_out[0].data + b * p->filters * plane;
  *rc = NNT_OK;
  if (p->bnb == 1)
    return dy;
  float *to = ctx->scratch[3].data; /* bnb > 1: nb > 1 too, scratch 2 is the forward's */
  *rc = nnt_conv_swap_outer(ctx->k, n, p->filters, plane, dy, to);
  return to;
}

/* The geometry of input channels [c0, c0 + bc) (the last block may be
 * narrower) inside images of g.c channels. */
static nnt_conv_geom block_geom(const conv_priv *p, unsigned c0) {
  nnt_conv_geom gb = p->g;
  gb.c = p->g.c - c0 < p->bc ? p->g.c - c0 : p->bc;
  gb.cs = p->g.c;
  return gb;
}

/* The weight gradient of a group of images in CONV_CHAN_PARTS parts,
 * each run whole on one of the compute threads (k->parallel): part i
 * takes the i-th run of the layer's channels in blocks of at most
 * bc / CONV_CHAN_PARTS channels, in its own share of the backward's
 * scratch (bc channels' columns), and writes its own columns of dW (each
 * block's im2col, then its product). Splitting each block's im2col and
 * product over the threads instead had each core read the columns the
 * other wrote; parts that took halves of each block had both cores write
 * the dW cache lines where their columns met, at every row: on two cores
 * that share no cache ResNet-18's stage 4 gradient ran at 1.07x and
 * 1.23x one thread's speed (docs/performance.md, eighteenth round). The
 * parts and blocks are the same at any thread count, so the results are
 * bitwise the same too; one thread runs the parts one after another. */
typedef struct chan_job {
  const conv_priv *p;
  nnt_run_ctx *ctx;
  const float *dy, *x; /* the group's gathered dY and its first image */
  float beta;
  unsigned n, parts, sub; /* images; parts; channels a block at most */
  atomic_int rc;
} chan_job;

static void grad_chans(void *arg, size_t i0, size_t i1) {
  chan_job *j = arg;
  const conv_priv *p = j->p;
  const nnt_kernels *k = j->ctx->k;
  size_t taps = (size_t)p->g.kh * p->g.kw, cols = (size_t)j->n * p->g.oh * p->g.ow;
  for (size_t i = i0; i < i1 && !atomic_load(&j->rc); i++) {
    unsigned c0 = (unsigned)((size_t)p->g.c * i / j->parts);
    unsigned cn = (unsigned)((size_t)p->g.c * (i + 1) / j->parts) - c0;
    unsigned blocks = (cn + j->sub - 1) / j->sub; /* as even as they go */
    float *col = j->ctx->scratch[1].data + i * j->sub * taps * cols;
    for (unsigned b = 0; b < blocks && !atomic_load(&j->rc); b++) {
      nnt_conv_geom gs = p->g;
      unsigned ca = c0 + (unsigned)((size_t)cn * b / blocks);
      gs.c = c0 + (unsigned)((size_t)cn * (b + 1) / blocks) - ca;
      gs.cs = p->g.c;
      int rc = k->im2col(k, &gs, j->n, j->x + (size_t)ca * p->g.h * p->g.w, col);
      if (!rc)
        rc = k->gemm(k, 0, 1, p->filters, gs.c * taps, cols, 1.0f, j->dy, cols, col, cols,
                     j->beta, j->ctx->gw[0].data + ca * taps, p->g.c * taps);
      conv_job_fail(&j->rc, rc);
    }
  }
}

/* Part i of a shortcut's weight gradient (conv_impl.h CONV_HALVES): its
 * images in groups of hnb, each group's columns (and gathered dY) in the
 * part's region of scratch hsc, their products summed into dW (part 0)
 * or the part's partial dW. */
typedef struct half_job {
  const conv_priv *p;
  nnt_run_ctx *ctx;
  unsigned batch;
  atomic_int rc;
} half_job;

static void grad_halves(void *arg, size_t i0, size_t i1) {
  half_job *j = arg;
  const conv_priv *p = j->p;
  const nnt_kernels *k = j->ctx->k;
  size_t plane = (size_t)p->g.oh * p->g.ow, c = p->g.c, f = p->filters;
  size_t in_len = nnt_dim_feature_len(j->ctx->in[0].dim), out_len = f * plane;
  float *base = j->ctx->scratch[p->hsc].data;
  size_t region = conv_half_region(p);
  for (size_t i = i0; i < i1 && !atomic_load(&j->rc); i++) {
    unsigned b0 = (unsigned)((size_t)j->batch * i / CONV_HALVES);
    unsigned b1 = (unsigned)((size_t)j->batch * (i + 1) / CONV_HALVES);
    float *dw = i ? base + CONV_HALVES * region + (i - 1) * f * c : j->ctx->gw[0].data;
    int rc = NNT_OK;
    if (p->hdw) { /* the CPU's own product: no columns */
      rc = k->conv_bwd_w(k, &p->g, b1 - b0, f, j->ctx->in[0].data + b0 * in_len,
                         j->ctx->d_out[0].data + b0 * out_len, dw);
      conv_job_fail(&j->rc, rc);
      continue;
    }
    float *col = base + i * region, *gdy = col + c * p->hnb * plane;
    for (unsigned b = b0; b < b1 && !rc; b += p->hnb) {
      unsigned n = b1 - b < p->hnb ? b1 - b : p->hnb;
      const float *dy = j->ctx->d_out[0].data + b * out_len;
      rc = k->im2col(k, &p->g, n, j->ctx->in[0].data + b * in_len, col);
      if (!rc && n > 1)
        rc = nnt_conv_swap_outer(k, n, p->filters, plane, dy, gdy);
      if (!rc)
        rc = k->gemm(k, 0, 1, f, c, n * plane, 1.0f, n > 1 ? gdy : dy, n * plane, col,
                     n * plane, b > b0 ? 1.0f : 0.0f, dw, c);
    }
    conv_job_fail(&j->rc, rc);
  }
}

static int gradient_halves(const conv_priv *p, nnt_run_ctx *ctx, unsigned batch) {
  half_job j = {p, ctx, batch, NNT_OK};
  nnt_kernels_parallel(ctx->k, CONV_HALVES, grad_halves, &j);
  NNT_TRY(atomic_load(&j.rc));
  size_t fc = (size_t)p->filters * p->g.c;
  const float *part = ctx->scratch[p->hsc].data + CONV_HALVES * conv_half_region(p);
  for (unsigned i = 1; i < CONV_HALVES; i++)
    NNT_TRY(ctx->k->add(ctx->k, fc, ctx->gw[0].data, part + (i - 1) * fc, ctx->gw[0].data));
  return NNT_OK;
}

/* dW = sum over groups of dY col^T, a block of channels (a range of dW's
 * columns) at a time; db = sums of dY. */
int nnt_conv_gradient(nnt_layer *l, nnt_run_ctx *ctx) {
  conv_priv *p = l->priv;
  const nnt_conv_geom *g = &p->g;
  const nnt_kernels *k = ctx->k;
  size_t taps = (size_t)g->kh * g->kw, patch = g->c * taps, plane = (size_t)g->oh * g->ow;
  size_t in_len = nnt_dim_feature_len(ctx->in[0].dim);
  int pw = is_pointwise(g), rc;
  int want_w = ctx->gw[0].data != NULL, want_b = ctx->n_w > 1 && ctx->gw[1].data;
  if (!want_w && !want_b)
    return NNT_OK;
  unsigned batch = ctx->in[0].dim.b;
  /* the halves (hdw: without columns, on conv_bwd_w where the backend has
   * it; else the groups below) */
  int halves = p->hsc != ~0u && ctx->scratch[p->hsc].data && batch >= CONV_HALVES &&
               (!p->hdw || k->conv_bwd_w);
  if (want_w && k->conv_bwd_w &&
      (conv_rows_dw(p) || conv_str_dw(p) || use_direct_bwd(p, 1, 1) ||
       (!halves && conv_sub_dw(p)))) {
    NNT_TRY(k->conv_bwd_w(k, g, batch, p->filters, ctx->in[0].data, ctx->d_out[0].data,
                          ctx->gw[0].data));
    want_w = 0;
  }
  if (want_w && halves) {
    NNT_TRY(gradient_halves(p, ctx, batch));
    want_w = 0;
  }
  if (want_w && nnt_conv_use_wino(k->conv_wino_dw != NULL, g, g->c, p->filters, batch,
                                  &ctx->scratch[1], NNT_WINO_MIN_SLICES)) {
    size_t out_len = p->filters * plane;
    NNT_TRY(k->conv_wino_dw(k, g, batch, p->filters, ctx->d_out[0].data, ctx->in[0].data,
                            ctx->gw[0].data, ctx->scratch[1].data,
                            nnt_tensor_len(&ctx->scratch[1])));
    for (unsigned b = 0; want_b && b < batch; b++)
      NNT_TRY(k->sum_cols(k, p->filters, plane, ctx->d_out[0].data + b * out_len,
                          b ? 1.0f : 0.0f, ctx->gw[1].data));
    return NNT_OK;
  }
  for (unsigned b = 0; b < batch && (want_w || want_b); b += p->bnb) {
    unsigned n = batch - b < p->bnb ? batch - b : p->bnb;
    const float *dy = group_dy(p, ctx, b, n, plane, &rc);
    NNT_TRY(rc);
    float beta = b ? 1.0f : 0.0f;
    const float *x = ctx->in[0].data + b * in_len;
    if (want_w && pw)
      NNT_TRY(k->gemm(k, 0, 1, p->filters, patch, n * plane, 1.0f, dy, n * plane, x, n * plane,
                      beta, ctx->gw[0].data, patch));
    if (want_w && !pw) {
      chan_job j = {p, ctx, dy, x, beta, n, p->gparts, p->bc / p->gparts, NNT_OK};
      nnt_kernels_parallel(k, p->gparts, grad_chans, &j);
      NNT_TRY(atomic_load(&j.rc));
    }
    if (want_b)
      NNT_TRY(k->sum_cols(k, p->filters, n * plane, dy, beta, ctx->gw[1].data));
  }
  return NNT_OK;
}

/* The derivative in its own scratch (nnt_conv_deriv_scratch): per group of dnb
 * images, dY gathered into [filters, n*plane] (one image's is that
 * already), dcol = W^T dY behind it, folded into the group's dX. */
static int deriv_own(const conv_priv *p, nnt_run_ctx *ctx, unsigned batch) {
  const nnt_conv_geom *g = &p->g;
  const nnt_kernels *k = ctx->k;
  size_t patch = (size_t)g->c * g->kh * g->kw, plane = (size_t)g->oh * g->ow;
  size_t in_len = nnt_dim_feature_len(ctx->d_in[0].dim), out_len = p->filters * plane;
  float *gathered = ctx->scratch[p->dsc].data;
  for (unsigned b = 0; b < batch; b += p->dnb) {
    unsigned n = batch - b < p->dnb ? batch - b : p->dnb;
    const float *dy = ctx->d_out[0].data + b * out_len;
    float *dcol = gathered + p->filters * n * plane;
    if (n > 1) {
      NNT_TRY(nnt_conv_swap_outer(k, n, p->filters, plane, dy, gathered));
      dy = gathered;
    }
    NNT_TRY(k->gemm(k, 1, 0, patch, n * plane, p->filters, 1.0f, ctx->w[0].data, patch, dy,
                    n * plane, 0.0f, dcol, n * plane));
    NNT_TRY(nnt_conv_fold(k, g, n, dcol, ctx->d_in[0].data + b * in_len, in_len));
  }
  return NNT_OK;
}

/* dcol = W^T dY a block of channels (a range of W's columns) at a time,
 * folded back into those channels of dX (pointwise: dcol is dX). */
int nnt_conv_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  conv_priv *p = l->priv;
  const nnt_conv_geom *g = &p->g;
  const nnt_kernels *k = ctx->k;
  size_t taps = (size_t)g->kh * g->kw, patch = g->c * taps, plane = (size_t)g->oh * g->ow;
  size_t in_len = nnt_dim_feature_len(ctx->d_in[0].dim);
  size_t hw = (size_t)g->h * g->w;
  unsigned batch = ctx->d_in[0].dim.b;
  if (ctx->d_add & 1) /* into a fan-out's sum (conv_finalize's NNT_LF_DERIV_ADDS) */
    return k->conv_bwd_x_add ? k->conv_bwd_x_add(k, g, batch, p->filters, ctx->w[0].data,
                                                 ctx->d_out[0].data, ctx->d_in[0].data)
                             : NNT_ERR_INVAL;
  if (is_pointwise(g)) /* whole images on the threads */
    return nnt_conv_deriv_images(p, ctx, batch, batch);
  if (k->conv_bwd_x && (conv_rows(p, 1) || conv_sub_dx(p) || conv_str_dx(p) ||
                        use_direct_bwd(p, 1, CONV_DIRECT_BWD_X_MIN_C)))
    return k->conv_bwd_x(k, g, batch, p->filters, ctx->w[0].data, ctx->d_out[0].data,
                         ctx->d_in[0].data);
  float *col = ctx->scratch[1].data;
  int rc;
  if (p->dsc != ~0u && ctx->scratch[p->dsc].data) { /* planned in training only */
    if (p->dwino && k->conv_wino) {
      nnt_conv_geom d = nnt_conv_wino_dgeom(p);
      return k->conv_wino(k, &d, batch, g->c, 1, ctx->w[0].data, NULL, ctx->d_out[0].data,
                          ctx->d_in[0].data, ctx->scratch[p->dsc].data,
                          nnt_tensor_len(&ctx->scratch[p->dsc]));
    }
    return deriv_own(p, ctx, batch);
  }
  if (nnt_wino_geom_ok(g)) {
    nnt_conv_geom d = nnt_conv_wino_dgeom(p);
    if (nnt_conv_use_wino(k->conv_wino != NULL, &d, p->filters, g->c, batch, &ctx->scratch[1],
                          NNT_WINO_MIN_SLICES))
      return k->conv_wino(k, &d, batch, g->c, 1, ctx->w[0].data, NULL, ctx->d_out[0].data,
                          ctx->d_in[0].data, ctx->scratch[1].data,
                          nnt_tensor_len(&ctx->scratch[1]));
  }
  if (p->pnb > 1) /* whole images on the threads */
    return nnt_conv_deriv_images(p, ctx, batch, p->pnb);
  /* col2im_set writes each block's planes whole (zeros where no window
   * reaches): every plane of dX is one block's of one group */
  int set = k->col2im_set != NULL;
  if (!set)
    NNT_TRY(k->fill(k, nnt_tensor_len(&ctx->d_in[0]), 0.0f, ctx->d_in[0].data));
  for (unsigned b = 0; b < batch; b += p->bnb) {
    unsigned n = batch - b < p->bnb ? batch - b : p->bnb;
    const float *dy = group_dy(p, ctx, b, n, plane, &rc);
    NNT_TRY(rc);
    for (unsigned c0 = 0; c0 < g->c; c0 += p->bc) {
      nnt_conv_geom gb = block_geom(p, c0);
      NNT_TRY(k->gemm(k, 1, 0, gb.c * taps, n * plane, p->filters, 1.0f,
                      ctx->w[0].data + c0 * taps, patch, dy, n * plane, 0.0f, col, n * plane));
      float *dx = ctx->d_in[0].data + b * in_len + c0 * hw;
      NNT_TRY(set ? k->col2im_set(k, &gb, n, col, dx) : k->col2im(k, &gb, n, col, dx));
    }
  }
  return NNT_OK;
}
