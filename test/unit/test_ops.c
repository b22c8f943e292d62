/* Every layer type through the op harness (op_harness.h) on every backend
 * present: guard bytes around every tensor, results against a reference
 * run placed differently, finite differences of dX and dW. The table must
 * hold a case for each registered type. Also here: test-only layers and
 * kernels that write past a tensor, compute a wrong value or a wrong
 * gradient, to show the harness reports each. */
#include "op_harness.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Max-like layers are piecewise linear: their inputs are distinct and the
 * step small, so no perturbation swaps which input is largest. */
#define MAXLIKE .distinct = 1, .fd_eps = 1e-3f

static const oh_case cases[] = {
    {.type = "input", .in = {"1:6"}},
    /* normalizing is preprocessing: the input layer's derivative passes
     * through (layers/input.c), so no finite differences */
    {.type = "input", .props = {"normalization=true"}, .in = {"3:5"}, .no_fd = 1},
    {.type = "input", .props = {"standardization=true"}, .in = {"3:1:5"}, .no_fd = 1},
    {.type = "fully_connected", .props = {"unit=5"}, .in = {"7"}, .batch = 3},
    {.type = "fully_connected", .props = {"unit=5"}, .in = {"2:3:4"}},
    {.type = "fully_connected", .props = {"unit=3", "disable_bias=true"}, .in = {"5"}},
    /* LoRA: only loraA and loraB train (the harness checks each trainable
     * dW and dX by finite differences) */
    {.type = "fully_connected", .props = {"unit=5", "lora_rank=2"}, .in = {"7"}, .batch = 3},
    {.type = "fully_connected",
     .props = {"unit=4", "lora_rank=3", "lora_alpha=6", "disable_bias=true"}, .in = {"2:3:5"}},
    {.type = "activation", .props = {"activation=relu"}, .in = {"2:5"}, .batch = 3},
    {.type = "activation", .props = {"activation=leaky_relu"}, .in = {"2:5"}},
    /* a bit per element instead of the output: 210 bits, a partial last word */
    {.type = "activation", .props = {"activation=relu"}, .in = {"3:7:5"}, .keep_less = 1},
    {.type = "activation", .props = {"activation=leaky_relu"}, .in = {"3:7:5"}, .keep_less = 1},
    {.type = "activation", .props = {"activation=sigmoid"}, .in = {"2:5"}},
    {.type = "activation", .props = {"activation=tanh"}, .in = {"2:5"}},
    {.type = "activation", .props = {"activation=softmax"}, .in = {"2:5"}},
    {.type = "activation", .props = {"activation=swish"}, .in = {"2:5"}},
    {.type = "activation", .props = {"activation=gelu"}, .in = {"2:5"}},
    {.type = "activation", .props = {"activation=elu"}, .in = {"2:5"}},
    {.type = "activation", .props = {"activation=selu"}, .in = {"2:5"}},
    {.type = "activation", .props = {"activation=softplus"}, .in = {"2:5"}},
    {.type = "activation", .props = {"activation=mish"}, .in = {"2:5"}},
    {.type = "activation", .props = {"activation=none"}, .in = {"2:5"}},
    {.type = "flatten", .in = {"3:2:2"}},
    {.type = "reshape", .props = {"target_shape=4:3:1"}, .in = {"3:2:2"}},
    {.type = "dropout", .props = {"dropout_rate=0"}, .in = {"9"}, .batch = 4},
    {.type = "dropout", .props = {"dropout_rate=0.3"}, .in = {"9"}, .batch = 4},
    {.type = "batch_normalization", .in = {"3:2:2"}, .batch = 4},
    {.type = "batch_normalization", .props = {"axis=3"}, .in = {"4"}, .batch = 5},
    {.type = "batch_normalization", .props = {"axis=2", "epsilon=0.01", "momentum=0.9"},
     .in = {"2:3:2"}, .batch = 3},
    {.type = "mse", .in = {"3"}, .batch = 4},
    {.type = "cross_softmax", .in = {"5"}, .batch = 4},
    {.type = "cross_sigmoid", .in = {"4"}, .batch = 3},
    {.type = "addition", .in = {"2:3", "2:3"}},
    {.type = "addition", .in = {"1:2:3", "1:2:3", "1:2:3"}},
    {.type = "concat", .props = {"axis=1"}, .in = {"1:2:3", "2:2:3"}},
    {.type = "concat", .props = {"axis=3"}, .in = {"2:2:3", "2:2:1", "2:2:2"}},
    {.type = "concat", .props = {"axis=2"}, .in = {"2:1:3", "2:3:3"}},
    {.type = "split", .props = {"axis=3", "split_number=2"}, .in = {"2:2:4"}, .outs = 2},
    {.type = "split", .props = {"axis=1"}, .in = {"3:2:2"}, .outs = 3},
    {.type = "multiout", .in = {"2:3"}, .outs = 3},
    {.type = "identity", .in = {"3:2"}},
    {.type = "permute", .props = {"direction=3,1,2"}, .in = {"2:3:4"}},
    {.type = "permute", .props = {"direction=2,3,1"}, .in = {"2:3:4"}},
    {.type = "upsample2d", .props = {"kernel_size=2,3"}, .in = {"2:2:3"}},
    {.type = "upsample2d", .props = {"upsample=nearest", "kernel_size=2"}, .in = {"1:3:2"}},
    {.type = "conv2d", .props = {"filters=3", "kernel_size=3,3"}, .in = {"2:5:7"}},
    {.type = "conv2d", .props = {"filters=2", "kernel_size=3", "stride=2", "padding=same"},
     .in = {"2:5:6"}},
    {.type = "conv2d",
     .props = {"filters=2", "kernel_size=2,3", "dilation=2", "padding=1,0,2,1"},
     .in = {"3:6:5"}, .batch = 1},
    {.type = "conv2d", .props = {"filters=2", "kernel_size=3", "padding=1", "disable_bias=true"},
     .in = {"1:4:4"}},
    {.type = "conv2d", .props = {"filters=2", "kernel_size=1"}, .in = {"3:3:3"}},
    /* pointwise (no im2col) without bias, and 1x1 stride 2 (im2col) */
    {.type = "conv2d", .props = {"filters=4", "kernel_size=1", "disable_bias=true"},
     .in = {"3:2:5"}},
    {.type = "conv2d", .props = {"filters=3", "kernel_size=1", "stride=2"}, .in = {"2:5:4"}},
    /* images in groups (layers/conv.c): an 8x8 plane takes 3 images per
     * gemm, so a batch of 7 runs as 3 + 3 + 1 (a remainder); the cases
     * above run their whole batch in one group (finite differences:
     * test_conv_fd). The backward keeps its scratch within one image's
     * columns: here one image at a time (dY of 3 does not fit), then
     * groups of 2 in blocks of 1 channel, then groups of 3 in blocks of
     * 3, 3, 3 and 2 channels (im2col, col2im of channel blocks) */
    {.type = "conv2d", .props = {"filters=4", "kernel_size=3"}, .in = {"2:10:10"}, .batch = 7,
     .no_fd = 1},
    {.type = "conv2d", .props = {"filters=4", "kernel_size=3"}, .in = {"4:10:10"}, .batch = 7,
     .no_fd = 1},
    {.type = "conv2d", .props = {"filters=2", "kernel_size=3", "padding=1,0,0,2"},
     .in = {"11:9:8"}, .batch = 7, .no_fd = 1},
    {.type = "conv1d", .props = {"filters=3", "kernel_size=3", "stride=2", "padding=same"},
     .in = {"2:1:9"}},
    {.type = "conv1d", .props = {"filters=2", "kernel_size=2", "dilation=2"}, .in = {"2:1:7"}},
    {.type = "conv1d", .props = {"filters=3", "kernel_size=1"}, .in = {"4:1:6"}},
    {.type = "pooling2d", .props = {"pooling=max"}, .in = {"2:4:6"}, MAXLIKE},
    {.type = "pooling2d", .props = {"pooling=max", "pool_size=3", "stride=2", "padding=same"},
     .in = {"2:5:5"}, .batch = 1, MAXLIKE},
    {.type = "pooling2d", .props = {"pooling=average", "pool_size=2", "stride=1", "padding=1"},
     .in = {"2:3:4"}},
    {.type = "pooling2d", .props = {"pooling=average", "pool_size=3", "stride=2", "padding=same"},
     .in = {"2:5:5"}, .batch = 1},
    {.type = "pooling2d", .props = {"pooling=global_max"}, .in = {"2:4:6"}, MAXLIKE},
    {.type = "pooling2d", .props = {"pooling=global_average"}, .in = {"2:4:6"}},
    {.type = "lstm", .props = {"unit=3", "return_sequences=true"}, .in = {"1:4:3"}},
    {.type = "lstm", .props = {"unit=3", "integrate_bias=true"}, .in = {"1:4:3"}},
    {.type = "lstm", .props = {"unit=2", "bidirectional=true", "return_sequences=true"},
     .in = {"1:3:4"}},
    {.type = "lstm", .props = {"unit=2", "bidirectional=true", "disable_bias=true"},
     .in = {"1:3:2"}, .batch = 3},
    {.type = "lstm", .props = {"unit=2", "return_sequences=true", "dropout_rate=0.4",
                               "bidirectional=true", "integrate_bias=true"}, .in = {"1:3:2"}},
    {.type = "lstm", .props = {"unit=1"}, .in = {"1:1:1"}, .batch = 1},
    {.type = "lstmcell", .props = {"unit=2"}, .in = {"1:1:3", "1:1:2", "1:1:2"}},
    {.type = "lstmcell", .props = {"unit=3", "integrate_bias=true", "dropout_rate=0.3"},
     .in = {"1:1:2", "1:1:3", "1:1:3"}, .batch = 3},
    {.type = "lstmcell", .props = {"unit=2", "disable_bias=true"},
     .in = {"1:1:1", "1:1:2", "1:1:2"}, .batch = 1},
    /* attention: query, value and key or not (the value then stands for
     * it), scaled or not, causal or not; channels are more matrices */
    {.type = "attention", .in = {"1:3:4", "1:5:4"}},
    {.type = "attention", .props = {"scaled_dot_product=true"}, .in = {"1:3:4", "1:5:4", "1:5:4"}},
    {.type = "attention", .props = {"causal_mask=true", "scaled_dot_product=true"},
     .in = {"2:4:3", "2:4:3", "2:4:3"}},
    {.type = "attention", .props = {"causal_mask=true"}, .in = {"1:4:3", "1:6:3"}, .batch = 3},
    /* multi_head_attention: 1 and 2 heads, causal or not, a mask input,
     * projected widths and output_shape given, no bias, dropout, the
     * attention weights returned (averaged over the heads or not) */
    {.type = "multi_head_attention", .in = {"1:3:4", "1:5:6", "1:5:2"}},
    {.type = "multi_head_attention", .props = {"num_heads=2"}, .in = {"1:4:4", "1:4:4", "1:4:4"}},
    {.type = "multi_head_attention", .props = {"num_heads=2", "causal_mask=true"},
     .in = {"1:4:6", "1:4:3", "1:4:5"}},
    {.type = "multi_head_attention", .props = {"causal_mask=true"},
     .in = {"1:3:2", "1:5:2", "1:5:2"}},
    {.type = "multi_head_attention",
     .props = {"num_heads=2", "projected_key_dim=3", "projected_value_dim=2", "output_shape=5",
               "disable_bias=true"},
     .in = {"1:3:4", "1:4:3", "1:4:2", "2:3:4"}},
    {.type = "multi_head_attention", .props = {"num_heads=2", "dropout_rate=0.3"},
     .in = {"1:3:4", "1:3:4", "1:3:4"}, .batch = 3},
    {.type = "multi_head_attention",
     .props = {"num_heads=2", "return_attention_weight=after", "average_attention_weight=true"},
     .in = {"1:3:4", "1:5:4", "1:5:4"}, .outs = 2},
    {.type = "multi_head_attention",
     .props = {"num_heads=2", "return_attention_weight=before", "average_attention_weight=false",
               "causal_mask=true"},
     .in = {"1:3:4", "1:3:4", "1:3:4"}, .outs = 2},
    /* recurrent layers: input 1:time_steps:features; a cell's inputs are
     * one step and the previous state; dropout's mask is fixed by the seed */
    {.type = "rnn", .props = {"unit=5"}, .in = {"1:4:3"}},
    {.type = "rnn", .props = {"unit=4", "return_sequences=true", "integrate_bias=true"},
     .in = {"1:3:5"}, .batch = 3},
    {.type = "rnn", .props = {"unit=3", "return_sequences=true", "dropout_rate=0.3",
                              "hidden_state_activation=sigmoid", "disable_bias=true"},
     .in = {"1:5:2"}},
    {.type = "rnncell", .props = {"unit=4"}, .in = {"1:1:3", "1:1:4"}},
    {.type = "rnncell", .props = {"unit=3", "integrate_bias=true", "dropout_rate=0.25"},
     .in = {"1:1:5", "1:1:3"}, .batch = 3},
    {.type = "gru", .props = {"unit=4"}, .in = {"1:4:3"}},
    {.type = "gru", .props = {"unit=3", "reset_after=false", "return_sequences=true"},
     .in = {"1:3:5"}, .batch = 3},
    {.type = "gru", .props = {"unit=4", "integrate_bias=true", "return_sequences=true",
                              "dropout_rate=0.3"},
     .in = {"1:3:2"}},
    {.type = "gru", .props = {"unit=3", "reset_after=false", "integrate_bias=true"},
     .in = {"1:4:2"}},
    {.type = "gru", .props = {"unit=3", "disable_bias=true", "return_sequences=true",
                              "recurrent_activation=tanh", "hidden_state_activation=sigmoid"},
     .in = {"1:3:4"}},
    {.type = "grucell", .props = {"unit=4"}, .in = {"1:1:3", "1:1:4"}},
    {.type = "grucell", .props = {"unit=3", "reset_after=false", "integrate_bias=true",
                                  "dropout_rate=0.2"},
     .in = {"1:1:5", "1:1:3"}, .batch = 3},
    /* indices with repeats and fractions; a masked row; no derivative */
    {.type = "embedding", .props = {"in_dim=5", "out_dim=3"}, .in = {"1:1:7"}, .batch = 3,
     .indices = 5},
    {.type = "embedding", .props = {"in_dim=4", "out_dim=6", "zero_idx_mask=2"},
     .in = {"1:1:5"}, .indices = 4},
    {.type = "layer_normalization", .props = {"axis=3"}, .in = {"2:3:5"}},
    {.type = "layer_normalization", .props = {"axis=2,3", "epsilon=0.01"}, .in = {"2:3:4"}},
    {.type = "layer_normalization", .props = {"axis=3,2,1"}, .in = {"2:2:3"}, .batch = 3},
    /* the device's sin, cos and pow: within 1e-5 of the CPU's here */
    {.type = "positional_encoding", .props = {"max_timestep=7"}, .in = {"1:7:6"}},
    {.type = "positional_encoding", .props = {"max_timestep=9"}, .in = {"2:3:5"}, .batch = 3},
    {.type = "add", .in = {"2:3:4", "2:3:4"}},
    {.type = "subtract", .props = {"inplace=true"}, .in = {"1:3:5", "1:3:5"}, .batch = 3},
    {.type = "multiply", .in = {"2:3:4", "2:3:4"}},
    /* inputs at least 0.1 from 0: a small step for 1/b's curvature */
    {.type = "divide", .props = {"inplace_direction=right"}, .in = {"3:4", "3:4"},
     .fd_eps = 1e-4f, .fd_tol = 1e-2},
    {.type = "reduce_mean", .in = {"2:3:4"}},
    {.type = "reduce_mean", .props = {"axis=1"}, .in = {"3:2:4"}},
    {.type = "reduce_mean", .props = {"axis=2"}, .in = {"2:3:4"}, .batch = 3},
    {.type = "reduce_mean", .props = {"axis=3"}, .in = {"2:3:5"}},
};

