/* Fuzz target: INI text through the whole life of a model. The input is an
 * INI file's text. When its first line is "#ov:" followed by up to 8
 * tab-separated "section.key=value" strings, those are the loader's
 * overrides (the line is a comment to the reader). A model that loads is
 * written back as an INI, which must load again; then it is bounded and
 * run: save_path cleared (nothing is written but in the private temporary
 * folder), epochs = 1, memory_budget = 256 KiB (a big model is refused
 * when planned, not trained), and every dataset replaced by synthetic data
 * of one batch. It is compiled, initialized, both plans checked by the
 * plan validator, trained one step, evaluated on the test set when it has
 * one, saved with its optimizer state and loaded back, which must give the
 * same weights. */
#include "fuzz.h"

#include <string.h>

#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

#define MAX_OV 8

/* Split the "#ov:" line into overrides (pointers into buf). */
static size_t overrides(const uint8_t *data, size_t size, char *buf, size_t cap,
                        const char **ov) {
  if (size < 4 || memcmp(data, "#ov:", 4))
    return 0;
  size_t n = 0;
  while (4 + n < size && n + 1 < cap && data[4 + n] != '\n' && data[4 + n] != '\r')
    n++;
  memcpy(buf, data + 4, n);
  buf[n] = '\0';
  size_t k = 0;
  for (char *s = buf; s && k < MAX_OV;) {
    char *tab = strchr(s, '\t');
    if (tab)
      *tab = '\0';
    if (*s)
      ov[k++] = s;
    s = tab ? tab + 1 : NULL;
  }
  return k;
}

/* A model that loaded is written back as an INI (nnt_model_save_ini), and
 * what it writes must load again, with the same layers. */
static void round_trip_ini(nnt_model *m) {
  char path[4200];
  nnt_fuzz_path(path, sizeof path, "model.ini");
  nnt_err e = {0};
  int rc = nnt_model_save_ini(m, path, NULL, &e);
  if (rc) {
    nnt_fuzz_check_err("nnt_model_save_ini", rc, &e);
    return;
  }
  nnt_model *back;
  if ((rc = nnt_model_create(&back, &e))) {
    nnt_fuzz_check_err("nnt_model_create", rc, &e);
    return;
  }
  nnt_model_set_base_dir(back, nnt_fuzz_tmpdir(), &e);
  if ((rc = nnt_ini_load(back, path, NULL, 0, &e)) && rc != NNT_ERR_NOMEM)
    nnt_fuzz_fail("the INI nnt_model_save_ini wrote does not load: %s", e.msg);
  if (!rc && nnt_model_layer_count(back) != nnt_model_layer_count(m))
    nnt_fuzz_fail("the INI nnt_model_save_ini wrote has %zu layers, the model %zu",
                  nnt_model_layer_count(back), nnt_model_layer_count(m));
  nnt_model_destroy(back);
}

/* Bound the work: nothing saved outside the temporary folder, one epoch,
 * a small budget, one batch of synthetic data per dataset. */
static int bound(nnt_model *m, nnt_err *e) {
  static const char *const props[][2] = {
      {"save_path", ""}, {"epochs", "1"}, {"memory_budget", "256K"}, {"continue_train", "false"}};
  int rc;
  for (size_t i = 0; i < NNT_ARRAY_LEN(props); i++)
    if ((rc = nnt_model_set_property(m, props[i][0], props[i][1], e)))
      return rc;
  for (int mode = 0; mode < 3; mode++) {
    if (mode != NNT_DS_TRAIN && !nnt_model_dataset(m, (nnt_ds_mode)mode))
      continue;
    nnt_dataset *ds;
    if ((rc = nnt_dataset_create_synthetic(nnt_model_batch_size(m), 0x5157u + (unsigned)mode,
                                           &ds, e)))
      return rc;
    if ((rc = nnt_model_set_dataset(m, (nnt_ds_mode)mode, ds, e))) {
      nnt_dataset_destroy(ds);
      return rc;
    }
  }
  return NNT_OK;
}

