/* ml_train_model_*: the model handle over the core's model. */
#include "api/src/capi.h"

#include <libgen.h>
#include <stdio.h>
#include <string.h>

#include "nntrainer-ext.h"
#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

int ml_train_model_construct(ml_train_model_h *model) {
  const char *what = "ml_train_model_construct";
  if (!model)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: model is NULL", what);
  capi_model *cm = nnt_calloc(1, sizeof *cm);
  if (!cm)
    return nnt_api_fail(ML_ERROR_OUT_OF_MEMORY, "%s: out of memory", what);
  nnt_err e;
  nnt_err_clear(&e);
  if (nnt_model_create(&cm->m, &e)) {
    nnt_free(cm);
    nnt_err_prefix(&e, "%s: ", what);
    return nnt_api_fail_err(&e);
  }
  pthread_mutex_init(&cm->mu, NULL);
  nnt_api_lock();
  int rc = nnt_h_add(cm, NNT_H_MODEL);
  nnt_api_unlock();
  if (rc) {
    pthread_mutex_destroy(&cm->mu);
    nnt_model_destroy(cm->m);
    nnt_free(cm);
    return nnt_api_fail(rc, "%s: out of memory", what);
  }
  *model = cm;
  return ML_ERROR_NONE;
}

int ml_train_model_construct_with_conf(const char *model_conf, ml_train_model_h *model) {
  const char *what = "ml_train_model_construct_with_conf";
  if (!model_conf || !model)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: %s is NULL", what,
                        !model_conf ? "model_conf" : "model");
  ml_train_model_h h;
  int rc = ml_train_model_construct(&h);
  if (rc)
    return rc;
  capi_model *cm = h;
  nnt_err e;
  nnt_err_clear(&e);
  char *copy = nnt_strdup(model_conf);
  if (!copy)
    rc = nnt_err_set(&e, NNT_ERR_NOMEM, "out of memory");
  else
    rc = nnt_model_set_base_dir(cm->m, dirname(copy), &e);
  nnt_free(copy);
  if (!rc)
    rc = nnt_ini_load(cm->m, model_conf, NULL, 0, &e);
  if (rc) {
    ml_train_model_destroy(h);
    nnt_err_prefix(&e, "%s: ", what);
    /* a missing or unreadable file is a bad argument in Tizen's terms */
    if (e.code == NNT_ERR_IO)
      e.code = NNT_ERR_INVAL;
    return nnt_api_fail_err(&e);
  }
  *model = h;
  return ML_ERROR_NONE;
}

/* Enter a model handle (see capi_enter); cm is never NULL after success. */
static int enter_model(ml_train_model_h model, const char *what, capi_model **cm) {
  return capi_enter(model, NNT_H_MODEL, what, cm);
}

static int model_set(void *obj, const char *key, const char *value, nnt_err *e) {
  return nnt_model_set_property(((capi_model *)obj)->m, key, value, e);
}

static int compile_props(ml_train_model_h model, const char *what, const char *const *props,
                         size_t n) {
  capi_model *cm;
  int rc = enter_model(model, what, &cm);
  if (rc)
    return rc;
  if (nnt_model_is_compiled(cm->m)) {
    capi_leave(cm);
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: the model is already compiled", what);
  }
  rc = capi_apply_props(what, model_set, cm, props, n);
  nnt_err e;
  nnt_err_clear(&e);
  if (!rc && (nnt_model_compile(cm->m, &e) || nnt_model_initialize(cm->m, &e))) {
    /* compiled but not initialized: back to before, so that the call can
     * be made again */
    nnt_model_uncompile(cm->m);
    nnt_err_prefix(&e, "%s: ", what);
    rc = nnt_api_fail_err(&e);
  }
  capi_leave(cm);
  return rc;
}

int ml_train_model_compile(ml_train_model_h model, ...) {
  CAPI_VARIADIC("ml_train_model_compile", model, compile_props, model);
}

int ml_train_model_compile_with_single_param(ml_train_model_h model, const char *single_param) {
  const char *what = "ml_train_model_compile_with_single_param";
  if (!single_param)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: single_param is NULL", what);
  return compile_props(model, what, &single_param, 1);
}

