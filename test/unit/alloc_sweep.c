/* Allocation-failure sweeps over whole jobs (alloc_sweep.h). */
#include "alloc_sweep.h"

#include <stdarg.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "nntrainer/common.h"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#define SW_LSAN 1
#else
#define SW_LSAN 0
#endif

void sw_put(sw_out *o, const char *name, const void *data, size_t len) {
  if (o->n == SW_MAX_OUT)
    fail_msg("sweep: more than %d outputs", SW_MAX_OUT);
  int i = o->n++;
  snprintf(o->name[i], sizeof o->name[i], "%s", name);
  o->data[i] = malloc(len ? len : 1);
  if (len)
    memcpy(o->data[i], data, len);
  o->len[i] = len;
}

int sw_put_file(sw_out *o, const char *name, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return 0;
  size_t cap = 4096, n = 0;
  unsigned char *b = malloc(cap);
  for (size_t r; (r = fread(b + n, 1, cap - n, f)) > 0;) {
    n += r;
    if (n == cap)
      b = realloc(b, cap *= 2);
  }
  fclose(f);
  sw_put(o, name, b, n);
  free(b);
  return 1;
}

void sw_out_free(sw_out *o) {
  for (int i = 0; i < o->n; i++)
    free(o->data[i]);
  o->n = 0;
}

char *sw_mkdtemp(void) {
  struct stat st;
  int shm = !stat("/dev/shm", &st) && S_ISDIR(st.st_mode) && !access("/dev/shm", W_OK);
  char tmpl[64];
  snprintf(tmpl, sizeof tmpl, "%s/nnt-sweep-XXXXXX", shm ? "/dev/shm" : "/tmp");
  char *d = mkdtemp(tmpl);
  if (!d)
    fail_msg("mkdtemp failed");
  return strdup(d);
}

void sw_write_raw(const char *path, unsigned n, unsigned seed) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  nnt_rng r;
  nnt_rng_seed(&r, seed);
  for (unsigned s = 0; s < n; s++) {
    float x[16 + 3] = {0};
    for (int i = 0; i < 16; i++)
      x[i] = 2 * nnt_rng_uniform(&r) - 1;
    x[16 + s % 3] = 1;
    assert_int_equal(fwrite(x, sizeof x, 1, f), 1);
  }
  fclose(f);
}

static int threads_now(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  int n = -1;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "Threads:", 8))
      n = atoi(line + 8);
  if (f)
    fclose(f);
  return n;
}

/* The thread count back at base: a joined thread may be counted for a
 * moment after pthread_join returns, so wait up to a second. */
