/* nntrainer's main(): the tool itself is nnt_cli_main (nntrainer_cli.c),
 * which tests run in-process. What is here happens before it, for OpenBLAS
 * under a process memory limit.
 *
 * OpenBLAS starts its threads when it is loaded, before main(), and each
 * maps a 128 MiB work buffer at once; under an address-space or data limit
 * (ulimit -v, ulimit -d) without room for them a thread waits for its
 * buffer forever, and a thread it cannot create it reports by raising
 * SIGINT (nntrainer/compute/cpu_blas.c). So under such a limit the tool
 * runs itself again with OPENBLAS_NUM_THREADS=1, which OpenBLAS reads when
 * it loads; main() then restores the variable as the user gave it, and
 * nnt_cli_main starts the threads asked for through nnt_cpu_set_threads,
 * which checks that they fit. The user's value travels in
 * NNTRAINER_CLI_BLAS_THREADS, a variable of this file alone. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tools/cli.h"

#define CARRY "NNTRAINER_CLI_BLAS_THREADS"

/* SIGINT raised while the libraries were loaded: OpenBLAS could not create
 * its threads (a Ctrl-C that early means the same: start again). */
static volatile sig_atomic_t load_sigint;

static void on_load_sigint(int sig) {
  (void)sig;
  load_sigint = 1;
}

/* Runs before any library's constructor (the executable's .preinit_array),
 * so before OpenBLAS's. */
static void catch_load_sigint(int argc, char **argv, char **envp) {
  (void)argc, (void)argv, (void)envp;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_load_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
}
__attribute__((section(".preinit_array"), used)) static void (*const preinit)(int, char **,
                                                                              char **) =
    catch_load_sigint;

static int memory_limited(void) {
  struct rlimit r;
  return (!getrlimit(RLIMIT_AS, &r) && r.rlim_cur != RLIM_INFINITY) ||
         (!getrlimit(RLIMIT_DATA, &r) && r.rlim_cur != RLIM_INFINITY);
}

int main(int argc, char **argv) {
  signal(SIGINT, SIG_DFL);
  const char *carried = getenv(CARRY);
  if (carried) { /* the second start: the user's OPENBLAS_NUM_THREADS back */
    if (carried[0])
      setenv("OPENBLAS_NUM_THREADS", carried + 1, 1);
    else
      unsetenv("OPENBLAS_NUM_THREADS");
    unsetenv(CARRY);
  } else {
    const char *t = getenv("OPENBLAS_NUM_THREADS");
    int one = t && !strcmp(t, "1");
    if (load_sigint || (memory_limited() && !one)) {
      /* "=VALUE" when it was set, "" when not */
      char *keep = malloc(t ? strlen(t) + 2 : 1);
      if (keep) {
        sprintf(keep, "%s%s", t ? "=" : "", t ? t : "");
        if (!setenv(CARRY, keep, 1) && !setenv("OPENBLAS_NUM_THREADS", "1", 1))
          execv("/proc/self/exe", argv);
        /* not started again: go on with OpenBLAS's threads as they are */
        unsetenv(CARRY);
        if (keep[0])
          setenv("OPENBLAS_NUM_THREADS", keep + 1, 1);
        else
          unsetenv("OPENBLAS_NUM_THREADS");
        free(keep);
      }
      if (load_sigint) {
        fprintf(stderr, "nntrainer: error: OpenBLAS could not start its threads (a process "
                        "memory limit too small?) and nntrainer cannot start again with one: "
                        "%s; set OPENBLAS_NUM_THREADS=1\n",
                strerror(errno));
        _exit(1); /* exit() would wait for the threads OpenBLAS did not make */
      }
    }
  }
  return nnt_cli_main(argc, argv);
}
