/* Hostile sizes: crafted models whose shape or size arithmetic used to
 * overflow or wrap (a layer then wrote past its arena, or a plan came out
 * too small or empty), each now refused at compile with an error naming the
 * layer and the key; the largest sizes that still fit, and 1x1 shapes,
 * which must keep working; and [Model] memory_budget from the INI, the
 * model API, the C API and the CLI. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "nntrainer-ext.h"
#include "nntrainer.h"
#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

/* Under the sanitizer build an allocation too large to be possible returns
 * NULL, as it does without it, instead of stopping the test. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

/* Load text as an INI (with overrides) into a fresh model; *rc the load's. */
static nnt_model *load(const char *text, const char *const *ov, size_t n_ov, nnt_err *e,
                       int *rc) {
  nnt_model *m;
  assert_int_equal(nnt_model_create(&m, e), NNT_OK);
  assert_int_equal(nnt_model_set_base_dir(m, tu_dir, e), NNT_OK);
  *rc = nnt_ini_load(m, tu_write_text("case.ini", text), ov, n_ov, e);
  return m;
}

/* The shapes a compile produced, for a message when it should have failed. */
static const char *shapes(const nnt_model *m) {
  static char buf[2048];
  size_t n = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < m->n_nodes && n < sizeof buf - 200; i++) {
    char a[64];
    n += (size_t)snprintf(buf + n, sizeof buf - n, " %s -> %s;", m->nodes[i].layer->name,
                          nnt_dim_str(m->nodes[i].fc.out_dim[0], a, sizeof a));
  }
  return buf;
}

#define M1 "[Model]\nbatch_size = 1\n"
#define IN(shape) "[in]\ntype = input\ninput_shape = " shape "\n"

typedef struct size_case {
  const char *what; /* the arithmetic that wrapped before */
  const char *ini;
  const char *words[4]; /* in the compile error */
} size_case;

/* Every one of these compiled before, with a wrapped, empty or unusable
 * shape; each is NNT_ERR_INVAL at compile now. */