/* Between the core's progress and the caller's callback: keeps the
 * metrics of each finished epoch in the model handle. */
typedef struct run_tap {
  capi_model *cm;
  nnt_progress_cb cb;
  void *ud;
} run_tap;

static void tap(const nnt_progress *p, void *ud) {
  run_tap *t = ud;
  if (p->epoch_done) {
    t->cm->train_loss = p->train_loss;
    if (p->has_valid) {
      t->cm->valid_loss = p->valid_loss;
      t->cm->valid_accuracy = 100.0f * p->valid_accuracy;
    }
  }
  if (t->cb)
    t->cb(p, t->ud);
}

/* Train with the given [Model] properties; cb may be NULL. */
int capi_run(ml_train_model_h model, const char *what, const char *const *props, size_t n,
             nnt_progress_cb cb, void *ud) {
  capi_model *cm;
  int rc = enter_model(model, what, &cm);
  if (rc)
    return rc;
  if (!nnt_model_is_initialized(cm->m)) {
    capi_leave(cm);
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: compile the model first", what);
  }
  rc = capi_apply_props(what, model_set, cm, props, n);
  if (rc) {
    capi_leave(cm);
    return rc;
  }
  nnt_api_lock();
  /* a request that came after an earlier run ended is not for this one */
  nnt_model_clear_stop(cm->m);
  cm->running = 1;
  nnt_api_unlock();
  /* with memory_optimization=false every tensor stays readable afterwards */
  cm->m->keep_train_arena = !cm->m->memory_optimization;
  nnt_err e;
  nnt_err_clear(&e);
  run_tap t = {cm, cb, ud};
  if (nnt_model_train(cm->m, tap, &t, &e)) {
    nnt_err_prefix(&e, "%s: ", what);
    rc = nnt_api_fail_err(&e);
  }
  nnt_api_lock();
  cm->running = 0;
  nnt_api_unlock();
  capi_leave(cm);
  return rc;
}

static int run_props(ml_train_model_h model, const char *what, const char *const *props,
                     size_t n) {
  return capi_run(model, what, props, n, NULL, NULL);
}

int ml_train_model_run(ml_train_model_h model, ...) {
  CAPI_VARIADIC("ml_train_model_run", model, run_props, model);
}

int ml_train_model_run_with_single_param(ml_train_model_h model, const char *single_param) {
  const char *what = "ml_train_model_run_with_single_param";
  if (!single_param)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: single_param is NULL", what);
  return run_props(model, what, &single_param, 1);
}

int ml_train_model_destroy(ml_train_model_h model) {
  const char *what = "ml_train_model_destroy";
  nnt_api_lock();
  int rc = nnt_h_check(model, NNT_H_MODEL, what);
  capi_model *cm = model;
  if (!rc && cm->running)
    rc = nnt_api_fail(ML_ERROR_TRY_AGAIN,
                      "%s: the model is training (ml_train_model_run has not returned)", what);
  if (rc) {
    nnt_api_unlock();
    return rc;
  }
  /* from here no new call can reach the model or what it owns */
  nnt_h_remove(cm);
  for (size_t i = 0; i < cm->n_layers; i++)
    nnt_h_remove(cm->layers[i]);
  if (cm->opt) {
    nnt_h_remove(cm->opt);
    if (cm->opt->lrs)
      nnt_h_remove(cm->opt->lrs);
  }
  if (cm->ds)
    nnt_h_remove(cm->ds);
  while (cm->users)
    nnt_api_wait();
  nnt_api_unlock();
  /* the core model destroys the layers, optimizer and datasets */
  for (size_t i = 0; i < cm->n_layers; i++)
    nnt_free(cm->layers[i]);
  nnt_free(cm->layers);
  if (cm->opt) {
    nnt_free(cm->opt->lrs);
    nnt_free(cm->opt);
  }
  /* the generator sources call through their dataset handle's slots */
  nnt_model_destroy(cm->m);
  nnt_free(cm->ds);
  pthread_mutex_destroy(&cm->mu);
  nnt_free(cm);
  return ML_ERROR_NONE;
}

