/* nntrainer-ext.h: what nntrainer offers beyond the Tizen API. */
#include "api/src/capi.h"

#include <stdio.h>
#include <string.h>

#include "nntrainer-ext.h"
#include "nntrainer/memreport.h"
#include "nntrainer/model_impl.h"

int capi_run(ml_train_model_h model, const char *what, const char *const *props, size_t n,
             nnt_progress_cb cb, void *ud);

static int enter_compiled(ml_train_model_h model, const char *what, capi_model **cm) {
  int rc = capi_enter(model, NNT_H_MODEL, what, cm);
  if (rc)
    return rc;
  if (!nnt_model_is_initialized((*cm)->m)) {
    capi_leave(*cm);
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: compile the model first", what);
  }
  return ML_ERROR_NONE;
}

/* The checks of the memory getters: the out argument (out_name in the
 * message) and the mode, then the compiled model entered and the mode in
 * the library's terms. */
static int enter_mode(ml_train_model_h model, const char *what, const void *out,
                      const char *out_name, ml_train_ext_mode_e mode, capi_model **cm,
                      nnt_mode *pm) {
  if (!out)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: %s is NULL", what, out_name);
  if ((unsigned)mode > ML_TRAIN_EXT_MODE_EVAL)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: mode %d is not a mode", what,
                        (int)mode);
  *pm = mode == ML_TRAIN_EXT_MODE_TRAIN  ? NNT_MODE_TRAIN
        : mode == ML_TRAIN_EXT_MODE_EVAL ? NNT_MODE_EVAL
                                         : NNT_MODE_INFER;
  return enter_compiled(model, what, cm);
}

int ml_train_ext_model_get_memory_report(ml_train_model_h model, ml_train_ext_mode_e mode,
                                         ml_train_ext_memory_report_s *report) {
  const char *what = "ml_train_ext_model_get_memory_report";
  capi_model *cm;
  nnt_mode pm = NNT_MODE_TRAIN;
  int rc = enter_mode(model, what, report, "report", mode, &cm, &pm);
  if (rc)
    return rc;
  nnt_model *m = cm->m;
  nnt_mgr *g = &m->mgr[pm];
  int was_planned = g->planned;
  nnt_err e;
  nnt_err_clear(&e);
  if (nnt_model_plan_layout(m, pm, &e)) { /* the plan, not its memory */
    capi_leave(cm);
    nnt_err_prefix(&e, "%s: ", what);
    return nnt_api_fail_err(&e);
  }
  ml_train_ext_memory_report_s r;
  memset(&r, 0, sizeof r);
  r.weight_bytes = m->wpool_floats * sizeof(float);
  if (pm == NNT_MODE_TRAIN && m->opt) /* the weights that train only */
    r.optimizer_bytes = nnt_model_opt_bytes(m, nnt_optimizer_state_count(m->opt));
  r.gradient_bytes = nnt_mgr_kind_bytes(g, NNT_TK_GRADIENT);
  r.activation_bytes = nnt_mgr_kind_bytes(g, NNT_TK_ACTIVATION);
  r.derivative_bytes = nnt_mgr_kind_bytes(g, NNT_TK_DERIVATIVE);
  r.scratch_bytes = nnt_mgr_kind_bytes(g, NNT_TK_SCRATCH);
  r.input_bytes = nnt_mgr_kind_bytes(g, NNT_TK_INPUT) + nnt_mgr_kind_bytes(g, NNT_TK_LABEL);
  r.arena_bytes = g->arena_bytes;
  r.lower_bound_bytes = g->lower_bound;
  r.total_bytes = r.weight_bytes + r.optimizer_bytes + r.arena_bytes;
  r.planning_ms = g->planning_ms;
  if (!was_planned)
    nnt_model_release_plan(m, pm);
  capi_leave(cm);
  *report = r;
  return ML_ERROR_NONE;
}

/* The peak of a mode in the API's terms. */
static void peak_to_api(const nnt_model *m, nnt_mode pm, const nnt_mem_peak *p,
                        ml_train_ext_memory_peak_s *r) {
  memset(r, 0, sizeof *r);
  r->step = p->step;
  r->steps = p->n_steps;
  r->step_kind = nnt_step_kind_name(p->kind);
  if (p->layer)
    snprintf(r->layer, sizeof r->layer, "%s", p->layer);
  r->weight_bytes = p->kind_bytes[NNT_TK_WEIGHT];
  r->optimizer_bytes = p->kind_bytes[NNT_TK_OPT_STATE];
  r->gradient_bytes = p->kind_bytes[NNT_TK_GRADIENT];
  r->activation_bytes = p->kind_bytes[NNT_TK_ACTIVATION];
  r->derivative_bytes = p->kind_bytes[NNT_TK_DERIVATIVE];
  r->scratch_bytes = p->kind_bytes[NNT_TK_SCRATCH];
  r->input_bytes = p->kind_bytes[NNT_TK_INPUT];
  r->label_bytes = p->kind_bytes[NNT_TK_LABEL];
  r->live_bytes = p->live_bytes;
  r->total_bytes = p->total_bytes;
  unsigned n = sizeof r->largest / sizeof r->largest[0];
  r->n_largest = p->n_largest < n ? p->n_largest : n;
  for (unsigned i = 0; i < r->n_largest; i++) {
    const nnt_mgr_tensor *t = &m->mgr[pm].t[p->largest[i]];
    snprintf(r->largest[i].name, sizeof r->largest[i].name, "%s", t->name);
    r->largest[i].kind = nnt_tkind_name(t->kind);
    r->largest[i].bytes = p->largest_bytes[i];
  }
}

