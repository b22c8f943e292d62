/* Common definitions: error codes, the error record, allocation, logging,
 * RNG.
 *
 * Every function that can fail returns an int error code (NNT_OK or a negative
 * NNT_ERR_*) and, when given a non-NULL nnt_err, records a readable message in
 * it. Library code never prints and never exits. */
#ifndef NNT_COMMON_H
#define NNT_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>

/* Error codes. Values equal the Tizen ML API's ML_ERROR_* codes so the C API
 * passes them through unchanged. X(name, value, text) */
#define NNT_ERRNO_MAP(X)                                                  \
  X(OK, 0, "success")                                                     \
  X(INVAL, -22, "invalid parameter")                                      \
  X(NOMEM, -12, "out of memory")                                          \
  X(IO, -5, "input/output error")                                         \
  X(PERM, -13, "permission denied")                                       \
  X(TRY_AGAIN, -11, "try again")                                          \
  X(RANGE, -34, "a value is not finite (NaN or infinity)")                \
  X(NOT_SUPPORTED, -1073741822, "not supported")                          \
  X(UNKNOWN, -1073741824, "unknown error")                                \
  X(TIMED_OUT, -1073741823, "timed out")                                  \
  X(CANCELED, -125, "canceled")                                           \
  X(NOKEY, -1000, "unknown property key")

enum {
#define NNT_X_ENUM(name, value, text) NNT_ERR_##name = (value),
  NNT_ERRNO_MAP(NNT_X_ENUM)
#undef NNT_X_ENUM
};
#define NNT_OK NNT_ERR_OK

const char *nnt_strerror(int code);

#define NNT_ERR_MSG_MAX 1024

/* A readable error: the code and a message naming what was wrong.
 * from_callback is 1 when code is what an application callback returned
 * (a data generator's own code, any value): it is passed back to the
 * application unchanged, never read as one of the codes above. */
typedef struct nnt_err {
  int code;
  int from_callback;
  char msg[NNT_ERR_MSG_MAX];
} nnt_err;

/* Record code and a printf-style message in e (if e is not NULL); clears
 * from_callback. @return code, so callers can write
 * `return nnt_err_set(e, ...)`. */
