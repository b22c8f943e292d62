/* The model: building (the one path shared by the INI loader and the C API),
 * [Model] properties, compile and initialize. */
#include "nntrainer/model_impl.h"
#include "nntrainer/tensor_host.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int nnt_model_create(nnt_model **out, nnt_err *e) {
  nnt_model *m = nnt_calloc(1, sizeof *m);
  if (!m)
    return nnt_err_set(e, NNT_ERR_NOMEM, "out of memory creating a model");
  m->epochs = 1;
  m->batch = 1;
  m->memory_optimization = 1;
  m->check_finite = 1;
  atomic_init(&m->stop, 0);
  m->planner = NNT_PLANNER_BEST_FIT;
  m->seed = 0;
  m->bound_mode = -1;
  m->be = nnt_backend_cpu();
  m->k = m->be->k;
  nnt_cpu_pool_hold(); /* released in nnt_model_destroy */
  const char *p = getenv("NNTRAINER_POISON");
  m->poison = p && *p && strcmp(p, "0") != 0;
  for (int i = 0; i < NNT_MODE__COUNT; i++)
    nnt_mgr_init(&m->mgr[i]);
  nnt_mgr_init(&m->wmgr);
  nnt_mgr_init(&m->omgr);
  *out = m;
  return NNT_OK;
}

void nnt_model_destroy(nnt_model *m) {
  if (!m)
    return;
  for (int i = 0; i < 3; i++)
    nnt_dataset_destroy(m->ds[i]);
  nnt_graph_free(m);
  for (size_t i = 0; i < m->n_layers; i++)
    nnt_layer_destroy(m->layers[i]);
  nnt_free(m->layers);
  nnt_name_index_free(&m->layer_names);
  nnt_optimizer_destroy(m->opt);
  for (int i = 0; i < NNT_MODE__COUNT; i++) {
    nnt_mgr_free(&m->mgr[i]);
    nnt_free(m->prof_s[i]);
  }
  nnt_mgr_free(&m->wmgr);
  nnt_mgr_free(&m->omgr);
  nnt_buffer_free(m->sbuf);
  nnt_buffer_free(m->cbuf);
  nnt_backend_free(m->be);
  nnt_free(m->state_copy);
  nnt_free(m->chost);
  nnt_free(m->loss_host);
  nnt_free(m->save_path);
  nnt_free(m->gpu_device);
  nnt_free(m->base_dir);
  nnt_free(m);
  nnt_cpu_pool_release();
}

const char *nnt_loss_name(nnt_loss_kind k) {
  static const char *const names[] = {"none", "mse", "cross", "cross_softmax", "cross_sigmoid"};
  return (unsigned)k < NNT_ARRAY_LEN(names) ? names[k] : NULL;
}

static int refuse_after_compile(const nnt_model *m, const char *what, nnt_err *e) {
  if (m->compiled)
    return nnt_err_set(e, NNT_ERR_INVAL, "%s: the model is already compiled", what);
  return NNT_OK;
}

int nnt_model_set_base_dir(nnt_model *m, const char *dir, nnt_err *e) {
  char *d = nnt_strdup(dir ? dir : ".");
  if (!d)
    return nnt_err_set(e, NNT_ERR_NOMEM, "out of memory");
  nnt_free(m->base_dir);
  m->base_dir = d;
  return NNT_OK;
}

const char *nnt_model_base_dir(const nnt_model *m) {
  return m->base_dir ? m->base_dir : ".";
}

/* Join a relative path onto the model's base dir; a new string. */
static char *resolve_path(const nnt_model *m, const char *v) {
  if (v[0] == '/' || !m->base_dir)
    return nnt_strdup(v);
  size_t n = strlen(m->base_dir) + strlen(v) + 2;
  char *p = nnt_malloc(n);
  if (p)
    snprintf(p, n, "%s/%s", m->base_dir, v);
  return p;
}

/* memory_budget: a byte count with an optional K, M or G suffix (binary
 * multiples: 1K = 1024), case-insensitive; 0 means no limit. */
static int parse_budget(const char *key, const char *v, uint64_t *out, nnt_err *e) {
  int r = nnt_parse_bytes(v, out);
  if (r == 2)
    return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': value '%s' is more than %zu bytes", key, v,
                       (size_t)SIZE_MAX);
  if (r)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "key '%s': value '%s' is not a byte count (digits with an optional K, M "
                       "or G suffix, as in 512M; 0 for no limit)",
                       key, v);
  return NNT_OK;
}

/* The batch size; after compile the graph is finalized again for it and
 * both modes' memory plans are dropped, to be planned anew when next used.
 * The weights and the optimizer state do not depend on it and stay. */
