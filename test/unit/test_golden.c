/* Layers and whole training runs against golden data from PyTorch
 * (test/golden/gen_golden.py). */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

#define TOL 1e-5

static float *golden(const char *name, size_t *n) {
  return tu_read_floats(tu_data_path("golden/data/%s.bin", name), n);
}

/* Run one layer: forward, then backward with d_out = r (or the loss). */
typedef struct run1 {
  nnt_layer *l;
  nnt_finalize_ctx fc;
  nnt_tensor in, out, din, dout, label, w[4], gw[4], scratch[NNT_MAX_SCRATCH];
  nnt_run_ctx c;
  nnt_tensor losst; /* c.loss: one float, lossv */
  float lossv;
} run1;

static void run_layer(run1 *r, const char *type, const char *const *props, nnt_dim in,
                      const float *x, const float *const *weights, const float *dout,
                      const float *label) {
  nnt_err e = {0};
  memset(r, 0, sizeof *r);
  assert_int_equal(nnt_layer_create(type, &r->l, &e), NNT_OK);
  for (size_t i = 0; props && props[i]; i += 2)
    assert_int_equal(nnt_layer_set_property(r->l, props[i], props[i + 1], &e), NNT_OK);
  r->fc.n_in = r->fc.n_out = 1;
  r->fc.in_dim[0] = in;
  r->fc.batch = in.b;
  assert_int_equal(r->l->ops->finalize(r->l, &r->fc, &e), NNT_OK);
  size_t ni = nnt_dim_len(in), no = nnt_dim_len(r->fc.out_dim[0]);
  r->in = (nnt_tensor){.dim = in, .data = malloc(ni * 4)};
  memcpy(r->in.data, x, ni * 4);
  r->din = (nnt_tensor){.dim = in, .data = calloc(ni, 4)};
  r->out = (nnt_tensor){.dim = r->fc.out_dim[0], .data = calloc(no, 4)};
  r->dout = (nnt_tensor){.dim = r->fc.out_dim[0], .data = calloc(no, 4)};
  if (dout)
    memcpy(r->dout.data, dout, no * 4);
  if (label) {
    r->label = (nnt_tensor){.dim = r->fc.out_dim[0], .data = malloc(no * 4)};
    memcpy(r->label.data, label, no * 4);
  }
  for (unsigned w = 0; w < r->fc.n_w; w++) {
    size_t n = nnt_dim_len(r->fc.w[w].dim);
    r->w[w] = (nnt_tensor){.dim = r->fc.w[w].dim, .data = malloc(n * 4)};
    memcpy(r->w[w].data, weights[w], n * 4);
    r->gw[w] = (nnt_tensor){.dim = r->fc.w[w].dim, .data = calloc(n, 4)};
  }
  for (unsigned s = 0; s < r->fc.n_scratch; s++)
    r->scratch[s] = (nnt_tensor){.dim = r->fc.scratch_dim[s],
                                 .data = calloc(nnt_dim_len(r->fc.scratch_dim[s]), 4)};
  r->c = (nnt_run_ctx){.k = nnt_kernels_cpu(), .n_in = 1, .n_out = 1, .n_w = r->fc.n_w,
                       .n_scratch = r->fc.n_scratch, .scratch = r->scratch,
                       .in = &r->in, .out = &r->out, .d_out = &r->dout, .d_in = &r->din,
                       .w = r->w, .gw = r->gw, .label = label ? &r->label : NULL,
                       .training = 1, .seed = 1, .stream = 0};
  r->losst = (nnt_tensor){.dim = nnt_dim_make(1, 1, 1, 1), .data = &r->lossv};
  r->c.loss = label ? &r->losst : NULL;
  assert_int_equal(r->l->ops->forward(r->l, &r->c), NNT_OK);
  if (r->l->ops->calc_gradient)
    assert_int_equal(r->l->ops->calc_gradient(r->l, &r->c), NNT_OK);
  assert_int_equal(r->l->ops->calc_derivative(r->l, &r->c), NNT_OK);
}

