/* The CPU backend's compute threads: a small fixed pool and a parallel-for
 * over disjoint ranges of an op's output.
 *
 * With T threads (NNTRAINER_THREADS, the command line's setting, or
 * nnt_cpu_set_threads; left unset: OpenBLAS's own count, which follows
 * OPENBLAS_NUM_THREADS or the cores) the pool has T - 1 workers and the
 * calling thread is the T-th. nnt_cpu_pool_for splits [0, n) into
 * contiguous parts (up to 4 per thread, none below the op's min_part; a
 * range that makes one part runs on the caller without a job). Each
 * thread first takes its own run of neighbouring parts (thread t the t-th
 * of T runs: the same memory at every op over the same range, so what one
 * op leaves in a core's cache the next op reads there; on a VM whose two
 * cores share no cache, parts taken by whichever thread came first spent
 * most of the second core moving data between the cores), then any part
 * still left, from the last (a thread whose core another process holds
 * delays the op by one part at most: a fixed part per thread made two
 * threads 2 to 7 times slower than one under load). Every
 * output is computed by the same
 * arithmetic whatever part holds it and whichever thread runs it: the
 * loops' results are bitwise the same for any T (an op is split only over
 * what it writes, never over the terms of a sum), and so are the
 * products' on OpenBLAS's AVX-512 kernels (nnt_cpu_blas_split_exact).
 * The matrix products are split the same way (cpu_gemm.c: by rows of
 * C, or by columns where a row part would have fewer than 64 rows, the
 * choice measured per product shape at two threads, docs/performance.md;
 * nnt_cpu_pool_largest_part tells it the parts it would get), one part
 * per thread, each a one-thread OpenBLAS product; a row split, like a
 * column split, keeps every element's own sum over k. While the workers
 * exist OpenBLAS itself runs on one thread: its own idle threads would
 * otherwise spin beside ours on the same cores. The products keep
 * OpenBLAS's own threads instead (as before the pool) under a process
 * memory limit, where each worker would map another 128 MiB OpenBLAS work
 * buffer (cpu_blas.c; nnt_cpu_set_threads has checked and mapped those of
 * OpenBLAS's threads). On kernel paths where a product's bits depend on
 * how it is split (nnt_cpu_blas_split_exact is 0: OpenBLAS's
 * Haswell kernels, whose own threads change them too) the products are
 * split all the same: the same bits at every run with one thread count,
 * the last bits of one thread's differing (running them on one thread to
 * keep those, or on OpenBLAS's threads beside the workers, gave up most
 * of the second core on AVX2 CPUs: docs/performance.md).
 *
 * A worker computes each job's parts in the floating-point mode of the
 * thread that posted it (common.h: in a training step, subnormals are 0),
 * so that a part's bits do not depend on the thread that runs it.
 *
 * Lifetime: every model holds the pool (nnt_cpu_pool_hold at create,
 * nnt_cpu_pool_release at destroy); the workers start at a run's prepare
 * (nnt_cpu_pool_start, where a failure can be reported) and are joined and
 * freed when the last model is destroyed, or when the thread count
 * changes (they start again at the next run). Ops called with no workers
 * run on the calling thread.
 *
 * The state is process-wide, like the thread count it serves: OpenBLAS's
 * threads and its thread count belong to the process, and the CPU backend
 * and its kernel table are one static instance that every model shares,
 * so a pool per model would put several sets of threads on the same cores.
 * Two models computing at once from two threads share it: the first takes
 * the workers, the other's ops run on its own thread meanwhile. */
#include "nntrainer/compute/kernels.h"
#include "nntrainer/compute/cpu_impl.h"

#include <cblas.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

/* How long a worker spins for the next job before it sleeps, and the
 * caller for the parts others took before it yields: in pause
 * instructions. Ops follow each other closely inside a step; between
 * steps (or when other processes have the cores) the workers sleep. */
#define SPIN_JOB 4000
#define SPIN_DONE 1000
/* Parts per thread of a loop: a worker that starts late (its core busy
 * with another process) leaves its parts to the others, from the last. */
