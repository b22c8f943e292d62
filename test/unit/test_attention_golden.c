/* attention, multi_head_attention and LoRA fully_connected against PyTorch
 * (test/golden/gen_layers.py; its docstring gives the files' layout; the
 * multi-head cases that torch.nn.MultiheadAttention can express are checked
 * against it there, with NNTrainer's weight layout mapped onto its own).
 * One layer on the CPU's kernels with host tensors: the golden inputs and
 * weights in, forward, calc_gradient, calc_derivative, and the output, each
 * input's derivative and each trainable weight's gradient compared.
 * Tolerance 1e-5 relative to max(1, |reference|), as test_layers_golden. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/layer.h"

#define TOL 1e-5

static float *take(const float **at, size_t n) {
  float *t = malloc((n ? n : 1) * sizeof(float));
  assert_non_null(t);
  memcpy(t, *at, n * sizeof(float));
  *at += n;
  return t;
}

/* props: "key", "value", ..., NULL */
static void golden_case(const char *name, const char *type, const char *const *props,
                        unsigned n_in, const nnt_dim *in) {
  size_t total;
  float *g = tu_read_floats(tu_data_path("golden/layers/%s.bin", name), &total);
  const float *at = g;
  nnt_err e = {0};
  nnt_layer *l;
  assert_int_equal(nnt_layer_create(type, &l, &e), NNT_OK);
  snprintf(l->name, sizeof l->name, "%s", name);
  for (size_t i = 0; props[i]; i += 2)
    if (nnt_layer_set_property(l, props[i], props[i + 1], &e))
      fail_msg("%s: %s", name, e.msg);
  nnt_finalize_ctx fc = {.batch = in[0].b, .n_in = n_in, .n_out = 1, .trainable = 1};
  for (unsigned i = 0; i < n_in; i++)
    fc.in_dim[i] = in[i];
  if (l->ops->finalize(l, &fc, &e))
    fail_msg("%s: finalize: %s", name, e.msg);
  nnt_tensor x[NNT_MAX_IO], dx[NNT_MAX_IO], y = {0}, dy = {0}, w[NNT_MAX_WEIGHTS],
      gw[NNT_MAX_WEIGHTS], s[NNT_MAX_SCRATCH];
  for (unsigned i = 0; i < n_in; i++) {
    x[i] = (nnt_tensor){.dim = in[i], .data = take(&at, nnt_dim_len(in[i]))};
    dx[i] = (nnt_tensor){.dim = in[i], .data = calloc(nnt_dim_len(in[i]), sizeof(float))};
  }
  for (unsigned i = 0; i < fc.n_w; i++) {
    size_t n = nnt_dim_len(fc.w[i].dim);
    w[i] = (nnt_tensor){.dim = fc.w[i].dim, .data = take(&at, n)};
    gw[i] = (nnt_tensor){.dim = fc.w[i].dim,
                         .data = fc.w[i].trainable ? calloc(n, sizeof(float)) : NULL};
  }
  for (unsigned i = 0; i < fc.n_scratch; i++)
    s[i] = (nnt_tensor){.dim = fc.scratch_dim[i],
                        .data = calloc(nnt_dim_len(fc.scratch_dim[i]), sizeof(float))};
  size_t no = nnt_dim_len(fc.out_dim[0]);
  dy = (nnt_tensor){.dim = fc.out_dim[0], .data = take(&at, no)};
  y = (nnt_tensor){.dim = fc.out_dim[0], .data = calloc(no, sizeof(float))};
  nnt_run_ctx ctx = {.k = nnt_kernels_cpu(), .n_in = n_in, .n_out = 1, .n_w = fc.n_w,
                     .n_scratch = fc.n_scratch, .in = x, .out = &y, .d_out = &dy, .d_in = dx,
                     .w = w, .gw = gw, .scratch = s, .training = 1};
  assert_int_equal(l->ops->forward(l, &ctx), NNT_OK);
  if (l->ops->calc_gradient)
    assert_int_equal(l->ops->calc_gradient(l, &ctx), NNT_OK);
  assert_int_equal(l->ops->calc_derivative(l, &ctx), NNT_OK);
  tu_expect_close(y.data, at, no, TOL, "%s out", name);
  at += no;
  char what[32];
  for (unsigned i = 0; i < n_in; i++) {
    snprintf(what, sizeof what, "d_in[%u]", i);
    tu_expect_close(dx[i].data, at, nnt_dim_len(in[i]), TOL, "%s %s", name, what);
    at += nnt_dim_len(in[i]);
  }
  unsigned trained = 0;
  for (unsigned i = 0; i < fc.n_w; i++) {
    if (!gw[i].data)
      continue;
    tu_expect_close(gw[i].data, at, nnt_dim_len(fc.w[i].dim), TOL, "%s %s", name, fc.w[i].name);
    at += nnt_dim_len(fc.w[i].dim);
    trained++;
  }
  assert_int_equal((size_t)(at - g), total); /* every array of the file compared */
  print_message("%s: %u inputs, %u weights (%u trained) within %g\n", name, n_in, fc.n_w,
                trained, TOL);
  for (unsigned i = 0; i < n_in; i++)
    free(x[i].data), free(dx[i].data);
  for (unsigned i = 0; i < fc.n_w; i++)
    free(w[i].data), free(gw[i].data);
  for (unsigned i = 0; i < fc.n_scratch; i++)
    free(s[i].data);
  free(y.data), free(dy.data), free(g);
  nnt_layer_destroy(l);
}

