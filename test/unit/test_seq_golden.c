/* The sequence layers against PyTorch (test/golden/gen_layers.py, the
 * "sequence layers" section, writes test/golden/layers/emb_*.bin ...; its
 * docstrings give each file's layout): embedding against
 * torch.nn.functional.embedding (zero_idx_mask as a product with the mask),
 * forward and dW; layer_normalization against F.layer_norm over the width
 * and over the whole sample, forward, dX, dgamma, dbeta; positional_encoding
 * against NNTrainer's table computed by torch in float32; add, subtract,
 * multiply and divide against autograd, forward and both derivatives;
 * reduce_mean against torch.mean over each axis and over the sample.
 *
 * Tolerance: 1e-5 relative to max(1, |reference|); the embedding's output is
 * a copy and its dW a sum of at most a few terms. */
#include "fd_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-5

static void emb_case(const char *name, unsigned b, unsigned t, unsigned in_dim,
                     unsigned out_dim, int mask) {
  size_t n;
  float *g = tu_golden_layer(name, &n);
  size_t ni = (size_t)b * t, nw = (size_t)in_dim * out_dim, no = ni * out_dim;
  const float *x = g, *w = x + ni, *r = w + nw, *y = r + no, *dw = y + no;
  assert_int_equal(n, (size_t)(dw + nw - g));
  char si[16], so[16], sm[16];
  snprintf(si, sizeof si, "%u", in_dim);
  snprintf(so, sizeof so, "%u", out_dim);
  snprintf(sm, sizeof sm, "%d", mask);
  const char *props[] = {"in_dim", si, "out_dim", so, mask >= 0 ? "zero_idx_mask" : NULL, sm,
                         NULL};
  int seen = mask < 0, frac = 0;
  for (size_t i = 0; i < ni; i++)
    seen |= (int)x[i] == mask, frac |= x[i] != floorf(x[i]);
  assert_true(seen && frac); /* the data has the masked index, and fractions */
  const float *weights[] = {w};
  fd_harness h;
  fd_run_golden(&h, "embedding", props, nnt_dim_make(b, 1, 1, t), x, weights, r, NULL);
  assert_true(nnt_dim_eq(h.out.dim, nnt_dim_make(b, 1, t, out_dim)));
  tu_expect_close(h.out.data, y, no, TOL, "%s out", name);
  tu_expect_close(h.gw[0].data, dw, nw, TOL, "%s dW", name);
  fd_teardown(&h);
  free(g);
}

static void test_embedding(void **state) {
  (void)state;
  emb_case("emb_plain", 2, 6, 7, 4, -1);
  emb_case("emb_mask", 3, 5, 4, 3, 2);
}

static void ln_case(const char *name, nnt_dim in, const char *axis, const char *eps,
                    size_t nw) {
  size_t n;
  float *g = tu_golden_layer(name, &n);
  size_t ni = nnt_dim_len(in);
  const float *x = g, *ga = x + ni, *be = ga + nw, *r = be + nw, *y = r + ni, *dx = y + ni;
  const float *dg = dx + ni, *db = dg + nw;
  assert_int_equal(n, (size_t)(db + nw - g));
  const char *props[] = {"axis", axis, "epsilon", eps, NULL};
  const float *weights[] = {ga, be};
  fd_harness h;
  fd_run_golden(&h, "layer_normalization", props, in, x, weights, r, NULL);
  assert_int_equal(nnt_tensor_len(&h.w[0]), nw);
  tu_expect_close(h.out.data, y, ni, TOL, "%s out", name);
  tu_expect_close(h.din.data, dx, ni, TOL, "%s dx", name);
  tu_expect_close(h.gw[0].data, dg, nw, TOL, "%s dgamma", name);
  tu_expect_close(h.gw[1].data, db, nw, TOL, "%s dbeta", name);
  fd_teardown(&h);
  free(g);
}

static void test_layer_normalization(void **state) {
  (void)state;
  ln_case("ln_w", nnt_dim_make(2, 1, 3, 5), "3", "0.001", 5);
  ln_case("ln_chw", nnt_dim_make(2, 2, 3, 4), "1,2,3", "0.01", 24);
}

static void test_positional_encoding(void **state) {
  (void)state;
  size_t n;
  float *g = tu_golden_layer("pe_plain", &n);
  nnt_dim in = nnt_dim_make(2, 1, 6, 8);
  size_t ni = nnt_dim_len(in);
  const float *x = g, *r = x + ni, *y = r + ni, *dx = y + ni;
  assert_int_equal(n, 4 * ni);
  const char *props[] = {"max_timestep", "10", NULL};
  fd_harness h;
  fd_run_golden(&h, "positional_encoding", props, in, x, NULL, r, NULL);
  tu_expect_close(h.out.data, y, ni, TOL, "pe_plain out");
  tu_expect_close(h.din.data, dx, ni, TOL, "pe_plain dx");
  fd_teardown(&h);
  free(g);
}