static const size_case refused[] = {
    {"upsample2d height 3 x 1431655766 wrapped to 2: forward wrote 2^32 rows into 2",
     M1 IN("1:3:1") "[up1]\ntype = upsample2d\nkernel_size = 1431655766,1\n",
     {"[up1] ", "kernel_size", "4294967298"}},
    {"upsample2d width 2 x 2147483648 wrapped to 0: an empty output",
     M1 IN("1:1:2") "[up1]\ntype = upsample2d\nkernel_size = 1,2147483648\n",
     {"[up1] ", "kernel_size", "4294967296"}},
    {"flatten 65537 x 65537 x 1 wrapped to 131073",
     M1 IN("65537:65537:1") "[flat]\ntype = flatten\n", {"[flat] ", "flatten", "4295098369"}},
    {"flatten = true realizes the same layer: 65536 x 65537 wrapped",
     M1 IN("1:65536:1") "[fc1]\ntype = fully_connected\nunit = 65537\nflatten = true\n",
     {"[fc1/flatten_realized] ", "flatten", "4295032832"}},
    {"reshape 769546:494770:48448661 wrapped to 4 values, the input's count",
     M1 IN("1:1:4") "[rs]\ntype = reshape\ntarget_shape = 769546:494770:48448661\n",
     {"[rs] ", "target_shape", "769546:494770:48448661"}},
    {"concat of three widths of 2^31 - 1 wrapped",
     M1 "[a]\ntype = input\ninput_shape = 1:1:2147483647\n"
        "[b]\ntype = input\ninput_shape = 1:1:2147483647\n"
        "[c]\ntype = input\ninput_shape = 1:1:2147483647\n"
        "[cat]\ntype = concat\naxis = 3\ninput_layers = a, b, c\n",
     {"[cat] ", "axis", "at input 2"}},
    {"batch_size x input_shape = 2^64 values wrapped to a 0-byte input",
     "[Model]\nbatch_size = 65536\n" IN("65536:65536:65536"),
     {"[in] ", "input_shape", "batch_size", "does not fit"}},
    {"2^62 values: the byte count wrapped to 0",
     "[Model]\nbatch_size = 65536\n" IN("65536:65536:16384"),
     {"[in] ", "input_shape", "batch_size", "does not fit"}},
    {"conv2d patch 1 x 65536 x 65536 wrapped to 0: an empty column buffer",
     M1 IN("1:1:1") "[conv]\ntype = conv2d\nfilters = 1\nkernel_size = 65536,65536\n"
                    "padding = 32768\n",
     {"[conv] ", "kernel_size", "patch", "65536 x 65536"}},
    {"conv2d patch 2 x 32768 x 32768 = 2^31: negative as gemm's int",
     M1 IN("2:32768:32768") "[conv]\ntype = conv2d\nfilters = 1\nkernel_size = 32768\n",
     {"[conv] ", "kernel_size", "2147483648", "2147483647"}},
    {"conv2d filters 2^31: negative as gemm's int",
     M1 IN("1:1:1") "[conv]\ntype = conv2d\nfilters = 2147483648\nkernel_size = 1\n",
     {"[conv] ", "filters", "2147483648"}},
    {"conv2d output plane 65536 x 32768 = 2^31: negative as gemm's int",
     M1 IN("1:65536:32768") "[conv]\ntype = conv2d\nfilters = 1\nkernel_size = 1\n",
     {"[conv] ", "kernel_size, stride, padding", "2147483648"}},
    {"conv2d fan-out 65536 filters x 256 x 256 wrapped to 0",
     M1 IN("1:256:256") "[conv]\ntype = conv2d\nfilters = 65536\nkernel_size = 256\n",
     {"[conv] ", "filters", "fan-out"}},
    {"padding 2^31 top and bottom: the padded height 4 + 2^32 wrapped to 4",
     M1 IN("1:4:4") "[conv]\ntype = conv2d\nfilters = 1\nkernel_size = 3\n"
                    "padding = 2147483648,2147483648,0,0\n",
     {"[conv] ", "padding", "4294967300"}},
    {"kernel 65537 dilated by 65536 spans 2^32 + 1, wrapped to 1",
     M1 IN("1:4:4") "[conv]\ntype = conv2d\nfilters = 1\nkernel_size = 65537,1\n"
                    "dilation = 65536,1\n",
     {"[conv] ", "kernel_size, dilation", "4294967297"}},
    {"pooling window 65536 x 65537 positions wrapped: the average divided by 65536",
     M1 IN("1:1:1") "[pool]\ntype = pooling2d\npooling = average\npool_size = 65536,65537\n"
                    "padding = 32768\n",
     {"[pool] ", "pool_size", "positions"}},
    {"max pooling over 16777220 positions: the last one, a float, rounded past the plane",
     M1 IN("1:1:16777220") "[pool]\ntype = pooling2d\npooling = max\npool_size = 1\n",
     {"[pool] ", "pooling", "16777216", "16777220"}},
    {"fully_connected unit 2^31: negative as gemm's int",
     M1 IN("1:1:1") "[fc]\ntype = fully_connected\nunit = 2147483648\n",
     {"[fc] ", "unit", "2147483648"}},
    {"fully_connected input width 2^31: negative as gemm's int",
     M1 IN("1:1:2147483648") "[fc]\ntype = fully_connected\nunit = 1\n",
     {"[fc] ", "input width", "2147483648"}},
    {"fully_connected rows batch_size 65536 x 32768: negative as gemm's int",
     "[Model]\nbatch_size = 65536\n" IN("1:32768:1") "[fc]\ntype = fully_connected\nunit = 1\n",
     {"[fc] ", "batch_size", "2147483648 rows"}},
    {"one weight of (2^31 - 1)^2 floats: bytes past PTRDIFF_MAX",
     M1 IN("1:1:2147483647") "[fc]\ntype = fully_connected\nunit = 2147483647\n",
     {"[fc] ", "weight 'weight'", "does not fit"}},
    {"weights of three layers of 2^62 bytes add up past PTRDIFF_MAX",
     M1 IN("1:1:2147483647") "[fc1]\ntype = fully_connected\nunit = 536870912\n"
                             "[fc2]\ntype = fully_connected\nunit = 2147483647\n"
                             "[fc3]\ntype = fully_connected\nunit = 536870912\n",
     {"[fc2] ", "weight 'bias'", "add up"}},
    {"adam's two moments beside 2^62 bytes of weights do not fit",
     M1 "[Optimizer]\ntype = adam\n" IN("1:1:2147483647")
        "[fc1]\ntype = fully_connected\nunit = 536870912\ndisable_bias = true\n",
     {"[Optimizer] ", "adam", "2 values per weight"}},
};