static void test_every_type_has_a_case(void **state) {
  (void)state;
  char missing[512];
  oh_missing_types(cases, NNT_ARRAY_LEN(cases), missing, sizeof missing);
  if (missing[0])
    fail_msg("registered layer types without an op harness case: %s", missing);
  /* and the check can fail: without the conv1d cases, conv1d is missing */
  oh_case some[NNT_ARRAY_LEN(cases)];
  size_t n = 0;
  for (size_t i = 0; i < NNT_ARRAY_LEN(cases); i++)
    if (strcmp(cases[i].type, "conv1d"))
      some[n++] = cases[i];
  oh_missing_types(some, n, missing, sizeof missing);
  assert_string_equal(missing, "conv1d");
}

static void test_cases(void **state) {
  (void)state;
  const nnt_backend *be[OH_MAX_BACKENDS];
  unsigned nb = oh_backends(be), failed = 0;
  assert_true(nb >= 1);
  for (unsigned b = 0; b < nb; b++) {
    unsigned ran = 0, skipped = 0;
    /* on a backend with a partial op set (Vulkan), the types that must run */
    const char *must[] = {"fully_connected", "activation", "cross_softmax", "mse"};
    unsigned must_ran[NNT_ARRAY_LEN(must)] = {0};
    for (size_t i = 0; i < NNT_ARRAY_LEN(cases); i++) {
      oh_report r;
      char name[256];
      if (oh_run_case(&cases[i], be[b], 1, &r)) {
        print_error("%s on %s: %s\n", oh_case_name(&cases[i], name, sizeof name), be[b]->name,
                    r.msg);
        failed++;
      }
      if (r.skipped) {
        skipped++;
        continue;
      }
      ran++;
      for (size_t k = 0; k < NNT_ARRAY_LEN(must); k++)
        must_ran[k] += !strcmp(cases[i].type, must[k]);
    }
    print_message("backend %s: %u cases ran, %u skipped (ops it does not support)\n",
                  be[b]->name, ran, skipped);
    for (size_t k = 0; k < NNT_ARRAY_LEN(must); k++)
      if (!must_ran[k])
        fail_msg("backend %s ran no %s case", be[b]->name, must[k]);
    /* every backend (the CPU, the fake device, Vulkan) supports every op */
    if (skipped)
      fail_msg("backend %s skipped %u cases", be[b]->name, skipped);
  }
  if (failed)
    fail_msg("%u of %zu cases failed", failed, nb * NNT_ARRAY_LEN(cases));
}