static void free_run(run1 *r) {
  free(r->in.data), free(r->din.data), free(r->out.data), free(r->dout.data),
      free(r->label.data);
  for (unsigned w = 0; w < r->fc.n_w; w++)
    free(r->w[w].data), free(r->gw[w].data);
  for (unsigned s = 0; s < r->fc.n_scratch; s++)
    free(r->scratch[s].data);
  nnt_layer_destroy(r->l);
}

static void fc_case(const char *name, nnt_dim in, unsigned out) {
  size_t n;
  float *g = golden(name, &n);
  size_t ni = nnt_dim_len(in), k = in.w, rows = ni / k, no = rows * out;
  const float *x = g, *w = x + ni, *b = w + k * out, *r = b + out, *y = r + no, *dx = y + no,
              *dw = dx + ni, *db = dw + k * out;
  assert_int_equal(n, (size_t)(db + out - g));
  char unit[16];
  snprintf(unit, sizeof unit, "%u", out);
  const char *props[] = {"unit", unit, NULL};
  const float *weights[] = {w, b};
  run1 run;
  run_layer(&run, "fully_connected", props, in, x, weights, r, NULL);
  tu_expect_close(run.out.data, y, no, TOL, "fc out");
  tu_expect_close(run.din.data, dx, ni, TOL, "fc dx");
  tu_expect_close(run.gw[0].data, dw, k * out, TOL, "fc dW");
  tu_expect_close(run.gw[1].data, db, out, TOL, "fc db");
  free_run(&run);
  free(g);
}

static void test_fully_connected(void **state) {
  (void)state;
  fc_case("fc_2d", nnt_dim_make(3, 1, 1, 7), 5);
  fc_case("fc_4d", nnt_dim_make(2, 2, 3, 4), 5);
}

static void test_activations(void **state) {
  (void)state;
  const char *acts[] = {"relu", "leaky_relu", "sigmoid", "tanh", "softmax", "swish",
                        "gelu", "elu", "selu", "softplus", "mish", "none"};
  for (size_t i = 0; i < NNT_ARRAY_LEN(acts); i++) {
    char name[64];
    snprintf(name, sizeof name, "act_%s", acts[i]);
    size_t n;
    float *g = golden(name, &n);
    const size_t len = 30;
    assert_int_equal(n, 4 * len);
    const char *props[] = {"activation", acts[i], NULL};
    run1 run;
    run_layer(&run, "activation", props, nnt_dim_make(3, 1, 1, 10), g, NULL, g + len, NULL);
    tu_expect_close(run.out.data, g + 2 * len, len, TOL, "%s out", acts[i]);
    tu_expect_close(run.din.data, g + 3 * len, len, TOL, "%s dx", acts[i]);
    free_run(&run);
    free(g);
  }
}

static void test_losses(void **state) {
  (void)state;
  const char *losses[] = {"cross_softmax", "cross_sigmoid", "mse"};
  for (size_t i = 0; i < NNT_ARRAY_LEN(losses); i++) {
    char name[64];
    snprintf(name, sizeof name, "loss_%s", losses[i]);
    size_t n;
    float *g = golden(name, &n);
    const size_t len = 20;
    assert_int_equal(n, 3 * len + 1);
    run1 run;
    run_layer(&run, losses[i], NULL, nnt_dim_make(4, 1, 1, 5), g, NULL, NULL, g + len);
    if (fabs(run.lossv - g[2 * len]) > TOL * fmax(1, fabs(g[2 * len])))
      fail_msg("%s loss %.7f, PyTorch %.7f", losses[i], run.lossv, g[2 * len]);
    tu_expect_close(run.din.data, g + 2 * len + 1, len, TOL, "%s", losses[i]);
    free_run(&run);
    free(g);
  }
}