int ml_train_ext_model_get_memory_peak(ml_train_model_h model, ml_train_ext_mode_e mode,
                                       ml_train_ext_memory_peak_s *peak) {
  const char *what = "ml_train_ext_model_get_memory_peak";
  capi_model *cm;
  nnt_mode pm = NNT_MODE_TRAIN;
  int rc = enter_mode(model, what, peak, "peak", mode, &cm, &pm);
  if (rc)
    return rc;
  nnt_model *m = cm->m;
  int was_planned = m->mgr[pm].planned;
  nnt_err e;
  nnt_err_clear(&e);
  nnt_mem_peak p;
  rc = nnt_model_plan_layout(m, pm, &e); /* the plan, not its memory */
  if (!rc)
    rc = nnt_model_mem_peak(m, pm, &p, &e);
  ml_train_ext_memory_peak_s r;
  if (!rc)
    peak_to_api(m, pm, &p, &r);
  if (!was_planned && m->mgr[pm].planned)
    nnt_model_release_plan(m, pm);
  capi_leave(cm);
  if (rc) {
    nnt_err_prefix(&e, "%s: ", what);
    return nnt_api_fail_err(&e);
  }
  *peak = r;
  return ML_ERROR_NONE;
}

int ml_train_ext_model_set_planner(ml_train_model_h model, const char *planner) {
  const char *what = "ml_train_ext_model_set_planner";
  if (!planner)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: planner is NULL", what);
  capi_model *cm;
  int rc = capi_enter(model, NNT_H_MODEL, what, &cm);
  if (rc)
    return rc;
  nnt_err e;
  nnt_err_clear(&e);
  if (nnt_model_set_property(cm->m, "memory_planner", planner, &e)) {
    nnt_err_prefix(&e, "%s: ", what);
    rc = nnt_api_fail_err(&e);
  }
  capi_leave(cm);
  return rc;
}

int ml_train_ext_model_get_layer_names(ml_train_model_h model, char ***names) {
  const char *what = "ml_train_ext_model_get_layer_names";
  if (!names)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: names is NULL", what);
  capi_model *cm;
  int rc = capi_enter(model, NNT_H_MODEL, what, &cm);
  if (rc)
    return rc;
  size_t n = nnt_model_layer_count(cm->m), chars = 0;
  for (size_t i = 0; i < n; i++)
    chars += strlen(nnt_model_layer_at(cm->m, i)->name) + 1;
  /* one block: n + 1 pointers, then the strings */
  char **out = nnt_malloc((n + 1) * sizeof *out + chars); /* the caller free()s it */
  if (out) {
    char *p = (char *)(out + n + 1);
    for (size_t i = 0; i < n; i++) {
      size_t len = strlen(nnt_model_layer_at(cm->m, i)->name) + 1;
      memcpy(p, nnt_model_layer_at(cm->m, i)->name, len);
      out[i] = p;
      p += len;
    }
    out[n] = NULL;
  }
  capi_leave(cm);
  if (!out)
    return nnt_api_fail(ML_ERROR_OUT_OF_MEMORY, "%s: out of memory", what);
  *names = out;
  return ML_ERROR_NONE;
}

/* Not through capi_enter: a run holds the model's mutex for its whole
 * length, and the callbacks that call this run inside it. The API lock
 * alone keeps the handle alive, and while `running` is set the run cannot
 * finish (it clears `running` under that lock), so the core model and its
 * datasets stay put; the request itself is one atomic store. */
int ml_train_ext_model_stop(ml_train_model_h model) {
  nnt_api_lock();
  int rc = nnt_h_check(model, NNT_H_MODEL, "ml_train_ext_model_stop");
  capi_model *cm = model;
  if (!rc && cm->running)
    nnt_model_request_stop(cm->m);
  nnt_api_unlock();
  return rc;
}

typedef struct progress_bridge {
  ml_train_ext_progress_cb cb;
  void *ud;
} progress_bridge;