static void test_refused(void **state) {
  (void)state;
  for (size_t i = 0; i < NNT_ARRAY_LEN(refused); i++) {
    const size_case *c = &refused[i];
    nnt_err e = {0};
    int rc;
    nnt_model *m = load(c->ini, NULL, 0, &e, &rc);
    if (rc)
      fail_msg("case %zu (%s): load failed: %s", i, c->what, e.msg);
    rc = nnt_model_compile(m, &e);
    if (rc == NNT_OK)
      fail_msg("case %zu (%s): compiled:%s", i, c->what, shapes(m));
    if (rc != NNT_ERR_INVAL)
      fail_msg("case %zu (%s): rc %d: %s", i, c->what, rc, e.msg);
    for (size_t w = 0; w < 4 && c->words[w]; w++)
      if (!strstr(e.msg, c->words[w]))
        fail_msg("case %zu (%s): expected '%s' in: %s", i, c->what, c->words[w], e.msg);
    nnt_model_destroy(m);
  }
}

/* The largest sizes that fit compile (nothing is allocated at compile). */
static const char *const fits[] = {
    M1 IN("1:1:1") "[up1]\ntype = upsample2d\nkernel_size = 4294967295,1\n",
    M1 IN("65535:65537:1") "[flat]\ntype = flatten\n", /* 4294967295 */
    M1 IN("1:1:4") "[rs]\ntype = reshape\ntarget_shape = 4:1:1\n",
    M1 "[a]\ntype = input\ninput_shape = 1:1:2147483647\n"
       "[b]\ntype = input\ninput_shape = 1:1:2147483648\n"
       "[cat]\ntype = concat\naxis = 3\ninput_layers = a, b\n", /* 4294967295 */
    "[Model]\nbatch_size = 65536\n" IN("65536:65536:8191"), /* just under 2^63 bytes */
    M1 IN("2147483647:1:1") "[conv]\ntype = conv2d\nfilters = 1\nkernel_size = 1\n",
    M1 IN("1:1:1") "[conv]\ntype = conv2d\nfilters = 2147483647\nkernel_size = 1\n",
    M1 IN("1:1:1") "[pool]\ntype = pooling2d\npooling = average\npool_size = 1\n"
                   "padding = 0,4294967294,0,0\n", /* output height 4294967295 */
    M1 IN("1:4096:4096") "[pool]\ntype = pooling2d\npooling = max\npool_size = 2\n",
    M1 IN("1:1:4294967295") "[pool]\ntype = pooling2d\npooling = average\npool_size = 2\n"
                            "stride = 2\npadding = same\n", /* ceil(in / 2) = 2^31 */
    M1 IN("1:1:1") "[fc]\ntype = fully_connected\nunit = 2147483647\n",
    M1 IN("1:1:2147483647") "[fc]\ntype = fully_connected\nunit = 1\n",
    "[Model]\nbatch_size = 65536\n" IN("1:32767:1") "[fc]\ntype = fully_connected\nunit = 1\n",
};

