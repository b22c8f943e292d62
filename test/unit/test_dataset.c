/* Datasets: the generator, raw-file and synthetic sources (IDX files are
 * test_dataset_idx.c), batch packing, shuffling, dropping the last partial
 * batch, errors from the producer thread, and stopping it at any time
 * without hangs. */
#include "test_util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nntrainer/dataset.h"
#include "nntrainer/philox.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* ---- generator ---------------------------------------------------- */

/* Two inputs of 3 and 2 floats and a label of 2: sample k is
 * in0 {k, k+.25, k+.5}, in1 {-k, 100+k}, label {k, 1}. Sample n - 1 comes
 * with last set, and the callback rewinds for the next epoch (as
 * NNTrainer's test generators do). n < 0: never last. */
typedef struct gen {
  int n, fail_at, fail_rc, exit_at, sleep_us;
  int k;
  atomic_int calls;
} gen;

static gen gen_make(int n) {
  gen g = {.n = n, .fail_at = -1, .exit_at = -1};
  atomic_init(&g.calls, 0);
  return g;
}

static int gen_cb(float **in, float **label, bool *last, void *ud) {
  gen *g = ud;
  atomic_fetch_add(&g->calls, 1);
  if (g->sleep_us)
    usleep((useconds_t)g->sleep_us);
  int k = g->k;
  if (k == g->fail_at)
    return g->fail_rc;
  if (k == g->exit_at)
    pthread_exit(NULL);
  in[0][0] = (float)k, in[0][1] = k + 0.25f, in[0][2] = k + 0.5f;
  in[1][0] = (float)-k, in[1][1] = 100.0f + k;
  label[0][0] = (float)k, label[0][1] = 1;
  g->k++;
  if (g->k == g->n) {
    *last = true;
    g->k = 0;
  }
  return 0;
}

static nnt_ds_shape gen_shape(void) {
  nnt_ds_shape s = {0};
  s.n_in = 2, s.n_label = 1;
  s.in_len[0] = 3, s.in_len[1] = 2, s.label_len[0] = 2;
  return s;
}

typedef struct gbatch {
  float a[3 * 8], b[2 * 8], l[2 * 8];
} gbatch;

static int gen_next(nnt_dataset *d, gbatch *x, nnt_err *e) {
  float *in[] = {x->a, x->b}, *lab[] = {x->l};
  return tu_ds_next(d, in, lab, e);
}

/* batch holds samples first .. first + batch - 1, packed sample-major */
static void check_gen_batch(const gbatch *x, int first, int batch) {
  for (int s = 0; s < batch; s++) {
    float k = (float)(first + s);
    assert_float_equal(x->a[3 * s], k, 0);
    assert_float_equal(x->a[3 * s + 1], k + 0.25f, 0);
    assert_float_equal(x->a[3 * s + 2], k + 0.5f, 0);
    assert_float_equal(x->b[2 * s], -k, 0);
    assert_float_equal(x->b[2 * s + 1], 100 + k, 0);
    assert_float_equal(x->l[2 * s], k, 0);
    assert_float_equal(x->l[2 * s + 1], 1, 0);
  }
}

static void test_generator_order_and_packing(void **state) {
  (void)state;
  gen g = gen_make(7);
  nnt_dataset *d;
  nnt_err e = {0};
  nnt_ds_shape s = gen_shape();
  assert_int_equal(nnt_dataset_create_generator(gen_cb, &g, &d, &e), NNT_OK);
  /* shuffling cannot apply to a generator: its order is kept */
  assert_int_equal(nnt_dataset_set_property(d, "shuffle", "true", &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d, &s, 3, 1, &e), NNT_OK);
  assert_int_equal(nnt_dataset_samples(d), 0);
  gbatch x;
  for (int epoch = 0; epoch < 2; epoch++) {
    atomic_store(&g.calls, 0);
    assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
    for (int b = 0; b < 2; b++) {
      assert_int_equal(gen_next(d, &x, &e), 1);
      check_gen_batch(&x, 3 * b, 3);
    }
    /* sample 6, given with last, would start a third batch: dropped */
    assert_int_equal(gen_next(d, &x, &e), 0);
    assert_int_equal(gen_next(d, &x, &e), 0);
    nnt_dataset_epoch_end(d);
    assert_int_equal(atomic_load(&g.calls), 7);
  }
  nnt_dataset_destroy(d);
}