int ml_train_model_get_summary(ml_train_model_h model, ml_train_summary_type_e verbosity,
                               char **summary) {
  const char *what = "ml_train_model_get_summary";
  if (!summary)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: summary is NULL", what);
  int metric = verbosity == ML_TRAIN_EXT_SUMMARY_TRAIN_LOSS ||
               verbosity == ML_TRAIN_EXT_SUMMARY_VALID_LOSS ||
               verbosity == ML_TRAIN_EXT_SUMMARY_VALID_ACCURACY;
  if ((unsigned)verbosity > ML_TRAIN_SUMMARY_TENSOR && !metric)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: verbosity %d is not a summary type",
                        what, (int)verbosity);
  capi_model *cm;
  int rc = enter_model(model, what, &cm);
  if (rc)
    return rc;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (f) {
    /* the metrics as NNTrainer prints them: six significant digits */
    if (metric)
      fprintf(f, "%g\n",
              verbosity == ML_TRAIN_EXT_SUMMARY_TRAIN_LOSS   ? cm->train_loss
              : verbosity == ML_TRAIN_EXT_SUMMARY_VALID_LOSS ? cm->valid_loss
                                                             : cm->valid_accuracy);
    else
      nnt_model_print_summary(f, cm->m, (int)verbosity);
    if (fclose(f) != 0) {
      free(buf);
      buf = NULL;
    }
  }
  capi_leave(cm);
  if (!buf)
    return nnt_api_fail(ML_ERROR_OUT_OF_MEMORY, "%s: out of memory", what);
  *summary = buf;
  return ML_ERROR_NONE;
}

/* Remember a layer handle in its model (under the model's lock). */
static int keep_layer(capi_model *cm, capi_layer *cl) {
  if (cm->n_layers == cm->cap_layers) {
    size_t cap = cm->cap_layers ? cm->cap_layers * 2 : 16;
    capi_layer **p = nnt_realloc(cm->layers, cap * sizeof *p);
    if (!p)
      return ML_ERROR_OUT_OF_MEMORY;
    cm->layers = p;
    cm->cap_layers = cap;
  }
  cm->layers[cm->n_layers++] = cl;
  return ML_ERROR_NONE;
}

/* Refuse adding to a compiled model. */
static int refuse_compiled(capi_model *cm, const char *what) {
  if (nnt_model_is_compiled(cm->m))
    return nnt_api_fail(ML_ERROR_NOT_SUPPORTED,
                        "%s: the model is compiled; it can no longer change", what);
  return ML_ERROR_NONE;
}

/* Enter the model for adding child (a layer, optimizer or dataset handle of
 * kind) to it: refused after compile, for a dead child, and for a child of
 * another model. On success the model is entered and the API lock held
 * (release both with give_back()); *same is 1 when the child is already the
 * model's (nothing to do). */
static int take_child(ml_train_model_h model, void *child, nnt_hkind kind, const char *what,
                      capi_model **out, int *same) {
  capi_model *cm;
  int rc = enter_model(model, what, &cm);
  if (rc)
    return rc;
  rc = refuse_compiled(cm, what);
  nnt_api_lock();
  if (!rc)
    rc = nnt_h_check(child, kind, what);
  capi_model *owner = rc ? NULL : capi_owner_of(child, kind);
  *same = owner == cm && kind != NNT_H_LAYER;
  if (owner && !*same)
    rc = nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: the %s already belongs to a model", what,
                      kind == NNT_H_LAYER     ? "layer"
                      : kind == NNT_H_DATASET ? "dataset"
                                              : "optimizer");
  if (rc) {
    nnt_api_unlock();
    capi_leave(cm);
    return rc;
  }
  *out = cm;
  return ML_ERROR_NONE;
}

static void give_back(capi_model *cm) {
  nnt_api_unlock();
  capi_leave(cm);
}