/* ---- test-only layers: an identity with one defect each ---- */

/* forward writes one float past its output */
static int overrun_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  int rc = oh_copy_forward(l, ctx);
  return rc ? rc : ctx->k->fill(ctx->k, 1, 1.0f, ctx->out[0].data + nnt_tensor_len(&ctx->out[0]));
}

/* calc_derivative writes one float before its d_in */
static int underrun_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  int rc = oh_copy_derivative(l, ctx);
  return rc ? rc : ctx->k->fill(ctx->k, 1, 0.0f, ctx->d_in[0].data - 1);
}

/* calc_derivative gives twice the derivative */
static int double_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  int rc = oh_copy_derivative(l, ctx);
  return rc ? rc : ctx->k->scale(ctx->k, nnt_tensor_len(&ctx->d_in[0]), 2.0f, ctx->d_in[0].data);
}

/* y = x * w element-wise, with twice the weight gradient */
static int mul_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  oh_same_finalize(l, ctx, e);
  nnt_fctx_add_weight(ctx, "factor", ctx->in_dim[0], NNT_INIT_ZEROS, 1, 1, 0, 0, 1);
  ctx->flags = NNT_LF_BWD_READS_INPUT;
  return NNT_OK;
}

static int mul_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  (void)l;
  return ctx->k->mul(ctx->k, nnt_tensor_len(&ctx->in[0]), ctx->in[0].data, ctx->w[0].data,
                     ctx->out[0].data);
}

