/* What the fuzz targets share: the table of targets, a private temporary
 * folder for the files they write, and the error-promise check. Test code:
 * it may print and abort (that is how a broken promise reaches libFuzzer). */
#include "fuzz.h"

#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "nntrainer/compute/kernels.h"

const nnt_fuzz_target nnt_fuzz_targets[] = {
    {"ini", nnt_fuzz_ini},         {"weights", nnt_fuzz_weights}, {"idx", nnt_fuzz_idx},
    {"rawfile", nnt_fuzz_rawfile}, {"capi", nnt_fuzz_capi},
};
const size_t nnt_fuzz_n_targets = sizeof nnt_fuzz_targets / sizeof nnt_fuzz_targets[0];

static void rm_tmpdir(void);

void nnt_fuzz_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "nnt_fuzz: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  rm_tmpdir(); /* abort skips atexit; libFuzzer keeps the input itself */
  abort();
}

int nnt_fuzz_check_err(const char *call, int rc, const nnt_err *e) {
  if (rc >= 0)
    nnt_fuzz_fail("%s failed with code %d, not a negative error code", call, rc);
  if (e->code != rc)
    nnt_fuzz_fail("%s returned %d (%s) but recorded %d (%s): %s", call, rc, nnt_strerror(rc),
                  e->code, nnt_strerror(e->code), e->msg);
  if (!e->msg[0])
    nnt_fuzz_fail("%s returned %d (%s) without a message", call, rc, nnt_strerror(rc));
  if (getenv("NNT_FUZZ_VERBOSE")) /* why an input was refused, for people */
    fprintf(stderr, "nnt_fuzz: %s: %s\n", call, e->msg);
  return rc;
}

void nnt_fuzz_init(void) {
  static int done;
  if (done)
    return;
  done = 1;
  nnt_cpu_set_threads(1, NULL);
  nnt_log_set(NULL, NULL);
}

static char tmpdir[4096];

/* In the sanitizer runtimes when one is linked in; NULL otherwise. */
void __sanitizer_set_death_callback(void (*cb)(void)) __attribute__((weak));

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
  (void)st, (void)flag, (void)f;
  remove(p);
  return 0;
}

static void rm_tmpdir(void) {
  if (tmpdir[0])
    nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *nnt_fuzz_tmpdir(void) {
  if (tmpdir[0])
    return tmpdir;
  const char *base = getenv("NNT_FUZZ_TMPDIR");
  if (!base || !base[0])
    base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : NULL;
  if (!base)
    base = getenv("TMPDIR");
  if (!base || !base[0])
    base = "/tmp";
  snprintf(tmpdir, sizeof tmpdir, "%s/nnt-fuzz-XXXXXX", base);
  if (!mkdtemp(tmpdir)) {
    char b[4096];
    snprintf(b, sizeof b, "%s", base);
    tmpdir[0] = '\0';
    nnt_fuzz_fail("cannot make a folder in %s: %s", b, strerror(errno));
  }
  atexit(rm_tmpdir);
  /* a sanitizer's report ends the process without atexit */
  if (__sanitizer_set_death_callback)
    __sanitizer_set_death_callback(rm_tmpdir);
  return tmpdir;
}

const char *nnt_fuzz_path(char *buf, size_t n, const char *name) {
  snprintf(buf, n, "%s/%s", nnt_fuzz_tmpdir(), name);
  return buf;
}

void nnt_fuzz_write(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f))
    nnt_fuzz_fail("cannot write %s: %s", path, strerror(errno));
}

void nnt_fuzz_write_gzip(const char *path, const void *data, size_t n) {
  gzFile g = gzopen(path, "wb");
  if (!g || (n && gzwrite(g, data, (unsigned)n) != (int)n) || gzclose(g) != Z_OK)
    nnt_fuzz_fail("cannot write %s (gzip)", path);
}
