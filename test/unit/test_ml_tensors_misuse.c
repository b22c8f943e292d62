/* The ML common API misused: NULL arguments, out-of-range values, destroyed
 * and wrong-kind handles, allocation failure, concurrent use of the
 * registry; and ml_error() and ml_strerror(). */
#include "test_util.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/src/api_internal.h"
#include "capi_harness.h"
#include "ml-api-common.h"

/* ---- misuse ---- */

static void test_misuse_null_and_range(void **state) {
  (void)state;
  const int E = ML_ERROR_INVALID_PARAMETER;
  ml_tensors_info_h info = sample_info(), empty = new_info(0);
  ml_tensors_data_h data = NULL;
  OK(ml_tensors_data_create(info, &data));
  unsigned u;
  bool b;
  char *name;
  ml_tensor_type_e type;
  ml_tensor_dimension dim = {1};
  size_t size;
  void *raw;
  float f[32] = {0};

  /* NULL for every pointer argument */
  EXPECT_FAIL(ml_tensors_info_create(NULL), E, "ml_tensors_info_create: info");
  EXPECT_FAIL(ml_tensors_info_create_extended(NULL), E, "ml_tensors_info_create_extended: info");
  EXPECT_FAIL(ml_tensors_info_destroy(NULL), E, "ml_tensors_info_destroy: info");
  EXPECT_FAIL(ml_tensors_info_validate(NULL, &b), E, "ml_tensors_info_validate: info");
  EXPECT_FAIL(ml_tensors_info_validate(info, NULL), E, "ml_tensors_info_validate: valid");
  EXPECT_FAIL(ml_tensors_info_clone(NULL, info), E, "ml_tensors_info_clone: dest");
  EXPECT_FAIL(ml_tensors_info_clone(empty, NULL), E, "ml_tensors_info_clone: src");
  EXPECT_FAIL(ml_tensors_info_set_count(NULL, 1), E, "ml_tensors_info_set_count: info");
  EXPECT_FAIL(ml_tensors_info_get_count(NULL, &u), E, "ml_tensors_info_get_count: info");
  EXPECT_FAIL(ml_tensors_info_get_count(info, NULL), E, "ml_tensors_info_get_count: count");
  EXPECT_FAIL(ml_tensors_info_set_tensor_name(NULL, 0, "x"), E,
              "ml_tensors_info_set_tensor_name: info");
  EXPECT_FAIL(ml_tensors_info_get_tensor_name(NULL, 0, &name), E,
              "ml_tensors_info_get_tensor_name: info");
  EXPECT_FAIL(ml_tensors_info_get_tensor_name(info, 0, NULL), E,
              "ml_tensors_info_get_tensor_name: name");
  EXPECT_FAIL(ml_tensors_info_set_tensor_type(NULL, 0, ML_TENSOR_TYPE_INT8), E,
              "ml_tensors_info_set_tensor_type: info");
  EXPECT_FAIL(ml_tensors_info_get_tensor_type(NULL, 0, &type), E,
              "ml_tensors_info_get_tensor_type: info");
  EXPECT_FAIL(ml_tensors_info_get_tensor_type(info, 0, NULL), E,
              "ml_tensors_info_get_tensor_type: type");
  EXPECT_FAIL(ml_tensors_info_set_tensor_dimension(NULL, 0, dim), E,
              "ml_tensors_info_set_tensor_dimension: info");
  EXPECT_FAIL(ml_tensors_info_set_tensor_dimension(info, 0, NULL), E,
              "ml_tensors_info_set_tensor_dimension: dimension");
  EXPECT_FAIL(ml_tensors_info_get_tensor_dimension(NULL, 0, dim), E,
              "ml_tensors_info_get_tensor_dimension: info");
  EXPECT_FAIL(ml_tensors_info_get_tensor_dimension(info, 0, NULL), E,
              "ml_tensors_info_get_tensor_dimension: dimension");
  EXPECT_FAIL(ml_tensors_info_get_tensor_size(NULL, 0, &size), E,
              "ml_tensors_info_get_tensor_size: info");
  EXPECT_FAIL(ml_tensors_info_get_tensor_size(info, 0, NULL), E,
              "ml_tensors_info_get_tensor_size: data_size");
  EXPECT_FAIL(ml_tensors_info_get_tensor_size(info, -1, NULL), E,
              "ml_tensors_info_get_tensor_size: data_size");
  EXPECT_FAIL(ml_tensors_data_create(NULL, &data), E, "ml_tensors_data_create: info");
  EXPECT_FAIL(ml_tensors_data_create(info, NULL), E, "ml_tensors_data_create: data");
  EXPECT_FAIL(ml_tensors_data_destroy(NULL), E, "ml_tensors_data_destroy: data");
  EXPECT_FAIL(ml_tensors_data_get_tensor_data(NULL, 0, &raw, &size), E,
              "ml_tensors_data_get_tensor_data: data");
  EXPECT_FAIL(ml_tensors_data_get_tensor_data(data, 0, NULL, &size), E,
              "ml_tensors_data_get_tensor_data: raw_data");
  EXPECT_FAIL(ml_tensors_data_get_tensor_data(data, 0, &raw, NULL), E,
              "ml_tensors_data_get_tensor_data: data_size");
  EXPECT_FAIL(ml_tensors_data_set_tensor_data(NULL, 0, f, 4), E,
              "ml_tensors_data_set_tensor_data: data");
  EXPECT_FAIL(ml_tensors_data_set_tensor_data(data, 0, NULL, 4), E,
              "ml_tensors_data_set_tensor_data: raw_data");

  /* out-of-range counts, indices, types and sizes */
  EXPECT_FAIL(ml_tensors_info_set_count(info, 0), E, "count 0 is out of range (1 to 16)");
  EXPECT_FAIL(ml_tensors_info_set_count(info, 17), E, "ml_tensors_info_set_count: count 17");
  EXPECT_FAIL(ml_tensors_info_set_count(info, 0xffffffffu), E, "count 4294967295");
  u = 0;
  OK(ml_tensors_info_get_count(info, &u));
  assert_int_equal(u, 3); /* unchanged */
  EXPECT_FAIL(ml_tensors_info_set_tensor_name(info, 3, "x"), E,
              "ml_tensors_info_set_tensor_name: index 3");
  EXPECT_FAIL(ml_tensors_info_set_tensor_name(empty, 0, "x"), E, "index 0 is out of range");
  EXPECT_FAIL(ml_tensors_info_get_tensor_name(info, 16, &name), E,
              "ml_tensors_info_get_tensor_name: index 16");
  EXPECT_FAIL(ml_tensors_info_set_tensor_type(info, 3, ML_TENSOR_TYPE_INT8), E,
              "ml_tensors_info_set_tensor_type: index 3");
  EXPECT_FAIL(ml_tensors_info_get_tensor_type(info, 100, &type), E,
              "ml_tensors_info_get_tensor_type: index 100");
  EXPECT_FAIL(ml_tensors_info_set_tensor_dimension(info, 3, dim), E,
              "ml_tensors_info_set_tensor_dimension: index 3");
  EXPECT_FAIL(ml_tensors_info_get_tensor_dimension(info, 0xffffffffu, dim), E,
              "ml_tensors_info_get_tensor_dimension: index 4294967295");
  EXPECT_FAIL(ml_tensors_info_get_tensor_size(info, 3, &size), E,
              "ml_tensors_info_get_tensor_size: index 3");
  EXPECT_FAIL(ml_tensors_info_get_tensor_size(info, -2, &size), E, "index -2");
  EXPECT_FAIL(ml_tensors_info_get_tensor_size(empty, 0, &size), E, "index 0");
  EXPECT_FAIL(ml_tensors_info_set_tensor_type(info, 0, ML_TENSOR_TYPE_UNKNOWN), E,
              "ml_tensors_info_set_tensor_type: type 11");
  EXPECT_FAIL(ml_tensors_info_set_tensor_type(info, 0, (ml_tensor_type_e)12), E, "type 12");
  EXPECT_FAIL(ml_tensors_info_set_tensor_type(info, 0, (ml_tensor_type_e)-1), E, "type -1");
  EXPECT_FAIL(ml_tensors_info_set_tensor_type(info, 0, ML_TENSOR_TYPE_FLOAT16),
              ML_ERROR_NOT_SUPPORTED, "ml_tensors_info_set_tensor_type");
  OK(ml_tensors_info_get_tensor_type(info, 0, &type));
  assert_int_equal(type, ML_TENSOR_TYPE_FLOAT32); /* unchanged */
  EXPECT_FAIL(ml_tensors_data_get_tensor_data(data, 3, &raw, &size), E,
              "ml_tensors_data_get_tensor_data: index 3");
  EXPECT_FAIL(ml_tensors_data_set_tensor_data(data, 3, f, 4), E,
              "ml_tensors_data_set_tensor_data: index 3");
  EXPECT_FAIL(ml_tensors_data_set_tensor_data(data, 0, f, 0), E, "data_size 0");
  EXPECT_FAIL(ml_tensors_data_set_tensor_data(data, 0, f, 97), E,
              "data_size 97 is out of range (1 to 96");
  OK(ml_tensors_data_set_tensor_data(data, 0, f, 96));

  /* data_create needs a valid info, and leaves *data alone on failure */
  ml_tensors_data_h d2 = (ml_tensors_data_h)0x1;
  EXPECT_FAIL(ml_tensors_data_create(empty, &d2), E, "no tensors");
  OK(ml_tensors_info_set_count(empty, 1));
  EXPECT_FAIL(ml_tensors_data_create(empty, &d2), E, "tensor 0 has no type");
  OK(ml_tensors_info_set_tensor_type(empty, 0, ML_TENSOR_TYPE_INT8));
  EXPECT_FAIL(ml_tensors_data_create(empty, &d2), E, "tensor 0 has no dimension");
  assert_ptr_equal(d2, (ml_tensors_data_h)0x1);

  OK(ml_tensors_data_destroy(data));
  OK(ml_tensors_info_destroy(info));
  OK(ml_tensors_info_destroy(empty));
}

