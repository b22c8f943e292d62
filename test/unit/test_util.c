/* Helpers shared by the cmocka tests. */
#include "test_util.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void tu_fill_uniform(nnt_rng *r, float *x, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; i++)
    x[i] = lo + (hi - lo) * nnt_rng_uniform(r);
}

double tu_max_rel_err(const float *a, const float *b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)b[i]);
    double s = fabs((double)b[i]);
    d /= s > 1 ? s : 1;
    if (d > m || isnan(d))
      m = isnan(d) ? INFINITY : d;
  }
  return m;
}

float *tu_read_floats(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f)
    fail_msg("cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  float *x = malloc(len > 0 ? (size_t)len : 1);
  if (fread(x, 1, (size_t)len, f) != (size_t)len)
    fail_msg("short read on %s", path);
  fclose(f);
  *n = (size_t)len / sizeof(float);
  return x;
}

const char *tu_data_path(const char *fmt, ...) {
  static char buf[4096];
  char rel[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rel, sizeof rel, fmt, ap);
  va_end(ap);
  snprintf(buf, sizeof buf, "%s/%s", NNT_TEST_DATA_DIR, rel);
  return buf;
}

char *tu_mkdtemp(void) {
  char tmpl[] = "/tmp/nnt-test-XXXXXX";
  char *d = mkdtemp(tmpl);
  if (!d)
    fail_msg("mkdtemp failed");
  return strdup(d);
}

char *tu_dir;

int tu_dir_setup(void **state) {
  (void)state;
  tu_dir = tu_mkdtemp();
  return 0;
}

int tu_dir_teardown(void **state) {
  (void)state;
  tu_rmdir(tu_dir);
  free(tu_dir);
  tu_dir = NULL;
  return 0;
}

const char *tu_write(const char *name, const void *data, size_t n) {
  static char path[1024];
  snprintf(path, sizeof path, "%s/%s", tu_dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, n, f) != n)
    fail_msg("cannot write %s", path);
  fclose(f);
  return path;
}

const char *tu_write_text(const char *name, const char *text) {
  return tu_write(name, text, strlen(text));
}

void tu_rmdir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *ent;
  char p[4096];
  while ((ent = readdir(d))) {
    if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, ".."))
      continue;
    snprintf(p, sizeof p, "%s/%s", dir, ent->d_name);
    struct stat st;
    if (!lstat(p, &st) && S_ISDIR(st.st_mode))
      tu_rmdir(p);
    else
      unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

tu_log tu_logged;

static void tu_log_cb(int level, const char *msg, void *ud) {
  tu_log *c = ud;
  if (c->n < TU_LOG_MAX) {
    c->level[c->n] = level;
    snprintf(c->msg[c->n], sizeof c->msg[c->n], "%s", msg);
  }
  c->n++;
}

void tu_log_start(void) {
  memset(&tu_logged, 0, sizeof tu_logged);
  nnt_log_set(tu_log_cb, &tu_logged);
}

void tu_log_stop(void) {
  nnt_log_set(NULL, NULL);
  nnt_log_set_level(NNT_LOG_NOTICE);
}

void tu_log_print(void) {
  for (int i = 0; i < tu_logged.n && i < TU_LOG_MAX; i++)
    print_message("  [%d] %s\n", tu_logged.level[i], tu_logged.msg[i]);
}

const char *tu_log_expect(int level, const char *a, const char *b, const char *c) {
  int found = -1, count = 0;
  for (int i = 0; i < tu_logged.n && i < TU_LOG_MAX; i++)
    if (tu_logged.level[i] == level && strstr(tu_logged.msg[i], a) &&
        strstr(tu_logged.msg[i], b) && (!c || strstr(tu_logged.msg[i], c)))
      found = i, count++;
  if (count != 1) {
    tu_log_print();
    fail_msg("want one level-%d message with '%s', '%s', '%s'; got %d", level, a, b,
             c ? c : "", count);
  }
  return tu_logged.msg[found];
}

int tu_log_count(int level) {
  int k = 0;
  for (int i = 0; i < tu_logged.n && i < TU_LOG_MAX; i++)
    k += tu_logged.level[i] == level;
  return k;
}

int tu_run_cli_env(const char *env, const char *args, char *out, size_t n) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "cd %s && env %s %s %s 2>&1", tu_dir, env, NNT_CLI_PATH, args);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t got = fread(out, 1, n - 1, p);
  out[got] = '\0';
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int tu_run_cli(const char *args, char *out, size_t n) { return tu_run_cli_env("", args, out, n); }
