/* The ML common API (ml-api-common.h): tensors info and tensors data handles
 * and their values, and the helpers of api/src/api_internal.h that the rest
 * of the C API builds results with. Misuse is in test_ml_tensors_misuse.c. */
#include "test_util.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/src/api_internal.h"
#include "capi_harness.h"
#include "ml-api-common.h"

/* ---- info ---- */

static void test_info_create_defaults(void **state) {
  (void)state;
  size_t infos = nnt_h_count(NNT_H_TENSORS_INFO);
  ml_tensors_info_h a = NULL, b = NULL;
  OK(ml_tensors_info_create(&a));
  OK(ml_tensors_info_create_extended(&b));
  assert_non_null(a);
  assert_non_null(b);
  assert_ptr_not_equal(a, b);
  assert_int_equal(nnt_h_count(NNT_H_TENSORS_INFO), infos + 2);
  ml_tensors_info_h both[] = {a, b};
  for (int k = 0; k < 2; k++) {
    unsigned count = 99;
    OK(ml_tensors_info_get_count(both[k], &count));
    assert_int_equal(count, 0);
    bool valid = true;
    OK(ml_tensors_info_validate(both[k], &valid));
    assert_false(valid);
    size_t size = 99;
    OK(ml_tensors_info_get_tensor_size(both[k], -1, &size));
    assert_int_equal(size, 0);
    /* every tensor: unknown type, no dims, no name */
    OK(ml_tensors_info_set_count(both[k], ML_TENSOR_SIZE_LIMIT));
    for (unsigned i = 0; i < ML_TENSOR_SIZE_LIMIT; i++) {
      ml_tensor_type_e type = ML_TENSOR_TYPE_INT32;
      OK(ml_tensors_info_get_tensor_type(both[k], i, &type));
      assert_int_equal(type, ML_TENSOR_TYPE_UNKNOWN);
      ml_tensor_dimension dim;
      memset(dim, 0xff, sizeof dim);
      OK(ml_tensors_info_get_tensor_dimension(both[k], i, dim));
      for (unsigned r = 0; r < ML_TENSOR_RANK_LIMIT; r++)
        assert_int_equal(dim[r], 0);
      assert_name(both[k], i, NULL);
      OK(ml_tensors_info_get_tensor_size(both[k], (int)i, &size));
      assert_int_equal(size, 0);
    }
  }
  OK(ml_tensors_info_destroy(a));
  OK(ml_tensors_info_destroy(b));
  assert_int_equal(nnt_h_count(NNT_H_TENSORS_INFO), infos);
}

static void test_info_count_name_type_dim(void **state) {
  (void)state;
  ml_tensors_info_h info = new_info(0);
  unsigned count = 0;
  for (unsigned c = 1; c <= ML_TENSOR_SIZE_LIMIT; c++) {
    OK(ml_tensors_info_set_count(info, c));
    OK(ml_tensors_info_get_count(info, &count));
    assert_int_equal(count, c);
  }

  /* names are copies: the caller's buffer may change, and each get is new */
  char buf[32];
  strcpy(buf, "input_0");
  OK(ml_tensors_info_set_tensor_name(info, 0, buf));
  strcpy(buf, "changed");
  assert_name(info, 0, "input_0");
  char *n1 = NULL, *n2 = NULL;
  OK(ml_tensors_info_get_tensor_name(info, 0, &n1));
  OK(ml_tensors_info_get_tensor_name(info, 0, &n2));
  assert_ptr_not_equal(n1, n2);
  free(n1);
  free(n2);
  OK(ml_tensors_info_set_tensor_name(info, 0, "renamed"));
  assert_name(info, 0, "renamed");
  OK(ml_tensors_info_set_tensor_name(info, 0, ""));
  assert_name(info, 0, "");
  OK(ml_tensors_info_set_tensor_name(info, 0, NULL)); /* clears */
  assert_name(info, 0, NULL);
  OK(ml_tensors_info_set_tensor_name(info, 15, "last"));
  assert_name(info, 15, "last");
  assert_name(info, 14, NULL);

  /* every supported type round-trips */
  for (int t = 0; t < ML_TENSOR_TYPE_UNKNOWN; t++) {
    if (t == ML_TENSOR_TYPE_FLOAT16)
      continue;
    ml_tensor_type_e got = ML_TENSOR_TYPE_UNKNOWN;
    OK(ml_tensors_info_set_tensor_type(info, 3, (ml_tensor_type_e)t));
    OK(ml_tensors_info_get_tensor_type(info, 3, &got));
    assert_int_equal(got, t);
  }
  /* FLOAT16 is refused and leaves the type alone */
  EXPECT_FAIL(ml_tensors_info_set_tensor_type(info, 3, ML_TENSOR_TYPE_FLOAT16),
              ML_ERROR_NOT_SUPPORTED, "FLOAT16");
  ml_tensor_type_e got = ML_TENSOR_TYPE_UNKNOWN;
  OK(ml_tensors_info_get_tensor_type(info, 3, &got));
  assert_int_equal(got, ML_TENSOR_TYPE_UINT64);

  /* all 16 ranks round-trip; dims are copied */
  ml_tensor_dimension full, out;
  for (unsigned r = 0; r < ML_TENSOR_RANK_LIMIT; r++)
    full[r] = r + 1;
  OK(ml_tensors_info_set_tensor_dimension(info, 2, full));
  full[0] = 1000;
  OK(ml_tensors_info_get_tensor_dimension(info, 2, out));
  for (unsigned r = 0; r < ML_TENSOR_RANK_LIMIT; r++)
    assert_int_equal(out[r], r + 1);

  /* shrinking and growing the count keeps the entries */
  OK(ml_tensors_info_set_count(info, 1));
  OK(ml_tensors_info_set_count(info, 16));
  assert_name(info, 15, "last");
  OK(ml_tensors_info_get_tensor_dimension(info, 2, out));
  assert_int_equal(out[15], 16);

  /* success leaves no message */
  (void)ml_error();
  OK(ml_tensors_info_get_count(info, &count));
  assert_null(ml_error());
  OK(ml_tensors_info_destroy(info));
}

