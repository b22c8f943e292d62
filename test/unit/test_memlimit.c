/* Training under a process memory limit and with threads that cannot be
 * made (issue 10): an error with a message and an exit, never a hang.
 *
 * OpenBLAS maps a 128 MiB work buffer per computing thread and, when the
 * mapping fails, tries again forever (nntrainer/compute/cpu_blas.c). Each
 * case runs in a child process under setrlimit(RLIMIT_AS) set a little or
 * well above what the child already maps (so it works in the sanitizer
 * build too, whose shadow memory is most of that), with an alarm that
 * kills a child that hangs. The command-line tool is run under `ulimit -v`
 * too, except in the sanitizer build, which cannot start under a limit of
 * that size (it maps terabytes of shadow memory first). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <cblas.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nntrainer/compute/kernels.h"
#include "nntrainer/ini.h"
#include "test_util.h"

static const char *const tiny_ini =
    "[Model]\n"
    "type = NeuralNetwork\n"
    "epochs = 1\n"
    "batch_size = 4\n"
    "loss = cross\n"
    "[Optimizer]\n"
    "type = sgd\n"
    "learning_rate = 0.1\n"
    "[train_set]\n"
    "type = synthetic\n"
    "samples = 16\n"
    "[in]\n"
    "type = input\n"
    "input_shape = 1:1:32\n"
    "[fc]\n"
    "type = fully_connected\n"
    "unit = 16\n"
    "activation = relu\n"
    "[out]\n"
    "type = fully_connected\n"
    "unit = 4\n"
    "activation = softmax\n";

static char ini[1024];

static int setup(void **state) {
  tu_dir_setup(state);
  snprintf(ini, sizeof ini, "%s", tu_write_text("tiny.ini", tiny_ini));
  return 0;
}

/* The address space this process maps now, in bytes. */
static size_t vm_now(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  size_t kb = 0;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "VmSize:", 7))
      kb = strtoul(line + 7, NULL, 10);
  if (f)
    fclose(f);
  assert_true(kb > 0);
  return kb << 10;
}

/* Load and train the tiny model: its code; e gets the message. */
static int train_tiny(nnt_err *e) {
  nnt_model *m;
  int rc = nnt_model_create(&m, e);
  if (rc)
    return rc;
  if (!(rc = nnt_model_set_base_dir(m, tu_dir, e)) && !(rc = nnt_ini_load(m, ini, NULL, 0, e)) &&
      !(rc = nnt_model_compile(m, e)) && !(rc = nnt_model_initialize(m, e)))
    rc = nnt_model_train(m, NULL, NULL, e);
  nnt_model_destroy(m);
  return rc;
}

/* The child: its checks fail with exit codes naming them. */
#define CHILD_CHECK(cond, code)                                                           \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      fprintf(stderr, "child check %d failed: %s (%s)\n", code, #cond, e.msg);           \
      _exit(code);                                                                        \
    }                                                                                     \
  } while (0)

/* Run fn in a child under RLIMIT_AS = what it maps + headroom; it must
 * exit 0 within 60 s. */
static void in_child(void (*fn)(void), size_t headroom) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (!pid) {
    alarm(60); /* a hang ends as SIGALRM */
    struct rlimit r = {vm_now() + headroom, RLIM_INFINITY};
    if (setrlimit(RLIMIT_AS, &r))
      _exit(90);
    fn();
    _exit(0);
  }
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  if (WIFSIGNALED(st))
    fail_msg("the child was killed by signal %d%s", WTERMSIG(st),
             WTERMSIG(st) == SIGALRM ? " (it hung)" : "");
  if (WEXITSTATUS(st))
    fail_msg("the child failed its check %d (stderr above)", WEXITSTATUS(st));
}

/* 48 MiB of room: not enough for OpenBLAS's 128 MiB buffer. */
static void child_no_room(void) {
  nnt_err e = {0};
  int rc = nnt_cpu_prepare(&e);
  CHILD_CHECK(rc == NNT_ERR_NOMEM && e.code == rc, 1);
  CHILD_CHECK(strstr(e.msg, "ulimit -v") && strstr(e.msg, "OpenBLAS's work buffer"), 2);
  nnt_err_clear(&e);
  /* more threads do not fit either; OpenBLAS keeps the one it has */
  rc = nnt_cpu_set_threads(2, &e);
  CHILD_CHECK(rc == NNT_ERR_NOMEM && strstr(e.msg, "1 more BLAS thread"), 3);
  CHILD_CHECK(openblas_get_num_threads() == 1, 4);
  /* the default under a limit is one thread, with a notice */
  nnt_err_clear(&e);
  tu_log_start();
  CHILD_CHECK(nnt_cpu_set_threads(0, &e) == NNT_OK, 5);
  tu_log_expect(NNT_LOG_NOTICE, "one BLAS thread", "ulimit -v", NULL);
  tu_log_stop();
  /* training stops before its first step, with the same error */
  nnt_err_clear(&e);
  rc = train_tiny(&e);
  CHILD_CHECK(rc == NNT_ERR_NOMEM && strstr(e.msg, "OpenBLAS's work buffer"), 6);
}

