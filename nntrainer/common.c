/* Error records, allocation wrappers, the log callback, RNG and value
 * parsers. */
#include "nntrainer/common.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <strings.h>

const char *nnt_strerror(int code) {
  switch (code) {
#define NNT_X_CASE(name, value, text) \
  case value:                         \
    return text;
    NNT_ERRNO_MAP(NNT_X_CASE)
#undef NNT_X_CASE
  default:
    return "unrecognized error code";
  }
}

int nnt_err_set(nnt_err *e, int code, const char *fmt, ...) {
  if (e) {
    va_list ap;
    va_start(ap, fmt);
    e->code = code;
    e->from_callback = 0;
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
  }
  return code;
}

int nnt_err_prefix(nnt_err *e, const char *fmt, ...) {
  if (!e)
    return NNT_ERR_UNKNOWN;
  char pre[NNT_ERR_MSG_MAX], old[NNT_ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(pre, sizeof pre, fmt, ap);
  va_end(ap);
  memcpy(old, e->msg, sizeof old);
  size_t np = strnlen(pre, sizeof pre - 1), no = strnlen(old, sizeof old - 1);
  if (np + no > sizeof e->msg - 1)
    no = sizeof e->msg - 1 - np;
  memcpy(e->msg, pre, np);
  memcpy(e->msg + np, old, no);
  e->msg[np + no] = '\0';
  return e->code;
}

void nnt_err_clear(nnt_err *e) {
  if (e) {
    e->code = NNT_OK;
    e->from_callback = 0;
    e->msg[0] = '\0';
  }
}

/* Failure injection for tests: -1 means never fail. Atomic so that an
 * allocation in another thread (a data producer) is no data race; a sweep
 * that counts allocations still wants them in one thread. */
static atomic_long alloc_fail_countdown = -1;
static atomic_int alloc_fail_once;
static atomic_long alloc_failed;

/* Arming (n >= 0) restarts the count of failures; disarming keeps it. */
static void alloc_fail_set(long n, int once) {
  atomic_store(&alloc_fail_once, once);
  if (n >= 0)
    atomic_store(&alloc_failed, 0);
  atomic_store(&alloc_fail_countdown, n < 0 ? -1 : n);
}

void nnt_alloc_fail_after(long n) { alloc_fail_set(n, 0); }
void nnt_alloc_fail_once(long n) { alloc_fail_set(n, 1); }
long nnt_alloc_failures(void) { return atomic_load(&alloc_failed); }

static int alloc_should_fail(void) {
  long c = atomic_load_explicit(&alloc_fail_countdown, memory_order_relaxed);
  if (c < 0)
    return 0;
  if (c == 0) {
    atomic_fetch_add(&alloc_failed, 1);
    if (atomic_load(&alloc_fail_once))
      atomic_store(&alloc_fail_countdown, -1);
    return 1;
  }
  atomic_store_explicit(&alloc_fail_countdown, c - 1, memory_order_relaxed);
  return 0;
}

void *nnt_malloc(size_t n) {
  if (alloc_should_fail())
    return NULL;
  return malloc(n ? n : 1);
}

void *nnt_calloc(size_t count, size_t size) {
  if (alloc_should_fail())
    return NULL;
  return calloc(count ? count : 1, size ? size : 1);
}

void *nnt_realloc(void *p, size_t n) {
  if (alloc_should_fail())
    return NULL;
  return realloc(p, n ? n : 1);
}

void *nnt_aligned_alloc(size_t align, size_t n) {
  if (alloc_should_fail())
    return NULL;
  /* C11 wants a size that is a multiple of the alignment */
  size_t r = n ? n : 1;
  if (r % align) {
    if (r > SIZE_MAX - align)
      return NULL;
    r += align - r % align;
  }
  return aligned_alloc(align, r);
}

char *nnt_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = nnt_malloc(n);
  if (d)
    memcpy(d, s, n);
  return d;
}

void nnt_free(void *p) { free(p); }

/* The log callback: process-wide by design (like ggml_log_set), so that
 * messages from code that has no model at hand (layer and optimizer
 * properties, the INI loader) reach the application too. The callback and
 * its user data change and are called under one recursive mutex: calls are
 * serialized, a callback may log or replace itself, and after nnt_log_set
 * returns the old callback is not running in another thread. `log_on` and
 * `log_min` let nnt_log return at once, without the lock, when no callback
 * takes the level. */
static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t log_mu;
static nnt_log_cb log_cb;
static void *log_ud;
static atomic_int log_on;
static atomic_int log_min = NNT_LOG_NOTICE;

static void log_init(void) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&log_mu, &a);
  pthread_mutexattr_destroy(&a);
}

void nnt_log_set(nnt_log_cb cb, void *user_data) {
  pthread_once(&log_once, log_init);
  pthread_mutex_lock(&log_mu);
  log_cb = cb;
  log_ud = user_data;
  atomic_store(&log_on, cb != NULL);
  pthread_mutex_unlock(&log_mu);
}

