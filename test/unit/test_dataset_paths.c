/* Dataset paths that are not regular files (FIFO, folder, device) are
 * refused without blocking, and IDX headers that announce more data than
 * their file holds fail as truncated before allocating what they announce. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nntrainer/dataset.h"

static void prepare_fails(nnt_dataset *d, const nnt_ds_shape *s, int code, const char *n1,
                          const char *n2) {
  nnt_err e = {0};
  int rc = nnt_dataset_prepare(d, s, 2, 1, &e);
  if (rc != code)
    fail_msg("got %d (%s), want %d", rc, e.msg, code);
  tu_assert_contains(e.msg, n1);
  tu_assert_contains(e.msg, n2);
}

static void test_paths_not_regular(void **state) {
  (void)state;
  char *dir = tu_mkdtemp(), fifo[512], img[512], lab[512];
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  snprintf(img, sizeof img, "%s/img", dir);
  snprintf(lab, sizeof lab, "%s/lab", dir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  uint8_t pix[24] = {0}, labels[6] = {0};
  uint32_t idims[] = {6, 2, 2}, ldims[] = {6};
  tu_write_idx(img, 0, 0x08, idims, 3, pix, sizeof pix);
  tu_write_idx(lab, 1, 0x08, ldims, 1, labels, sizeof labels);
  const struct {
    const char *path, *needle;
  } cases[] = {
      {fifo, "is a FIFO, not a regular file"},
      {dir, "is a directory, not a regular file"},
      {"/dev/zero", "is a character device, not a regular file"},
      {"/dev/null", "is a character device, not a regular file"},
  };
  nnt_ds_shape raw = tu_ds_shape1(3, 2), idx = tu_ds_shape1(4, 3);
  nnt_err e = {0};
  alarm(30); /* an open that waited for the FIFO's writer would end the test here */
  for (size_t i = 0; i < NNT_ARRAY_LEN(cases); i++) {
    nnt_dataset *d;
    /* NNTrainer's raw file */
    assert_int_equal(nnt_dataset_create_file(cases[i].path, &d, &e), NNT_OK);
    prepare_fails(d, &raw, NNT_ERR_INVAL, cases[i].path, cases[i].needle);
    nnt_dataset_destroy(d);
    /* IDX images, then labels */
    assert_int_equal(nnt_dataset_create_idx(cases[i].path, lab, &d, &e), NNT_OK);
    prepare_fails(d, &idx, NNT_ERR_INVAL, cases[i].path, cases[i].needle);
    nnt_dataset_destroy(d);
    assert_int_equal(nnt_dataset_create_idx(img, cases[i].path, &d, &e), NNT_OK);
    prepare_fails(d, &idx, NNT_ERR_INVAL, cases[i].path, cases[i].needle);
    nnt_dataset_destroy(d);
  }
  alarm(0);
  /* the same files, regular, load */
  nnt_dataset *d;
  assert_int_equal(nnt_dataset_create_idx(img, lab, &d, &e), NNT_OK);
  if (nnt_dataset_prepare(d, &idx, 2, 1, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(nnt_dataset_samples(d), 6);
  nnt_dataset_destroy(d);
  tu_rmdir(dir);
  free(dir);
}

/* Headers announcing 2^32 - 1 images of 1024 x 1024 floats (16 PiB: no
 * machine allocates that) over a few bytes of data: plain and gzip files
 * must fail as truncated, which they can only do without allocating it. */
static void test_idx_lying_headers(void **state) {
  (void)state;
  char *dir = tu_mkdtemp(), img[512], lab[512];
  snprintf(img, sizeof img, "%s/img", dir);
  snprintf(lab, sizeof lab, "%s/lab", dir);
  uint8_t data[4096] = {0};
  uint32_t huge[] = {UINT32_MAX, 1024, 1024}, many[] = {UINT32_MAX};
  nnt_ds_shape s = tu_ds_shape1(1024 * 1024, 10);
  for (int gz = 0; gz < 2; gz++) {
    tu_write_idx(img, gz, 0x0D, huge, 3, data, sizeof data);
    tu_write_idx(lab, gz, 0x08, many, 1, data, 100);
    nnt_dataset *d;
    nnt_err e = {0};
    assert_int_equal(nnt_dataset_create_idx(img, lab, &d, &e), NNT_OK);
    prepare_fails(d, &s, NNT_ERR_INVAL, img, "is truncated: its header announces "
                                             "18014398505287680 bytes of data, it holds 4096");
    nnt_dataset_destroy(d);
    /* labels that lie, images that do not */
    uint32_t two[] = {2, 1024, 1024};
    uint8_t *px = calloc(2 * 1024 * 1024, 4);
    tu_write_idx(img, gz, 0x0D, two, 3, px, 2 * 1024 * 1024 * 4);
    free(px);
    uint32_t ltwo[] = {2};
    tu_write_idx(lab, gz, 0x08, ltwo, 1, data, 1);
    assert_int_equal(nnt_dataset_create_idx(img, lab, &d, &e), NNT_OK);
    prepare_fails(d, &s, NNT_ERR_INVAL, lab, "announces 2 bytes of data, it holds 1");
    nnt_dataset_destroy(d);
  }
  /* a gzip file larger than the first read buffer (1 MiB) grows it and
   * loads whole: 3 images of 512 x 512 floats */
  uint32_t three[] = {3, 512, 512}, lthree[] = {3};
  size_t n = 3 * 512 * 512 * 4;
  uint8_t *px = malloc(n);
  for (size_t i = 0; i < n; i += 4) { /* big-endian float i / 4 */
    float v = (float)(i / 4);
    uint32_t u;
    memcpy(&u, &v, 4);
    px[i] = (uint8_t)(u >> 24), px[i + 1] = (uint8_t)(u >> 16);
    px[i + 2] = (uint8_t)(u >> 8), px[i + 3] = (uint8_t)u;
  }
  tu_write_idx(img, 1, 0x0D, three, 3, px, n);
  tu_write_idx(lab, 1, 0x08, lthree, 1, data, 3);
  free(px);
  nnt_dataset *d;
  nnt_err e = {0};
  nnt_ds_shape s3 = tu_ds_shape1(512 * 512, 10);
  assert_int_equal(nnt_dataset_create_idx(img, lab, &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_set_property(d, "shuffle", "false", &e), NNT_OK);
  if (nnt_dataset_prepare(d, &s3, 1, 1, &e))
    fail_msg("%s", e.msg);
  float *x = malloc(512 * 512 * 4), l[10], *pi[] = {x}, *pl[] = {l};
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
  for (int k = 0; k < 3; k++) {
    int end = -1;
    assert_int_equal(nnt_dataset_next_batch(d, pi, pl, &end, &e), NNT_OK);
    assert_int_equal(end, 0);
    assert_true(x[0] == (float)(k * 512 * 512));
    assert_true(x[512 * 512 - 1] == (float)((k + 1) * 512 * 512 - 1));
  }
  nnt_dataset_destroy(d);
  free(x);
  tu_rmdir(dir);
  free(dir);
}

/* Every allocation of an IDX load (plain and gzip) fails in turn: prepare
 * says NNT_ERR_NOMEM, leaks nothing (the sanitizer build), then succeeds. */
static void test_idx_allocation_failures(void **state) {
  (void)state;
  char *dir = tu_mkdtemp(), img[512], lab[512];
  snprintf(img, sizeof img, "%s/img", dir);
  snprintf(lab, sizeof lab, "%s/lab", dir);
  uint8_t pix[24] = {0}, labels[6] = {0, 1, 2, 0, 1, 2};
  uint32_t idims[] = {6, 2, 2}, ldims[] = {6};
  nnt_ds_shape s = tu_ds_shape1(4, 3);
  for (int gz = 0; gz < 2; gz++) {
    tu_write_idx(img, gz, 0x08, idims, 3, pix, sizeof pix);
    tu_write_idx(lab, gz, 0x08, ldims, 1, labels, sizeof labels);
    long n, fails = 0;
    for (n = 0; n < 1000; n++) {
      nnt_dataset *d;
      nnt_err e = {0};
      assert_int_equal(nnt_dataset_create_idx(img, lab, &d, &e), NNT_OK);
      nnt_alloc_fail_after(n);
      int rc = nnt_dataset_prepare(d, &s, 2, 1, &e);
      nnt_alloc_fail_after(-1);
      if (rc == NNT_OK)
        assert_int_equal(nnt_dataset_samples(d), 6);
      else if (rc != NNT_ERR_NOMEM)
        fail_msg("allocation %ld: %s", n, e.msg);
      nnt_dataset_destroy(d);
      if (rc == NNT_OK)
        break;
      fails++;
    }
    assert_true(fails >= 2); /* the images and the labels at least */
  }
  tu_rmdir(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_paths_not_regular),
      cmocka_unit_test(test_idx_lying_headers),
      cmocka_unit_test(test_idx_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
