/* conv_wino's NNT_WINO_KEEP_U (kernels.h): a later group of images of one
 * forward may take the transformed filters the first group's call left in
 * the scratch. On the CPU's F(4x4, 3x3) (which keeps them whole) a second
 * call with the flag gives the bits of a call without it, with a bias or
 * none, flipped or not, on one thread and on two; and it does take them
 * from the scratch: with the scratch's filters spoiled between the calls
 * the flagged call's output changes, the unflagged one's does not. */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/kernels.h"
#include "nntrainer/philox.h"

static float *rnd(nnt_rng *r, size_t n) {
  float *x = malloc(n * sizeof *x);
  assert_non_null(x);
  tu_fill_uniform(r, x, n, -1.0f, 1.0f);
  return x;
}

static void test_keep_u(void **state) {
  (void)state;
  const nnt_kernels *k = nnt_kernels_cpu();
  nnt_rng r;
  nnt_rng_seed(&r, 7);
  /* 16x16 images: 16 tiles of 4x4 each, chunks of 4 whole images, as
   * ResNet-18's stage 2 in small; 8 images in two groups of 4 */
  const size_t c = 12, f = 12, n = 4, h = 16;
  nnt_conv_geom g = {.c = c, .h = h, .w = h, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .dh = 1,
                     .dw = 1, .pt = 1, .pb = 1, .pl = 1, .pr = 1, .oh = h, .ow = h};
  size_t len = nnt_wino4_scratch(c, f, 4 * 16), in = c * h * h, out = f * h * h;
  assert_true(nnt_cpu_wino4_takes(&g, f, len));
  float *w = rnd(&r, f * c * 9), *b = rnd(&r, f), *x = rnd(&r, 2 * n * in);
  float *s = malloc(len * sizeof *s), *y0 = malloc(n * out * sizeof *y0);
  float *y1 = malloc(n * out * sizeof *y1);
  assert_true(s && y0 && y1);
  for (int threads = 1; threads <= 2; threads++) {
    if (threads == 2)
      tu_two_threads();
    for (int flip = 0; flip <= 1; flip++)
      for (int bias = 0; bias <= 1; bias++) {
        const float *bb = bias && !flip ? b : NULL;
        /* the second group without the flag, then after the first group
         * with it */
        assert_int_equal(k->conv_wino(k, &g, n, f, flip, w, bb, x + n * in, y0, s, len), NNT_OK);
        assert_int_equal(k->conv_wino(k, &g, n, f, flip, w, bb, x, y1, s, len), NNT_OK);
        assert_int_equal(
            k->conv_wino(k, &g, n, f, flip | NNT_WINO_KEEP_U, w, bb, x + n * in, y1, s, len),
            NNT_OK);
        assert_memory_equal(y0, y1, n * out * sizeof *y0);
        /* the filters spoiled in the scratch: the flagged call reads them */
        for (size_t i = 0; i < 36 * f * c; i++)
          s[i] *= 2.0f;
        assert_int_equal(
            k->conv_wino(k, &g, n, f, flip | NNT_WINO_KEEP_U, w, bb, x + n * in, y1, s, len),
            NNT_OK);
        assert_memory_not_equal(y0, y1, n * out * sizeof *y0);
        assert_int_equal(k->conv_wino(k, &g, n, f, flip, w, bb, x + n * in, y1, s, len), NNT_OK);
        assert_memory_equal(y0, y1, n * out * sizeof *y0);
      }
  }
  assert_true(tu_one_thread() > 0);
  free(w), free(b), free(x), free(s), free(y0), free(y1);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_keep_u)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