/* Full batches until the end of the epoch, each checked to hold the next
 * samples in order; -1 on error. */
static int count_batches(nnt_dataset *d, gbatch *x, int batch, nnt_err *e) {
  int n = 0, rc;
  while ((rc = gen_next(d, x, e)) == 1) {
    check_gen_batch(x, batch * n, batch);
    n++;
  }
  return rc == 0 ? n : -1;
}

static void test_generator_last_semantics(void **state) {
  (void)state;
  /* samples per epoch (the last one given with last) -> full batches of 3:
   * the sample given with last is used, as in NNTrainer (6 and 3 fill
   * their last batch with it) */
  const int n[] = {6, 1, 2, 3, 4, 5};
  const int want[] = {2, 0, 0, 1, 1, 1};
  for (size_t c = 0; c < NNT_ARRAY_LEN(n); c++) {
    gen g = gen_make(n[c]);
    nnt_dataset *d;
    nnt_err e = {0};
    nnt_ds_shape s = gen_shape();
    assert_int_equal(nnt_dataset_create_generator(gen_cb, &g, &d, &e), NNT_OK);
    assert_int_equal(nnt_dataset_prepare(d, &s, 3, 1, &e), NNT_OK);
    for (int epoch = 0; epoch < 2; epoch++) {
      atomic_store(&g.calls, 0);
      assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
      gbatch x;
      assert_int_equal(count_batches(d, &x, 3, &e), want[c]);
      nnt_dataset_epoch_end(d);
      assert_int_equal(atomic_load(&g.calls), n[c]); /* not one call more */
    }
    nnt_dataset_destroy(d);
  }
}

