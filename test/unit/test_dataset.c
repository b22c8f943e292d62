/* Data sources, the producer thread and the batch queue. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "nntrainer/dataset.h"

static nnt_ds_shape shape(size_t in, size_t lab) {
  nnt_ds_shape s = {0};
  s.n_in = s.n_label = 1;
  s.in_len[0] = in;
  s.label_len[0] = lab;
  return s;
}

typedef struct gen {
  int n, fail_at, calls;
} gen;

/* sample k: input {k, k+0.5}, label {k} */
static int gen_cb(float **in, float **label, bool *last, void *ud) {
  gen *g = ud;
  int k = g->calls++;
  if (g->fail_at >= 0 && k == g->fail_at)
    return -5;
  if (k >= g->n) {
    *last = true;
    return 0;
  }
  in[0][0] = (float)k;
  in[0][1] = k + 0.5f;
  label[0][0] = (float)k;
  return 0;
}

static void test_generator_batches(void **state) {
  (void)state;
  gen g = {7, -1, 0};
  nnt_dataset *d;
  nnt_err e = {0};
  assert_int_equal(nnt_dataset_create_generator(gen_cb, &g, &d, &e), NNT_OK);
  nnt_ds_shape s = shape(2, 1);
  assert_int_equal(nnt_dataset_prepare(d, &s, 3, 1, &e), NNT_OK);
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
  float in[6], lab[3], *pi[] = {in}, *pl[] = {lab};
  for (int b = 0; b < 2; b++) {
    assert_int_equal(nnt_dataset_next_batch(d, pi, pl, &e), NNT_OK);
    for (int s2 = 0; s2 < 3; s2++) {
      assert_float_equal(in[2 * s2], 3 * b + s2, 0);
      assert_float_equal(in[2 * s2 + 1], 3 * b + s2 + 0.5f, 0);
      assert_float_equal(lab[s2], 3 * b + s2, 0);
    }
  }
  /* the 7th sample is a partial batch: dropped */
  assert_int_equal(nnt_dataset_next_batch(d, pi, pl, &e), NNT_ERR_EOD);
  nnt_dataset_destroy(d);
}

static void test_generator_error_no_hang(void **state) {
  (void)state;
  for (int fail_at = 0; fail_at < 40; fail_at += 13) {
    gen g = {1000, fail_at, 0};
    nnt_dataset *d;
    nnt_err e = {0};
    assert_int_equal(nnt_dataset_create_generator(gen_cb, &g, &d, &e), NNT_OK);
    assert_int_equal(nnt_dataset_set_property(d, "buffer_size", "2", &e), NNT_OK);
    nnt_ds_shape s = shape(2, 1);
    assert_int_equal(nnt_dataset_prepare(d, &s, 2, 1, &e), NNT_OK);
    assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
    float in[4], lab[2], *pi[] = {in}, *pl[] = {lab};
    int rc, batches = 0;
    while ((rc = nnt_dataset_next_batch(d, pi, pl, &e)) == NNT_OK)
      batches++;
    assert_int_equal(rc, -5);
    assert_int_equal(batches, fail_at / 2);
    tu_assert_contains(e.msg, "callback returned -5");
    nnt_dataset_destroy(d);
  }
}

static char *write_raw(const char *dir, size_t records, size_t in, size_t lab, size_t extra) {
  char *p = malloc(512);
  snprintf(p, 512, "%s/data.dat", dir);
  FILE *f = fopen(p, "wb");
  for (size_t r = 0; r < records; r++) {
    for (size_t i = 0; i < in; i++) {
      float v = (float)(r * 100 + i);
      fwrite(&v, 4, 1, f);
    }
    for (size_t i = 0; i < lab; i++) {
      float v = (float)(i == r % lab);
      fwrite(&v, 4, 1, f);
    }
  }
  fwrite("xyz", 1, extra, f);
  fclose(f);
  return p;
}

static void read_epoch(nnt_dataset *d, size_t batches, size_t batch, float *first_vals) {
  nnt_err e = {0};
  float in[64], lab[64], *pi[] = {in}, *pl[] = {lab};
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
  for (size_t b = 0; b < batches; b++) {
    assert_int_equal(nnt_dataset_next_batch(d, pi, pl, &e), NNT_OK);
    for (size_t s = 0; s < batch; s++)
      first_vals[b * batch + s] = in[s * 3];
  }
  assert_int_equal(nnt_dataset_next_batch(d, pi, pl, &e), NNT_ERR_EOD);
}

