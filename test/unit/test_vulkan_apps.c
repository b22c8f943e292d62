/* Every example of Applications/ trains on engine=gpu (the Vulkan backend,
 * docs/gpu.md; lavapipe in CI) like on the CPU: a few steps of each INI
 * model (FashionMNIST/cnn.ini, ResNet/resnet18.ini shrunk to fit; mlp.ini
 * and cnn_bn.ini are test_vulkan's) on synthetic data, and the C API
 * programs of Applications/CAPI run twice, their engine selected through
 * ml_train_model_compile's engine property (--engine), on a few
 * Fashion-MNIST samples, and Applications/CharLM's charlm on a few windows
 * of text: losses and weights within the tolerances that docs/gpu.md
 * states. A build without Vulkan has nothing to check here
 * (test_vulkan checks that engine=gpu says so). */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

#ifndef NNT_HAVE_VULKAN

int main(void) { return tu_main_without_vulkan(); }

#else

#define STEPS_MAX 16

/* max |a - b| / max(1, max |a|) */
static double norm_err(const float *a, const float *b, size_t n) {
  double worst = 0, scale = 1;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - b[i]);
    worst = d > worst || isnan(d) ? d : worst;
    scale = fabs(a[i]) > scale ? fabs(a[i]) : scale;
  }
  return worst / scale;
}

/* ---- the INI examples ----------------------------------------------------- */

typedef struct losses {
  unsigned n;
  float v[STEPS_MAX];
} losses;

static void on_step(const nnt_progress *p, void *ud) {
  losses *l = ud;
  if (!p->epoch_done && l->n < STEPS_MAX)
    l->v[l->n++] = p->batch_loss;
}

/* ini with its own [Train_set] replaced by `samples` synthetic samples,
 * one epoch, nothing saved, overrides ov, on engine. */
static nnt_model *app_model(const char *ini, const char *engine, const char *const *ov,
                            size_t nov, unsigned samples) {
  const char *all[16] = {"epochs=1", "save_path=", engine};
  size_t n = 3;
  for (size_t i = 0; i < nov && n < NNT_ARRAY_LEN(all); i++)
    all[n++] = ov[i];
  nnt_model *m = tu_model_for_ini(ini);
  nnt_err e = {0};
  if (nnt_ini_load(m, ini, all, n, &e))
    fail_msg("%s: %s", ini, e.msg);
  for (int mode = 0; mode < 3; mode++) {
    nnt_dataset *ds = NULL;
    if (mode == NNT_DS_TRAIN)
      assert_int_equal(nnt_dataset_create_synthetic(samples, 77, &ds, &e), NNT_OK);
    assert_int_equal(nnt_model_set_dataset(m, mode, ds, &e), NNT_OK);
  }
  if (nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("%s on %s: %s", ini, engine, e.msg);
  return m;
}

/* steps batches of the example on the CPU and on the GPU: every step's
 * loss and the final weights within tol (normalised error). */
static void app_both(const char *name, const char *const *ov, size_t nov, unsigned steps,
                     double tol) {
  char ini[1024];
  snprintf(ini, sizeof ini, "%s/Applications/%s", NNT_SOURCE_DIR, name);
  nnt_err e = {0};
  nnt_model *c = app_model(ini, "engine=cpu", ov, nov, 1);
  unsigned samples = steps * nnt_model_batch_size(c);
  tu_model_destroy_checked(c);
  c = app_model(ini, "engine=cpu", ov, nov, samples);
  nnt_model *g = app_model(ini, "engine=gpu", ov, nov, samples);
  assert_string_equal(g->be->name, "vulkan");
  losses lc = {0}, lg = {0};
  if (nnt_model_train(c, on_step, &lc, &e))
    fail_msg("%s on the cpu: %s", name, e.msg);
  if (nnt_model_train(g, on_step, &lg, &e))
    fail_msg("%s on the gpu: %s", name, e.msg);
  assert_int_equal(lc.n, steps);
  assert_int_equal(lg.n, steps);
  float *wc = tu_weights_of(c), *wg = tu_weights_of(g);
  double lerr = norm_err(lc.v, lg.v, lc.n), werr = norm_err(wc, wg, c->wpool_floats);
  print_message("%s, %u steps of %u on engine=gpu: losses within %.3g (last %.7g on the cpu, "
                "%.7g on the gpu), weights within %.3g (normalised)\n",
                name, steps, nnt_model_batch_size(c), lerr, lc.v[lc.n - 1], lg.v[lg.n - 1],
                werr);
  if (!(lerr <= tol && werr <= tol))
    fail_msg("%s: gpu against cpu: losses %.3g, weights %.3g > %g", name, lerr, werr, tol);
  free(wc), free(wg);
  tu_model_destroy_checked(c);
  tu_model_destroy_checked(g);
}

/* Its Adam (lr 0.001), as the file says: the tolerance of Adam (docs/gpu.md). */
static void test_fashion_mnist_cnn(void **state) {
  (void)state;
  const char *ov[] = {"batch_size=4"};
  app_both("FashionMNIST/cnn.ini", ov, NNT_ARRAY_LEN(ov), 3, 2e-3);
}

/* ResNet-18 as the file says (SGD, lr 0.01) but 2 batches of 4 images of
 * 3:8:8: its training arena at batch 32 and 3:32:32 (161 MB) is more than
 * one buffer of lavapipe may hold (128 MiB), and its 11 million weights
 * make a step take seconds there. The four stride-2 stages take 8x8 to
 * 1x1, so the last batch normalizations see 4 values a channel: the model
 * is ill-conditioned (a 1e-6 relative nudge of the initial weights moves
 * the CPU's own weights 2.4e-3 after these 2 steps, 5.6e-6 after one), and
 * the tolerance is Adam's 2e-3 (docs/gpu.md). */
static void test_resnet18(void **state) {
  (void)state;
  const char *ov[] = {"batch_size=4", "input.input_shape=3:8:8"};
  app_both("ResNet/resnet18.ini", ov, NNT_ARRAY_LEN(ov), 2, 2e-3);
}

/* ---- the C API programs --------------------------------------------------- */

#ifdef NNT_CAPI_DIR

/* Run a program of Applications/CAPI in the test folder with args and env;
 * its output in out. */
static int run_prog(const char *env, const char *prog, const char *args, char *out, size_t n) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "cd %s && env ASAN_OPTIONS=detect_leaks=0 %s %s/%s %s 2>&1", tu_dir,
           env, NNT_CAPI_DIR, prog, args);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t got = fread(out, 1, n - 1, p);
  out[got] = '\0';
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A weight file as floats (its size in *n). */
static float *read_floats(const char *name, size_t *n) {
  FILE *f = fopen(tu_path_in(name), "rb");
  if (!f)
    fail_msg("no %s", name);
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  float *v = malloc(sz > 0 ? (size_t)sz : 1);
  assert_non_null(v);
  assert_int_equal(fread(v, 1, (size_t)sz, f), (size_t)sz);
  fclose(f);
  *n = (size_t)sz / sizeof *v;
  return v;
}

