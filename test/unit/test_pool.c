/* The CPU backend's compute threads (nntrainer/compute/cpu_pool.c): the
 * parallel-for's parts (every index once, on fixed threads, inline where
 * it must be), the workers' lifetime (started at a run, joined when the
 * last model goes or the count changes, OpenBLAS on one thread while they
 * exist), their failures (an allocation, a thread that cannot start),
 * training bitwise the same at one and at two threads, and the products
 * split by rows or by columns of C against one thread's. */
#include "test_util.h"

#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/compute/kernels.h"
#include "nntrainer/ini.h"
#include "nntrainer/layer.h"
#include "nntrainer/model_impl.h"

#define MAXN 1000

typedef struct cover {
  atomic_int hits[MAXN];
  pthread_t who[16];
  size_t begin[16];
  atomic_int parts;
  atomic_int nested;
} cover;

static void mark(void *p, size_t b, size_t e) {
  cover *c = p;
  int k = atomic_fetch_add(&c->parts, 1);
  if (k < 16) {
    c->who[k] = pthread_self();
    c->begin[k] = b;
  }
  for (size_t i = b; i < e; i++)
    atomic_fetch_add(&c->hits[i], 1);
}

static void slow_mark(void *p, size_t b, size_t e) {
  mark(p, b, e);
  struct timespec ts = {0, 200000};
  nanosleep(&ts, NULL);
}

static void mark_nested(void *p, size_t b, size_t e) {
  cover *c = p;
  /* a part's own parallel-for runs inline, on this thread */
  cover inner;
  memset(&inner, 0, sizeof inner);
  nnt_cpu_pool_for(100, 1, 1, mark, &inner);
  if (atomic_load(&inner.parts) == 1 && pthread_equal(inner.who[0], pthread_self()))
    atomic_fetch_add(&c->nested, 1);
  for (size_t i = b; i < e; i++)
    atomic_fetch_add(&c->hits[i], 1);
}

/* The workers for t threads: a hold and a start (nnt_cpu_pool_release
 * joins them). */
static void start_threads(unsigned t) {
  nnt_err e = {0};
  assert_int_equal(nnt_cpu_set_threads(t, &e), NNT_OK);
  nnt_cpu_pool_hold();
  if (nnt_cpu_pool_start(&e))
    fail_msg("%s", e.msg);
  assert_int_equal(nnt_cpu_pool_threads(), t);
}