static void test_info_size(void **state) {
  (void)state;
  static const struct {
    ml_tensor_type_e type;
    size_t bytes;
  } types[] = {
      {ML_TENSOR_TYPE_INT32, 4},  {ML_TENSOR_TYPE_UINT32, 4}, {ML_TENSOR_TYPE_INT16, 2},
      {ML_TENSOR_TYPE_UINT16, 2}, {ML_TENSOR_TYPE_INT8, 1},   {ML_TENSOR_TYPE_UINT8, 1},
      {ML_TENSOR_TYPE_FLOAT64, 8}, {ML_TENSOR_TYPE_FLOAT32, 4}, {ML_TENSOR_TYPE_INT64, 8},
      {ML_TENSOR_TYPE_UINT64, 8},
  };
  ml_tensors_info_h info = new_info(1);
  ml_tensor_dimension d = {3, 5, 2};
  OK(ml_tensors_info_set_tensor_dimension(info, 0, d));
  for (size_t k = 0; k < NNT_ARRAY_LEN(types); k++) {
    size_t size = 0;
    OK(ml_tensors_info_set_tensor_type(info, 0, types[k].type));
    OK(ml_tensors_info_get_tensor_size(info, 0, &size));
    assert_int_equal(size, types[k].bytes * 30);
    assert_int_equal(nnt_tensor_type_size(types[k].type), types[k].bytes);
  }
  assert_int_equal(nnt_tensor_type_size(ML_TENSOR_TYPE_FLOAT16), 2);
  assert_int_equal(nnt_tensor_type_size(ML_TENSOR_TYPE_UNKNOWN), 0);
  assert_int_equal(nnt_tensor_type_size((ml_tensor_type_e)99), 0);

  OK(ml_tensors_info_set_count(info, 4));
  size_t size = 0;
  /* a 0 ends the ranks: 2 * 3 float32, the 9 after the 0 ignored */
  ml_tensor_dimension stop = {2, 3, 0, 9};
  OK(ml_tensors_info_set_tensor_type(info, 1, ML_TENSOR_TYPE_FLOAT32));
  OK(ml_tensors_info_set_tensor_dimension(info, 1, stop));
  OK(ml_tensors_info_get_tensor_size(info, 1, &size));
  assert_int_equal(size, 24);
  /* dim[0] == 0: no bytes */
  ml_tensor_dimension none = {0, 4, 4};
  OK(ml_tensors_info_set_tensor_type(info, 2, ML_TENSOR_TYPE_FLOAT64));
  OK(ml_tensors_info_set_tensor_dimension(info, 2, none));
  OK(ml_tensors_info_get_tensor_size(info, 2, &size));
  assert_int_equal(size, 0);
  /* all 16 ranks used: 2^16 int8 */
  ml_tensor_dimension all;
  for (unsigned r = 0; r < ML_TENSOR_RANK_LIMIT; r++)
    all[r] = 2;
  OK(ml_tensors_info_set_tensor_type(info, 3, ML_TENSOR_TYPE_INT8));
  OK(ml_tensors_info_set_tensor_dimension(info, 3, all));
  OK(ml_tensors_info_get_tensor_size(info, 3, &size));
  assert_int_equal(size, 65536);
  /* -1: the sum (tensor 0 is uint64 3:5:2 from the loop) */
  OK(ml_tensors_info_get_tensor_size(info, -1, &size));
  assert_int_equal(size, 240 + 24 + 0 + 65536);

  /* a product that overflows size_t is refused, not wrapped */
  ml_tensor_dimension huge;
  for (unsigned r = 0; r < ML_TENSOR_RANK_LIMIT; r++)
    huge[r] = 0xffffffffu;
  OK(ml_tensors_info_set_tensor_dimension(info, 3, huge));
  EXPECT_FAIL(ml_tensors_info_get_tensor_size(info, 3, &size), ML_ERROR_INVALID_PARAMETER,
              "overflows");
  EXPECT_FAIL(ml_tensors_info_get_tensor_size(info, -1, &size), ML_ERROR_INVALID_PARAMETER,
              "overflows");
  ml_tensors_data_h data = (ml_tensors_data_h)0x1;
  EXPECT_FAIL(ml_tensors_data_create(info, &data), ML_ERROR_INVALID_PARAMETER, "tensor 2");
  OK(ml_tensors_info_set_tensor_dimension(info, 2, d));
  EXPECT_FAIL(ml_tensors_data_create(info, &data), ML_ERROR_INVALID_PARAMETER, "overflows");
  assert_ptr_equal(data, (ml_tensors_data_h)0x1);
  OK(ml_tensors_info_destroy(info));
}

