/* Every layer's calc_derivative and calc_gradient against central finite
 * differences of a scalar objective: J = sum(out * R) for a fixed random R,
 * or the loss itself for loss layers (fd_harness.c runs the descriptors on
 * malloc'd tensors). Layers that declare NNT_LF_INPLACE or NNT_LF_VIEW are
 * also run on aliased buffers and must agree with separate ones. Also here:
 * inference of the losses, input normalization, property errors, the
 * registry, weight requests and the initializers. */
#include "fd_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/layer.h"
#include "nntrainer/philox.h"

/* Max-like layers are piecewise linear: a smaller step keeps perturbations
 * from swapping which input is largest.
 * tol: float32 central differences with eps 1e-2 leave O(eps^2) truncation
 * plus O(1e-7 / eps) rounding; 2e-3 relative covers both for these sizes. */
static float fd_eps = 1e-2f;

static void fd_layer(const char *type, const char *const *props, nnt_dim in, double tol) {
  fd_layer_check(type, props, in, NULL, fd_eps, tol, 0);
}

static void test_fully_connected(void **state) {
  (void)state;
  const char *p[] = {"unit", "5", NULL};
  fd_layer("fully_connected", p, nnt_dim_make(3, 1, 1, 7), 2e-3);
  /* 4-D input: acts on the last axis */
  fd_layer("fully_connected", p, nnt_dim_make(2, 2, 3, 4), 2e-3);
  const char *nb[] = {"unit", "3", "disable_bias", "true", NULL};
  fd_layer("fully_connected", nb, nnt_dim_make(2, 1, 1, 5), 2e-3);
}

static void test_activations(void **state) {
  (void)state;
  const char *acts[] = {"relu", "leaky_relu", "sigmoid", "tanh", "softmax", "swish",
                        "gelu", "elu", "selu", "softplus", "mish", "none"};
  for (size_t i = 0; i < NNT_ARRAY_LEN(acts); i++) {
    const char *p[] = {"activation", acts[i], NULL};
    fd_layer("activation", p, nnt_dim_make(3, 1, 2, 5), 3e-3);
  }
}

static void test_shape_layers(void **state) {
  (void)state;
  fd_layer("flatten", NULL, nnt_dim_make(2, 3, 2, 2), 2e-3);
  const char *p[] = {"target_shape", "4:3:1", NULL};
  fd_layer("reshape", p, nnt_dim_make(2, 3, 2, 2), 2e-3);
  const char *d[] = {"dropout_rate", "0.3", NULL};
  fd_layer("dropout", d, nnt_dim_make(4, 1, 1, 9), 2e-3);
  const char *n[] = {"normalization", "false", NULL};
  fd_layer("input", n, nnt_dim_make(2, 1, 1, 6), 2e-3);
  fd_layer("identity", NULL, nnt_dim_make(2, 1, 3, 2), 2e-3);
  const char *perm[] = {"direction", "3,1,2", NULL};
  fd_layer("permute", perm, nnt_dim_make(2, 2, 3, 4), 2e-3);
  const char *up[] = {"kernel_size", "2,3", NULL};
  fd_layer("upsample2d", up, nnt_dim_make(2, 2, 2, 3), 2e-3);
}

static void test_batch_normalization(void **state) {
  (void)state;
  fd_layer("batch_normalization", NULL, nnt_dim_make(4, 3, 2, 2), 3e-3);
  const char *w[] = {"axis", "3", NULL};
  fd_layer("batch_normalization", w, nnt_dim_make(5, 1, 1, 4), 3e-3);
  const char *h[] = {"axis", "2", "epsilon", "0.01", NULL};
  fd_layer("batch_normalization", h, nnt_dim_make(3, 2, 3, 2), 3e-3);
}

static void test_batch_normalization_statistics(void **state) {
  (void)state;
  fd_harness h;
  const char *p[] = {"momentum", "0.9", NULL};
  fd_setup(&h, "batch_normalization", p, nnt_dim_make(4, 2, 1, 3), 0);
  /* moving_mean 0, moving_variance 1, gamma 1, beta 0 as initialized */
  for (int c = 0; c < 2; c++)
    h.w[0].data[c] = 0, h.w[1].data[c] = 1, h.w[2].data[c] = 1, h.w[3].data[c] = 0;
  assert_int_equal(h.l->ops->forward(h.l, &h.ctx), NNT_OK);
  for (int c = 0; c < 2; c++) {
    double s = 0, s2 = 0, y = 0;
    for (int b = 0; b < 4; b++)
      for (int i = 0; i < 3; i++) {
        double v = h.in.data[(b * 2 + c) * 3 + i];
        s += v, s2 += v * v;
        y += h.out.data[(b * 2 + c) * 3 + i];
      }
    double mean = s / 12, var = s2 / 12 - mean * mean;
    assert_true(fabs(y / 12) < 1e-5);                          /* normalized */
    assert_true(fabs(h.w[0].data[c] - 0.1 * mean) < 1e-5);      /* kept 90% of 0 */
    assert_true(fabs(h.w[1].data[c] - (0.9 + 0.1 * var)) < 1e-5); /* biased variance */
  }
  /* inference uses the moving statistics */
  h.ctx.training = 0;
  assert_int_equal(h.l->ops->forward(h.l, &h.ctx), NNT_OK);
  float want = (float)((h.in.data[0] - h.w[0].data[0]) / sqrt(h.w[1].data[0] + 1e-3));
  assert_float_equal(h.out.data[0], want, 1e-5);
  fd_teardown(&h);
}