static void conv_case(const char *name, nnt_dim in, unsigned filters, const char *k,
                      const char *stride, const char *pad, const char *dil) {
  size_t n;
  float *g = golden(name, &n);
  char f[16];
  snprintf(f, sizeof f, "%u", filters);
  const char *props[] = {"filters", f, "kernel_size", k, "stride", stride, "padding", pad,
                         "dilation", dil, NULL};
  size_t ni = nnt_dim_len(in);
  run1 probe;
  /* shapes come from finalize: run once with zero weights to learn them */
  nnt_layer *l;
  nnt_err e = {0};
  assert_int_equal(nnt_layer_create("conv2d", &l, &e), NNT_OK);
  for (size_t i = 0; props[i]; i += 2)
    assert_int_equal(nnt_layer_set_property(l, props[i], props[i + 1], &e), NNT_OK);
  nnt_finalize_ctx fc = {0};
  fc.n_in = 1, fc.n_out = 1, fc.in_dim[0] = in, fc.batch = in.b;
  assert_int_equal(l->ops->finalize(l, &fc, &e), NNT_OK);
  nnt_layer_destroy(l);
  size_t nw = nnt_dim_len(fc.w[0].dim), no = nnt_dim_len(fc.out_dim[0]);
  const float *x = g, *w = x + ni, *b = w + nw, *r = b + filters, *y = r + no, *dx = y + no,
              *dw = dx + ni, *db = dw + nw;
  assert_int_equal(n, (size_t)(db + filters - g));
  const float *weights[] = {w, b};
  run_layer(&probe, "conv2d", props, in, x, weights, r, NULL);
  tu_expect_close(probe.out.data, y, no, TOL, "%s", name);
  tu_expect_close(probe.din.data, dx, ni, TOL, "%s", name);
  tu_expect_close(probe.gw[0].data, dw, nw, TOL, "%s", name);
  tu_expect_close(probe.gw[1].data, db, filters, TOL, "%s", name);
  free_run(&probe);
  free(g);
}

static void test_conv2d(void **state) {
  (void)state;
  conv_case("conv_basic", nnt_dim_make(2, 2, 5, 7), 3, "3,3", "1", "valid", "1");
  conv_case("conv_stride2_same", nnt_dim_make(2, 2, 5, 6), 2, "3,3", "2", "1", "1");
  conv_case("conv_dilated", nnt_dim_make(1, 3, 6, 5), 2, "2,3", "1", "1,0,2,1", "2");
  conv_case("conv_pointwise", nnt_dim_make(2, 4, 3, 3), 5, "1,1", "1", "valid", "1");
}

static void pool_case(const char *name, nnt_dim in, const char *const *props) {
  size_t n;
  float *g = golden(name, &n);
  size_t ni = nnt_dim_len(in), no = (n - 2 * ni) / 2;
  run1 run;
  run_layer(&run, "pooling2d", props, in, g, NULL, g + ni, NULL);
  assert_int_equal(nnt_tensor_len(&run.out), no);
  tu_expect_close(run.out.data, g + ni + no, no, TOL, "%s", name);
  tu_expect_close(run.din.data, g + ni + 2 * no, ni, TOL, "%s", name);
  free_run(&run);
  free(g);
}

static void test_pooling2d(void **state) {
  (void)state;
  const char *max[] = {"pooling", "max", "pool_size", "2", "stride", "2", NULL};
  pool_case("pool_max", nnt_dim_make(2, 2, 4, 6), max);
  const char *maxp[] = {"pooling", "max", "pool_size", "3", "stride", "2", "padding", "1", NULL};
  pool_case("pool_max_pad", nnt_dim_make(1, 2, 5, 5), maxp);
  const char *avg[] = {"pooling", "average", "pool_size", "2", "stride", "2", NULL};
  pool_case("pool_average", nnt_dim_make(2, 2, 4, 6), avg);
  const char *gm[] = {"pooling", "global_max", NULL};
  pool_case("pool_global_max", nnt_dim_make(2, 3, 3, 4), gm);
  const char *ga[] = {"pooling", "global_average", NULL};
  pool_case("pool_global_average", nnt_dim_make(2, 3, 3, 4), ga);
}