static void test_info_validate(void **state) {
  (void)state;
  ml_tensors_info_h info = new_info(0);
  bool valid = true;
  OK(ml_tensors_info_validate(info, &valid));
  assert_false(valid); /* count 0 */
  OK(ml_tensors_info_set_count(info, 2));
  valid = true;
  OK(ml_tensors_info_validate(info, &valid));
  assert_false(valid); /* unknown types, no dims */
  ml_tensor_dimension d = {4};
  OK(ml_tensors_info_set_tensor_type(info, 0, ML_TENSOR_TYPE_INT16));
  OK(ml_tensors_info_set_tensor_dimension(info, 0, d));
  OK(ml_tensors_info_validate(info, &valid));
  assert_false(valid); /* tensor 1 still unknown */
  OK(ml_tensors_info_set_tensor_type(info, 1, ML_TENSOR_TYPE_FLOAT32));
  OK(ml_tensors_info_validate(info, &valid));
  assert_false(valid); /* tensor 1 has dim[0] == 0 */
  ml_tensor_dimension d1 = {1, 0, 7};
  OK(ml_tensors_info_set_tensor_dimension(info, 1, d1));
  OK(ml_tensors_info_validate(info, &valid));
  assert_true(valid);
  /* tensors past the count do not matter */
  OK(ml_tensors_info_set_count(info, 1));
  OK(ml_tensors_info_validate(info, &valid));
  assert_true(valid);
  OK(ml_tensors_info_destroy(info));
}

static void test_info_clone(void **state) {
  (void)state;
  ml_tensors_info_h src = sample_info();
  ml_tensors_info_h dest = new_info(5);
  /* dest's old content, names included, is replaced (ASan checks they are freed) */
  OK(ml_tensors_info_set_tensor_name(dest, 4, "old4"));
  OK(ml_tensors_info_set_tensor_name(dest, 0, "old0"));
  OK(ml_tensors_info_clone(dest, src));

  unsigned count = 0;
  OK(ml_tensors_info_get_count(dest, &count));
  assert_int_equal(count, 3);
  /* a deep copy: renaming or destroying src leaves dest alone */
  OK(ml_tensors_info_set_tensor_name(src, 0, "zzz"));
  OK(ml_tensors_info_destroy(src));
  assert_name(dest, 0, "a");
  assert_name(dest, 1, "b");
  assert_name(dest, 2, NULL);
  ml_tensor_type_e type;
  OK(ml_tensors_info_get_tensor_type(dest, 2, &type));
  assert_int_equal(type, ML_TENSOR_TYPE_UINT8);
  ml_tensor_dimension dim;
  OK(ml_tensors_info_get_tensor_dimension(dest, 0, dim));
  assert_int_equal(dim[0], 2);
  assert_int_equal(dim[1], 3);
  assert_int_equal(dim[2], 4);
  assert_int_equal(dim[3], 0);
  size_t size = 0;
  OK(ml_tensors_info_get_tensor_size(dest, -1, &size));
  assert_int_equal(size, 96 + 20 + 21);
  /* entries past src's count are reset, not left from dest's old content */
  OK(ml_tensors_info_set_count(dest, 5));
  assert_name(dest, 4, NULL);

  /* clone onto itself changes nothing */
  OK(ml_tensors_info_set_count(dest, 3));
  OK(ml_tensors_info_clone(dest, dest));
  assert_name(dest, 0, "a");
  OK(ml_tensors_info_get_count(dest, &count));
  assert_int_equal(count, 3);
  OK(ml_tensors_info_destroy(dest));
}