static void test_parts_cover_once(void **state) {
  (void)state;
  start_threads(3);
  /* OpenBLAS runs on one thread while the workers exist */
  assert_int_equal(openblas_get_num_threads(), 1);
  assert_int_equal(nnt_cpu_pool_products(), 1);
  static const size_t ns[] = {1, 2, 5, 31, 32, 33, 97, 999};
  static const size_t aligns[] = {1, 16, 32};
  for (size_t a = 0; a < 3; a++)
    for (size_t t = 0; t < NNT_ARRAY_LEN(ns); t++) {
      cover c;
      memset(&c, 0, sizeof c);
      unsigned long jobs = nnt_cpu_pool_jobs();
      nnt_cpu_pool_for(ns[t], aligns[a], 1, mark, &c);
      for (size_t i = 0; i < ns[t]; i++)
        assert_int_equal(atomic_load(&c.hits[i]), 1);
      int parts = atomic_load(&c.parts);
      /* up to 4 per thread, none empty */
      size_t units = (ns[t] + aligns[a] - 1) / aligns[a];
      assert_true(parts >= 1 && parts <= 12 && (size_t)parts <= units);
      if (ns[t] < 2 || units < 2) {
        /* too little, or one unit of align: inline */
        assert_int_equal(nnt_cpu_pool_jobs(), jobs);
        assert_int_equal(parts, 1);
        assert_true(pthread_equal(c.who[0], pthread_self()));
        continue;
      }
      assert_int_equal(nnt_cpu_pool_jobs(), jobs + 1);
      for (int k = 0; k < parts; k++)
        assert_int_equal(c.begin[k] % aligns[a], 0); /* boundaries at multiples of align */
    }
  /* the workers take parts: 1200 parts of a slow loop, not all on this
   * thread */
  cover c;
  int others = 0;
  for (int round = 0; round < 50 && !others; round++) {
    memset(&c, 0, sizeof c);
    nnt_cpu_pool_for(MAXN, 1, 1, slow_mark, &c);
    for (int k = 0; k < 12; k++)
      others += !pthread_equal(c.who[k], pthread_self());
  }
  assert_true(others > 0);
  /* each thread takes its own run of parts first (the caller parts 0..3
   * of 12, worker 1 parts 4..7, worker 2 parts 8..11): the caller runs
   * part 0 and the workers run the first of theirs (a busy core could let
   * another thread take one, so most rounds, not every one) */
  int own = 0;
  for (int round = 0; round < 40; round++) {
    memset(&c, 0, sizeof c);
    nnt_cpu_pool_for(960, 1, 1, slow_mark, &c);
    pthread_t by[12];
    int seen = 0;
    for (int k = 0; k < 12; k++)
      if (c.begin[k] % 80 == 0) {
        by[c.begin[k] / 80] = c.who[k];
        seen++;
      }
    assert_int_equal(seen, 12);
    own += pthread_equal(by[0], pthread_self()) && !pthread_equal(by[4], pthread_self()) &&
           !pthread_equal(by[8], pthread_self()) && !pthread_equal(by[4], by[8]);
  }
  assert_true(own >= 30);
  /* jobs in quick succession (a worker late for one job must take either
   * nothing or a part of the next, each part once) */
  for (int round = 0; round < 3000; round++) {
    memset(&c, 0, sizeof c);
    size_t n = 24 + (size_t)round % 75;
    nnt_cpu_pool_for(n, 1, 1, mark, &c);
    for (size_t i = 0; i < n; i++)
      if (atomic_load(&c.hits[i]) != 1)
        fail_msg("round %d: value %zu of %zu covered %d times", round, i, n,
                 atomic_load(&c.hits[i]));
  }
  /* min_part: 97 values in parts of at least 40 make 2 parts; below 2 *
   * min_part it runs whole on this thread */
  memset(&c, 0, sizeof c);
  nnt_cpu_pool_for(97, 1, 40, mark, &c);
  assert_int_equal(atomic_load(&c.parts), 2);
  memset(&c, 0, sizeof c);
  nnt_cpu_pool_for(79, 1, 40, mark, &c);
  assert_int_equal(atomic_load(&c.parts), 1);
  assert_true(pthread_equal(c.who[0], pthread_self()));
  /* no part below min_part, the last one (cut short by n) included: 100
   * values in multiples of 32 and parts of at least 40 would be 64 + 36,
   * so they run whole; 128 make 64 + 64 (three parts would be 32 + 32 +
   * 64) */
  memset(&c, 0, sizeof c);
  nnt_cpu_pool_for(100, 32, 40, mark, &c);
  assert_int_equal(atomic_load(&c.parts), 1);
  assert_int_equal(nnt_cpu_pool_largest_part(100, 32, 40), 100);
  memset(&c, 0, sizeof c);
  nnt_cpu_pool_for(128, 32, 40, mark, &c);
  assert_int_equal(atomic_load(&c.parts), 2);
  /* products: one part a thread (3 here): 96 + 96 + 64 of 256 in 32s */
  assert_int_equal(nnt_cpu_pool_largest_part(256, 32, 1), 96);
  assert_int_equal(nnt_cpu_pool_largest_part(256, 32, 100), 128);
  /* n = 0: fn is not called */
  memset(&c, 0, sizeof c);
  nnt_cpu_pool_for(0, 1, 1, mark, &c);
  assert_int_equal(atomic_load(&c.parts), 0);
  /* a part's parallel-for runs on its own thread, without waiting */
  memset(&c, 0, sizeof c);
  nnt_cpu_pool_for(300, 1, 1, mark_nested, &c);
  assert_int_equal(atomic_load(&c.nested), 12);
  nnt_cpu_pool_release();
  /* joined: one thread, and OpenBLAS has its count back */
  assert_int_equal(nnt_cpu_pool_threads(), 1);
  assert_int_equal(openblas_get_num_threads(), 3);
  memset(&c, 0, sizeof c);
  nnt_cpu_pool_for(500, 1, 1, mark, &c);
  assert_int_equal(atomic_load(&c.parts), 1);
}

