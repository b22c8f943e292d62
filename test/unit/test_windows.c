/* The CPU's sliding-window kernels (im2col, col2im, max and average
 * pooling, forward and backward) against naive double-precision
 * references over geometries with strides, dilations, uneven padding and
 * odd sizes; col2im as im2col's adjoint; col2im_set bitwise a fill and
 * col2im; channel blocks (cs) bitwise the full op's rows. Split out of
 * test_kernels.c, which holds the other kernels. */
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/kernels.h"
#include "nntrainer/philox.h"

static const nnt_kernels *K;
static nnt_rng R;

static nnt_conv_geom geom(unsigned c, unsigned h, unsigned w, unsigned kh, unsigned kw,
                          unsigned sh, unsigned sw, unsigned dh, unsigned dw, unsigned pt,
                          unsigned pb, unsigned pl, unsigned pr) {
  nnt_conv_geom g = {c, h, w, kh, kw, sh, sw, dh, dw, pt, pb, pl, pr, 0, 0, 0, 0};
  g.oh = (h + pt + pb - dh * (kh - 1) - 1) / sh + 1;
  g.ow = (w + pl + pr - dw * (kw - 1) - 1) / sw + 1;
  return g;
}

/* The input value under window position (oy, ox), tap (a, b); 0 in padding. */
static int tap(const nnt_conv_geom *g, unsigned oy, unsigned ox, unsigned a, unsigned b,
               long *at) {
  long iy = (long)(oy * g->sh + a * g->dh) - (long)g->pt;
  long ix = (long)(ox * g->sw + b * g->dw) - (long)g->pl;
  if (iy < 0 || ix < 0 || iy >= (long)g->h || ix >= (long)g->w)
    return 0;
  *at = iy * (long)g->w + ix;
  return 1;
}