/* ---- data ---- */

static void test_data(void **state) {
  (void)state;
  size_t datas = nnt_h_count(NNT_H_TENSORS_DATA);
  ml_tensors_info_h info = sample_info();
  ml_tensors_data_h data = NULL;
  OK(ml_tensors_data_create(info, &data));
  assert_non_null(data);
  assert_int_equal(nnt_h_count(NNT_H_TENSORS_DATA), datas + 1);

  /* the data keeps its own copy of the info */
  OK(ml_tensors_info_set_count(info, 1));
  OK(ml_tensors_info_destroy(info));

  static const size_t want[] = {96, 20, 21};
  void *raw[3];
  for (unsigned i = 0; i < 3; i++) {
    size_t size = 0;
    OK(ml_tensors_data_get_tensor_data(data, i, &raw[i], &size));
    assert_non_null(raw[i]);
    assert_int_equal(size, want[i]);
    for (size_t b = 0; b < size; b++)
      assert_int_equal(((unsigned char *)raw[i])[b], 0);
  }
  assert_ptr_not_equal(raw[0], raw[1]);

  /* a whole tensor, then a prefix of one */
  float v[24];
  for (int i = 0; i < 24; i++)
    v[i] = (float)i * 0.5f;
  OK(ml_tensors_data_set_tensor_data(data, 0, v, sizeof v));
  assert_memory_equal(raw[0], v, sizeof v);
  v[0] = -3;
  OK(ml_tensors_data_get_tensor_data(data, 0, &raw[0], &(size_t){0}));
  assert_true(((float *)raw[0])[0] == 0.0f); /* copied, not referenced */
  const unsigned char bytes[5] = {1, 2, 3, 4, 5};
  OK(ml_tensors_data_set_tensor_data(data, 2, bytes, 5));
  assert_memory_equal(raw[2], bytes, 5);
  assert_int_equal(((unsigned char *)raw[2])[5], 0);
  /* the internal pointer: writes through it are seen */
  ((float *)raw[1])[4] = 7.0f;
  void *again = NULL;
  size_t size = 0;
  OK(ml_tensors_data_get_tensor_data(data, 1, &again, &size));
  assert_ptr_equal(again, raw[1]);
  assert_true(((float *)again)[4] == 7.0f);

  OK(ml_tensors_data_destroy(data));
  assert_int_equal(nnt_h_count(NNT_H_TENSORS_DATA), datas);
}
/* ---- helpers of api_internal.h ---- */