int ml_train_model_add_layer(ml_train_model_h model, ml_train_layer_h layer) {
  const char *what = "ml_train_model_add_layer";
  capi_model *cm;
  int same;
  int rc = take_child(model, layer, NNT_H_LAYER, what, &cm, &same);
  if (rc)
    return rc;
  capi_layer *cl = layer;
  if (keep_layer(cm, cl))
    rc = nnt_api_fail(ML_ERROR_OUT_OF_MEMORY, "%s: out of memory", what);
  if (!rc) {
    nnt_err e;
    nnt_err_clear(&e);
    if (nnt_model_add_layer(cm->m, cl->l, &e)) {
      cm->n_layers--;
      nnt_err_prefix(&e, "%s: ", what);
      rc = nnt_api_fail_err(&e);
    } else {
      cl->owner = cm;
    }
  }
  give_back(cm);
  return rc;
}

int ml_train_model_set_optimizer(ml_train_model_h model, ml_train_optimizer_h optimizer) {
  const char *what = "ml_train_model_set_optimizer";
  capi_model *cm;
  int same;
  int rc = take_child(model, optimizer, NNT_H_OPTIMIZER, what, &cm, &same);
  if (rc || same) {
    if (!rc)
      give_back(cm);
    return rc;
  }
  capi_optimizer *co = optimizer;
  /* the earlier optimizer goes back to its handle's owner, or (one read
   * from an INI, which has no handle) is destroyed */
  nnt_optimizer *old = nnt_model_detach_optimizer(cm->m);
  nnt_err e;
  nnt_err_clear(&e);
  if (nnt_model_set_optimizer(cm->m, co->o, &e)) {
    nnt_model_set_optimizer(cm->m, old, NULL);
    nnt_err_prefix(&e, "%s: ", what);
    rc = nnt_api_fail_err(&e);
  } else {
    if (cm->opt)
      cm->opt->owner = NULL;
    else
      nnt_optimizer_destroy(old);
    cm->opt = co;
    co->owner = cm;
  }
  give_back(cm);
  return rc;
}

int ml_train_model_set_dataset(ml_train_model_h model, ml_train_dataset_h dataset) {
  const char *what = "ml_train_model_set_dataset";
  capi_model *cm;
  int same;
  int rc = take_child(model, dataset, NNT_H_DATASET, what, &cm, &same);
  if (rc || same) {
    if (!rc)
      give_back(cm);
    return rc;
  }
  capi_dataset *cd = dataset;
  for (int i = 0; i < 3; i++) {
    nnt_dataset *old = nnt_model_detach_dataset(cm->m, (nnt_ds_mode)i);
    /* sources of the earlier handle stay with it; INI ones have none */
    if (old && !(cm->ds && cm->ds->ds[i] == old))
      nnt_dataset_destroy(old);
    if (cd->ds[i])
      nnt_model_set_dataset(cm->m, (nnt_ds_mode)i, cd->ds[i], NULL);
  }
  if (cm->ds)
    cm->ds->owner = NULL;
  cm->ds = cd;
  cd->owner = cm;
  give_back(cm);
  return ML_ERROR_NONE;
}

/* Tensors info of the model's inputs (outputs when out). */
static int io_info(ml_train_model_h model, int out, ml_tensors_info_h *info, const char *what) {
  if (!info)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: info is NULL", what);
  capi_model *cm;
  int rc = enter_model(model, what, &cm);
  if (rc)
    return rc;
  if (!nnt_model_is_compiled(cm->m)) {
    capi_leave(cm);
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: compile the model first", what);
  }
  nnt_dim d[ML_TENSOR_SIZE_LIMIT];
  unsigned n = out ? nnt_model_output_dims(cm->m, d, ML_TENSOR_SIZE_LIMIT)
                   : nnt_model_input_dims(cm->m, d, ML_TENSOR_SIZE_LIMIT);
  capi_leave(cm);
  if (n > ML_TENSOR_SIZE_LIMIT)
    return nnt_api_fail(ML_ERROR_NOT_SUPPORTED, "%s: the model has %u %s (at most %d)", what,
                        n, out ? "outputs" : "inputs", ML_TENSOR_SIZE_LIMIT);
  nnt_tinfo *ti;
  if ((rc = capi_new_tensors(what, n, d, &ti, NULL)))
    return rc;
  *info = ti;
  return ML_ERROR_NONE;
}