/* Every function given as_info or as_data, which are not live handles of the
 * kind it wants; each must refuse them with INVALID_PARAMETER and a message
 * with needle. good is a live info (created before any handle was destroyed,
 * so that the allocator cannot have given it a destroyed handle's address). */
static void refuse_everywhere(void *as_info, void *as_data, ml_tensors_info_h good,
                              const char *needle) {
  const int E = ML_ERROR_INVALID_PARAMETER;
  unsigned u = 7;
  bool b = true;
  char *name = NULL;
  ml_tensor_type_e type = ML_TENSOR_TYPE_INT8;
  ml_tensor_dimension dim = {1};
  size_t size = 5;
  void *raw = NULL;
  float f[4] = {0};
  ml_tensors_data_h out = NULL;

  EXPECT_FAIL(ml_tensors_info_destroy(as_info), E, needle);
  EXPECT_FAIL(ml_tensors_info_validate(as_info, &b), E, needle);
  EXPECT_FAIL(ml_tensors_info_clone(as_info, good), E, needle);
  EXPECT_FAIL(ml_tensors_info_clone(good, as_info), E, needle);
  EXPECT_FAIL(ml_tensors_info_set_count(as_info, 1), E, needle);
  EXPECT_FAIL(ml_tensors_info_get_count(as_info, &u), E, needle);
  EXPECT_FAIL(ml_tensors_info_set_tensor_name(as_info, 0, "x"), E, needle);
  EXPECT_FAIL(ml_tensors_info_get_tensor_name(as_info, 0, &name), E, needle);
  EXPECT_FAIL(ml_tensors_info_set_tensor_type(as_info, 0, ML_TENSOR_TYPE_INT8), E, needle);
  EXPECT_FAIL(ml_tensors_info_get_tensor_type(as_info, 0, &type), E, needle);
  EXPECT_FAIL(ml_tensors_info_set_tensor_dimension(as_info, 0, dim), E, needle);
  EXPECT_FAIL(ml_tensors_info_get_tensor_dimension(as_info, 0, dim), E, needle);
  EXPECT_FAIL(ml_tensors_info_get_tensor_size(as_info, 0, &size), E, needle);
  EXPECT_FAIL(ml_tensors_info_get_tensor_size(as_info, -1, &size), E, needle);
  EXPECT_FAIL(ml_tensors_data_create(as_info, &out), E, needle);
  EXPECT_FAIL(ml_tensors_data_destroy(as_data), E, needle);
  EXPECT_FAIL(ml_tensors_data_get_tensor_data(as_data, 0, &raw, &size), E, needle);
  EXPECT_FAIL(ml_tensors_data_set_tensor_data(as_data, 0, f, 4), E, needle);
  /* outputs untouched */
  assert_int_equal(u, 7);
  assert_true(b);
  assert_null(name);
  assert_int_equal(type, ML_TENSOR_TYPE_INT8);
  assert_int_equal(size, 5);
  assert_null(raw);
  assert_null(out);
}

