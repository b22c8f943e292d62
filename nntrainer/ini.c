/* INI loader. Sections are read in file order: [Model], [Optimizer],
 * [LearningRateScheduler], [train_set]/[valid_set]/[test_set], the older
 * [Dataset], and every other section is a layer named after it. */
#include "nntrainer/ini.h"

#include <errno.h>
#include <iniparser/iniparser.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct ini_ctx {
  dictionary *d;
  const char *file;
  nnt_model *m;
  nnt_err *e;
} ini_ctx;

/* iniparser reports syntax errors through a callback without user data,
 * so the first message of a load is kept here (loads are not reentrant). */
static char parse_error[512];
static int silent_error(const char *fmt, ...) {
  if (!parse_error[0]) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(parse_error, sizeof parse_error, fmt, ap);
    va_end(ap);
    size_t n = strlen(parse_error);
    while (n && (parse_error[n - 1] == '\n' || parse_error[n - 1] == ' '))
      parse_error[--n] = '\0';
  }
  return 0;
}

/* "section:key" -> "key" */
static const char *bare_key(const char *full) {
  const char *c = strchr(full, ':');
  return c ? c + 1 : full;
}

static int fail_key(ini_ctx *c, const char *sec, const char *key, int rc) {
  if (rc == NNT_ERR_NOKEY) {
    c->e->code = NNT_ERR_INVAL;
    return nnt_err_set(c->e, NNT_ERR_INVAL, "%s: [%s] unknown key '%s'", c->file, sec, key);
  }
  /* messages from setters start with "key 'k': ..." or name the key */
  if (!strstr(c->e->msg, key))
    nnt_err_prefix(c->e, "%s: ", key);
  return nnt_err_prefix(c->e, "%s: [%s] ", c->file, sec);
}

typedef int (*setter)(void *obj, const char *key, const char *value, nnt_err *e);

/* Apply every key of a section but those in skip (NULL-terminated). */
static int apply_keys(ini_ctx *c, const char *sec, void *obj, setter set,
                      const char *const *skip) {
  int nk = iniparser_getsecnkeys(c->d, sec);
  if (nk <= 0)
    return NNT_OK;
  const char **keys = nnt_calloc((size_t)nk, sizeof *keys);
  if (!keys)
    return nnt_err_set(c->e, NNT_ERR_NOMEM, "%s: out of memory", c->file);
  iniparser_getseckeys(c->d, sec, keys);
  int rc = NNT_OK;
  for (int i = 0; i < nk && !rc; i++) {
    const char *key = bare_key(keys[i]);
    int skipped = 0;
    for (size_t s = 0; skip && skip[s]; s++)
      skipped |= nnt_streq(key, skip[s]);
    if (skipped)
      continue;
    const char *v = iniparser_getstring(c->d, keys[i], "");
    rc = set(obj, key, v, c->e);
    if (rc)
      rc = fail_key(c, sec, key, rc);
  }
  nnt_free(keys);
  return rc;
}

static int set_model(void *o, const char *k, const char *v, nnt_err *e) {
  return nnt_model_set_property(o, k, v, e);
}
static int set_layer(void *o, const char *k, const char *v, nnt_err *e) {
  return nnt_layer_set_property(o, k, v, e);
}
static int set_opt(void *o, const char *k, const char *v, nnt_err *e) {
  return nnt_optimizer_set_property(o, k, v, e);
}
static int set_lrs(void *o, const char *k, const char *v, nnt_err *e) {
  return nnt_lrs_set_property(o, k, v, e);
}
static int set_ds(void *o, const char *k, const char *v, nnt_err *e) {
  return nnt_dataset_set_property(o, k, v, e);
}

static const char *get(ini_ctx *c, const char *sec, const char *key) {
  char full[512];
  snprintf(full, sizeof full, "%s:%s", sec, key);
  return iniparser_getstring(c->d, full, NULL);
}

