/* Weight files written by NNTrainer itself (test/golden/nntrainer/<case>/,
 * produced by benchmarks/nntrainer-xcheck; see test/golden/README.md). For
 * each case the model is built from the same INI, the file NNTrainer saved
 * during training (in one case, after training) is loaded, and the weights
 * and counters are compared with NNTrainer's own reading of the file
 * (manifest.txt); saving the model again with its optimizer state must give
 * NNTrainer's bytes exactly, and loading the file through continue_train
 * must give the same model. */
#include "test_util.h"

#include "nntrainer/ini.h"
#include "nntrainer/model.h"
#include "nntrainer/model_impl.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MF_MAX_W 32

typedef struct mf_weight {
  char name[96];
  unsigned d[4];
  size_t offset, floats;
  double sum;
  int trainable, grad, optvars;
  float first[4];
  unsigned n_first;
} mf_weight;

typedef struct manifest {
  mf_weight w[MF_MAX_W];
  size_t n_w;
  char optimizer[16];
  long tag_offset;      /* -1: no "adam" tag */
  size_t n_moments;
  size_t counters_offset;
  unsigned epoch, iteration;
  size_t file_size;
  int after_train; /* saved by save() after train(): tag, no moments, counters */
} manifest;

/* Parse test/golden/nntrainer/<c>/manifest.txt (format in the README). */
static void read_manifest(const char *c, manifest *mf) {
  memset(mf, 0, sizeof *mf);
  mf->tag_offset = -1;
  const char *path = tu_data_path("golden/nntrainer/%s/manifest.txt", c);
  FILE *f = fopen(path, "r");
  if (!f)
    fail_msg("cannot open %s", path);
  char line[1024];
  int have_counters = 0, have_size = 0;
  while (fgets(line, sizeof line, f)) {
    char kw[32] = "";
    if (sscanf(line, "%31s", kw) != 1 || kw[0] == '#')
      continue;
    if (!strcmp(kw, "weight")) {
      if (mf->n_w == MF_MAX_W)
        fail_msg("%s: more than %d weights", path, MF_MAX_W);
      mf_weight *w = &mf->w[mf->n_w++];
      int used = 0;
      if (sscanf(line,
                 "weight %95s %u:%u:%u:%u offset %zu floats %zu sum %lf trainable %d "
                 "grad %d optvars %d first%n",
                 w->name, &w->d[0], &w->d[1], &w->d[2], &w->d[3], &w->offset, &w->floats,
                 &w->sum, &w->trainable, &w->grad, &w->optvars, &used) != 11 ||
          !used)
        fail_msg("%s: bad line: %s", path, line);
      const char *p = line + used;
      int k;
      while (w->n_first < 4 && sscanf(p, "%f%n", &w->first[w->n_first], &k) == 1) {
        w->n_first++;
        p += k;
      }
    } else if (!strcmp(kw, "optimizer")) {
      if (sscanf(line, "optimizer %15s", mf->optimizer) != 1)
        mf->optimizer[0] = '\0';
    } else if (!strcmp(kw, "tag")) {
      if (sscanf(line, "tag adam offset %ld", &mf->tag_offset) != 1)
        fail_msg("%s: bad line: %s", path, line);
    } else if (!strcmp(kw, "moment")) {
      mf->n_moments++;
    } else if (!strcmp(kw, "counters")) {
      if (sscanf(line, "counters offset %zu epoch %u iteration %u", &mf->counters_offset,
                 &mf->epoch, &mf->iteration) != 3)
        fail_msg("%s: bad line: %s", path, line);
      have_counters = 1;
    } else if (!strcmp(kw, "saved_after_train")) {
      if (sscanf(line, "saved_after_train counters offset %zu epoch %u iteration %u",
                 &mf->counters_offset, &mf->epoch, &mf->iteration) != 3)
        fail_msg("%s: bad line: %s", path, line);
      mf->after_train = have_counters = 1;
    } else if (!strcmp(kw, "file_size")) {
      if (sscanf(line, "file_size %zu", &mf->file_size) != 1)
        fail_msg("%s: bad line: %s", path, line);
      have_size = 1;
    }
  }
  fclose(f);
  if (!mf->n_w || !have_counters || !have_size)
    fail_msg("%s: no weights, counters or file size", path);
}

