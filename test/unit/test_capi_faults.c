/* The C API when training goes wrong: ml_train_ext_model_stop from the
 * progress callback, from another thread (while the run holds the model,
 * and while it waits for data), from the generator callback and with no
 * run; a value that is not finite ends the run with
 * ML_TRAIN_EXT_ERROR_NOT_FINITE unless check_finite=false. Threads meet
 * through semaphores in the callbacks, never through sleeps. */
#include "test_util.h"

#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_harness.h"

/* ---- stop from the progress callback --------------------------------- */

typedef struct stopper {
  ml_train_model_h model;
  size_t stop_at;   /* the step (1-based, counted over the run) to stop after */
  size_t steps;
  int stop_rc;
  int other_rc;     /* another call on the model from the callback */
  sem_t reached, go; /* with pause: post reached, wait for go */
  int pause;
} stopper;

static void progress_stop(const ml_train_ext_progress_s *p, void *ud) {
  stopper *s = ud;
  if (p->epoch_done)
    return;
  if (++s->steps != s->stop_at)
    return;
  if (s->pause) {
    sem_post(&s->reached);
    sem_wait(&s->go);
    return;
  }
  s->stop_rc = ml_train_ext_model_stop(s->model);
  char *sum = NULL;
  s->other_rc = ml_train_model_get_summary(s->model, ML_TRAIN_SUMMARY_MODEL, &sum);
  free(sum);
}

static void stopper_init(stopper *s, ml_train_model_h model, size_t stop_at, int pause) {
  memset(s, 0, sizeof *s);
  s->model = model;
  s->stop_at = stop_at;
  s->pause = pause;
  sem_init(&s->reached, 0, 0);
  sem_init(&s->go, 0, 0);
}

static void stopper_free(stopper *s) {
  sem_destroy(&s->reached);
  sem_destroy(&s->go);
}

static void test_stop_from_progress(void **state) {
  (void)state;
  built b;
  build(&b, 1);
  stopper s;
  stopper_init(&s, b.model, 37, 0); /* epoch 2 (32 steps each), step 5 */
  EXPECT_FAIL(ml_train_ext_model_run_with_progress(b.model, progress_stop, &s, "epochs=3",
                                                   NULL),
              ML_TRAIN_EXT_ERROR_CANCELED, "stopped on request in epoch 2 after 5 of its steps");
  assert_int_equal(s.stop_rc, ML_ERROR_NONE);
  assert_int_equal(s.other_rc, ML_ERROR_TRY_AGAIN); /* the run still holds the model */
  assert_int_equal(s.steps, 37);                    /* no step after the request */
  /* the model is usable, and a later run is not affected by the request */
  char *sum = NULL;
  OK(ml_train_model_get_summary(b.model, ML_TRAIN_SUMMARY_MODEL, &sum));
  free(sum);
  s.stop_at = 0;
  s.steps = 0;
  gen_init(&b.train, 256, 1); /* the producer left it inside an epoch */
  OK(ml_train_ext_model_run_with_progress(b.model, progress_stop, &s, "epochs=1", NULL));
  assert_int_equal(s.steps, 32);
  OK(ml_train_model_destroy(b.model));
  stopper_free(&s);
  assert_no_handles();
}

/* ---- stop from another thread ----------------------------------------- */

typedef struct run_args {
  ml_train_model_h model;
  stopper *s;     /* with progress, or NULL: ml_train_model_run */
  int rc;
  char msg[256];
} run_args;

static void *run_thread(void *arg) {
  run_args *r = arg;
  r->rc = r->s ? ml_train_ext_model_run_with_progress(r->model, progress_stop, r->s,
                                                      "epochs=2", NULL)
               : ml_train_model_run(r->model, "epochs=2", NULL);
  const char *m = ml_error(); /* per thread: read it here */
  snprintf(r->msg, sizeof r->msg, "%s", m ? m : "");
  return NULL;
}

static void test_stop_from_thread(void **state) {
  (void)state;
  built b;
  build(&b, 1);
  stopper s;
  stopper_init(&s, b.model, 3, 1);
  run_args r = {b.model, &s, 0, ""};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, run_thread, &r), 0);
  sem_wait(&s.reached); /* the run is inside step 3's progress callback */
  char *sum = NULL;
  assert_int_equal(ml_train_model_get_summary(b.model, ML_TRAIN_SUMMARY_MODEL, &sum),
                   ML_ERROR_TRY_AGAIN);
  OK(ml_train_ext_model_stop(b.model)); /* not refused, does not wait */
  OK(ml_train_ext_model_stop(b.model)); /* twice is the same */
  sem_post(&s.go);
  pthread_join(t, NULL);
  assert_int_equal(r.rc, ML_TRAIN_EXT_ERROR_CANCELED);
  tu_assert_contains(r.msg, "stopped on request in epoch 1 after 3 of its steps");
  assert_int_equal(s.steps, 3);
  OK(ml_train_model_destroy(b.model));
  stopper_free(&s);
  assert_no_handles();
}

/* ---- stop while waiting for data, and from the generator --------------- */

typedef struct gen_stop {
  gen g;
  ml_train_model_h model;
  unsigned calls, at;
  int from_cb; /* 1: the callback stops; 0: it posts reached and waits */
  int stop_rc;
  sem_t reached, go;
} gen_stop;