static void bridge(const nnt_progress *p, void *ud) {
  const progress_bridge *b = ud;
  ml_train_ext_progress_s q;
  memset(&q, 0, sizeof q);
  q.epoch = p->epoch;
  q.epochs = p->epochs;
  q.batch = p->batch;
  q.batches = p->batches;
  q.loss = p->loss;
  q.batch_loss = p->batch_loss;
  q.epoch_done = p->epoch_done;
  q.has_valid = p->has_valid;
  q.valid_loss = p->valid_loss;
  q.valid_accuracy = p->valid_accuracy;
  q.step_ms = p->step_ms;
  b->cb(&q, b->ud);
}

int ml_train_ext_model_run_with_progress(ml_train_model_h model, ml_train_ext_progress_cb cb,
                                         void *user_data, ...) {
  const char *what = "ml_train_ext_model_run_with_progress";
  const char *props[CAPI_MAX_PROPS];
  size_t n;
  va_list ap;
  va_start(ap, user_data);
  int rc = capi_collect(what, ap, props, CAPI_MAX_PROPS, &n);
  va_end(ap);
  if (rc)
    return rc;
  progress_bridge b = {cb, user_data};
  return capi_run(model, what, props, n, cb ? bridge : NULL, &b);
}

/* Check that data holds n float32 tensors of the given shapes. */
static int check_data(const nnt_tdata *td, const nnt_dim *d, unsigned n, const char *what) {
  if (td->info.count != n)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER,
                        "%s: input has %u tensors; the model has %u inputs", what,
                        td->info.count, n);
  for (unsigned i = 0; i < n; i++) {
    size_t want = nnt_dim_len(d[i]) * sizeof(float);
    if (td->info.t[i].type != ML_TENSOR_TYPE_FLOAT32 || td->size[i] != want)
      return nnt_api_fail(ML_ERROR_INVALID_PARAMETER,
                          "%s: input tensor %u must be float32 of %zu bytes (batch_size "
                          "samples), not %zu bytes",
                          what, i, want, td->size[i]);
  }
  return ML_ERROR_NONE;
}

int ml_train_ext_model_infer(ml_train_model_h model, const ml_tensors_data_h input,
                             ml_tensors_data_h *output) {
  const char *what = "ml_train_ext_model_infer";
  if (!output)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: output is NULL", what);
  capi_model *cm;
  int rc = enter_compiled(model, what, &cm);
  if (rc)
    return rc;
  nnt_dim din[ML_TENSOR_SIZE_LIMIT], dout[ML_TENSOR_SIZE_LIMIT];
  unsigned n_in = nnt_model_input_dims(cm->m, din, ML_TENSOR_SIZE_LIMIT);
  unsigned n_out = nnt_model_output_dims(cm->m, dout, ML_TENSOR_SIZE_LIMIT);
  nnt_tdata *in = input, *out = NULL;
  nnt_tinfo *oi = NULL;
  if (n_out > ML_TENSOR_SIZE_LIMIT)
    rc = nnt_api_fail(ML_ERROR_NOT_SUPPORTED, "%s: the model has %u outputs", what, n_out);
  if (!rc)
    rc = capi_new_tensors(what, n_out, dout, &oi, &out);
  nnt_api_lock();
  if (oi)
    nnt_tinfo_free_locked(oi); /* out keeps its own copy */
  if (!rc)
    rc = nnt_h_check(input, NNT_H_TENSORS_DATA, what);
  if (!rc)
    rc = check_data(in, din, n_in, what);
  /* copy the input while the lock keeps its handle alive, then compute
   * without holding the lock every other handle needs */
  float *stage[ML_TENSOR_SIZE_LIMIT] = {0};
  for (unsigned i = 0; !rc && i < n_in; i++) {
    stage[i] = nnt_malloc(in->size[i]);
    if (!stage[i])
      rc = nnt_api_fail(ML_ERROR_OUT_OF_MEMORY, "%s: out of memory", what);
    else
      memcpy(stage[i], in->buf[i], in->size[i]);
  }
  float *result[ML_TENSOR_SIZE_LIMIT] = {0};
  for (unsigned i = 0; !rc && i < n_out; i++)
    result[i] = out->buf[i]; /* out is not yet known to the caller */
  nnt_api_unlock();
  if (!rc) {
    nnt_err e;
    nnt_err_clear(&e);
    if (nnt_model_infer(cm->m, (const float *const *)stage, result, &e)) {
      nnt_err_prefix(&e, "%s: ", what);
      rc = nnt_api_fail_err(&e);
    }
  }
  for (unsigned i = 0; i < n_in; i++)
    nnt_free(stage[i]);
  if (rc && out) {
    nnt_api_lock();
    nnt_tdata_free_locked(out);
    nnt_api_unlock();
    out = NULL;
  }
  capi_leave(cm);
  if (!rc)
    *output = out;
  return rc;
}

