/* OpenBLAS's threads and work buffers under a process memory limit.
 *
 * OpenBLAS (0.3.21, as Debian 12 ships it; observed, and read in its
 * driver/others/memory.c and blas_server.c) gives every thread that
 * computes a work buffer of 128 MiB (BUFFER_SIZE on x86-64), mapped once
 * and kept: the calling thread's at its first matrix product, each of its
 * own threads' as soon as the thread starts (when the library is loaded,
 * or in openblas_set_num_threads). When the buffer cannot be mapped it
 * tries again forever: under an address-space limit (ulimit -v,
 * RLIMIT_AS) or a data limit (ulimit -d, RLIMIT_DATA) that leaves no room
 * for it the process spins and never ends, and at exit waits forever for
 * a thread that spins. A thread it cannot create at load it reports by
 * raising SIGINT; one it cannot create later it ignores.
 *
 * So, when such a limit is set, the buffers are made here, where a failure
 * can be an error: room is checked by mapping as much (and unmapping it)
 * right before OpenBLAS maps it, and a first product makes OpenBLAS map it
 * at once. Without a limit nothing is checked and nothing changes.
 *
 * The state below is process-wide because what it describes is: OpenBLAS's
 * threads and buffers belong to the process. */
#include "nntrainer/compute/kernels.h"
#include "nntrainer/compute/cpu_impl.h"

#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

/* OpenBLAS's BUFFER_SIZE (32 << 22) and the page it adds. */
#define BLAS_BUFFER_BYTES (((size_t)128 << 20) + 4096)

static pthread_mutex_t blas_mu = PTHREAD_MUTEX_INITIALIZER;
static int blas_main_ready; /* the calling thread's buffer exists (under a limit) */
static unsigned blas_made;  /* threads OpenBLAS has made, itself included; 0: not known */

/* The tighter of RLIMIT_AS and RLIMIT_DATA when either is set: its name
 * in *which and its value in bytes. @return 0 when there is none. */
static int memory_limit(const char **which, size_t *bytes) {
  struct rlimit as, data;
  int has_as = !getrlimit(RLIMIT_AS, &as) && as.rlim_cur != RLIM_INFINITY;
  int has_data = !getrlimit(RLIMIT_DATA, &data) && data.rlim_cur != RLIM_INFINITY;
  if (!has_as && !has_data)
    return 0;
  if (has_as && (!has_data || as.rlim_cur <= data.rlim_cur)) {
    *which = "address-space limit (ulimit -v)";
    *bytes = (size_t)as.rlim_cur;
  } else {
    *which = "data limit (ulimit -d)";
    *bytes = (size_t)data.rlim_cur;
  }
  return 1;
}

/* Whether bytes more of private, writable memory can be mapped now (as
 * OpenBLAS maps its buffers; nothing is touched, so nothing is used). */
static int room_for(size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED)
    return 0;
  munmap(p, bytes);
  return 1;
}

/* What one more OpenBLAS thread maps: its buffer and its stack. */
static size_t thread_bytes(void) {
  size_t stack = (size_t)8 << 20;
  pthread_attr_t a;
  if (!pthread_getattr_default_np(&a)) {
    size_t s;
    if (!pthread_attr_getstacksize(&a, &s))
      stack = s;
    pthread_attr_destroy(&a);
  }
  return BLAS_BUFFER_BYTES + stack;
}

/* A product (m x k, given transposed) by (k x n): with m * n over 1200
 * and A transposed it takes none of OpenBLAS's small-matrix or direct
 * paths, so it uses the work buffers. 64 x 64 x 64 is at OpenBLAS's
 * threshold for splitting (4 x 65536) and stays on the calling thread;
 * 128 rows per thread by 128 x 128 is split over every thread (checked by
 * the address space the process maps, 1 to 8 threads). */
static int product(size_t m, size_t k, size_t n, nnt_err *e) {
  float *a = nnt_calloc(m * k + k * n + m * n, sizeof(float));
  if (!a)
    return nnt_err_set(e, NNT_ERR_NOMEM, "cpu: out of memory for a first product");
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a, (int)m,
              a + m * k, (int)n, 0.0f, a + m * k + k * n, (int)n);
  nnt_free(a);
  return NNT_OK;
}

static int no_room(const char *which, size_t limit, size_t need, const char *what, nnt_err *e) {
  return nnt_err_set(e, NNT_ERR_NOMEM,
                     "cpu: the process's %s of %zu KiB leaves no room for %s (%zu KiB of address "
                     "space, which OpenBLAS maps once and would otherwise wait for forever); "
                     "raise the limit or use fewer BLAS threads (NNTRAINER_THREADS, "
                     "OPENBLAS_NUM_THREADS)",
                     which, limit >> 10, what, need >> 10);
}