static void test_no_room_for_blas_buffer(void **state) {
  (void)state;
  in_child(child_no_room, (size_t)48 << 20);
}

/* 512 MiB of room: two threads (136 MiB each) and the model fit. */
static void child_room(void) {
  nnt_err e = {0};
  CHILD_CHECK(nnt_cpu_set_threads(2, &e) == NNT_OK, 1);
  CHILD_CHECK(openblas_get_num_threads() == 2, 2);
  /* both buffers are mapped already: a run maps no more of them */
  size_t before = vm_now();
  CHILD_CHECK(nnt_cpu_prepare(&e) == NNT_OK, 3);
  CHILD_CHECK(train_tiny(&e) == NNT_OK, 4);
  CHILD_CHECK(vm_now() < before + ((size_t)64 << 20), 5);
  /* 8 threads would need 6 more buffers: refused, 2 stay */
  int rc = nnt_cpu_set_threads(8, &e);
  CHILD_CHECK(rc == NNT_ERR_NOMEM && strstr(e.msg, "6 more BLAS threads"), 6);
  CHILD_CHECK(openblas_get_num_threads() == 2, 7);
}

static void test_room_for_two_threads(void **state) {
  (void)state;
  in_child(child_room, (size_t)512 << 20);
}

/* The data producer's thread cannot be made (here: a default stack size
 * no mapping can hold): the run stops with NNT_ERR_NOMEM naming it, and
 * runs again once threads can be made. 2^48 bytes is more than a user
 * address space of 47 or 48 bits, so no mapping is made anywhere; 2^46
 * fits one, and qemu-user (the arm64 cross build's tests) maps it, its
 * bookkeeping of that mapping growing past 20 GB until the OOM killer
 * ends it. */
static void test_producer_thread_cannot_start(void **state) {
  (void)state;
  pthread_attr_t def, huge;
  assert_int_equal(pthread_getattr_default_np(&def), 0);
  assert_int_equal(pthread_attr_init(&huge), 0);
  assert_int_equal(pthread_attr_setstacksize(&huge, (size_t)1 << 48), 0);
  assert_int_equal(pthread_setattr_default_np(&huge), 0);
  nnt_err e = {0};
  int rc = train_tiny(&e);
  assert_int_equal(pthread_setattr_default_np(&def), 0);
  pthread_attr_destroy(&huge);
  pthread_attr_destroy(&def);
  assert_int_equal(rc, NNT_ERR_NOMEM);
  tu_assert_contains(e.msg, "cannot start the producer thread");
  nnt_err_clear(&e);
  if (train_tiny(&e))
    fail_msg("%s", e.msg);
}

#ifndef __SANITIZE_ADDRESS__
/* The tool under `ulimit -v KIB` with env (and neither thread variable
 * of the caller's: the test's own defaults); stdout and stderr in out. */
static int run_cli(unsigned long kib, const char *env, char *out, size_t n) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "ulimit -v %lu; env -u OPENBLAS_NUM_THREADS -u NNTRAINER_THREADS %s "
           "timeout -k 5 60 %s train %s 2>&1",
           kib, env, NNT_CLI_PATH, ini);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t got = fread(out, 1, n - 1, p);
  out[got] = '\0';
  int st = pclose(p);
  assert_true(WIFEXITED(st));
  return WEXITSTATUS(st);
}
#endif

/* The tool, with OpenBLAS's threads left to their default (all cores): it
 * starts again with one thread, so OpenBLAS makes no thread before main
 * (one that could not map its buffer would spin forever), and says what
 * does not fit. */
static void test_cli_under_limit(void **state) {
  (void)state;
#ifdef __SANITIZE_ADDRESS__
  print_message("the sanitizer build cannot start the tool under ulimit -v: not run here\n");
#else
  char out[16384];
  /* the libraries load, OpenBLAS's buffer does not fit */
  assert_int_equal(run_cli(110000, "", out, sizeof out), 1);
  tu_assert_contains(out, "nntrainer: error: cpu: the process's address-space limit");
  tu_assert_contains(out, "OpenBLAS's work buffer");
  /* it fits, with one thread by default */
  if (run_cli(1000000, "", out, sizeof out))
    fail_msg("%s", out);
  tu_assert_contains(out, "one BLAS thread");
  /* eight threads asked for do not fit */
  assert_int_equal(run_cli(1000000, "NNTRAINER_THREADS=8", out, sizeof out), 1);
  tu_assert_contains(out, "7 more BLAS threads");
  /* asked for in OpenBLAS's own variable, the same */
  assert_int_equal(run_cli(1000000, "OPENBLAS_NUM_THREADS=8", out, sizeof out), 1);
  tu_assert_contains(out, "7 more BLAS threads");
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_no_room_for_blas_buffer, setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_room_for_two_threads, setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_producer_thread_cannot_start, setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_cli_under_limit, setup, tu_dir_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