static void test_lifetime(void **state) {
  (void)state;
  nnt_err e = {0};
  assert_int_equal(nnt_cpu_set_threads(2, &e), NNT_OK);
  /* no model holds the pool: a start makes no workers */
  assert_int_equal(nnt_cpu_pool_start(&e), NNT_OK);
  assert_int_equal(nnt_cpu_pool_threads(), 1);
  /* two holders: the workers stay until the last lets go */
  nnt_cpu_pool_hold();
  nnt_cpu_pool_hold();
  assert_int_equal(nnt_cpu_pool_start(&e), NNT_OK);
  assert_int_equal(nnt_cpu_pool_threads(), 2);
  nnt_cpu_pool_release();
  assert_int_equal(nnt_cpu_pool_threads(), 2);
  /* a new count joins them; the next start makes as many as asked */
  assert_int_equal(nnt_cpu_set_threads(4, &e), NNT_OK);
  assert_int_equal(nnt_cpu_pool_threads(), 1);
  assert_int_equal(openblas_get_num_threads(), 4);
  assert_int_equal(nnt_cpu_pool_start(&e), NNT_OK);
  assert_int_equal(nnt_cpu_pool_threads(), 4);
  assert_int_equal(openblas_get_num_threads(), 1);
  /* one thread: none */
  assert_int_equal(nnt_cpu_set_threads(1, &e), NNT_OK);
  assert_int_equal(nnt_cpu_pool_start(&e), NNT_OK);
  assert_int_equal(nnt_cpu_pool_threads(), 1);
  nnt_cpu_pool_release();
  /* a model holds it from create to destroy, and its run starts it */
  assert_int_equal(nnt_cpu_set_threads(2, &e), NNT_OK);
  nnt_model *m;
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  assert_int_equal(nnt_cpu_pool_threads(), 1);
  assert_int_equal(nnt_kernels_cpu()->prepare(nnt_kernels_cpu(), &e), NNT_OK);
  assert_int_equal(nnt_cpu_pool_threads(), 2);
  nnt_model_destroy(m);
  assert_int_equal(nnt_cpu_pool_threads(), 1);
  assert_int_equal(openblas_get_num_threads(), 2);
}

/* The workers' table cannot be allocated (nnt_malloc's failure hook): an
 * error naming the compute threads, no worker left, and the next start
 * works. */
static void test_start_alloc_fails(void **state) {
  (void)state;
  nnt_err e = {0};
  assert_int_equal(nnt_cpu_set_threads(3, &e), NNT_OK);
  nnt_cpu_pool_hold();
  nnt_alloc_fail_once(0);
  int rc = nnt_cpu_pool_start(&e);
  long failed = nnt_alloc_failures();
  nnt_alloc_fail_once(-1);
  assert_int_equal(failed, 1);
  assert_int_equal(rc, NNT_ERR_NOMEM);
  assert_int_equal(e.code, NNT_ERR_NOMEM);
  tu_assert_contains(e.msg, "cpu: out of memory for 2 compute threads");
  assert_int_equal(nnt_cpu_pool_threads(), 1);
  assert_int_equal(openblas_get_num_threads(), 3);
  nnt_err_clear(&e);
  assert_int_equal(nnt_cpu_pool_start(&e), NNT_OK);
  assert_int_equal(nnt_cpu_pool_threads(), 3);
  nnt_cpu_pool_release();
  assert_int_equal(nnt_cpu_pool_threads(), 1);
}

/* A worker cannot be started (a default stack size no mapping holds): the
 * error names it, the ones started are joined, and a later start works. */