static int set_batch(nnt_model *m, unsigned batch, nnt_err *e) {
  if (!m->compiled || batch == m->batch) {
    m->batch = batch;
    return NNT_OK;
  }
  int rc = nnt_graph_set_batch(m, batch, e);
  if (rc) {
    nnt_err_prefix(e, "key 'batch_size': ");
    return rc;
  }
  nnt_model_release_plan(m, NNT_MODE_TRAIN);
  nnt_model_release_plan(m, NNT_MODE_INFER);
  nnt_model_release_plan(m, NNT_MODE_EVAL);
  /* what a rerun may run again depends on the batch's shapes */
  nnt_rerun_clear(m);
  m->reruns_done = 0;
  nnt_delay_clear(m);
  m->delays_done = 0;
  return NNT_OK;
}

int nnt_model_set_property(nnt_model *m, const char *key, const char *value,
                           nnt_err *e) {
  if (!key || !value)
    return nnt_err_set(e, NNT_ERR_INVAL, "property key and value must not be NULL");
  int rc;
  unsigned u;
  /* after compile only what does not change the graph (batch_size re-plans
   * the memory; the weights and the optimizer state stay) */
  if (m->compiled && !nnt_streq(key, "epochs") && !nnt_streq(key, "save_path") &&
      !nnt_streq(key, "continue_train") && !nnt_streq(key, "batch_size") &&
      !nnt_streq(key, "check_finite") && (rc = refuse_after_compile(m, key, e)))
    return rc;
  if (nnt_streq(key, "type")) {
    if (!nnt_streq(value, "neuralnetwork"))
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "key 'type': model type '%s' is not supported (NeuralNetwork is)", value);
    return NNT_OK;
  }
  if (nnt_streq(key, "epochs")) {
    if ((rc = nnt_parse_uint(key, value, &u, e)))
      return rc;
    if (!u)
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'epochs': must be positive");
    if (u == UINT_MAX) /* the last epoch's counter must load back */
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'epochs': %u is more than the most, %u", u,
                         UINT_MAX - 1);
    m->epochs = u;
    return NNT_OK;
  }
  if (nnt_streq(key, "batch_size")) {
    if ((rc = nnt_parse_uint(key, value, &u, e)))
      return rc;
    if (!u)
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'batch_size': must be positive");
    return set_batch(m, u, e);
  }
  if (nnt_streq(key, "loss")) {
    for (int k = NNT_LOSS_NONE; k <= NNT_LOSS_CROSS_SIGMOID; k++)
      if (nnt_streq(value, nnt_loss_name((nnt_loss_kind)k))) {
        m->loss = (nnt_loss_kind)k;
        return NNT_OK;
      }
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "key 'loss': unknown loss '%s' (mse, cross, cross_softmax, "
                       "cross_sigmoid)", value);
  }
  if (nnt_streq(key, "save_path")) {
    char *p = value[0] ? resolve_path(m, value) : NULL;
    if (value[0] && !p)
      return nnt_err_set(e, NNT_ERR_NOMEM, "out of memory");
    nnt_free(m->save_path);
    m->save_path = p;
    return NNT_OK;
  }
  if (nnt_streq(key, "continue_train"))
    return nnt_parse_bool(key, value, &m->continue_train, e);
  if (nnt_streq(key, "load_weights"))
    return nnt_parse_bool(key, value, &m->load_on_init, e);
  if (nnt_streq(key, "memory_optimization"))
    return nnt_parse_bool(key, value, &m->memory_optimization, e);
  if (nnt_streq(key, "check_finite"))
    return nnt_parse_bool(key, value, &m->check_finite, e);
  if (nnt_streq(key, "clip_grad_by_norm")) {
    float f;
    if ((rc = nnt_parse_float(key, value, &f, e)))
      return rc;
    if (f < 0)
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'clip_grad_by_norm': must not be negative");
    m->clip_grad_norm = f;
    return NNT_OK;
  }
  if (nnt_streq(key, "seed")) {
    if ((rc = nnt_parse_uint(key, value, &u, e)))
      return rc;
    m->seed = u;
    m->seed_set = 1;
    return NNT_OK;
  }
  if (nnt_streq(key, "memory_budget"))
    return parse_budget(key, value, &m->memory_budget, e);
  if (nnt_streq(key, "engine")) {
    if (nnt_engine_from_name(value, &m->engine))
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'engine': unknown engine '%s' (cpu, gpu, qnn)",
                         value);
    m->engine_set = 1;
    return NNT_OK;
  }
  if (nnt_streq(key, "gpu_device")) {
    size_t len = strlen(value);
    if (!len || len > 255)
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'gpu_device': expected a device index or part "
                         "of its name (1 to 255 characters), got '%s'", value);
    char *d = nnt_strdup(value);
    if (!d)
      return nnt_err_set(e, NNT_ERR_NOMEM, "key 'gpu_device': out of memory");
    nnt_free(m->gpu_device);
    m->gpu_device = d;
    return NNT_OK;
  }
  if (nnt_streq(key, "memory_planner")) {
    if (nnt_planner_from_name(value, &m->planner))
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "key 'memory_planner': unknown planner '%s' (basic, pool, best_fit)",
                         value);
    return NNT_OK;
  }
  return nnt_err_set(e, NNT_ERR_NOKEY, "unknown key '%s'", key);
}

