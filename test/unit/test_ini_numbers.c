/* Turning INI text into numbers (nntrainer/common.c, nnt_dim_parse): what
 * fits its type is read, what does not (float32 overflow and underflow,
 * integers past 32 bits, junk, empty list items) is refused naming the key
 * and the value. */
#include "test_util.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "nntrainer/layer.h"
#include "nntrainer/tensor.h"

typedef struct float_case {
  const char *text;
  int ok;
  float value;        /* when ok */
  const char *expect; /* in the message, when not */
} float_case;

static const float_case float_cases[] = {
    {"0", 1, 0.0f, NULL},
    {"0.0", 1, 0.0f, NULL},
    {"-0", 1, -0.0f, NULL},
    {"-0.0", 1, -0.0f, NULL},
    {"0e-400", 1, 0.0f, NULL},
    {" 1.5 ", 1, 1.5f, NULL},
    {"-2.5e-3", 1, -2.5e-3f, NULL},
    {"3.4028235e38", 1, FLT_MAX, NULL},
    {"-3.4028235e38", 1, -FLT_MAX, NULL},
    {"1.17549435e-38", 1, FLT_MIN, NULL},
    {"1e39", 0, 0, "value '1e39' is out of float32's range (magnitude at most 3.40282347e+38)"},
    {"-1e39", 0, 0, "value '-1e39' is out of float32's range"},
    {"3.5e38", 0, 0, "out of float32's range"},
    {"1e400", 0, 0, "value '1e400' is out of float32's range"},
    {"1e-50", 0, 0, "value '1e-50' is too small for float32 (a nonzero magnitude must be at "
                    "least 1.17549435e-38; write 0 for zero)"},
    {"-1e-50", 0, 0, "too small for float32"},
    {"1e-45", 0, 0, "too small for float32"}, /* a subnormal */
    {"1e-400", 0, 0, "too small for float32"},
    {"inf", 0, 0, "value 'inf' is not a number"},
    {"nan", 0, 0, "value 'nan' is not a number"},
    {"1.5x", 0, 0, "value '1.5x' is not a number"},
    {"1.5 2", 0, 0, "is not a number"},
    {"", 0, 0, "value '' is not a number"},
    {"  ", 0, 0, "is not a number"},
};

