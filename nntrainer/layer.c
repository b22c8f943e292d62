/* Layer instances, the registry, the shared properties and initializers. */
#include "nntrainer/layer.h"
#include "nntrainer/philox.h"
#include "nntrainer/unroll.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Adding a layer type is one row here and one file in layers/. */
static const nnt_layer_ops *const registry[] = {
    &nnt_layer_input,   &nnt_layer_fully_connected, &nnt_layer_activation,
    &nnt_layer_flatten, &nnt_layer_reshape,         &nnt_layer_dropout,
    &nnt_layer_mse,     &nnt_layer_cross_softmax,   &nnt_layer_cross_sigmoid,
    &nnt_layer_batch_normalization, &nnt_layer_addition, &nnt_layer_concat,
    &nnt_layer_split,   &nnt_layer_multiout,        &nnt_layer_identity,
    &nnt_layer_permute, &nnt_layer_upsample2d,     &nnt_layer_conv2d,
    &nnt_layer_conv1d,  &nnt_layer_pooling2d,
    &nnt_layer_lstm,    &nnt_layer_lstmcell,
    &nnt_layer_attention, &nnt_layer_multi_head_attention,
    &nnt_layer_rnn,     &nnt_layer_rnncell,       &nnt_layer_gru,
    &nnt_layer_grucell,
    &nnt_layer_embedding, &nnt_layer_layer_normalization, &nnt_layer_positional_encoding,
    &nnt_layer_add,     &nnt_layer_subtract,        &nnt_layer_multiply,
    &nnt_layer_divide,  &nnt_layer_reduce_mean,
    NULL};

/* The registered types, NULL-terminated; a static table. */
const nnt_layer_ops *const *nnt_layer_ops_all(void) { return registry; }

/* The type named type (case-insensitive), or NULL. */
const nnt_layer_ops *nnt_layer_ops_find(const char *type) {
  for (size_t i = 0; registry[i]; i++)
    if (nnt_streq(registry[i]->type, type))
      return registry[i];
  return NULL;
}

/* The type answering to an ml_train_layer_type_e value, or NULL. */
const nnt_layer_ops *nnt_layer_ops_find_ml(int ml_type) {
  for (size_t i = 0; registry[i]; i++)
    if (registry[i]->ml_type >= 0 && registry[i]->ml_type == ml_type)
      return registry[i];
  return NULL;
}

static const char *const init_names[] = {
    "zeros", "ones", "lecun_normal", "lecun_uniform",
    "xavier_normal", "xavier_uniform", "he_normal", "he_uniform"};

/* Initializer by NNTrainer's name, case-insensitive. */
int nnt_init_from_name(const char *name, nnt_init *out) {
  for (size_t i = 0; i < NNT_ARRAY_LEN(init_names); i++)
    if (nnt_streq(name, init_names[i])) {
      *out = (nnt_init)i;
      return NNT_OK;
    }
  return NNT_ERR_INVAL;
}

/* The name of an initializer; a static string. */
const char *nnt_init_name(nnt_init i) {
  return (size_t)i < NNT_ARRAY_LEN(init_names) ? init_names[i] : "?";
}

/* Fill w by an initializer, with NNTrainer's formulas (Tensor::initialize):
 * normal ones draw from a plain (not truncated) normal with std
 * sqrt(1/fan_in) (lecun), sqrt(2/(fan_in+fan_out)) (xavier), sqrt(2/fan_in)
 * (he); uniform ones from [-limit, limit] with limit sqrt(6/(fan_in+fan_out))
 * (xavier), sqrt(6/fan_in) (he) and sqrt(1/fan_in) (lecun: NNTrainer's
 * value; Keras' lecun_uniform uses sqrt(3/fan_in)). A zero fan counts as 1.
 *
 * The numbers come from Philox (philox.h) under key, stream: value i of
 * the tensor is a pure function of (key, stream, i), so any backend or
 * chunk computes its part alone. Uniform value i is (2u - 1) * limit with
 * u = nnt_philox_uniform_at(key, stream, i) (word i % 4 of counter
 * (stream, i / 4)); normal value i is Box-Muller on uniforms 2i and 2i + 1
 * of the stream (words 2(i % 2) and 2(i % 2) + 1 of counter (stream,
 * i / 2)): std * sqrt(-2 ln(1 - u0)) * cos(2 pi u1). */