static void test_internal_helpers(void **state) {
  (void)state;
  size_t infos = nnt_h_count(NNT_H_TENSORS_INFO), datas = nnt_h_count(NNT_H_TENSORS_DATA);

  nnt_tinfo_entry e = {.name = NULL, .type = ML_TENSOR_TYPE_FLOAT32, .dim = {2, 3, 0, 5}};
  assert_int_equal(nnt_tinfo_entry_bytes(&e), 24);
  e.type = ML_TENSOR_TYPE_UNKNOWN;
  assert_int_equal(nnt_tinfo_entry_bytes(&e), 0);
  e.type = ML_TENSOR_TYPE_UINT16;
  e.dim[0] = 0;
  assert_int_equal(nnt_tinfo_entry_bytes(&e), 0);
  for (unsigned r = 0; r < ML_TENSOR_RANK_LIMIT; r++)
    e.dim[r] = 0x10000;
  assert_int_equal(nnt_tinfo_entry_bytes(&e), SIZE_MAX); /* saturates */

  static const unsigned bchw[2][4] = {{8, 1, 28, 28}, {8, 1, 1, 10}};
  nnt_tinfo *ti = NULL;
  nnt_tdata *td = NULL;
  nnt_api_lock();
  int rc = nnt_tinfo_new_locked(2, bchw, &ti);
  nnt_api_unlock();
  assert_int_equal(rc, ML_ERROR_NONE);
  assert_int_equal(nnt_h_count(NNT_H_TENSORS_INFO), infos + 1);

  /* usable through the public API */
  unsigned count = 0;
  OK(ml_tensors_info_get_count(ti, &count));
  assert_int_equal(count, 2);
  ml_tensor_dimension dim;
  ml_tensor_type_e type;
  OK(ml_tensors_info_get_tensor_dimension(ti, 0, dim));
  assert_int_equal(dim[0], 8);
  assert_int_equal(dim[1], 1);
  assert_int_equal(dim[2], 28);
  assert_int_equal(dim[3], 28);
  for (unsigned r = 4; r < ML_TENSOR_RANK_LIMIT; r++)
    assert_int_equal(dim[r], 0);
  OK(ml_tensors_info_get_tensor_type(ti, 1, &type));
  assert_int_equal(type, ML_TENSOR_TYPE_FLOAT32);
  size_t size = 0;
  OK(ml_tensors_info_get_tensor_size(ti, -1, &size));
  assert_int_equal(size, 4 * (8 * 28 * 28 + 80));
  OK(ml_tensors_info_set_tensor_name(ti, 1, "label"));

  nnt_api_lock();
  rc = nnt_tdata_new_locked(ti, &td);
  nnt_api_unlock();
  assert_int_equal(rc, ML_ERROR_NONE);
  assert_int_equal(nnt_h_count(NNT_H_TENSORS_DATA), datas + 1);
  assert_int_equal(td->info.count, 2);
  assert_string_equal(td->info.t[1].name, "label");
  assert_ptr_not_equal(td->info.t[1].name, ti->t[1].name);
  assert_int_equal(td->size[0], 4 * 8 * 28 * 28);
  assert_int_equal(td->size[1], 4 * 80);
  void *raw = NULL;
  OK(ml_tensors_data_get_tensor_data(td, 1, &raw, &size));
  assert_ptr_equal(raw, td->buf[1]);
  assert_int_equal(size, 320);
  for (size_t i = 0; i < 80; i++)
    assert_true(((float *)raw)[i] == 0.0f);

  /* errors: more tensors than the limit, NULL arguments */
  static const unsigned many[17][4] = {{1, 1, 1, 1}};
  nnt_tinfo *bad = NULL;
  nnt_api_lock();
  int rc1 = nnt_tinfo_new_locked(17, many, &bad);
  int rc2 = nnt_tinfo_new_locked(1, NULL, &bad);
  int rc3 = nnt_tdata_new_locked(NULL, &td);
  nnt_api_unlock();
  assert_int_equal(rc1, ML_ERROR_INVALID_PARAMETER);
  assert_int_equal(rc2, ML_ERROR_INVALID_PARAMETER);
  assert_int_equal(rc3, ML_ERROR_INVALID_PARAMETER);
  assert_null(bad);
  expect_msg("info");

  /* allocation failure leaves nothing registered */
  nnt_tdata *td2 = NULL;
  nnt_api_lock();
  nnt_alloc_fail_after(2);
  rc = nnt_tdata_new_locked(ti, &td2);
  nnt_alloc_fail_after(-1);
  nnt_api_unlock();
  assert_int_equal(rc, ML_ERROR_OUT_OF_MEMORY);
  assert_null(td2);
  expect_msg("tensor");
  assert_int_equal(nnt_h_count(NNT_H_TENSORS_DATA), datas + 1);

  nnt_api_lock();
  nnt_tdata_free_locked(td);
  nnt_tinfo_free_locked(ti);
  nnt_tdata_free_locked(NULL);
  nnt_tinfo_free_locked(NULL);
  nnt_api_unlock();
  assert_int_equal(nnt_h_count(NNT_H_TENSORS_INFO), infos);
  assert_int_equal(nnt_h_count(NNT_H_TENSORS_DATA), datas);
  EXPECT_FAIL(ml_tensors_info_destroy(ti), ML_ERROR_INVALID_PARAMETER, "not a live handle");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_info_create_defaults),
      cmocka_unit_test(test_info_count_name_type_dim),
      cmocka_unit_test(test_info_size),
      cmocka_unit_test(test_info_validate),
      cmocka_unit_test(test_info_clone),
      cmocka_unit_test(test_data),
      cmocka_unit_test(test_internal_helpers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