int nnt_model_add_layer(nnt_model *m, nnt_layer *l, nnt_err *e) {
  if (!l)
    return nnt_err_set(e, NNT_ERR_INVAL, "add_layer: layer is NULL");
  int rc = refuse_after_compile(m, "add_layer", e);
  if (rc)
    return rc;
  if (l->owned)
    return nnt_err_set(e, NNT_ERR_INVAL, "add_layer: layer '%s' already belongs to a model",
                       l->name);
  if (!l->name[0])
    snprintf(l->name, sizeof l->name, "%s%zu", l->ops->type, m->n_layers);
  if (nnt_name_index_get(&m->layer_names, l->name) != NNT_NAME_NONE)
    return nnt_err_set(e, NNT_ERR_INVAL, "add_layer: a layer named '%s' already exists",
                       l->name);
  if (m->n_layers == m->cap_layers) {
    size_t cap = m->cap_layers ? 2 * m->cap_layers : 16;
    nnt_layer **p = nnt_realloc(m->layers, cap * sizeof *p);
    if (!p)
      return nnt_err_set(e, NNT_ERR_NOMEM, "out of memory adding a layer");
    m->layers = p;
    m->cap_layers = cap;
  }
  if (nnt_name_index_put(&m->layer_names, l->name, (unsigned)m->n_layers, NULL) < 0)
    return nnt_err_set(e, NNT_ERR_NOMEM, "out of memory adding a layer");
  m->layers[m->n_layers++] = l;
  l->owned = 1;
  return NNT_OK;
}

int nnt_model_rename_layer(nnt_model *m, nnt_layer *l, const char *name, nnt_err *e) {
  nnt_layer *other = nnt_model_find_layer(m, name);
  if (other && other != l)
    return nnt_err_set(e, NNT_ERR_INVAL, "name: the model already has a layer '%s'", name);
  /* the new index is built first, from copies of the names, so that a
   * failure leaves the layer and the index as they were */
  char old[NNT_NAME_MAX];
  memcpy(old, l->name, sizeof old);
  int rc = nnt_layer_set_property(l, "name", name, e);
  if (rc)
    return rc;
  nnt_name_index x = {0};
  for (size_t i = 0; i < m->n_layers; i++)
    if (nnt_name_index_put(&x, m->layers[i]->name, (unsigned)i, NULL) < 0) {
      nnt_name_index_free(&x);
      memcpy(l->name, old, sizeof old);
      return nnt_err_set(e, NNT_ERR_NOMEM, "name: out of memory");
    }
  nnt_name_index_free(&m->layer_names);
  m->layer_names = x;
  return NNT_OK;
}

int nnt_model_set_optimizer(nnt_model *m, nnt_optimizer *o, nnt_err *e) {
  if (!o)
    return nnt_err_set(e, NNT_ERR_INVAL, "set_optimizer: optimizer is NULL");
  int rc = refuse_after_compile(m, "set_optimizer", e);
  if (rc)
    return rc;
  if (o->owned)
    return nnt_err_set(e, NNT_ERR_INVAL, "set_optimizer: optimizer already belongs to a model");
  nnt_optimizer_destroy(m->opt);
  m->opt = o;
  o->owned = 1;
  return NNT_OK;
}

int nnt_model_set_dataset(nnt_model *m, nnt_ds_mode mode, nnt_dataset *ds,
                          nnt_err *e) {
  if ((unsigned)mode > NNT_DS_TEST)
    return nnt_err_set(e, NNT_ERR_INVAL, "set_dataset: unknown mode %d", (int)mode);
  if (m->ds[mode] == ds)
    return NNT_OK;
  nnt_dataset_destroy(m->ds[mode]);
  m->ds[mode] = ds;
  nnt_dataset_default_shuffle(ds, mode == NNT_DS_TRAIN); /* NNTrainer shuffles training only */
  return NNT_OK;
}