static void test_batch_normalization(void **state) {
  (void)state;
  size_t n;
  float *g = golden("bn_conv", &n);
  nnt_dim in = nnt_dim_make(4, 3, 2, 3);
  size_t ni = nnt_dim_len(in);
  const float *x = g, *gamma = x + ni, *beta = gamma + 3, *r = beta + 3, *y = r + ni,
              *dx = y + ni, *dg = dx + ni, *dbt = dg + 3;
  assert_int_equal(n, (size_t)(dbt + 3 - g));
  float mm[3] = {0, 0, 0}, mv[3] = {1, 1, 1};
  const float *weights[] = {mm, mv, gamma, beta};
  run1 run;
  run_layer(&run, "batch_normalization", NULL, in, x, weights, r, NULL);
  tu_expect_close(run.out.data, y, ni, TOL, "bn out");
  tu_expect_close(run.din.data, dx, ni, 1e-4, "bn dx");
  tu_expect_close(run.gw[2].data, dg, 3, TOL, "bn dgamma");
  tu_expect_close(run.gw[3].data, dbt, 3, TOL, "bn dbeta");
  free_run(&run);
  free(g);
}

/* Whole-model training against PyTorch, step by step. */
typedef struct feed {
  const float *data; /* 5 batches of (x [4, 8], label [4, 4]) */
  size_t sample;
} feed;

/* 20 samples, the last given with last set, as NNTrainer's generators do */
static int feed_cb(float **in, float **label, bool *last, void *ud) {
  feed *f = ud;
  if (f->sample == 20)
    return -1; /* one epoch only */
  size_t b = f->sample / 4, s = f->sample % 4;
  const float *batch = f->data + b * (32 + 16);
  memcpy(in[0], batch + s * 8, 8 * sizeof(float));
  memcpy(label[0], batch + 32 + s * 4, 4 * sizeof(float));
  *last = ++f->sample == 20;
  return 0;
}

/* The generic feed: batches of (x [4, in], label [4, lab]) in golden data. */
typedef struct feed2 {
  const float *data;
  size_t in, lab, sample, samples;
} feed2;

static int feed2_cb(float **in, float **label, bool *last, void *ud) {
  feed2 *f = ud;
  if (f->sample == f->samples)
    return -1; /* one epoch only */
  size_t b = f->sample / 4, s = f->sample % 4;
  const float *batch = f->data + b * 4 * (f->in + f->lab);
  memcpy(in[0], batch + s * f->in, f->in * sizeof(float));
  memcpy(label[0], batch + 4 * f->in + s * f->lab, f->lab * sizeof(float));
  *last = ++f->sample == f->samples;
  return 0;
}