/* Plan a mode and check the plan: no two live tensors share bytes. */
static int plan_checked(nnt_model *m, nnt_mode mode, nnt_err *e) {
  int rc = nnt_model_plan(m, mode, e);
  if (rc)
    return rc;
  nnt_err v = {0};
  if (nnt_mgr_validate(&m->mgr[mode], &v))
    nnt_fuzz_fail("the %s plan is invalid: %s", nnt_mode_name(mode), v.msg);
  return NNT_OK;
}

static void progress(const nnt_progress *p, void *ud) {
  (void)ud;
  if (p->epoch < 1 || p->epoch > p->epochs || (p->batches && p->batch > p->batches))
    nnt_fuzz_fail("progress out of range: epoch %u/%u, batch %zu/%zu", p->epoch, p->epochs,
                  p->batch, p->batches);
}

/* Save with the optimizer state and load it back: the same weights. */
static void round_trip_weights(nnt_model *m) {
  char path[4200];
  nnt_fuzz_path(path, sizeof path, "model.bin");
  nnt_err e = {0};
  int rc = nnt_model_save_weights(m, path, 1, &e);
  if (rc) { /* weights that went to inf or NaN are refused */
    nnt_fuzz_check_err("nnt_model_save_weights", rc, &e);
    return;
  }
  size_t n = m->wpool_floats * sizeof(float);
  float *before = nnt_malloc(n ? n : 1);
  if (!before)
    return;
  if (n) /* a model without weights has no pool */
    memcpy(before, m->wpool, n);
  if ((rc = nnt_model_load_weights(m, path, &e)) && rc != NNT_ERR_NOMEM)
    nnt_fuzz_fail("the weights nnt_model_save_weights wrote do not load: %s", e.msg);
  if (!rc && n && memcmp(before, m->wpool, n))
    nnt_fuzz_fail("saving and loading the weights changed them");
  nnt_free(before);
}

static int run(nnt_model *m, nnt_err *e) {
  int rc;
  if ((rc = bound(m, e)) || (rc = nnt_model_compile(m, e)) || (rc = nnt_model_initialize(m, e)) ||
      (rc = plan_checked(m, NNT_MODE_TRAIN, e)) || (rc = nnt_model_train(m, progress, NULL, e)))
    return rc;
  if (nnt_model_dataset(m, NNT_DS_TEST)) {
    float loss, acc;
    if ((rc = plan_checked(m, NNT_MODE_INFER, e)) || (rc = plan_checked(m, NNT_MODE_EVAL, e)) ||
        (rc = nnt_model_evaluate(m, NNT_DS_TEST, &loss, &acc, e)))
      return rc;
    if (!(acc >= 0 && acc <= 1))
      nnt_fuzz_fail("test accuracy %g is not in [0, 1]", (double)acc);
  }
  round_trip_weights(m);
  return NNT_OK;
}

int nnt_fuzz_ini(const uint8_t *data, size_t size) {
  nnt_fuzz_init();
  char ovbuf[1024];
  const char *ov[MAX_OV];
  size_t n_ov = overrides(data, size, ovbuf, sizeof ovbuf, ov);
  nnt_model *m;
  nnt_err e = {0};
  int rc = nnt_model_create(&m, &e);
  if (rc)
    return nnt_fuzz_check_err("nnt_model_create", rc, &e), NNT_FUZZ_REFUSED;
  /* relative paths in the text resolve into the empty private folder */
  if ((rc = nnt_model_set_base_dir(m, nnt_fuzz_tmpdir(), &e)))
    nnt_fuzz_fail("nnt_model_set_base_dir: %s", e.msg);
  rc = nnt_ini_load_text(m, "fuzz.ini", (const char *)data, size, ov, n_ov, &e);
  if (rc) {
    nnt_fuzz_check_err("nnt_ini_load_text", rc, &e);
  } else {
    round_trip_ini(m);
    if ((rc = run(m, &e)))
      nnt_fuzz_check_err("training", rc, &e);
  }
  nnt_model_destroy(m);
  return rc ? NNT_FUZZ_REFUSED : NNT_FUZZ_ACCEPTED;
}