#define D nnt_dim_make

static void test_attention(void **state) {
  (void)state;
  const char *none[] = {NULL};
  golden_case("attn_plain", "attention", none, 2, (nnt_dim[]){D(2, 1, 3, 4), D(2, 1, 5, 4)});
  const char *sc[] = {"scaled_dot_product", "true", "causal_mask", "true", NULL};
  golden_case("attn_scaled_causal_key", "attention", sc, 3,
              (nnt_dim[]){D(2, 2, 4, 3), D(2, 2, 4, 3), D(2, 2, 4, 3)});
}

static void test_multi_head_attention(void **state) {
  (void)state;
  const char *h1[] = {"num_heads", "1", NULL};
  golden_case("mha_h1", "multi_head_attention", h1, 3,
              (nnt_dim[]){D(2, 1, 3, 4), D(2, 1, 5, 6), D(2, 1, 5, 2)});
  const char *h2c[] = {"num_heads", "2", "causal_mask", "true", NULL};
  golden_case("mha_h2_causal", "multi_head_attention", h2c, 3,
              (nnt_dim[]){D(2, 1, 4, 6), D(2, 1, 4, 6), D(2, 1, 4, 6)});
  const char *h2[] = {"num_heads", "2", NULL};
  golden_case("mha_h2", "multi_head_attention", h2, 3,
              (nnt_dim[]){D(2, 1, 3, 4), D(2, 1, 5, 4), D(2, 1, 5, 4)});
  const char *hm[] = {"num_heads", "2", "projected_key_dim", "3", "projected_value_dim", "2",
                      "output_shape", "5", "disable_bias", "true", NULL};
  golden_case("mha_h2_mask_proj", "multi_head_attention", hm, 4,
              (nnt_dim[]){D(2, 1, 3, 4), D(2, 1, 4, 3), D(2, 1, 4, 2), D(2, 2, 3, 4)});
}

static void test_lora(void **state) {
  (void)state;
  const char *a[] = {"unit", "4", "lora_rank", "2", "lora_alpha", "6", NULL};
  golden_case("lora_alpha", "fully_connected", a, 1, (nnt_dim[]){D(3, 1, 2, 5)});
  const char *nb[] = {"unit", "3", "lora_rank", "3", "disable_bias", "true", NULL};
  golden_case("lora_nobias", "fully_connected", nb, 1, (nnt_dim[]){D(2, 1, 1, 7)});
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_attention),
      cmocka_unit_test(test_multi_head_attention),
      cmocka_unit_test(test_lora),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
