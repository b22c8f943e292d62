/* ml_train_layer_*, ml_train_optimizer_*, ml_train_lr_scheduler_* and
 * ml_train_dataset_*: handles over the core's objects. */
#include "api/src/capi.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nntrainer/file_io.h"
#include "nntrainer/layer.h"
#include "nntrainer/optimizer.h"

/* Register a new handle (under the API lock). */
static int add_handle(void *h, nnt_hkind kind, const char *what) {
  nnt_api_lock();
  int rc = nnt_h_add(h, kind);
  nnt_api_unlock();
  if (rc)
    return nnt_api_fail(rc, "%s: out of memory", what);
  return ML_ERROR_NONE;
}

/* Refuse changes to what a compiled model owns. */
static int refuse_if_compiled(capi_model *cm, const char *what) {
  if (cm && nnt_model_is_compiled(cm->m))
    return nnt_api_fail(ML_ERROR_NOT_SUPPORTED,
                        "%s: the model that owns it is compiled; it can no longer change", what);
  return ML_ERROR_NONE;
}

/* Take h out of the registry so that its destroy function can free it;
 * refused while a model (for a scheduler, an optimizer) owns it. */
static int unregister(void *h, nnt_hkind kind, const char *what) {
  nnt_api_lock();
  int rc = nnt_h_check(h, kind, what);
  if (!rc) {
    int lrs = kind == NNT_H_LR_SCHEDULER;
    if (lrs ? ((capi_lrs *)h)->owner != NULL : capi_owner_of(h, kind) != NULL)
      rc = nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: it belongs to %s, which destroys it",
                        what, lrs ? "an optimizer" : "a model");
    else
      nnt_h_remove(h);
    /* an optimizer's scheduler handle dies with it, in the same lock */
    if (!rc && kind == NNT_H_OPTIMIZER && ((capi_optimizer *)h)->lrs)
      nnt_h_remove(((capi_optimizer *)h)->lrs);
  }
  nnt_api_unlock();
  return rc;
}

/* ---------------------------------------------------------------- layer */

static int known_layer_type(int t) {
  return (t >= 0 && t <= 39) || (t >= 300 && t <= 302) || (t >= 500 && t <= 503);
}

int ml_train_layer_create(ml_train_layer_h *layer, ml_train_layer_type_e type) {
  if (!layer)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "ml_train_layer_create: layer is NULL");
  const nnt_layer_ops *ops = nnt_layer_ops_find_ml((int)type);
  if (!ops)
    return nnt_api_fail(known_layer_type((int)type) ? ML_ERROR_NOT_SUPPORTED
                                                    : ML_ERROR_INVALID_PARAMETER,
                        "ml_train_layer_create: layer type %d is %s", (int)type,
                        known_layer_type((int)type) ? "not implemented in nntrainer"
                                                    : "not a ml_train_layer_type_e value");
  capi_layer *cl = nnt_calloc(1, sizeof *cl);
  if (!cl)
    return nnt_api_fail(ML_ERROR_OUT_OF_MEMORY, "ml_train_layer_create: out of memory");
  nnt_err e;
  nnt_err_clear(&e);
  if (nnt_layer_create(ops->type, &cl->l, &e)) {
    nnt_free(cl);
    nnt_err_prefix(&e, "ml_train_layer_create: ");
    return nnt_api_fail_err(&e);
  }
  int rc = add_handle(cl, NNT_H_LAYER, "ml_train_layer_create");
  if (rc) {
    nnt_layer_destroy(cl->l);
    nnt_free(cl);
    return rc;
  }
  *layer = cl;
  return ML_ERROR_NONE;
}

int ml_train_layer_destroy(ml_train_layer_h layer) {
  int rc = unregister(layer, NNT_H_LAYER, "ml_train_layer_destroy");
  if (rc)
    return rc;
  capi_layer *cl = layer;
  nnt_layer_destroy(cl->l);
  nnt_free(cl);
  return ML_ERROR_NONE;
}