static int need(ini_ctx *c, const char *sec, const char *key, const char **out) {
  *out = get(c, sec, key);
  if (!*out || !(*out)[0])
    return nnt_err_set(c->e, NNT_ERR_INVAL, "%s: [%s] %s: required key is missing", c->file,
                       sec, key);
  return NNT_OK;
}

/* Join a relative path onto the model's base dir. */
static void resolve(ini_ctx *c, const char *v, char *out, size_t n) {
  if (v[0] == '/')
    snprintf(out, n, "%s", v);
  else
    snprintf(out, n, "%s/%s", nnt_model_base_dir(c->m), v);
}

static int load_optimizer(ini_ctx *c, const char *sec, nnt_optimizer **out) {
  const char *type;
  int rc = need(c, sec, "type", &type);
  if (rc)
    return rc;
  nnt_optimizer *o;
  if ((rc = nnt_optimizer_create(type, &o, c->e)))
    return nnt_err_prefix(c->e, "%s: [%s] type: ", c->file, sec);
  const char *skip[] = {"type", NULL};
  if ((rc = apply_keys(c, sec, o, set_opt, skip)) ||
      (rc = nnt_optimizer_validate(o, c->e) ? nnt_err_prefix(c->e, "%s: [%s] ", c->file, sec)
                                            : NNT_OK) ||
      (rc = nnt_model_set_optimizer(c->m, o, c->e))) {
    nnt_optimizer_destroy(o);
    return rc;
  }
  *out = o;
  return NNT_OK;
}

static int load_scheduler(ini_ctx *c, const char *sec, nnt_optimizer *opt) {
  if (!opt)
    return nnt_err_set(c->e, NNT_ERR_INVAL,
                       "%s: [%s] needs an [Optimizer] section before it", c->file, sec);
  const char *type;
  int rc = need(c, sec, "type", &type);
  if (rc)
    return rc;
  nnt_lr_scheduler *s;
  if ((rc = nnt_lrs_create(type, &s, c->e)))
    return nnt_err_prefix(c->e, "%s: [%s] type: ", c->file, sec);
  const char *skip[] = {"type", NULL};
  if ((rc = apply_keys(c, sec, s, set_lrs, skip)) ||
      (rc = nnt_optimizer_set_lr_scheduler(opt, s, c->e))) {
    nnt_lrs_destroy(s);
    if (rc && !strstr(c->e->msg, c->file))
      nnt_err_prefix(c->e, "%s: [%s] ", c->file, sec);
    return rc;
  }
  return NNT_OK;
}

static int load_dataset(ini_ctx *c, const char *sec, nnt_ds_mode mode) {
  const char *type = get(c, sec, "type");
  char p1[4096], p2[4096];
  nnt_dataset *ds = NULL;
  int rc;
  const char *skip_file[] = {"type", "path", NULL};
  const char *skip_idx[] = {"type", "images", "labels", NULL};
  const char *skip_syn[] = {"type", "samples", NULL};
  const char *const *skip;
  if (!type || nnt_streq(type, "file")) {
    const char *path;
    if ((rc = need(c, sec, "path", &path)))
      return rc;
    resolve(c, path, p1, sizeof p1);
    if ((rc = nnt_dataset_create_file(p1, &ds, c->e)))
      return nnt_err_prefix(c->e, "%s: [%s] path: ", c->file, sec);
    skip = skip_file;
  } else if (nnt_streq(type, "idx")) {
    const char *img, *lab;
    if ((rc = need(c, sec, "images", &img)) || (rc = need(c, sec, "labels", &lab)))
      return rc;
    resolve(c, img, p1, sizeof p1);
    resolve(c, lab, p2, sizeof p2);
    if ((rc = nnt_dataset_create_idx(p1, p2, &ds, c->e)))
      return nnt_err_prefix(c->e, "%s: [%s] ", c->file, sec);
    skip = skip_idx;
  } else if (nnt_streq(type, "synthetic")) {
    unsigned samples = 1024;
    const char *s = get(c, sec, "samples");
    if (s && (rc = nnt_parse_uint("samples", s, &samples, c->e)))
      return nnt_err_prefix(c->e, "%s: [%s] ", c->file, sec);
    if ((rc = nnt_dataset_create_synthetic(samples, 0x5157ULL + mode, &ds, c->e)))
      return nnt_err_prefix(c->e, "%s: [%s] samples: ", c->file, sec);
    skip = skip_syn;
  } else {
    return nnt_err_set(c->e, NNT_ERR_INVAL,
                       "%s: [%s] type: unknown dataset type '%s' (file, idx, synthetic)",
                       c->file, sec, type);
  }
  if ((rc = apply_keys(c, sec, ds, set_ds, skip)) ||
      (rc = nnt_model_set_dataset(c->m, mode, ds, c->e))) {
    nnt_dataset_destroy(ds);
    return rc;
  }
  return NNT_OK;
}