static void test_start_thread_fails(void **state) {
  (void)state;
  nnt_err e = {0};
  assert_int_equal(nnt_cpu_set_threads(2, &e), NNT_OK);
  nnt_cpu_pool_hold();
  pthread_attr_t def, huge;
  assert_int_equal(pthread_getattr_default_np(&def), 0);
  assert_int_equal(pthread_attr_init(&huge), 0);
  assert_int_equal(pthread_attr_setstacksize(&huge, (size_t)1 << 48), 0);
  assert_int_equal(pthread_setattr_default_np(&huge), 0);
  int rc = nnt_cpu_pool_start(&e);
  assert_int_equal(pthread_setattr_default_np(&def), 0);
  pthread_attr_destroy(&huge);
  pthread_attr_destroy(&def);
  assert_int_equal(rc, NNT_ERR_NOMEM);
  tu_assert_contains(e.msg, "cpu: cannot start compute thread 1 of 1");
  assert_int_equal(nnt_cpu_pool_threads(), 1);
  assert_int_equal(openblas_get_num_threads(), 2);
  nnt_err_clear(&e);
  assert_int_equal(nnt_cpu_pool_start(&e), NNT_OK);
  assert_int_equal(nnt_cpu_pool_threads(), 2);
  nnt_cpu_pool_release();
}

typedef struct gemm_case {
  int ta, tb;
  size_t m, n, k;
  float beta;
} gemm_case;

/* gemm_rows (split by rows at the kernels' row quantum only): the whole
 * product and its blocks of the fewest rows nnt_gemm_rows_least allows
 * (and of three times that, split on the threads) bitwise one thread's
 * one call (c1), where
 * OpenBLAS's split products differ on its AVX2 kernels. c is scratch. */
static void rows_keep_bits(const gemm_case *gc, const float *a, const float *b, const float *c1,
                           float *c) {
  const nnt_kernels *k = nnt_kernels_cpu();
  size_t m = gc->m, n = gc->n, kk = gc->k, lda = gc->ta ? m : kk, ldb = gc->tb ? kk : n;
  size_t least = nnt_gemm_rows_least(m, n, kk);
  const size_t blocks[] = {m, 3 * least, least};
  for (size_t bi = 0; bi < NNT_ARRAY_LEN(blocks); bi++) {
    size_t block = blocks[bi];
    for (size_t j = 0; j < m * n; j++)
      c[j] = (float)(j % 13) / 13.0f;
    for (size_t r0 = 0; r0 < m; r0 += block) {
      size_t nr = m - r0 < block ? m - r0 : block;
      assert_int_equal(k->gemm_rows(k, gc->ta, gc->tb, nr, n, kk, 1.0f,
                                    a + (gc->ta ? r0 : r0 * lda), lda, b, ldb, gc->beta,
                                    c + r0 * n, n),
                       NNT_OK);
    }
    size_t diff = 0;
    for (size_t j = 0; j < m * n; j++)
      diff += memcmp(&c1[j], &c[j], sizeof(float)) != 0;
    if (diff)
      fail_msg("gemm_rows %d%d %zu x %zu x %zu in blocks of %zu rows (quantum %zu): %zu of %zu "
               "elements differ from one thread's one product", gc->ta, gc->tb, m, n, kk, block,
               nnt_cpu_blas_row_quantum(), diff, m * n);
  }
}

/* The products at two threads against one thread's: split by rows of C
 * (too few columns to split: 32), by columns (too few rows: 32), each in
 * the three transpose cases the layers use (forward NN, gradient NT with
 * beta 1, derivative TN), at sizes that take OpenBLAS's blocked path
 * (NN with alpha 1 and beta 0: above its direct size). Bitwise where a
 * split keeps every element's sum (nnt_cpu_blas_split_exact), else close
 * and the same bits at every run. */