int nnt_model_set_backend(nnt_model *m, nnt_backend *be, nnt_err *e) {
  if (!be || !be->k || !be->buft || !be->supports)
    return nnt_err_set(e, NNT_ERR_INVAL, "set_backend: the backend is NULL or incomplete");
  int rc = refuse_after_compile(m, "set_backend", e);
  if (rc)
    return rc;
  if (be != m->be)
    nnt_backend_free(m->be);
  m->be = be;
  m->k = be->k;
  return NNT_OK;
}

static const char *engine_of(const nnt_backend *be) {
  return be->engine ? be->engine : be->name;
}

/* The backend of the model's engine (kept when the model has it already),
 * and every layer's engine against it: a model runs on one backend. */
static int select_backend(nnt_model *m, nnt_err *e) {
  const char *want = nnt_engine_name(m->engine);
  nnt_backend *be;
  int rc;
  if (strcmp(engine_of(m->be), want)) {
    if ((rc = nnt_backend_get_on(m->engine, m->gpu_device, &be, e))) {
      nnt_err_prefix(e, "[Model] ");
      return rc;
    }
    if ((rc = nnt_model_set_backend(m, be, e))) {
      nnt_backend_free(be);
      return rc;
    }
  }
  for (size_t i = 0; i < m->n_layers; i++) {
    const nnt_layer *l = m->layers[i];
    const char *name = nnt_engine_name(l->engine);
    if (!l->has_engine || !strcmp(name, engine_of(m->be)))
      continue;
    if ((rc = nnt_backend_get_on(l->engine, m->gpu_device, &be, e))) {
      nnt_err_prefix(e, "layer '%s': ", l->name);
      return rc;
    }
    int same = !strcmp(engine_of(be), engine_of(m->be));
    nnt_backend_free(be);
    if (!same)
      return nnt_err_set(e, NNT_ERR_NOT_SUPPORTED,
                         "layer '%s': engine '%s' differs from the model's engine '%s'; a model "
                         "runs on one backend (set [Model] engine, or the same engine on every "
                         "layer)", l->name, name, want);
  }
  return NNT_OK;
}

int nnt_model_compile(nnt_model *m, nnt_err *e) {
  int rc = refuse_after_compile(m, "compile", e);
  if (rc)
    return rc;
  if (!m->n_layers)
    return nnt_err_set(e, NNT_ERR_INVAL, "compile: the model has no layers");
  if (!m->seed_set)
    m->seed = 0;
  /* notices of defaults that differ from NNTrainer's, through nnt_log */
  for (size_t i = 0; i < m->n_layers; i++)
    nnt_layer_log_defaults(m->layers[i]);
  nnt_optimizer_log_defaults(m->opt);
  if ((rc = select_backend(m, e)) || (rc = nnt_graph_compile(m, e)))
    return rc;
  m->compiled = 1;
  return NNT_OK;
}

void nnt_model_uncompile(nnt_model *m) {
  if (!m->compiled || m->initialized)
    return;
  nnt_model_release_plan(m, NNT_MODE_TRAIN);
  nnt_model_release_plan(m, NNT_MODE_INFER);
  nnt_model_release_plan(m, NNT_MODE_EVAL);
  nnt_graph_free(m);
  m->compiled = 0;
}

/* Whether there is nothing at p to load: a save path that names something
 * else than a weight file (a folder, a FIFO, a file that cannot be read) is
 * given to the load, which says what is wrong, instead of being skipped. */
static int nothing_at(const char *p) {
  struct stat st;
  return !p || (stat(p, &st) != 0 && errno == ENOENT);
}