static int layer_set(void *obj, const char *key, const char *value, nnt_err *e) {
  capi_layer *cl = obj;
  /* a renamed layer must stay unique in its model, which indexes names */
  if (cl->owner && nnt_streq(key, "name"))
    return nnt_model_rename_layer(cl->owner->m, cl->l, value, e);
  return nnt_layer_set_property(cl->l, key, value, e);
}

static int layer_set_props(ml_train_layer_h layer, const char *what, const char *const *props,
                           size_t n) {
  capi_model *cm;
  int rc = capi_enter(layer, NNT_H_LAYER, what, &cm);
  if (rc)
    return rc;
  rc = refuse_if_compiled(cm, what);
  if (!rc)
    rc = capi_apply_props(what, layer_set, layer, props, n);
  capi_leave(cm);
  return rc;
}

int ml_train_layer_set_property(ml_train_layer_h layer, ...) {
  CAPI_VARIADIC("ml_train_layer_set_property", layer, layer_set_props, layer);
}

int ml_train_layer_set_property_with_single_param(ml_train_layer_h layer,
                                                  const char *single_param) {
  const char *what = "ml_train_layer_set_property_with_single_param";
  if (!single_param)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: single_param is NULL", what);
  return layer_set_props(layer, what, &single_param, 1);
}

/* ------------------------------------------------------- lr scheduler */

int ml_train_lr_scheduler_create(ml_train_lr_scheduler_h *lr_scheduler,
                                 ml_train_lr_scheduler_type_e type) {
  const char *what = "ml_train_lr_scheduler_create";
  if (!lr_scheduler)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: lr_scheduler is NULL", what);
  /* Tizen's values 0-3 are the first four of ours (linear has none) */
  if ((unsigned)type > ML_TRAIN_LR_SCHEDULER_TYPE_COSINE)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: type %d is not a scheduler type",
                        what, (int)type);
  capi_lrs *cs = nnt_calloc(1, sizeof *cs);
  if (!cs)
    return nnt_api_fail(ML_ERROR_OUT_OF_MEMORY, "%s: out of memory", what);
  nnt_err e;
  nnt_err_clear(&e);
  if (nnt_lrs_create(nnt_lrs_type_name((nnt_lrs_type)type), &cs->s, &e)) {
    nnt_free(cs);
    nnt_err_prefix(&e, "%s: ", what);
    return nnt_api_fail_err(&e);
  }
  int rc = add_handle(cs, NNT_H_LR_SCHEDULER, what);
  if (rc) {
    nnt_lrs_destroy(cs->s);
    nnt_free(cs);
    return rc;
  }
  *lr_scheduler = cs;
  return ML_ERROR_NONE;
}

int ml_train_lr_scheduler_destroy(ml_train_lr_scheduler_h lr_scheduler) {
  int rc = unregister(lr_scheduler, NNT_H_LR_SCHEDULER, "ml_train_lr_scheduler_destroy");
  if (rc)
    return rc;
  capi_lrs *cs = lr_scheduler;
  nnt_lrs_destroy(cs->s);
  nnt_free(cs);
  return ML_ERROR_NONE;
}

static int lrs_set(void *obj, const char *key, const char *value, nnt_err *e) {
  return nnt_lrs_set_property(((capi_lrs *)obj)->s, key, value, e);
}

static int lrs_set_props(ml_train_lr_scheduler_h h, const char *what, const char *const *props,
                         size_t n) {
  capi_model *cm;
  int rc = capi_enter(h, NNT_H_LR_SCHEDULER, what, &cm);
  if (rc)
    return rc;
  rc = refuse_if_compiled(cm, what);
  if (!rc)
    rc = capi_apply_props(what, lrs_set, h, props, n);
  capi_leave(cm);
  return rc;
}

int ml_train_lr_scheduler_set_property(ml_train_lr_scheduler_h lr_scheduler, ...) {
  CAPI_VARIADIC("ml_train_lr_scheduler_set_property", lr_scheduler, lrs_set_props, lr_scheduler);
}