static int mul_gradient(nnt_layer *l, nnt_run_ctx *ctx) {
  (void)l;
  size_t n = nnt_tensor_len(&ctx->in[0]);
  int rc = ctx->k->mul(ctx->k, n, ctx->in[0].data, ctx->d_out[0].data, ctx->gw[0].data);
  return rc ? rc : ctx->k->scale(ctx->k, n, 2.0f, ctx->gw[0].data);
}

static int mul_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  (void)l;
  return ctx->k->mul(ctx->k, nnt_tensor_len(&ctx->in[0]), ctx->d_out[0].data, ctx->w[0].data,
                     ctx->d_in[0].data);
}

static const nnt_layer_ops mul_ops = {
    .type = "test_mul", .ml_type = -1, .finalize = mul_finalize, .forward = mul_forward,
    .calc_gradient = mul_gradient, .calc_derivative = mul_derivative};
static const nnt_layer_ops overrun_ops = {
    .type = "test_overrun", .ml_type = -1, .finalize = oh_same_finalize,
    .forward = overrun_forward, .calc_derivative = oh_copy_derivative};
static const nnt_layer_ops underrun_ops = {
    .type = "test_underrun", .ml_type = -1, .finalize = oh_same_finalize,
    .forward = oh_copy_forward, .calc_derivative = underrun_derivative};
