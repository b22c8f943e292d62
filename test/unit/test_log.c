/* The log callback: off by default, levels, a long message, threads
 * logging while the callback is swapped, a callback that logs and removes
 * itself; through the public nntrainer-ext.h functions. */
#include "test_util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nntrainer-ext.h"
#include "nntrainer.h"

/* A capture installed through the public API. */
typedef struct logcap {
  int n;
  int level[8];
  char msg[8][NNT_LOG_MSG_MAX];
} logcap;

static logcap cap;

static void cap_cb(int level, const char *msg, void *ud) {
  logcap *c = ud;
  if (c->n < 8) {
    c->level[c->n] = level;
    snprintf(c->msg[c->n], sizeof c->msg[c->n], "%s", msg);
  }
  c->n++;
}

static void cap_start(void) {
  memset(&cap, 0, sizeof cap);
  assert_int_equal(ml_train_ext_set_log_callback(cap_cb, &cap), ML_ERROR_NONE);
}

static void cap_stop(void) {
  assert_int_equal(ml_train_ext_set_log_callback(NULL, NULL), ML_ERROR_NONE);
  assert_int_equal(ml_train_ext_set_log_level(ML_TRAIN_EXT_LOG_NOTICE), ML_ERROR_NONE);
}

/* Without a callback nothing is enabled (and nothing printed: the library
 * has no other output). */
static void test_log_off_by_default(void **state) {
  (void)state;
  assert_false(nnt_log_enabled(NNT_LOG_WARNING));
  assert_false(nnt_log_enabled(NNT_LOG_DEBUG));
  nnt_log(NNT_LOG_WARNING, "nobody hears this %d", 1);
}

static void test_log_levels(void **state) {
  (void)state;
  cap_start();
  assert_true(nnt_log_enabled(NNT_LOG_NOTICE));
  assert_false(nnt_log_enabled(NNT_LOG_INFO)); /* default: notices and warnings */
  nnt_log(NNT_LOG_NOTICE, "notice %d", 1);
  nnt_log(NNT_LOG_WARNING, "warning %s", "two");
  nnt_log(NNT_LOG_INFO, "info");
  nnt_log(NNT_LOG_DEBUG, "debug");
  assert_int_equal(cap.n, 2);
  assert_int_equal(cap.level[0], ML_TRAIN_EXT_LOG_NOTICE);
  assert_string_equal(cap.msg[0], "notice 1");
  assert_int_equal(cap.level[1], ML_TRAIN_EXT_LOG_WARNING);
  assert_string_equal(cap.msg[1], "warning two");
  assert_int_equal(ml_train_ext_set_log_level(ML_TRAIN_EXT_LOG_DEBUG), ML_ERROR_NONE);
  nnt_log(NNT_LOG_DEBUG, "debug");
  nnt_log(NNT_LOG_INFO, "info");
  assert_int_equal(cap.n, 4);
  assert_int_equal(cap.level[2], ML_TRAIN_EXT_LOG_DEBUG);
  assert_int_equal(cap.level[3], ML_TRAIN_EXT_LOG_INFO);
  assert_int_equal(ml_train_ext_set_log_level(ML_TRAIN_EXT_LOG_WARNING), ML_ERROR_NONE);
  nnt_log(NNT_LOG_NOTICE, "dropped");
  assert_int_equal(cap.n, 4);
  /* a level that is not one is refused, naming the function */
  (void)ml_error();
  assert_int_equal(ml_train_ext_set_log_level((ml_train_ext_log_level_e)4),
                   ML_ERROR_INVALID_PARAMETER);
  tu_assert_contains(ml_error(), "ml_train_ext_set_log_level");
  assert_int_equal(ml_train_ext_set_log_level((ml_train_ext_log_level_e)-1),
                   ML_ERROR_INVALID_PARAMETER);
  nnt_log(NNT_LOG_WARNING, "still warning"); /* the level kept its value */
  assert_int_equal(cap.n, 5);
  cap_stop();
  nnt_log(NNT_LOG_WARNING, "after removal");
  assert_int_equal(cap.n, 5);
  assert_false(nnt_log_enabled(NNT_LOG_WARNING));
}