static int threads_back_to(int base) {
  for (int i = 0; i < 100; i++) {
    if (threads_now() <= base)
      return 1;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return 0;
}

static int same(const sw_out *a, int i, const sw_out *b, int j) {
  return a->len[i] == b->len[j] && !memcmp(a->data[i], b->data[j], a->len[i]);
}

static int find(const sw_out *o, const char *name) {
  for (int i = 0; i < o->n; i++)
    if (!strcmp(o->name[i], name))
      return i;
  return -1;
}

static int code_allowed(const sw_config *c, int rc) {
  for (const int *p = c->codes; *p; p++)
    if (*p == rc)
      return 1;
  return 0;
}

static void set_hook(const sw_config *c, long n) {
  if (c->once)
    nnt_alloc_fail_once(n);
  else
    nnt_alloc_fail_after(n);
}

/* One run with allocation n failing; fails the test on a violation. */
static int trial(const sw_config *c, const sw_out *ref, long n, int base, sw_stats *st) {
  sw_out out = {0};
  char msg[SW_MSG_MAX] = "";
  set_hook(c, n);
  int rc = c->job(c->ctx, &out, msg);
  long injected = nnt_alloc_failures();
  nnt_alloc_fail_after(-1);
  const char *mode = c->once ? "once" : "from then on";
  if (getenv("NNT_SWEEP_VERBOSE"))
    print_message("%s N=%ld (%s): %d %s\n", c->name, n, mode, rc, msg);
  if (!threads_back_to(base))
    fail_msg("%s: allocation %ld failing (%s): %d threads left, %d before (rc %d: %s)",
             c->name, n, mode, threads_now(), base, rc, msg);
  if (rc) {
    if (!injected)
      fail_msg("%s: failed without an injected failure (N = %ld): %d: %s", c->name, n, rc,
               msg);
    if (!code_allowed(c, rc))
      fail_msg("%s: allocation %ld failing (%s): code %d (%s) is not an allowed one: %s",
               c->name, n, mode, rc, nnt_strerror(rc), msg);
    if (!msg[0])
      fail_msg("%s: allocation %ld failing (%s): code %d without a message", c->name, n,
               mode, rc);
    if (rc == NNT_ERR_NOMEM && !strstr(msg, "memory") && !strstr(msg, "allocate"))
      fail_msg("%s: allocation %ld failing (%s): the message does not say memory ran out: "
               "%s", c->name, n, mode, msg);
    /* every output present is one a reference run wrote */
    for (int i = 0; i < out.n; i++) {
      int j = find(ref, out.name[i]), ok = j >= 0 && same(&out, i, ref, j);
      for (int k = 0; !ok && c->partial && k < c->partial->n; k++)
        ok = !strcmp(c->partial->name[k], out.name[i]) && same(&out, i, c->partial, k);
      if (!ok)
        fail_msg("%s: allocation %ld failing (%s) left '%s' (%zu bytes) that no reference "
                 "run wrote (rc %d: %s)",
                 c->name, n, mode, out.name[i], out.len[i], rc, msg);
    }
    st->failed++;
  } else {
    if (injected && st->absorbed < 8)
      st->absorbed_at[st->absorbed] = n;
    if (injected)
      st->absorbed++;
    if (out.n != ref->n)
      fail_msg("%s: allocation %ld failing (%s): success with %d outputs, the reference "
               "has %d",
               c->name, n, mode, out.n, ref->n);
    for (int i = 0; i < out.n; i++)
      if (strcmp(out.name[i], ref->name[i]) || !same(&out, i, ref, i))
        fail_msg("%s: allocation %ld failing (%s): success, but '%s' differs from the "
                 "reference run's",
                 c->name, n, mode, out.name[i]);
  }
  sw_out_free(&out);
  if (injected)
    st->trials++;
  return injected != 0;
}

/* In the sanitizer build: leaks of the runs since allocation `from`
 * failed (a check costs far more than a run of a small job, so one is made
 * every SW_LEAK_EVERY runs and at the end; the report names the leaked
 * blocks' allocation stacks, NNT_SWEEP_ONLY the one run). */
#define SW_LEAK_EVERY 16
static void check_leaks(const sw_config *c, long from, long to) {
#if SW_LSAN
  if (__lsan_do_recoverable_leak_check())
    fail_msg("%s: leaks (above) in a run with allocation %ld to %ld failing (%s)", c->name,
             from, to, c->once ? "once" : "from then on");
#else
  (void)c, (void)from, (void)to;
#endif
}

static void sweep(const sw_config *c, const sw_out *ref, int base, sw_stats *st) {
  long limit = c->max_trials > 0 ? c->max_trials : 100000;
  const char *only = getenv("NNT_SWEEP_ONLY"); /* debugging: one N, e.g. under gdb */
  if (only && *only) {
    trial(c, ref, atol(only), base, st);
    check_leaks(c, atol(only), atol(only));
    return;
  }
  for (long n = 0;; n++) {
    if (n == limit)
      fail_msg("%s: still failing after %ld allocations", c->name, limit);
    int reached = trial(c, ref, n, base, st);
    if (!reached || n % SW_LEAK_EVERY == SW_LEAK_EVERY - 1)
      check_leaks(c, n - n % SW_LEAK_EVERY, n);
    if (!reached)
      return; /* ran to the end without reaching allocation n */
  }
}

sw_stats sw_run(const sw_config *c, sw_out *ref_out) {
  sw_stats st = {0};
  sw_out ref = {0};
  char msg[SW_MSG_MAX] = "";
  nnt_alloc_fail_after(-1);
  int rc = c->job(c->ctx, &ref, msg);
  if (rc)
    fail_msg("%s: the reference run failed: %d: %s", c->name, rc, msg);
  /* a second run gives the same results: the job is deterministic */
  sw_out again = {0};
  if ((rc = c->job(c->ctx, &again, msg)))
    fail_msg("%s: the second reference run failed: %d: %s", c->name, rc, msg);
  for (int i = 0; i < ref.n; i++)
    if (i >= again.n || !same(&ref, i, &again, i))
      fail_msg("%s: two runs without failures differ in '%s'", c->name, ref.name[i]);
  sw_out_free(&again);
  int base = threads_now();
  sweep(c, &ref, base, &st);
  print_message("%s (%s): %ld failure points, %ld failed with an allowed code, %ld "
                "succeeded with the reference's results\n",
                c->name, c->once ? "one allocation fails" : "every allocation from N on fails",
                st.trials, st.failed, st.absorbed);
  for (long i = 0; st.absorbed <= 8 && i < st.absorbed; i++)
    print_message("  %s: success with allocation %ld failing\n", c->name, st.absorbed_at[i]);
  if (ref_out)
    *ref_out = ref;
  else
    sw_out_free(&ref);
  return st;
}
