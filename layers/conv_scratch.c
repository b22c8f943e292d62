/* conv2d's groups and scratch, chosen at finalize (conv.c conv_finalize):
 * the backward's groups and channel blocks, and the Winograd scratch of the
 * forward, of the derivative and the weight gradient, and of the
 * derivative alone, each sized by measurement (docs/performance.md) and
 * by where the training plan peaks (docs/memory.md). */
#include <stdint.h>

#include "layers/conv_impl.h"

/* A weight gradient product at least this deep (images x plane) runs as
 * fast as its width allows: ResNet-18's stage 4 gradient (4 images x 16
 * deep, parts 288 columns wide, against 6 x 16 deep and 117 wide) 69-70
 * -> 71-75 GFLOP/s on one thread and 121-127 -> 130-153 on two
 * (docs/performance.md, eighteenth round). */
#define CONV_BWD_DEEP 64
/* The backward's groups and channel blocks: its scratch (a block's
 * columns [bc*kh*kw, bnb*plane] and, for bnb > 1, the gathered dY
 * [filters, bnb*plane]) takes at most room x plane floats: one image's
 * columns (room = patch), so that the backward steps, where training's
 * peak lies, need no more than one image at a time did; a strided layer
 * takes the forward's columns (room = nb x patch; see conv_finalize): a
 * downsampling layer's backward runs once the wider layers after it have
 * released what they kept (ResNet-18's res3a_c1 and res4a_c1 have 16 and
 * 7 MiB below the training peak there; their backward 0.69-0.85 ->
 * 0.85-0.93 of a bare sgemm, every default plan of the repo's models the
 * same: docs/performance.md, tenth round).
 * Of the groups up to the forward's nb images that leave room for a
 * channel, each with as few blocks as fit (at most CONV_BWD_BLOCK_COLS
 * columns) and as even as they go, the one whose gradient products are
 * the widest (a part's block: bc / parts x kh x kw, conv_chan_parts)
 * among those at least CONV_BWD_DEEP deep (bnb x plane), else whose
 * narrower side is the widest, the most images on a tie; bnb 1 with
 * every channel in one block (no dY to gather) where none fits. */
void nnt_conv_backward_blocks(conv_priv *p, size_t room) {
  size_t taps = (size_t)p->g.kh * p->g.kw, plane = (size_t)p->g.oh * p->g.ow, best = 0;
  p->bnb = 1;
  p->bc = p->g.c;
  for (unsigned n = p->nb; n > 1; n--) {
    size_t dy = (size_t)p->filters * n;
    if (dy >= room || (room - dy) / (taps * n) == 0)
      continue;
    size_t bc = (room - dy) / (taps * n), most = CONV_BWD_BLOCK_COLS / taps;
    if (most && bc > most)
      bc = most;
    size_t blocks = (p->g.c + bc - 1) / bc;
    bc = (p->g.c + blocks - 1) / blocks; /* then as even as they go */
    /* the gradient's products: n x plane deep, a part's block wide */
    size_t wide = bc / conv_chan_parts((unsigned)bc, (unsigned)taps) * taps;
    size_t narrow = n * plane < wide ? n * plane : wide;
    if (n * plane >= CONV_BWD_DEEP)
      narrow = wide;
    if (narrow > best)
      best = narrow, p->bnb = n, p->bc = (unsigned)bc;
  }
}


nnt_conv_geom nnt_conv_wino_dgeom(const conv_priv *p) {
  const nnt_conv_geom *g = &p->g;
  nnt_conv_geom d = {.c = p->filters, .h = g->oh, .w = g->ow, .kh = 3, .kw = 3, .sh = 1,
                     .sw = 1, .dh = 1, .dw = 1, .oh = g->h, .ow = g->w};
  d.pt = 2 - g->pt, d.pb = 2 - g->pb, d.pl = 2 - g->pl, d.pr = 2 - g->pr;
  return d;
}

/* The 4x4 tiles a chunk of the CPU's F(4x4, 3x3) takes (kernels.h
 * NNT_WINO4_IMAGE_TILES) for batch images of g: one image's where an
 * image has enough, else as many whole images' as reach
 * NNT_WINO4_MIN_CHUNK; 0 where the batch has fewer or where F(2x2, 3x3)
 * keeps its chunks to one image (the CPU's conv_wino takes F(4, 3) where
 * the scratch holds nnt_wino4_scratch of these). */