/* A message longer than the buffer arrives cut, terminated. */
static void test_log_long_message(void **state) {
  (void)state;
  static char big[3 * NNT_LOG_MSG_MAX];
  memset(big, 'x', sizeof big - 1);
  cap_start();
  nnt_log(NNT_LOG_WARNING, "%s", big);
  assert_int_equal(cap.n, 1);
  assert_int_equal(strlen(cap.msg[0]), NNT_LOG_MSG_MAX - 1);
  cap_stop();
}

/* Threads log while the main thread swaps two callbacks: every message
 * reaches exactly one of them, and a callback replaced is never called
 * after the swap returned. */
typedef struct swap_cb {
  long calls;           /* under the log lock: calls are serialized */
  atomic_int retired;   /* set by the main thread after replacing it */
  atomic_int late;      /* calls seen after retirement */
} swap_cb;

static void swap_fn(int level, const char *msg, void *ud) {
  swap_cb *s = ud;
  (void)level, (void)msg;
  if (atomic_load(&s->retired))
    atomic_fetch_add(&s->late, 1);
  s->calls++;
}

#define LOG_THREADS 4

static atomic_int log_stop;

/* Logs until told to stop; returns how many messages it sent. */
static void *log_worker(void *arg) {
  long *sent = arg;
  while (!atomic_load(&log_stop))
    nnt_log(NNT_LOG_NOTICE, "message %ld", (*sent)++);
  return NULL;
}

static void test_log_threads(void **state) {
  (void)state;
  swap_cb a = {0}, b = {0};
  atomic_store(&log_stop, 0);
  nnt_log_set(swap_fn, &a);
  pthread_t th[LOG_THREADS];
  long sent[LOG_THREADS] = {0};
  for (int i = 0; i < LOG_THREADS; i++)
    assert_int_equal(pthread_create(&th[i], NULL, log_worker, &sent[i]), 0);
  /* swap while they log: wait for some messages between swaps */
  for (int k = 0; k < 500; k++) {
    swap_cb *next = k % 2 ? &a : &b, *prev = k % 2 ? &b : &a;
    atomic_store(&next->retired, 0);
    nnt_log_set(swap_fn, next);
    atomic_store(&prev->retired, 1);
    usleep(20);
  }
  atomic_store(&log_stop, 1);
  long total = 0;
  for (int i = 0; i < LOG_THREADS; i++) {
    pthread_join(th[i], NULL);
    total += sent[i];
  }
  nnt_log_set(NULL, NULL);
  print_message("%ld messages, %ld and %ld per callback\n", total, a.calls, b.calls);
  assert_true(a.calls > 0 && b.calls > 0);
  assert_int_equal(a.calls + b.calls, total);
  assert_int_equal(atomic_load(&a.late) + atomic_load(&b.late), 0);
}

/* A callback may log, and may replace itself, without deadlock. */
static int reentry_depth;

static void reentrant_fn(int level, const char *msg, void *ud) {
  logcap *c = ud;
  cap_cb(level, msg, ud);
  if (reentry_depth++ == 0)
    nnt_log(NNT_LOG_WARNING, "from inside");
  if (c->n == 2)
    nnt_log_set(NULL, NULL);
}

static void test_log_reentry(void **state) {
  (void)state;
  memset(&cap, 0, sizeof cap);
  reentry_depth = 0;
  nnt_log_set(reentrant_fn, &cap);
  nnt_log(NNT_LOG_NOTICE, "outside");
  assert_int_equal(cap.n, 2);
  assert_string_equal(cap.msg[0], "outside");
  assert_string_equal(cap.msg[1], "from inside");
  assert_false(nnt_log_enabled(NNT_LOG_WARNING)); /* it removed itself */
  nnt_log(NNT_LOG_WARNING, "gone");
  assert_int_equal(cap.n, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_log_off_by_default),
      cmocka_unit_test(test_log_levels),
      cmocka_unit_test(test_log_long_message),
      cmocka_unit_test(test_log_threads),
      cmocka_unit_test(test_log_reentry),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