static void test_misuse_destroyed_and_wrong_kind(void **state) {
  (void)state;
  size_t infos = nnt_h_count(NNT_H_TENSORS_INFO), datas = nnt_h_count(NNT_H_TENSORS_DATA);
  ml_tensors_info_h info = sample_info(), good = new_info(1);
  ml_tensors_data_h data = NULL;
  OK(ml_tensors_data_create(info, &data));

  /* the wrong kind: an info where data is wanted and the reverse */
  refuse_everywhere(data, info, good, "not a tensors");
  refuse_everywhere(data, info, good, "the handle is a tensors");
  /* a pointer that was never a handle */
  int foreign[64] = {0};
  refuse_everywhere(foreign, foreign, good, "not a live handle");

  /* destroyed handles (and double destroy); nothing is allocated between
   * the destroys and the uses, so the addresses cannot be live again */
  OK(ml_tensors_data_destroy(data));
  OK(ml_tensors_info_destroy(info));
  refuse_everywhere(info, data, good, "not a live handle");
  EXPECT_FAIL(ml_tensors_info_destroy(info), ML_ERROR_INVALID_PARAMETER,
              "ml_tensors_info_destroy: info");
  EXPECT_FAIL(ml_tensors_data_destroy(data), ML_ERROR_INVALID_PARAMETER,
              "ml_tensors_data_destroy: data");
  OK(ml_tensors_info_destroy(good));
  assert_int_equal(nnt_h_count(NNT_H_TENSORS_INFO), infos);
  assert_int_equal(nnt_h_count(NNT_H_TENSORS_DATA), datas);
}