int ml_train_ext_model_get_layer_tensor(ml_train_model_h model, const char *layer_name,
                                        ml_train_ext_tensor_e what_t, unsigned int index,
                                        ml_tensors_data_h *data, ml_tensors_info_h *info) {
  const char *what = "ml_train_ext_model_get_layer_tensor";
  if (!layer_name || !data || !info)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: %s is NULL", what,
                        !layer_name ? "layer_name" : !data ? "data" : "info");
  if ((unsigned)what_t > ML_TRAIN_EXT_TENSOR_GRADIENT)
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: %d is not a tensor kind", what,
                        (int)what_t);
  capi_model *cm;
  int rc = enter_compiled(model, what, &cm);
  if (rc)
    return rc;
  nnt_model *m = cm->m;
  nnt_mgr *g = &m->mgr[NNT_MODE_TRAIN];
  const nnt_node *nd = NULL;
  for (size_t i = 0; i < m->n_nodes && !nd; i++)
    if (nnt_streq(m->nodes[i].layer->name, layer_name))
      nd = &m->nodes[i];
  int id = -1;
  if (m->memory_optimization)
    rc = nnt_api_fail(ML_ERROR_NOT_SUPPORTED,
                      "%s: tensors are kept only with memory_optimization=false", what);
  else if (!g->planned || m->bound_mode != NNT_MODE_TRAIN)
    rc = nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: the model has not trained yet", what);
  else if (!nd)
    rc = nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: the model has no layer '%s'", what,
                      layer_name);
  else if (what_t == ML_TRAIN_EXT_TENSOR_GRADIENT)
    id = index < nd->fc.n_w ? nd->t_gw[index] : -1;
  else if (index < nd->fc.n_out)
    id = what_t == ML_TRAIN_EXT_TENSOR_OUTPUT ? nd->t_out[index]
         : nd->t_dsum[index] >= 0           ? nd->t_dsum[index]
                                            : nd->t_dout[index];
  if (!rc && id < 0)
    rc = nnt_api_fail(ML_ERROR_INVALID_PARAMETER,
                      "%s: layer '%s' has no such tensor (index %u)", what, layer_name, index);
  nnt_tinfo *ti = NULL;
  nnt_tdata *td = NULL;
  if (!rc) {
    /* a gradient has its weight's shape; outputs and derivatives the
     * output's, with the batch */
    nnt_dim d;
    if (what_t == ML_TRAIN_EXT_TENSOR_GRADIENT) {
      d = nd->fc.w[index].dim;
    } else {
      d = nd->fc.out_dim[index];
      d.b = m->batch;
    }
    rc = capi_new_tensors(what, 1, &d, &ti, &td);
  }
  if (!rc) {
    /* through the arena's buffer, which need not be host memory */
    size_t bytes = td->size[0] < g->t[id].bytes ? td->size[0] : g->t[id].bytes;
    size_t n = bytes / sizeof(float);
    nnt_tensor t = nnt_mgr_bind(g, id, nnt_dim_make(1, 1, 1, (unsigned)n));
    nnt_err e;
    nnt_err_clear(&e);
    if (nnt_tensor_get(&t, 0, td->buf[0], n, &e)) {
      nnt_err_prefix(&e, "%s: layer '%s': ", what, layer_name);
      rc = nnt_api_fail_err(&e);
      nnt_api_lock();
      nnt_tinfo_free_locked(ti);
      nnt_tdata_free_locked(td);
      nnt_api_unlock();
    }
  }
  capi_leave(cm);
  if (!rc) {
    *data = td;
    *info = ti;
  }
  return rc;
}

int ml_train_ext_model_copy_layer_weights(ml_train_model_h dst, ml_train_model_h src,
                                          const char *const *layer_names) {
  const char *what = "ml_train_ext_model_copy_layer_weights";
  if (!layer_names || !layer_names[0])
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER, "%s: layer_names is NULL or empty", what);
  size_t n = 0;
  while (layer_names[n])
    n++;
  /* one model at a time: the copy is taken out of src, then put into dst,
   * so two calls copying in opposite directions cannot deadlock */
  capi_model *cm;
  int rc = enter_compiled(src, what, &cm);
  if (rc)
    return rc;
  nnt_err e;
  nnt_err_clear(&e);
  nnt_wcopy *c = NULL;
  int r = nnt_model_weights_take(cm->m, layer_names, n, &c, &e);
  capi_leave(cm);
  if (!r && !(rc = enter_compiled(dst, what, &cm))) {
    r = nnt_model_weights_put(cm->m, c, &e);
    capi_leave(cm);
  }
  nnt_wcopy_free(c);
  if (rc)
    return rc;
  if (r) {
    nnt_err_prefix(&e, "%s: ", what);
    return nnt_api_fail_err(&e);
  }
  return ML_ERROR_NONE;
}