static void gemm_splits(void) {
  static const gemm_case cases[] = {
      {0, 0, 512, 32, 1024, 0.0f}, {0, 0, 32, 1024, 512, 0.0f}, {0, 1, 256, 32, 256, 1.0f},
      {0, 1, 32, 256, 256, 1.0f},  {1, 0, 256, 32, 256, 0.0f},  {1, 0, 32, 256, 256, 0.0f},
      /* OpenBLAS's direct path on AVX-512 (and its parts) */
      {0, 0, 256, 192, 128, 0.0f}, {0, 0, 32, 4096, 27, 0.0f},
  };
  const nnt_kernels *k = nnt_kernels_cpu();
  assert_int_equal(openblas_get_num_threads(), 1);
  for (size_t i = 0; i < NNT_ARRAY_LEN(cases); i++) {
    size_t m = cases[i].m, n = cases[i].n, kk = cases[i].k;
    float *a = malloc(m * kk * sizeof(float)), *b = malloc(kk * n * sizeof(float));
    float *c1 = malloc(m * n * sizeof(float)), *c2 = malloc(m * n * sizeof(float));
    float *c3 = malloc(m * n * sizeof(float));
    assert_non_null(a && b && c1 && c2 && c3);
    for (size_t j = 0; j < m * kk; j++)
      a[j] = (float)((j * 7919) % 1000) / 1000.0f - 0.5f;
    for (size_t j = 0; j < kk * n; j++)
      b[j] = (float)((j * 104729) % 997) / 997.0f - 0.5f;
    for (size_t j = 0; j < m * n; j++)
      c1[j] = c2[j] = c3[j] = (float)(j % 13) / 13.0f;
    int ta = cases[i].ta, tb = cases[i].tb;
    size_t lda = ta ? m : kk, ldb = tb ? kk : n;
    /* one thread: OpenBLAS on this thread (it has one while the workers
     * exist) */
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)kk, 1.0f, a, (int)lda, b, (int)ldb, cases[i].beta, c1,
                (int)n);
    unsigned long jobs = nnt_cpu_pool_jobs();
    assert_int_equal(k->gemm(k, ta, tb, m, n, kk, 1.0f, a, lda, b, ldb, cases[i].beta, c2, n),
                     NNT_OK);
    assert_int_equal(nnt_cpu_pool_jobs(), jobs + 1); /* split */
    assert_int_equal(k->gemm(k, ta, tb, m, n, kk, 1.0f, a, lda, b, ldb, cases[i].beta, c3, n),
                     NNT_OK);
    assert_memory_equal(c2, c3, m * n * sizeof(float));
    size_t diff = 0;
    for (size_t j = 0; j < m * n; j++)
      diff += memcmp(&c1[j], &c2[j], sizeof(float)) != 0;
    if (nnt_cpu_blas_split_exact() && diff)
      fail_msg("case %zu (%d%d %zu x %zu x %zu): %zu of %zu elements differ from one thread's", i,
               ta, tb, m, n, kk, diff, m * n);
    tu_expect_close(c2, c1, m * n, 1e-4, "2 threads against 1");
    if (nnt_cpu_blas_row_quantum())
      rows_keep_bits(&cases[i], a, b, c1, c3);
    free(a);
    free(b);
    free(c1);
    free(c2);
    free(c3);
  }
}

static void test_gemm_splits(void **state) {
  (void)state;
  start_threads(2);
  print_message("kernels: %s\n", openblas_get_corename());
  gemm_splits();
  /* and on both kinds of kernels where this CPU has them */
  if (nnt_blas_cpu_rank() >= NNT_BLAS_AVX2) {
    assert_int_equal(nnt_blas_switch_core("Haswell"), 0);
    assert_int_equal(nnt_cpu_blas_split_exact(), 0);
    print_message("kernels: %s\n", openblas_get_corename());
    gemm_splits();
  }
  if (nnt_blas_cpu_rank() == NNT_BLAS_AVX512) {
    assert_int_equal(nnt_blas_switch_core("SkylakeX"), 0);
    assert_int_equal(nnt_cpu_blas_split_exact(), 1);
    print_message("kernels: %s\n", openblas_get_corename());
    gemm_splits();
  }
  nnt_cpu_pool_release();
}

/* conv-BN-ReLU with pooling and Adam, big enough that products,
 * im2col/col2im, batch-norm, pooling, activations and the updates split */