/* Two inputs: the harness takes one, so the layer runs on a context of
 * its own here. */
static void test_elementwise(void **state) {
  (void)state;
  static const char *const ops[] = {"add", "subtract", "multiply", "divide"};
  const size_t ni = 24;
  for (int o = 0; o < 4; o++) {
    char name[32];
    snprintf(name, sizeof name, "ew_%s", ops[o]);
    size_t n;
    float *g = tu_golden_layer(name, &n);
    assert_int_equal(n, 6 * ni);
    const float *a = g, *b = a + ni, *r = b + ni, *y = r + ni, *da = y + ni, *db = da + ni;
    nnt_layer *l;
    nnt_err e = {0};
    assert_int_equal(nnt_layer_create(ops[o], &l, &e), NNT_OK);
    nnt_finalize_ctx fc;
    memset(&fc, 0, sizeof fc);
    fc.batch = 2, fc.n_in = 2, fc.n_out = 1;
    fc.in_dim[0] = fc.in_dim[1] = nnt_dim_make(2, 1, 3, 4);
    assert_int_equal(l->ops->finalize(l, &fc, &e), NNT_OK);
    float out[24], dout[24], d0[24], d1[24], x0[24], x1[24];
    memcpy(x0, a, sizeof x0), memcpy(x1, b, sizeof x1), memcpy(dout, r, sizeof dout);
    nnt_tensor in[2], ot, dot_, din[2];
    float *bufs[] = {x0, x1};
    float *dbufs[] = {d0, d1};
    for (int k = 0; k < 2; k++) {
      memset(&in[k], 0, sizeof in[k]), memset(&din[k], 0, sizeof din[k]);
      in[k].dim = din[k].dim = fc.in_dim[0];
      in[k].data = bufs[k], din[k].data = dbufs[k];
    }
    memset(&ot, 0, sizeof ot), memset(&dot_, 0, sizeof dot_);
    ot.dim = dot_.dim = fc.out_dim[0];
    ot.data = out, dot_.data = dout;
    nnt_run_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.k = nnt_kernels_cpu();
    ctx.n_in = 2, ctx.n_out = 1, ctx.in = in, ctx.out = &ot, ctx.d_out = &dot_, ctx.d_in = din;
    assert_int_equal(l->ops->forward(l, &ctx), NNT_OK);
    assert_int_equal(l->ops->calc_derivative(l, &ctx), NNT_OK);
    tu_expect_close(out, y, ni, TOL, "%s out", name);
    tu_expect_close(d0, da, ni, TOL, "%s d_in[0]", name);
    tu_expect_close(d1, db, ni, TOL, "%s d_in[1]", name);
    nnt_layer_destroy(l);
    free(g);
  }
}

static void rm_case(const char *name, nnt_dim in, const char *axis, nnt_dim out) {
  size_t n;
  float *g = tu_golden_layer(name, &n);
  size_t ni = nnt_dim_len(in), no = nnt_dim_len(out);
  const float *x = g, *r = x + ni, *y = r + no, *dx = y + no;
  assert_int_equal(n, 2 * ni + 2 * no);
  const char *props[] = {axis ? "axis" : NULL, axis, NULL};
  fd_harness h;
  fd_run_golden(&h, "reduce_mean", props, in, x, NULL, r, NULL);
  assert_true(nnt_dim_eq(h.out.dim, out));
  tu_expect_close(h.out.data, y, no, TOL, "%s out", name);
  tu_expect_close(h.din.data, dx, ni, TOL, "%s dx", name);
  fd_teardown(&h);
  free(g);
}

static void test_reduce_mean(void **state) {
  (void)state;
  rm_case("rm_all", nnt_dim_make(2, 2, 3, 4), NULL, nnt_dim_make(2, 1, 1, 1));
  rm_case("rm_c", nnt_dim_make(2, 3, 2, 4), "1", nnt_dim_make(2, 1, 2, 4));
  rm_case("rm_h", nnt_dim_make(2, 2, 3, 4), "2", nnt_dim_make(2, 2, 1, 4));
  rm_case("rm_w", nnt_dim_make(2, 2, 3, 5), "3", nnt_dim_make(2, 2, 3, 1));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_embedding),
      cmocka_unit_test(test_layer_normalization),
      cmocka_unit_test(test_positional_encoding),
      cmocka_unit_test(test_elementwise),
      cmocka_unit_test(test_reduce_mean),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
