/* INI loader: reads NNTrainer's format with the project's reader
 * (ini_read.c, iniparser 4.1's syntax, made strict) and builds the model
 * through the builder calls of model.h, layer.h, optimizer.h and
 * dataset.h, the same calls the C API makes. Order: [Model] (with the older
 * optimizer keys), then [Optimizer], then every other section in file order:
 * [LearningRateScheduler], [train_set]/[valid_set]/[test_set], the older
 * [Dataset], and any other section as a layer named after it. docs/ini.md
 * lists every key and where nntrainer differs from NNTrainer. */
#include "nntrainer/ini.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "nntrainer/ini_read.h"
#include "nntrainer/unroll.h"

#define INI_NAME 256  /* longest section or key name an override may give */
#define SYNTHETIC_SAMPLES 1024u

typedef const nnt_ini_section sec_t;

typedef struct ini_ctx {
  nnt_ini *ini;
  const char *file;        /* the path as the caller gave it */
  nnt_model *m;
  nnt_err *e;
  const char *const *ov;   /* the overrides, to name them in errors */
  size_t n_ov;
  nnt_optimizer *opt;      /* the model's optimizer once set (borrowed) */
  int opt_in_model;        /* it came from [Model] optimizer = (the older form) */
  const char *ds_from[3];  /* the section that gave each dataset mode */
} ini_ctx;

/* ---- overrides and messages -------------------------------------------- */

static void copy_lower(char *dst, const char *src, size_t n) {
  for (size_t i = 0; i < n; i++)
    dst[i] = (char)tolower((unsigned char)src[i]);
  dst[n] = '\0';
}

/* Split "section.key=value" (or "key=value": [Model]) into a lowercase
 * section and key (each under INI_NAME) and the value after '='.
 * @return 0, or -1 when the override is malformed. */
static int split_override(const char *ov, char *sec, char *key, const char **value) {
  const char *eq = strchr(ov, '=');
  if (!eq)
    return -1;
  const char *b = ov, *end = eq, *dot = NULL;
  while (b < end && isspace((unsigned char)*b))
    b++;
  while (end > b && isspace((unsigned char)end[-1]))
    end--;
  for (const char *p = b; p < end; p++)
    if (*p == '.')
      dot = p;
  const char *kb = dot ? dot + 1 : b;
  size_t sl = dot ? (size_t)(dot - b) : 0, kl = (size_t)(end - kb);
  if (!kl || kl >= INI_NAME || (dot && (!sl || sl >= INI_NAME)))
    return -1;
  if (dot)
    copy_lower(sec, b, sl);
  else
    strcpy(sec, "model");
  copy_lower(key, kb, kl);
  *value = eq + 1;
  return 0;
}

/* The last override that set [sec] key, or NULL. */
static const char *override_of(const ini_ctx *c, const char *sec, const char *key) {
  char s[INI_NAME], k[INI_NAME];
  const char *v;
  for (size_t i = c->n_ov; sec && key && i-- > 0;)
    if (c->ov[i] && !split_override(c->ov[i], s, k, &v) && nnt_streq(s, sec) &&
        nnt_streq(k, key))
      return c->ov[i];
  return NULL;
}

/* Record "<file>: line N: [sec] key: what" (sec and key left out when NULL;
 * key not shown unless show_key), naming the override that set [sec] key, if
 * any. The line is the key's when the file gives it, else the section's. */
static int vfail(ini_ctx *c, int code, sec_t *s, const char *key, int show_key,
                 const char *fmt, va_list ap) {
  char what[NNT_ERR_MSG_MAX], from[300] = "", at[32] = "";
  vsnprintf(what, sizeof what, fmt, ap);
  const char *sec = s ? s->name : NULL, *ov = override_of(c, sec, key);
  if (ov)
    snprintf(from, sizeof from, " (from override '%.256s')", ov);
  const nnt_ini_key *k = nnt_ini_find_key(c->ini, s, key);
  unsigned line = k ? k->line : s ? s->line : 0;
  if (line)
    snprintf(at, sizeof at, "line %u: ", line);
  return nnt_err_set(c->e, code, "%s: %s%s%s%s%s%s%s%s", c->file, at, sec ? "[" : "",
                     sec ? sec : "", sec ? "] " : "", show_key && key ? key : "",
                     show_key && key ? ": " : "", what, from);
}

