/* Transfer learning: the weights of named layers copied from one compiled
 * model into another, with their names and shapes checked. The copy is
 * taken out of the source first and put into the destination after, so
 * the C API never holds two models at once. */
#include "nntrainer/model_impl.h"
#include "nntrainer/tensor_host.h"

#include <stdio.h>
#include <string.h>

typedef struct wc_weight {
  char layer[NNT_NAME_MAX]; /* the layer's name in the source */
  char name[32];            /* the weight's ("weight", "bias", ...) */
  unsigned index, count;    /* its place among its layer's weights */
  nnt_dim dim;
  float *data;
} wc_weight;

struct nnt_wcopy {
  size_t n;
  wc_weight *w;
};

/* Whether the destination layer nd's weights from `from` on are all LoRA
 * factors (fully_connected's loraA, loraB): such a layer takes its base
 * weights from a source layer without them, and its factors keep their
 * values (how a LoRA model starts from a base model). */
static int lora_extra(const nnt_node *nd, unsigned from) {
  if (from >= nd->fc.n_w)
    return 0;
  for (unsigned k = from; k < nd->fc.n_w; k++)
    if (strcmp(nd->fc.w[k].name, "loraA") && strcmp(nd->fc.w[k].name, "loraB"))
      return 0;
  return 1;
}

static const nnt_node *find_node(const nnt_model *m, const char *name) {
  for (size_t i = 0; i < m->n_nodes; i++)
    if (nnt_streq(m->nodes[i].layer->name, name))
      return &m->nodes[i];
  return NULL;
}

void nnt_wcopy_free(nnt_wcopy *c) {
  if (!c)
    return;
  for (size_t i = 0; i < c->n; i++)
    nnt_free(c->w[i].data);
  nnt_free(c->w);
  nnt_free(c);
}

int nnt_model_weights_take(nnt_model *src, const char *const *layers, size_t n,
                           nnt_wcopy **out, nnt_err *e) {
  if (!src->initialized)
    return nnt_err_set(e, NNT_ERR_INVAL, "copy weights: compile the source model first");
  if (!n)
    return nnt_err_set(e, NNT_ERR_INVAL, "copy weights: no layer named");
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    const nnt_node *nd = layers[i] ? find_node(src, layers[i]) : NULL;
    if (!nd)
      return nnt_err_set(e, NNT_ERR_INVAL, "copy weights: the source model has no layer '%s'",
                         layers[i] ? layers[i] : "(null)");
    total += nd->fc.n_w;
  }
  nnt_wcopy *c = nnt_calloc(1, sizeof *c);
  if (!c || !(c->w = nnt_calloc(total + 1, sizeof *c->w))) {
    nnt_free(c);
    return nnt_err_set(e, NNT_ERR_NOMEM, "copy weights: out of memory");
  }
  int rc = NNT_OK;
  for (size_t i = 0; !rc && i < n; i++) {
    const nnt_node *nd = find_node(src, layers[i]);
    for (unsigned k = 0; !rc && k < nd->fc.n_w; k++) {
      const nnt_tensor *t = &src->w[nd->w_first + k];
      wc_weight *w = &c->w[c->n];
      size_t len = nnt_dim_len(nd->fc.w[k].dim);
      snprintf(w->layer, sizeof w->layer, "%s", nd->layer->name);
      snprintf(w->name, sizeof w->name, "%s", nd->fc.w[k].name);
      w->index = k;
      w->count = nd->fc.n_w;
      w->dim = nd->fc.w[k].dim;
      size_t bad;
      float v;
      rc = nnt_tensor_find_nonfinite(t, &bad, &v, e);
      if (!rc && bad < len)
        rc = nnt_err_set(e, NNT_ERR_INVAL,
                         "copy weights: layer '%s' weight '%s' of the source model holds %g "
                         "at index %zu",
                         w->layer, w->name, v, bad);
      if (!rc && !(w->data = nnt_malloc(len * sizeof(float) + 1)))
        rc = nnt_err_set(e, NNT_ERR_NOMEM, "copy weights: out of memory");
      if (!rc && !(rc = nnt_tensor_get(t, 0, w->data, len, e)))
        c->n++;
      else if (w->data) {
        nnt_free(w->data);
        w->data = NULL;
      }
    }
  }
  if (rc) {
    nnt_wcopy_free(c);
    return rc;
  }
  *out = c;
  return NNT_OK;
}

int nnt_model_weights_put(nnt_model *dst, const nnt_wcopy *c, nnt_err *e) {
  if (!dst->initialized)
    return nnt_err_set(e, NNT_ERR_INVAL, "copy weights: compile the destination model first");
  /* check everything before changing anything */
  for (size_t i = 0; i < c->n; i++) {
    const wc_weight *w = &c->w[i];
    const nnt_node *nd = find_node(dst, w->layer);
    char a[64], b[64];
    if (!nd)
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "copy weights: the destination model has no layer '%s'", w->layer);
    if (nd->fc.n_w != w->count && !lora_extra(nd, w->count))
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "copy weights: layer '%s' has %u weights in the source model and %u "
                         "in the destination",
                         w->layer, w->count, nd->fc.n_w);
    const nnt_weight_spec *s = &nd->fc.w[w->index];
    if (strcmp(s->name, w->name) || !nnt_dim_eq(s->dim, w->dim))
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "copy weights: layer '%s' weight %u is '%s' %s in the source model "
                         "and '%s' %s in the destination",
                         w->layer, w->index, w->name, nnt_dim_str(w->dim, a, sizeof a), s->name,
                         nnt_dim_str(s->dim, b, sizeof b));
  }
  for (size_t i = 0; i < c->n; i++) {
    const wc_weight *w = &c->w[i];
    const nnt_node *nd = find_node(dst, w->layer);
    size_t wi = nd->w_first + w->index, len = nnt_dim_len(w->dim);
    int rc = nnt_tensor_set(&dst->w[wi], 0, w->data, len, e);
    /* optimizer state kept for the old values would not fit the new ones */
    for (unsigned s = 0; !rc && dst->opt_pool && nnt_model_weight_trains(dst, wi) &&
                         s < dst->opt_slots;
         s++) {
      nnt_tensor t = nnt_model_state_tensor(dst, s, wi);
      rc = nnt_tensor_memset(&t, 0, e);
    }
    if (rc) {
      nnt_err_prefix(e, "copy weights: layer '%s' weight '%s': ", w->layer, w->name);
      return rc;
    }
  }
  return NNT_OK;
}

int nnt_model_copy_layer_weights(nnt_model *dst, nnt_model *src, const char *const *layers,
                                 size_t n, nnt_err *e) {
  nnt_wcopy *c;
  int rc = nnt_model_weights_take(src, layers, n, &c, e);
  if (rc)
    return rc;
  rc = nnt_model_weights_put(dst, c, e);
  nnt_wcopy_free(c);
  return rc;
}