/* prog with args (where %s is the engine's name: its files differ by it)
 * on the CPU and on the GPU: the files listed (cpu_<name> and gpu_<name>)
 * within tol (each float's error over max(1, |float|)), and every "train
 * loss" the program prints within its printed precision (4 decimals). */
static void prog_both(const char *prog, const char *args, const char *const *files, size_t nf,
                      double tol) {
  static char out[2][1 << 16];
  const char *eng[2] = {"cpu", "gpu"};
  for (int k = 0; k < 2; k++) {
    char a[1024];
    snprintf(a, sizeof a, args, eng[k], eng[k], eng[k]);
    int rc = run_prog("", prog, a, out[k], sizeof out[k]);
    if (rc)
      fail_msg("%s %s: exit %d: %s", prog, a, rc, out[k]);
  }
  for (size_t i = 0; i < nf; i++) {
    char nc[256], ng[256];
    snprintf(nc, sizeof nc, "cpu_%s", files[i]);
    snprintf(ng, sizeof ng, "gpu_%s", files[i]);
    size_t n1, n2;
    float *c = read_floats(nc, &n1), *g = read_floats(ng, &n2);
    assert_int_equal(n1, n2);
    /* element by element: the files end with the optimizer's state and
     * counters, whose scales differ from the weights' */
    double err = 0;
    for (size_t j = 0; j < n1; j++) {
      double d = fabs((double)c[j] - g[j]) / fmax(1, fabs(c[j]));
      err = d > err || isnan(d) ? d : err;
    }
    print_message("%s --engine gpu: %s within %.3g of the cpu's (%zu floats)\n", prog, files[i],
                  err, n1);
    if (!(err <= tol))
      fail_msg("%s: %s: gpu against cpu %.3g > %g", prog, files[i], err, tol);
    free(c), free(g);
  }
  const char *pc = out[0], *pg = out[1];
  unsigned losses = 0;
  while ((pc = strstr(pc, "train loss ")) && (pg = strstr(pg, "train loss "))) {
    pc += 11, pg += 11;
    double lc = strtod(pc, NULL), lg = strtod(pg, NULL);
    if (fabs(lc - lg) > 1.5e-4)
      fail_msg("%s: train loss %.4f on the cpu, %.4f on the gpu", prog, lc, lg);
    losses++;
  }
  print_message("%s: %u train losses printed alike\n", prog, losses);
}