static size_t wino4_tiles(const nnt_conv_geom *g, size_t batch) {
  size_t tpi = (size_t)((g->oh + 3) / 4) * ((g->ow + 3) / 4);
  if (tpi >= NNT_WINO4_IMAGE_TILES || !tpi)
    return tpi;
  size_t imgs = (NNT_WINO4_MIN_CHUNK + tpi - 1) / tpi;
  if (imgs > batch || (size_t)((g->oh + 1) / 2) * ((g->ow + 1) / 2) >= NNT_WINO_IMAGE_TILES)
    return 0;
  return imgs * tpi;
}

/* The backward's scratch in floats for conv_wino's derivative and
 * conv_wino_dw where the layer takes them: F(4x4, 3x3)'s (the
 * derivative's chunks of wino4_tiles, the weight gradient's of the most
 * tiles, 256, 128 or 64, that the bound holds) where the layer keeps its
 * width (channels = filters) and that is at most 1.25 times its input:
 * ResNet-18's stage 2 (4.5 MiB against 4, 64 tiles), derivative 141 ->
 * 231 and gradient 138 -> 230 GFLOP/s on one thread, its arena the same;
 * its stage 1 (5 MiB against 8, 256 tiles), whose gradient in chunks of
 * 64 tiles (1.7 MiB) made 36 products of 64 x 64 x 64 a chunk: 2.03 ->
 * 2.22 times a bare sgemm on one thread and 2.07 -> 2.27 on two (medians
 * of six alternating runs; docs/performance.md, thirty-fourth round), its
 * arena the same. conv-BN-ReLU's c3 (64 -> 128), whose backward lies
 * at that net's training peak, would raise it by 1 MB (and its largest
 * batch in 64 MB from 42 to 40), measured; neither bound knows the
 * plan, so both were checked against it. Else all 16 slices in one pass
 * (twice their least) where that is at most 3 times its input (8 slices a
 * pass where twice their least is more than a tensor's length), else 0.
 * ResNet-18's stage 2 on F(2x2, 3x3) (2 MiB against 4 MiB of input) made
 * one pass instead of two that way: its derivative 201-236 -> 282-299
 * GFLOP/s. Its im2col scratch (one
 * image's columns) is below that on narrow planes with many channels:
 * ResNet-18's stage 3 (6 MiB against 2 MiB of input) then runs both on
 * Winograd, 1.4x as fast as im2col, with its planned arena unchanged;
 * with 8 slices a pass in 3 MiB (a bound of 1.5 times the input, before)
 * its weight gradient ran at 0.90-0.95 of a bare sgemm on two threads,
 * 1.12-1.21 in one pass, and its derivative 1.04-1.05 against 1.13-1.20
 * (docs/performance.md, thirty-fourth round; 12 MiB, 256 tiles a chunk,
 * was faster still but raised the arena by 4 MiB). Its stage 4 would take
 * 10 MiB against 1 MiB and raised the arena by 10 MB (its peak lies
 * there), which the bound keeps out. */
size_t nnt_conv_wino_bwd_scratch(const conv_priv *p, nnt_dim in) {
  const nnt_conv_geom *g = &p->g;
  if (!nnt_wino_geom_ok(g) || g->c < CONV_WINO_MIN_C || p->filters < CONV_WINO_MIN_C)
    return 0;
  size_t tiles = (size_t)in.b * ((g->oh + 1) / 2) * ((g->ow + 1) / 2);
  size_t need = nnt_wino_min_scratch(g->c, p->filters, tiles);
  size_t input = (size_t)in.b * in.c * in.h * in.w;
  /* F(4x4, 3x3): the derivative's chunks, the weight gradient's (the
   * most tiles a chunk that the bound holds, down to NNT_WINO_MIN_TILES) */
  nnt_conv_geom d = nnt_conv_wino_dgeom(p);
  size_t t4 = wino4_tiles(&d, in.b), all4 = (size_t)in.b * ((g->oh + 3) / 4) * ((g->ow + 3) / 4);
  for (size_t most = NNT_WINO4_MAX_TILES; g->c == p->filters; most /= 2) {
    size_t t4w = all4 < most ? all4 : most;
    size_t need4 = nnt_wino4_scratch(g->c, p->filters, t4 > t4w ? t4 : t4w);
    if (need4 <= UINT32_MAX && 4 * need4 <= 5 * input)
      return need4;
    if (most <= NNT_WINO_MIN_TILES)
      break;
  }
  if (2 * need > 3 * input || need > UINT32_MAX)
    return 0;
  return need <= UINT32_MAX / 2 ? 2 * need : need; /* all 16 slices in one pass */
}

