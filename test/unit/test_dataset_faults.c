/* The dataset contract where it can go wrong: a generator's return code is
 * always its error (never the end of data, never remapped), the batch
 * handed out stays readable until the next one is asked for, and a stop
 * flag ends an epoch with NNT_ERR_CANCELED. */
#include "test_util.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "nntrainer/dataset.h"

/* One input of 3 floats and a label of 2: sample k is in {k, k+.25, k+.5},
 * label {k, 1}; sample n - 1 comes with last (n < 0: never); sample
 * fail_at returns fail_rc instead. */
typedef struct gen {
  int n, fail_at, fail_rc, k;
  atomic_int calls;
} gen;

static gen gen_make(int n) {
  gen g = {.n = n, .fail_at = -1};
  atomic_init(&g.calls, 0);
  return g;
}

static int gen_cb(float **in, float **label, bool *last, void *ud) {
  gen *g = ud;
  atomic_fetch_add(&g->calls, 1);
  int k = g->k;
  if (k == g->fail_at)
    return g->fail_rc;
  in[0][0] = (float)k, in[0][1] = k + 0.25f, in[0][2] = k + 0.5f;
  label[0][0] = (float)k, label[0][1] = 1;
  if (++g->k == g->n) {
    *last = true;
    g->k = 0;
  }
  return 0;
}

static nnt_ds_shape gen_shape(void) {
  nnt_ds_shape s = {0};
  s.n_in = s.n_label = 1;
  s.in_len[0] = 3, s.label_len[0] = 2;
  return s;
}

typedef struct gbatch {
  float a[3 * 4], l[2 * 4];
} gbatch;

/* 1 when a batch was copied, 0 at the end of the epoch, or the error. */
static int gen_next(nnt_dataset *d, gbatch *x, nnt_err *e) {
  float *in[] = {x->a}, *lab[] = {x->l};
  int end = -1, rc = nnt_dataset_next_batch(d, in, lab, &end, e);
  if (rc) {
    assert_int_equal(end, 0);
    return rc;
  }
  return !end;
}

static void check_gen_batch(const gbatch *x, int first, int batch) {
  for (int s = 0; s < batch; s++) {
    float k = (float)(first + s);
    assert_float_equal(x->a[3 * s], k, 0);
    assert_float_equal(x->a[3 * s + 2], k + 0.5f, 0);
    assert_float_equal(x->l[2 * s], k, 0);
  }
}

/* The callback's own code, whatever its value, stops the epoch with that
 * code: never taken for the end of data (-1001 was our end-of-data code
 * once) nor mapped to another code. Only last ends an epoch. */
static void test_generator_codes_are_errors(void **state) {
  (void)state;
  const int codes[] = {-1001, -1000, 1, -22, -34, -125, -11, 7, -1, INT32_MIN, INT32_MAX};
  for (size_t c = 0; c < NNT_ARRAY_LEN(codes); c++) {
    for (int at = 0; at < 7; at += 6) { /* in the first batch, and the third */
      gen g = gen_make(1000);
      g.fail_at = at, g.fail_rc = codes[c];
      nnt_dataset *d;
      nnt_err e = {0};
      nnt_ds_shape s = gen_shape();
      assert_int_equal(nnt_dataset_create_generator(gen_cb, &g, &d, &e), NNT_OK);
      assert_int_equal(nnt_dataset_prepare(d, &s, 3, 1, &e), NNT_OK);
      assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
      gbatch x;
      for (int b = 0; b < at / 3; b++)
        assert_int_equal(gen_next(d, &x, &e), 1);
      assert_int_equal(gen_next(d, &x, &e), codes[c]);
      assert_int_equal(e.code, codes[c]);
      assert_int_equal(e.from_callback, 1);
      char want[96];
      snprintf(want, sizeof want, "data generator callback returned %d at sample %d", codes[c],
               at);
      assert_string_equal(e.msg, want);
      /* the epoch stays failed */
      assert_int_equal(gen_next(d, &x, &e), codes[c]);
      nnt_dataset_destroy(d);
    }
  }
}

/* The batch handed out stays readable until the next one is asked for,
 * while the producer fills the others; a stop flag ends the epoch with
 * NNT_ERR_CANCELED once the batches made are taken. */
static void test_reread_and_stop_flag(void **state) {
  (void)state;
  gen g = gen_make(-1);
  nnt_dataset *d;
  nnt_err e = {0};
  nnt_ds_shape s = gen_shape();
  assert_int_equal(nnt_dataset_create_generator(gen_cb, &g, &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_set_property(d, "buffer_size", "1", &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d, &s, 2, 1, &e), NNT_OK);
  gbatch x, y;
  float *in[] = {y.a}, *lab[] = {y.l};
  assert_int_equal(nnt_dataset_reread_batch(d, in, lab, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "no batch to read again");
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_reread_batch(d, in, lab, &e), NNT_ERR_INVAL);
  for (int b = 0; b < 3; b++) {
    assert_int_equal(gen_next(d, &x, &e), 1);
    check_gen_batch(&x, 2 * b, 2);
    /* the producer fills the next batch meanwhile (buffer_size 1) */
    while (atomic_load(&g.calls) < 2 * (b + 2))
      sched_yield();
    memset(&y, 0, sizeof y);
    assert_int_equal(nnt_dataset_reread_batch(d, in, lab, &e), NNT_OK);
    check_gen_batch(&y, 2 * b, 2);
  }
  atomic_int stop;
  atomic_init(&stop, 1);
  nnt_dataset_epoch_end(d);
  assert_int_equal(nnt_dataset_reread_batch(d, in, lab, &e), NNT_ERR_INVAL);
  nnt_dataset_set_stop_flag(d, &stop);
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
  assert_int_equal(gen_next(d, &x, &e), NNT_ERR_CANCELED);
  assert_string_equal(e.msg, "dataset: 'data generator': stopped on request");
  assert_int_equal(e.from_callback, 0);
  nnt_dataset_set_stop_flag(d, NULL);
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
  assert_int_equal(gen_next(d, &x, &e), 1);
  nnt_dataset_destroy(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_generator_codes_are_errors),
      cmocka_unit_test(test_reread_and_stop_flag),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