int nnt_log_set_level(int min_level) {
  if (min_level < NNT_LOG_DEBUG || min_level > NNT_LOG_MAX_LEVEL)
    return NNT_ERR_INVAL;
  atomic_store(&log_min, min_level);
  return NNT_OK;
}

int nnt_log_enabled(nnt_log_level level) {
  return atomic_load(&log_on) && (int)level >= atomic_load(&log_min);
}

void nnt_log(nnt_log_level level, const char *fmt, ...) {
  if (!nnt_log_enabled(level))
    return;
  char msg[NNT_LOG_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pthread_once(&log_once, log_init);
  pthread_mutex_lock(&log_mu);
  if (log_cb)
    log_cb((int)level, msg, log_ud);
  pthread_mutex_unlock(&log_mu);
}

/* splitmix64 to expand the seed, xoroshiro128+ to generate. */
static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void nnt_rng_seed(nnt_rng *r, uint64_t seed) {
  uint64_t x = seed;
  r->s[0] = splitmix64(&x);
  r->s[1] = splitmix64(&x);
  if (!r->s[0] && !r->s[1])
    r->s[1] = 1;
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t nnt_rng_next(nnt_rng *r) {
  uint64_t s0 = r->s[0], s1 = r->s[1];
  uint64_t result = s0 + s1;
  s1 ^= s0;
  r->s[0] = rotl(s0, 24) ^ s1 ^ (s1 << 16);
  r->s[1] = rotl(s1, 37);
  return result;
}

float nnt_rng_uniform(nnt_rng *r) {
  return (float)(nnt_rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

float nnt_rng_normal(nnt_rng *r) {
  /* Box-Muller; u1 in (0, 1] so the log is finite. */
  double u1 = ((double)(nnt_rng_next(r) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
  double u2 = (double)(nnt_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

uint32_t nnt_rng_below(nnt_rng *r, uint32_t n) {
  return (uint32_t)(((nnt_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

/* Copy v without surrounding spaces into buf; 0 if it does not fit. */
static int trim_copy(const char *v, char *buf, size_t n) {
  while (*v && isspace((unsigned char)*v))
    v++;
  size_t len = strlen(v);
  while (len && isspace((unsigned char)v[len - 1]))
    len--;
  if (len >= n)
    return 0;
  memcpy(buf, v, len);
  buf[len] = '\0';
  return 1;
}

/* Whether only spaces follow end. */
static int only_spaces(const char *end) {
  while (isspace((unsigned char)*end))
    end++;
  return !*end;
}

int nnt_parse_uint(const char *key, const char *v, unsigned *out, nnt_err *e) {
  const char *p = v;
  while (p && isspace((unsigned char)*p))
    p++;
  /* strtoull would take a sign, spaces after it or a 0x prefix */
  if (!p || !isdigit((unsigned char)*p))
    goto bad;
  char *end;
  errno = 0;
  unsigned long long x = strtoull(p, &end, 10);
  if (!only_spaces(end))
    goto bad;
  if (errno == ERANGE || x > UINT_MAX)
    return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': value '%s' is out of range (0 to %u)", key,
                       v, UINT_MAX);
  *out = (unsigned)x;
  return NNT_OK;
bad:
  return nnt_err_set(e, NNT_ERR_INVAL,
                     "key '%s': value '%s' is not a non-negative integer", key,
                     v ? v : "(null)");
}

/* A float32: a decimal (or hexadecimal) number whose magnitude is 0 or
 * between FLT_MIN and FLT_MAX. Subnormals are refused: kernels that flush
 * them to zero would silently use another value, and no setting needs one. */
int nnt_parse_float(const char *key, const char *v, float *out, nnt_err *e) {
  const char *p = v;
  char *end;
  while (p && isspace((unsigned char)*p))
    p++;
  if (!p || !*p)
    goto bad;
  errno = 0;
  double x = strtod(p, &end);
  if (end == p || !only_spaces(end) || isnan(x) || (isinf(x) && errno != ERANGE))
    goto bad;
  float f = (float)x;
  if (isinf(f))
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "key '%s': value '%s' is out of float32's range (magnitude at most "
                       "%.9g)", key, v, FLT_MAX);
  if ((x != 0 || errno == ERANGE) && fabsf(f) < FLT_MIN)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "key '%s': value '%s' is too small for float32 (a nonzero magnitude "
                       "must be at least %.9g; write 0 for zero)", key, v, FLT_MIN);
  *out = f;
  return NNT_OK;
bad:
  return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': value '%s' is not a number",
                     key, v ? v : "(null)");
}

int nnt_parse_nonneg_float(const char *key, const char *v, float *out, nnt_err *e) {
  float x;
  int rc = nnt_parse_float(key, v, &x, e);
  if (rc)
    return rc;
  if (x < 0)
    return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': value '%s' must not be negative", key, v);
  *out = x == 0 ? 0.0f : x; /* -0 is 0 */
  return NNT_OK;
}

int nnt_parse_positive_uint(const char *key, const char *v, unsigned *out, nnt_err *e) {
  unsigned u;
  int rc = nnt_parse_uint(key, v, &u, e);
  if (rc)
    return rc;
  if (!u)
    return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': value '%s' must be positive", key, v);
  *out = u;
  return NNT_OK;
}

int nnt_parse_rate(const char *key, const char *v, float *out, nnt_err *e) {
  float r;
  int rc = nnt_parse_float(key, v, &r, e);
  if (rc)
    return rc;
  if (!(r >= 0 && r < 1))
    return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': %s is not in [0, 1)", key, v);
  *out = r;
  return NNT_OK;
}

int nnt_parse_bool(const char *key, const char *v, int *out, nnt_err *e) {
  char buf[16];
  if (v && trim_copy(v, buf, sizeof buf)) {
    if (nnt_streq(buf, "true") || nnt_streq(buf, "yes") ||
        nnt_streq(buf, "on") || !strcmp(buf, "1")) {
      *out = 1;
      return NNT_OK;
    }
    if (nnt_streq(buf, "false") || nnt_streq(buf, "no") ||
        nnt_streq(buf, "off") || !strcmp(buf, "0")) {
      *out = 0;
      return NNT_OK;
    }
  }
  return nnt_err_set(e, NNT_ERR_INVAL,
                     "key '%s': value '%s' is not a boolean (true or false)",
                     key, v ? v : "(null)");
}

/* Split v on commas and parse each item with `one`; an empty item (as in
 * "1,,2" or "1,2,") is an error, not skipped. */
static int parse_list(const char *key, const char *v, void *out, size_t elem,
                      unsigned max, unsigned *n, nnt_err *e,
                      int (*one)(const char *, const char *, void *, nnt_err *)) {
  char item[128];
  if (!v)
    return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': value is missing", key);
  unsigned count = 0;
  for (const char *p = v;; p++) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    const char *b = p, *end = p + len;
    while (b < end && isspace((unsigned char)*b))
      b++;
    if (b == end && !comma && !count)
      return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': empty list", key);
    if (b == end)
      return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': an empty item in '%s'", key, v);
    if (count == max)
      return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': more than %u values in '%s'",
                         key, max, v);
    if (len >= sizeof item)
      return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': item '%.*s...' of '%.64s...' is too long",
                         key, 16, b, v);
    memcpy(item, p, len);
    item[len] = '\0';
    int rc = one(key, item, (char *)out + elem * count, e);
    if (rc)
      return rc;
    count++;
    if (!comma)
      break;
    p = comma;
  }
  *n = count;
  return NNT_OK;
}

static int one_float(const char *k, const char *v, void *o, nnt_err *e) {
  return nnt_parse_float(k, v, o, e);
}
static int one_uint(const char *k, const char *v, void *o, nnt_err *e) {
  return nnt_parse_uint(k, v, o, e);
}

int nnt_parse_float_list(const char *key, const char *v, float *out,
                         unsigned max, unsigned *n, nnt_err *e) {
  return parse_list(key, v, out, sizeof *out, max, n, e, one_float);
}

int nnt_parse_uint_list(const char *key, const char *v, unsigned *out,
                        unsigned max, unsigned *n, nnt_err *e) {
  return parse_list(key, v, out, sizeof *out, max, n, e, one_uint);
}

int nnt_streq(const char *a, const char *b) {
  return a && b && strcasecmp(a, b) == 0;
}

int nnt_parse_bytes(const char *v, uint64_t *out) {
  while (*v == ' ' || *v == '\t')
    v++;
  uint64_t x = 0;
  const char *p = v;
  for (; *p >= '0' && *p <= '9'; p++)
    if (__builtin_mul_overflow(x, 10, &x) || __builtin_add_overflow(x, (uint64_t)(*p - '0'), &x))
      return 2;
  if (p == v)
    return 1;
  unsigned shift = 0;
  if (*p == 'k' || *p == 'K')
    shift = 10, p++;
  else if (*p == 'm' || *p == 'M')
    shift = 20, p++;
  else if (*p == 'g' || *p == 'G')
    shift = 30, p++;
  while (*p == ' ' || *p == '\t')
    p++;
  if (*p)
    return 1;
  if (shift && x > (UINT64_MAX >> shift))
    return 2;
  x <<= shift;
  if (x > SIZE_MAX)
    return 2;
  *out = x;
  return 0;
}

double nnt_now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define NNT_MXCSR_FTZ_DAZ 0x8040u
unsigned nnt_fp_mode_get(void) { return _mm_getcsr(); }
void nnt_fp_mode_set(unsigned mode) { _mm_setcsr(mode); }
unsigned nnt_fp_flush_begin(void) {
  unsigned csr = _mm_getcsr();
  if ((csr & NNT_MXCSR_FTZ_DAZ) != NNT_MXCSR_FTZ_DAZ)
    _mm_setcsr(csr | NNT_MXCSR_FTZ_DAZ);
  return csr;
}
#else
unsigned nnt_fp_mode_get(void) { return 0; }
void nnt_fp_mode_set(unsigned mode) { (void)mode; }
unsigned nnt_fp_flush_begin(void) { return 0; }
#endif