static void test_largest_that_fit(void **state) {
  (void)state;
  for (size_t i = 0; i < NNT_ARRAY_LEN(fits); i++) {
    nnt_err e = {0};
    int rc;
    nnt_model *m = load(fits[i], NULL, 0, &e, &rc);
    if (rc)
      fail_msg("case %zu: load failed: %s", i, e.msg);
    if ((rc = nnt_model_compile(m, &e)))
      fail_msg("case %zu: rc %d: %s", i, rc, e.msg);
    nnt_model_destroy(m);
  }
  /* output shapes at the edge, exactly */
  nnt_err e = {0};
  int rc;
  nnt_model *m = load(fits[0], NULL, 0, &e, &rc);
  assert_int_equal(nnt_model_compile(m, &e), NNT_OK);
  assert_int_equal(m->nodes[1].fc.out_dim[0].h, 4294967295u);
  nnt_model_destroy(m);
  m = load(fits[9], NULL, 0, &e, &rc);
  assert_int_equal(nnt_model_compile(m, &e), NNT_OK);
  assert_int_equal(m->nodes[1].fc.out_dim[0].w, 2147483648u);
  nnt_model_destroy(m);
}

/* 1x1 shapes through every window layer, trained and run under the
 * sanitizers: the checks refuse nothing small. */
static void test_one_by_one_trains(void **state) {
  (void)state;
  const char *ini =
      "[Model]\nbatch_size = 2\nepochs = 1\nloss = mse\n"
      "[Optimizer]\ntype = adam\n"
      "[train_set]\ntype = synthetic\nsamples = 4\n" IN("1:1:1")
      "[conv]\ntype = conv2d\nfilters = 1\nkernel_size = 1\n"
      "[c1d]\ntype = conv1d\nfilters = 1\nkernel_size = 1\npadding = same\n"
      "[pool]\ntype = pooling2d\npooling = max\npool_size = 1\n"
      "[gap]\ntype = pooling2d\npooling = global_average\n"
      "[up]\ntype = upsample2d\nkernel_size = 1\n"
      "[bn]\ntype = batch_normalization\n"
      "[flat]\ntype = flatten\n"
      "[rs]\ntype = reshape\ntarget_shape = 1:1:1\n"
      "[fc]\ntype = fully_connected\nunit = 1\n";
  nnt_err e = {0};
  int rc;
  nnt_model *m = load(ini, NULL, 0, &e, &rc);
  if (rc || (rc = nnt_model_compile(m, &e)) || (rc = nnt_model_initialize(m, &e)) ||
      (rc = nnt_model_train(m, NULL, NULL, &e)))
    fail_msg("rc %d: %s", rc, e.msg);
  assert_true(m->weight_bytes > 0);
  float x[2] = {0.5f, -1}, y[2];
  const float *in[1] = {x};
  float *out[1] = {y};
  assert_int_equal(nnt_model_infer(m, in, out, &e), NNT_OK);
  assert_true(m->mgr[NNT_MODE_INFER].arena_bytes > 0 || m->mgr[NNT_MODE_TRAIN].arena_bytes > 0);
  nnt_model_destroy(m);
}

/* The 2x2 max path of the CPU kernel takes a window only when all of it is
 * inside the input: 2 * oh compared in 64 bits. */
static void test_max2x2_path_in_64_bits(void **state) {
  (void)state;
  nnt_conv_geom g = {.c = 1, .h = 4, .w = 2, .kh = 2, .kw = 2, .sh = 2, .sw = 2, .dh = 1,
                     .dw = 1, .oh = 2, .ow = 1};
  assert_true(nnt_cpu_pool_is_max2x2(&g));
  /* a bottom padding of 2^32 - 2 on 4 rows: 2147483649 output rows, whose
   * double wrapped to 2 in 32 bits and took the path that reads x[2 oy w] */
  g.pb = 4294967294u;
  g.oh = 2147483649u;
  assert_false(nnt_cpu_pool_is_max2x2(&g));
}

/* Sizes that fit the limits but not the machine: every large allocation
 * fails with NNT_ERR_NOMEM naming what and how many bytes. */