static void test_generator_error_propagates(void **state) {
  (void)state;
  gen g = gen_make(1000);
  g.fail_at = 11, g.fail_rc = -5;
  nnt_dataset *d;
  nnt_err e = {0};
  nnt_ds_shape s = gen_shape();
  assert_int_equal(nnt_dataset_create_generator(gen_cb, &g, &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_set_property(d, "buffer_size", "2", &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d, &s, 2, 1, &e), NNT_OK);
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
  /* let the producer fill the queue and block on it */
  for (int i = 0; i < 2000 && atomic_load(&g.calls) < 4; i++)
    usleep(1000);
  usleep(20000);
  assert_int_equal(atomic_load(&g.calls), 4);
  gbatch x;
  for (int b = 0; b < 5; b++) { /* samples 0..9 arrive before the error */
    assert_int_equal(gen_next(d, &x, &e), 1);
    check_gen_batch(&x, 2 * b, 2);
  }
  assert_int_equal(gen_next(d, &x, &e), -5);
  assert_string_equal(e.msg, "data generator callback returned -5 at sample 11");
  nnt_err_clear(&e);
  assert_int_equal(gen_next(d, &x, &e), -5); /* the epoch stays failed */
  tu_assert_contains(e.msg, "returned -5");
  /* a positive code comes back as it is */
  g.k = 0, g.fail_at = 0, g.fail_rc = 7;
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
  assert_int_equal(gen_next(d, &x, &e), 7);
  assert_string_equal(e.msg, "data generator callback returned 7 at sample 0");
  /* a clean epoch afterwards */
  g.k = 0, g.fail_at = -1, g.n = 8;
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
  assert_int_equal(count_batches(d, &x, 2, &e), 4);
  nnt_dataset_destroy(d);
}

static void test_generator_thread_exit(void **state) {
  (void)state;
  /* a callback that ends the producer thread: the consumer is told, no hang */
  gen g = gen_make(100);
  g.exit_at = 3;
  nnt_dataset *d;
  nnt_err e = {0};
  nnt_ds_shape s = gen_shape();
  assert_int_equal(nnt_dataset_create_generator(gen_cb, &g, &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d, &s, 2, 1, &e), NNT_OK);
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
  gbatch x;
  assert_int_equal(gen_next(d, &x, &e), 1);
  check_gen_batch(&x, 0, 2);
  assert_int_equal(gen_next(d, &x, &e), NNT_ERR_UNKNOWN);
  tu_assert_contains(e.msg, "producer thread of 'data generator' exited");
  nnt_dataset_destroy(d);
}

/* ---- raw file ----------------------------------------------------- */

/* record r: inputs {100r, 100r+1, 100r+2}, label one-hot of r % 2 */
static char *write_raw(const char *dir, const char *name, size_t records, size_t extra) {
  char *p = malloc(512);
  snprintf(p, 512, "%s/%s", dir, name);
  FILE *f = fopen(p, "wb");
  assert_non_null(f);
  for (size_t r = 0; r < records; r++) {
    float v[5] = {100.0f * r, 100.0f * r + 1, 100.0f * r + 2, (float)(r % 2 == 0),
                  (float)(r % 2 == 1)};
    assert_int_equal(fwrite(v, sizeof v, 1, f), 1);
  }
  fwrite("xyz", 1, extra, f);
  fclose(f);
  return p;
}

/* Read one epoch of batch-4 batches of (2 + 1 inputs, 2 labels); record the
 * record numbers in order and check each sample is intact. */
static size_t raw_epoch(nnt_dataset *d, int *recs, nnt_err *e) {
  float a[8], b[4], l[8], *in[] = {a, b}, *lab[] = {l};
  size_t n = 0;
  int rc, end;
  assert_int_equal(nnt_dataset_epoch_begin(d, e), NNT_OK);
  while ((rc = nnt_dataset_next_batch(d, in, lab, &end, e)) == NNT_OK && !end)
    for (int s = 0; s < 4; s++, n++) {
      int r = (int)(a[2 * s] / 100);
      assert_float_equal(a[2 * s], 100.0f * r, 0);
      assert_float_equal(a[2 * s + 1], 100.0f * r + 1, 0);
      assert_float_equal(b[s], 100.0f * r + 2, 0);
      assert_float_equal(l[2 * s], (float)(r % 2 == 0), 0);
      assert_float_equal(l[2 * s + 1], (float)(r % 2 == 1), 0);
      recs[n] = r;
    }
  assert_int_equal(rc, NNT_OK);
  assert_int_equal(end, 1);
  return n;
}

static nnt_ds_shape raw_shape(void) {
  nnt_ds_shape s = {0};
  s.n_in = 2, s.n_label = 1;
  s.in_len[0] = 2, s.in_len[1] = 1, s.label_len[0] = 2;
  return s;
}

static void test_raw_file_order(void **state) {
  (void)state;
  char *dir = tu_mkdtemp(), *path = write_raw(dir, "a.dat", 10, 0);
  nnt_dataset *d;
  nnt_err e = {0};
  nnt_ds_shape s = raw_shape();
  assert_int_equal(nnt_dataset_create_file(path, &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_set_property(d, "shuffle", "false", &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d, &s, 4, 1, &e), NNT_OK);
  assert_int_equal(nnt_dataset_samples(d), 10);
  int recs[12];
  for (int epoch = 0; epoch < 2; epoch++) {
    assert_int_equal(raw_epoch(d, recs, &e), 8); /* records 8 and 9: partial, dropped */
    for (int i = 0; i < 8; i++)
      assert_int_equal(recs[i], i);
  }
  nnt_dataset_destroy(d);
  free(path);
  tu_rmdir(dir);
  free(dir);
}

static void check_perm(const int *recs, int n) {
  int seen[64] = {0};
  for (int i = 0; i < n; i++)
    seen[recs[i]]++;
  for (int i = 0; i < n; i++)
    assert_int_equal(seen[i], 1);
}

static void test_raw_file_shuffle(void **state) {
  (void)state;
  char *dir = tu_mkdtemp(), *path = write_raw(dir, "a.dat", 24, 0);
  nnt_dataset *a, *b, *c;
  nnt_err e = {0};
  nnt_ds_shape s = raw_shape();
  assert_int_equal(nnt_dataset_create_file(path, &a, &e), NNT_OK);
  assert_int_equal(nnt_dataset_create_file(path, &b, &e), NNT_OK);
  assert_int_equal(nnt_dataset_create_file(path, &c, &e), NNT_OK);
  assert_int_equal(nnt_dataset_set_property(b, "buffer_size", "1", &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(a, &s, 4, 7, &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(b, &s, 4, 7, &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(c, &s, 4, 8, &e), NNT_OK);
  int a1[24], a2[24], b1[24], b2[24], c1[24], id[24];
  for (int i = 0; i < 24; i++)
    id[i] = i;
  assert_int_equal(raw_epoch(a, a1, &e), 24);
  assert_int_equal(raw_epoch(b, b1, &e), 24);
  assert_int_equal(raw_epoch(c, c1, &e), 24);
  check_perm(a1, 24);
  check_perm(c1, 24);
  assert_memory_equal(a1, b1, sizeof a1);     /* same seed, same order */
  assert_memory_not_equal(a1, id, sizeof a1); /* shuffled */
  assert_memory_not_equal(a1, c1, sizeof a1); /* another seed, another order */
  assert_int_equal(raw_epoch(a, a2, &e), 24);
  assert_int_equal(raw_epoch(b, b2, &e), 24);
  check_perm(a2, 24);
  assert_memory_equal(a2, b2, sizeof a2);
  assert_memory_not_equal(a1, a2, sizeof a1); /* each epoch reshuffles */
  /* prepare again with the seed: the sequence starts over */
  assert_int_equal(nnt_dataset_prepare(a, &s, 4, 7, &e), NNT_OK);
  assert_int_equal(raw_epoch(a, a2, &e), 24);
  assert_memory_equal(a1, a2, sizeof a1);
  nnt_dataset_destroy(a);
  nnt_dataset_destroy(b);
  nnt_dataset_destroy(c);
  free(path);
  tu_rmdir(dir);
  free(dir);
}

static void test_raw_file_errors(void **state) {
  (void)state;
  char *dir = tu_mkdtemp(), *path = write_raw(dir, "odd.dat", 10, 3);
  nnt_dataset *d;
  nnt_err e = {0};
  nnt_ds_shape s = raw_shape();
  /* not a whole number of records */
  assert_int_equal(nnt_dataset_create_file(path, &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d, &s, 4, 1, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, path);
  tu_assert_contains(e.msg, "has 203 bytes, not a whole number of 20-byte records");
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_ERR_INVAL); /* not prepared */
  nnt_dataset_destroy(d);
  free(path);
  /* fewer records than a batch */
  path = write_raw(dir, "short.dat", 3, 0);
  assert_int_equal(nnt_dataset_create_file(path, &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d, &s, 4, 1, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, path);
  tu_assert_contains(e.msg, "3 samples, fewer than one batch of 4");
  nnt_dataset_destroy(d);
  free(path);
  /* missing */
  assert_int_equal(nnt_dataset_create_file("/nonexistent/x.dat", &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d, &s, 4, 1, &e), NNT_ERR_IO);
  tu_assert_contains(e.msg, "/nonexistent/x.dat");
  nnt_dataset_destroy(d);
  /* a file that shrinks after prepare: an error naming it, not a hang */
  path = write_raw(dir, "shrinks.dat", 100, 0);
  assert_int_equal(nnt_dataset_create_file(path, &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_set_property(d, "shuffle", "false", &e), NNT_OK);
  assert_int_equal(nnt_dataset_set_property(d, "buffer_size", "1", &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d, &s, 4, 1, &e), NNT_OK);
  assert_int_equal(truncate(path, 10 * 20 + 7), 0);
  float a[8], b[4], l[8], *in[] = {a, b}, *lab[] = {l};
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
  assert_int_equal(tu_ds_next(d, in, lab, &e), 1);
  assert_int_equal(tu_ds_next(d, in, lab, &e), 1);
  assert_float_equal(a[6], 700, 0);
  assert_int_equal(tu_ds_next(d, in, lab, &e), NNT_ERR_IO);
  tu_assert_contains(e.msg, path);
  tu_assert_contains(e.msg, "record 10");
  nnt_dataset_destroy(d);
  free(path);
  tu_rmdir(dir);
  free(dir);
}

/* ---- synthetic ---------------------------------------------------- */

#define SYN_N 64
#define SYN_ROW 9 /* 5 inputs, 4 label values */

/* All samples of one epoch (batch 4) as rows of inputs then label. */
static void syn_epoch(unsigned cseed, uint64_t pseed, int shuffle, float rows[SYN_N][SYN_ROW]) {
  nnt_dataset *d;
  nnt_err e = {0};
  nnt_ds_shape s = tu_ds_shape1(5, 4);
  assert_int_equal(nnt_dataset_create_synthetic(SYN_N, cseed, &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_set_property(d, "shuffle", shuffle ? "true" : "false", &e),
                   NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d, &s, 4, pseed, &e), NNT_OK);
  assert_int_equal(nnt_dataset_samples(d), SYN_N);
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
  float in[20], l[16], *pi[] = {in}, *pl[] = {l};
  for (int b = 0; b < SYN_N / 4; b++) {
    assert_int_equal(tu_ds_next(d, pi, pl, &e), 1);
    for (int r = 0; r < 4; r++) {
      memcpy(rows[4 * b + r], in + 5 * r, 5 * sizeof(float));
      memcpy(rows[4 * b + r] + 5, l + 4 * r, 4 * sizeof(float));
    }
  }
  assert_int_equal(tu_ds_next(d, pi, pl, &e), 0);
  nnt_dataset_destroy(d);
}

/* Prepared again for a larger batch (a model's batch_size changed after an
 * epoch ran), the ring holds the larger batches: the same samples come out,
 * and nothing is written past the ring (the ASan build checks). */
static void test_reprepare_larger_batch(void **state) {
  (void)state;
  static float ref[SYN_N][SYN_ROW];
  syn_epoch(3, 9, 0, ref);
  nnt_dataset *d;
  nnt_err e = {0};
  nnt_ds_shape s = tu_ds_shape1(5, 4);
  assert_int_equal(nnt_dataset_create_synthetic(SYN_N, 3, &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_set_property(d, "shuffle", "false", &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d, &s, 2, 9, &e), NNT_OK);
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
  float in[16 * 5], l[16 * 4], *pi[] = {in}, *pl[] = {l};
  assert_int_equal(tu_ds_next(d, pi, pl, &e), 1);
  nnt_dataset_epoch_end(d);
  assert_int_equal(nnt_dataset_prepare(d, &s, 16, 9, &e), NNT_OK);
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
  for (int b = 0; b < SYN_N / 16; b++) {
    assert_int_equal(tu_ds_next(d, pi, pl, &e), 1);
    for (int r = 0; r < 16; r++) {
      assert_memory_equal(in + 5 * r, ref[16 * b + r], 5 * sizeof(float));
      assert_memory_equal(l + 4 * r, ref[16 * b + r] + 5, 4 * sizeof(float));
    }
  }
  assert_int_equal(tu_ds_next(d, pi, pl, &e), 0);
  nnt_dataset_destroy(d);
}

static void test_synthetic_determinism(void **state) {
  (void)state;
  static float ref[SYN_N][SYN_ROW], again[SYN_N][SYN_ROW], shuf[SYN_N][SYN_ROW],
      other[SYN_N][SYN_ROW], same[SYN_N][SYN_ROW];
  syn_epoch(3, 9, 0, ref);
  syn_epoch(3, 9, 0, again);
  assert_memory_equal(ref, again, sizeof ref);
  /* the prepare seed only orders samples: unshuffled, they are the same
   * (a model evaluating its training set sees what it trained on) */
  syn_epoch(3, 10, 0, same);
  assert_memory_equal(ref, same, sizeof ref);
  syn_epoch(4, 9, 0, other); /* another create seed, other samples */
  for (int i = 0; i < SYN_N; i++)
    assert_memory_not_equal(ref[i], other[i], sizeof ref[i]);
  /* shuffled: the same samples, each once, in another order */
  syn_epoch(3, 9, 1, shuf);
  assert_memory_not_equal(ref, shuf, sizeof ref);
  int seen[SYN_N] = {0};
  for (int i = 0; i < SYN_N; i++)
    for (int j = 0; j < SYN_N; j++)
      if (!memcmp(shuf[i], ref[j], sizeof ref[j]))
        seen[j]++;
  for (int j = 0; j < SYN_N; j++)
    assert_int_equal(seen[j], 1);
  /* one-hot labels; inputs look like N(0, 1) */
  double sum = 0, sq = 0;
  int classes[4] = {0};
  for (int i = 0; i < SYN_N; i++) {
    float lsum = 0;
    for (int c = 0; c < 4; c++) {
      assert_true(ref[i][5 + c] == 0 || ref[i][5 + c] == 1);
      lsum += ref[i][5 + c];
      classes[c] += ref[i][5 + c] == 1;
    }
    assert_float_equal(lsum, 1, 0);
    for (int j = 0; j < 5; j++)
      sum += ref[i][j], sq += ref[i][j] * ref[i][j];
  }
  double n = SYN_N * 5, mean = sum / n, var = sq / n - mean * mean;
  assert_true(mean > -0.2 && mean < 0.2);
  assert_true(var > 0.7 && var < 1.3);
  for (int c = 0; c < 4; c++)
    assert_true(classes[c] > 4); /* 16 expected per class */
  /* sample k is Philox stream k under the create seed, as dataset_sources.c
   * documents: anyone (a thread, a backend) makes it from k alone */
  for (uint64_t k = 0; k < SYN_N; k++) {
    for (uint64_t v = 0; v < 5; v++) {
      nnt_philox_out o = nnt_philox(3, k, v / 2);
      uint32_t a = o.v[2 * (v % 2)], b = o.v[2 * (v % 2) + 1];
      uint32_t sum = (a & 0xffff) + (a >> 16) + (b & 0xffff) + (b >> 16);
      assert_true(ref[k][v] == ((float)sum * (1.0f / 65536.0f) - 2.0f) * 1.7320508f);
    }
    uint32_t u = nnt_philox(3, k, (1ull << 63)).v[0];
    assert_true(ref[k][5 + (((uint64_t)u * 4) >> 32)] == 1.0f);
  }
}

/* ---- epochs, stopping, properties --------------------------------- */

static void test_epoch_end_midway(void **state) {
  (void)state;
  nnt_dataset *d;
  nnt_err e = {0};
  nnt_ds_shape s = tu_ds_shape1(3, 2);
  assert_int_equal(nnt_dataset_create_synthetic(40, 5, &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_set_property(d, "buffer_size", "1", &e), NNT_OK);
  assert_int_equal(nnt_dataset_set_property(d, "shuffle", "false", &e), NNT_OK);
  float in[12], l[8], first[12], *pi[] = {in}, *pl[] = {l};
  /* no epoch yet */
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "prepared");
  assert_int_equal(nnt_dataset_prepare(d, &s, 4, 1, &e), NNT_OK);
  assert_int_equal(tu_ds_next(d, pi, pl, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "no epoch is running");
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
  assert_int_equal(tu_ds_next(d, pi, pl, &e), 1);
  memcpy(first, in, sizeof in);
  /* an unknown key is refused without disturbing the epoch */
  assert_int_equal(nnt_dataset_set_property(d, "nope", "1", &e), NNT_ERR_NOKEY);
  assert_int_equal(tu_ds_next(d, pi, pl, &e), 1);
  assert_memory_not_equal(first, in, sizeof in);
  /* stop while the producer waits on the full queue, twice (idempotent) */
  nnt_dataset_epoch_end(d);
  nnt_dataset_epoch_end(d);
  assert_int_equal(tu_ds_next(d, pi, pl, &e), NNT_ERR_INVAL);
  /* a new epoch starts from the beginning and runs to its end */
  for (int round = 0; round < 3; round++) {
    if (round == 2) /* a bigger queue from the next epoch on */
      assert_int_equal(nnt_dataset_set_property(d, "buffer_size", "16", &e), NNT_OK);
    assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
    size_t n = 0;
    while (tu_ds_next(d, pi, pl, &e) == 1)
      if (!n++)
        assert_memory_equal(first, in, sizeof in);
    assert_int_equal(n, 10);
    if (round == 0) { /* abandon a finished epoch without epoch_end */
      assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
      assert_int_equal(tu_ds_next(d, pi, pl, &e), 1);
      /* prepare during an epoch stops it */
      assert_int_equal(nnt_dataset_prepare(d, &s, 4, 1, &e), NNT_OK);
      assert_int_equal(tu_ds_next(d, pi, pl, &e), NNT_ERR_INVAL);
    }
  }
  nnt_dataset_destroy(d);
}

static void test_destroy_while_blocked(void **state) {
  (void)state;
  /* an endless generator: the producer fills the queue and blocks */
  gen g = gen_make(-1);
  nnt_dataset *d;
  nnt_err e = {0};
  nnt_ds_shape s = gen_shape();
  assert_int_equal(nnt_dataset_create_generator(gen_cb, &g, &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_set_property(d, "buffer_size", "2", &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d, &s, 3, 1, &e), NNT_OK);
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
  for (int i = 0; i < 2000 && atomic_load(&g.calls) < 6; i++)
    usleep(1000);
  usleep(20000);
  assert_int_equal(atomic_load(&g.calls), 6);
  double t0 = now_s();
  nnt_dataset_destroy(d);
  assert_true(now_s() - t0 < 0.5);
  /* a slow source in the middle of a big batch stops between samples */
  g = gen_make(-1);
  g.sleep_us = 1000;
  assert_int_equal(nnt_dataset_create_generator(gen_cb, &g, &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d, &s, 5000, 1, &e), NNT_OK);
  assert_int_equal(nnt_dataset_epoch_begin(d, &e), NNT_OK);
  usleep(20000);
  t0 = now_s();
  nnt_dataset_destroy(d);
  assert_true(now_s() - t0 < 0.5);
  assert_true(atomic_load(&g.calls) < 1000);
}

static void test_properties(void **state) {
  (void)state;
  nnt_dataset *d;
  nnt_err e = {0};
  assert_int_equal(nnt_dataset_create_synthetic(8, 1, &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_set_property(d, "Buffer_Size", " 3 ", &e), NNT_OK);
  assert_int_equal(nnt_dataset_set_property(d, "SHUFFLE", "False", &e), NNT_OK);
  assert_int_equal(nnt_dataset_set_property(d, "buffer_size", "0", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "buffer_size");
  assert_int_equal(nnt_dataset_set_property(d, "buffer_size", "-2", &e), NNT_ERR_INVAL);
  assert_int_equal(nnt_dataset_set_property(d, "shuffle", "maybe", &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "maybe");
  assert_int_equal(nnt_dataset_set_property(d, "bogus_key", "1", &e), NNT_ERR_NOKEY);
  tu_assert_contains(e.msg, "bogus_key");
  assert_int_equal(nnt_dataset_set_property(d, "path", "/x", &e), NNT_ERR_NOKEY);
  /* bad shapes and batches */
  nnt_ds_shape s = tu_ds_shape1(3, 2), none = {0}, zero = tu_ds_shape1(0, 2);
  assert_int_equal(nnt_dataset_prepare(d, &s, 0, 1, &e), NNT_ERR_INVAL);
  assert_int_equal(nnt_dataset_prepare(d, &none, 2, 1, &e), NNT_ERR_INVAL);
  assert_int_equal(nnt_dataset_prepare(d, &zero, 2, 1, &e), NNT_ERR_INVAL);
  assert_int_equal(nnt_dataset_samples(d), 0);
  nnt_dataset_destroy(d);
  nnt_dataset_destroy(NULL);
  nnt_dataset_epoch_end(NULL);
  /* constructors check their arguments */
  d = NULL;
  assert_int_equal(nnt_dataset_create_generator(NULL, NULL, &d, &e), NNT_ERR_INVAL);
  assert_int_equal(nnt_dataset_create_file("", &d, &e), NNT_ERR_INVAL);
  assert_int_equal(nnt_dataset_create_idx("a", NULL, &d, &e), NNT_ERR_INVAL);
  assert_int_equal(nnt_dataset_create_synthetic(0, 1, &d, &e), NNT_ERR_INVAL);
  assert_null(d);
  /* a file source can be pointed at another file */
  char *dir = tu_mkdtemp(), *path = write_raw(dir, "p.dat", 8, 0);
  nnt_ds_shape rs = raw_shape();
  assert_int_equal(nnt_dataset_create_file("/nonexistent/y.dat", &d, &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d, &rs, 4, 1, &e), NNT_ERR_IO);
  assert_int_equal(nnt_dataset_set_property(d, "PATH", path, &e), NNT_OK);
  assert_int_equal(nnt_dataset_prepare(d, &rs, 4, 1, &e), NNT_OK);
  int recs[8];
  assert_int_equal(raw_epoch(d, recs, &e), 8);
  check_perm(recs, 8);
  nnt_dataset_destroy(d);
  free(path);
  tu_rmdir(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_generator_order_and_packing),
      cmocka_unit_test(test_generator_last_semantics),
      cmocka_unit_test(test_generator_error_propagates),
      cmocka_unit_test(test_generator_thread_exit),
      cmocka_unit_test(test_raw_file_order),
      cmocka_unit_test(test_raw_file_shuffle),
      cmocka_unit_test(test_raw_file_errors),
      cmocka_unit_test(test_synthetic_determinism),
      cmocka_unit_test(test_reprepare_larger_batch),
      cmocka_unit_test(test_epoch_end_midway),
      cmocka_unit_test(test_destroy_while_blocked),
      cmocka_unit_test(test_properties),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