static void test_windows(void **state) {
  (void)state;
  const nnt_conv_geom gs[] = {
      geom(2, 5, 7, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0),
      geom(3, 6, 5, 2, 3, 2, 1, 2, 1, 1, 0, 2, 1),
      geom(1, 4, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1),
      geom(2, 1, 17, 1, 3, 1, 2, 1, 1, 0, 0, 1, 1),
      /* max 2x2 stride 2 (its own CPU forward loop); odd sizes leave a row and a
       * column outside every window, whose dx must still be zeroed */
      geom(2, 5, 7, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0),
      geom(3, 4, 6, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0),
      /* stride 1 and an output as wide as the input (CPU im2col's one run
       * per row): same padding; dilated with uneven padding; taps whose
       * every column (b = 0) or every row (a = 0) lies in the padding */
      geom(2, 5, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      geom(2, 4, 6, 3, 5, 1, 1, 2, 1, 3, 2, 2, 2),
      geom(1, 3, 2, 2, 5, 1, 1, 1, 1, 3, 0, 4, 0),
      /* top padding deeper than the output: tap row 0 lies above every
       * output row by more rows than the output has (found by fuzz_ini) */
      geom(2, 2, 4, 5, 3, 1, 1, 1, 1, 4, 1, 1, 1),
      /* no padding, an 18-wide output; stride 2 down and 1 across with
       * uneven padding */
      geom(2, 6, 20, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0),
      geom(1, 9, 37, 3, 2, 2, 1, 1, 1, 1, 1, 3, 2),
      /* the AVX-512 code's shapes (cpu_window_avx512.c): output planes of at
       * most 16 positions over an input plane that fits a vector (ResNet-18's
       * stage 4) and one that does not (its 8x8 -> 4x4 downsampling, 3x3 and
       * 1x1); stride 2 across with rows of 20, 21 and 35 columns, dilated */
      geom(3, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      geom(2, 8, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1),
      geom(3, 8, 7, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0),
      geom(2, 3, 5, 2, 3, 1, 2, 1, 2, 1, 0, 2, 1),
      geom(2, 6, 40, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1),
      geom(2, 5, 41, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1),
      geom(1, 7, 72, 3, 3, 2, 2, 2, 2, 2, 1, 3, 2),
      /* 1x1 windows with stride 2 across and rows of at least 8 outputs
       * (ResNet-18's shortcuts: even values moved out of two vectors; the
       * 8x8 -> 4x4 one above on AVX2, rows of 4 outputs): 9
       * outputs whose last reads the input row's last value, 16, and 17
       * (a vector and one more) with stride 3 down */
      geom(3, 5, 17, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0),
      geom(2, 3, 32, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0),
      geom(2, 4, 34, 1, 1, 3, 2, 1, 1, 0, 0, 0, 0),
      /* col2im_set's row writer (1x1, stride 2 across, no padding): 20
       * outputs a row (a vector and a part); bottom and right padding,
       * which it leaves to the plain loops */
      geom(2, 4, 40, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0),
      geom(1, 4, 6, 1, 1, 2, 2, 1, 1, 0, 1, 0, 1),
  };
  for (size_t t = 0; t < NNT_ARRAY_LEN(gs); t++) {
    const nnt_conv_geom *g = &gs[t];
    size_t plane = (size_t)g->h * g->w, oplane = (size_t)g->oh * g->ow;
    /* im2col and col2im over NI images: image i's columns at i*oplane of
     * rows NI*oplane long */
    enum { NI = 3 };
    size_t nx = g->c * plane, ncol = (size_t)g->c * g->kh * g->kw * oplane * NI;
    float *x = tu_rand(&R, nx * NI, -1, 1), *col = malloc(ncol * 4), *cr = tu_rand(&R, ncol, -1, 1);
    float *dx = tu_rand(&R, nx * NI, -1, 1), *dx0 = NULL;
    K->im2col(K, g, NI, x, col);
    for (unsigned i = 0; i < NI; i++)
      for (unsigned c = 0; c < g->c; c++)
        for (unsigned a = 0; a < g->kh; a++)
          for (unsigned b = 0; b < g->kw; b++)
            for (unsigned oy = 0; oy < g->oh; oy++)
              for (unsigned ox = 0; ox < g->ow; ox++) {
                long at;
                float want =
                    tap(g, oy, ox, a, b, &at) ? x[i * nx + c * plane + (size_t)at] : 0.0f;
                size_t row = ((size_t)c * g->kh + a) * g->kw + b;
                assert_true(col[row * oplane * NI + i * oplane + (size_t)oy * g->ow + ox] ==
                            want);
              }
    /* col2im adds the adjoint: dx_after - dx_before = im2col^T(cr) */
    dx0 = tu_dup(dx, nx * NI);
    K->col2im(K, g, NI, cr, dx);
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < ncol; i++)
      lhs += (double)col[i] * cr[i];
    for (size_t i = 0; i < nx * NI; i++)
      rhs += (double)x[i] * ((double)dx[i] - dx0[i]);
    tu_expect1("col2im adjoint", rhs, lhs, 1e-5);
    /* the plain C loops, then the AVX2 code, give the same bits as the
     * widest path the CPU takes (the same values copied, the same adds in
     * the same order) */
    for (int path = NNT_BLAS_SSE; path <= NNT_BLAS_AVX2; path += NNT_BLAS_AVX2) {
      int was = nnt_cpu_vec_path(path);
      float *colc = malloc(ncol * 4), *dxc = tu_dup(dx0, nx * NI);
      K->im2col(K, g, NI, x, colc);
      K->col2im(K, g, NI, cr, dxc);
      nnt_cpu_vec_path(was);
      assert_memory_equal(colc, col, ncol * 4);
      assert_memory_equal(dxc, dx, nx * NI * 4);
      free(colc), free(dxc);
    }
    { /* col2im_set: the same bits as a fill with 0 and col2im, on both
       * code paths, over dx holding NaNs (every value written); -0.0f
       * columns as col2im makes them (0 + -0 = +0) */
      float *set = malloc(nx * NI * 4), *want = malloc(nx * NI * 4), *crz = tu_dup(cr, ncol);
      for (size_t i = 0; i < ncol; i += 5)
        crz[i] = -0.0f;
      memset(want, 0, nx * NI * 4);
      K->col2im(K, g, NI, crz, want);
      for (int path = 0; path < 3; path++) { /* the widest, plain C, AVX2 */
        int was = path ? nnt_cpu_vec_path(path == 1 ? NNT_BLAS_SSE : NNT_BLAS_AVX2) : 0;
        for (size_t i = 0; i < nx * NI; i++)
          set[i] = NAN;
        assert_int_equal(K->col2im_set(K, g, NI, crz, set), NNT_OK);
        if (path)
          nnt_cpu_vec_path(was);
        assert_memory_equal(set, want, nx * NI * 4);
      }
      if (g->c > 1) { /* channels [1, c): those planes only, the rest untouched */
        nnt_conv_geom gb = *g;
        gb.c = g->c - 1;
        gb.cs = g->c;
        size_t skip = (size_t)g->kh * g->kw * oplane * NI;
        for (size_t i = 0; i < nx * NI; i++)
          set[i] = NAN;
        assert_int_equal(K->col2im_set(K, &gb, NI, crz + skip, set + plane), NNT_OK);
        for (unsigned i = 0; i < NI; i++) {
          for (size_t v = 0; v < plane; v++)
            assert_true(isnan(set[i * nx + v]));
          assert_memory_equal(set + i * nx + plane, want + i * nx + plane, (nx - plane) * 4);
        }
      }
      free(set), free(want), free(crz);
    }
    if (g->c > 1) {
      /* a block of channels [1, c) of the NI images (cs = c: x and dx at
       * channel 1, images c channels apart): im2col gives those channels'
       * rows of the full columns, col2im adds onto those channels only,
       * each bitwise as over all channels */
      nnt_conv_geom gb = *g;
      gb.c = g->c - 1;
      gb.cs = g->c;
      size_t taps = (size_t)g->kh * g->kw, skip = taps * oplane * NI;
      float *colb = malloc((ncol - skip) * 4), *dxb = tu_dup(dx0, nx * NI);
      assert_int_equal(K->im2col(K, &gb, NI, x + plane, colb), NNT_OK);
      assert_memory_equal(colb, col + skip, (ncol - skip) * 4);
      assert_int_equal(K->col2im(K, &gb, NI, cr + skip, dxb + plane), NNT_OK);
      for (unsigned i = 0; i < NI; i++) {
        assert_memory_equal(dxb + i * nx, dx0 + i * nx, plane * 4);
        assert_memory_equal(dxb + i * nx + plane, dx + i * nx + plane, (nx - plane) * 4);
      }
      free(colb), free(dxb);
    }
    /* pooling over 2 images, max and average (padding counted in the mean) */
    size_t nimg = 2, nin = nimg * nx, nout = nimg * g->c * oplane;
    float *px = tu_rand(&R, nin, -1, 1), *py = malloc(nout * 4), *idx = malloc(nout * 4);
    float *pdy = tu_rand(&R, nout, -1, 1), *pdx = tu_rand(&R, nin, 5, 6);
    double *wy = tu_dzeros(nout), *wdx = tu_dzeros(nin);
    for (int mode = 0; mode < 2; mode++) {
      memset(wdx, 0, nin * sizeof *wdx);
      for (size_t p = 0; p < nimg * g->c; p++)
        for (unsigned oy = 0; oy < g->oh; oy++)
          for (unsigned ox = 0; ox < g->ow; ox++) {
            double best = -INFINITY, sum = 0;
            long arg = -1, at;
            for (unsigned a = 0; a < g->kh; a++)
              for (unsigned b = 0; b < g->kw; b++)
                if (tap(g, oy, ox, a, b, &at)) {
                  double v = px[p * plane + (size_t)at];
                  sum += v;
                  if (v > best)
                    best = v, arg = at;
                }
            size_t o = p * oplane + (size_t)oy * g->ow + ox;
            double k = (double)g->kh * g->kw;
            wy[o] = mode == 0 ? (arg < 0 ? 0 : best) : sum / k;
            if (mode == 0 && arg >= 0)
              wdx[p * plane + (size_t)arg] += pdy[o];
            for (unsigned a = 0; mode == 1 && a < g->kh; a++)
              for (unsigned b = 0; b < g->kw; b++)
                if (tap(g, oy, ox, a, b, &at))
                  wdx[p * plane + (size_t)at] += pdy[o] / k;
          }
      K->pool_fwd(K, g, nimg, mode, px, py, idx);
      tu_expect_vs(mode ? "avg pool" : "max pool", py, wy, nout, 1e-5);
      K->pool_bwd(K, g, nimg, mode, pdy, idx, pdx); /* overwrites the 5..6 garbage */
      tu_expect_vs(mode ? "avg pool'" : "max pool'", pdx, wdx, nin, 1e-5);
    }
    free(x), free(col), free(cr), free(dx), free(dx0);
    free(px), free(py), free(idx), free(pdy), free(pdx), free(wy), free(wdx);
  }
}

int main(void) {
  K = nnt_kernels_cpu();
  nnt_rng_seed(&R, 2024);
  assert_int_equal(nnt_cpu_set_threads(1, NULL), NNT_OK);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_windows)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