static void test_allocation_failures_name_bytes(void **state) {
  (void)state;
  nnt_err e = {0};
  int rc;
  /* 2^62 - 2^31 bytes of weights */
  nnt_model *m = load(M1 IN("1:1:2147483647") "[fc1]\ntype = fully_connected\n"
                                            "unit = 536870912\ndisable_bias = true\n",
                      NULL, 0, &e, &rc);
  assert_int_equal(rc, NNT_OK);
  assert_int_equal(nnt_model_compile(m, &e), NNT_OK);
  assert_int_equal(nnt_model_initialize(m, &e), NNT_ERR_NOMEM);
  tu_assert_contains(e.msg, "weights");
  tu_assert_contains(e.msg, "4611686016279904256 bytes");
  nnt_model_destroy(m);
  /* an inference arena of 2^49 bytes (no weights): an activation's output
   * (the input is the caller's batch, not the arena's) */
  m = load("[Model]\nbatch_size = 65536\n" IN("1:1:2147483648")
           "[a]\ntype = activation\nactivation = relu\n",
           NULL, 0, &e, &rc);
  assert_int_equal(rc, NNT_OK);
  assert_int_equal(nnt_model_compile(m, &e), NNT_OK);
  assert_int_equal(nnt_model_initialize(m, &e), NNT_OK);
  assert_int_equal(nnt_model_plan(m, NNT_MODE_INFER, &e), NNT_ERR_NOMEM);
  tu_assert_contains(e.msg, "inference arena");
  tu_assert_contains(e.msg, "562949953421312 bytes");
  assert_false(m->mgr[NNT_MODE_INFER].planned);
  nnt_model_destroy(m);
}

static const char *mlp_ini =
    "[Model]\nbatch_size = 4\nepochs = 1\nloss = cross\n"
    "[Optimizer]\ntype = adam\n"
    "[train_set]\ntype = synthetic\nsamples = 8\n"
    "[in]\ntype = input\ninput_shape = 1:1:16\n"
    "[fc1]\ntype = fully_connected\nunit = 32\nactivation = relu\n"
    "[out]\ntype = fully_connected\nunit = 4\nactivation = softmax\n";

/* The training plan's total with no budget: weights + adam's 2 moments +
 * the arena. */
static size_t mlp_total(nnt_mode mode) {
  nnt_err e = {0};
  int rc;
  nnt_model *m = load(mlp_ini, NULL, 0, &e, &rc);
  if (rc || (rc = nnt_model_compile(m, &e)) || (rc = nnt_model_plan(m, mode, &e)))
    fail_msg("rc %d: %s", rc, e.msg);
  size_t w = (16 * 32 + 32 + 32 * 4 + 4) * sizeof(float);
  assert_int_equal(m->weight_bytes, w);
  size_t total = w + (mode == NNT_MODE_TRAIN ? 2 * w : 0) + m->mgr[mode].arena_bytes;
  nnt_model_destroy(m);
  return total;
}

static void test_budget_parser(void **state) {
  (void)state;
  static const struct {
    const char *v;
    uint64_t want;
  } good[] = {{"1024", 1024},        {"4K", 4096},          {"3m", 3u << 20},
              {"2G", 2ull << 30},    {" 7 ", 7},            {"0", 0},
              {"16k", 16 << 10},     {"4294967296", 1ull << 32}};
  static const char *const bad[] = {"12Q",  "-1",  "99999999999G",         "",    "K",
                                    "1.5K", "1e6", "18446744073709551616", "5KB", "+3",
                                    "16 k"};
  nnt_model *m;
  nnt_err e = {0};
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  for (size_t i = 0; i < NNT_ARRAY_LEN(good); i++) {
    if (nnt_model_set_property(m, "memory_budget", good[i].v, &e))
      fail_msg("'%s': %s", good[i].v, e.msg);
    assert_int_equal(m->memory_budget, good[i].want);
  }
  assert_int_equal(nnt_model_set_property(m, "memory_budget", "1M", &e), NNT_OK);
  for (size_t i = 0; i < NNT_ARRAY_LEN(bad); i++) {
    int rc = nnt_model_set_property(m, "memory_budget", bad[i], &e);
    if (rc != NNT_ERR_INVAL)
      fail_msg("'%s': rc %d, budget %llu", bad[i], rc, (unsigned long long)m->memory_budget);
    tu_assert_contains(e.msg, "memory_budget");
    tu_assert_contains(e.msg, bad[i]);
    /* past 64 bits says so; the others say what a byte count is */
    tu_assert_contains(e.msg, strstr(bad[i], "99999") || strstr(bad[i], "18446")
                                  ? "more than"
                                  : "not a byte count");
    assert_int_equal(m->memory_budget, 1u << 20); /* unchanged */
  }
  nnt_model_destroy(m);
  /* from the INI: the file, the section and the key */
  int rc;
  const char *ov[] = {"memory_budget=12Q"};
  m = load(mlp_ini, ov, 1, &e, &rc);
  assert_int_equal(rc, NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "case.ini");
  tu_assert_contains(e.msg, "memory_budget");
  nnt_model_destroy(m);
}