static const char convbn_ini[] =
    "[Model]\ntype = NeuralNetwork\nbatch_size = 4\nepochs = 1\nloss = cross\n"
    "[Optimizer]\ntype = adam\nlearning_rate = 0.01\n"
    "[in]\ntype = input\ninput_shape = 3:64:64\n"
    "[c1]\ntype = conv2d\nfilters = 32\nkernel_size = 3,3\npadding = same\n"
    "[b1]\ntype = batch_normalization\nactivation = relu\n"
    "[p1]\ntype = pooling2d\npooling = max\npool_size = 2,2\nstride = 2,2\n"
    "[c2]\ntype = conv2d\nfilters = 64\nkernel_size = 3,3\npadding = same\n"
    "[b2]\ntype = batch_normalization\nactivation = swish\n"
    "[p2]\ntype = pooling2d\npooling = average\npool_size = 3,3\nstride = 2,2\n"
    "[c3]\ntype = conv2d\nfilters = 64\nkernel_size = 1,1\n"
    "[b3]\ntype = batch_normalization\nactivation = relu\n"
    "[gap]\ntype = pooling2d\npooling = global_average\nflatten = true\n"
    "[out]\ntype = fully_connected\nunit = 10\nactivation = softmax\n";

/* The weights after 3 steps at t threads, and the jobs split meanwhile. */
static float *train_convbn(unsigned t, size_t *n, unsigned long *jobs) {
  nnt_err e = {0};
  assert_int_equal(nnt_cpu_set_threads(t, &e), NNT_OK);
  nnt_model *m;
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  nnt_dataset *ds;
  if (nnt_ini_load_text(m, "convbn.ini", convbn_ini, strlen(convbn_ini), NULL, 0, &e) ||
      nnt_dataset_create_synthetic(12, 5, &ds, &e) ||
      nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, &e) || nnt_model_compile(m, &e) ||
      nnt_model_initialize(m, &e))
    fail_msg("%s", e.msg);
  unsigned long before = nnt_cpu_pool_jobs();
  if (nnt_model_train(m, NULL, NULL, &e))
    fail_msg("%s", e.msg);
  *jobs = nnt_cpu_pool_jobs() - before;
  assert_int_equal(nnt_cpu_pool_threads(), t);
  *n = m->wpool_floats;
  float *w = tu_weights_of(m);
  nnt_model_destroy(m);
  return w;
}

static void convbn_bitwise(void) {
  size_t n1, n2;
  unsigned long j1, j2;
  float *w1 = train_convbn(1, &n1, &j1), *w2 = train_convbn(2, &n2, &j2);
  assert_int_equal(n1, n2);
  assert_int_equal(j1, 0);
  /* every op kind split: a forward and a backward step's ops, 3 steps */
  print_message("ops split over 2 threads: %lu\n", j2);
  assert_true(j2 >= 3 * 30);
  size_t diff = 0;
  for (size_t i = 0; i < n1; i++)
    diff += memcmp(&w1[i], &w2[i], sizeof(float)) != 0;
  if (nnt_cpu_blas_split_exact()) {
    if (diff)
      fail_msg("%zu of %zu weights differ between 1 and 2 threads", diff, n1);
  } else {
    /* a product split by columns rounds differently on these kernels
     * (as OpenBLAS's own threads do): close to one thread's, and the
     * same bits at two threads every time */
    size_t n3;
    unsigned long j3;
    float *w3 = train_convbn(2, &n3, &j3);
    assert_memory_equal(w2, w3, n1 * sizeof(float));
    print_message("%zu of %zu weights differ in their last bits from one thread's\n", diff, n1);
    /* Adam's first steps move every weight by about the learning rate
     * (0.01) whatever its gradient's size, so a near-zero gradient that
     * differs in its last bits may move a weight the other way: within
     * 2 x 3 steps x 0.01 of one thread's, where a wrong split is off by
     * the weights' own size */
    tu_expect_close(w2, w1, n1, 0.06, "2 threads against 1");
    free(w3);
  }
  free(w1);
  free(w2);
}

/* On the kernels OpenBLAS runs here, and on its AVX-512 ones where this
 * CPU has them (where the workers split the products too) */