static const nnt_layer_ops double_ops = {
    .type = "test_double", .ml_type = -1, .finalize = oh_same_finalize,
    .forward = oh_copy_forward, .calc_derivative = double_derivative};

/* a loss layer (mse) whose output needs its label: without one (as in
 * inference) it gives zeros */
static int loss_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e) {
  oh_same_finalize(l, ctx, e);
  ctx->flags = NNT_LF_LOSS | NNT_LF_BWD_READS_OUTPUT;
  return NNT_OK;
}

static int label_bound_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  size_t n = nnt_tensor_len(&ctx->in[0]);
  if (!ctx->label)
    return ctx->k->fill(ctx->k, n, 0.0f, ctx->out[0].data);
  int rc = oh_copy_forward(l, ctx);
  return rc ? rc : ctx->k->mse_fwd(ctx->k, n, ctx->out[0].data, ctx->label->data, ctx->loss->data);
}

static int loss_derivative(nnt_layer *l, nnt_run_ctx *ctx) {
  (void)l;
  return ctx->k->mse_bwd(ctx->k, nnt_tensor_len(&ctx->out[0]), ctx->out[0].data, ctx->label->data,
                         ctx->d_in[0].data);
}

static const nnt_layer_ops label_bound_ops = {
    .type = "test_label_bound", .ml_type = -1, .finalize = loss_finalize,
    .forward = label_bound_forward, .calc_derivative = loss_derivative};