static void test_budget_under_and_over(void **state) {
  (void)state;
  static const char *const plan_name[] = {"training plan", "inference plan", "evaluation plan"};
  for (int mode = NNT_MODE_TRAIN; mode < NNT_MODE__COUNT; mode++) {
    size_t total = mlp_total((nnt_mode)mode);
    char under[32], over[32];
    snprintf(under, sizeof under, "memory_budget=%zu", total);
    snprintf(over, sizeof over, "memory_budget=%zu", total - 1);
    nnt_err e = {0};
    int rc;
    /* exactly the total: plans, allocates, and (training) trains */
    const char *ov1[] = {under};
    nnt_model *m = load(mlp_ini, ov1, 1, &e, &rc);
    if (rc || (rc = nnt_model_compile(m, &e)) || (rc = nnt_model_initialize(m, &e)))
      fail_msg("mode %d at budget %zu: rc %d: %s", mode, total, rc, e.msg);
    if (mode == NNT_MODE_TRAIN) {
      /* the datasets' queues count too: the training plan leaves room for
       * them (recomputing cannot make this one smaller), and says so */
      assert_int_equal(nnt_model_plan(m, (nnt_mode)mode, &e), NNT_ERR_NOMEM);
      tu_assert_contains(e.msg, "the datasets' queues");
      tu_assert_contains(e.msg, "the minimum budget that fits is");
      size_t q = nnt_model_queue_reserve(m);
      assert_true(q > 0);
      m->memory_budget = total + q;
    }
    if ((rc = nnt_model_plan(m, (nnt_mode)mode, &e)))
      fail_msg("mode %d at budget %llu: rc %d: %s", mode,
               (unsigned long long)m->memory_budget, rc, e.msg);
    assert_non_null(m->mgr[mode].arena);
    if (mode == NNT_MODE_TRAIN) {
      if ((rc = nnt_model_train(m, NULL, NULL, &e)))
        fail_msg("train at budget %llu: %s", (unsigned long long)m->memory_budget, e.msg);
      size_t q = 0; /* the queues the run holds: what was reserved */
      for (int k = 0; k < 3; k++)
        q += nnt_dataset_queue_bytes(m->ds[k]);
      assert_int_equal(q, nnt_model_queue_reserve(m));
    }
    if (mode == NNT_MODE_EVAL) {
      /* so does evaluation, against its own plan */
      float loss, acc;
      assert_int_equal(nnt_model_evaluate(m, NNT_DS_TRAIN, &loss, &acc, &e), NNT_ERR_NOMEM);
      tu_assert_contains(e.msg, "the evaluation plan");
      tu_assert_contains(e.msg, "the datasets' queues");
      m->memory_budget = total + nnt_dataset_queue_bytes(m->ds[NNT_DS_TRAIN]);
      if ((rc = nnt_model_evaluate(m, NNT_DS_TRAIN, &loss, &acc, &e)))
        fail_msg("evaluate: %s", e.msg);
    }
    nnt_model_destroy(m);
    /* one byte less: refused before the arena exists, naming the parts */
    const char *ov2[] = {over};
    m = load(mlp_ini, ov2, 1, &e, &rc);
    assert_int_equal(rc, NNT_OK);
    assert_int_equal(nnt_model_compile(m, &e), NNT_OK);
    assert_int_equal(nnt_model_initialize(m, &e), NNT_OK);
    rc = nnt_model_plan(m, (nnt_mode)mode, &e);
    assert_int_equal(rc, NNT_ERR_NOMEM);
    char num[32];
    snprintf(num, sizeof num, "(%zu bytes)", total);
    tu_assert_contains(e.msg, "[Model] memory_budget");
    tu_assert_contains(e.msg, plan_name[mode]);
    tu_assert_contains(e.msg, num);
    snprintf(num, sizeof num, "(%zu bytes)", total - 1);
    tu_assert_contains(e.msg, num);
    tu_assert_contains(e.msg, "weights 2.6 KiB");
    tu_assert_contains(e.msg, mode == NNT_MODE_TRAIN ? "optimizer state 5.3 KiB"
                                                     : "optimizer state 0 B");
    tu_assert_contains(e.msg, "largest tensors: ");
    assert_false(m->mgr[mode].planned);
    assert_null(m->mgr[mode].arena);
    if (mode == NNT_MODE_TRAIN) {
      assert_int_equal(nnt_model_train(m, NULL, NULL, &e), NNT_ERR_NOMEM);
      tu_assert_contains(e.msg, "memory_budget");
    }
    nnt_model_destroy(m);
  }
}