int ml_train_model_get_input_tensors_info(ml_train_model_h model, ml_tensors_info_h *info) {
  return io_info(model, 0, info, "ml_train_model_get_input_tensors_info");
}

int ml_train_model_get_output_tensors_info(ml_train_model_h model, ml_tensors_info_h *info) {
  return io_info(model, 1, info, "ml_train_model_get_output_tensors_info");
}

/* path with its ".ini" replaced by (or followed by) ".bin"; a new string. */
static char *bin_beside(const char *path) {
  size_t n = strlen(path);
  char *p = nnt_malloc(n + 5);
  if (!p)
    return NULL;
  memcpy(p, path, n + 1);
  if (n > 4 && nnt_streq(p + n - 4, ".ini"))
    p[n - 4] = '\0';
  strcat(p, ".bin");
  return p;
}

static int check_format(ml_train_model_format_e format, const char *what) {
  if ((unsigned)format > ML_TRAIN_MODEL_FORMAT_FLATBUFFER)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: format %d is not a model format", what,
                        (int)format);
  if (format == ML_TRAIN_MODEL_FORMAT_FLATBUFFER)
    return nnt_api_fail(ML_ERROR_NOT_SUPPORTED, "%s: the flatbuffer format is not supported",
                        what);
  return ML_ERROR_NONE;
}

int ml_train_model_save(ml_train_model_h model, const char *file_path,
                        ml_train_model_format_e format) {
  const char *what = "ml_train_model_save";
  if (!file_path || !file_path[0])
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: file_path is NULL or empty", what);
  int rc = check_format(format, what);
  if (rc)
    return rc;
  capi_model *cm;
  if ((rc = enter_model(model, what, &cm)))
    return rc;
  nnt_err e;
  nnt_err_clear(&e);
  int r = NNT_OK;
  if (!nnt_model_is_initialized(cm->m)) {
    r = nnt_err_set(&e, NNT_ERR_INVAL, "compile the model first");
  } else if (format == ML_TRAIN_MODEL_FORMAT_BIN) {
    r = nnt_model_save_weights(cm->m, file_path, 1, &e);
  } else if (format == ML_TRAIN_MODEL_FORMAT_INI) {
    r = nnt_model_save_ini(cm->m, file_path, NULL, &e);
  } else {
    char *bin = bin_beside(file_path);
    if (!bin)
      r = nnt_err_set(&e, NNT_ERR_NOMEM, "out of memory");
    if (!r)
      r = nnt_model_save_weights(cm->m, bin, 1, &e);
    if (!r)
      r = nnt_model_save_ini(cm->m, file_path, bin, &e);
    nnt_free(bin);
  }
  capi_leave(cm);
  if (r) {
    nnt_err_prefix(&e, "%s: ", what);
    return nnt_api_fail_err(&e);
  }
  return ML_ERROR_NONE;
}

int ml_train_model_load(ml_train_model_h model, const char *file_path,
                        ml_train_model_format_e format) {
  const char *what = "ml_train_model_load";
  if (!file_path || !file_path[0])
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: file_path is NULL or empty", what);
  int rc = check_format(format, what);
  if (rc)
    return rc;
  if (format != ML_TRAIN_MODEL_FORMAT_BIN)
    return nnt_api_fail(ML_ERROR_NOT_SUPPORTED,
                        "%s: load a configuration with ml_train_model_construct_with_conf()",
                        what);
  capi_model *cm;
  if ((rc = enter_model(model, what, &cm)))
    return rc;
  nnt_err e;
  nnt_err_clear(&e);
  int r = nnt_model_is_initialized(cm->m)
              ? nnt_model_load_weights(cm->m, file_path, &e)
              : nnt_err_set(&e, NNT_ERR_INVAL, "compile the model first");
  capi_leave(cm);
  if (r) {
    nnt_err_prefix(&e, "%s: ", what);
    /* a missing or malformed file is a bad argument in Tizen's terms */
    if (e.code == NNT_ERR_IO)
      e.code = NNT_ERR_INVAL;
    return nnt_api_fail_err(&e);
  }
  return ML_ERROR_NONE;
}