void nnt_init_fill(nnt_init init, unsigned fan_in, unsigned fan_out, uint64_t key,
                   uint64_t stream, size_t first, float *w, size_t n) {
  double fi = fan_in ? fan_in : 1, fo = fan_out ? fan_out : 1;
  double std = 0, limit = 0;
  int normal = 0;
  switch (init) {
  case NNT_INIT_ZEROS:
  case NNT_INIT_ONES:
    for (size_t i = 0; i < n; i++)
      w[i] = init == NNT_INIT_ONES ? 1.0f : 0.0f;
    return;
  case NNT_INIT_LECUN_NORMAL:
    normal = 1, std = sqrt(1.0 / fi);
    break;
  case NNT_INIT_LECUN_UNIFORM:
    limit = sqrt(1.0 / fi);
    break;
  case NNT_INIT_XAVIER_NORMAL:
    normal = 1, std = sqrt(2.0 / (fi + fo));
    break;
  case NNT_INIT_XAVIER_UNIFORM:
    limit = sqrt(6.0 / (fi + fo));
    break;
  case NNT_INIT_HE_NORMAL:
    normal = 1, std = sqrt(2.0 / fi);
    break;
  case NNT_INIT_HE_UNIFORM:
    limit = sqrt(6.0 / fi);
    break;
  }
  /* one Philox call gives 4 uniforms: 4 uniform values or 2 normal ones */
  unsigned per = normal ? 2 : 4;
  nnt_philox_out r = {{0}};
  uint64_t ctr = UINT64_MAX;
  for (size_t j = 0; j < n; j++) {
    uint64_t i = (uint64_t)first + j;
    if (i / per != ctr)
      ctr = i / per, r = nnt_philox(key, stream, ctr);
    unsigned word = (unsigned)(i % per) * (normal ? 2 : 1);
    if (normal) {
      double u0 = nnt_philox_u01(r.v[word]), u1 = nnt_philox_u01(r.v[word + 1]);
      w[j] = (float)(std * sqrt(-2.0 * log(1.0 - u0)) * cos(6.283185307179586 * u1));
    } else {
      w[j] = (float)((2.0 * nnt_philox_u01(r.v[word]) - 1.0) * limit);
    }
  }
}

/* NNTrainer's defaults: xavier_uniform weights, zero biases, no
 * regularizer (constant 1.0 when l2norm is chosen), no decay, with bias. */
void nnt_weight_props_init(nnt_weight_props *p) {
  memset(p, 0, sizeof *p);
  p->weight_init = NNT_INIT_XAVIER_UNIFORM;
  p->bias_init = NNT_INIT_ZEROS;
  p->l2_constant = 1.0f;
}

int nnt_parse_init(const char *key, const char *v, nnt_init *out, nnt_err *e) {
  if (nnt_init_from_name(v, out))
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "key '%s': unknown initializer '%s' (zeros, ones, lecun_normal, "
                       "lecun_uniform, xavier_normal, xavier_uniform, he_normal, he_uniform)",
                       key, v);
  return NNT_OK;
}

/* Set one of the shared weight keys; NNT_ERR_NOKEY for any other key. */
int nnt_weight_props_set(nnt_weight_props *p, const char *key, const char *value,
                         nnt_err *e) {
  if (nnt_streq(key, "weight_initializer"))
    return nnt_parse_init(key, value, &p->weight_init, e);
  if (nnt_streq(key, "bias_initializer"))
    return nnt_parse_init(key, value, &p->bias_init, e);
  if (nnt_streq(key, "weight_regularizer")) {
    if (nnt_streq(value, "l2norm"))
      p->l2norm = 1;
    else if (nnt_streq(value, "none"))
      p->l2norm = 0;
    else
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "key '%s': unknown regularizer '%s' (l2norm, none)", key, value);
    return NNT_OK;
  }
  if (nnt_streq(key, "weight_regularizer_constant"))
    return nnt_parse_nonneg_float(key, value, &p->l2_constant, e);
  if (nnt_streq(key, "weight_decay"))
    return nnt_parse_nonneg_float(key, value, &p->weight_decay, e);
  if (nnt_streq(key, "bias_decay"))
    return nnt_parse_nonneg_float(key, value, &p->bias_decay, e);
  if (nnt_streq(key, "disable_bias"))
    return nnt_parse_bool(key, value, &p->disable_bias, e);
  return NNT_ERR_NOKEY;
}

int nnt_check_gemm_dim(size_t v, const char *what, nnt_err *e) {
  if (v <= NNT_GEMM_DIM_MAX)
    return NNT_OK;
  return nnt_err_set(e, NNT_ERR_INVAL,
                     "%s: %zu is more than the %zu a matrix product takes", what, v,
                     NNT_GEMM_DIM_MAX);
}

/* Append a weight request to ctx. Returns its index, or NNT_MAX_WEIGHTS (and
 * records nothing) when the table is full. */