/* A dataset's queue holds no more batches than an epoch of a sized source
 * has, whatever buffer_size says; an unsized one (a generator) with a huge
 * buffer_size is refused by the budget before its queue is allocated
 * (found by the C API fuzz target: 5.6 GB asked for at once). */
static int gen_one(float **in, float **label, bool *last, void *ud) {
  (void)ud;
  for (int i = 0; i < 16; i++)
    in[0][i] = 0.5f;
  for (int i = 0; i < 4; i++)
    label[0][i] = i == 0;
  *last = false;
  return 0;
}

static void test_queue_bounded(void **state) {
  (void)state;
  nnt_err e = {0};
  int rc;
  const char *ov[] = {"train_set.buffer_size=100000000"};
  nnt_model *m = load(mlp_ini, ov, 1, &e, &rc);
  if (rc || (rc = nnt_model_compile(m, &e)) || (rc = nnt_model_initialize(m, &e)) ||
      (rc = nnt_model_train(m, NULL, NULL, &e)))
    fail_msg("rc %d: %s", rc, e.msg);
  /* 8 samples in batches of 4: the epoch's 2 batches at most */
  assert_int_equal(nnt_dataset_queue_bytes(m->ds[NNT_DS_TRAIN]), 2 * 4 * (16 + 4) * 4);
  nnt_model_destroy(m);
  const char *ov2[] = {"memory_budget=256K"};
  m = load(mlp_ini, ov2, 1, &e, &rc);
  assert_int_equal(rc, NNT_OK);
  nnt_dataset *g;
  assert_int_equal(nnt_dataset_create_generator(gen_one, NULL, &g, &e), NNT_OK);
  assert_int_equal(nnt_dataset_set_property(g, "buffer_size", "100000000", &e), NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_TRAIN, g, &e), NNT_OK);
  assert_int_equal(nnt_model_compile(m, &e), NNT_OK);
  assert_int_equal(nnt_model_initialize(m, &e), NNT_OK);
  assert_int_equal(nnt_model_train(m, NULL, NULL, &e), NNT_ERR_NOMEM);
  tu_assert_contains(e.msg, "memory_budget");
  tu_assert_contains(e.msg, "buffer_size");
  nnt_model_destroy(m);
}