#define PARTS_PER_THREAD 4

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static struct {
  pthread_mutex_t mu; /* guards holds, want, nw, tid, limited and sleeping */
  pthread_cond_t wake;
  unsigned holds;   /* models alive */
  unsigned want;    /* threads asked for; 0: not set, OpenBLAS's count */
  unsigned nw;      /* workers running */
  unsigned blas_n;  /* OpenBLAS's count before the workers set it to 1 */
  int limited;      /* workers run no products (a memory limit, or kernels
                     * whose products a split would change) */
  int blas_one;     /* OpenBLAS set to one thread while the workers exist */
  pthread_t *tid;
  unsigned sleeping;
  unsigned gen0;         /* gen when the workers were made */
  atomic_flag busy;      /* a job (or a start or join) is using the workers */
  atomic_uint gen;       /* job number: a worker wakes for each */
  /* the job's parts (high 32 bits) and the parts taken (low 32, a bit
   * each): a part is claimed with one atomic or, so a worker late for one
   * job takes either nothing or a part of the job that is posted then */
  atomic_ullong ticket;
  atomic_uint done;      /* parts finished */
  atomic_int quit;
  atomic_ulong jobs;     /* jobs split over the workers so far */
  /* the job, written before its ticket is published */
  nnt_pool_fn fn;
  void *arg;
  size_t n, align;
  unsigned parts;
  unsigned fpmode; /* the posting thread's floating-point mode (common.h) */
  /* the threads of the posted job (read by a worker before it claims a
   * part, maybe while the next job is posted: atomic) */
  atomic_uint threads;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, .busy = ATOMIC_FLAG_INIT};

/* Part t of parts of [0, n): boundaries at multiples of align. */
static void part(size_t n, size_t align, unsigned parts, unsigned t, size_t *b, size_t *e) {
  size_t units = (n + align - 1) / align;
  size_t lo = units * t / parts, hi = units * (t + 1) / parts;
  *b = lo * align < n ? lo * align : n;
  *e = hi * align < n ? hi * align : n;
}

/* The thread's number in the pool: 0 for the thread that posts a job (or
 * any thread outside the pool), 1 .. nw for the workers. */
static _Thread_local unsigned my_id;
/* A worker's floating-point mode: set to each job's before its parts. */
static _Thread_local unsigned my_fpmode;

/* Claim part idx of whatever job the ticket holds now: the job's parts,
 * or 0 when the part was taken already (or the job has fewer parts). */
static unsigned claim(unsigned idx) {
  unsigned long long bit = 1ull << idx;
  unsigned long long old = atomic_fetch_or_explicit(&pool.ticket, bit, memory_order_acq_rel);
  unsigned parts = (unsigned)(old >> 32);
  return !(old & bit) && idx < parts ? parts : 0;
}

/* Take and run parts of the posted job until none is left: first the
 * thread's own (part i belongs to thread i * threads / parts: a run of
 * neighbouring parts, the same ones at every job of the same size), then
 * any left, from the last. */
static void take_parts(void) {
  for (;;) {
    unsigned long long t = atomic_load_explicit(&pool.ticket, memory_order_acquire);
    unsigned parts = (unsigned)(t >> 32);
    unsigned threads = atomic_load_explicit(&pool.threads, memory_order_relaxed);
    if (!threads) /* not set yet: no part is anyone's own */
      threads = 1;
    unsigned long long full = parts >= 32 ? 0xffffffffull : (1ull << parts) - 1;
    unsigned long long free = ~t & full;
    if (!free)
      return;
    unsigned lo = (my_id * parts + threads - 1) / threads;
    unsigned hi = ((my_id + 1) * parts + threads - 1) / threads;
    unsigned long long own = free & (hi >= 32 ? full : (1ull << hi) - 1) & ~((1ull << lo) - 1);
    unsigned idx = own ? (unsigned)__builtin_ctzll(own) : 63u - (unsigned)__builtin_clzll(free);
    unsigned got = claim(idx);
    if (!got)
      continue;
    size_t b, e;
    part(pool.n, pool.align, got, idx, &b, &e);
    if (my_id && my_fpmode != pool.fpmode)
      nnt_fp_mode_set(my_fpmode = pool.fpmode);
    if (b < e)
      pool.fn(pool.arg, b, e);
    atomic_fetch_add_explicit(&pool.done, 1, memory_order_release);
  }
}

static void *worker(void *p) {
  my_id = (unsigned)(uintptr_t)p;
  my_fpmode = nnt_fp_mode_get();
  /* the job number when it was made (a thread may first run after the
   * next job is posted) */
  unsigned seen = pool.gen0;
  for (;;) {
    unsigned g;
    int spins = 0;
    while ((g = atomic_load_explicit(&pool.gen, memory_order_acquire)) == seen &&
           spins++ < SPIN_JOB)
      cpu_relax();
    if (g == seen) {
      pthread_mutex_lock(&pool.mu);
      pool.sleeping++;
      while ((g = atomic_load(&pool.gen)) == seen)
        pthread_cond_wait(&pool.wake, &pool.mu);
      pool.sleeping--;
      pthread_mutex_unlock(&pool.mu);
    }
    seen = g;
    if (atomic_load(&pool.quit))
      return NULL;
    take_parts();
  }
}