/* The derivative's own scratch in floats (NNT_SCRATCH_DERIV, so that
 * calc_derivative runs before calc_gradient, the weight gradient not yet
 * alive) where the backward's is too small for conv_wino and the batch
 * has at least NNT_WINO_MIN_TILES tiles (as a wide forward): im2col over
 * groups of dnb images, their dY gathered and their columns
 * ([filters + patch, dnb*plane]), dnb the most images whose group is no
 * larger than the filters' gradient, which training holds beside the
 * backward's other steps, as even as the groups go; 0 for a frozen layer
 * (no gradient makes that room) and elsewhere. ResNet-18's stage 4 (2
 * groups of 16 images, 5 MiB against a 9 MiB gradient): derivative
 * 0.78-0.81 -> 0.90-0.98 of a bare sgemm on one thread and 0.56-0.84 ->
 * 1.09-1.24 at two, where this scratch held conv_wino's passes of 4
 * slices in 6 MiB before (docs/performance.md, sixteenth round); groups
 * of 2, 4 and 8 images ran slower (0.70, 0.76-0.83, 0.84-0.85 on one
 * thread). Where conv_wino's filter blocks (kernels.h nnt_wino_fb_scratch)
 * fit in the same bound, the scratch is theirs instead (dwino): stage 4's
 * 128 tiles and blocks of 128 filters, exactly the 9 MiB gradient's size;
 * its three derivatives 107 -> 92-102 ms of the one-thread step, the
 * planned arenas the same (docs/performance.md, twenty-fifth round). */
size_t nnt_conv_deriv_scratch(conv_priv *p, nnt_dim in, int trainable) {
  const nnt_conv_geom *g = &p->g;
  if (!trainable || !nnt_wino_geom_ok(g) || g->c < CONV_WINO_MIN_C ||
      p->filters < CONV_WINO_MIN_C || nnt_conv_wino_bwd_scratch(p, in))
    return 0;
  size_t tiles = (size_t)in.b * ((g->h + 1) / 2) * ((g->w + 1) / 2);
  if (tiles < NNT_WINO_MIN_TILES) /* a small batch: the backward's blocks */
    return 0;
  size_t grad = (size_t)p->filters * g->c * 9, plane = (size_t)g->oh * g->ow;
  size_t one = ((size_t)p->filters + (size_t)g->c * 9) * plane, fit = grad / one;
  if (!fit)
    return 0;
  if (fit > in.b)
    fit = in.b;
  size_t groups = (in.b + fit - 1) / fit, dnb = (in.b + groups - 1) / groups;
  if (dnb * one > UINT32_MAX)
    return 0;
  p->dnb = (unsigned)dnb;
  p->dwino = 0;
  /* conv_wino in filter blocks where they fit in the same bound (all of
   * U, 16 f c floats, never does: the bound is 9 f c) */
  nnt_conv_geom d = nnt_conv_wino_dgeom(p);
  size_t dt = (size_t)in.b * ((d.oh + 1) / 2) * ((d.ow + 1) / 2);
  size_t fb, nb;
  if (nnt_wino_fb_blocks(p->filters, g->c, dt, grad, &fb, &nb)) {
    size_t need = nnt_wino_fb_scratch(p->filters, dt, fb);
    if (need > dnb * one && need <= UINT32_MAX) {
      p->dwino = 1;
      return need;
    }
  }
  return dnb * one;
}

/* The forward's scratch in floats for conv_wino over groups of wnb images
 * where an image has too few tiles for nb of them to reach
 * CONV_WINO_FWD_MIN_TILES (and too few for one call over the batch, see
 * conv_forward), and that is at most 1.5 times the layer's input; else 0
 * (wnb stays nb). ResNet-18's stages 2 and 3 (4 and 16 images a group,
 * 1 and 3 MiB against 4 and 2 MiB of input) then run their forward on
 * Winograd, 1.4 to 1.5 times as fast as im2col on one thread, the
 * conv-BN-ReLU net's c3 too (docs/performance.md); their arenas stay the
 * same (the training peak lies in the backward, the others elsewhere).
 * A wide layer, whose filters outweigh its input, may take up to its own
 * tensors' size (filters, input, output) and groups of as few as
 * NNT_WINO_MIN_TILES tiles: ResNet-18's stage 4 (10 MiB against 11; its
 * forward steps in training have 9.4 to 11.4 MiB below the peak, besides
 * the 1.9 MiB of columns it no longer takes; inference's peak is at stage
 * 1): forward 168-186 -> 238-251 GFLOP/s on one thread, every planned
 * arena the same.
 * Before all that, groups of whole images for the CPU's F(4x4, 3x3)
 * (wino4_tiles; fwd4) where their scratch is also at most 1.5 times the
 * input: ResNet-18's stage 2 (4 images a group, 4.5 MiB against 4) and
 * conv-BN-ReLU's c3 (2.8 against 2), forward 143 -> 180 and 148 -> 215
 * GFLOP/s on one thread (docs/performance.md), every planned arena the
 * same (checked over every INI and mode, budgets and largest batches). */
