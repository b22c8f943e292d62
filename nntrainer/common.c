/* Error records, allocation wrappers, RNG and value parsers. */
#include "nntrainer/common.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* Failure injection for tests: -1 means never fail. */
static long alloc_fail_countdown = -1;

void nnt_alloc_fail_after(long n) { alloc_fail_countdown = n; }

static int alloc_should_fail(void) {
  if (alloc_fail_countdown < 0)
    return 0;
  if (alloc_fail_countdown == 0)
    return 1;
  alloc_fail_countdown--;
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

char *nnt_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = nnt_malloc(n);
  if (d)
    memcpy(d, s, n);
  return d;
}

void nnt_free(void *p) { free(p); }

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

int nnt_parse_uint(const char *key, const char *v, unsigned *out, nnt_err *e) {
  char buf[64], *end;
  if (!v || !trim_copy(v, buf, sizeof buf) || !buf[0] || buf[0] == '-' ||
      buf[0] == '+')
    goto bad;
  errno = 0;
  unsigned long x = strtoul(buf, &end, 10);
  if (*end || errno || x > 0xffffffffUL)
    goto bad;
  *out = (unsigned)x;
  return NNT_OK;
bad:
  return nnt_err_set(e, NNT_ERR_INVAL,
                     "key '%s': value '%s' is not a non-negative integer", key,
                     v ? v : "(null)");
}

int nnt_parse_float(const char *key, const char *v, float *out, nnt_err *e) {
  char buf[64], *end;
  if (!v || !trim_copy(v, buf, sizeof buf) || !buf[0])
    goto bad;
  errno = 0;
  double x = strtod(buf, &end);
  if (*end || errno || !isfinite(x))
    goto bad;
  *out = (float)x;
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
  *out = x;
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

/* Split v on commas and parse each item with `one`. */
static int parse_list(const char *key, const char *v, void *out, size_t elem,
                      unsigned max, unsigned *n, nnt_err *e,
                      int (*one)(const char *, const char *, void *, nnt_err *)) {
  char buf[1024];
  if (!v || strlen(v) >= sizeof buf)
    return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': value is missing or too long", key);
  strcpy(buf, v);
  unsigned count = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (count == max)
      return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': more than %u values in '%s'",
                         key, max, v);
    int rc = one(key, tok, (char *)out + elem * count, e);
    if (rc)
      return rc;
    count++;
  }
  if (!count)
    return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': empty list", key);
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