static void expect_failure(const oh_case *c, const nnt_backend *be, const char *a, const char *b,
                           const char *d) {
  oh_report r;
  char name[256];
  if (!oh_run_case(c, be, 1, &r))
    fail_msg("%s on %s: the harness found nothing", oh_case_name(c, name, sizeof name),
             be->name);
  tu_assert_contains(r.msg, a);
  tu_assert_contains(r.msg, b);
  tu_assert_contains(r.msg, d);
}

static void test_guard_catches_a_layer_writing_past_its_tensor(void **state) {
  (void)state;
  const nnt_backend *cpu = nnt_backend_cpu();
  oh_case c = {.type = "test_overrun", .ops = &overrun_ops, .in = {"2:3"}};
  expect_failure(&c, cpu, "forward (inference) wrote guard bytes 0 to 3 ",
                 "between 'out[0]' and 'd_out[0]'", "cpu:");
  c.in[0] = "7"; /* the same where the tensor does not end on an alignment */
  expect_failure(&c, cpu, "forward (inference) wrote guard bytes 0 to 3 ", "'out[0]'", "cpu:");
  oh_case u = {.type = "test_underrun", .ops = &underrun_ops, .in = {"2:3"}};
  expect_failure(&u, cpu, "calc_derivative wrote guard bytes", "and 'd_in[0]'", "cpu:");
  /* the layer without its defect passes */
  static const nnt_layer_ops good = {
      .type = "test_copy", .ml_type = -1, .finalize = oh_same_finalize, .forward = oh_copy_forward,
      .calc_derivative = oh_copy_derivative};
  oh_case g = {.type = "test_copy", .ops = &good, .in = {"2:3"}};
  oh_report r;
  if (oh_run_case(&g, cpu, 1, &r))
    fail_msg("%s", r.msg);
}