static void test_convbn_bitwise(void **state) {
  (void)state;
  nnt_err e = {0};
  assert_int_equal(nnt_cpu_set_threads(1, &e), NNT_OK); /* its core chosen */
  print_message("kernels: %s\n", openblas_get_corename());
  convbn_bitwise();
  if (nnt_blas_cpu_rank() == NNT_BLAS_AVX512) {
    assert_int_equal(nnt_blas_switch_core("SkylakeX"), 0);
    assert_int_equal(nnt_cpu_blas_split_exact(), 1);
    print_message("kernels: %s\n", openblas_get_corename());
    convbn_bitwise();
  }
}

/* k->parallel: every index once, one range a thread, the ops inside
 * inline */
static void test_parallel_covers(void **state) {
  (void)state;
  start_threads(2);
  const nnt_kernels *k = nnt_kernels_cpu();
  cover c, d;
  memset(&c, 0, sizeof c);
  memset(&d, 0, sizeof d);
  unsigned long jobs = nnt_cpu_pool_jobs();
  nnt_kernels_parallel(k, 9, mark, &c);
  nnt_kernels_parallel(k, 8, mark_nested, &d);
  assert_int_equal(nnt_cpu_pool_jobs(), jobs + 2);
  for (int i = 0; i < 9; i++)
    assert_int_equal(atomic_load(&c.hits[i]), 1);
  assert_int_equal(atomic_load(&c.parts), 2);
  assert_int_equal(atomic_load(&d.nested), 2);
  nnt_cpu_pool_release();
}

/* conv2d's forward and derivative at t threads through table k: y (of
 * *ny floats) and dx (malloc'd; NULL and *rc set where an op failed) and
 * the jobs split. */
typedef struct conv_case {
  const char *filters, *kernel, *stride, *padding;
  nnt_dim in;
} conv_case;

static float *conv_run(const conv_case *cc, unsigned t, const nnt_kernels *k, size_t *ny,
                       float **dx, unsigned long *jobs, int *rc) {
  nnt_err e = {0};
  nnt_layer *l;
  assert_int_equal(nnt_layer_create("conv2d", &l, &e), NNT_OK);
  const char *props[] = {"filters", cc->filters, "kernel_size", cc->kernel,
                         "stride", cc->stride, "padding", cc->padding};
  for (int i = 0; i < 8; i += 2)
    assert_int_equal(nnt_layer_set_property(l, props[i], props[i + 1], &e), NNT_OK);
  nnt_finalize_ctx fc = {0};
  fc.n_in = fc.n_out = 1, fc.in_dim[0] = cc->in, fc.batch = cc->in.b, fc.trainable = 1;
  if (l->ops->finalize(l, &fc, &e))
    fail_msg("%s", e.msg);
  nnt_tensor x = {.dim = cc->in}, y = {.dim = fc.out_dim[0]}, dy = {.dim = fc.out_dim[0]};
  nnt_tensor d = {.dim = cc->in}, w[2], s[NNT_MAX_SCRATCH];
  nnt_tensor *all[] = {&x, &y, &dy, &d};
  *ny = nnt_dim_len(y.dim);
  for (int i = 0; i < 4; i++)
    all[i]->data = malloc(nnt_dim_len(all[i]->dim) * sizeof(float));
  for (unsigned i = 0; i < fc.n_w; i++)
    w[i] = (nnt_tensor){.dim = fc.w[i].dim, .data = malloc(nnt_dim_len(fc.w[i].dim) * 4)};
  for (unsigned i = 0; i < fc.n_scratch; i++)
    s[i] = (nnt_tensor){.dim = fc.scratch_dim[i],
                        .data = calloc(nnt_dim_len(fc.scratch_dim[i]), sizeof(float))};
  float *fill[] = {x.data, dy.data, w[0].data, fc.n_w > 1 ? w[1].data : NULL};
  size_t len[] = {nnt_dim_len(x.dim), nnt_dim_len(dy.dim), nnt_dim_len(w[0].dim),
                  fc.n_w > 1 ? nnt_dim_len(w[1].dim) : 0};
  for (int a = 0; a < 4; a++)
    for (size_t i = 0; i < len[a]; i++)
      fill[a][i] = (float)((i * 7919 + (size_t)a * 104729) % 1009) / 1009.0f - 0.5f;
  nnt_run_ctx c = {.k = k, .n_in = 1, .n_out = 1, .n_w = fc.n_w, .n_scratch = fc.n_scratch,
                   .in = &x, .out = &y, .d_in = &d, .d_out = &dy, .w = w, .scratch = s,
                   .training = 1};
  start_threads(t);
  unsigned long j0 = nnt_cpu_pool_jobs();
  *rc = l->ops->forward(l, &c);
  if (!*rc)
    *rc = l->ops->calc_derivative(l, &c);
  *jobs = nnt_cpu_pool_jobs() - j0;
  nnt_cpu_pool_release();
  for (unsigned i = 0; i < fc.n_w; i++)
    free(w[i].data);
  for (unsigned i = 0; i < fc.n_scratch; i++)
    free(s[i].data);
  free(x.data);
  free(dy.data);
  nnt_layer_destroy(l);
  if (*rc) {
    free(y.data);
    free(d.data);
    *dx = NULL;
    return NULL;
  }
  *dx = d.data;
  return y.data;
}

