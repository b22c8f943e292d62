/* The ML common API (ml-api-common.h): tensors info and tensors data handles,
 * their values, every misuse (NULL arguments, out-of-range values,
 * destroyed and wrong-kind handles), allocation failure, concurrent use of
 * the registry, ml_error() and ml_strerror(); and the helpers of
 * api/src/api_internal.h that the rest of the C API builds results with. */
#include "test_util.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/src/api_internal.h"
#include "ml-api-common.h"

/* The message left by the last failing call: non-NULL, mentioning needle,
 * and cleared by reading it. */
static void expect_msg(const char *needle) {
  const char *m = ml_error();
  if (!m)
    fail_msg("no ml_error() message; expected one mentioning '%s'", needle);
  tu_assert_contains(m, needle);
  assert_null(ml_error());
}

/* rc must be code, with a message naming needle. */
#define EXPECT_FAIL(call, code, needle)                                                   \
  do {                                                                                     \
    (void)ml_error();                                                                      \
    int rc_ = (call);                                                                      \
    if (rc_ != (code))                                                                     \
      fail_msg("%s: got %d, want %d (%s)", #call, rc_, (int)(code), #code);                \
    expect_msg(needle);                                                                    \
  } while (0)

#define OK(call) assert_int_equal((call), ML_ERROR_NONE)

static ml_tensors_info_h new_info(unsigned count) {
  ml_tensors_info_h info = NULL;
  OK(ml_tensors_info_create(&info));
  assert_non_null(info);
  if (count)
    OK(ml_tensors_info_set_count(info, count));
  return info;
}

/* Two float32 tensors 2:3:4 ("a") and 5 ("b") plus a uint8 tensor 7:1:3. */
static ml_tensors_info_h sample_info(void) {
  ml_tensors_info_h info = new_info(3);
  ml_tensor_dimension d0 = {2, 3, 4}, d1 = {5}, d2 = {7, 1, 3};
  OK(ml_tensors_info_set_tensor_type(info, 0, ML_TENSOR_TYPE_FLOAT32));
  OK(ml_tensors_info_set_tensor_type(info, 1, ML_TENSOR_TYPE_FLOAT32));
  OK(ml_tensors_info_set_tensor_type(info, 2, ML_TENSOR_TYPE_UINT8));
  OK(ml_tensors_info_set_tensor_dimension(info, 0, d0));
  OK(ml_tensors_info_set_tensor_dimension(info, 1, d1));
  OK(ml_tensors_info_set_tensor_dimension(info, 2, d2));
  OK(ml_tensors_info_set_tensor_name(info, 0, "a"));
  OK(ml_tensors_info_set_tensor_name(info, 1, "b"));
  return info;
}

static void assert_name(ml_tensors_info_h info, unsigned i, const char *want) {
  char *name = (char *)"sentinel";
  OK(ml_tensors_info_get_tensor_name(info, i, &name));
  if (!want) {
    assert_null(name);
    return;
  }
  assert_non_null(name);
  assert_string_equal(name, want);
  free(name);
}

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
  assert_null(ml_strerror(-34));

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
      cmocka_unit_test(test_misuse_null_and_range),
      cmocka_unit_test(test_misuse_destroyed_and_wrong_kind),
      cmocka_unit_test(test_alloc_failure),
      cmocka_unit_test(test_threads),
      cmocka_unit_test(test_error_per_thread),
      cmocka_unit_test(test_error_and_strerror),
      cmocka_unit_test(test_internal_helpers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
