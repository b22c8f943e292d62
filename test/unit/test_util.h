/* Helpers shared by the cmocka tests. */
#ifndef NNT_TEST_UTIL_H
#define NNT_TEST_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "nntrainer/common.h"

/* Fill with uniform values in [lo, hi) from a seeded rng. */
void tu_fill_uniform(nnt_rng *r, float *x, size_t n, float lo, float hi);
/* max |a - b| / max(1, |b|) over n values. */
double tu_max_rel_err(const float *a, const float *b, size_t n);
/* Read a whole file of little-endian float32; returns a malloc'd array and
 * its length in *n, or NULL (and fails the test) if it cannot be read. */
float *tu_read_floats(const char *path, size_t *n);
/* Path under test/ (NNT_TEST_DATA_DIR) formatted like printf, static buffer. */
const char *tu_data_path(const char *fmt, ...);
/* A fresh temporary directory (removed by tu_rmdir). */
char *tu_mkdtemp(void);
void tu_rmdir(const char *dir);
/* Assert that an error message contains a substring, printing both. */
#define tu_assert_contains(haystack, needle)                                   \
  do {                                                                         \
    if (!strstr((haystack), (needle)))                                         \
      fail_msg("expected '%s' in message: %s", (needle), (haystack));          \
  } while (0)

#endif