/* ---- allocation failure ---- */

static void test_alloc_failure(void **state) {
  (void)state;
  size_t infos = nnt_h_count(NNT_H_TENSORS_INFO), datas = nnt_h_count(NNT_H_TENSORS_DATA);
  ml_tensors_info_h info = sample_info();

  /* the first allocation of data_create */
  ml_tensors_data_h data = (ml_tensors_data_h)0x1;
  nnt_alloc_fail_after(0);
  int rc = ml_tensors_data_create(info, &data);
  nnt_alloc_fail_after(-1);
  assert_int_equal(rc, ML_ERROR_OUT_OF_MEMORY);
  expect_msg("ml_tensors_data_create");
  assert_ptr_equal(data, (ml_tensors_data_h)0x1);
  assert_int_equal(nnt_h_count(NNT_H_TENSORS_DATA), datas);

  /* every later allocation of it (names, buffers) until it succeeds */
  int failures = 0;
  for (long n = 1;; n++) {
    nnt_alloc_fail_after(n);
    rc = ml_tensors_data_create(info, &data);
    nnt_alloc_fail_after(-1);
    if (rc == ML_ERROR_NONE)
      break;
    assert_int_equal(rc, ML_ERROR_OUT_OF_MEMORY);
    expect_msg("ml_tensors_data_create");
    assert_ptr_equal(data, (ml_tensors_data_h)0x1);
    assert_int_equal(nnt_h_count(NNT_H_TENSORS_DATA), datas);
    failures++;
    assert_true(n < 100);
  }
  /* struct, two names, three buffers */
  assert_int_equal(failures, 5);
  OK(ml_tensors_data_destroy(data));

  /* info_create */
  ml_tensors_info_h other = (ml_tensors_info_h)0x1;
  nnt_alloc_fail_after(0);
  rc = ml_tensors_info_create(&other);
  nnt_alloc_fail_after(-1);
  assert_int_equal(rc, ML_ERROR_OUT_OF_MEMORY);
  expect_msg("ml_tensors_info_create");
  assert_ptr_equal(other, (ml_tensors_info_h)0x1);
  assert_int_equal(nnt_h_count(NNT_H_TENSORS_INFO), infos + 1);

  /* set_tensor_name keeps the old name */
  nnt_alloc_fail_after(0);
  rc = ml_tensors_info_set_tensor_name(info, 0, "new");
  nnt_alloc_fail_after(-1);
  assert_int_equal(rc, ML_ERROR_OUT_OF_MEMORY);
  expect_msg("ml_tensors_info_set_tensor_name");
  assert_name(info, 0, "a");

  /* get_tensor_name leaves *name alone */
  char *name = (char *)"untouched";
  nnt_alloc_fail_after(0);
  rc = ml_tensors_info_get_tensor_name(info, 0, &name);
  nnt_alloc_fail_after(-1);
  assert_int_equal(rc, ML_ERROR_OUT_OF_MEMORY);
  expect_msg("ml_tensors_info_get_tensor_name");
  assert_string_equal(name, "untouched");

  /* clone: dest unchanged when the second name cannot be copied */
  other = new_info(1);
  OK(ml_tensors_info_set_tensor_name(other, 0, "keep"));
  nnt_alloc_fail_after(1);
  rc = ml_tensors_info_clone(other, info);
  nnt_alloc_fail_after(-1);
  assert_int_equal(rc, ML_ERROR_OUT_OF_MEMORY);
  expect_msg("ml_tensors_info_clone");
  unsigned count = 0;
  OK(ml_tensors_info_get_count(other, &count));
  assert_int_equal(count, 1);
  assert_name(other, 0, "keep");

  OK(ml_tensors_info_destroy(other));
  OK(ml_tensors_info_destroy(info));
  assert_int_equal(nnt_h_count(NNT_H_TENSORS_INFO), infos);
}