/* The engine does reach the program's model: a device that matches
 * nothing is refused by the GPU's device choice. */
static void test_capi_engine_reaches_vulkan(void **state) {
  (void)state;
  char out[1 << 14];
  int rc = run_prog("NNTRAINER_VULKAN_DEVICE=no-such-device", "capi_mlp",
                    "--train-samples 64 --test-samples 64 --epochs 1 --engine gpu", out,
                    sizeof out);
  assert_int_not_equal(rc, 0);
  tu_assert_contains(out, "no-such-device");
  rc = run_prog("", "capi_mlp", "--train-samples 64 --test-samples 64 --epochs 1 --engine tpu",
                out, sizeof out);
  assert_int_not_equal(rc, 0);
  tu_assert_contains(out, "tpu");
}

/* mlp_layers.c: 2 steps of 64 with its Adam. */
static void test_capi_mlp(void **state) {
  (void)state;
  const char *files[] = {"mlp.bin"};
  prog_both("capi_mlp", "--train-samples 128 --test-samples 64 --epochs 1 --engine %s "
                        "--save %s_mlp.bin", files, 1, 2e-3);
}

/* mlp_ini.c on mlp.ini with its datasets replaced by 128 synthetic
 * samples (the file's Fashion-MNIST sets take minutes on lavapipe). */
static void test_capi_mlp_ini(void **state) {
  (void)state;
  FILE *f = fopen(NNT_SOURCE_DIR "/Applications/FashionMNIST/mlp.ini", "r");
  assert_non_null(f);
  static char ini[1 << 14];
  size_t len = 0;
  char line[512];
  int skip = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '[')
      skip = strstr(line, "_set]") != NULL;
    if (!skip && len + strlen(line) < sizeof ini - 64)
      len += (size_t)snprintf(ini + len, sizeof ini - len, "%s", line);
  }
  fclose(f);
  snprintf(ini + len, sizeof ini - len, "\n[train_set]\ntype = synthetic\nsamples = 128\n");
  tu_write_text("mlp_small.ini", ini);
  const char *files[] = {"mlp_ini.bin"};
  prog_both("capi_mlp_ini", "--epochs 1 --engine %s --save %s_mlp_ini.bin mlp_small.ini", files,
            1, 2e-3);
}

/* fine_tune.c: the base model (2 steps of 64), then the frozen features
 * under a new head (2 steps): both weight files. */
static void test_capi_fine_tune(void **state) {
  (void)state;
  const char *files[] = {"base.bin", "head.bin"};
  prog_both("capi_fine_tune", "--train-samples 128 --test-samples 64 --base-epochs 1 --epochs 1 "
                              "--engine %s --base-out %s_base.bin --out %s_head.bin",
            files, 2, 2e-3);
}

/* Applications/CharLM's charlm on the small LSTM and transformer models of
 * the test suite (embedding, lstm, positional_encoding,
 * multi_head_attention, layer_normalization): 4 steps of 16 windows of
 * the fortunes text, the saved weights and Adam's state. */
static void test_charlm(void **state) {
  (void)state;
  const char *files[] = {"charlm.bin"};
  prog_both("../CharLM/charlm", "--samples 64 --held-windows 4 --generate 0 --engine %s "
                                "--save %s_charlm.bin " NNT_SOURCE_DIR "/test/charlm_lstm_tiny.ini",
            files, 1, 2e-3);
  prog_both("../CharLM/charlm", "--samples 64 --held-windows 4 --generate 0 --engine %s "
                                "--save %s_charlm.bin "
                                NNT_SOURCE_DIR "/test/charlm_transformer_tiny.ini",
            files, 1, 2e-3);
}

#endif

int main(void) {
  setenv("NNTRAINER_VULKAN_VALIDATION", "1", 1);
  tu_keep_vulkan_driver();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fashion_mnist_cnn),
      cmocka_unit_test(test_resnet18),
#ifdef NNT_CAPI_DIR
      cmocka_unit_test_setup_teardown(test_capi_engine_reaches_vulkan, tu_dir_setup,
                                      tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_capi_mlp, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_capi_mlp_ini, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_capi_fine_tune, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_charlm, tu_dir_setup, tu_dir_teardown),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