/* A frozen layer (trainable = false) on the CPU has no filter gradient
 * beside its forward, and in a frozen network its forward steps are where
 * the training plan peaks (the largest activations, a residual beside
 * them): there the forward's scratch takes all 16 slices of F(2x2, 3x3) in
 * one pass where that is at most 1 / CONV_FROZEN_SHARE of the input, over
 * one image where an image has NNT_WINO_IMAGE_TILES tiles (lean: below one
 * image's im2col columns, so the forward then runs on conv_wino alone) and
 * over the groups above elsewhere; no F(4x4, 3x3) groups, a wide layer's
 * own tensors without the filters, and one image's or group's columns at
 * a time (pnb, pgr 1). The frozen ResNet-18 (docs/memory.md): stage 1 in
 * 0.75 MiB instead of 2.25, stage 2 in 2 MiB of F(2x2, 3x3) instead of 4.5
 * of F(4x4, 3x3), stage 4 on im2col in 1.9 MiB instead of 10; the same
 * kernels on the same groups with memory_optimization on or off. */
#define CONV_FROZEN_SHARE 2
size_t nnt_conv_wino_fwd_scratch(conv_priv *p, nnt_dim in, int frozen) {
  const nnt_conv_geom *g = &p->g;
  size_t tpi = (size_t)((g->oh + 1) / 2) * ((g->ow + 1) / 2), least = conv_wino_fwd_min_tiles(p);
  size_t input = (size_t)in.b * in.c * in.h * in.w, t4 = wino4_tiles(g, in.b);
  if (!nnt_wino_geom_ok(g) || g->c < CONV_WINO_MIN_C || p->filters < CONV_WINO_MIN_C || !tpi)
    return 0;
  if (frozen && tpi >= NNT_WINO_IMAGE_TILES) { /* F(4x4, 3x3) a chunk of one image */
    size_t need = t4 ? nnt_wino4_scratch(g->c, p->filters, t4) : 0;
    return CONV_FROZEN_SHARE * need <= input && need <= UINT32_MAX ? need : 0;
  }
  if (tpi >= NNT_WINO_IMAGE_TILES || p->nb * tpi >= CONV_WINO_FWD_MIN_TILES)
    return 0;
  size_t t4i = (size_t)((g->oh + 3) / 4) * ((g->ow + 3) / 4);
  if (t4 && !frozen && 2 * nnt_wino4_scratch(g->c, p->filters, t4) <= 3 * input) {
    size_t groups = in.b / (t4 / t4i), wnb = (in.b + groups - 1) / groups; /* each >= */
    size_t need = nnt_wino4_scratch(g->c, p->filters, wnb * t4i);
    if (need <= UINT32_MAX && 2 * need <= 3 * input) {
      p->wnb = (unsigned)wnb;
      p->fwd4 = 1;
      return need;
    }
  }
  size_t want = (CONV_WINO_FWD_MIN_TILES + tpi - 1) / tpi;
  if (want > in.b)
    want = in.b;
  if (want * tpi < least)
    return 0;
  size_t groups = in.b / want, wnb = (in.b + groups - 1) / groups; /* each >= want */
  size_t need = nnt_wino_min_scratch(g->c, p->filters, wnb * tpi);
  /* a frozen layer has no filter gradient beside it */
  size_t own = input + (size_t)p->filters * ((frozen ? 0 : (size_t)g->c * g->kh * g->kw) +
                                             (size_t)in.b * g->oh * g->ow);
  if (need > UINT32_MAX || (2 * need > 3 * input && !(conv_wino_wide(p) && need <= own)))
    return 0;
  p->wnb = (unsigned)wnb;
  if (frozen && CONV_FROZEN_SHARE * 2 * need <= input && 2 * need <= UINT32_MAX)
    return 2 * need; /* all 16 slices in one pass */
  return need;
}
