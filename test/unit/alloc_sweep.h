/* Allocation-failure sweeps: run a whole job once as a reference, then
 * again with the Nth allocation failing, for N = 0, 1, 2, ... until the job
 * succeeds without reaching an injected failure. Every failing run must
 * give an allowed error code with a message, leave no extra thread behind,
 * leak nothing (checked per run in the sanitizer build) and leave each
 * output file either absent or equal to a version the reference run wrote;
 * every run that succeeds must give results equal to the reference's, byte
 * for byte (a failure swallowed into a different model shows there). */
#ifndef NNT_ALLOC_SWEEP_H
#define NNT_ALLOC_SWEEP_H

#include <stddef.h>

#define SW_MAX_OUT 64
#define SW_MSG_MAX 2048

/* What a job produced: named byte strings (weights, a file's bytes, a
 * summary's text). */
typedef struct sw_out {
  int n;
  char name[SW_MAX_OUT][64];
  unsigned char *data[SW_MAX_OUT];
  size_t len[SW_MAX_OUT];
} sw_out;

/* Record a copy of len bytes under name. */
void sw_put(sw_out *o, const char *name, const void *data, size_t len);
/* Record the bytes of the file at path under name, when it exists;
 * @return 1 if it did. */
int sw_put_file(sw_out *o, const char *name, const char *path);
void sw_out_free(sw_out *o);

/* A job: fills out and returns 0, or returns an error code with a message
 * in msg. It must destroy everything it made before returning. On failure,
 * what it records is checked against the reference's versions (below). */
typedef int (*sw_job)(void *ctx, sw_out *out, char *msg);

typedef struct sw_config {
  const char *name;        /* for messages */
  sw_job job;
  void *ctx;
  const int *codes;        /* allowed error codes, 0-terminated */
  /* versions an output may have after a failed run beyond the
   * reference's final ones (a checkpoint of an earlier epoch); NULL: none */
  const sw_out *partial;
  int once;                /* 1: only the Nth allocation fails */
  long max_trials;         /* a bound, so that a job that never ends fails */
} sw_config;

typedef struct sw_stats {
  long trials;             /* failure points: runs with an injected failure */
  long failed;             /* of them, runs that returned an error */
  long absorbed;           /* runs that succeeded with a failure injected */
  long absorbed_at[8];     /* the first of them: N */
} sw_stats;

/* Run the sweep; fails the test (cmocka) at the first violation, naming
 * the sweep and N. NNT_SWEEP_ONLY=N in the environment runs only that N
 * (to look at it in a debugger); NNT_SWEEP_VERBOSE=1 prints every run's
 * code and message. ref, if not NULL, receives the reference outputs. */
sw_stats sw_run(const sw_config *c, sw_out *ref);

/* A scratch folder for a sweep's files: on tmpfs when /dev/shm is there
 * (the saves sync their files), else under /tmp. Free with tu_rmdir and
 * free(). */
char *sw_mkdtemp(void);

/* NNTrainer's raw data file: n samples of 16 inputs (uniform in [-1, 1)
 * from seed) and a one-hot label of 3 (sample s: class s % 3). */
void sw_write_raw(const char *path, unsigned n, unsigned seed);

#endif
