/* Helpers shared by the cmocka tests. */
#include "test_util.h"

#include "fake_device.h"

#include "nntrainer/compute/cpu_impl.h"
#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"
#ifdef NNT_HAVE_VULKAN
#include <dlfcn.h>

#include "nntrainer/vulkan/vk.h"
#endif

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

static unsigned long jobs_at_two;
void tu_two_threads(void) {
  nnt_err e = {0};
  assert_int_equal(nnt_cpu_set_threads(2, &e), NNT_OK);
  nnt_cpu_pool_hold();
  if (nnt_cpu_pool_start(&e))
    fail_msg("%s", e.msg);
  assert_int_equal(nnt_cpu_pool_threads(), 2);
  jobs_at_two = nnt_cpu_pool_jobs();
}

unsigned long tu_one_thread(void) {
  nnt_err e = {0};
  unsigned long jobs = nnt_cpu_pool_jobs() - jobs_at_two;
  nnt_cpu_pool_release();
  assert_int_equal(nnt_cpu_set_threads(1, &e), NNT_OK);
  return jobs;
}

float *tu_rand(nnt_rng *r, size_t n, float lo, float hi) {
  float *x = malloc((n ? n : 1) * sizeof *x);
  assert_non_null(x);
  tu_fill_uniform(r, x, n, lo, hi);
  return x;
}

float *tu_dup(const float *x, size_t n) {
  float *y = malloc((n ? n : 1) * sizeof *y);
  assert_non_null(y);
  memcpy(y, x, n * sizeof *y);
  return y;
}

double *tu_dzeros(size_t n) {
  double *d = calloc(n ? n : 1, sizeof *d);
  assert_non_null(d);
  return d;
}

void tu_expect_vs(const char *what, const float *got, const double *want, size_t n,
                  double tol) {
  for (size_t i = 0; i < n; i++)
    if (!(fabs(got[i] - want[i]) <= tol * fmax(1, fabs(want[i]))))
      fail_msg("%s[%zu]: %.8g, expected %.8g", what, i, got[i], want[i]);
}

void tu_expect1(const char *what, double got, double want, double tol) {
  if (!(fabs(got - want) <= tol * fmax(1, fabs(want))))
    fail_msg("%s: %.8g, expected %.8g", what, got, want);
}

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