static unsigned char *read_bytes(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f)
    fail_msg("cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc(len > 0 ? (size_t)len : 1);
  assert_non_null(b);
  assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
  fclose(f);
  *n = (size_t)len;
  return b;
}

/* What a test holds; the teardown frees it, also after a failed assertion. */
typedef struct fixture {
  const char *c; /* the case */
  manifest mf;
  char bin[1024]; /* its model.bin */
  nnt_model *m;
  unsigned char *ref, *got;
  char *dir;
} fixture;

static int setup(void **state) {
  fixture *fx = calloc(1, sizeof *fx);
  if (!fx)
    return -1;
  fx->c = *state;
  snprintf(fx->bin, sizeof fx->bin, "%s",
           tu_data_path("golden/nntrainer/%s/model.bin", fx->c));
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fixture *fx = *state;
  nnt_model_destroy(fx->m);
  free(fx->ref);
  free(fx->got);
  if (fx->dir) {
    tu_rmdir(fx->dir);
    free(fx->dir);
  }
  free(fx);
  return 0;
}

/* The case's INI, compiled and initialized into fx->m; overrides as on the
 * CLI, and relative paths against the INI's folder, as the CLI and the C API
 * do. */
static void build(fixture *fx, const char *const *ovr, size_t n_ovr) {
  nnt_err e = {0};
  assert_int_equal(nnt_model_create(&fx->m, &e), NNT_OK);
  char ini[1024];
  snprintf(ini, sizeof ini, "%s", tu_data_path("golden/nntrainer/%s/model.ini", fx->c));
  if (nnt_model_set_base_dir(fx->m, tu_data_path("golden/nntrainer/%s", fx->c), &e) ||
      nnt_ini_load(fx->m, ini, ovr, n_ovr, &e) || nnt_model_compile(fx->m, &e) ||
      nnt_model_initialize(fx->m, &e))
    fail_msg("%s: %s", fx->c, e.msg);
}

/* Same weights as NNTrainer's, in the same order, with the values it read;
 * a weight is trained here exactly when NNTrainer gives it a gradient. */
static void check_weights(const char *c, const nnt_model *m, const manifest *mf) {
  assert_int_equal(m->n_w, mf->n_w);
  for (size_t i = 0; i < m->n_w; i++) {
    const mf_weight *w = &mf->w[i];
    char name[256];
    snprintf(name, sizeof name, "%s:%s", m->nodes[m->w_node[i]].layer->name, m->wspec[i].name);
    if (strcmp(name, w->name))
      fail_msg("%s: weight %zu is %s here, %s in NNTrainer's file", c, i, name, w->name);
    nnt_dim d = m->wspec[i].dim;
    if (d.b != w->d[0] || d.c != w->d[1] || d.h != w->d[2] || d.w != w->d[3])
      fail_msg("%s: %s is %u:%u:%u:%u here, %u:%u:%u:%u in NNTrainer", c, name, d.b, d.c, d.h,
               d.w, w->d[0], w->d[1], w->d[2], w->d[3]);
    assert_int_equal(nnt_dim_len(d), w->floats);
    int trained = m->wspec[i].trainable && m->nodes[m->w_node[i]].layer->trainable;
    if (trained != w->grad)
      fail_msg("%s: %s is %s here, %s in NNTrainer", c, name, trained ? "trained" : "frozen",
               w->grad ? "trained" : "frozen");
    const float *p = m->w[i].data;
    double s = 0;
    for (size_t j = 0; j < w->floats; j++)
      s += p[j];
    if (fabs(s - w->sum) > 1e-9 * fmax(1.0, fabs(w->sum)))
      fail_msg("%s: %s sums to %.17g here, %.17g in NNTrainer", c, name, s, w->sum);
    for (unsigned j = 0; j < w->n_first; j++)
      if (p[j] != w->first[j])
        fail_msg("%s: %s[%u] is %.9g here, %.9g in NNTrainer", c, name, j, p[j], w->first[j]);
  }
}

/* The counters NNTrainer wrote. A file saved after train() has the "adam"
 * tag but no moments; NNTrainer itself then gives up on the trailer and
 * keeps its counters at 0: either reading is accepted here, a counter taken
 * from the wrong bytes is not. */
