/* Core-to-core round trip: two threads, pinned to the first two CPUs this
 * process may run on, hand one cache line back and forth; prints the
 * median round trip of 9 runs in nanoseconds as one JSON line. On a VM
 * the two-thread figures depend on it: vCPUs whose cores share a cache
 * answer in about 100 ns, vCPUs placed apart in 350 to 800 ns, and every
 * value one thread writes and the other reads pays that price
 * (docs/performance.md). benchmarks/run_benchmarks.py prints it with its
 * tables. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define TRIPS 100000
#define RUNS 9

static _Alignas(64) atomic_int flag;
static int cpus[2];

static void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void *answer(void *p) {
  (void)p;
  pin(cpus[1]);
  for (int i = 0; i < TRIPS; i++) {
    while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 1)
      ;
    atomic_store_explicit(&flag, 2 * i + 2, memory_order_release);
  }
  return NULL;
}

static double run_once(void) {
  atomic_store(&flag, 0);
  pthread_t t;
  if (pthread_create(&t, NULL, answer, NULL))
    return -1;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (int i = 0; i < TRIPS; i++) {
    atomic_store_explicit(&flag, 2 * i + 1, memory_order_release);
    while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 2)
      ;
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  pthread_join(t, NULL);
  return ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / TRIPS;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(void) {
  cpu_set_t s;
  if (sched_getaffinity(0, sizeof s, &s))
    return 1;
  int found = 0;
  for (int c = 0; c < CPU_SETSIZE && found < 2; c++)
    if (CPU_ISSET(c, &s))
      cpus[found++] = c;
  if (found < 2) {
    printf("{\"round_trip_ns\":null,\"cpus\":1}\n");
    return 0;
  }
  pin(cpus[0]);
  double t[RUNS];
  for (int r = 0; r < RUNS; r++)
    if ((t[r] = run_once()) < 0)
      return 1;
  qsort(t, RUNS, sizeof *t, cmp);
  printf("{\"round_trip_ns\":%.0f,\"cpus\":[%d,%d]}\n", t[RUNS / 2], cpus[0], cpus[1]);
  return 0;
}