/* "<file>: line N: [sec] key: what" */
static int fail_key(ini_ctx *c, int code, sec_t *sec, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail_key(ini_ctx *c, int code, sec_t *sec, const char *key, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = vfail(c, code, sec, key, 1, fmt, ap);
  va_end(ap);
  return rc;
}

/* "<file>: line N: [sec] what", where what is about key (for the line and
 * the override note). */
static int fail_sec(ini_ctx *c, int code, sec_t *sec, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail_sec(ini_ctx *c, int code, sec_t *sec, const char *key, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = vfail(c, code, sec, key, 0, fmt, ap);
  va_end(ap);
  return rc;
}

/* Rewrite the message a builder left in c->e for [sec] key (key NULL: the
 * section as a whole) into the loader's form. Builders write "key 'k': what"
 * or "k: what"; unknown keys (NNT_ERR_NOKEY) become NNT_ERR_INVAL. */
static int fail_builder(ini_ctx *c, int rc, sec_t *sec, const char *key) {
  char msg[NNT_ERR_MSG_MAX], named[INI_NAME] = "";
  const char *m = c->e->msg;
  if (!strncmp(m, "dataset: ", 9))
    m += 9;
  snprintf(msg, sizeof msg, "%s", m);
  if (key && (rc == NNT_ERR_NOKEY || !strncmp(msg, "unknown key", 11))) {
    if (strncmp(msg, "unknown key", 11))
      snprintf(msg, sizeof msg, "unknown key '%s'", key);
    return fail_sec(c, NNT_ERR_INVAL, sec, key, "%s", msg);
  }
  if (rc == NNT_ERR_NOKEY)
    rc = NNT_ERR_INVAL;
  const char *rest = msg;
  if (!strncmp(msg, "key '", 5)) {
    const char *q = strchr(msg + 5, '\'');
    size_t n = q ? (size_t)(q - msg - 5) : 0;
    if (q && q[1] == ':' && q[2] == ' ' && n && n < sizeof named) {
      memcpy(named, msg + 5, n);
      named[n] = '\0';
      rest = q + 3;
    }
  }
  /* the INI's key name wins: [Dataset] BufferSize sets buffer_size */
  const char *k = key ? key : named[0] ? named : NULL;
  if (!k)
    return fail_sec(c, rc, sec, NULL, "%s", rest);
  size_t kl = strlen(k);
  if (!named[0] && !strncasecmp(rest, k, kl) && rest[kl] == ':' && rest[kl + 1] == ' ')
    rest += kl + 2;
  return fail_key(c, rc, sec, k, "%s", rest);
}

/* ---- reading sections -------------------------------------------------- */

static const char *get(const ini_ctx *c, sec_t *sec, const char *key) {
  return nnt_ini_get(c->ini, sec, key);
}

/* A key that must be present and not empty. */
static int need(ini_ctx *c, sec_t *sec, const char *key, const char **out) {
  *out = get(c, sec, key);
  if (!*out || !(*out)[0])
    return fail_key(c, NNT_ERR_INVAL, sec, key, "required key is missing");
  return NNT_OK;
}

static int in_list(const char *key, const char *const *list) {
  for (size_t i = 0; list && list[i]; i++)
    if (nnt_streq(key, list[i]))
      return 1;
  return 0;
}

typedef int (*setter_fn)(void *obj, const char *key, const char *value, nnt_err *e);

/* Give every key of [sec] but those in skip to set(obj, ...). */
static int apply_keys(ini_ctx *c, sec_t *sec, void *obj, setter_fn set,
                      const char *const *skip) {
  int rc = NNT_OK;
  for (size_t i = 0; i < sec->n_keys && !rc; i++) {
    const nnt_ini_key *k = nnt_ini_key_at(c->ini, sec, i);
    if (in_list(k->name, skip))
      continue;
    if ((rc = set(obj, k->name, k->value, c->e)))
      rc = fail_builder(c, rc, sec, k->name);
  }
  return rc;
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

/* A relative path joined onto the model's base dir; the caller frees it. */
static char *resolve(ini_ctx *c, sec_t *sec, const char *key, const char *v) {
  const char *base = nnt_model_base_dir(c->m);
  size_t n = strlen(base) + strlen(v) + 2;
  char *p = nnt_malloc(n);
  if (!p)
    fail_key(c, NNT_ERR_NOMEM, sec, key, "out of memory");
  else if (v[0] == '/')
    snprintf(p, n, "%s", v);
  else
    snprintf(p, n, "%s/%s", base, v);
  return p;
}

/* ---- [Model] and [Optimizer] ------------------------------------------- */

/* Older INIs give the optimizer in [Model]; NNTrainer forwards these keys to
 * it when [Model] sets `optimizer`. */
static const char *const legacy_opt_keys[] = {"learning_rate", "decay_rate", "decay_steps",
                                              "beta1", "beta2", "epsilon", NULL};

/* NNTrainer's [Model] keys nntrainer does not implement, and the one value of
 * each that means what nntrainer does anyway (NULL: none). */
static const struct {
  const char *key, *accepted;
} unsupported_model_keys[] = {
    {"memory_swap", "false"},
    {"memory_swap_path", NULL},
    {"memory_swap_lookahead", NULL},
    {"save_best_path", NULL},
    {"tensor_format", "NCHW"},
    {"tensor_type", "FP32-FP32"},
    {"model_tensor_type", "FP32-FP32"},
    {"loss_scale", "1"},
    {"input_layers", NULL},
    {"label_layers", NULL},
};

static int check_unsupported(ini_ctx *c, sec_t *model, const char *key, const char *v,
                             int *handled) {
  for (size_t i = 0; i < NNT_ARRAY_LEN(unsupported_model_keys); i++) {
    if (!nnt_streq(key, unsupported_model_keys[i].key))
      continue;
    *handled = 1;
    const char *acc = unsupported_model_keys[i].accepted;
    int b;
    float f;
    int ok = acc && (nnt_streq(v, acc) ||
                     (!strcmp(key, "memory_swap") && !nnt_parse_bool(key, v, &b, NULL) && !b) ||
                     (!strcmp(key, "loss_scale") && !nnt_parse_float(key, v, &f, NULL) &&
                      f == 1.0f) ||
                     (strstr(key, "tensor_type") && nnt_streq(v, "FP32")));
    if (ok)
      return NNT_OK;
    if (acc)
      return fail_key(c, NNT_ERR_NOT_SUPPORTED, model, key,
                      "NNTrainer's key is supported only with the value '%s', not '%s'", acc, v);
    return fail_key(c, NNT_ERR_NOT_SUPPORTED, model, key,
                    "NNTrainer's key is not supported by nntrainer");
  }
  return NNT_OK;
}

static int load_model_section(ini_ctx *c, sec_t *model) {
  const char *opt_type = get(c, model, "optimizer");
  int rc = NNT_OK;
  for (size_t i = 0; i < model->n_keys && !rc; i++) {
    const nnt_ini_key *k = nnt_ini_key_at(c->ini, model, i);
    const char *key = k->name, *v = k->value;
    int handled = 0;
    if (nnt_streq(key, "optimizer"))
      continue;
    if (in_list(key, legacy_opt_keys)) {
      if (!opt_type)
        rc = fail_key(c, NNT_ERR_INVAL, model, key,
                      "an optimizer key, read here only together with [Model] optimizer "
                      "(NNTrainer ignores it otherwise); put it in [Optimizer]");
      continue;
    }
    if ((rc = check_unsupported(c, model, key, v, &handled)) || handled)
      continue;
    if ((rc = nnt_model_set_property(c->m, key, v, c->e)))
      rc = fail_builder(c, rc, model, key);
  }
  if (rc || !opt_type)
    return rc;
  /* the older form: [Model] optimizer = adam, learning_rate = ... */
  if (nnt_ini_find_section(c->ini, "optimizer"))
    return fail_key(c, NNT_ERR_INVAL, model, "optimizer",
                    "the optimizer is given twice, here and in [Optimizer]");
  nnt_optimizer *o;
  if ((rc = nnt_optimizer_create(opt_type, &o, c->e)))
    return fail_builder(c, rc, model, "optimizer");
  for (size_t i = 0; legacy_opt_keys[i] && !rc; i++) {
    const char *v = get(c, model, legacy_opt_keys[i]);
    if (v && (rc = nnt_optimizer_set_property(o, legacy_opt_keys[i], v, c->e)))
      rc = fail_builder(c, rc, model, legacy_opt_keys[i]);
  }
  if (!rc && (rc = nnt_optimizer_validate(o, c->e)))
    rc = fail_builder(c, rc, model, NULL);
  if (!rc && (rc = nnt_model_set_optimizer(c->m, o, c->e)))
    rc = fail_builder(c, rc, model, "optimizer");
  if (rc)
    nnt_optimizer_destroy(o);
  else
    c->opt = o, c->opt_in_model = 1;
  return rc;
}

static int load_optimizer(ini_ctx *c, sec_t *sec) {
  /* NNTrainer defaults a missing type to adam */
  const char *type = get(c, sec, "type");
  if (!type || !type[0])
    type = "adam";
  nnt_optimizer *o;
  int rc = nnt_optimizer_create(type, &o, c->e);
  if (rc)
    return fail_builder(c, rc, sec, "type");
  static const char *const skip[] = {"type", NULL};
  if (!(rc = apply_keys(c, sec, o, set_opt, skip)) && (rc = nnt_optimizer_validate(o, c->e)))
    rc = fail_builder(c, rc, sec, NULL);
  if (!rc && (rc = nnt_model_set_optimizer(c->m, o, c->e)))
    rc = fail_builder(c, rc, sec, NULL);
  if (rc) {
    nnt_optimizer_destroy(o);
    return rc;
  }
  c->opt = o;
  return NNT_OK;
}

static int load_scheduler(ini_ctx *c, sec_t *sec) {
  if (!c->opt)
    return fail_sec(c, NNT_ERR_INVAL, sec, NULL,
                    "needs an optimizer: add an [Optimizer] section");
  const char *type;
  int rc = need(c, sec, "type", &type);
  if (rc)
    return rc;
  if (!isnan(c->opt->decay_rate) || c->opt->decay_steps)
    return fail_sec(c, NNT_ERR_INVAL, sec, NULL,
                    "cannot be combined with the optimizer's decay_rate/decay_steps: use one");
  if (c->opt_in_model)
    nnt_log(NNT_LOG_NOTICE,
            "%s: [%s] applies to the optimizer given in [Model]; NNTrainer ignores this "
            "section unless the optimizer has its own [Optimizer] section",
            c->file, sec->name);
  nnt_lr_scheduler *s;
  if ((rc = nnt_lrs_create(type, &s, c->e)))
    return fail_builder(c, rc, sec, "type");
  static const char *const skip[] = {"type", NULL};
  if (!(rc = apply_keys(c, sec, s, set_lrs, skip)) && (rc = nnt_lrs_validate(s, c->e)))
    rc = fail_builder(c, rc, sec, NULL);
  if (!rc && (rc = nnt_optimizer_set_lr_scheduler(c->opt, s, c->e)))
    rc = fail_builder(c, rc, sec, NULL);
  if (rc)
    nnt_lrs_destroy(s);
  return rc;
}

/* ---- datasets ---------------------------------------------------------- */

static const char *const mode_sec[3] = {"train_set", "valid_set", "test_set"};

/* Give ds to the model for mode; frees it on failure. */
static int put_dataset(ini_ctx *c, sec_t *sec, const char *key, nnt_ds_mode mode,
                       nnt_dataset *ds) {
  int rc;
  if (c->ds_from[mode])
    rc = fail_key(c, NNT_ERR_INVAL, sec, key, "the %s is given twice, here and in [%s]",
                  mode_sec[mode], c->ds_from[mode]);
  else if ((rc = nnt_model_set_dataset(c->m, mode, ds, c->e)))
    rc = fail_builder(c, rc, sec, NULL);
  if (rc) {
    nnt_dataset_destroy(ds);
    return rc;
  }
  c->ds_from[mode] = sec->name;
  return NNT_OK;
}

static int load_dataset(ini_ctx *c, sec_t *sec, nnt_ds_mode mode) {
  static const char *const skip_file[] = {"type", "path", NULL};
  static const char *const skip_idx[] = {"type", "images", "labels", NULL};
  static const char *const skip_syn[] = {"type", "samples", "seed", NULL};
  const char *type, *a, *b;
  const char *const *skip;
  nnt_dataset *ds = NULL;
  char *p1 = NULL, *p2 = NULL;
  int rc = need(c, sec, "type", &type);
  if (rc)
    return rc;
  if (nnt_streq(type, "file")) {
    skip = skip_file;
    if (!(rc = need(c, sec, "path", &a)) && !(p1 = resolve(c, sec, "path", a)))
      rc = c->e->code;
    if (!rc && (rc = nnt_dataset_create_file(p1, &ds, c->e)))
      rc = fail_builder(c, rc, sec, "path");
    if (!rc && a[0] != '/' && strcmp(nnt_model_base_dir(c->m), "."))
      nnt_log(NNT_LOG_NOTICE,
              "%s: [%s] path: '%s' is read as '%s', relative to the INI file's folder; "
              "NNTrainer reads it relative to the working directory",
              c->file, sec->name, a, p1);
  } else if (nnt_streq(type, "idx")) {
    skip = skip_idx;
    if (!(rc = need(c, sec, "images", &a)) && !(rc = need(c, sec, "labels", &b)) &&
        (!(p1 = resolve(c, sec, "images", a)) || !(p2 = resolve(c, sec, "labels", b))))
      rc = c->e->code;
    if (!rc && (rc = nnt_dataset_create_idx(p1, p2, &ds, c->e)))
      rc = fail_builder(c, rc, sec, NULL);
  } else if (nnt_streq(type, "synthetic")) {
    skip = skip_syn;
    unsigned samples = SYNTHETIC_SAMPLES, seed = 0x5157u + (unsigned)mode;
    if ((a = get(c, sec, "samples")) && (rc = nnt_parse_uint("samples", a, &samples, c->e)))
      rc = fail_builder(c, rc, sec, "samples");
    if (!rc && (a = get(c, sec, "seed")) && (rc = nnt_parse_uint("seed", a, &seed, c->e)))
      rc = fail_builder(c, rc, sec, "seed");
    if (!rc && (rc = nnt_dataset_create_synthetic(samples, seed, &ds, c->e)))
      rc = fail_builder(c, rc, sec, "samples");
  } else {
    return fail_key(c, NNT_ERR_INVAL, sec, "type",
                    "unknown dataset type '%s' (file, idx, synthetic)", type);
  }
  nnt_free(p1);
  nnt_free(p2);
  if (!rc)
    rc = apply_keys(c, sec, ds, set_ds, skip);
  if (rc) {
    nnt_dataset_destroy(ds);
    return rc;
  }
  return put_dataset(c, sec, NULL, mode, ds);
}

/* The older [Dataset]: TrainData (required, as in NNTrainer), ValidData,
 * TestData (raw files), BufferSize (or buffer_size); LabelData is ignored,
 * as NNTrainer does. */
static int load_legacy_dataset(ini_ctx *c, sec_t *sec) {
  static const char *const data_keys[3] = {"traindata", "validdata", "testdata"};
  static const char *const known[] = {"traindata", "validdata", "testdata", "labeldata",
                                      "buffersize", "buffer_size", NULL};
  int rc = NNT_OK;
  for (size_t i = 0; i < sec->n_keys && !rc; i++) {
    const char *k = nnt_ini_key_at(c->ini, sec, i)->name;
    if (!in_list(k, known))
      rc = fail_sec(c, NNT_ERR_INVAL, sec, k, "unknown key '%s'", k);
  }
  const char *buf = get(c, sec, "buffersize"), *train;
  const char *buf_key = buf ? "buffersize" : "buffer_size";
  if (!buf)
    buf = get(c, sec, "buffer_size");
  if (rc || (rc = need(c, sec, "traindata", &train)))
    return rc;
  for (int mode = 0; mode < 3 && !rc; mode++) {
    const char *path = get(c, sec, data_keys[mode]);
    if (!path || !path[0])
      continue;
    nnt_dataset *ds = NULL;
    char *p = resolve(c, sec, data_keys[mode], path);
    if (!p)
      return c->e->code;
    if ((rc = nnt_dataset_create_file(p, &ds, c->e)))
      rc = fail_builder(c, rc, sec, data_keys[mode]);
    else if (buf && (rc = nnt_dataset_set_property(ds, "buffer_size", buf, c->e)))
      rc = fail_builder(c, rc, sec, buf_key);
    nnt_free(p);
    if (rc)
      nnt_dataset_destroy(ds);
    else
      rc = put_dataset(c, sec, data_keys[mode], (nnt_ds_mode)mode, ds);
  }
  return rc;
}

/* ---- layers ------------------------------------------------------------ */

static int load_layer(ini_ctx *c, sec_t *sec) {
  const char *type, *name = get(c, sec, "name");
  if (get(c, sec, "backbone"))
    return fail_key(c, NNT_ERR_NOT_SUPPORTED, sec, "backbone",
                    "backbone sections are not supported");
  int rc = need(c, sec, "type", &type);
  if (rc)
    return rc;
  /* NNTrainer names the layer after its section whatever `name` says */
  if (name && !nnt_streq(name, sec->name))
    return fail_key(c, NNT_ERR_INVAL, sec, "name",
                    "'%s' differs from the section name, which is the layer's name", name);
  nnt_layer *l;
  if ((rc = nnt_layer_create(type, &l, c->e)))
    return fail_builder(c, rc, sec, "type");
  static const char *const skip[] = {"type", "name", NULL};
  if ((rc = nnt_layer_set_property(l, "name", sec->name, c->e)))
    rc = fail_builder(c, rc, sec, "name");
  if (!rc)
    rc = apply_keys(c, sec, l, set_layer, skip);
  if (!rc && (rc = nnt_model_add_layer(c->m, l, c->e)))
    rc = fail_builder(c, rc, sec, NULL);
  if (rc)
    nnt_layer_destroy(l);
  return rc;
}

/* ---- the file ---------------------------------------------------------- */

/* An override replaces the file's value of its key or adds the key: the
 * value is taken as given (trimmed; no quotes or comments). */
static int apply_overrides(ini_ctx *c) {
  for (size_t i = 0; i < c->n_ov; i++) {
    char sec[INI_NAME], key[INI_NAME];
    const char *v;
    if (!c->ov[i] || split_override(c->ov[i], sec, key, &v))
      return nnt_err_set(c->e, NNT_ERR_INVAL, "override '%s': expected section.key=value or "
                         "key=value", c->ov[i] ? c->ov[i] : "(null)");
    if (!nnt_ini_find_section(c->ini, sec))
      return nnt_err_set(c->e, NNT_ERR_INVAL, "override '%s': %s has no section [%s]", c->ov[i],
                         c->file, sec);
    while (isspace((unsigned char)*v))
      v++;
    size_t n = strlen(v);
    while (n && isspace((unsigned char)v[n - 1]))
      n--;
    if (nnt_ini_set(c->ini, sec, key, v, n, NULL))
      return nnt_err_set(c->e, NNT_ERR_NOMEM, "%s: override '%s': out of memory", c->file,
                         c->ov[i]);
  }
  return NNT_OK;
}

static int load_sections(ini_ctx *c) {
  int rc;
  if ((rc = apply_overrides(c)))
    return rc;
  sec_t *model = nnt_ini_find_section(c->ini, "model"), *opt;
  if (!model)
    return fail_sec(c, NNT_ERR_INVAL, NULL, NULL, "no [Model] section (NNTrainer requires one)");
  if ((rc = load_model_section(c, model)))
    return rc;
  if ((opt = nnt_ini_find_section(c->ini, "optimizer")) && (rc = load_optimizer(c, opt)))
    return rc;
  size_t nsec = nnt_ini_section_count(c->ini), layers = 0;
  for (size_t i = 0; i < nsec && !rc; i++) {
    sec_t *sec = nnt_ini_section_at(c->ini, i);
    if (sec == model || sec == opt)
      continue;
    if (nnt_streq(sec->name, "learningratescheduler"))
      rc = load_scheduler(c, sec);
    else if (nnt_streq(sec->name, "train_set"))
      rc = load_dataset(c, sec, NNT_DS_TRAIN);
    else if (nnt_streq(sec->name, "valid_set"))
      rc = load_dataset(c, sec, NNT_DS_VALID);
    else if (nnt_streq(sec->name, "test_set"))
      rc = load_dataset(c, sec, NNT_DS_TEST);
    else if (nnt_streq(sec->name, "dataset"))
      rc = load_legacy_dataset(c, sec);
    else if (!(rc = load_layer(c, sec)))
      layers++;
  }
  if (!rc && !layers)
    rc = fail_sec(c, NNT_ERR_INVAL, NULL, NULL, "no layer sections");
  const char *lname, *key;
  if (!rc && (rc = nnt_unroll_check_model(c->m, &lname, &key, c->e))) {
    char msg[NNT_ERR_MSG_MAX];
    snprintf(msg, sizeof msg, "%s", c->e->msg);
    rc = fail_key(c, rc, nnt_ini_find_section(c->ini, lname), key, "%s", msg);
  }
  return rc;
}

/* The file's text (path NULL) or the file at path, named name. */
static int load(nnt_model *m, const char *name, const char *path, const char *text, size_t len,
                const char *const *overrides, size_t n_overrides, nnt_err *e) {
  nnt_err local;
  if (!e)
    e = &local;
  if (!m || !name || (!path && !text && len))
    return nnt_err_set(e, NNT_ERR_INVAL, "ini: NULL model, path or text");
  if (n_overrides && !overrides)
    return nnt_err_set(e, NNT_ERR_INVAL, "ini: %zu overrides but no array", n_overrides);
  ini_ctx c = {.file = name, .m = m, .e = e, .ov = overrides, .n_ov = n_overrides};
  int rc = path ? nnt_ini_read_file(path, &c.ini, e) : nnt_ini_parse(name, text, len, &c.ini, e);
  if (rc)
    return rc;
  rc = load_sections(&c);
  nnt_ini_free(c.ini);
  return rc;
}

/* See ini.h. */
int nnt_ini_load(nnt_model *m, const char *path, const char *const *overrides,
                 size_t n_overrides, nnt_err *e) {
  return load(m, path, path, NULL, 0, overrides, n_overrides, e);
}

/* See ini.h. */
int nnt_ini_load_text(nnt_model *m, const char *name, const char *text, size_t len,
                      const char *const *overrides, size_t n_overrides, nnt_err *e) {
  return load(m, name, NULL, text, len, overrides, n_overrides, e);
}