static void test_convolution(void **state) {
  (void)state;
  const char *a[] = {"filters", "3", "kernel_size", "3,3", NULL};
  fd_layer("conv2d", a, nnt_dim_make(2, 2, 5, 7), 3e-3);
  const char *b[] = {"filters", "2", "kernel_size", "3", "stride", "2", "padding", "same", NULL};
  fd_layer("conv2d", b, nnt_dim_make(2, 2, 5, 6), 3e-3);
  const char *c[] = {"filters", "2", "kernel_size", "2,3", "dilation", "2", "padding", "1,0,2,1",
                     NULL};
  fd_layer("conv2d", c, nnt_dim_make(1, 3, 6, 5), 3e-3);
  const char *d[] = {"filters", "2", "kernel_size", "3", "padding", "1", "disable_bias", "true",
                     NULL};
  fd_layer("conv2d", d, nnt_dim_make(2, 1, 4, 4), 3e-3);
  const char *e1[] = {"filters", "3", "kernel_size", "3", "stride", "2", "padding", "same", NULL};
  fd_layer("conv1d", e1, nnt_dim_make(2, 2, 1, 9), 3e-3);
}

static void test_pooling(void **state) {
  (void)state;
  const char *modes[] = {"max", "average", "global_max", "global_average"};
  fd_eps = 1e-3f;
  for (int i = 0; i < 4; i++) {
    const char *p[] = {"pooling", modes[i], NULL};
    fd_layer("pooling2d", p, nnt_dim_make(2, 2, 4, 6), 3e-3);
    const char *q[] = {"pooling", modes[i], "pool_size", "3", "stride", "2", "padding", "same",
                       NULL};
    fd_layer("pooling2d", q, nnt_dim_make(1, 2, 5, 5), 3e-3);
  }
  fd_eps = 1e-2f;
}

