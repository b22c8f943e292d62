/* Every seed of the fuzz corpora (test/fuzz/corpus/<target>/) and every
 * regression file (test/fuzz/regress/<target>/, inputs that once crashed a
 * target or broke a promise) through its fuzz target, in the normal and the
 * sanitizer builds: docs/fuzzing.md. A target aborts with its reason when
 * the library breaks a promise; a file named ok-* must be taken all the
 * way (loaded and trained, every batch read), one named bad-* refused. */
#include "test_util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static uint8_t *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f)
    fail_msg("cannot open %s", path);
  size_t cap = 4096, len = 0;
  uint8_t *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
    len += got;
    if (len == cap)
      buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  if (!buf)
    fail_msg("out of memory reading %s", path);
  *n = len;
  return buf;
}

/* Run every file of dir through fn; @return how many there were, and
 * count the ok-* and bad-* ones. */
static size_t replay_dir(const char *target, nnt_fuzz_fn fn, const char *dir, size_t *named) {
  DIR *d = opendir(dir);
  if (!d)
    return 0;
  char *names[4096];
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(d)) && n < 4096)
    if (de->d_name[0] != '.' && strcmp(de->d_name, "README.md"))
      names[n++] = strdup(de->d_name);
  closedir(d);
  qsort(names, n, sizeof *names, by_name);
  for (size_t i = 0; i < n; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    size_t len;
    uint8_t *data = slurp(path, &len);
    int got = fn(data, len);
    free(data);
    int want = !strncmp(names[i], "ok-", 3)    ? NNT_FUZZ_ACCEPTED
               : !strncmp(names[i], "bad-", 4) ? NNT_FUZZ_REFUSED
                                               : -1;
    if (want >= 0) {
      (*named)++;
      if (got != want)
        fail_msg("%s: %s was %s, expected %s", target, path,
                 got == NNT_FUZZ_ACCEPTED ? "accepted" : "refused",
                 want == NNT_FUZZ_ACCEPTED ? "accepted" : "refused");
    }
    free(names[i]);
  }
  return n;
}

static void replay(const char *target) {
  nnt_fuzz_fn fn = NULL;
  for (size_t i = 0; i < nnt_fuzz_n_targets; i++)
    if (!strcmp(nnt_fuzz_targets[i].name, target))
      fn = nnt_fuzz_targets[i].fn;
  assert_non_null(fn);
  char dir[4096];
  size_t named = 0;
  snprintf(dir, sizeof dir, "%s/corpus/%s", NNT_FUZZ_DIR, target);
  size_t seeds = replay_dir(target, fn, dir, &named);
  snprintf(dir, sizeof dir, "%s/regress/%s", NNT_FUZZ_DIR, target);
  size_t regress = replay_dir(target, fn, dir, &named);
  print_message("%s: %zu seeds, %zu regression files, %zu with an expected outcome\n", target,
                seeds, regress, named);
  /* a corpus that went missing would make this test pass on nothing */
  assert_true(seeds >= 4);
  assert_true(named >= 2);
}

static void test_ini(void **state) { (void)state, replay("ini"); }
static void test_weights(void **state) { (void)state, replay("weights"); }
static void test_idx(void **state) { (void)state, replay("idx"); }
static void test_rawfile(void **state) { (void)state, replay("rawfile"); }
static void test_capi(void **state) { (void)state, replay("capi"); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ini),     cmocka_unit_test(test_weights),
      cmocka_unit_test(test_idx),     cmocka_unit_test(test_rawfile),
      cmocka_unit_test(test_capi),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
