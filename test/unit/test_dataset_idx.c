/* IDX datasets: plain and gzip files of bytes and floats read sample by
 * sample with their one-hot labels, malformed or mismatched files refused,
 * and Debian's Fashion-MNIST training set read whole. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define FMNIST "/usr/share/datasets/fashion-mnist/"

static int is_gzip(const char *path) {
  FILE *f = fopen(path, "rb");
  int a = fgetc(f), b = fgetc(f);
  fclose(f);
  return a == 0x1f && b == 0x8b;
}

static const uint8_t idx_labels[6] = {0, 1, 2, 0, 2, 1};

/* Read all 6 samples (batch 2, in order) and check them against want(i, j). */
static void check_idx(const char *img, const char *lab, float (*want)(int, int)) {
  nnt_dataset *d;
  nnt_err e = {0};
  nnt_ds_shape s = tu_ds_shape1(4, 3);
  assert_int_equal(nnt_dataset_create_idx(img, lab, &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_set_property(d, "shuffle", "false", &e), NNT_OK);
  if (nnt_dataset_prepare(d, &s, 2, 1, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(nnt_dataset_samples(d), 6);
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
  float in[8], l[6], *pi[] = {in}, *pl[] = {l};
  for (int b = 0; b < 3; b++) {
    assert_int_equal(tu_ds_next(d, pi, pl, &e), 1);
    for (int r = 0; r < 2; r++) {
      int i = 2 * b + r;
      for (int j = 0; j < 4; j++)
        assert_float_equal(in[4 * r + j], want(i, j), 0);
      for (int c = 0; c < 3; c++)
        assert_float_equal(l[3 * r + c], (float)(c == idx_labels[i]), 0);
    }
  }
  assert_int_equal(tu_ds_next(d, pi, pl, &e), 0);
  nnt_dataset_destroy(d);
}

static float want_u8(int i, int j) { return (float)((4 * i + j) * 10) / 255.0f; }
static float want_f32(int i, int j) { return 0.5f * (4 * i + j) - 3.25f; }

static void test_idx_plain_and_gzip(void **state) {
  (void)state;
  char *dir = tu_mkdtemp(), img[512], lab[512];
  uint8_t pix[24], fbe[24 * 4];
  for (int i = 0; i < 24; i++) {
    pix[i] = (uint8_t)(i * 10);
    float v = 0.5f * i - 3.25f;
    uint32_t u;
    memcpy(&u, &v, 4);
    fbe[4 * i] = (uint8_t)(u >> 24), fbe[4 * i + 1] = (uint8_t)(u >> 16);
    fbe[4 * i + 2] = (uint8_t)(u >> 8), fbe[4 * i + 3] = (uint8_t)u;
  }
  uint32_t idims[] = {6, 2, 2}, ldims[] = {6};
  for (int gz = 0; gz < 2; gz++) {
    snprintf(img, sizeof img, "%s/img%d", dir, gz);
    snprintf(lab, sizeof lab, "%s/lab%d", dir, gz);
    tu_write_idx(img, gz, 0x08, idims, 3, pix, sizeof pix);
    tu_write_idx(lab, gz, 0x08, ldims, 1, idx_labels, sizeof idx_labels);
    assert_int_equal(is_gzip(img), gz);
    check_idx(img, lab, want_u8);
    tu_write_idx(img, gz, 0x0D, idims, 3, fbe, sizeof fbe); /* float images */
    check_idx(img, lab, want_f32);
  }
  tu_rmdir(dir);
  free(dir);
}

/* prepare(images, labels, shape 4:3 or the one given) must fail with code
 * and a message holding both needles */
static void idx_fails(const char *img, const char *lab, const nnt_ds_shape *sh, int code,
                      const char *n1, const char *n2) {
  nnt_dataset *d;
  nnt_err e = {0};
  nnt_ds_shape s = sh ? *sh : tu_ds_shape1(4, 3);
  assert_int_equal(nnt_dataset_create_idx(img, lab, &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d, &s, 2, 1, &e), code);
  tu_assert_contains(e.msg, n1);
  tu_assert_contains(e.msg, n2);
  nnt_dataset_destroy(d);
}

static void test_idx_errors(void **state) {
  (void)state;
  char *dir = tu_mkdtemp(), img[512], lab[512], bad[512];
  uint8_t pix[24] = {0}, five[5] = {0};
  uint32_t idims[] = {6, 2, 2}, ldims[] = {6}, ldims5[] = {5}, l2d[] = {6, 1};
  snprintf(img, sizeof img, "%s/img.gz", dir);
  snprintf(lab, sizeof lab, "%s/lab.gz", dir);
  snprintf(bad, sizeof bad, "%s/bad", dir);
  tu_write_idx(img, 1, 0x08, idims, 3, pix, sizeof pix);
  tu_write_idx(lab, 1, 0x08, ldims, 1, idx_labels, sizeof idx_labels);
  FILE *f = fopen(bad, "wb");
  fputs("not an idx file", f);
  fclose(f);
  idx_fails(img, bad, NULL, NNT_ERR_INVAL, bad, "bad magic 0x6e6f7420");
  idx_fails(bad, lab, NULL, NNT_ERR_INVAL, bad, "magic");
  idx_fails("/nonexistent/img", lab, NULL, NNT_ERR_IO, "/nonexistent/img", "cannot open");
  /* the model's sizes */
  nnt_ds_shape s5 = tu_ds_shape1(5, 3), s2 = tu_ds_shape1(4, 2), two = tu_ds_shape1(4, 3);
  idx_fails(img, lab, &s5, NNT_ERR_INVAL, img, "4 values per image but the model input takes 5");
  idx_fails(img, lab, &s2, NNT_ERR_INVAL, lab, "label 2 of sample 2 is out of range");
  two.n_in = 2, two.in_len[1] = 1;
  idx_fails(img, lab, &two, NNT_ERR_INVAL, img, "one input and one label");
  /* counts that differ */
  tu_write_idx(bad, 0, 0x08, ldims5, 1, five, sizeof five);
  idx_fails(img, bad, NULL, NNT_ERR_INVAL, "has 6 images but", bad);
  /* labels with two dimensions, images of ints */
  tu_write_idx(bad, 0, 0x08, l2d, 2, idx_labels, sizeof idx_labels);
  idx_fails(img, bad, NULL, NNT_ERR_INVAL, bad, "not an IDX label file");
  tu_write_idx(bad, 1, 0x0C, idims, 3, pix, sizeof pix);
  idx_fails(bad, lab, NULL, NNT_ERR_INVAL, bad, "bad magic 0x00000c03");
  /* data shorter than the header says */
  tu_write_idx(bad, 1, 0x08, idims, 3, pix, 20);
  idx_fails(bad, lab, NULL, NNT_ERR_INVAL, bad, "truncated");
  tu_write_idx(bad, 0, 0x08, idims, 0, NULL, 0); /* a header of 0 dimensions */
  idx_fails(bad, lab, NULL, NNT_ERR_INVAL, bad, "magic");
  tu_rmdir(dir);
  free(dir);
}

static uint8_t *gz_slurp(const char *path, size_t n) {
  uint8_t *b = malloc(n);
  gzFile g = gzopen(path, "rb");
  assert_non_null(g);
  assert_int_equal(gzread(g, b, (unsigned)n), (int)n);
  gzclose(g);
  return b;
}

static void test_fashion_mnist_train(void **state) {
  (void)state;
  const char *img = FMNIST "train-images-idx3-ubyte.gz", *lab = FMNIST "train-labels-idx1-ubyte.gz";
  nnt_dataset *d;
  nnt_err e = {0};
  assert_int_equal(nnt_dataset_create_idx(img, lab, &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_set_property(d, "shuffle", "false", &e), NNT_OK);
  nnt_ds_shape s = tu_ds_shape1(784, 10);
  if (nnt_dataset_prepare(d, &s, 100, 1, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(nnt_dataset_samples(d), 60000);
  /* an independent read of the same files to compare with */
  uint8_t *raw = gz_slurp(img, 16 + 60000 * 784), *rl = gz_slurp(lab, 8 + 60000);
  assert_int_equal(raw[3], 3);
  assert_int_equal(rl[3], 1);
  float *in = malloc(100 * 784 * sizeof(float)), l[1000], *pi[] = {in}, *pl[] = {l};
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
  size_t batches = 0, bad = 0, ones = 0;
  while (tu_ds_next(d, pi, pl, &e) == 1) {
    for (size_t r = 0; r < 100; r++) {
      size_t i = batches * 100 + r;
      const uint8_t *px = raw + 16 + i * 784;
      for (size_t j = 0; j < 784; j++) {
        float v = in[r * 784 + j];
        bad += !(v >= 0 && v <= 1) || v != px[j] / 255.0f;
        ones += v == 1.0f;
      }
      for (int c = 0; c < 10; c++)
        bad += l[r * 10 + c] != (c == rl[8 + i] ? 1.0f : 0.0f);
    }
    batches++;
  }
  assert_int_equal(e.code, NNT_OK);
  assert_int_equal(batches, 600);
  assert_int_equal(bad, 0);
  assert_true(ones > 0); /* 255 maps to exactly 1 */
  free(in);
  free(raw);
  free(rl);
  nnt_dataset_destroy(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_idx_plain_and_gzip),
      cmocka_unit_test(test_idx_errors),
      cmocka_unit_test(test_fashion_mnist_train),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