int ml_train_lr_scheduler_set_property_with_single_param(ml_train_lr_scheduler_h lr_scheduler,
                                                         const char *single_param) {
  const char *what = "ml_train_lr_scheduler_set_property_with_single_param";
  if (!single_param)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: single_param is NULL", what);
  return lrs_set_props(lr_scheduler, what, &single_param, 1);
}

/* ----------------------------------------------------------- optimizer */

int ml_train_optimizer_create(ml_train_optimizer_h *optimizer, ml_train_optimizer_type_e type) {
  const char *what = "ml_train_optimizer_create";
  const char *name = type == ML_TRAIN_OPTIMIZER_TYPE_ADAM    ? "adam"
                     : type == ML_TRAIN_OPTIMIZER_TYPE_SGD   ? "sgd"
                     : type == ML_TRAIN_OPTIMIZER_TYPE_ADAMW ? "adamw"
                                                             : NULL;
  if (!optimizer)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: optimizer is NULL", what);
  if (!name)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: type %d is not an optimizer type",
                        what, (int)type);
  capi_optimizer *co = nnt_calloc(1, sizeof *co);
  if (!co)
    return nnt_api_fail(ML_ERROR_OUT_OF_MEMORY, "%s: out of memory", what);
  nnt_err e;
  nnt_err_clear(&e);
  if (nnt_optimizer_create(name, &co->o, &e)) {
    nnt_free(co);
    nnt_err_prefix(&e, "%s: ", what);
    return nnt_api_fail_err(&e);
  }
  int rc = add_handle(co, NNT_H_OPTIMIZER, what);
  if (rc) {
    nnt_optimizer_destroy(co->o);
    nnt_free(co);
    return rc;
  }
  *optimizer = co;
  return ML_ERROR_NONE;
}

/* Free an optimizer handle, its scheduler handle and the core objects;
 * the handles must already be out of the registry. */
void capi_optimizer_free(capi_optimizer *co) {
  if (!co)
    return;
  nnt_free(co->lrs);
  nnt_optimizer_destroy(co->o);
  nnt_free(co);
}

int ml_train_optimizer_destroy(ml_train_optimizer_h optimizer) {
  int rc = unregister(optimizer, NNT_H_OPTIMIZER, "ml_train_optimizer_destroy");
  if (rc)
    return rc;
  capi_optimizer_free(optimizer);
  return ML_ERROR_NONE;
}

static int opt_set(void *obj, const char *key, const char *value, nnt_err *e) {
  return nnt_optimizer_set_property(((capi_optimizer *)obj)->o, key, value, e);
}

static int opt_set_props(ml_train_optimizer_h h, const char *what, const char *const *props,
                         size_t n) {
  capi_model *cm;
  int rc = capi_enter(h, NNT_H_OPTIMIZER, what, &cm);
  if (rc)
    return rc;
  rc = refuse_if_compiled(cm, what);
  if (!rc)
    rc = capi_apply_props(what, opt_set, h, props, n);
  capi_leave(cm);
  return rc;
}

int ml_train_optimizer_set_property(ml_train_optimizer_h optimizer, ...) {
  CAPI_VARIADIC("ml_train_optimizer_set_property", optimizer, opt_set_props, optimizer);
}

int ml_train_optimizer_set_property_with_single_param(ml_train_optimizer_h optimizer,
                                                      const char *single_param) {
  const char *what = "ml_train_optimizer_set_property_with_single_param";
  if (!single_param)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: single_param is NULL", what);
  return opt_set_props(optimizer, what, &single_param, 1);
}