static void test_raw_file(void **state) {
  (void)state;
  char *dir = tu_mkdtemp();
  char *path = write_raw(dir, 10, 3, 2, 0);
  nnt_dataset *d;
  nnt_err e = {0};
  assert_int_equal(nnt_dataset_create_file(path, &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_set_property(d, "shuffle", "false", &e), NNT_OK);
  nnt_ds_shape s = shape(3, 2);
  assert_int_equal(nnt_dataset_prepare(d, &s, 4, 1, &e), NNT_OK);
  assert_int_equal(nnt_dataset_samples(d), 10);
  float v[8];
  read_epoch(d, 2, 4, v);
  for (int i = 0; i < 8; i++)
    assert_float_equal(v[i], 100 * i, 0);
  /* shuffled: a permutation, the same for the same seed, another for another */
  assert_int_equal(nnt_dataset_set_property(d, "shuffle", "true", &e), NNT_OK);
  float a[8], b[8], c[8];
  nnt_dataset *d2;
  assert_int_equal(nnt_dataset_create_file(path, &d2, &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d, &s, 4, 7, &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d2, &s, 4, 7, &e), NNT_OK);
  read_epoch(d, 2, 4, a);
  read_epoch(d2, 2, 4, b);
  assert_memory_equal(a, b, sizeof a);
  read_epoch(d, 2, 4, c); /* the next epoch reshuffles */
  assert_memory_not_equal(a, c, sizeof a);
  int seen[10] = {0};
  for (int i = 0; i < 8; i++)
    seen[(int)a[i] / 100]++;
  for (int i = 0; i < 10; i++)
    assert_true(seen[i] <= 1);
  nnt_dataset_destroy(d);
  nnt_dataset_destroy(d2);
  /* a file that is not whole records */
  free(path);
  path = write_raw(dir, 10, 3, 2, 3);
  assert_int_equal(nnt_dataset_create_file(path, &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d, &s, 4, 1, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, path);
  tu_assert_contains(e.msg, "whole number");
  nnt_dataset_destroy(d);
  assert_int_equal(nnt_dataset_create_file("/nonexistent/x.dat", &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d, &s, 4, 1, &e), NNT_ERR_IO);
  tu_assert_contains(e.msg, "/nonexistent/x.dat");
  nnt_dataset_destroy(d);
  free(path);
  tu_rmdir(dir);
  free(dir);
}

static void write_idx(const char *path, int gz, uint8_t type, const uint32_t *dims, int nd,
                      const uint8_t *data, size_t n) {
  uint8_t hdr[4 + 16] = {0, 0, type, (uint8_t)nd};
  for (int i = 0; i < nd; i++) {
    hdr[4 + 4 * i] = dims[i] >> 24, hdr[5 + 4 * i] = dims[i] >> 16;
    hdr[6 + 4 * i] = dims[i] >> 8, hdr[7 + 4 * i] = dims[i];
  }
  gzFile f = gzopen(path, gz ? "wb" : "wbT");
  gzwrite(f, hdr, 4 + 4 * nd);
  gzwrite(f, data, (unsigned)n);
  gzclose(f);
}

static void test_idx(void **state) {
  (void)state;
  char *dir = tu_mkdtemp(), img[512], lab[512];
  uint8_t pix[6 * 4], labels[6] = {0, 1, 2, 0, 1, 2};
  for (int i = 0; i < 24; i++)
    pix[i] = (uint8_t)(i * 10);
  uint32_t idims[] = {6, 2, 2}, ldims[] = {6};
  for (int gz = 0; gz < 2; gz++) {
    snprintf(img, sizeof img, "%s/img%d", dir, gz);
    snprintf(lab, sizeof lab, "%s/lab%d", dir, gz);
    write_idx(img, gz, 0x08, idims, 3, pix, sizeof pix);
    write_idx(lab, gz, 0x08, ldims, 1, labels, sizeof labels);
    nnt_dataset *d;
    nnt_err e = {0};
    assert_int_equal(nnt_dataset_create_idx(img, lab, &d, &e), NNT_OK);
    assert_int_equal(nnt_dataset_set_property(d, "shuffle", "false", &e), NNT_OK);
    nnt_ds_shape s = shape(4, 3);
    if (nnt_dataset_prepare(d, &s, 2, 1, &e))
      fail_msg("%s", e.msg);
    assert_int_equal(nnt_dataset_samples(d), 6);
    assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
    float in[8], l[6], *pi[] = {in}, *pl[] = {l};
    assert_int_equal(nnt_dataset_next_batch(d, pi, pl, &e), NNT_OK);
    assert_float_equal(in[5], 50 / 255.0f, 1e-7);
    assert_float_equal(l[0], 1, 0);
    assert_float_equal(l[4], 1, 0); /* sample 1 is class 1 */
    nnt_dataset_destroy(d);
  }
  /* the model's input size must match the images */
  nnt_dataset *d;
  nnt_err e = {0};
  nnt_ds_shape bad = shape(5, 3);
  assert_int_equal(nnt_dataset_create_idx(img, lab, &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d, &bad, 2, 1, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, img);
  nnt_dataset_destroy(d);
  /* labels past the classes, counts that differ, bad magic */
  nnt_ds_shape two = shape(4, 2);
  assert_int_equal(nnt_dataset_create_idx(img, lab, &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d, &two, 2, 1, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "out of range");
  nnt_dataset_destroy(d);
  uint32_t five[] = {5};
  write_idx(lab, 1, 0x08, five, 1, labels, 5);
  nnt_ds_shape s = shape(4, 3);
  assert_int_equal(nnt_dataset_create_idx(img, lab, &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d, &s, 2, 1, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "6 images");
  nnt_dataset_destroy(d);
  FILE *f = fopen(lab, "wb");
  fputs("not an idx file", f);
  fclose(f);
  assert_int_equal(nnt_dataset_create_idx(img, lab, &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d, &s, 2, 1, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "magic");
  nnt_dataset_destroy(d);
  tu_rmdir(dir);
  free(dir);
}

static void test_fashion_mnist(void **state) {
  (void)state;
  nnt_dataset *d;
  nnt_err e = {0};
  assert_int_equal(
      nnt_dataset_create_idx("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz",
                             "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz", &d,
                             &e),
      NNT_OK);
  nnt_ds_shape s = shape(784, 10);
  if (nnt_dataset_prepare(d, &s, 100, 1, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(nnt_dataset_samples(d), 10000);
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
  float *in = malloc(100 * 784 * 4), lab[1000], *pi[] = {in}, *pl[] = {lab};
  size_t batches = 0;
  while (nnt_dataset_next_batch(d, pi, pl, &e) == NNT_OK) {
    for (size_t i = 0; i < 100 * 784; i++)
      assert_true(in[i] >= 0 && in[i] <= 1);
    for (size_t r = 0; r < 100; r++) {
      float sum = 0;
      for (int c = 0; c < 10; c++)
        sum += lab[r * 10 + c];
      assert_float_equal(sum, 1, 0);
    }
    batches++;
  }
  assert_int_equal(batches, 100);
  free(in);
  nnt_dataset_destroy(d);
}

static void test_synthetic_and_early_stop(void **state) {
  (void)state;
  nnt_dataset *a, *b;
  nnt_err e = {0};
  assert_int_equal(nnt_dataset_create_synthetic(40, 3, &a, &e), NNT_OK);
  assert_int_equal(nnt_dataset_create_synthetic(40, 3, &b, &e), NNT_OK);
  assert_int_equal(nnt_dataset_set_property(a, "buffer_size", "1", &e), NNT_OK);
  nnt_ds_shape s = shape(3, 4);
  assert_int_equal(nnt_dataset_prepare(a, &s, 4, 9, &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(b, &s, 4, 9, &e), NNT_OK);
  float x[12], y[12], lx[16], ly[16], *pa[] = {x}, *pb[] = {y}, *la[] = {lx}, *lb[] = {ly};
  assert_int_equal(nnt_dataset_epoch_begin(a, &e), NNT_OK);
  assert_int_equal(nnt_dataset_epoch_begin(b, &e), NNT_OK);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(nnt_dataset_next_batch(a, pa, la, &e), NNT_OK);
    assert_int_equal(nnt_dataset_next_batch(b, pb, lb, &e), NNT_OK);
    assert_memory_equal(x, y, sizeof x);
    assert_memory_equal(lx, ly, sizeof lx);
  }
  /* stop mid-epoch while the producer waits on a full queue, start again */
  nnt_dataset_epoch_end(a);
  assert_int_equal(nnt_dataset_next_batch(a, pa, la, &e), NNT_ERR_INVAL);
  assert_int_equal(nnt_dataset_epoch_begin(a, &e), NNT_OK);
  size_t n = 0;
  while (nnt_dataset_next_batch(a, pa, la, &e) == NNT_OK)
    n++;
  assert_int_equal(n, 10);
  nnt_dataset_destroy(a); /* b's producer is still blocked: destroy stops it */
  nnt_dataset_destroy(b);

}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_generator_batches), cmocka_unit_test(test_generator_error_no_hang),
      cmocka_unit_test(test_raw_file),          cmocka_unit_test(test_idx),
      cmocka_unit_test(test_fashion_mnist),     cmocka_unit_test(test_synthetic_and_early_stop)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