/* Post the job in pool.fn..parts (busy is held; the last job's parts are
 * all taken and done). */
static void post(void) {
  atomic_store_explicit(&pool.done, 0, memory_order_relaxed);
  atomic_store_explicit(&pool.ticket, (unsigned long long)pool.parts << 32,
                        memory_order_release);
  atomic_fetch_add_explicit(&pool.gen, 1, memory_order_release);
  pthread_mutex_lock(&pool.mu);
  if (pool.sleeping)
    pthread_cond_broadcast(&pool.wake);
  pthread_mutex_unlock(&pool.mu);
}

static void wait_done(void) {
  int spins = 0;
  while (atomic_load_explicit(&pool.done, memory_order_acquire) < pool.parts)
    if (spins++ < SPIN_DONE)
      cpu_relax();
    else
      sched_yield();
}

static void take_busy(void) {
  while (atomic_flag_test_and_set_explicit(&pool.busy, memory_order_acquire))
    sched_yield();
}

/* Stop and join the workers (mu is held, busy is held). */
static void join_workers(void) {
  if (!pool.nw)
    return;
  atomic_store(&pool.quit, 1);
  atomic_fetch_add(&pool.gen, 1);
  pthread_cond_broadcast(&pool.wake);
  pthread_mutex_unlock(&pool.mu);
  for (unsigned i = 0; i < pool.nw; i++)
    pthread_join(pool.tid[i], NULL);
  pthread_mutex_lock(&pool.mu);
  nnt_free(pool.tid);
  pool.tid = NULL;
  pool.nw = 0;
  atomic_store(&pool.quit, 0);
  if (pool.blas_one && pool.blas_n > 1)
    openblas_set_num_threads((int)pool.blas_n);
}

unsigned nnt_cpu_pool_threads(void) {
  pthread_mutex_lock(&pool.mu);
  unsigned n = pool.nw + 1;
  pthread_mutex_unlock(&pool.mu);
  return n;
}

int nnt_cpu_pool_products(void) {
  pthread_mutex_lock(&pool.mu);
  int r = pool.nw && !pool.limited;
  pthread_mutex_unlock(&pool.mu);
  return r;
}

unsigned long nnt_cpu_pool_jobs(void) { return atomic_load(&pool.jobs); }

void nnt_cpu_pool_hold(void) {
  pthread_mutex_lock(&pool.mu);
  pool.holds++;
  pthread_mutex_unlock(&pool.mu);
}

void nnt_cpu_pool_release(void) {
  take_busy();
  pthread_mutex_lock(&pool.mu);
  if (pool.holds && !--pool.holds)
    join_workers();
  pthread_mutex_unlock(&pool.mu);
  atomic_flag_clear_explicit(&pool.busy, memory_order_release);
}

void nnt_cpu_pool_stop(void) {
  take_busy();
  pthread_mutex_lock(&pool.mu);
  join_workers(); /* they start again at the next run */
  pthread_mutex_unlock(&pool.mu);
  atomic_flag_clear_explicit(&pool.busy, memory_order_release);
}

void nnt_cpu_pool_want(unsigned n) {
  pthread_mutex_lock(&pool.mu);
  pool.want = n;
  pthread_mutex_unlock(&pool.mu);
}

int nnt_cpu_pool_start(nnt_err *e) {
  take_busy();
  pthread_mutex_lock(&pool.mu);
  int rc = NNT_OK;
  unsigned want = pool.want ? pool.want : (unsigned)openblas_get_num_threads();
  if (!pool.holds || pool.nw || want <= 1)
    goto out;
  unsigned nw = want - 1;
  int limited = 0;
  if ((rc = nnt_cpu_room_for_workers(nw, &limited, e)))
    goto out;
  pool.tid = nnt_calloc(nw, sizeof *pool.tid);
  if (!pool.tid) {
    rc = nnt_err_set(e, NNT_ERR_NOMEM, "cpu: out of memory for %u compute thread%s", nw,
                     nw > 1 ? "s" : "");
    goto out;
  }
  pool.limited = limited;
  pool.blas_one = !limited;
  pool.gen0 = atomic_load(&pool.gen);
  for (unsigned i = 0; i < nw; i++) {
    int err = pthread_create(&pool.tid[i], NULL, worker, (void *)(uintptr_t)(i + 1));
    if (err) {
      rc = nnt_err_set(e, NNT_ERR_NOMEM, "cpu: cannot start compute thread %u of %u: %s", i + 1,
                       nw, strerror(err));
      pool.blas_n = 0; /* OpenBLAS's count is not changed yet */
      join_workers();  /* those made so far */
      if (pool.tid) {
        nnt_free(pool.tid);
        pool.tid = NULL;
      }
      goto out;
    }
    pool.nw = i + 1;
  }
  if (pool.blas_one) {
    pool.blas_n = (unsigned)openblas_get_num_threads();
    openblas_set_num_threads(1);
  }
out:
  pthread_mutex_unlock(&pool.mu);
  atomic_flag_clear_explicit(&pool.busy, memory_order_release);
  return rc;
}