int ml_train_optimizer_set_lr_scheduler(ml_train_optimizer_h optimizer,
                                        ml_train_lr_scheduler_h lr_scheduler) {
  const char *what = "ml_train_optimizer_set_lr_scheduler";
  capi_model *cm;
  int rc = capi_enter(optimizer, NNT_H_OPTIMIZER, what, &cm);
  if (rc)
    return rc;
  if (cm)
    nnt_api_lock();
  /* the API lock is held from here on */
  capi_optimizer *co = optimizer;
  capi_lrs *cs = lr_scheduler;
  rc = refuse_if_compiled(cm, what);
  if (!rc)
    rc = nnt_h_check(lr_scheduler, NNT_H_LR_SCHEDULER, what);
  if (!rc && cs == co->lrs) {
    nnt_api_unlock();
    if (cm)
      capi_leave(cm);
    return ML_ERROR_NONE;
  }
  if (!rc && cs->owner)
    rc = nnt_api_fail(ML_ERROR_INVALID_PARAMETER,
                      "%s: the scheduler already belongs to an optimizer", what);
  if (!rc) {
    nnt_err e;
    nnt_err_clear(&e);
    if (nnt_optimizer_set_lr_scheduler(co->o, cs->s, &e)) {
      nnt_err_prefix(&e, "%s: ", what);
      rc = nnt_api_fail_err(&e);
    } else {
      /* the core destroyed the earlier scheduler: its handle dies with it */
      if (co->lrs) {
        nnt_h_remove(co->lrs);
        nnt_free(co->lrs);
      }
      co->lrs = cs;
      cs->owner = co;
    }
  }
  nnt_api_unlock();
  if (cm)
    capi_leave(cm);
  return rc;
}

/* ------------------------------------------------------------- dataset */

static int check_mode(const char *what, ml_train_dataset_mode_e mode) {
  if ((unsigned)mode > ML_TRAIN_DATASET_MODE_TEST)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: mode %d is not a dataset mode", what,
                        (int)mode);
  return ML_ERROR_NONE;
}

int ml_train_dataset_create(ml_train_dataset_h *dataset) {
  if (!dataset)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "ml_train_dataset_create: dataset is NULL");
  capi_dataset *cd = nnt_calloc(1, sizeof *cd);
  if (!cd)
    return nnt_api_fail(ML_ERROR_OUT_OF_MEMORY, "ml_train_dataset_create: out of memory");
  int rc = add_handle(cd, NNT_H_DATASET, "ml_train_dataset_create");
  if (rc) {
    nnt_free(cd);
    return rc;
  }
  *dataset = cd;
  return ML_ERROR_NONE;
}

/* The generator callback of every generator source: the user's callback
 * with the user data its slot holds now. */
static int gen_call(float **input, float **label, bool *last, void *slot) {
  const capi_gen *g = slot;
  return g->cb(input, label, last, g->user_data);
}

/* Put a new source in the dataset's mode slot (and the owning model's): a
 * generator when cb is set, else the raw file. */
static int set_source(ml_train_dataset_h dataset, ml_train_dataset_mode_e mode,
                      ml_train_datagen_cb cb, void *user_data, const char *file,
                      const char *what) {
  capi_model *cm;
  int rc = capi_enter(dataset, NNT_H_DATASET, what, &cm);
  if (rc)
    return rc;
  capi_dataset *cd = dataset;
  nnt_dataset *src = NULL;
  nnt_err e;
  nnt_err_clear(&e);
  rc = refuse_if_compiled(cm, what);
  if (!rc && (cb ? nnt_dataset_create_generator(gen_call, &cd->gen[mode], &src, &e)
                 : nnt_dataset_create_file(file, &src, &e))) {
    nnt_err_prefix(&e, "%s: ", what);
    rc = nnt_api_fail_err(&e);
  }
  if (!rc) {
    /* the earlier source goes (it is not running: a running model's
     * objects cannot be entered), then the slot takes the new callback */
    if (cm)
      nnt_model_set_dataset(cm->m, (nnt_ds_mode)mode, src, &e); /* frees the earlier one */
    else
      nnt_dataset_destroy(cd->ds[mode]);
    cd->ds[mode] = src;
    cd->gen[mode].cb = cb;
    cd->gen[mode].user_data = user_data;
  }
  capi_leave(cm);
  return rc;
}