static void test_finite_differences_catch_a_wrong_derivative(void **state) {
  (void)state;
  oh_case c = {.type = "test_double", .ops = &double_ops, .in = {"4"}};
  expect_failure(&c, nnt_backend_cpu(), "test_double d_in[0][0]: analytic", "numeric", "cpu:");
  /* a wrong weight gradient, dX right */
  oh_case m = {.type = "test_mul", .ops = &mul_ops, .in = {"4"}};
  expect_failure(&m, nnt_backend_cpu(), "test_mul factor[0]: analytic", "numeric", "cpu:");
}

/* Every loss layer runs a forward without a label and a loss value (as
 * inference does): a layer whose output then differs is reported. */
static void test_a_loss_layer_without_label(void **state) {
  (void)state;
  oh_case c = {.type = "test_label_bound", .ops = &label_bound_ops, .in = {"3"}, .batch = 2};
  expect_failure(&c, nnt_backend_cpu(), "out[0] after forward (inference, no label) differs",
                 "from out[0] after forward (inference)", "cpu:");
}

/* ---- a backend with a broken kernel ---- */

static int copy_one_more(const nnt_kernels *self, size_t n, const float *x, float *y) {
  (void)self;
  for (size_t i = 0; i < n; i++)
    y[i] = x[i];
  y[n] = 0; /* one float past */
  return NNT_OK;
}

static int relu_off_by_a_bit(const nnt_kernels *self, nnt_act a, float alpha, size_t n,
                             const float *x, float *y) {
  int rc = nnt_kernels_cpu()->act_fwd(self, a, alpha, n, x, y);
  y[n / 2] += 0.01f;
  return rc;
}

static void test_a_broken_backend_is_caught(void **state) {
  (void)state;
  const nnt_backend *cpu = nnt_backend_cpu();
  nnt_kernels k = *cpu->k;
  nnt_backend bad = *cpu;
  bad.name = "broken";
  bad.k = &k;
  k.copy = copy_one_more;
  oh_case id = {.type = "identity", .in = {"3:2"}};
  expect_failure(&id, &bad, "broken: forward (inference) wrote guard bytes 0 to 3 ",
                 "'out[0]'", "between");
  k = *cpu->k;
  k.act_fwd = relu_off_by_a_bit;
  oh_case act = {.type = "activation", .props = {"activation=relu"}, .in = {"2:5"}};
  expect_failure(&act, &bad, "broken: out[0] after forward (inference) differs from the "
                 "reference", "normalised error", "the reference");
  /* the same cases on the real kernels pass */
  oh_report r;
  assert_int_equal(oh_run_case(&id, cpu, 1, &r), 0);
  assert_int_equal(oh_run_case(&act, cpu, 1, &r), 0);
}

/* Runs last: the shared Vulkan instance (when there is one) reported
 * nothing to its validation record over every case above. */
static void test_gpu_validation_is_silent(void **state) {
  (void)state;
  oh_backends_release();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_type_has_a_case),
      cmocka_unit_test(test_cases),
      cmocka_unit_test(test_guard_catches_a_layer_writing_past_its_tensor),
      cmocka_unit_test(test_finite_differences_catch_a_wrong_derivative),
      cmocka_unit_test(test_a_loss_layer_without_label),
      cmocka_unit_test(test_a_broken_backend_is_caught),
      cmocka_unit_test(test_gpu_validation_is_silent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