/* ---- threads ---- */

#define THREAD_ROUNDS 10000

static void *churn(void *arg) {
  long bad = 0;
  for (int i = 0; i < THREAD_ROUNDS; i++) {
    ml_tensors_info_h info = NULL;
    unsigned count = 0;
    if (ml_tensors_info_create(&info) != ML_ERROR_NONE ||
        ml_tensors_info_set_count(info, 1 + (unsigned)(i % ML_TENSOR_SIZE_LIMIT)) ||
        ml_tensors_info_get_count(info, &count) ||
        count != 1 + (unsigned)(i % ML_TENSOR_SIZE_LIMIT) ||
        ml_tensors_info_destroy(info) != ML_ERROR_NONE)
      bad++;
  }
  *(long *)arg = bad;
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  size_t infos = nnt_h_count(NNT_H_TENSORS_INFO);
  pthread_t th[2];
  long bad[2] = {-1, -1};
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&th[i], NULL, churn, &bad[i]), 0);
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_join(th[i], NULL), 0);
  assert_int_equal(bad[0], 0);
  assert_int_equal(bad[1], 0);
  assert_int_equal(nnt_h_count(NNT_H_TENSORS_INFO), infos);
  assert_int_equal(nnt_h_count(NNT_H_TENSORS_INFO), 0);
}