int ml_train_dataset_add_generator(ml_train_dataset_h dataset, ml_train_dataset_mode_e mode,
                                   ml_train_datagen_cb cb, void *user_data) {
  const char *what = "ml_train_dataset_add_generator";
  int rc = check_mode(what, mode);
  if (rc)
    return rc;
  if (!cb)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: cb is NULL", what);
  return set_source(dataset, mode, cb, user_data, NULL, what);
}

int ml_train_dataset_add_file(ml_train_dataset_h dataset, ml_train_dataset_mode_e mode,
                              const char *file) {
  const char *what = "ml_train_dataset_add_file";
  int rc = check_mode(what, mode);
  if (rc)
    return rc;
  if (!file)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: file is NULL", what);
  if (access(file, R_OK) != 0)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: cannot read '%s': %s", what, file,
                        strerror(errno));
  /* a FIFO, folder or device is refused now, not at the first run */
  struct stat st;
  if (stat(file, &st) != 0)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: cannot read '%s': %s", what, file,
                        strerror(errno));
  if (!S_ISREG(st.st_mode))
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: '%s' is %s, not a data file", what,
                        file, nnt_file_kind(st.st_mode));
  return set_source(dataset, mode, NULL, NULL, file, what);
}

static int ds_set(void *obj, const char *key, const char *value, nnt_err *e) {
  return nnt_dataset_set_property(obj, key, value, e);
}

/* Is the argument the "user_data" pseudo-property (its case and spaces
 * aside)? 1: the bare key, whose value is the next argument, a pointer;
 * -1: "user_data=..." (a value in the string, which NNTrainer refuses);
 * 0: neither. */
static int user_data_key(const char *s) {
  static const char key[] = "user_data";
  size_t k = 0;
  for (; *s; s++) {
    if (isspace((unsigned char)*s))
      continue;
    if (k < sizeof key - 1 && tolower((unsigned char)*s) == key[k]) {
      k++;
      continue;
    }
    return k == sizeof key - 1 && *s == '=' ? -1 : 0;
  }
  return k == sizeof key - 1;
}

/* Apply props to mode i's source. The argument "user_data" is followed by
 * a pointer, the generator's new user data (as in NNTrainer). */
static int ds_apply(capi_dataset *cd, int i, const char *what, const char *const *props,
                    size_t n) {
  for (size_t k = 0; k < n; k++) {
    int ud = props[k] ? user_data_key(props[k]) : 0;
    if (ud < 0)
      return nnt_api_fail(ML_ERROR_INVALID_PARAMETER,
                          "%s: user_data takes the pointer as the next argument "
                          "(\"user_data\", ptr), not a value in the string",
                          what);
    if (ud && k + 1 == n)
      return nnt_api_fail(ML_ERROR_INVALID_PARAMETER,
                          "%s: user_data is the last argument; the pointer must follow it",
                          what);
    if (ud && !cd->gen[i].cb)
      return nnt_api_fail(ML_ERROR_INVALID_PARAMETER,
                          "%s: user_data is for generator sources; mode %d reads a file", what,
                          i);
    if (ud) {
      cd->gen[i].user_data = (void *)props[++k];
      continue;
    }
    int rc = capi_apply_props(what, ds_set, cd->ds[i], &props[k], 1);
    if (rc)
      return rc;
  }
  return ML_ERROR_NONE;
}

/* Apply props to one mode's source (all modes that have one when all). */
static int ds_set_props(ml_train_dataset_h dataset, int mode, int all, const char *what,
                        const char *const *props, size_t n) {
  capi_model *cm;
  int rc = capi_enter(dataset, NNT_H_DATASET, what, &cm);
  if (rc)
    return rc;
  capi_dataset *cd = dataset;
  rc = refuse_if_compiled(cm, what);
  if (!rc && !all && !cd->ds[mode])
    rc = nnt_api_fail(ML_ERROR_INVALID_PARAMETER,
                      "%s: the dataset has no source for mode %d (add a generator or a file "
                      "first)",
                      what, mode);
  for (int i = 0; !rc && i < 3; i++)
    if ((all || i == mode) && cd->ds[i])
      rc = ds_apply(cd, i, what, props, n);
  capi_leave(cm);
  return rc;
}