int nnt_model_initialize(nnt_model *m, nnt_err *e) {
  if (!m->compiled)
    return nnt_err_set(e, NNT_ERR_INVAL, "initialize: compile the model first");
  if (m->initialized)
    return nnt_err_set(e, NNT_ERR_INVAL, "initialize: the model is already initialized");
  if (m->memory_budget && m->weight_bytes > m->memory_budget)
    return nnt_err_set(e, NNT_ERR_NOMEM,
                       "[Model] memory_budget: the weights alone need %zu bytes, more than the "
                       "budget of %llu bytes",
                       m->weight_bytes, (unsigned long long)m->memory_budget);
  size_t total = m->weight_bytes / sizeof(float); /* checked at compile */
  int rc = nnt_model_plan_weights(m, &m->wmgr, e);
  if (rc) {
    nnt_err_prefix(e, "initialize: ");
    return rc;
  }
  if (m->memory_budget && m->wmgr.arena_bytes > m->memory_budget) { /* a chunk's gaps */
    rc = nnt_err_set(e, NNT_ERR_NOMEM,
                     "[Model] memory_budget: the weights need %zu bytes with the gaps that "
                     "keep each inside one of the device's %zu-byte ranges, more than the "
                     "budget of %llu bytes",
                     m->wmgr.arena_bytes, m->wmgr.chunk, (unsigned long long)m->memory_budget);
    nnt_mgr_free(&m->wmgr);
    return rc;
  }
  m->wbuf = m->wmgr.buf;
  m->wpool = m->wmgr.arena;
  m->wpool_floats = total;
  /* weight i is Philox stream i under the seed, made on the host a chunk
   * at a time and written through the buffer */
  float stage[NNT_STAGE_FLOATS];
  for (size_t i = 0; !rc && i < m->n_w; i++) {
    nnt_weight_spec *s = &m->wspec[i];
    m->w[i] = nnt_mgr_bind(&m->wmgr, (int)i, s->dim);
    size_t n = nnt_dim_len(s->dim);
    for (size_t j = 0; !rc && j < n; j += NNT_STAGE_FLOATS) {
      size_t c = n - j < NNT_STAGE_FLOATS ? n - j : NNT_STAGE_FLOATS;
      nnt_init_fill(s->init, s->fan_in, s->fan_out, m->seed, i, j, stage, c);
      rc = nnt_tensor_set(&m->w[i], j, stage, c, e);
    }
  }
  if (rc) {
    nnt_err_prefix(e, "initialize: ");
    nnt_mgr_free(&m->wmgr);
    m->wbuf = NULL;
    m->wpool = NULL;
    return rc;
  }
  m->initialized = 1;
  if ((m->continue_train || m->load_on_init) && !nothing_at(m->save_path)) {
    rc = nnt_model_load_weights(m, m->save_path, e);
    if (rc) {
      m->initialized = 0;
      nnt_mgr_free(&m->wmgr);
      m->wbuf = NULL;
      m->wpool = NULL;
      return rc;
    }
  }
  return NNT_OK;
}

int nnt_model_set_state_buffer_type(nnt_model *m, const nnt_buffer_type *state_buft,
                                    nnt_err *e) {
  if (m->compiled)
    return nnt_err_set(e, NNT_ERR_INVAL, "set state buffer type: the model is compiled; set "
                       "it before compile");
  m->state_buft = state_buft;
  return NNT_OK;
}

unsigned nnt_model_epochs(const nnt_model *m) { return m->epochs; }
unsigned nnt_model_batch_size(const nnt_model *m) { return m->batch; }
size_t nnt_model_layer_count(const nnt_model *m) { return m->n_layers; }
nnt_layer *nnt_model_layer_at(nnt_model *m, size_t i) {
  return i < m->n_layers ? m->layers[i] : NULL;
}
nnt_layer *nnt_model_find_layer(nnt_model *m, const char *name) {
  unsigned i = nnt_name_index_get(&m->layer_names, name);
  if (i != NNT_NAME_NONE)
    return m->layers[i];
  for (size_t i = 0; i < m->n_realized; i++)
    if (nnt_streq(m->realized[i]->name, name))
      return m->realized[i];
  return NULL;
}
nnt_optimizer *nnt_model_optimizer(nnt_model *m) { return m->opt; }

nnt_optimizer *nnt_model_detach_optimizer(nnt_model *m) {
  nnt_optimizer *o = m->opt;
  if (o)
    o->owned = 0;
  m->opt = NULL;
  return o;
}

nnt_dataset *nnt_model_detach_dataset(nnt_model *m, nnt_ds_mode mode) {
  if ((unsigned)mode > NNT_DS_TEST)
    return NULL;
  nnt_dataset *ds = m->ds[mode];
  m->ds[mode] = NULL;
  return ds;
}

int nnt_model_is_compiled(const nnt_model *m) { return m->compiled; }
int nnt_model_is_initialized(const nnt_model *m) { return m->initialized; }

unsigned nnt_model_input_dims(const nnt_model *m, nnt_dim *dims, unsigned max) {
  unsigned n = 0;
  for (; m->compiled && n < m->n_inputs && n < max; n++) {
    dims[n] = m->input_dim[n];
    dims[n].b = m->batch;
  }
  return n;
}
nnt_dataset *nnt_model_dataset(nnt_model *m, nnt_ds_mode mode) {
  return (unsigned)mode <= NNT_DS_TEST ? m->ds[mode] : NULL;
}