/* How many parts pool_run cuts [0, n) into with nw workers: up to
 * per_thread a thread, none empty, none below min_part (the last part,
 * cut short by n, included). */
static unsigned plan_parts(size_t n, size_t align, size_t min_part, unsigned nw,
                           unsigned per_thread) {
  size_t units = (n + align - 1) / align;
  unsigned parts = (nw + 1) * per_thread;
  if (parts > 32) /* the ticket's bits */
    parts = 32;
  if (min_part && n / min_part < parts)
    parts = (unsigned)(n / min_part);
  if (units < parts)
    parts = (unsigned)units;
  for (; parts > 1; parts--) {
    /* the shortest: one of units / parts units, or the last (cut by n) */
    size_t least = units / parts * align, last = n - units * (parts - 1) / parts * align;
    if ((last < least ? last : least) >= (min_part ? min_part : 1))
      break;
  }
  return parts ? parts : 1;
}

size_t nnt_cpu_pool_largest_part(size_t n, size_t align, size_t min_part) {
  if (!align)
    align = 1;
  pthread_mutex_lock(&pool.mu);
  unsigned nw = pool.limited ? 0 : pool.nw;
  pthread_mutex_unlock(&pool.mu);
  if (!nw || n < 2 * (min_part ? min_part : 1))
    return n;
  unsigned parts = plan_parts(n, align, min_part, nw, 1);
  size_t most = 0, b, e;
  for (unsigned t = 0; t < parts; t++) {
    part(n, align, parts, t, &b, &e);
    if (e - b > most)
      most = e - b;
  }
  return most;
}

/* products: the parts call OpenBLAS (not on the workers under a memory
 * limit). */
static void pool_run(size_t n, size_t align, size_t min_part, nnt_pool_fn fn, void *arg,
                     int products) {
  if (!align)
    align = 1;
  if (!n)
    return;
  /* too little to split, or the workers are taken (another model's op, a
   * start or a join, or this is a worker's part): on this thread; nw
   * changes only while busy is held */
  if (n < 2 * (min_part ? min_part : 1) ||
      atomic_flag_test_and_set_explicit(&pool.busy, memory_order_acquire)) {
    fn(arg, 0, n);
    return;
  }
  if (!pool.nw || (products && pool.limited)) {
    atomic_flag_clear_explicit(&pool.busy, memory_order_release);
    fn(arg, 0, n);
    return;
  }
  /* a product's parts each pack the whole of its other operand again:
   * one per thread */
  unsigned parts = plan_parts(n, align, min_part, pool.nw, products ? 1 : PARTS_PER_THREAD);
  if (parts < 2) {
    atomic_flag_clear_explicit(&pool.busy, memory_order_release);
    fn(arg, 0, n);
    return;
  }
  pool.fn = fn;
  pool.arg = arg;
  pool.n = n;
  pool.align = align;
  pool.parts = parts;
  pool.fpmode = nnt_fp_mode_get();
  atomic_store_explicit(&pool.threads, pool.nw + 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&pool.jobs, 1, memory_order_relaxed);
  post();
  take_parts();
  wait_done();
  atomic_flag_clear_explicit(&pool.busy, memory_order_release);
}

void nnt_cpu_pool_for(size_t n, size_t align, size_t min_part, nnt_pool_fn fn, void *arg) {
  pool_run(n, align, min_part, fn, arg, 0);
}

void nnt_cpu_pool_for_products(size_t n, size_t align, size_t min_part, nnt_pool_fn fn,
                               void *arg) {
  pool_run(n, align, min_part, fn, arg, 1);
}

/* The kernel table's parallel: one part per thread (each range a run of
 * neighbouring units, as a product's parts), its ops inline (the workers
 * are busy with this job); under a memory limit all on the calling
 * thread, whose products then take OpenBLAS's threads. */
void nnt_cpu_parallel(const struct nnt_kernels *self, size_t n, nnt_pool_fn fn, void *arg) {
  (void)self;
  pool_run(n, 1, 1, fn, arg, 1);
}
