/* Layers that move values (addition, concat, split, multiout, identity,
 * permute, upsample2d) against PyTorch: outputs and input derivatives.
 * Data from test/golden/gen_golden.py (move_<name>.bin). */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/layer.h"

static void move_case(const char *name, const char *type, const char *const *props,
                      unsigned n_in, const nnt_dim *in, unsigned n_out_refs) {
  size_t n;
  float *g = tu_read_floats(tu_data_path("golden/data/move_%s.bin", name), &n);
  nnt_layer *l;
  nnt_err e = {0};
  assert_int_equal(nnt_layer_create(type, &l, &e), NNT_OK);
  for (size_t i = 0; props && props[i]; i += 2)
    assert_int_equal(nnt_layer_set_property(l, props[i], props[i + 1], &e), NNT_OK);
  nnt_finalize_ctx fc = {0};
  fc.n_in = n_in, fc.n_out = 1, fc.batch = in[0].b, fc.n_consumers = 1, fc.n_out_refs = n_out_refs;
  for (unsigned k = 0; k < n_in; k++)
    fc.in_dim[k] = in[k];
  if (l->ops->finalize(l, &fc, &e))
    fail_msg("%s: %s", name, e.msg);
  nnt_tensor x[NNT_MAX_IO], dx[NNT_MAX_IO], y[NNT_MAX_IO], dy[NNT_MAX_IO];
  const float *p = g;
  for (unsigned k = 0; k < n_in; k++) {
    size_t len = nnt_dim_len(in[k]);
    x[k] = (nnt_tensor){.dim = in[k], .data = malloc(len * 4)};
    memcpy(x[k].data, p, len * 4);
    p += len;
    dx[k] = (nnt_tensor){.dim = in[k], .data = calloc(len, 4)};
  }
  for (unsigned o = 0; o < fc.n_out; o++) {
    size_t len = nnt_dim_len(fc.out_dim[o]);
    dy[o] = (nnt_tensor){.dim = fc.out_dim[o], .data = malloc(len * 4)};
    memcpy(dy[o].data, p, len * 4);
    p += len;
    y[o] = (nnt_tensor){.dim = fc.out_dim[o], .data = calloc(len, 4)};
  }
  nnt_run_ctx c = {.k = nnt_kernels_cpu(), .n_in = n_in, .n_out = fc.n_out, .in = x, .out = y,
                   .d_in = dx, .d_out = dy, .training = 1};
  assert_int_equal(l->ops->forward(l, &c), NNT_OK);
  assert_int_equal(l->ops->calc_derivative(l, &c), NNT_OK);
  for (unsigned o = 0; o < fc.n_out; o++) {
    size_t len = nnt_dim_len(fc.out_dim[o]);
    if (tu_max_rel_err(y[o].data, p, len) > 1e-6)
      fail_msg("%s: output %u differs from PyTorch", name, o);
    p += len;
  }
  for (unsigned k = 0; k < n_in; k++) {
    size_t len = nnt_dim_len(in[k]);
    if (tu_max_rel_err(dx[k].data, p, len) > 1e-6)
      fail_msg("%s: dx %u differs from PyTorch", name, k);
    p += len;
  }
  assert_int_equal((size_t)(p - g), n);
  for (unsigned k = 0; k < n_in; k++)
    free(x[k].data), free(dx[k].data);
  for (unsigned o = 0; o < fc.n_out; o++)
    free(y[o].data), free(dy[o].data);
  nnt_layer_destroy(l);
  free(g);
}

#define D nnt_dim_make

static void test_merges(void **state) {
  (void)state;
  nnt_dim add[] = {D(2, 3, 2, 2), D(2, 3, 2, 2)};
  move_case("addition", "addition", NULL, 2, add, 1);
  const char *axis1[] = {"axis", "1", NULL};
  nnt_dim cc[] = {D(2, 2, 2, 3), D(2, 1, 2, 3)};
  move_case("concat_c", "concat", axis1, 2, cc, 1);
  const char *axis3[] = {"axis", "3", NULL};
  nnt_dim cw[] = {D(2, 1, 2, 3), D(2, 1, 2, 2)};
  move_case("concat_w", "concat", axis3, 2, cw, 1);
}

static void test_fanouts(void **state) {
  (void)state;
  const char *sp[] = {"axis", "3", "split_number", "2", NULL};
  nnt_dim s[] = {D(2, 1, 2, 6)};
  move_case("split_w", "split", sp, 1, s, 2);
  nnt_dim m[] = {D(2, 1, 2, 3)};
  move_case("multiout", "multiout", NULL, 1, m, 2);
}

static void test_reshapes(void **state) {
  (void)state;
  nnt_dim i[] = {D(2, 2, 2, 2)};
  move_case("identity", "identity", NULL, 1, i, 1);
  const char *perm[] = {"direction", "3,1,2", NULL};
  nnt_dim pm[] = {D(2, 2, 3, 4)};
  move_case("permute", "permute", perm, 1, pm, 1);
  const char *up[] = {"kernel_size", "2,3", NULL};
  nnt_dim u[] = {D(2, 2, 2, 3)};
  move_case("upsample2d", "upsample2d", up, 1, u, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_merges), cmocka_unit_test(test_fanouts),
                                     cmocka_unit_test(test_reshapes)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