static int gen_stop_cb(float **input, float **label, bool *last, void *ud) {
  gen_stop *w = ud;
  if (w->calls++ == w->at) {
    if (w->from_cb) {
      w->stop_rc = ml_train_ext_model_stop(w->model);
    } else {
      sem_post(&w->reached);
      sem_wait(&w->go);
    }
  }
  return gen_cb(input, label, last, &w->g);
}

static void test_stop_from_generator_and_while_waiting(void **state) {
  (void)state;
  for (int from_cb = 0; from_cb < 2; from_cb++) {
    gen_stop w;
    memset(&w, 0, sizeof w);
    gen_init(&w.g, 64, 3);
    w.at = 21;
    w.from_cb = from_cb;
    sem_init(&w.reached, 0, 0);
    sem_init(&w.go, 0, 0);
    small_model(&w.model);
    ml_train_dataset_h ds;
    OK(ml_train_dataset_create(&ds));
    OK(ml_train_dataset_add_generator(ds, ML_TRAIN_DATASET_MODE_TRAIN, gen_stop_cb, &w));
    OK(ml_train_model_set_dataset(w.model, ds));
    OK(ml_train_model_compile(w.model, "loss=cross", "batch_size=4", NULL));
    run_args r = {w.model, NULL, 0, ""};
    if (from_cb) {
      run_thread(&r);
      assert_int_equal(w.stop_rc, ML_ERROR_NONE);
    } else {
      pthread_t t;
      assert_int_equal(pthread_create(&t, NULL, run_thread, &r), 0);
      sem_wait(&w.reached); /* the producer is inside the callback */
      OK(ml_train_ext_model_stop(w.model));
      sem_post(&w.go);
      pthread_join(t, NULL);
    }
    assert_int_equal(r.rc, ML_TRAIN_EXT_ERROR_CANCELED);
    tu_assert_contains(r.msg, "stopped on request in epoch 1");
    assert_int_equal(w.calls, 22); /* the producer stopped right after */
    OK(ml_train_model_destroy(w.model));
    sem_destroy(&w.reached);
    sem_destroy(&w.go);
  }
  assert_no_handles();
}

/* ---- stop with no run; bad handles ------------------------------------- */

static void test_stop_without_run(void **state) {
  (void)state;
  built b;
  build(&b, 1);
  OK(ml_train_ext_model_stop(b.model)); /* nothing to stop */
  stopper s;
  stopper_init(&s, b.model, 0, 0);
  OK(ml_train_ext_model_run_with_progress(b.model, progress_stop, &s, "epochs=1", NULL));
  assert_int_equal(s.steps, 32); /* the earlier request did not carry over */
  OK(ml_train_ext_model_stop(b.model));
  OK(ml_train_model_run(b.model, "epochs=1", NULL));
  EXPECT_FAIL(ml_train_ext_model_stop(NULL), ML_ERROR_INVALID_PARAMETER, "NULL");
  EXPECT_FAIL(ml_train_ext_model_stop(b.in), ML_ERROR_INVALID_PARAMETER, "not a model");
  OK(ml_train_model_destroy(b.model));
  EXPECT_FAIL(ml_train_ext_model_stop(b.model), ML_ERROR_INVALID_PARAMETER, "not a live handle");
  stopper_free(&s);
  assert_no_handles();
}

/* ---- not finite -------------------------------------------------------- */

typedef struct gen_nan {
  gen g;
  unsigned calls, at;
} gen_nan;

static int gen_nan_cb(float **input, float **label, bool *last, void *ud) {
  gen_nan *w = ud;
  int rc = gen_cb(input, label, last, &w->g);
  if (w->calls++ == w->at)
    input[0][3] = NAN;
  return rc;
}

static void test_not_finite(void **state) {
  (void)state;
  gen_nan w;
  memset(&w, 0, sizeof w);
  gen_init(&w.g, 64, 5);
  w.at = 9; /* batch 3, sample 1 */
  ml_train_model_h model;
  small_model(&model);
  ml_train_dataset_h ds;
  OK(ml_train_dataset_create(&ds));
  OK(ml_train_dataset_add_generator(ds, ML_TRAIN_DATASET_MODE_TRAIN, gen_nan_cb, &w));
  OK(ml_train_model_set_dataset(model, ds));
  OK(ml_train_model_compile(model, "loss=cross", "batch_size=4", NULL));
  EXPECT_FAIL(ml_train_model_run(model, "epochs=1", NULL), ML_TRAIN_EXT_ERROR_NOT_FINITE,
              "epoch 1, iteration 3 (batch 3 of the epoch): the loss is NaN: input 0 of the "
              "batch is not finite (NaN in sample 1 of 4)");
  assert_non_null(ml_strerror(ML_TRAIN_EXT_ERROR_NOT_FINITE));
  /* the check off: the NaN is trained on */
  w.calls = 0;
  OK(ml_train_model_run(model, "epochs=1", "check_finite=false", NULL));
  /* and on again */
  w.calls = 0;
  EXPECT_FAIL(ml_train_model_run(model, "epochs=1", "check_finite=true", NULL),
              ML_TRAIN_EXT_ERROR_NOT_FINITE, "not finite");
  OK(ml_train_model_destroy(model));
  assert_no_handles();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stop_from_progress),
      cmocka_unit_test(test_stop_from_thread),
      cmocka_unit_test(test_stop_from_generator_and_while_waiting),
      cmocka_unit_test(test_stop_without_run),
      cmocka_unit_test(test_not_finite),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