static void check_counters(const char *c, const nnt_model *m, const manifest *mf) {
  if (mf->after_train && m->epoch_idx == 0 && m->iter == 0)
    return;
  if (m->epoch_idx != mf->epoch || m->iter != mf->iteration)
    fail_msg("%s: counters epoch %u iteration %u here, %u and %u in NNTrainer's file", c,
             m->epoch_idx, m->iter, mf->epoch, mf->iteration);
}

/* The file NNTrainer saved during training loads, with NNTrainer's values
 * and counters. */
static void test_load(void **state) {
  fixture *fx = *state;
  read_manifest(fx->c, &fx->mf);
  size_t n;
  fx->ref = read_bytes(fx->bin, &n);
  assert_int_equal(n, fx->mf.file_size);
  build(fx, NULL, 0);
  nnt_err e = {0};
  if (nnt_model_load_weights(fx->m, fx->bin, &e))
    fail_msg("%s: %s", fx->c, e.msg);
  check_weights(fx->c, fx->m, &fx->mf);
  check_counters(fx->c, fx->m, &fx->mf);
}

/* Saved again with its optimizer state, the model gives NNTrainer's bytes
 * (weights, then "adam" and the moments of the weights NNTrainer keeps them
 * for, then the counters); without the state, the weights part alone. */
static void test_resave(void **state) {
  fixture *fx = *state;
  const manifest *mf = &fx->mf;
  read_manifest(fx->c, &fx->mf);
  size_t n_ref, n;
  fx->ref = read_bytes(fx->bin, &n_ref);
  build(fx, NULL, 0);
  nnt_err e = {0};
  if (nnt_model_load_weights(fx->m, fx->bin, &e))
    fail_msg("%s: %s", fx->c, e.msg);
  fx->dir = tu_mkdtemp();
  char out[512];
  snprintf(out, sizeof out, "%s/w.bin", fx->dir);

  assert_int_equal(nnt_model_save_weights(fx->m, out, 0, &e), NNT_OK);
  fx->got = read_bytes(out, &n);
  size_t weights_end = mf->tag_offset >= 0 ? (size_t)mf->tag_offset : mf->counters_offset;
  assert_int_equal(n, weights_end);
  assert_memory_equal(fx->got, fx->ref, weights_end);
  free(fx->got);
  fx->got = NULL;

  assert_int_equal(nnt_model_save_weights(fx->m, out, 1, &e), NNT_OK);
  fx->got = read_bytes(out, &n);
  if (n != n_ref)
    fail_msg("%s: saved %zu bytes, NNTrainer's file has %zu (optimizer %s, %zu moments, "
             "counters at %zu)",
             fx->c, n, n_ref, mf->optimizer, mf->n_moments, mf->counters_offset);
  for (size_t i = 0; i < n; i++)
    if (fx->got[i] != fx->ref[i])
      fail_msg("%s: saved file differs from NNTrainer's at byte %zu (weights end at %zu, "
               "counters at %zu)",
               fx->c, i, weights_end, mf->counters_offset);
}

/* continue_train with save_path = NNTrainer's file loads it at initialize,
 * counters included, as NNTrainer does. */
static void test_continue(void **state) {
  fixture *fx = *state;
  read_manifest(fx->c, &fx->mf);
  const char *ovr[] = {"save_path=model.bin", "continue_train=true"};
  build(fx, ovr, 2);
  check_weights(fx->c, fx->m, &fx->mf);
  check_counters(fx->c, fx->m, &fx->mf);
}

/* Every case is loaded directly and through continue_train; the files
 * saved during training are also saved back. A file saved after train() is
 * not: saved here during training it would have the moments it lacks. */
#define T(c, kind)                                                             \
  {                                                                            \
    .name = c "_" #kind, .test_func = test_##kind, .setup_func = setup,        \
    .teardown_func = teardown, .initial_state = (void *)(uintptr_t)(c)         \
  }
#define ALL3(c) T(c, load), T(c, resave), T(c, continue)

int main(void) {
  const struct CMUnitTest t[] = {
      ALL3("fc_sgd"),
      ALL3("fc_adam"),
      ALL3("fc_adamw"),
      ALL3("fc_frozen_adam"),
      ALL3("conv_bn_sgd"),
      ALL3("conv_bn_adam"),
      ALL3("conv_bn_frozen_adam"),
      T("fc_adam_after_train", load),
      T("fc_adam_after_train", continue),
  };
  return cmocka_run_group_tests(t, NULL, NULL);
}