void tu_expect_close(const float *got, const float *want, size_t n, double tol,
                     const char *fmt, ...) {
  double err = tu_max_rel_err(got, want, n);
  if (err <= tol)
    return;
  char label[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(label, sizeof label, fmt, ap);
  va_end(ap);
  fail_msg("%s: max relative error %g > %g", label, err, tol);
}

float *tu_golden_layer(const char *name, size_t *n) {
  return tu_read_floats(tu_data_path("golden/layers/%s.bin", name), n);
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

/* "1.97 MiB" at p: bytes, and half of its last printed digit. */
static double human_bytes(const char *p, double *slack) {
  double v = 0;
  char unit[16] = "";
  if (sscanf(p, "%lf %15s", &v, unit) != 2)
    fail_msg("no byte figure at '%.40s'", p);
  double f = !strcmp(unit, "MiB") ? 1048576 : !strcmp(unit, "KiB") ? 1024 : 1;
  double s = !strcmp(unit, "MiB") ? 0.005 * f : !strcmp(unit, "KiB") ? 0.05 * f : 0;
  if (s > *slack)
    *slack = s;
  return v * f;
}

void tu_cli_memory(const char *out, double *device, double *host, double *slack) {
  const char *d = strstr(out, " device, ");
  const char *on = strstr(out, "); on ");
  if (!d || !on || on > d)
    fail_msg("no \"on <device>: D device, H host\" in: %s", out);
  const char *p = d;
  while (p > on && !(p[0] == ':' && p[1] == ' '))
    p--;
  *slack = 0;
  *device = human_bytes(p + 2, slack);
  *host = human_bytes(d + strlen(" device, "), slack);
}

size_t tu_json_size(const char *out, const char *key) {
  char k[128];
  snprintf(k, sizeof k, "\"%s\":", key);
  const char *p = strstr(out, k);
  if (!p)
    fail_msg("no %s in: %.200s", k, out);
  return (size_t)strtoull(p + strlen(k), NULL, 10);
}

void tu_watch_cb(const nnt_progress *p, void *ud) {
  tu_watch *w = ud;
  if (p->epoch_done)
    return;
  const float *want = w->steps + w->step * (1 + w->wfloats);
  double le = fabs(p->batch_loss - want[0]) / fmax(1, fabs(want[0]));
  double we = tu_max_rel_err(w->m->wpool, want + 1, w->wfloats);
  w->worst_loss = fmax(w->worst_loss, le);
  w->worst_w = fmax(w->worst_w, we);
  w->step++;
}

nnt_model *tu_golden_model(const char *name, const char *const *overrides, size_t n_over) {
  char dir[1024], path[1200];
  snprintf(dir, sizeof dir, "%s", tu_data_path("golden/training/%s", name));
  nnt_model *m;
  nnt_err e = {0};
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  assert_int_equal(nnt_model_set_base_dir(m, dir, &e), NNT_OK);
  snprintf(path, sizeof path, "%s/model.ini", dir);
  if (nnt_ini_load(m, path, overrides, n_over, &e) || nnt_model_compile(m, &e) ||
      nnt_model_initialize(m, &e))
    fail_msg("%s: %s", name, e.msg);
  snprintf(path, sizeof path, "%s/init.bin", dir);
  assert_int_equal(nnt_model_load_weights(m, path, &e), NNT_OK);
  return m;
}

void tu_golden_train(nnt_model *m, const char *name) {
  char dir[1024], path[1200];
  snprintf(dir, sizeof dir, "%s", tu_data_path("golden/training/%s", name));
  size_t nl, wf = m->wpool_floats;
  snprintf(path, sizeof path, "%s/losses.bin", dir);
  float *losses = tu_read_floats(path, &nl);
  /* expected per step: loss then weights, as the watcher reads them */
  float *steps = malloc(nl * (1 + wf) * sizeof(float));
  for (size_t k = 0; k < nl; k++) {
    size_t n;
    snprintf(path, sizeof path, "%s/step_%zu.bin", dir, k + 1);
    float *w = tu_read_floats(path, &n);
    assert_int_equal(n, wf);
    steps[k * (1 + wf)] = losses[k];
    memcpy(steps + k * (1 + wf) + 1, w, wf * sizeof(float));
    free(w);
  }
  tu_watch w = {m, steps, wf, 0, 0, 0};
  nnt_err e = {0};
  if (nnt_model_train(m, tu_watch_cb, &w, &e))
    fail_msg("%s: %s", name, e.msg);
  assert_int_equal(w.step, nl);
  print_message("%s: worst relative error: loss %.2g, weights %.2g\n", name, w.worst_loss,
                w.worst_w);
  assert_true(w.worst_loss < 1e-5 && w.worst_w < 1e-5);
  free(losses);
  free(steps);
}

static void walk_ini(const char *dir, void (*fn)(const char *path, void *ud), void *ud,
                     size_t *count) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *ent;
  while ((ent = readdir(d))) {
    if (ent->d_name[0] == '.')
      continue;
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", dir, ent->d_name);
    size_t n = strlen(ent->d_name);
    if (ent->d_type == DT_DIR) {
      walk_ini(p, fn, ud, count);
    } else if (n > 4 && !strcmp(ent->d_name + n - 4, ".ini")) {
      fn(p, ud);
      (*count)++;
    }
  }
  closedir(d);
}

size_t tu_each_app_ini(void (*fn)(const char *path, void *ud), void *ud) {
  size_t count = 0;
  walk_ini(NNT_SOURCE_DIR "/Applications", fn, ud, &count);
  walk_ini(NNT_SOURCE_DIR "/benchmarks/models", fn, ud, &count);
  return count;
}

const struct nnt_node *tu_node(const nnt_model *m, const char *name) {
  for (size_t i = 0; i < m->n_nodes; i++)
    if (!strcmp(m->nodes[i].layer->name, name))
      return &m->nodes[i];
  fail_msg("no node '%s'", name);
  return NULL;
}

unsigned tu_step_of(const nnt_model *m, const char *name, int kind) {
  const nnt_step *st = m->sched[NNT_MODE_TRAIN];
  for (unsigned s = 0; s < m->n_steps[NNT_MODE_TRAIN]; s++)
    if (st[s].kind == (nnt_step_kind)kind && st[s].node < m->n_nodes &&
        !strcmp(m->nodes[st[s].node].layer->name, name))
      return s;
  fail_msg("no %s step of %s", nnt_step_kind_name((nnt_step_kind)kind), name);
  return 0;
}

nnt_model *tu_load_poisoned(const char *name, const char *ini, int fake, int unoptimized,
                            double rerun_share) {
  nnt_err e = {0};
  const char *path = tu_write_text(name, ini);
  const char *ov[1] = {"memory_optimization=false"};
  nnt_model *m = tu_model_for_ini(path);
  if (nnt_ini_load(m, path, ov, unoptimized ? 1 : 0, &e))
    fail_msg("%s: %s", path, e.msg);
  m->rerun_share = rerun_share;
  m->poison = 1;
  nnt_dataset *ds = NULL;
  assert_int_equal(nnt_dataset_create_synthetic(8, 5, &ds, &e), NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, &e), NNT_OK);
  if (fake)
    assert_int_equal(nnt_model_set_backend(m, fdev_backend(), &e), NNT_OK);
  if (nnt_model_compile(m, &e) || nnt_model_initialize(m, &e) ||
      nnt_model_plan(m, NNT_MODE_TRAIN, &e))
    fail_msg("compile: %s", e.msg);
  return m;
}

