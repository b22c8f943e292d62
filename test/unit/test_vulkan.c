/* The Vulkan backend (docs/gpu.md), on whatever device the machine has
 * (lavapipe, Mesa's CPU Vulkan device, in CI), with the validation layer
 * on: a missing loader and a device name that matches nothing are refused
 * with their reason; buffers have opaque addresses, round-trip through
 * set/get and fill through memset; gemm in all four transpose forms
 * matches the CPU's; the MLP of Applications/FashionMNIST/mlp.ini trains
 * on engine=gpu like on the CPU within a stated tolerance, and its weight
 * files load on either side; so does the CNN of
 * Applications/FashionMNIST/cnn_bn.ini (convolutions, batch normalization,
 * pooling, dropout); two GPU models train at once in two threads, each on
 * its own instance, bitwise like alone; the dropout mask is the CPU's bit for bit; the CLI
 * names the device and says where the bytes live (the memory entry counts
 * every buffer as device memory, the staging as host); and every test
 * asserts that its instance's validation record is empty before it frees
 * it (tu_backend_free_checked). A build without Vulkan checks only that
 * engine=gpu says so. */
#include "test_util.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/src/capi.h"
#include "capi_harness.h"
#include "nntrainer/compute/backend.h"
#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

#ifndef NNT_HAVE_VULKAN

int main(void) { return tu_main_without_vulkan(); }

#else

#include "nntrainer/vulkan/vk.h"
#include "nntrainer/vulkan/vk_impl.h"

/* ---- opening ------------------------------------------------------------- */

/* Runs first: no device is open yet, so the loader is looked for. */
static void test_no_loader(void **state) {
  (void)state;
  nnt_backend *be;
  nnt_err e = {0};
  setenv("NNTRAINER_VULKAN_LOADER", "/nonexistent/libvulkan.so.1", 1);
  assert_int_equal(nnt_backend_get(NNT_ENGINE_GPU, &be, &e), NNT_ERR_NOT_SUPPORTED);
  unsetenv("NNTRAINER_VULKAN_LOADER");
  tu_assert_contains(e.msg, "engine 'gpu': no Vulkan loader (/nonexistent/libvulkan.so.1): ");
  tu_assert_contains(e.msg, "/nonexistent/libvulkan.so.1: cannot open shared object file");
}

/* A loader without any driver: no device, said so. */
static void test_no_driver(void **state) {
  (void)state;
  nnt_backend *be;
  nnt_err e = {0};
  setenv("VK_DRIVER_FILES", "/nonexistent/icd.json", 1);
  setenv("VK_ICD_FILENAMES", "/nonexistent/icd.json", 1); /* older loaders' name */
  int rc = nnt_backend_get(NNT_ENGINE_GPU, &be, &e);
  unsetenv("VK_DRIVER_FILES");
  unsetenv("VK_ICD_FILENAMES");
  assert_int_equal(rc, NNT_ERR_NOT_SUPPORTED);
  tu_assert_contains(e.msg, "engine 'gpu': no Vulkan device");
}

static void test_device_choice(void **state) {
  (void)state;
  nnt_backend *be;
  nnt_err e = {0};
  setenv("NNTRAINER_VULKAN_DEVICE", "no-such-device", 1);
  assert_int_equal(nnt_backend_get(NNT_ENGINE_GPU, &be, &e), NNT_ERR_NOT_SUPPORTED);
  tu_assert_contains(e.msg, "NNTRAINER_VULKAN_DEVICE='no-such-device' matches no Vulkan 1.1 "
                            "device with a compute queue (devices: 0: ");
  setenv("NNTRAINER_VULKAN_DEVICE", "0", 1); /* by index */
  int rc = nnt_backend_get(NNT_ENGINE_GPU, &be, &e);
  unsetenv("NNTRAINER_VULKAN_DEVICE");
  if (rc)
    fail_msg("no Vulkan device here (setup.sh installs mesa-vulkan-drivers): %s", e.msg);
  assert_string_equal(be->name, "vulkan");
  assert_string_equal(be->engine, "gpu");
  assert_non_null(be->device);
  tu_assert_contains(be->device, "Vulkan 1.");
  tu_backend_free_checked(be);
  /* by a part of its name, in any case: the first word of the one found */
  assert_int_equal(nnt_backend_get(NNT_ENGINE_GPU, &be, &e), NNT_OK);
  char word[64];
  snprintf(word, sizeof word, "%s", be->device);
  word[strcspn(word, " (")] = '\0';
  for (char *p = word; *p; p++)
    *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
  setenv("NNTRAINER_VULKAN_DEVICE", word, 1);
  nnt_backend *again;
  assert_int_equal(nnt_backend_get(NNT_ENGINE_GPU, &again, &e), NNT_OK);
  unsetenv("NNTRAINER_VULKAN_DEVICE");
  tu_backend_free_checked(again);
  tu_backend_free_checked(be);
}

/* ---- buffers and ops ------------------------------------------------------ */

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