static void test_budget_weights_and_compile(void **state) {
  (void)state;
  nnt_err e = {0};
  int rc;
  /* weights alone over the budget: initialize allocates nothing */
  const char *ov[] = {"memory_budget=1K"};
  nnt_model *m = load(mlp_ini, ov, 1, &e, &rc);
  assert_int_equal(rc, NNT_OK);
  assert_int_equal(nnt_model_compile(m, &e), NNT_OK);
  assert_int_equal(nnt_model_initialize(m, &e), NNT_ERR_NOMEM);
  tu_assert_contains(e.msg, "memory_budget");
  tu_assert_contains(e.msg, "weights");
  tu_assert_contains(e.msg, "2704 bytes");
  tu_assert_contains(e.msg, "1024 bytes");
  assert_null(m->wpool);
  /* a compiled model's budget is fixed, as its other plan keys are */
  assert_int_equal(nnt_model_set_property(m, "memory_budget", "1G", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "memory_budget");
  tu_assert_contains(e.msg, "compiled");
  /* written back when the model is saved as an INI */
  char path[1024];
  snprintf(path, sizeof path, "%s/saved.ini", tu_dir);
  assert_int_equal(nnt_model_save_ini(m, path, NULL, &e), NNT_OK);
  nnt_model_destroy(m);
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  assert_int_equal(nnt_ini_load(m, path, NULL, 0, &e), NNT_OK);
  assert_int_equal(m->memory_budget, 1024);
  nnt_model_destroy(m);
}

/* The C API reaches the key through the model's properties. */
static void test_budget_capi(void **state) {
  (void)state;
  ml_train_model_h model;
  assert_int_equal(ml_train_model_construct_with_conf(tu_write_text("capi.ini", mlp_ini), &model),
                   ML_ERROR_NONE);
  assert_int_equal(ml_train_model_compile(model, "memory_budget=12Q", NULL),
                   ML_ERROR_INVALID_PARAMETER);
  assert_int_equal(ml_train_model_compile(model, "memory_budget=1K", NULL),
                   ML_ERROR_OUT_OF_MEMORY);
  assert_int_equal(ml_train_model_destroy(model), ML_ERROR_NONE);
  char budget[64];
  snprintf(budget, sizeof budget, "memory_budget=%zu", mlp_total(NNT_MODE_TRAIN) - 1);
  assert_int_equal(ml_train_model_construct_with_conf(tu_write_text("capi.ini", mlp_ini), &model),
                   ML_ERROR_NONE);
  assert_int_equal(ml_train_model_compile(model, budget, NULL), ML_ERROR_NONE);
  ml_train_ext_memory_report_s r;
  assert_int_equal(ml_train_ext_model_get_memory_report(model, ML_TRAIN_EXT_MODE_INFER, &r),
                   ML_ERROR_NONE);
  assert_int_equal(ml_train_ext_model_get_memory_report(model, ML_TRAIN_EXT_MODE_TRAIN, &r),
                   ML_ERROR_OUT_OF_MEMORY);
  assert_int_equal(ml_train_model_run(model, NULL), ML_ERROR_OUT_OF_MEMORY);
  assert_int_equal(ml_train_model_destroy(model), ML_ERROR_NONE);
}


/* `nntrainer plan` shows the budget; an override sets it; over it fails. */
static void test_budget_cli(void **state) {
  (void)state;
  char out[65536];
  tu_write_text("mlp.ini", mlp_ini);
  assert_int_equal(tu_run_cli("plan mlp.ini", out, sizeof out), 0);
  tu_assert_contains(out, "budget       none");
  assert_int_equal(tu_run_cli("plan mlp.ini memory_budget=1M", out, sizeof out), 0);
  tu_assert_contains(out, "budget            1048576 bytes");
  assert_int_equal(tu_run_cli("plan mlp.ini --json memory_budget=1M", out, sizeof out), 0);
  tu_assert_contains(out, "\"memory_budget_bytes\":1048576,");
  assert_int_equal(tu_run_cli("plan mlp.ini --json", out, sizeof out), 0);
  tu_assert_contains(out, "\"memory_budget_bytes\":null,");
  assert_int_equal(tu_run_cli("plan mlp.ini memory_budget=4K", out, sizeof out), 1);
  tu_assert_contains(out, "memory_budget");
  tu_assert_contains(out, "(4096 bytes)");
  assert_int_equal(tu_run_cli("train mlp.ini memory_budget=12Q", out, sizeof out), 1);
  tu_assert_contains(out, "memory_budget");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_refused, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_largest_that_fit, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_one_by_one_trains, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test(test_max2x2_path_in_64_bits),
      cmocka_unit_test_setup_teardown(test_allocation_failures_name_bytes, tu_dir_setup,
                                      tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_budget_parser, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_budget_under_and_over, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_budget_weights_and_compile, tu_dir_setup,
                                      tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_budget_capi, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_budget_cli, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_queue_bounded, tu_dir_setup, tu_dir_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