static int fail_im2col(const nnt_kernels *self, const struct nnt_conv_geom *g, size_t n,
                       const float *x, float *col) {
  (void)self, (void)g, (void)n, (void)x, (void)col;
  return NNT_ERR_NOMEM;
}

/* Layers whose images are too small to split well run whole images on
 * the threads (conv2d's img_job): at two threads the same bits as at one
 * on any kernels (each image's products run whole at both), the images
 * split over the threads, and a failing op inside a thread's images
 * returns its code. */
static void test_conv_images(void **state) {
  (void)state;
  const conv_case cases[] = {
      {"32", "1,1", "2,2", "0,0", nnt_dim_make(7, 16, 32, 32)}, /* a shortcut */
      {"32", "2,2", "1,1", "0,0", nnt_dim_make(5, 3, 20, 20)},  /* few channels (2x2: not the row kernel) */
      {"16", "1,1", "1,1", "0,0", nnt_dim_make(5, 8, 12, 12)},  /* pointwise */
  };
  const nnt_kernels *cpu = nnt_kernels_cpu();
  for (size_t i = 0; i < NNT_ARRAY_LEN(cases); i++) {
    unsigned long j1, j2;
    int rc;
    size_t ny;
    float *dx1, *dx2, *y1 = conv_run(&cases[i], 1, cpu, &ny, &dx1, &j1, &rc);
    assert_int_equal(rc, NNT_OK);
    float *y2 = conv_run(&cases[i], 2, cpu, &ny, &dx2, &j2, &rc);
    assert_int_equal(rc, NNT_OK);
    nnt_dim in = cases[i].in;
    assert_memory_equal(y1, y2, ny * sizeof(float));
    assert_memory_equal(dx1, dx2, nnt_dim_len(in) * sizeof(float));
    assert_int_equal(j1, 0);
    /* forward and derivative: a job per group of images (a group of up to
     * 2, conv.c CONV_PAR_IMAGES, or the batch where the layer needs no
     * columns; a group of one runs inline), against a job per op per image
     * before */
    if (j2 < 2 || j2 > 2 * ((in.b + 1) / 2))
      fail_msg("case %zu: %lu jobs at two threads", i, j2);
    free(y1), free(y2), free(dx1), free(dx2);
  }
  nnt_kernels failing = *cpu;
  failing.im2col = fail_im2col;
  failing.conv_fwd = NULL; /* the shortcut's forward on im2col on every CPU */
  unsigned long j;
  int rc;
  size_t ny;
  float *dx, *y = conv_run(&cases[0], 2, &failing, &ny, &dx, &j, &rc);
  assert_int_equal(rc, NNT_ERR_NOMEM);
  assert_null(y);
  assert_null(dx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parts_cover_once), cmocka_unit_test(test_lifetime),
      cmocka_unit_test(test_start_alloc_fails), cmocka_unit_test(test_start_thread_fails),
      cmocka_unit_test(test_convbn_bitwise), cmocka_unit_test(test_gemm_splits),
      cmocka_unit_test(test_parallel_covers), cmocka_unit_test(test_conv_images),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