static void test_buffers(void **state) {
  (void)state;
  nnt_backend *be = tu_gpu();
  const nnt_buffer_type *bt = be->buft;
  nnt_err e = {0};
  assert_int_equal(bt->is_host(bt), 0);
  size_t a = bt->alignment(bt);
  assert_true(a >= 64 && a % 64 == 0);
  nnt_buffer *b, *b2;
  assert_int_equal(nnt_buffer_alloc(bt, 1000, "a test buffer", &b, &e), NNT_OK);
  assert_int_equal(nnt_buffer_alloc(bt, 8, "another", &b2, &e), NNT_OK);
  /* opaque, distinct address ranges, never host pointers */
  assert_true((uint64_t)(uintptr_t)b->base >= VK_ADDR_BASE);
  assert_true(b2->base - b->base >= (ptrdiff_t)VK_ADDR_SPAN);
  assert_null(nnt_buffer_host(b, 0));
  unsigned char in[1000], out[1000];
  for (size_t i = 0; i < sizeof in; i++)
    in[i] = (unsigned char)(i * 7 + 1);
  memset(out, 1, sizeof out);
  assert_int_equal(bt->get(b, 0, out, sizeof out, &e), NNT_OK); /* zeroed */
  for (size_t i = 0; i < sizeof out; i++)
    assert_int_equal(out[i], 0);
  assert_int_equal(bt->set(b, 0, in, sizeof in, &e), NNT_OK);
  assert_int_equal(bt->memset(b, 100, 0xff, 40, &e), NNT_OK);
  assert_int_equal(bt->memset(b, 203, 0, 5, &e), NNT_OK); /* not whole words */
  assert_int_equal(bt->get(b, 0, out, sizeof out, &e), NNT_OK);
  for (size_t i = 0; i < sizeof out; i++) {
    unsigned char want = i >= 100 && i < 140 ? 0xff : i >= 203 && i < 208 ? 0 : in[i];
    assert_int_equal(out[i], want);
  }
  assert_int_equal(bt->get(b, 990, out, 20, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "bytes [990, 1010) outside its 1000");
  /* a pool larger than one buffer may be is refused, saying so */
  nnt_buffer *big;
  size_t max = bt->max_size(bt);
  assert_true(max >= ((size_t)64 << 20));
  assert_int_equal(nnt_buffer_alloc(bt, max + 64, "the training arena", &big, &e),
                   NNT_ERR_NOMEM);
  tu_assert_contains(e.msg, "cannot allocate the training arena");
  tu_assert_contains(e.msg, "buffer of 'vulkan' may hold");
  nnt_buffer_free(b2);
  nnt_buffer_free(b);
  tu_backend_free_checked(be);
}

/* gemm in the four transpose forms, odd shapes, leading dimensions wider
 * than the rows, beta 0 over NaN and beta 0.5, against the CPU's. */
static void test_gemm(void **state) {
  (void)state;
  nnt_backend *be = tu_gpu();
  const nnt_kernels *cpu = nnt_kernels_cpu();
  nnt_err e = {0};
  enum { M = 19, N = 23, K = 37, LD = 41 };
  float *a = malloc(LD * LD * sizeof *a), *b = malloc(LD * LD * sizeof *b);
  float *c = malloc(M * LD * sizeof *c), *ref = malloc(M * LD * sizeof *ref);
  nnt_rng r;
  nnt_rng_seed(&r, 5);
  tu_fill_uniform(&r, a, LD * LD, -1, 1);
  tu_fill_uniform(&r, b, LD * LD, -1, 1);
  nnt_buffer *ba, *bb, *bc;
  assert_int_equal(nnt_buffer_alloc(be->buft, LD * LD * 4, "a", &ba, &e), NNT_OK);
  assert_int_equal(nnt_buffer_alloc(be->buft, LD * LD * 4, "b", &bb, &e), NNT_OK);
  assert_int_equal(nnt_buffer_alloc(be->buft, M * LD * 4 + 64, "c", &bc, &e), NNT_OK);
  assert_int_equal(be->buft->set(ba, 0, a, LD * LD * 4, &e), NNT_OK);
  assert_int_equal(be->buft->set(bb, 0, b, LD * LD * 4, &e), NNT_OK);
  for (int t = 0; t < 8; t++) {
    int ta = t & 1, tb = t >> 1 & 1;
    float beta = t & 4 ? 0.5f : 0.0f;
    tu_fill_uniform(&r, c, M * LD, -1, 1);
    if (!beta)
      c[3] = NAN; /* beta 0 does not read C */
    memcpy(ref, c, M * LD * sizeof *c);
    assert_int_equal(be->buft->set(bc, 64, c, M * LD * 4, &e), NNT_OK);
    assert_int_equal(be->k->gemm(be->k, ta, tb, M, N, K, 1.5f, nnt_buffer_at(ba, 0), LD,
                                 nnt_buffer_at(bb, 0), LD, beta, nnt_buffer_at(bc, 64), LD),
                     NNT_OK);
    assert_int_equal(cpu->gemm(cpu, ta, tb, M, N, K, 1.5f, a, LD, b, LD, beta, ref, LD), NNT_OK);
    assert_int_equal(be->synchronize(be, &e), NNT_OK);
    assert_int_equal(be->buft->get(bc, 64, c, M * LD * 4, &e), NNT_OK);
    double worst = 0;
    for (int i = 0; i < M; i++)
      for (int j = 0; j < LD; j++) {
        double d = fabs((double)c[i * LD + j] - ref[i * LD + j]);
        worst = d > worst || isnan(d) ? d : worst;
      }
    if (!(worst <= 1e-5))
      fail_msg("gemm ta=%d tb=%d beta=%g: max error %g", ta, tb, beta, worst);
  }
  /* an address of no live buffer (a host pointer) is refused */
  assert_int_equal(be->k->fill(be->k, 4, 1.0f, c), NNT_ERR_INVAL);
  nnt_buffer_free(ba);
  nnt_buffer_free(bb);
  nnt_buffer_free(bc);
  free(a), free(b), free(c), free(ref);
  tu_backend_free_checked(be);
}

/* The ops no op-harness case reaches on this backend (or reaches only in
 * one form), each on the same data as the CPU's: within 1e-5. Arrays x, y,
 * z of 6 x 7 floats; o is where results go. */
static void test_other_ops(void **state) {
  (void)state;
  nnt_backend *be = tu_gpu();
  const nnt_kernels *cpu = nnt_kernels_cpu(), *k = be->k;
  nnt_err e = {0};
  enum { R = 6, C = 7, N = R * C };
  float h[4][N], d[4][N];
  nnt_rng r;
  nnt_rng_seed(&r, 9);
  nnt_buffer *b;
  assert_int_equal(nnt_buffer_alloc(be->buft, 4 * N * 4, "ops", &b, &e), NNT_OK);
  float *x = nnt_buffer_at(b, 0), *y = x + N, *z = y + N, *o = z + N;
  for (int t = 0; t < 14; t++) {
    tu_fill_uniform(&r, &h[0][0], 4 * N, -2, 2);
    assert_int_equal(be->buft->set(b, 0, h, sizeof h, &e), NNT_OK);
    float *hx = h[0], *hy = h[1], *hz = h[2], *ho = h[3];
    const char *what[] = {"add_col_vec", "add_row_vec", "sum_cols beta 0.5", "sum_rows beta 0",
                          "dot", "sum", "fill", "scale", "axpy", "mul", "sub", "copy",
                          "argmax_match", "mask_upper"};
#define BOTH(call_gpu, call_cpu)                                                             \
  assert_int_equal(call_gpu, NNT_OK);                                                        \
  assert_int_equal(call_cpu, NNT_OK);
    switch (t) {
    case 0: BOTH(k->add_col_vec(k, R, C, x, o), cpu->add_col_vec(cpu, R, C, hx, ho)); break;
    case 1: BOTH(k->add_row_vec(k, R, C, x, o), cpu->add_row_vec(cpu, R, C, hx, ho)); break;
    case 2: BOTH(k->sum_cols(k, R, C, x, 0.5f, o), cpu->sum_cols(cpu, R, C, hx, 0.5f, ho)); break;
    case 3: BOTH(k->sum_rows(k, R, C, x, 0, o), cpu->sum_rows(cpu, R, C, hx, 0, ho)); break;
    case 4: BOTH(k->dot(k, N, x, y, o), cpu->dot(cpu, N, hx, hy, ho)); break;
    case 5: BOTH(k->sum(k, N, z, o + 1), cpu->sum(cpu, N, hz, ho + 1)); break;
    case 6: BOTH(k->fill(k, N - 1, 3.5f, o), cpu->fill(cpu, N - 1, 3.5f, ho)); break;
    case 7: BOTH(k->scale(k, N, -0.5f, o), cpu->scale(cpu, N, -0.5f, ho)); break;
    case 8: BOTH(k->axpy(k, N, 0.25f, x, o), cpu->axpy(cpu, N, 0.25f, hx, ho)); break;
    case 9: BOTH(k->mul(k, N, x, y, o), cpu->mul(cpu, N, hx, hy, ho)); break;
    case 10: BOTH(k->sub(k, N, x, y, x), cpu->sub(cpu, N, hx, hy, hx)); break; /* y aliases a */
    case 11: BOTH(k->copy(k, N, z, o), cpu->copy(cpu, N, hz, ho)); break;
    case 12:
      BOTH(k->argmax_match(k, R, C, x, y, o), cpu->argmax_match(cpu, R, C, hx, hy, ho));
      break;
    case 13: /* two matrices of 3 x 7 */
      BOTH(k->mask_upper(k, 2, 3, 7, -1e10f, o), cpu->mask_upper(cpu, 2, 3, 7, -1e10f, ho));
      break;
    }
#undef BOTH
    assert_int_equal(be->buft->get(b, 0, d, sizeof d, &e), NNT_OK);
    double err = norm_err(&h[0][0], &d[0][0], 4 * N);
    if (!(err <= 1e-5))
      fail_msg("%s: normalised error %g", what[t], err);
  }
  nnt_buffer_free(b);
  tu_backend_free_checked(be);
}

/* The window ops and batch normalization directly, on a geometry no layer
 * case has: stride, dilation, asymmetric padding, a first output row whose
 * windows are all padding (max pooling's idx -1 and output 0), two images
 * (im2col's columns of the two side by side).
 * im2col, col2im (accumulating onto dx), the two for a block of channels
 * (one of the two: g.cs), max and average pooling forward
 * and backward are the CPU's bit for bit (the gathers add in the CPU's
 * order); batch normalization with y aliasing x, then its backward with dx
 * aliasing dy and no dgamma, then with dgamma only, within 1e-5, in work
 * groups of 1024 (where the device has them) and of 256. */
static void window_and_bn_ops(int bn_narrow) {
  nnt_backend *be = tu_gpu();
  ((vk_ctx *)be->ctx)->bn_narrow = bn_narrow;
  const nnt_kernels *cpu = nnt_kernels_cpu(), *k = be->k;
  nnt_err e = {0};
  const nnt_conv_geom g = {.c = 2, .h = 5, .w = 6, .kh = 3, .kw = 2, .sh = 2, .sw = 1,
                           .dh = 1, .dw = 2, .pt = 4, .pb = 1, .pl = 1, .pr = 1,
                           .oh = 4, .ow = 6};
  nnt_conv_geom gb = g;
  gb.c = 1;
  gb.cs = 2;
  /* a stride of 3: window.glsl's on_grid divides there (1 and 2 above
   * take its shortcuts) */
  const nnt_conv_geom g3 = {.c = 2, .h = 7, .w = 8, .kh = 3, .kw = 2, .sh = 3, .sw = 3,
                            .dh = 1, .dw = 1, .pt = 1, .pb = 1, .oh = 3, .ow = 3};
  enum { NI = 2, X = NI * 2 * 30, Y = NI * 2 * 24, COL = NI * 2 * 6 * 24, BO = 3, BC = 4, BI = 5,
         BN = BO * BC * BI, X3 = NI * 2 * 56, Y3 = NI * 2 * 9, COL3 = NI * 2 * 6 * 9 };
  /* offsets of the regions in one buffer */
  enum { oX = 0, oDY = oX + X, oCI = oDY + Y, oDX = oCI + COL, oCO = oDX + X, oYM = oCO + COL,
         oIM = oYM + Y, oDM = oIM + Y, oYA = oDM + X, oDA = oYA + Y, oCB = oDA + X,
         oDXB = oCB + COL / 2, oCI3 = oDXB + X, oDX3 = oCI3 + COL3, oX3 = oDX3 + X3,
         oDY3 = oX3 + X3, oYM3 = oDY3 + Y3, oIM3 = oYM3 + Y3, oDM3 = oIM3 + Y3,
         oDA3 = oDM3 + X3, WIN = oDA3 + X3,
         oBX = WIN, oG = oBX + BN, oB = oG + BC, oMU = oB + BC, oVAR = oMU + BC,
         oIS = oVAR + BC, oXH = oIS + BC, oBDY = oXH + BN, oDG = oBDY + BN, oDB = oDG + BC,
         oDG2 = oDB + BC, ALL = oDG2 + BC };
  float *h = malloc(ALL * sizeof *h), *d = malloc(ALL * sizeof *d);
  assert_non_null(h);
  assert_non_null(d);
  nnt_rng r;
  nnt_rng_seed(&r, 21);
  tu_fill_uniform(&r, h, ALL, -2, 2);
  nnt_buffer *b;
  assert_int_equal(nnt_buffer_alloc(be->buft, ALL * 4, "win", &b, &e), NNT_OK);
  assert_int_equal(be->buft->set(b, 0, h, ALL * 4, &e), NNT_OK);
  float *v = nnt_buffer_at(b, 0);
  for (int side = 0; side < 2; side++) {
    const nnt_kernels *kk = side ? cpu : k;
    float *p = side ? h : v;
    assert_int_equal(kk->im2col(kk, &g, NI, p + oX, p + oCO), NNT_OK);
    assert_int_equal(kk->col2im(kk, &g, NI, p + oCI, p + oDX), NNT_OK);
    /* channel 1 of the 2 alone (a block: images 2 channels apart) */
    assert_int_equal(kk->im2col(kk, &gb, NI, p + oX + 30, p + oCB), NNT_OK);
    assert_int_equal(kk->col2im(kk, &gb, NI, p + oCI + COL / 2, p + oDXB + 30), NNT_OK);
    assert_int_equal(kk->pool_fwd(kk, &g, NI, 0, p + oX, p + oYM, p + oIM), NNT_OK);
    assert_int_equal(kk->pool_bwd(kk, &g, NI, 0, p + oDY, p + oIM, p + oDM), NNT_OK);
    assert_int_equal(kk->pool_fwd(kk, &g, NI, 1, p + oX, p + oYA, NULL), NNT_OK);
    assert_int_equal(kk->pool_bwd(kk, &g, NI, 1, p + oDY, NULL, p + oDA), NNT_OK);
    assert_int_equal(kk->col2im(kk, &g3, NI, p + oCI3, p + oDX3), NNT_OK);
    assert_int_equal(kk->pool_fwd(kk, &g3, NI, 0, p + oX3, p + oYM3, p + oIM3), NNT_OK);
    assert_int_equal(kk->pool_bwd(kk, &g3, NI, 0, p + oDY3, p + oIM3, p + oDM3), NNT_OK);
    assert_int_equal(kk->pool_bwd(kk, &g3, NI, 1, p + oDY3, NULL, p + oDA3), NNT_OK);
    assert_int_equal(kk->bn_fwd_train(kk, BO, BC, BI, p + oBX, p + oG, p + oB, 1e-3f, p + oMU,
                                      p + oVAR, p + oIS, p + oXH, p + oBX), NNT_OK);
    assert_int_equal(kk->bn_bwd(kk, BO, BC, BI, p + oBDY, p + oXH, p + oIS, p + oG, p + oBDY, NULL,
                                p + oDB), NNT_OK);
    assert_int_equal(kk->bn_bwd(kk, BO, BC, BI, p + oBX, p + oXH, p + oIS, p + oG, NULL, p + oDG2,
                                NULL), NNT_OK);
  }
  assert_int_equal(be->buft->get(b, 0, d, ALL * 4, &e), NNT_OK);
  for (unsigned i = 0; i < g.ow; i++) /* windows of padding only */
    assert_true(h[oIM + i] == -1 && d[oIM + i] == -1 && d[oYM + i] == 0);
  assert_memory_equal(h, d, WIN * sizeof *d);
  double err = norm_err(h + WIN, d + WIN, ALL - WIN);
  print_message("batch normalization%s: normalised error %.3g\n",
                bn_narrow ? " (work groups of 256)" : "", err);
  assert_true(err <= 1e-5);
  nnt_buffer_free(b);
  tu_backend_free_checked(be);
  free(h), free(d);
}

static void test_window_and_bn_ops(void **state) {
  (void)state;
  window_and_bn_ops(0);
  window_and_bn_ops(1);
}

/* ---- whole training ------------------------------------------------------- */

#define MLP_INI NNT_SOURCE_DIR "/Applications/FashionMNIST/mlp.ini"
#define STEPS_MAX 64

typedef struct losses {
  unsigned n;
  float v[STEPS_MAX];
} losses;

static void on_step(const nnt_progress *p, void *ud) {
  losses *l = ud;
  if (!p->epoch_done && l->n < STEPS_MAX)
    l->v[l->n++] = p->batch_loss;
}

/* ini on synthetic data (train: `train` samples; validation 16), on
 * engine, batches of `batch` (a "batch_size=N" override). */
static nnt_model *model_of(const char *ini, const char *engine, const char *opt,
                           const char *batch, unsigned train) {
  nnt_model *m = tu_model_for_ini(ini);
  nnt_err e = {0};
  const char *ov[] = {"epochs=1", batch, "save_path=", engine, opt};
  if (nnt_ini_load(m, ini, ov, opt ? 5 : 4, &e))
    fail_msg("%s", e.msg);
  for (int mode = 0; mode < 3; mode++) {
    nnt_dataset *ds = NULL;
    if (mode != NNT_DS_TEST)
      assert_int_equal(
          nnt_dataset_create_synthetic(mode == NNT_DS_TRAIN ? train : 16, 77, &ds, &e), NNT_OK);
    assert_int_equal(nnt_model_set_dataset(m, mode, ds, &e), NNT_OK);
  }
  if (nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("%s: %s", engine, e.msg);
  return m;
}

/* mlp.ini on synthetic data (6 batches of 8), on engine. */
static nnt_model *mlp(const char *engine, const char *opt) {
  return model_of(MLP_INI, engine, opt, "batch_size=8", 48);
}

static void train_mlp_both(const char *opt, double tol) {
  nnt_err e = {0};
  nnt_model *c = mlp("engine=cpu", opt), *g = mlp("engine=gpu", opt);
  assert_string_equal(g->be->name, "vulkan");
  assert_ptr_equal(g->wbuf->type, g->be->buft);
  assert_true((uint64_t)(uintptr_t)g->w[0].data >= VK_ADDR_BASE);
  losses lc = {0}, lg = {0};
  assert_int_equal(nnt_model_train(c, on_step, &lc, &e), NNT_OK);
  if (nnt_model_train(g, on_step, &lg, &e))
    fail_msg("gpu: %s", e.msg);
  assert_int_equal(lc.n, 6);
  assert_int_equal(lg.n, lc.n);
  double lerr = norm_err(lc.v, lg.v, lc.n);
  float *wc = tu_weights_of(c), *wg = tu_weights_of(g);
  double werr = norm_err(wc, wg, c->wpool_floats);
  print_message("mlp.ini %s, 6 steps of 8: losses within %.3g, weights within %.3g "
                "(normalised)\n", opt ? opt : "(adam)", lerr, werr);
  if (lerr > tol || werr > tol)
    fail_msg("gpu against cpu: losses %.3g, weights %.3g > %g", lerr, werr, tol);
  /* a GPU-trained model's file loads on the CPU, and a CPU file on the GPU:
   * the same floats */
  const char *pg = tu_path_in("gpu.bin"), *pc = tu_path_in("cpu.bin");
  assert_int_equal(nnt_model_save_weights(g, pg, 0, &e), NNT_OK);
  assert_int_equal(nnt_model_save_weights(c, pc, 0, &e), NNT_OK);
  nnt_model *c2 = mlp("engine=cpu", opt), *g2 = mlp("engine=gpu", opt);
  if (nnt_model_load_weights(c2, pg, &e) || nnt_model_load_weights(g2, pc, &e))
    fail_msg("load: %s", e.msg);
  float *wc2 = tu_weights_of(c2), *wg2 = tu_weights_of(g2);
  assert_memory_equal(wc2, wg, c->wpool_floats * sizeof(float));
  assert_memory_equal(wg2, wc, c->wpool_floats * sizeof(float));
  /* and evaluation agrees */
  float l1, a1, l2, a2;
  assert_int_equal(nnt_model_evaluate(c, NNT_DS_VALID, &l1, &a1, &e), NNT_OK);
  assert_int_equal(nnt_model_evaluate(g2, NNT_DS_VALID, &l2, &a2, &e), NNT_OK);
  assert_true(fabs(l1 - l2) <= tol * fmax(1, fabs(l1)));
  free(wc), free(wg), free(wc2), free(wg2);
  tu_model_destroy_checked(c);
  tu_model_destroy_checked(g);
  tu_model_destroy_checked(c2);
  tu_model_destroy_checked(g2);
}

/* gemm sums in another order than OpenBLAS (and lavapipe's exp and log
 * differ from glibc's in the last bits), so results differ by rounding:
 * about 1e-6 relative per op. SGD carries that through linearly; Adam
 * divides by sqrt(v), so a gradient that is nearly zero amplifies it
 * (bounded by the learning rate per step): the tolerances say so. */
static void test_mlp_trains_like_the_cpu(void **state) {
  (void)state;
  train_mlp_both("Optimizer.type=sgd", 1e-4);
  train_mlp_both(NULL, 2e-3); /* mlp.ini's adam, lr 0.001 */
}

/* One model's training in a thread of its own. */
typedef struct trainer {
  nnt_model *m;
  int rc;
  nnt_err e;
} trainer;

static void *train_thread(void *arg) {
  trainer *t = arg;
  t->rc = nnt_model_train(t->m, NULL, NULL, &t->e);
  return NULL;
}

/* Two models on engine=gpu in one process get two backend instances (each
 * its own device, queue and buffers), train at the same time in two
 * threads, and each ends with bitwise the weights of the same model
 * trained alone. */
static void test_two_models_train_concurrently(void **state) {
  (void)state;
  nnt_err e = {0};
  for (int opt = 0; opt < 2; opt++) {
    const char *o = opt ? NULL : "Optimizer.type=sgd";
    nnt_model *alone = mlp("engine=gpu", o);
    if (nnt_model_train(alone, NULL, NULL, &e))
      fail_msg("alone: %s", e.msg);
    float *w0 = tu_weights_of(alone);
    trainer t[2] = {{.m = mlp("engine=gpu", o)}, {.m = mlp("engine=gpu", o)}};
    assert_ptr_not_equal(t[0].m->be, t[1].m->be);
    assert_ptr_not_equal(t[0].m->be->ctx, t[1].m->be->ctx);
    assert_ptr_not_equal(t[0].m->be->ctx, alone->be->ctx);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
      assert_int_equal(pthread_create(&th[i], NULL, train_thread, &t[i]), 0);
    for (int i = 0; i < 2; i++)
      assert_int_equal(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < 2; i++) {
      if (t[i].rc)
        fail_msg("model %d in its thread: %s", i, t[i].e.msg);
      float *w = tu_weights_of(t[i].m);
      assert_memory_equal(w, w0, alone->wpool_floats * sizeof *w);
      free(w);
      tu_model_destroy_checked(t[i].m);
    }
    free(w0);
    tu_model_destroy_checked(alone);
  }
}

#define CNN_INI NNT_SOURCE_DIR "/Applications/FashionMNIST/cnn_bn.ini"

/* cnn_bn.ini (conv2d, batch_normalization, pooling2d max, dropout 0.3,
 * its Adam) on synthetic data, STEPS batches of 4, on the GPU and on the
 * CPU: the same losses and weights within the tolerance, the running
 * statistics of batch normalization included (they are weights of the
 * pool), and evaluation (batch normalization's inference form, dropout
 * off) agrees. */
static void train_cnn_both(const char *opt, double tol) {
  enum { STEPS = 3 };
  nnt_err e = {0};
  nnt_model *c = model_of(CNN_INI, "engine=cpu", opt, "batch_size=4", 4 * STEPS);
  nnt_model *g = model_of(CNN_INI, "engine=gpu", opt, "batch_size=4", 4 * STEPS);
  assert_string_equal(g->be->name, "vulkan");
  losses lc = {0}, lg = {0};
  assert_int_equal(nnt_model_train(c, on_step, &lc, &e), NNT_OK);
  if (nnt_model_train(g, on_step, &lg, &e))
    fail_msg("gpu: %s", e.msg);
  assert_int_equal(lc.n, STEPS);
  assert_int_equal(lg.n, lc.n);
  double lerr = norm_err(lc.v, lg.v, lc.n);
  float *wc = tu_weights_of(c), *wg = tu_weights_of(g);
  double werr = norm_err(wc, wg, c->wpool_floats);
  print_message("cnn_bn.ini %s, %d steps of 4: losses within %.3g, weights within %.3g "
                "(normalised)\n", opt ? opt : "(adam)", STEPS, lerr, werr);
  if (lerr > tol || werr > tol)
    fail_msg("gpu against cpu: losses %.3g, weights %.3g > %g", lerr, werr, tol);
  float l1, a1, l2, a2;
  assert_int_equal(nnt_model_evaluate(c, NNT_DS_VALID, &l1, &a1, &e), NNT_OK);
  if (nnt_model_evaluate(g, NNT_DS_VALID, &l2, &a2, &e))
    fail_msg("gpu evaluate: %s", e.msg);
  print_message("cnn_bn.ini evaluation: loss %.7g on the cpu, %.7g on the gpu\n", l1, l2);
  assert_true(fabs(l1 - l2) <= tol * fmax(1, fabs(l1)));
  free(wc), free(wg);
  tu_model_destroy_checked(c);
  tu_model_destroy_checked(g);
}

/* As for the MLP: rounding differences (float sums where the CPU sums
 * batch statistics in double, another gemm order, lavapipe's exp) carried
 * linearly by SGD, amplified up to the learning rate a step by Adam. */
static void test_cnn_trains_like_the_cpu(void **state) {
  (void)state;
  train_cnn_both("Optimizer.type=sgd", 1e-4);
  train_cnn_both(NULL, 2e-3); /* cnn_bn.ini's adam, lr 0.001 */
}

/* The dropout mask is Philox at (key, stream, i) on both sides: bit for bit
 * the CPU's, for rates 0, 0.3, 0.5 and 1, keys and streams with both words
 * set, a length that is not a multiple of 4 and an offset that is not. */
static void test_dropout_mask_is_the_cpus(void **state) {
  (void)state;
  nnt_backend *be = tu_gpu();
  nnt_err e = {0};
  enum { N = 4099 };
  float *h = malloc(N * sizeof *h), *d = malloc(N * sizeof *d);
  assert_non_null(h);
  assert_non_null(d);
  nnt_buffer *b;
  assert_int_equal(nnt_buffer_alloc(be->buft, (N + 1) * 4, "mask", &b, &e), NNT_OK);
  float *m = (float *)nnt_buffer_at(b, 0) + 1;
  const float rates[] = {0, 0.3f, 0.5f, 1};
  const uint64_t keys[][2] = {{1, 0}, {0x0123456789abcdefull, 0xfedcba9876543210ull},
                              {~0ull, 7}};
  unsigned zeros = 0;
  for (size_t r = 0; r < NNT_ARRAY_LEN(rates); r++)
    for (size_t k = 0; k < NNT_ARRAY_LEN(keys); k++) {
      assert_int_equal(be->k->dropout_mask(be->k, N, rates[r], keys[k][0], keys[k][1], m), NNT_OK);
      assert_int_equal(nnt_kernels_cpu()->dropout_mask(nnt_kernels_cpu(), N, rates[r], keys[k][0],
                                                       keys[k][1], h),
                       NNT_OK);
      assert_int_equal(be->buft->get(b, 4, d, N * sizeof *d, &e), NNT_OK);
      assert_memory_equal(h, d, N * sizeof *d);
      for (size_t i = 0; i < N; i++)
        zeros += rates[r] == 0.3f && d[i] == 0;
    }
  /* the mask does drop: about 30% of 3 x 4099 at rate 0.3 */
  assert_true(zeros > 3 * N * 25 / 100 && zeros < 3 * N * 35 / 100);
  nnt_buffer_free(b);
  tu_backend_free_checked(be);
  free(h), free(d);
}

static void test_cli_names_the_device(void **state) {
  (void)state;
  char out[16384];
  tu_write_text("m.ini", "[Model]\ntype = NeuralNetwork\nbatch_size = 4\nepochs = 1\n"
                         "loss = mse\n[Optimizer]\ntype = sgd\n[in]\ntype = input\n"
                         "input_shape = 1:1:6\n[fc]\ntype = fully_connected\nunit = 2\n");
  /* the tool unloads lavapipe before it exits, so LeakSanitizer could not
   * name lavapipe's own leaks (see main); this process checks ours */
  int rc = tu_run_cli_env("ASAN_OPTIONS=detect_leaks=0", "train m.ini engine=gpu --synthetic=8",
                          out, sizeof out);
  if (rc)
    fail_msg("exit %d: %s", rc, out);
  tu_assert_contains(out, "device: ");
  tu_assert_contains(out, "backend 'vulkan'");
  assert_true(strstr(out, "device: ") < strstr(out, "model: "));
  /* the weights and the training arena are device memory (at least their
   * planned bytes), the staging buffer host memory */
  double dev, host, slack;
  tu_cli_memory(out, &dev, &host, &slack);
  char plan[1 << 16];
  rc = tu_run_cli_env("ASAN_OPTIONS=detect_leaks=0", "plan m.ini engine=gpu --json", plan,
                      sizeof plan);
  if (rc)
    fail_msg("exit %d: %s", rc, plan);
  tu_assert_contains(plan, "\"engine\":\"gpu\",\"backend\":\"vulkan\",\"device\":\"");
  tu_assert_contains(plan, "\"memory\":{\"arena\":\"device\",\"weights\":\"device\","
                           "\"optimizer\":\"device\"}");
  size_t want = tu_json_size(plan, "arena_bytes") + tu_json_size(plan, "weight_bytes");
  print_message("engine=gpu: %.0f bytes device, %.0f host; planned arena and weights %zu\n", dev,
                host, want);
  if (dev + slack < (double)want || host + slack < (double)VK_STAGING_BLOCK)
    fail_msg("device %.0f (+%.0f) < %zu or host %.0f < the staging buffer: %s", dev, slack, want,
             host, out);
  assert_int_equal(tu_run_cli("train m.ini engine=cpu --synthetic=8", out, sizeof out), 0);
  assert_null(strstr(out, "device: "));
}

/* The memory entry: a buffer's device memory (at least its size) comes
 * and goes with it; the staging of a transfer (a block of 4 MiB, kept for
 * the next) is host memory; a model on it holds at least its weights and
 * arena on the device. */
static void test_memory_counts(void **state) {
  (void)state;
  nnt_backend *be = tu_gpu();
  nnt_err e = {0};
  nnt_mem_usage before, held, after;
  nnt_backend_memory(be, &before);
  assert_int_equal(before.device, 0);
  nnt_buffer *b;
  assert_int_equal(nnt_buffer_alloc(be->buft, 1001, "counted", &b, &e), NNT_OK);
  nnt_backend_memory(be, &held);
  assert_true(held.device - before.device >= 1001);
  assert_int_equal(held.host, before.host);
  char bytes[1001] = {1};
  assert_int_equal(be->buft->set(b, 0, bytes, sizeof bytes, &e), NNT_OK);
  assert_int_equal(be->synchronize(be, &e), NNT_OK);
  nnt_backend_memory(be, &held);
  assert_true(held.host >= before.host + VK_STAGING_BLOCK);
  nnt_buffer_free(b);
  nnt_backend_memory(be, &after);
  assert_int_equal(after.device, before.device);
  tu_backend_free_checked(be);
  nnt_model *m = mlp("engine=gpu", NULL);
  assert_int_equal(nnt_model_plan(m, NNT_MODE_TRAIN, &e), NNT_OK);
  nnt_backend_memory(m->be, &held);
  assert_true(held.device >= m->wbuf->size + m->mgr[NNT_MODE_TRAIN].buf->size);
  assert_true(held.host >= VK_STAGING_BLOCK);
  tu_model_destroy_checked(m);
}

/* The C API selects it with engine=gpu at compile: a model trains and
 * infers on it (softmax rows sum to 1, read back through the C API). */
static void test_capi_selects_it(void **state) {
  (void)state;
  const char *ini = tu_write_text("c.ini",
      "[Model]\ntype = NeuralNetwork\nbatch_size = 8\nepochs = 2\nloss = cross\n"
      "[Optimizer]\ntype = adam\n[in]\ntype = input\ninput_shape = 1:1:8\n"
      "[fc1]\ntype = fully_connected\nunit = 16\nactivation = relu\n"
      "[out]\ntype = fully_connected\nunit = 3\nactivation = softmax\n");
  ml_train_model_h model;
  ml_train_dataset_h ds;
  gen g;
  gen_init(&g, 32, 5);
  OK(ml_train_model_construct_with_conf(ini, &model));
  OK(ml_train_dataset_create(&ds));
  OK(ml_train_dataset_add_generator(ds, ML_TRAIN_DATASET_MODE_TRAIN, gen_cb, &g));
  OK(ml_train_model_set_dataset(model, ds));
  OK(ml_train_model_compile(model, "engine=gpu", NULL));
  OK(ml_train_model_run(model, NULL));
  ml_tensors_info_h info;
  ml_tensors_data_h in, out;
  OK(ml_train_model_get_input_tensors_info(model, &info));
  OK(ml_tensors_data_create(info, &in));
  OK(ml_tensors_info_destroy(info));
  float *x, *y;
  size_t xs, ys;
  OK(ml_tensors_data_get_tensor_data(in, 0, (void **)&x, &xs));
  for (size_t i = 0; i < xs / sizeof(float); i++)
    x[i] = (float)(i % 7) / 7.0f - 0.5f;
  OK(ml_train_ext_model_infer(model, in, &out));
  OK(ml_tensors_data_get_tensor_data(out, 0, (void **)&y, &ys));
  assert_int_equal(ys, 8 * 3 * sizeof(float));
  for (int r = 0; r < 8; r++)
    assert_true(fabsf(y[3 * r] + y[3 * r + 1] + y[3 * r + 2] - 1.0f) < 1e-5f);
  OK(ml_tensors_data_destroy(out));
  OK(ml_tensors_data_destroy(in));
  tu_assert_validation_silent(((capi_model *)model)->m->be);
  OK(ml_train_model_destroy(model));
}

/* Runs last: every test above ran with the validation layer listening. */
static void test_validation_is_silent(void **state) {
  (void)state;
  char first[512];
  nnt_backend *be = tu_gpu();
  assert_true(nnt_vulkan_validation_listening(be));
  size_t n = nnt_vulkan_validation_messages(be, first, sizeof first);
  tu_backend_free_checked(be);
  if (n)
    fail_msg("the validation layer reported %zu messages; the first: %s", n, first);
}

/* Runs after the silent check: the record does catch a misuse (a buffer
 * of size 0, which the specification forbids), so an empty record means
 * something. */
static void test_validation_catches_misuse(void **state) {
  (void)state;
  nnt_backend *be = tu_gpu();
  char first[512];
  size_t before = nnt_vulkan_validation_messages(be, NULL, 0);
  vk_ctx *c = be->ctx;
  pthread_mutex_lock(&c->lock);
  VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                           .size = 0,
                           .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                           .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  VkBuffer buf = VK_NULL_HANDLE;
  VkResult r = c->f.vkCreateBuffer(c->dev, &bi, NULL, &buf);
  if (r == VK_SUCCESS && buf)
    c->f.vkDestroyBuffer(c->dev, buf, NULL);
  pthread_mutex_unlock(&c->lock);
  assert_true(nnt_vulkan_validation_messages(be, first, sizeof first) > before);
  tu_assert_contains(first, "VUID-VkBufferCreateInfo-size");
  nnt_backend_free(be);
}

int main(void) {
  setenv("NNTRAINER_VULKAN_VALIDATION", "1", 1);
  tu_keep_vulkan_driver();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_loader),
      cmocka_unit_test(test_no_driver),
      cmocka_unit_test(test_device_choice),
      cmocka_unit_test(test_buffers),
      cmocka_unit_test(test_gemm),
      cmocka_unit_test(test_other_ops),
      cmocka_unit_test(test_window_and_bn_ops),
      cmocka_unit_test_setup_teardown(test_mlp_trains_like_the_cpu, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test(test_cnn_trains_like_the_cpu),
      cmocka_unit_test(test_two_models_train_concurrently),
      cmocka_unit_test(test_dropout_mask_is_the_cpus),
      cmocka_unit_test(test_memory_counts),
      cmocka_unit_test_setup_teardown(test_cli_names_the_device, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_capi_selects_it, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test(test_validation_is_silent),
      cmocka_unit_test(test_validation_catches_misuse),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