/* The older [Dataset] section: TrainData, ValidData, TestData, BufferSize. */
static int load_legacy_dataset(ini_ctx *c, const char *sec) {
  static const char *const keys[3] = {"traindata", "validdata", "testdata"};
  const char *buf = get(c, sec, "buffersize");
  int nk = iniparser_getsecnkeys(c->d, sec);
  const char **all = nnt_calloc(nk > 0 ? (size_t)nk : 1, sizeof *all);
  if (!all)
    return nnt_err_set(c->e, NNT_ERR_NOMEM, "%s: out of memory", c->file);
  iniparser_getseckeys(c->d, sec, all);
  int rc = NNT_OK;
  for (int i = 0; i < nk && !rc; i++) {
    const char *k = bare_key(all[i]);
    if (!nnt_streq(k, "traindata") && !nnt_streq(k, "validdata") && !nnt_streq(k, "testdata") &&
        !nnt_streq(k, "buffersize") && !nnt_streq(k, "labeldata"))
      rc = nnt_err_set(c->e, NNT_ERR_INVAL, "%s: [%s] unknown key '%s'", c->file, sec, k);
  }
  nnt_free(all);
  for (int mode = 0; mode < 3 && !rc; mode++) {
    const char *path = get(c, sec, keys[mode]);
    if (!path || !path[0])
      continue;
    char p[4096];
    resolve(c, path, p, sizeof p);
    nnt_dataset *ds;
    if ((rc = nnt_dataset_create_file(p, &ds, c->e)))
      return nnt_err_prefix(c->e, "%s: [%s] %s: ", c->file, sec, keys[mode]);
    if (buf && (rc = nnt_dataset_set_property(ds, "buffer_size", buf, c->e))) {
      nnt_dataset_destroy(ds);
      return nnt_err_prefix(c->e, "%s: [%s] buffersize: ", c->file, sec);
    }
    if ((rc = nnt_model_set_dataset(c->m, (nnt_ds_mode)mode, ds, c->e)))
      nnt_dataset_destroy(ds);
  }
  return rc;
}

static int load_layer(ini_ctx *c, const char *sec) {
  const char *type;
  int rc = need(c, sec, "type", &type);
  if (rc)
    return rc;
  if (nnt_streq(type, "backbone"))
    return nnt_err_set(c->e, NNT_ERR_NOT_SUPPORTED, "%s: [%s] type: backbone sections are not "
                       "supported", c->file, sec);
  nnt_layer *l;
  if ((rc = nnt_layer_create(type, &l, c->e)))
    return nnt_err_prefix(c->e, "%s: [%s] type: ", c->file, sec);
  if ((rc = nnt_layer_set_property(l, "name", sec, c->e)))
    rc = nnt_err_prefix(c->e, "%s: [%s] ", c->file, sec);
  const char *skip[] = {"type", NULL};
  if (!rc)
    rc = apply_keys(c, sec, l, set_layer, skip);
  if (!rc && (rc = nnt_model_add_layer(c->m, l, c->e)))
    nnt_err_prefix(c->e, "%s: [%s] ", c->file, sec);
  if (rc)
    nnt_layer_destroy(l);
  return rc;
}