int nnt_err_set(nnt_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prepend context ("file.ini: [fc1] ") to the message already in e.
 * @return e->code (or NNT_ERR_UNKNOWN when e is NULL). */
int nnt_err_prefix(nnt_err *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void nnt_err_clear(nnt_err *e);

/* Seconds of the monotonic clock (step times, the profile). */
double nnt_now_s(void);

/* The floating-point mode the library computes in. A subnormal float
 * (below 1.2e-38) read or produced by an op is 0 there: on x86 each one
 * otherwise costs a microcode assist of some hundred cycles, and training
 * makes them as it goes (a moment decaying toward 0, the tiny gradients
 * behind a saturated gate), so that steps grew slower epoch after epoch
 * (docs/performance.md, "Epoch drift"). x86: MXCSR's flush-to-zero and
 * denormals-are-zero bits; elsewhere (arm64, whose cores take subnormals
 * at full speed) nothing changes. nnt_fp_flush_begin sets the mode on the
 * calling thread and returns the state before, which nnt_fp_mode_set
 * puts back; the CPU's compute threads take the mode of the thread that
 * posts each job. nnt_fp_mode_get: the thread's state (x86: MXCSR; 0
 * elsewhere). */
unsigned nnt_fp_mode_get(void);
void nnt_fp_mode_set(unsigned mode);
unsigned nnt_fp_flush_begin(void);

/* Allocation goes through these so failures can be injected in tests. */
void *nnt_malloc(size_t n);
void *nnt_calloc(size_t count, size_t size);
void *nnt_realloc(void *p, size_t n);
char *nnt_strdup(const char *s);
/* n bytes aligned to align (a power of two); freed with nnt_free. */
void *nnt_aligned_alloc(size_t align, size_t n);
void nnt_free(void *p);

/* Test hooks: make the allocation after the next `n` ones fail (n < 0:
 * never), and every one after it (fail_after: memory stays short) or only
 * that one (fail_once: later allocations succeed again, which shows a
 * failure that was swallowed and a cleanup path that is wrong). Only for
 * tests; with nnt_alloc_failures, the one process-wide setting. */
void nnt_alloc_fail_after(long n);
void nnt_alloc_fail_once(long n);
/* How many allocations the hook failed since it was last armed (n >= 0;
 * disarming with n < 0 keeps the count). */
long nnt_alloc_failures(void);

/* Log messages. The library never prints: it hands messages to one
 * process-wide callback (with the allocation-failure hook, the only global
 * state). Without a callback nothing is formatted or printed. Levels equal
 * nntrainer-ext.h's ML_TRAIN_EXT_LOG_*. */
typedef enum nnt_log_level {
  NNT_LOG_DEBUG = 0,   /* for developers */
  NNT_LOG_INFO = 1,    /* what the library did, nothing to act on */
  NNT_LOG_NOTICE = 2,  /* a documented choice of ours, e.g. a default that
                          differs from NNTrainer's, taken because a key was
                          absent */
  NNT_LOG_WARNING = 3, /* something given is ignored or looks wrong */
} nnt_log_level;
#define NNT_LOG_MAX_LEVEL NNT_LOG_WARNING
#define NNT_LOG_MSG_MAX 1024

/* The callback: level, the message (one line, no newline) and user_data.
 * Called one at a time, in the thread that logs. */
typedef void (*nnt_log_cb)(int level, const char *msg, void *user_data);

/* Install cb with user_data (cb NULL: none). Thread-safe; when it returns,
 * the previous callback is not running and will not be called again unless
 * the caller is that callback itself. */
void nnt_log_set(nnt_log_cb cb, void *user_data);
/* Only messages at min_level and above reach the callback (default
 * NNT_LOG_NOTICE). @return NNT_ERR_INVAL for a level out of range. */
int nnt_log_set_level(int min_level);
/* Whether a message at level would reach a callback. */
int nnt_log_enabled(nnt_log_level level);
/* Format a message and hand it to the callback, if any takes this level. */
void nnt_log(nnt_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Deterministic RNG (xoshiro128+ style); state lives with its owner. */
typedef struct nnt_rng {
  uint64_t s[2];
} nnt_rng;
void nnt_rng_seed(nnt_rng *r, uint64_t seed);
uint64_t nnt_rng_next(nnt_rng *r);
float nnt_rng_uniform(nnt_rng *r);         /* [0, 1) */
float nnt_rng_normal(nnt_rng *r);          /* N(0, 1) */
uint32_t nnt_rng_below(nnt_rng *r, uint32_t n); /* [0, n) */

/* Value parsers used by every property setter. They accept surrounding
 * spaces and report the key and value in the message on failure. */
int nnt_parse_uint(const char *key, const char *v, unsigned *out, nnt_err *e);
int nnt_parse_float(const char *key, const char *v, float *out, nnt_err *e);
/* A number >= 0; *out is unchanged on error. */
int nnt_parse_nonneg_float(const char *key, const char *v, float *out, nnt_err *e);
/* An integer >= 1 ("key 'K': value 'V' must be positive" for 0); *out is
 * unchanged on error. */
int nnt_parse_positive_uint(const char *key, const char *v, unsigned *out, nnt_err *e);
/* A probability in [0, 1), as dropout_rate ("key 'K': V is not in [0, 1)");
 * *out is unchanged on error. */
int nnt_parse_rate(const char *key, const char *v, float *out, nnt_err *e);
int nnt_parse_bool(const char *key, const char *v, int *out, nnt_err *e);
/* A byte count: digits with an optional K, M or G suffix (binary
 * multiples, any case), blanks around it allowed. @return 0 and *out, 1 when
 * v is not such a count, 2 when it is more than SIZE_MAX bytes. */
int nnt_parse_bytes(const char *v, uint64_t *out);
/* Comma-separated floats, at most max of them. */
int nnt_parse_float_list(const char *key, const char *v, float *out,
                         unsigned max, unsigned *n, nnt_err *e);
int nnt_parse_uint_list(const char *key, const char *v, unsigned *out,
                        unsigned max, unsigned *n, nnt_err *e);
/* Case-insensitive equality. */
int nnt_streq(const char *a, const char *b);

#define NNT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