unsigned nnt_fctx_add_weight(nnt_finalize_ctx *ctx, const char *name, nnt_dim dim,
                             nnt_init init, unsigned fan_in, unsigned fan_out, float l2,
                             float decay, int trainable) {
  if (ctx->n_w >= NNT_MAX_WEIGHTS) {
    ctx->overfull = 1;
    return NNT_MAX_WEIGHTS;
  }
  nnt_weight_spec *s = &ctx->w[ctx->n_w];
  memset(s, 0, sizeof *s);
  snprintf(s->name, sizeof s->name, "%s", name);
  s->dim = dim;
  s->init = init;
  s->fan_in = fan_in;
  s->fan_out = fan_out;
  s->l2 = l2;
  s->decay = decay;
  s->trainable = trainable;
  return ctx->n_w++;
}

/* Append a scratch request; NNT_MAX_SCRATCH when the table is full. */
unsigned nnt_fctx_add_scratch(nnt_finalize_ctx *ctx, nnt_dim dim, nnt_scratch_life life) {
  if (ctx->n_scratch >= NNT_MAX_SCRATCH) {
    ctx->overfull = 1;
    return NNT_MAX_SCRATCH;
  }
  ctx->scratch_dim[ctx->n_scratch] = dim;
  ctx->scratch_life[ctx->n_scratch] = life;
  return ctx->n_scratch++;
}

/* A new layer of a registered type with zeroed private state, trainable, and
 * its type's defaults. The caller owns *out (nnt_layer_destroy). */
int nnt_layer_create(const char *type, nnt_layer **out, nnt_err *e) {
  const nnt_layer_ops *ops = type ? nnt_layer_ops_find(type) : NULL;
  if (!ops)
    return nnt_err_set(e, NNT_ERR_INVAL, "unknown layer type '%s'", type ? type : "(null)");
  nnt_layer *l = nnt_calloc(1, sizeof *l);
  void *priv = ops->priv_size ? nnt_calloc(1, ops->priv_size) : NULL;
  if (!l || (ops->priv_size && !priv)) {
    nnt_free(l);
    nnt_free(priv);
    return nnt_err_set(e, NNT_ERR_NOMEM, "out of memory creating a '%s' layer", type);
  }
  l->ops = ops;
  l->priv = priv;
  l->trainable = 1;
  if (ops->init)
    ops->init(l);
  *out = l;
  return NNT_OK;
}

/* Free a layer and what its type holds; NULL is a no-op. */
void nnt_layer_destroy(nnt_layer *l) {
  if (!l)
    return;
  for (size_t i = 0; i < l->n_props; i++) {
    nnt_free(l->prop_key[i]);
    nnt_free(l->prop_val[i]);
  }
  nnt_free(l->prop_key);
  nnt_free(l->prop_val);
  if (l->ops->destroy)
    l->ops->destroy(l);
  nnt_free(l->priv);
  nnt_free(l);
}

/* Copy without surrounding spaces, lowercased. 0 if it does not fit. */
static int clean_name(const char *s, char *out, size_t n) {
  while (*s && isspace((unsigned char)*s))
    s++;
  size_t len = strlen(s);
  while (len && isspace((unsigned char)s[len - 1]))
    len--;
  if (!len || len >= n)
    return 0;
  for (size_t i = 0; i < len; i++)
    out[i] = (char)tolower((unsigned char)s[i]);
  out[len] = '\0';
  return 1;
}

static int set_input_layers(nnt_layer *l, const char *v, nnt_err *e) {
  char buf[NNT_MAX_IO * NNT_NAME_MAX];
  if (strlen(v) >= sizeof buf)
    return nnt_err_set(e, NNT_ERR_INVAL, "key 'input_layers': value too long");
  strcpy(buf, v);
  unsigned n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    size_t len = strlen(tok);
    while (len && isspace((unsigned char)tok[len - 1]))
      tok[--len] = '\0';
    if (n == NNT_MAX_IO)
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'input_layers': more than %d inputs",
                         NNT_MAX_IO);
    unsigned idx = 0;
    char *paren = strchr(tok, '(');
    if (paren) {
      char *close = strchr(paren, ')');
      if (!close || close[1] != '\0' || close == paren + 1)
        return nnt_err_set(e, NNT_ERR_INVAL,
                           "key 'input_layers': '%s' is not name or name(index)", tok);
      *close = '\0';
      if (nnt_parse_uint("input_layers", paren + 1, &idx, NULL))
        return nnt_err_set(e, NNT_ERR_INVAL,
                           "key 'input_layers': bad output index in '%s)'", tok);
      *paren = '\0';
    }
    if (!clean_name(tok, l->input_names[n], NNT_NAME_MAX))
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'input_layers': empty or too long name in '%s'",
                         v);
    l->input_idx[n++] = idx;
  }
  if (!n)
    return nnt_err_set(e, NNT_ERR_INVAL, "key 'input_layers': empty value");
  l->n_inputs = n;
  return NNT_OK;
}