/* Apply overrides to the dictionary. */
static int apply_overrides(ini_ctx *c, const char *const *ov, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const char *eq = strchr(ov[i], '=');
    if (!eq || eq == ov[i])
      return nnt_err_set(c->e, NNT_ERR_INVAL, "override '%s': expected Section.key=value", ov[i]);
    char lhs[512];
    size_t len = (size_t)(eq - ov[i]);
    if (len >= sizeof lhs)
      return nnt_err_set(c->e, NNT_ERR_INVAL, "override '%s': too long", ov[i]);
    memcpy(lhs, ov[i], len);
    lhs[len] = '\0';
    char sec[512], key[512], full[1100];
    const char *dot = strrchr(lhs, '.');
    if (dot) {
      snprintf(sec, sizeof sec, "%.*s", (int)(dot - lhs), lhs);
      snprintf(key, sizeof key, "%s", dot + 1);
    } else {
      snprintf(sec, sizeof sec, "model");
      snprintf(key, sizeof key, "%s", lhs);
    }
    for (char *p = sec; *p; p++)
      *p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
    for (char *p = key; *p; p++)
      *p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
    if (!iniparser_find_entry(c->d, sec))
      return nnt_err_set(c->e, NNT_ERR_INVAL, "override '%s': %s has no section [%s]", ov[i],
                         c->file, sec);
    snprintf(full, sizeof full, "%s:%s", sec, key);
    if (iniparser_set(c->d, full, eq + 1))
      return nnt_err_set(c->e, NNT_ERR_NOMEM, "override '%s': out of memory", ov[i]);
  }
  return NNT_OK;
}

int nnt_ini_load(nnt_model *m, const char *path, const char *const *overrides,
                 size_t n_overrides, nnt_err *e) {
  if (!m || !path)
    return nnt_err_set(e, NNT_ERR_INVAL, "ini: NULL model or path");
  if (access(path, R_OK))
    return nnt_err_set(e, NNT_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
  parse_error[0] = '\0';
  iniparser_set_error_callback(silent_error);
  dictionary *d = iniparser_load(path);
  iniparser_set_error_callback(NULL);
  if (!d || parse_error[0]) {
    if (d)
      iniparser_freedict(d);
    return nnt_err_set(e, NNT_ERR_INVAL, "%s: malformed INI: %s", path,
                       parse_error[0] ? parse_error : "cannot parse");
  }
  nnt_err local;
  ini_ctx c = {d, path, m, e ? e : &local};
  int rc = apply_overrides(&c, overrides, n_overrides);
  nnt_optimizer *opt = NULL;
  int nsec = iniparser_getnsec(d);
  /* [Model] first, so batch and loss are known; then the rest in file order */
  if (!rc && iniparser_find_entry(d, "model"))
    rc = apply_keys(&c, "model", m, set_model, NULL);
  if (!rc && iniparser_find_entry(d, "optimizer"))
    rc = load_optimizer(&c, "optimizer", &opt);
  for (int i = 0; i < nsec && !rc; i++) {
    const char *sec = iniparser_getsecname(d, i);
    if (nnt_streq(sec, "model") || nnt_streq(sec, "optimizer"))
      continue;
    if (nnt_streq(sec, "learningratescheduler"))
      rc = load_scheduler(&c, sec, opt);
    else if (nnt_streq(sec, "train_set"))
      rc = load_dataset(&c, sec, NNT_DS_TRAIN);
    else if (nnt_streq(sec, "valid_set"))
      rc = load_dataset(&c, sec, NNT_DS_VALID);
    else if (nnt_streq(sec, "test_set"))
      rc = load_dataset(&c, sec, NNT_DS_TEST);
    else if (nnt_streq(sec, "dataset"))
      rc = load_legacy_dataset(&c, sec);
    else
      rc = load_layer(&c, sec);
  }
  iniparser_freedict(d);
  return rc;
}