int ml_train_dataset_set_property_for_mode(ml_train_dataset_h dataset,
                                           ml_train_dataset_mode_e mode, ...) {
  const char *what = "ml_train_dataset_set_property_for_mode";
  int rc = check_mode(what, mode);
  if (rc)
    return rc;
  const char *props[CAPI_MAX_PROPS];
  size_t n;
  va_list ap;
  va_start(ap, mode);
  rc = capi_collect(what, ap, props, CAPI_MAX_PROPS, &n);
  va_end(ap);
  return rc ? rc : ds_set_props(dataset, (int)mode, 0, what, props, n);
}

int ml_train_dataset_set_property_for_mode_with_single_param(ml_train_dataset_h dataset,
                                                             ml_train_dataset_mode_e mode,
                                                             const char *single_param) {
  const char *what = "ml_train_dataset_set_property_for_mode_with_single_param";
  int rc = check_mode(what, mode);
  if (rc)
    return rc;
  if (!single_param)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: single_param is NULL", what);
  return ds_set_props(dataset, (int)mode, 0, what, &single_param, 1);
}

static int ds_set_all(ml_train_dataset_h dataset, const char *what, const char *const *props,
                      size_t n) {
  return ds_set_props(dataset, 0, 1, what, props, n);
}

int ml_train_dataset_set_property(ml_train_dataset_h dataset, ...) {
  CAPI_VARIADIC("ml_train_dataset_set_property", dataset, ds_set_all, dataset);
}

int ml_train_dataset_destroy(ml_train_dataset_h dataset) {
  int rc = unregister(dataset, NNT_H_DATASET, "ml_train_dataset_destroy");
  if (rc)
    return rc;
  capi_dataset *cd = dataset;
  for (int i = 0; i < 3; i++)
    nnt_dataset_destroy(cd->ds[i]);
  nnt_free(cd);
  return ML_ERROR_NONE;
}

/* The deprecated constructors: one source per mode given. */
static int create_with(ml_train_dataset_h *dataset, const char *what, ml_train_datagen_cb cb[3],
                       const char *file[3]) {
  ml_train_dataset_h d;
  int rc = ml_train_dataset_create(&d);
  if (rc)
    return rc;
  for (int i = 0; !rc && i < 3; i++) {
    if (cb && cb[i])
      rc = ml_train_dataset_add_generator(d, (ml_train_dataset_mode_e)i, cb[i], NULL);
    if (file && file[i])
      rc = ml_train_dataset_add_file(d, (ml_train_dataset_mode_e)i, file[i]);
  }
  if (rc) {
    ml_train_dataset_destroy(d);
    return rc;
  }
  *dataset = d;
  return ML_ERROR_NONE;
}

int ml_train_dataset_create_with_generator(ml_train_dataset_h *dataset,
                                           ml_train_datagen_cb train_cb,
                                           ml_train_datagen_cb valid_cb,
                                           ml_train_datagen_cb test_cb) {
  const char *what = "ml_train_dataset_create_with_generator";
  if (!dataset || !train_cb)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: %s is NULL", what,
                        !dataset ? "dataset" : "train_cb");
  ml_train_datagen_cb cb[3] = {train_cb, valid_cb, test_cb};
  return create_with(dataset, what, cb, NULL);
}

int ml_train_dataset_create_with_file(ml_train_dataset_h *dataset, const char *train_file,
                                      const char *valid_file, const char *test_file) {
  const char *what = "ml_train_dataset_create_with_file";
  if (!dataset || !train_file)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: %s is NULL", what,
                        !dataset ? "dataset" : "train_file");
  const char *file[3] = {train_file, valid_file, test_file};
  return create_with(dataset, what, NULL, file);
}