/* Remember key = value (replacing an earlier value of the key). */
static int record_prop(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  if (nnt_streq(key, "name") || nnt_streq(key, "type"))
    return NNT_OK;
  size_t i = 0;
  while (i < l->n_props && !nnt_streq(l->prop_key[i], key))
    i++;
  char *v = nnt_strdup(value);
  if (!v)
    return nnt_err_set(e, NNT_ERR_NOMEM, "out of memory keeping key '%s'", key);
  if (i < l->n_props) {
    nnt_free(l->prop_val[i]);
    l->prop_val[i] = v;
    return NNT_OK;
  }
  char *k = nnt_strdup(key);
  char **nk = k ? nnt_realloc(l->prop_key, (l->n_props + 1) * sizeof *nk) : NULL;
  if (nk)
    l->prop_key = nk;
  char **nv = nk ? nnt_realloc(l->prop_val, (l->n_props + 1) * sizeof *nv) : NULL;
  if (!nv) {
    nnt_free(k);
    nnt_free(v);
    return nnt_err_set(e, NNT_ERR_NOMEM, "out of memory keeping key '%s'", key);
  }
  l->prop_val = nv;
  for (char *c = k; *c; c++)
    *c = (char)tolower((unsigned char)*c);
  l->prop_key[l->n_props] = k;
  l->prop_val[l->n_props++] = v;
  return NNT_OK;
}

static int set_property(nnt_layer *l, const char *key, const char *value, nnt_err *e);

/* The type's own keys first, then the keys every layer has; the parsed
 * values drive the layer, the strings are kept for writing an INI. */
int nnt_layer_set_property(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  if (!l || !key || !value)
    return nnt_err_set(e, NNT_ERR_INVAL, "layer property: NULL argument");
  int rc = set_property(l, key, value, e);
  return rc ? rc : record_prop(l, key, value, e);
}

static int set_property(nnt_layer *l, const char *key, const char *value, nnt_err *e) {
  int rc = NNT_ERR_NOKEY;
  if (l->ops->set_property)
    rc = l->ops->set_property(l, key, value, e);
  if (rc != NNT_ERR_NOKEY)
    return rc;
  if (nnt_streq(key, "name")) {
    if (!clean_name(value, l->name, sizeof l->name))
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'name': '%s' is empty or too long", value);
    return NNT_OK;
  }
  if (nnt_streq(key, "type")) {
    if (!nnt_streq(value, l->ops->type))
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'type': '%s' differs from the layer's type '%s'",
                         value, l->ops->type);
    return NNT_OK;
  }
  if (nnt_streq(key, "input_shape")) {
    nnt_dim d;
    if ((rc = nnt_dim_parse(key, value, &d, e)))
      return rc;
    l->input_shape = d;
    l->input_shape.b = 1;
    l->has_input_shape = 1;
    return NNT_OK;
  }
  if (nnt_streq(key, "input_layers"))
    return set_input_layers(l, value, e);
  if (nnt_streq(key, "activation")) {
    if (nnt_act_from_name(value, &l->activation))
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'activation': unknown activation '%s'", value);
    l->has_activation = 1;
    return NNT_OK;
  }
  if (nnt_streq(key, "flatten"))
    return nnt_parse_bool(key, value, &l->flatten, e);
  if (nnt_streq(key, "trainable"))
    return nnt_parse_bool(key, value, &l->trainable, e);
  if (nnt_streq(key, "shared_from")) {
    if (!clean_name(value, l->shared_from, sizeof l->shared_from))
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'shared_from': '%s' is empty or too long",
                         value);
    return NNT_OK;
  }
  if (nnt_streq(key, "engine")) {
    if (nnt_engine_from_name(value, &l->engine))
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'engine': unknown engine '%s' (cpu, gpu, qnn)",
                         value);
    l->has_engine = 1;
    return NNT_OK;
  }
  if (nnt_unroll_is_key(key)) /* kept as given; the compile unrolls (unroll.c) */
    return nnt_unroll_check_value(key, value, e);
  return nnt_err_set(e, NNT_ERR_INVAL, "unknown key '%s' for layer type '%s'", key,
                     l->ops->type);
}

/* Whether key was given: the record of given keys keeps every key that was
 * set successfully (but not name and type). */
int nnt_layer_has_key(const nnt_layer *l, const char *key) {
  for (size_t i = 0; i < l->n_props; i++)
    if (nnt_streq(l->prop_key[i], key))
      return 1;
  return 0;
}

void nnt_layer_log_defaults(const nnt_layer *l) {
  if (l && l->ops->log_defaults && nnt_log_enabled(NNT_LOG_MAX_LEVEL))
    l->ops->log_defaults(l);
}

void nnt_layer_notice_default(const nnt_layer *l, const char *key, const char *used,
                              const char *why) {
  nnt_log(NNT_LOG_NOTICE, "layer '%s' (%s): key '%s' not given: using %s (%s)", l->name,
          l->ops->type, key, used, why);
}