void tu_overflow_weights(nnt_model *m, const char *name) {
  const nnt_node *nd = tu_node(m, name);
  for (unsigned k = 0; k < nd->fc.n_w; k++) {
    nnt_tensor *w = &m->w[nd->w_first + k];
    for (size_t i = 0; i < nnt_tensor_len(w); i++)
      w->data[i] = 3e38f;
  }
}

float *tu_weights_of(nnt_model *m) {
  float *w = malloc(m->wpool_floats * sizeof *w + 1);
  assert_non_null(w);
  nnt_err e = {0};
  size_t at = 0;
  for (size_t i = 0; i < m->n_w; i++) {
    size_t n = nnt_tensor_len(&m->w[i]);
    assert_int_equal(nnt_tensor_get(&m->w[i], 0, w + at, n, &e), NNT_OK);
    at += n;
  }
  return w;
}

unsigned char *tu_file_bytes(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f)
    fail_msg("cannot open %s", path);
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *p = malloc(*n + 1);
  assert_non_null(p);
  assert_int_equal(fread(p, 1, *n, f), *n);
  fclose(f);
  return p;
}

void tu_assert_same_file(const char *a, const char *b) {
  size_t na, nb;
  unsigned char *x = tu_file_bytes(a, &na), *y = tu_file_bytes(b, &nb);
  if (na != nb || memcmp(x, y, na))
    fail_msg("%s (%zu bytes) and %s (%zu bytes) differ", a, na, b, nb);
  free(x);
  free(y);
}

const char *tu_path_in(const char *name) {
  static char p[4][512];
  static int k;
  k = (k + 1) % 4;
  snprintf(p[k], sizeof p[k], "%s/%s", tu_dir, name);
  return p[k];
}

double tu_model_fd(nnt_model *m, float *x, size_t j, float eps) {
  float keep = x[j], lp, lm;
  x[j] = keep + eps;
  assert_int_equal(nnt_model_forward(m, 1, &lp, NULL), NNT_OK);
  x[j] = keep - eps;
  assert_int_equal(nnt_model_forward(m, 1, &lm, NULL), NNT_OK);
  x[j] = keep;
  return ((double)lp - lm) / (2 * eps);
}

void tu_add_layer(nnt_model *m, const char *const *row, size_t n, nnt_err *e) {
  nnt_layer *l;
  assert_int_equal(nnt_layer_create(row[0], &l, e), NNT_OK);
  assert_int_equal(nnt_layer_set_property(l, "name", row[1], e), NNT_OK);
  for (size_t k = 2; k + 1 < n && row[k]; k += 2)
    assert_int_equal(nnt_layer_set_property(l, row[k], row[k + 1], e), NNT_OK);
  assert_int_equal(nnt_model_add_layer(m, l, e), NNT_OK);
}