static void test_floats(void **state) {
  (void)state;
  for (size_t i = 0; i < NNT_ARRAY_LEN(float_cases); i++) {
    const float_case *c = &float_cases[i];
    float f = 42.0f;
    nnt_err e = {0};
    int rc = nnt_parse_float("learning_rate", c->text, &f, &e);
    if (c->ok) {
      if (rc)
        fail_msg("'%s': %s", c->text, e.msg);
      assert_true(f == c->value && signbit(f) == signbit(c->value));
    } else {
      if (rc != NNT_ERR_INVAL)
        fail_msg("'%s': code %d, value %g", c->text, rc, f);
      assert_true(f == 42.0f); /* unchanged */
      tu_assert_contains(e.msg, "key 'learning_rate': ");
      tu_assert_contains(e.msg, c->expect);
    }
  }
  /* a non-negative float: -0 is 0, not negative */
  float f = 1.0f;
  nnt_err e = {0};
  assert_int_equal(nnt_parse_nonneg_float("epsilon", "-0", &f, &e), NNT_OK);
  assert_true(f == 0.0f && !signbit(f));
  assert_int_equal(nnt_parse_nonneg_float("epsilon", "-1e-3", &f, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "key 'epsilon': value '-1e-3' must not be negative");
  assert_int_equal(nnt_parse_nonneg_float("epsilon", "1e-60", &f, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "key 'epsilon': value '1e-60' is too small for float32");
}

typedef struct uint_case {
  const char *text;
  int ok;
  unsigned value;
  const char *expect;
} uint_case;

static const uint_case uint_cases[] = {
    {"0", 1, 0, NULL},
    {" 7 ", 1, 7, NULL},
    {"007", 1, 7, NULL},
    {"4294967295", 1, 4294967295u, NULL},
    {"4294967296", 0, 0, "value '4294967296' is out of range (0 to 4294967295)"},
    {"18446744073709551616", 0, 0, "is out of range (0 to 4294967295)"},
    {"99999999999999999999999", 0, 0, "is out of range"},
    {"-1", 0, 0, "value '-1' is not a non-negative integer"},
    {"+1", 0, 0, "value '+1' is not a non-negative integer"},
    {"- 1", 0, 0, "is not a non-negative integer"},
    {"7x", 0, 0, "value '7x' is not a non-negative integer"},
    {"0x10", 0, 0, "is not a non-negative integer"},
    {"1.0", 0, 0, "is not a non-negative integer"},
    {"1e3", 0, 0, "is not a non-negative integer"},
    {"", 0, 0, "value '' is not a non-negative integer"},
};

static void test_unsigned(void **state) {
  (void)state;
  for (size_t i = 0; i < NNT_ARRAY_LEN(uint_cases); i++) {
    const uint_case *c = &uint_cases[i];
    unsigned u = 42;
    nnt_err e = {0};
    int rc = nnt_parse_uint("unit", c->text, &u, &e);
    if (c->ok) {
      if (rc)
        fail_msg("'%s': %s", c->text, e.msg);
      assert_int_equal(u, c->value);
    } else {
      if (rc != NNT_ERR_INVAL)
        fail_msg("'%s': code %d, value %u", c->text, rc, u);
      assert_int_equal(u, 42);
      tu_assert_contains(e.msg, "key 'unit': ");
      tu_assert_contains(e.msg, c->expect);
    }
  }
}

/* An empty item is an error, not skipped; each item is checked as above. */
static void test_lists(void **state) {
  (void)state;
  static const struct {
    const char *text;
    unsigned n;         /* items read, 0: refused */
    const char *expect; /* when refused */
  } cases[] = {
      {"1,2", 2, NULL},
      {" 1 , 2 ,3", 3, NULL},
      {"5", 1, NULL},
      {"1,,2", 0, "key 'kernel_size': an empty item in '1,,2'"},
      {"1,2,", 0, "an empty item in '1,2,'"},
      {",1", 0, "an empty item"},
      {" , ", 0, "an empty item"},
      {"", 0, "key 'kernel_size': empty list"},
      {"1,2,3,4,5", 0, "more than 4 values"},
      {"1,4294967296", 0, "value '4294967296' is out of range"},
      {"1,-2", 0, "value '-2' is not a non-negative integer"},
  };
  for (size_t i = 0; i < NNT_ARRAY_LEN(cases); i++) {
    unsigned v[4], n = 99;
    nnt_err e = {0};
    int rc = nnt_parse_uint_list("kernel_size", cases[i].text, v, 4, &n, &e);
    if (cases[i].n) {
      if (rc)
        fail_msg("'%s': %s", cases[i].text, e.msg);
      assert_int_equal(n, cases[i].n);
    } else {
      if (rc != NNT_ERR_INVAL)
        fail_msg("'%s': code %d", cases[i].text, rc);
      tu_assert_contains(e.msg, cases[i].expect);
    }
  }
  float f[2];
  unsigned n;
  nnt_err e = {0};
  assert_int_equal(nnt_parse_float_list("learning_rate", "0.1, 1e39", f, 2, &n, &e),
                   NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "key 'learning_rate': value ' 1e39' is out of float32's range");
  assert_int_equal(nnt_parse_float_list("learning_rate", "0.1,,0.2", f, 2, &n, &e),
                   NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "an empty item");
  assert_int_equal(nnt_parse_float_list("learning_rate", "0.1, 0", f, 2, &n, &e), NNT_OK);
  assert_int_equal(n, 2);
}

/* A shape is up to four positive integers: no empty part. */
static void test_shapes(void **state) {
  (void)state;
  static const char *const good[] = {"1:2:3", "3", "1:1:28:28", " 2 : 3 "};
  static const char *const bad[] = {"1::3", ":1", "1:", "0:1", "1:2:3:4:5", "1:4294967296",
                                    "1:x", ""};
  nnt_dim d;
  nnt_err e = {0};
  for (size_t i = 0; i < NNT_ARRAY_LEN(good); i++)
    if (nnt_dim_parse("input_shape", good[i], &d, &e))
      fail_msg("'%s': %s", good[i], e.msg);
  for (size_t i = 0; i < NNT_ARRAY_LEN(bad); i++) {
    if (nnt_dim_parse("input_shape", bad[i], &d, &e) != NNT_ERR_INVAL)
      fail_msg("'%s' was read as a shape", bad[i]);
    tu_assert_contains(e.msg, "key 'input_shape': value '");
    tu_assert_contains(e.msg, "is not a shape");
  }
}

/* The shared positive-integer and rate parsers, directly and through every
 * key that uses them: the key and value in the message, the old value kept
 * on error. */
static void test_positive_and_rate(void **state) {
  (void)state;
  nnt_err e = {0};
  unsigned u = 9;
  assert_int_equal(nnt_parse_positive_uint("unit", " 7 ", &u, &e), NNT_OK);
  assert_int_equal(u, 7);
  assert_int_equal(nnt_parse_positive_uint("unit", "0", &u, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "key 'unit': value '0' must be positive");
  assert_int_equal(nnt_parse_positive_uint("unit", "-1", &u, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "key 'unit': value '-1' is not a non-negative integer");
  assert_int_equal(u, 7);
  float r = 0.5f;
  assert_int_equal(nnt_parse_rate("dropout_rate", "0", &r, &e), NNT_OK);
  assert_true(r == 0.0f);
  assert_int_equal(nnt_parse_rate("dropout_rate", "0.999", &r, &e), NNT_OK);
  assert_true(r == 0.999f);
  static const char *const bad_rates[] = {"1", "-0.1", "2", "nan", "x"};
  for (size_t i = 0; i < NNT_ARRAY_LEN(bad_rates); i++) {
    if (nnt_parse_rate("dropout_rate", bad_rates[i], &r, &e) != NNT_ERR_INVAL)
      fail_msg("rate '%s' accepted", bad_rates[i]);
    tu_assert_contains(e.msg, "key 'dropout_rate': ");
    assert_true(r == 0.999f);
  }
  /* type, key, value, message */
  static const char *const keys[][4] = {
      {"embedding", "in_dim", "0", "key 'in_dim': value '0' must be positive"},
      {"embedding", "out_dim", "0", "key 'out_dim': value '0' must be positive"},
      {"multi_head_attention", "num_heads", "0", "key 'num_heads': value '0' must be positive"},
      {"multi_head_attention", "projected_key_dim", "0",
       "key 'projected_key_dim': value '0' must be positive"},
      {"multi_head_attention", "projected_value_dim", "0",
       "key 'projected_value_dim': value '0' must be positive"},
      {"multi_head_attention", "output_shape", "0",
       "key 'output_shape': value '0' must be positive"},
      {"multi_head_attention", "dropout_rate", "1", "key 'dropout_rate': 1 is not in [0, 1)"},
      {"fully_connected", "unit", "0", "key 'unit': value '0' must be positive"},
      {"fully_connected", "lora_alpha", "0", "key 'lora_alpha': value '0' must be positive"},
      {"lstm", "unit", "0", "key 'unit': value '0' must be positive"},
      {"lstm", "max_timestep", "0", "key 'max_timestep': value '0' must be positive"},
      {"rnncell", "dropout_rate", "-0.5", "key 'dropout_rate': -0.5 is not in [0, 1)"},
      {"positional_encoding", "max_timestep", "0",
       "key 'max_timestep': value '0' must be positive"},
      {"dropout", "dropout_rate", "1.5", "key 'dropout_rate': 1.5 is not in [0, 1)"},
  };
  for (size_t i = 0; i < NNT_ARRAY_LEN(keys); i++) {
    nnt_layer *l;
    assert_int_equal(nnt_layer_create(keys[i][0], &l, &e), NNT_OK);
    if (nnt_layer_set_property(l, keys[i][1], keys[i][2], &e) != NNT_ERR_INVAL)
      fail_msg("%s: %s = %s accepted", keys[i][0], keys[i][1], keys[i][2]);
    tu_assert_contains(e.msg, keys[i][3]);
    nnt_layer_destroy(l);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_floats),
      cmocka_unit_test(test_unsigned),
      cmocka_unit_test(test_lists),
      cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_positive_and_rate),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