int ml_train_model_get_layer(ml_train_model_h model, const char *layer_name,
                             ml_train_layer_h *layer) {
  const char *what = "ml_train_model_get_layer";
  if (!layer_name || !layer)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: %s is NULL", what,
                        !layer_name ? "layer_name" : "layer");
  capi_model *cm;
  int rc = enter_model(model, what, &cm);
  if (rc)
    return rc;
  nnt_layer *l = NULL;
  for (size_t i = 0; i < nnt_model_layer_count(cm->m) && !l; i++)
    if (nnt_streq(nnt_model_layer_at(cm->m, i)->name, layer_name))
      l = nnt_model_layer_at(cm->m, i);
  capi_layer *found = NULL;
  for (size_t i = 0; l && i < cm->n_layers && !found; i++)
    if (cm->layers[i]->l == l)
      found = cm->layers[i];
  if (!l) {
    rc = nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: the model has no layer '%s'", what,
                      layer_name);
  } else if (!found) {
    /* a layer read from an INI: give it a handle now */
    found = nnt_calloc(1, sizeof *found);
    nnt_api_lock();
    if (!found || keep_layer(cm, found) || nnt_h_add(found, NNT_H_LAYER)) {
      if (found && cm->n_layers && cm->layers[cm->n_layers - 1] == found)
        cm->n_layers--;
      nnt_free(found);
      found = NULL;
      rc = nnt_api_fail(ML_ERROR_OUT_OF_MEMORY, "%s: out of memory", what);
    } else {
      found->l = l;
      found->owner = cm;
    }
    nnt_api_unlock();
  }
  capi_leave(cm);
  if (!rc)
    *layer = found;
  return rc;
}

int ml_train_model_get_weight(ml_train_model_h model, const char *layer_name,
                              ml_tensors_data_h *weight, ml_tensors_info_h *info) {
  const char *what = "ml_train_model_get_weight";
  if (!layer_name || !weight || !info)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: %s is NULL", what,
                        !layer_name ? "layer_name" : !weight ? "weight" : "info");
  capi_model *cm;
  int rc = enter_model(model, what, &cm);
  if (rc)
    return rc;
  nnt_model *m = cm->m;
  const nnt_node *nd = NULL;
  for (size_t i = 0; m->initialized && i < m->n_nodes && !nd; i++)
    if (nnt_streq(m->nodes[i].layer->name, layer_name))
      nd = &m->nodes[i];
  if (!m->initialized)
    rc = nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: compile the model first", what);
  else if (!nd)
    rc = nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: the model has no layer '%s'", what,
                      layer_name);
  else if (nd->fc.n_w > ML_TENSOR_SIZE_LIMIT)
    rc = nnt_api_fail(ML_ERROR_NOT_SUPPORTED, "%s: layer '%s' has too many weights", what,
                      layer_name);
  nnt_tinfo *ti = NULL;
  nnt_tdata *td = NULL;
  if (!rc) {
    nnt_dim d[NNT_MAX_WEIGHTS];
    for (unsigned w = 0; w < nd->fc.n_w; w++)
      d[w] = nd->fc.w[w].dim;
    rc = capi_new_tensors(what, nd->fc.n_w, d, &ti, &td);
  }
  /* through the weight buffer: the model's backend may keep it off the host */
  for (unsigned w = 0; !rc && w < nd->fc.n_w; w++) {
    const nnt_tensor *t = &m->w[nd->w_first + w];
    nnt_err e;
    nnt_err_clear(&e);
    if (nnt_tensor_get(t, 0, td->buf[w], nnt_tensor_len(t), &e)) {
      nnt_err_prefix(&e, "%s: layer '%s' weight %u: ", what, layer_name, w);
      rc = nnt_api_fail_err(&e);
    }
  }
  if (rc && td) {
    nnt_api_lock();
    nnt_tinfo_free_locked(ti);
    nnt_tdata_free_locked(td);
    nnt_api_unlock();
  }
  capi_leave(cm);
  if (!rc) {
    *weight = td;
    *info = ti;
  }
  return rc;
}