unsigned tu_loss_tensors(const nnt_mgr *g) {
  unsigned n = 0;
  for (size_t i = 0; i < g->n; i++) {
    size_t len = strlen(g->t[i].name);
    n += len > 6 && !strcmp(g->t[i].name + len - 6, ":loss0");
  }
  return n;
}

unsigned tu_loss_nodes(const nnt_model *m) {
  unsigned n = 0;
  for (size_t i = 0; i < m->n_nodes; i++)
    n += (m->nodes[i].fc.flags & NNT_LF_LOSS) != 0;
  return n;
}

nnt_model *tu_model_for_ini(const char *path) {
  nnt_model *m;
  nnt_err e = {0};
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  char dir[1024];
  snprintf(dir, sizeof dir, "%s", path);
  *strrchr(dir, '/') = '\0';
  assert_int_equal(nnt_model_set_base_dir(m, dir, &e), NNT_OK);
  return m;
}

void tu_assert_validation_silent(const nnt_backend *be) {
#ifdef NNT_HAVE_VULKAN
  char first[512] = "";
  size_t n = be ? nnt_vulkan_validation_messages(be, first, sizeof first) : 0;
  if (n)
    fail_msg("the validation layer reported %zu messages for backend '%s'; the first: %s", n,
             be->name, first);
#else
  (void)be;
#endif
}

void tu_backend_free_checked(nnt_backend *be) {
  tu_assert_validation_silent(be);
  nnt_backend_free(be);
}

void tu_model_destroy_checked(nnt_model *m) {
  if (m)
    tu_assert_validation_silent(m->be);
  nnt_model_destroy(m);
}

nnt_ds_shape tu_ds_shape1(size_t in, size_t lab) {
  nnt_ds_shape s = {0};
  s.n_in = s.n_label = 1;
  s.in_len[0] = in;
  s.label_len[0] = lab;
  return s;
}

int tu_ds_next(nnt_dataset *d, float **in, float **lab, nnt_err *e) {
  int end = -1, rc = nnt_dataset_next_batch(d, in, lab, &end, e);
  if (rc) {
    assert_int_equal(end, 0);
    return rc;
  }
  assert_true(end == 0 || end == 1);
  return !end;
}

void tu_write_idx(const char *path, int gz, uint8_t type, const uint32_t *dims, int nd,
                  const void *data, size_t n) {
  uint8_t hdr[4 + 16] = {0, 0, type, (uint8_t)nd};
  for (int i = 0; i < nd; i++) {
    hdr[4 + 4 * i] = (uint8_t)(dims[i] >> 24), hdr[5 + 4 * i] = (uint8_t)(dims[i] >> 16);
    hdr[6 + 4 * i] = (uint8_t)(dims[i] >> 8), hdr[7 + 4 * i] = (uint8_t)dims[i];
  }
  gzFile f = gzopen(path, gz ? "wb" : "wbT");
  assert_non_null(f);
  assert_int_equal(gzwrite(f, hdr, 4 + 4 * (unsigned)nd), 4 + 4 * nd);
  if (n)
    assert_int_equal(gzwrite(f, data, (unsigned)n), (int)n);
  gzclose(f);
}

void tu_keep_vulkan_driver(void) {
#ifdef NNT_HAVE_VULKAN
  (void)dlopen("libvulkan_lvp.so", RTLD_NOW | RTLD_NODELETE);
#endif
}

nnt_backend *tu_gpu(void) {
  nnt_backend *be;
  nnt_err e = {0};
  if (nnt_backend_get(NNT_ENGINE_GPU, &be, &e))
    fail_msg("%s", e.msg);
  return be;
}

static void built_without_vulkan(void **state) {
  (void)state;
  nnt_backend *be;
  nnt_err e = {0};
  assert_int_equal(nnt_backend_get(NNT_ENGINE_GPU, &be, &e), NNT_ERR_NOT_SUPPORTED);
  tu_assert_contains(e.msg, "engine 'gpu': this build has no GPU backend (built without Vulkan");
}

int tu_main_without_vulkan(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(built_without_vulkan)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