static void test_window_errors(void **state) {
  (void)state;
  nnt_layer *l;
  nnt_err e = {0};
  assert_int_equal(nnt_layer_create("conv2d", &l, &e), NNT_OK);
  snprintf(l->name, sizeof l->name, "conv");
  nnt_finalize_ctx fc = {0};
  fc.n_in = 1;
  fc.in_dim[0] = nnt_dim_make(1, 1, 3, 3);
  assert_int_equal(l->ops->finalize(l, &fc, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "filters");
  assert_int_equal(nnt_layer_set_property(l, "filters", "2", &e), NNT_OK);
  assert_int_equal(nnt_layer_set_property(l, "kernel_size", "5,5", &e), NNT_OK);
  assert_int_equal(l->ops->finalize(l, &fc, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "kernel_size");
  tu_assert_contains(e.msg, "5x5");
  tu_assert_contains(e.msg, "1:1:3:3");
  assert_int_equal(nnt_layer_set_property(l, "padding", "1,2,3", &e), NNT_ERR_INVAL);
  nnt_layer_destroy(l);
  assert_int_equal(nnt_layer_create("pooling2d", &l, &e), NNT_OK);
  assert_int_equal(l->ops->finalize(l, &fc, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "pooling");
  nnt_layer_destroy(l);
}

static void test_losses(void **state) {
  (void)state;
  fd_layer("mse", NULL, nnt_dim_make(4, 1, 1, 3), 2e-3);
  fd_layer("cross_softmax", NULL, nnt_dim_make(4, 1, 1, 5), 2e-3);
  fd_layer("cross_sigmoid", NULL, nnt_dim_make(3, 1, 1, 4), 2e-3);
}

static float *dupf(const float *x, size_t n) {
  float *y = malloc(n * sizeof *y);
  memcpy(y, x, n * sizeof *y);
  return y;
}

/* A layer that may run in place (or as a view) must give the same output,
 * loss, dW and dX when out[0] == in[0] and d_in[0] == d_out[0]. Loss layers
 * get NaN in d_out, which they must ignore. Returns the layer's flags. */
static unsigned alias_check(const char *type, const char *const *props, nnt_dim in) {
  fd_harness h;
  fd_setup(&h, type, props, in, 0);
  unsigned flags = h.fc.flags;
  if (!(flags & (NNT_LF_INPLACE | NNT_LF_VIEW))) {
    fd_teardown(&h);
    return flags;
  }
  const nnt_layer_ops *ops = h.l->ops;
  size_t ni = nnt_tensor_len(&h.in), no = nnt_tensor_len(&h.out);
  assert_int_equal(ni, no);
  /* separate buffers */
  fd_objective(&h);
  float loss = h.lossv, *out = dupf(h.out.data, no), *gw[NNT_MAX_WEIGHTS];
  memcpy(h.dout.data, h.r, no * sizeof(float));
  if (ops->calc_gradient)
    assert_int_equal(ops->calc_gradient(h.l, &h.ctx), NNT_OK);
  assert_int_equal(ops->calc_derivative(h.l, &h.ctx), NNT_OK);
  float *din = dupf(h.din.data, ni);
  for (unsigned w = 0; w < h.fc.n_w; w++)
    gw[w] = dupf(h.gw[w].data, nnt_tensor_len(&h.gw[w]));
  /* one buffer for in and out, one for d_in and d_out */
  float *keep[4] = {h.in.data, h.out.data, h.din.data, h.dout.data};
  float *buf = dupf(h.in.data, ni), *dbuf = malloc(ni * sizeof(float));
  h.in.data = h.out.data = buf;
  fd_objective(&h);
  if (tu_max_rel_err(buf, out, no) > 1e-6)
    fail_msg("%s in place: the output differs", type);
  if (h.loss && !(fabsf(h.lossv - loss) <= 1e-6f * fmaxf(1, fabsf(loss))))
    fail_msg("%s in place: loss %g, not %g", type, h.lossv, loss);
  for (size_t i = 0; i < no; i++)
    dbuf[i] = h.loss ? NAN : h.r[i];
  h.din.data = h.dout.data = dbuf;
  for (unsigned w = 0; w < h.fc.n_w; w++)
    memset(h.gw[w].data, 0, nnt_tensor_len(&h.gw[w]) * sizeof(float));
  if (ops->calc_gradient)
    assert_int_equal(ops->calc_gradient(h.l, &h.ctx), NNT_OK);
  for (unsigned w = 0; w < h.fc.n_w; w++)
    if (h.fc.w[w].trainable &&
        tu_max_rel_err(h.gw[w].data, gw[w], nnt_tensor_len(&h.gw[w])) > 1e-6)
      fail_msg("%s in place: %s differs", type, h.fc.w[w].name);
  assert_int_equal(ops->calc_derivative(h.l, &h.ctx), NNT_OK);
  if (tu_max_rel_err(dbuf, din, ni) > 1e-6)
    fail_msg("%s in place: dx differs", type);
  h.in.data = keep[0], h.out.data = keep[1], h.din.data = keep[2], h.dout.data = keep[3];
  for (unsigned w = 0; w < h.fc.n_w; w++)
    free(gw[w]);
  free(out), free(din), free(buf), free(dbuf);
  fd_teardown(&h);
  return flags;
}

static void test_in_place(void **state) {
  (void)state;
  const char *acts[] = {"relu", "leaky_relu", "sigmoid", "tanh", "softmax", "swish",
                        "gelu", "elu", "selu", "softplus", "mish", "none"};
  nnt_dim d = nnt_dim_make(3, 2, 1, 5);
  for (size_t i = 0; i < NNT_ARRAY_LEN(acts); i++) {
    const char *p[] = {"activation", acts[i], NULL};
    nnt_act a;
    assert_int_equal(nnt_act_from_name(acts[i], &a), NNT_OK);
    unsigned f = alias_check("activation", p, d);
    /* in place exactly when the backward needs only the output */
    assert_int_equal(!!(f & NNT_LF_INPLACE), nnt_act_bwd_needs_output_only(a));
    assert_int_equal(!!(f & NNT_LF_BWD_READS_INPUT), !nnt_act_bwd_needs_output_only(a));
  }
  assert_true(alias_check("flatten", NULL, d) & NNT_LF_VIEW);
  const char *rs[] = {"target_shape", "5:1:2", NULL};
  assert_true(alias_check("reshape", rs, d) & NNT_LF_VIEW);
  const char *ns[] = {"normalization", "true", "standardization", "true", NULL};
  assert_true(alias_check("input", ns, d) & NNT_LF_INPLACE);
  assert_true(alias_check("mse", NULL, d) & NNT_LF_INPLACE);
  assert_true(alias_check("cross_softmax", NULL, d) & NNT_LF_INPLACE);
  assert_true(alias_check("cross_sigmoid", NULL, d) & NNT_LF_INPLACE);
  const char *dr[] = {"dropout_rate", "0.4", NULL};
  assert_int_equal(alias_check("dropout", dr, d) & (NNT_LF_INPLACE | NNT_LF_VIEW), 0);
  const char *fc[] = {"unit", "3", NULL};
  assert_int_equal(alias_check("fully_connected", fc, d),
                   NNT_LF_BWD_READS_INPUT | NNT_LF_DERIV_SKIPS_INPUT);
  /* other types that declare it */
  alias_check("identity", NULL, d);
  alias_check("batch_normalization", NULL, nnt_dim_make(4, 2, 1, 3));
}

/* Without a label (inference) a loss layer computes its output only. */
static void test_losses_without_label(void **state) {
  (void)state;
  const char *types[] = {"mse", "cross_softmax", "cross_sigmoid"};
  for (size_t t = 0; t < NNT_ARRAY_LEN(types); t++) {
    fd_harness h;
    fd_setup(&h, types[t], NULL, nnt_dim_make(2, 1, 1, 4), 0);
    for (int pass = 0; pass < 2; pass++) {
      nnt_tensor empty = {.dim = h.label.dim};
      h.ctx.label = pass ? &empty : NULL;
      h.lossv = 0;
      assert_int_equal(h.l->ops->forward(h.l, &h.ctx), NNT_OK);
      assert_true(h.lossv == 0.0f); /* not written */
      for (size_t r = 0; r < 2; r++) {
        const float *x = h.in.data + r * 4, *y = h.out.data + r * 4;
        double s = 0, m = x[0];
        for (int c = 1; c < 4; c++)
          m = fmax(m, x[c]);
        for (int c = 0; c < 4; c++)
          s += exp(x[c] - m);
        for (int c = 0; c < 4; c++) {
          double want = t == 0 ? x[c] : t == 1 ? exp(x[c] - m) / s : 1 / (1 + exp(-x[c]));
          assert_true(fabs(y[c] - want) < 1e-6);
        }
      }
    }
    fd_teardown(&h);
  }
}

static void test_input_normalization(void **state) {
  (void)state;
  const char *p[] = {"normalization", "true", NULL};
  fd_harness h;
  fd_setup(&h, "input", p, nnt_dim_make(3, 1, 2, 4), 0);
  for (int i = 0; i < 8; i++)
    h.in.data[16 + i] = 2.5f; /* a constant sample becomes zeros */
  assert_int_equal(h.l->ops->forward(h.l, &h.ctx), NNT_OK);
  for (int s = 0; s < 2; s++) {
    const float *x = h.in.data + s * 8, *y = h.out.data + s * 8;
    float lo = x[0], hi = x[0];
    for (int i = 1; i < 8; i++)
      lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]);
    for (int i = 0; i < 8; i++)
      assert_true(fabsf(y[i] - (x[i] - lo) / (hi - lo)) < 1e-6f);
  }
  for (int i = 0; i < 8; i++)
    assert_true(h.out.data[16 + i] == 0.0f);
  fd_teardown(&h);
  const char *q[] = {"standardization", "true", NULL};
  fd_setup(&h, "input", q, nnt_dim_make(2, 3, 1, 5), 0);
  assert_int_equal(h.l->ops->forward(h.l, &h.ctx), NNT_OK);
  for (int s = 0; s < 2; s++) {
    double m = 0, v = 0;
    for (int i = 0; i < 15; i++)
      m += h.out.data[s * 15 + i];
    for (int i = 0; i < 15; i++)
      v += (h.out.data[s * 15 + i] - m / 15) * (h.out.data[s * 15 + i] - m / 15);
    assert_true(fabs(m / 15) < 1e-6 && fabs(v / 15 - 1) < 1e-5);
  }
  fd_teardown(&h);
}

static void test_dropout_inference_is_identity(void **state) {
  (void)state;
  fd_harness h;
  const char *d[] = {"dropout_rate", "0.5", NULL};
  fd_setup(&h, "dropout", d, nnt_dim_make(2, 1, 1, 50), 0);
  h.ctx.training = 0;
  assert_int_equal(h.l->ops->forward(h.l, &h.ctx), NNT_OK);
  assert_memory_equal(h.in.data, h.out.data, nnt_tensor_len(&h.in) * sizeof(float));
  h.ctx.training = 1;
  h.ctx.stream = 12;
  assert_int_equal(h.l->ops->forward(h.l, &h.ctx), NNT_OK);
  size_t zeros = 0;
  for (size_t i = 0; i < 100; i++) {
    zeros += h.out.data[i] == 0;
    if (h.out.data[i] != 0)
      assert_float_equal(h.out.data[i], 2 * h.in.data[i], 1e-6);
  }
  assert_in_range(zeros, 25, 75);
  /* the mask is a function of (seed, stream): the same stream draws it
   * again, another stream (the next iteration or node) another one */
  float first[100];
  memcpy(first, h.out.data, sizeof first);
  assert_int_equal(h.l->ops->forward(h.l, &h.ctx), NNT_OK);
  assert_memory_equal(first, h.out.data, sizeof first);
  h.ctx.stream = 13;
  assert_int_equal(h.l->ops->forward(h.l, &h.ctx), NNT_OK);
  assert_true(memcmp(first, h.out.data, sizeof first) != 0);
  fd_teardown(&h);
}

/* Set a property expecting failure; the message must name every needle. */
static void bad_prop(nnt_layer *l, const char *key, const char *value, const char *n1,
                     const char *n2) {
  nnt_err e = {0};
  if (nnt_layer_set_property(l, key, value, &e) != NNT_ERR_INVAL)
    fail_msg("%s = %s was accepted by %s", key, value, l->ops->type);
  tu_assert_contains(e.msg, n1);
  if (n2)
    tu_assert_contains(e.msg, n2);
}

static void test_property_errors(void **state) {
  (void)state;
  nnt_layer *l;
  nnt_err e = {0};
  assert_int_equal(nnt_layer_create("fully_connected", &l, &e), NNT_OK);
  bad_prop(l, "units", "3", "unknown key 'units' for layer type 'fully_connected'", NULL);
  bad_prop(l, "unit", "abc", "'unit'", "abc");
  bad_prop(l, "unit", "-3", "'unit'", "-3");
  bad_prop(l, "unit", "0", "'unit'", "positive");
  bad_prop(l, "input_shape", "3:x:4", "input_shape", "3:x:4");
  bad_prop(l, "weight_initializer", "magic", "weight_initializer", "magic");
  bad_prop(l, "weight_regularizer", "l1", "weight_regularizer", "l1");
  bad_prop(l, "weight_decay", "-1", "weight_decay", "-1");
  bad_prop(l, "disable_bias", "perhaps", "disable_bias", "perhaps");
  bad_prop(l, "trainable", "maybe", "trainable", "maybe");
  bad_prop(l, "flatten", "2", "flatten", NULL);
  bad_prop(l, "activation", "sparkle", "activation", "sparkle");
  bad_prop(l, "type", "conv2d", "type", "conv2d");
  bad_prop(l, "input_layers", "a(x)", "input_layers", "a(x");
  bad_prop(l, "input_layers", "a(1", "input_layers", "a(1");
  bad_prop(l, "input_layers", " , ", "input_layers", NULL);
  bad_prop(l, "name", "  ", "name", NULL);
  assert_int_equal(nnt_layer_set_property(l, "UNIT", "4", &e), NNT_OK); /* case-insensitive */
  assert_int_equal(nnt_layer_set_property(l, "Type", "Fully_Connected", &e), NNT_OK);
  assert_int_equal(nnt_layer_set_property(l, "Activation", "ReLU", &e), NNT_OK);
  assert_true(l->has_activation && l->activation == NNT_ACT_RELU);
  assert_int_equal(nnt_layer_set_property(l, "name", "  FC_One ", &e), NNT_OK);
  assert_string_equal(l->name, "fc_one");
  assert_int_equal(nnt_layer_set_property(l, "input_layers", " a , B(1) ,c ( 2 ) ", &e), NNT_OK);
  assert_int_equal(l->n_inputs, 3);
  assert_string_equal(l->input_names[0], "a");
  assert_string_equal(l->input_names[1], "b");
  assert_string_equal(l->input_names[2], "c");
  assert_int_equal(l->input_idx[0], 0);
  assert_int_equal(l->input_idx[1], 1);
  assert_int_equal(l->input_idx[2], 2);
  assert_int_equal(nnt_layer_set_property(l, "input_shape", "7:2:3:4", &e), NNT_OK);
  assert_true(l->has_input_shape && nnt_dim_eq(l->input_shape, nnt_dim_make(1, 2, 3, 4)));
  assert_int_equal(nnt_layer_set_property(l, "flatten", "true", &e), NNT_OK);
  assert_int_equal(nnt_layer_set_property(l, "trainable", "false", &e), NNT_OK);
  assert_true(l->flatten && !l->trainable);
  assert_int_equal(nnt_layer_set_property(l, NULL, "1", &e), NNT_ERR_INVAL);
  nnt_layer_destroy(l);
  /* each type's own keys */
  assert_int_equal(nnt_layer_create("dropout", &l, &e), NNT_OK);
  bad_prop(l, "dropout_rate", "1", "dropout_rate", "1");
  bad_prop(l, "dropout_rate", "-0.1", "dropout_rate", "-0.1");
  bad_prop(l, "unit", "3", "unknown key 'unit' for layer type 'dropout'", NULL);
  nnt_layer_destroy(l);
  assert_int_equal(nnt_layer_create("input", &l, &e), NNT_OK);
  bad_prop(l, "normalization", "yes please", "normalization", "yes please");
  nnt_layer_destroy(l);
  assert_int_equal(nnt_layer_create("activation", &l, &e), NNT_OK);
  bad_prop(l, "activation", "sparkle", "activation", "sparkle");
  nnt_finalize_ctx fc = {0};
  fc.n_in = 1;
  fc.in_dim[0] = nnt_dim_make(1, 1, 1, 7);
  assert_int_equal(l->ops->finalize(l, &fc, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "activation");
  nnt_layer_destroy(l);
  /* finalize errors name the key and both shapes */
  assert_int_equal(nnt_layer_create("reshape", &l, &e), NNT_OK);
  assert_int_equal(l->ops->finalize(l, &fc, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "target_shape");
  bad_prop(l, "target_shape", "2:0:2", "target_shape", NULL);
  assert_int_equal(nnt_layer_set_property(l, "target_shape", "2:2:2", &e), NNT_OK);
  assert_int_equal(l->ops->finalize(l, &fc, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "target_shape");
  tu_assert_contains(e.msg, "1:2:2:2");
  tu_assert_contains(e.msg, "1:1:1:7");
  nnt_layer_destroy(l);
  assert_int_equal(nnt_layer_create("fully_connected", &l, &e), NNT_OK);
  assert_int_equal(l->ops->finalize(l, &fc, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "unit");
  nnt_layer_destroy(l);
  assert_int_equal(nnt_layer_create("convolution9d", &l, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "convolution9d");
  nnt_layer_destroy(NULL); /* a no-op */
}

static void test_registry(void **state) {
  (void)state;
  const struct {
    const nnt_layer_ops *ops;
    const char *name;
    int ml; /* ml_train_layer_type_e in NNTrainer's api/nntrainer-api-common.h */
  } want[] = {
      {&nnt_layer_input, "input", 0},           {&nnt_layer_fully_connected, "fully_connected", 1},
      {&nnt_layer_flatten, "flatten", 5},       {&nnt_layer_activation, "activation", 6},
      {&nnt_layer_dropout, "dropout", 16},      {&nnt_layer_mse, "mse", 500},
      {&nnt_layer_cross_sigmoid, "cross_sigmoid", 501},
      {&nnt_layer_cross_softmax, "cross_softmax", 502},
      {&nnt_layer_reshape, "reshape", -1},
  };
  for (size_t i = 0; i < NNT_ARRAY_LEN(want); i++) {
    char upper[64];
    size_t k = 0;
    for (; want[i].name[k]; k++)
      upper[k] = (char)(want[i].name[k] ^ 0x20 * (want[i].name[k] >= 'a'));
    upper[k] = '\0';
    assert_ptr_equal(nnt_layer_ops_find(want[i].name), want[i].ops);
    assert_ptr_equal(nnt_layer_ops_find(upper), want[i].ops);
    assert_string_equal(want[i].ops->type, want[i].name);
    assert_int_equal(want[i].ops->ml_type, want[i].ml);
    if (want[i].ml >= 0)
      assert_ptr_equal(nnt_layer_ops_find_ml(want[i].ml), want[i].ops);
    int seen = 0;
    for (const nnt_layer_ops *const *p = nnt_layer_ops_all(); *p; p++)
      seen += *p == want[i].ops;
    assert_int_equal(seen, 1);
  }
  assert_null(nnt_layer_ops_find("nope"));
  assert_null(nnt_layer_ops_find(""));
  assert_null(nnt_layer_ops_find_ml(-1));
  assert_null(nnt_layer_ops_find_ml(999));
  /* every registered type: unique name, creatable with its defaults */
  for (const nnt_layer_ops *const *p = nnt_layer_ops_all(); *p; p++) {
    for (const nnt_layer_ops *const *q = p + 1; *q; q++)
      assert_false(nnt_streq((*p)->type, (*q)->type));
    nnt_layer *l;
    nnt_err e = {0};
    assert_int_equal(nnt_layer_create((*p)->type, &l, &e), NNT_OK);
    assert_ptr_equal(l->ops, *p);
    assert_true(l->trainable);
    nnt_layer_destroy(l);
  }
}

static void test_weight_requests(void **state) {
  (void)state;
  nnt_layer *l;
  nnt_err e = {0};
  assert_int_equal(nnt_layer_create("fully_connected", &l, &e), NNT_OK);
  const char *p[] = {"unit", "5", "weight_regularizer", "l2norm",
                     "weight_regularizer_constant", "0.5", "weight_decay", "0.1",
                     "bias_decay", "0.2", "bias_initializer", "ones",
                     "weight_initializer", "he_normal", NULL};
  for (size_t i = 0; p[i]; i += 2)
    assert_int_equal(nnt_layer_set_property(l, p[i], p[i + 1], &e), NNT_OK);
  nnt_finalize_ctx fc = {0};
  fc.n_in = 1, fc.n_out = 1;
  fc.in_dim[0] = nnt_dim_make(2, 3, 4, 7);
  assert_int_equal(l->ops->finalize(l, &fc, &e), NNT_OK);
  assert_true(nnt_dim_eq(fc.out_dim[0], nnt_dim_make(2, 3, 4, 5)));
  assert_int_equal(fc.n_w, 2);
  assert_string_equal(fc.w[0].name, "weight");
  assert_true(nnt_dim_eq(fc.w[0].dim, nnt_dim_make(1, 1, 7, 5)));
  assert_int_equal(fc.w[0].init, NNT_INIT_HE_NORMAL);
  assert_int_equal(fc.w[0].fan_in, 7);
  assert_int_equal(fc.w[0].fan_out, 5);
  assert_float_equal(fc.w[0].l2, 0.5f, 0);
  assert_float_equal(fc.w[0].decay, 0.1f, 0);
  assert_true(fc.w[0].trainable);
  assert_string_equal(fc.w[1].name, "bias");
  assert_true(nnt_dim_eq(fc.w[1].dim, nnt_dim_make(1, 1, 1, 5)));
  assert_int_equal(fc.w[1].init, NNT_INIT_ONES);
  assert_float_equal(fc.w[1].l2, 0, 0); /* the regularizer is the weight's */
  assert_float_equal(fc.w[1].decay, 0.2f, 0);
  assert_int_equal(fc.w[1].fan_in, 5); /* a [unit] vector: both fans are unit */
  assert_int_equal(fc.w[1].fan_out, 5);
  assert_int_equal(fc.flags, NNT_LF_BWD_READS_INPUT | NNT_LF_DERIV_SKIPS_INPUT);
  /* defaults: xavier_uniform, no regularizer; disable_bias drops the bias */
  nnt_layer_destroy(l);
  assert_int_equal(nnt_layer_create("fully_connected", &l, &e), NNT_OK);
  assert_int_equal(nnt_layer_set_property(l, "unit", "2", &e), NNT_OK);
  assert_int_equal(nnt_layer_set_property(l, "disable_bias", "true", &e), NNT_OK);
  memset(&fc, 0, sizeof fc);
  fc.n_in = 1, fc.n_out = 1;
  fc.in_dim[0] = nnt_dim_make(4, 1, 1, 3);
  assert_int_equal(l->ops->finalize(l, &fc, &e), NNT_OK);
  assert_int_equal(fc.n_w, 1);
  assert_int_equal(fc.w[0].init, NNT_INIT_XAVIER_UNIFORM);
  assert_float_equal(fc.w[0].l2, 0, 0);
  /* NNTrainer reads fans from the shape: [1, unit] is a vector of unit */
  fc.n_w = 0;
  fc.in_dim[0] = nnt_dim_make(4, 1, 1, 1);
  assert_int_equal(l->ops->finalize(l, &fc, &e), NNT_OK);
  assert_int_equal(fc.w[0].fan_in, 2);
  assert_int_equal(fc.w[0].fan_out, 2);
  nnt_layer_destroy(l);
  nnt_weight_props wp;
  nnt_weight_props_init(&wp);
  assert_int_equal(wp.bias_init, NNT_INIT_ZEROS);
  assert_float_equal(wp.l2_constant, 1.0f, 0);
  assert_false(wp.l2norm || wp.disable_bias);
  assert_int_equal(nnt_weight_props_set(&wp, "unit", "3", &e), NNT_ERR_NOKEY);
  /* dropout asks for a mask kept from forward to backward */
  assert_int_equal(nnt_layer_create("dropout", &l, &e), NNT_OK);
  memset(&fc, 0, sizeof fc);
  fc.n_in = 1, fc.n_out = 1;
  fc.in_dim[0] = nnt_dim_make(4, 1, 2, 3);
  assert_int_equal(l->ops->finalize(l, &fc, &e), NNT_OK);
  assert_int_equal(fc.n_scratch, 1);
  assert_int_equal(fc.scratch_life[0], NNT_SCRATCH_ITER);
  assert_true(nnt_dim_eq(fc.scratch_dim[0], fc.in_dim[0]));
  nnt_layer_destroy(l);
  /* the request tables stop at their limits */
  memset(&fc, 0, sizeof fc);
  for (unsigned i = 0; i < NNT_MAX_WEIGHTS; i++)
    assert_int_equal(nnt_fctx_add_weight(&fc, "w", nnt_dim_make(1, 1, 1, 1), NNT_INIT_ZEROS, 1,
                                         1, 0, 0, 1), i);
  assert_int_equal(nnt_fctx_add_weight(&fc, "w", nnt_dim_make(1, 1, 1, 1), NNT_INIT_ZEROS, 1, 1,
                                       0, 0, 1), NNT_MAX_WEIGHTS);
  assert_int_equal(fc.n_w, NNT_MAX_WEIGHTS);
  for (unsigned i = 0; i < NNT_MAX_SCRATCH; i++)
    assert_int_equal(nnt_fctx_add_scratch(&fc, nnt_dim_make(1, 1, 1, 1), NNT_SCRATCH_FWD), i);
  assert_int_equal(nnt_fctx_add_scratch(&fc, nnt_dim_make(1, 1, 1, 1), NNT_SCRATCH_FWD),
                   NNT_MAX_SCRATCH);
  assert_int_equal(fc.n_scratch, NNT_MAX_SCRATCH);
}

static void test_initializers(void **state) {
  (void)state;
  enum { N = 40000 };
  const unsigned fi = 50, fo = 10;
  /* NNTrainer's formulas (Tensor::initialize): std for the normal ones,
   * the bound for the uniform ones (lecun_uniform: sqrt(1 / fan_in)) */
  const struct {
    nnt_init init;
    int normal;
    double scale;
  } cases[] = {
      {NNT_INIT_LECUN_NORMAL, 1, sqrt(1.0 / fi)},
      {NNT_INIT_XAVIER_NORMAL, 1, sqrt(2.0 / (fi + fo))},
      {NNT_INIT_HE_NORMAL, 1, sqrt(2.0 / fi)},
      {NNT_INIT_LECUN_UNIFORM, 0, sqrt(1.0 / fi)},
      {NNT_INIT_XAVIER_UNIFORM, 0, sqrt(6.0 / (fi + fo))},
      {NNT_INIT_HE_UNIFORM, 0, sqrt(6.0 / fi)},
  };
  float *w = malloc(N * sizeof *w), *part = malloc(N * sizeof *part);
  for (size_t c = 0; c < NNT_ARRAY_LEN(cases); c++) {
    nnt_init_fill(cases[c].init, fi, fo, 3, c, 0, w, N);
    /* value i depends on i alone: any split into chunks gives the same */
    for (size_t at = 0, k = 1; at < N; at += k, k = k * 3 + 1)
      nnt_init_fill(cases[c].init, fi, fo, 3, c, at, part + at, at + k > N ? N - at : k);
    assert_memory_equal(part, w, N * sizeof *w);
    /* the documented counters: uniform value i is word i % 4 of counter
     * (stream, i / 4); normal value i is Box-Muller on words 2(i % 2) and
     * 2(i % 2) + 1 of counter (stream, i / 2) */
    for (size_t i = 0; i < 9; i++) {
      double want;
      if (cases[c].normal) {
        nnt_philox_out o = nnt_philox(3, c, i / 2);
        double u0 = nnt_philox_u01(o.v[2 * (i % 2)]), u1 = nnt_philox_u01(o.v[2 * (i % 2) + 1]);
        want = cases[c].scale * sqrt(-2 * log(1 - u0)) * cos(2 * M_PI * u1);
      } else {
        want = (2.0 * nnt_philox_uniform_at(3, c, i) - 1) * cases[c].scale;
      }
      assert_true(w[i] == (float)want);
    }
    double s = 0, s2 = 0, mx = 0;
    for (size_t i = 0; i < N; i++)
      s += w[i], s2 += (double)w[i] * w[i], mx = fmax(mx, fabs(w[i]));
    double sd = sqrt(s2 / N), want_sd = cases[c].normal ? cases[c].scale
                                                         : cases[c].scale / sqrt(3.0);
    if (fabs(s / N) > 0.02 * want_sd || fabs(sd - want_sd) > 0.02 * want_sd)
      fail_msg("%s: mean %g, std %g, expected std %g", nnt_init_name(cases[c].init), s / N, sd,
               want_sd);
    if (!cases[c].normal)
      assert_true(mx <= cases[c].scale && mx > 0.99 * cases[c].scale);
    else
      assert_true(mx > 3 * want_sd); /* not truncated */
  }
  nnt_init_fill(NNT_INIT_ONES, 1, 1, 3, 0, 0, w, 4);
  assert_true(w[0] == 1.0f && w[3] == 1.0f);
  nnt_init_fill(NNT_INIT_ZEROS, 1, 1, 3, 0, 0, w, 4);
  assert_true(w[0] == 0.0f && w[3] == 0.0f);
  nnt_init i;
  for (int k = NNT_INIT_ZEROS; k <= NNT_INIT_HE_UNIFORM; k++) {
    assert_int_equal(nnt_init_from_name(nnt_init_name((nnt_init)k), &i), NNT_OK);
    assert_int_equal(i, k);
  }
  assert_int_equal(nnt_init_from_name("He_Normal", &i), NNT_OK);
  assert_int_equal(nnt_init_from_name("glorot", &i), NNT_ERR_INVAL);
  free(w);
  free(part);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fully_connected),
      cmocka_unit_test(test_activations),
      cmocka_unit_test(test_shape_layers),
      cmocka_unit_test(test_losses),
      cmocka_unit_test(test_batch_normalization),
      cmocka_unit_test(test_convolution),
      cmocka_unit_test(test_pooling),
      cmocka_unit_test(test_window_errors),
      cmocka_unit_test(test_batch_normalization_statistics),
      cmocka_unit_test(test_dropout_inference_is_identity),
      cmocka_unit_test(test_in_place),
      cmocka_unit_test(test_losses_without_label),
      cmocka_unit_test(test_input_normalization),
      cmocka_unit_test(test_property_errors),
      cmocka_unit_test(test_registry),
      cmocka_unit_test(test_weight_requests),
      cmocka_unit_test(test_initializers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