/* The last error is per thread: a failure in another thread is not seen here. */
static void *fail_once(void *arg) {
  (void)arg;
  (void)ml_tensors_info_destroy(NULL);
  return NULL;
}

static void test_error_per_thread(void **state) {
  (void)state;
  (void)ml_error();
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, fail_once, NULL), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_null(ml_error());
}

/* ---- ml_error, ml_strerror ---- */

static void test_error_and_strerror(void **state) {
  (void)state;
  static const struct {
    int code;
    const char *text;
  } codes[] = {
      {ML_ERROR_NONE, "success"},
      {ML_ERROR_INVALID_PARAMETER, "invalid parameter"},
      {ML_ERROR_STREAMS_PIPE, "pipeline"},
      {ML_ERROR_TRY_AGAIN, "try again"},
      {ML_ERROR_UNKNOWN, "unknown"},
      {ML_ERROR_TIMED_OUT, "timed out"},
      {ML_ERROR_NOT_SUPPORTED, "not supported"},
      {ML_ERROR_PERMISSION_DENIED, "permission denied"},
      {ML_ERROR_OUT_OF_MEMORY, "out of memory"},
      {ML_ERROR_IO_ERROR, "input/output"},
  };
  for (size_t i = 0; i < NNT_ARRAY_LEN(codes); i++) {
    const char *s = ml_strerror(codes[i].code);
    assert_non_null(s);
    tu_assert_contains(s, codes[i].text);
  }
  assert_null(ml_strerror(12345));
  assert_null(ml_strerror(-1000));
  assert_null(ml_strerror(-35));
  /* the two codes of nntrainer-ext.h a run may return have names too */
  tu_assert_contains(ml_strerror(-34), "not finite");
  tu_assert_contains(ml_strerror(-125), "stopped");

  /* read once, then NULL; the text stays until the next ml_error() */
  (void)ml_error();
  assert_null(ml_error());
  assert_int_equal(ml_tensors_info_set_count(NULL, 1), ML_ERROR_INVALID_PARAMETER);
  const char *m = ml_error();
  assert_non_null(m);
  tu_assert_contains(m, "ml_tensors_info_set_count: info: the handle is NULL");
  assert_null(ml_error());
  /* a later failure replaces an unread one */
  ml_tensors_info_h info = new_info(0);
  assert_int_equal(ml_tensors_info_set_count(info, 0), ML_ERROR_INVALID_PARAMETER);
  assert_int_equal(ml_tensors_info_set_count(info, 17), ML_ERROR_INVALID_PARAMETER);
  m = ml_error();
  assert_non_null(m);
  tu_assert_contains(m, "ml_tensors_info_set_count: count 17 is out of range (1 to 16)");
  /* a success after a failure leaves the failure's message */
  assert_int_equal(ml_tensors_info_set_count(info, 0), ML_ERROR_INVALID_PARAMETER);
  OK(ml_tensors_info_set_count(info, 1));
  expect_msg("count 0");
  OK(ml_tensors_info_destroy(info));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_misuse_null_and_range),
      cmocka_unit_test(test_misuse_destroyed_and_wrong_kind),
      cmocka_unit_test(test_alloc_failure),
      cmocka_unit_test(test_threads),
      cmocka_unit_test(test_error_per_thread),
      cmocka_unit_test(test_error_and_strerror),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