static void resnet_case(const char *opt) {
  char name[64], ini[64];
  snprintf(name, sizeof name, "resnet_%s", opt);
  snprintf(ini, sizeof ini, "golden/data/resnet_%s.ini", opt);
  size_t n;
  float *g = golden(name, &n);
  nnt_model *m;
  nnt_err e = {0};
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  if (nnt_ini_load(m, tu_data_path("%s", ini), NULL, 0, &e))
    fail_msg("%s", e.msg);
  const size_t in = 2 * 6 * 6, lab = 3, steps = 4;
  feed2 f = {NULL, in, lab, 0, steps * 4};
  nnt_dataset *ds;
  assert_int_equal(nnt_dataset_create_generator(feed2_cb, &f, &ds, &e), NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, &e), NNT_OK);
  if (nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("%s", e.msg);
  size_t wfloats = m->wpool_floats;
  assert_int_equal(n, wfloats + steps * 4 * (in + lab) + steps * (1 + wfloats));
  memcpy(m->wpool, g, wfloats * sizeof(float));
  f.data = g + wfloats;
  tu_watch w = {m, g + wfloats + steps * 4 * (in + lab), wfloats, 0, 0, 0};
  if (nnt_model_train(m, tu_watch_cb, &w, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(w.step, steps);
  print_message("%s: worst relative error over %zu steps: loss %.2g, weights %.2g\n", name,
                steps, w.worst_loss, w.worst_w);
  assert_true(w.worst_loss < 1e-4);
  assert_true(w.worst_w < 1e-4);
  nnt_model_destroy(m);
  free(g);
}

static void test_resnet_sgd(void **state) {
  (void)state;
  resnet_case("sgd");
}

static void test_resnet_adam(void **state) {
  (void)state;
  resnet_case("adam");
}

static void train_case(const char *name, const char *opt, const char *lr, const char *loss) {
  size_t n;
  float *g = golden(name, &n);
  const size_t wfloats = 8 * 16 + 16 + 16 * 12 + 12 + 12 * 4 + 4;
  assert_int_equal(n, wfloats + 5 * 48 + 5 * (1 + wfloats));
  nnt_model *m;
  nnt_err e = {0};
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  const char *mp[] = {"batch_size", "4", "epochs", "1", "loss", loss, NULL};
  for (size_t i = 0; mp[i]; i += 2)
    assert_int_equal(nnt_model_set_property(m, mp[i], mp[i + 1], &e), NNT_OK);
  const char *last_act = !strcmp(loss, "cross") ? "softmax" : "sigmoid";
  const char *layers[][8] = {
      {"input", "in", "input_shape", "1:1:8", NULL},
      {"fully_connected", "fc1", "unit", "16", "activation", "relu", NULL},
      {"fully_connected", "fc2", "unit", "12", "activation", "sigmoid", NULL},
      {"fully_connected", "fc3", "unit", "4", "activation", last_act, NULL},
  };
  for (size_t i = 0; i < 4; i++)
    tu_add_layer(m, layers[i], NNT_ARRAY_LEN(layers[i]), &e);
  nnt_optimizer *o;
  assert_int_equal(nnt_optimizer_create(opt, &o, &e), NNT_OK);
  assert_int_equal(nnt_optimizer_set_property(o, "learning_rate", lr, &e), NNT_OK);
  assert_int_equal(nnt_model_set_optimizer(m, o, &e), NNT_OK);
  feed f = {g + wfloats, 0};
  nnt_dataset *ds;
  assert_int_equal(nnt_dataset_create_generator(feed_cb, &f, &ds, &e), NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, &e), NNT_OK);
  if (nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(m->wpool_floats, wfloats);
  /* the initial weights go through the weight-file loader */
  char *dir = tu_mkdtemp(), path[512];
  snprintf(path, sizeof path, "%s/init.bin", dir);
  FILE *wf = fopen(path, "wb");
  assert_int_equal(fwrite(g, sizeof(float), wfloats, wf), wfloats);
  fclose(wf);
  assert_int_equal(nnt_model_load_weights(m, path, &e), NNT_OK);
  tu_watch w = {m, g + wfloats + 5 * 48, wfloats, 0, 0, 0};
  if (nnt_model_train(m, tu_watch_cb, &w, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(w.step, 5);
  print_message("%s: worst relative error over 5 steps: loss %.2g, weights %.2g\n", name,
                w.worst_loss, w.worst_w);
  assert_true(w.worst_loss < 1e-5);
  assert_true(w.worst_w < 1e-5);
  nnt_model_destroy(m);
  tu_rmdir(dir);
  free(dir);
  free(g);
}

/* The cases of test/golden/gen_training.py: an INI with a raw-file dataset,
 * initial weights, and the loss and weights after every step. */
static void ini_case(const char *name) {
  nnt_model *m = tu_golden_model(name, NULL, 0);
  tu_golden_train(m, name);
  nnt_model_destroy(m);
}

static void test_ini_cases(void **state) {
  (void)state;
  const char *cases[] = {"sgd_cross", "adam_cross", "sgd_mse", "adamw_cross"};
  for (size_t i = 0; i < NNT_ARRAY_LEN(cases); i++)
    ini_case(cases[i]);
}

static void test_mlp_sgd(void **state) {
  (void)state;
  train_case("train_sgd_cross", "sgd", "0.1", "cross");
}

static void test_mlp_adam(void **state) {
  (void)state;
  train_case("train_adam_cross", "adam", "0.01", "cross");
}

static void test_mlp_mse(void **state) {
  (void)state;
  train_case("train_sgd_mse", "sgd", "0.5", "mse");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fully_connected), cmocka_unit_test(test_activations),
      cmocka_unit_test(test_losses),          cmocka_unit_test(test_mlp_sgd),
      cmocka_unit_test(test_mlp_adam),        cmocka_unit_test(test_mlp_mse),
      cmocka_unit_test(test_conv2d),          cmocka_unit_test(test_pooling2d),
      cmocka_unit_test(test_batch_normalization),
      cmocka_unit_test(test_resnet_sgd),      cmocka_unit_test(test_resnet_adam),
      cmocka_unit_test(test_ini_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