int nnt_cpu_prepare(nnt_err *e) {
  nnt_cpu_blas_choose_core();
  const char *which = NULL;
  size_t limit = 0;
  if (!memory_limit(&which, &limit))
    return NNT_OK;
  pthread_mutex_lock(&blas_mu);
  int rc = NNT_OK;
  if (!blas_main_ready) {
    /* a product on this thread alone: 64 x 64 by 64 x 64 is below
     * OpenBLAS's threshold for splitting, so no other thread is asked */
    if (!room_for(BLAS_BUFFER_BYTES))
      rc = no_room(which, limit, BLAS_BUFFER_BYTES, "OpenBLAS's work buffer", e);
    else if (!(rc = product(64, 64, 64, e)))
      blas_main_ready = 1;
  }
  pthread_mutex_unlock(&blas_mu);
  return rc;
}

int nnt_cpu_room_for_workers(unsigned nw, int *limited, nnt_err *e) {
  const char *which = NULL;
  size_t limit = 0;
  *limited = memory_limit(&which, &limit);
  if (!*limited)
    return NNT_OK;
  size_t stack = thread_bytes() - BLAS_BUFFER_BYTES, need = (size_t)nw * stack;
  if (room_for(need))
    return NNT_OK;
  char what[64];
  snprintf(what, sizeof what, "%u compute thread%s' stack%s", nw, nw > 1 ? "s" : "",
           nw > 1 ? "s" : "");
  return no_room(which, limit, need, what, e);
}

int nnt_cpu_set_threads(unsigned n, nnt_err *e) {
  nnt_cpu_blas_choose_core();
  const char *which = NULL;
  size_t limit = 0;
  int limited = memory_limit(&which, &limit);
  if (!n) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    n = c > 0 ? (unsigned)c : 1;
    if (limited && n > 1) {
      nnt_log(NNT_LOG_NOTICE,
              "cpu: one BLAS thread, not %u: under the process's %s each thread maps %zu "
              "MiB (set NNTRAINER_THREADS for more)",
              n, which, thread_bytes() >> 20);
      n = 1;
    }
  }
  nnt_cpu_pool_stop(); /* OpenBLAS's own count back while it changes */
  pthread_mutex_lock(&blas_mu);
  int rc = NNT_OK;
  if (!blas_made)
    blas_made = (unsigned)openblas_get_num_threads(); /* those it made when loaded */
  unsigned now = blas_made;
  if (!limited || n <= now) {
    openblas_set_num_threads((int)n);
    if (n > blas_made)
      blas_made = n;
  } else {
    /* the new threads' buffers and stacks, and the calling thread's */
    size_t need = (size_t)(n - now) * thread_bytes() + (blas_main_ready ? 0 : BLAS_BUFFER_BYTES);
    if (!room_for(need)) {
      char what[96];
      snprintf(what, sizeof what, "%u more BLAS thread%s%s", n - now, n - now > 1 ? "s" : "",
               blas_main_ready ? "" : " and OpenBLAS's work buffer for the calling thread");
      rc = no_room(which, limit, need, what, e);
    } else {
      openblas_set_num_threads((int)n);
      blas_made = n;
      /* split over every thread: each has mapped its buffer when it ends */
      if (!(rc = product((size_t)128 * n, 128, 128, e)))
        blas_main_ready = 1;
    }
  }
  pthread_mutex_unlock(&blas_mu);
  if (!rc)
    nnt_cpu_pool_want(n);
  return rc;
}

void nnt_cpu_blas_describe(char *buf, size_t n) {
  if (!buf || !n)
    return;
  /* "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64": the
   * first two words */
  const char *first = nnt_cpu_blas_first_core();
  const char *cfg = openblas_get_config(), *core = openblas_get_corename();
  int len = 0;
  while (cfg && cfg[len] && cfg[len] != ' ')
    len++;
  if (cfg && cfg[len] == ' ') {
    len++;
    while (cfg[len] && cfg[len] != ' ')
      len++;
  }
  /* OpenBLAS runs on one thread while the compute threads exist */
  int threads = openblas_get_num_threads(), pool = (int)nnt_cpu_pool_threads();
  if (pool > threads)
    threads = pool;
  char why[96] = "";
  if (first)
    snprintf(why, sizeof why, " (for this CPU's features; OpenBLAS's own pick: %s)", first);
  snprintf(buf, n, "%.*s, %s kernels%s, %d thread%s", len, cfg ? cfg : "OpenBLAS",
           core ? core : "unknown", why, threads, threads == 1 ? "" : "s");
}
