/* Weight sharing and the weight table. A layer with `shared_from = other`
 * (NNTrainer's key) uses the weights of `other` instead of its own: the
 * compile resolves the key (a chain leads to the layer that has none, the
 * owner), checks that both layers are of one type with weights of the same
 * names and shapes, and builds the model's weight table in which a shared
 * weight appears once. Every sharing node's run context points at the same
 * tensors; each computes its own gradient, and the schedule adds them up
 * (schedule.c, NNT_STEP_ACCUMULATE_GRADIENT) before the one update. */
#include "nntrainer/model_impl.h"

#include <stdio.h>
#include <string.h>

/* The node of each name in the compiled graph (the user's layers and the
 * layers the compile added: an unrolled copy shares its step 0's weights
 * by name), into idx. */
static int node_names(const nnt_model *m, nnt_name_index *idx, nnt_err *e) {
  for (size_t i = 0; i < m->n_nodes; i++)
    if (nnt_name_index_put(idx, m->nodes[i].layer->name, (unsigned)i, NULL) < 0)
      return nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory");
  return NNT_OK;
}

/* The owner of node i's weights in *owner: shared_from followed from its
 * layer to a layer without the key. seen[] holds a stamp per node (i + 1
 * marks the nodes this walk has passed). */
static int resolve_owner(const nnt_model *m, const nnt_name_index *nodes, unsigned *seen,
                         unsigned i, unsigned *owner, nnt_err *e) {
  const nnt_layer *start = m->nodes[i].layer, *l = start;
  char chain[NNT_ERR_MSG_MAX / 2];
  int n = snprintf(chain, sizeof chain, "'%s'", start->name);
  if (nnt_streq(start->shared_from, start->name))
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "[%s] shared_from: '%s' names the layer itself; a layer shares another "
                       "layer's weights", start->name, start->shared_from);
  unsigned k = i;
  seen[k] = i + 1;
  while (l->shared_from[0]) {
    unsigned next = nnt_name_index_get(nodes, l->shared_from);
    if (next == NNT_NAME_NONE &&
        nnt_name_index_get(&m->layer_names, l->shared_from) != NNT_NAME_NONE)
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "[%s] shared_from = %s: layer '%s' is not in the compiled graph (a loss "
                         "layer or an unroll_for group replaced it)", start->name,
                         start->shared_from, l->shared_from);
    if (next == NNT_NAME_NONE)
      return nnt_err_set(e, NNT_ERR_INVAL, "[%s] shared_from: no layer named '%s'%s%s%s",
                         start->name, l->shared_from, l == start ? "" : " (the shared_from of '",
                         l == start ? "" : l->name, l == start ? "" : "')");
    if (n > 0 && (size_t)n < sizeof chain)
      n += snprintf(chain + n, sizeof chain - n, " -> '%s'", m->nodes[next].layer->name);
    if (seen[next] == i + 1)
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "[%s] shared_from = %s: the shared_from keys form a cycle (%s), so no "
                         "layer owns the weights", start->name, start->shared_from, chain);
    seen[next] = i + 1;
    l = m->nodes[next].layer;
    k = next;
  }
  *owner = k;
  return NNT_OK;
}

/* A sharer and its owner: one type, and weights of the same names and
 * shapes, in the same order. The error names both layers and the first
 * weight that differs. */
static int check_same(const nnt_node *a, const nnt_node *b, nnt_err *e) {
  const nnt_layer *la = a->layer, *lb = b->layer;
  if (la->ops != lb->ops)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "[%s] shared_from = %s: '%s' is a %s layer but '%s', whose weights it "
                       "would use, is a %s layer", la->name, la->shared_from, la->name,
                       la->ops->type, lb->name, lb->ops->type);
  unsigned n = a->fc.n_w > b->fc.n_w ? a->fc.n_w : b->fc.n_w;
  for (unsigned w = 0; w < n; w++) {
    char da[64], db[64];
    if (w >= a->fc.n_w || w >= b->fc.n_w) {
      const nnt_layer *has = w < a->fc.n_w ? la : lb, *lacks = w < a->fc.n_w ? lb : la;
      const nnt_node *hn = w < a->fc.n_w ? a : b;
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "[%s] shared_from = %s: weight '%s' of '%s' has no counterpart in "
                         "'%s'", la->name, la->shared_from, hn->fc.w[w].name, has->name,
                         lacks->name);
    }
    if (strcmp(a->fc.w[w].name, b->fc.w[w].name))
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "[%s] shared_from = %s: weight %u is '%s' in '%s' but '%s' in '%s'",
                         la->name, la->shared_from, w, a->fc.w[w].name, la->name,
                         b->fc.w[w].name, lb->name);
    if (!nnt_dim_eq(a->fc.w[w].dim, b->fc.w[w].dim))
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "[%s] shared_from = %s: weight '%s' is %s in '%s' but %s in '%s'",
                         la->name, la->shared_from, a->fc.w[w].name,
                         nnt_dim_str(a->fc.w[w].dim, da, sizeof da), la->name,
                         nnt_dim_str(b->fc.w[w].dim, db, sizeof db), lb->name);
  }
  return NNT_OK;
}

/* Each node's owner (itself without shared_from), checked, into owner[]. */
static int resolve_all(nnt_model *m, unsigned *owner, nnt_err *e) {
  unsigned *seen = nnt_calloc(m->n_nodes ? m->n_nodes : 1, sizeof *seen);
  nnt_name_index nodes = {0};
  int rc = seen ? node_names(m, &nodes, e)
                : nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory");
  for (size_t i = 0; !rc && i < m->n_nodes; i++) {
    owner[i] = (unsigned)i;
    if (!m->nodes[i].layer->shared_from[0])
      continue;
    rc = resolve_owner(m, &nodes, seen, (unsigned)i, &owner[i], e);
    if (!rc)
      rc = check_same(&m->nodes[i], &m->nodes[owner[i]], e);
  }
  nnt_name_index_free(&nodes);
  nnt_free(seen);
  return rc;
}

/* The weight table. A group of nodes sharing weights (one owner) has:
 * grad_sum, the last member in graph order that computes gradients (the
 * first to do so in backward order: its gradients become the sums); and
 * grad_apply, the first member in graph order, whose apply_gradient step
 * comes after every member's backward steps (which read the weights).
 * As in NNTrainer, which saves a shared weight where its gradient is first
 * touched (layer_devel.h, isGradientFirstAccess) and otherwise where the
 * weight first is, the group's weights sit in the table (and so in the
 * weight file, with their optimizer state) at grad_sum's position, or the
 * first member's when no member trains. */
int nnt_graph_weights(nnt_model *m, nnt_err *e) {
  size_t n = m->n_nodes, nn = n ? n : 1;
  unsigned *owner = nnt_malloc(3 * nn * sizeof *owner);
  if (!owner)
    return nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory");
  unsigned *first = owner + nn, *sum = first + nn;
  int rc = resolve_all(m, owner, e);
  for (size_t i = 0; !rc && i < n; i++)
    first[i] = sum[i] = NNT_NO_NODE;
  for (size_t i = 0; !rc && i < n; i++) {
    unsigned r = owner[i];
    if (first[r] == NNT_NO_NODE)
      first[r] = (unsigned)i;
    if (m->nodes[i].do_grad)
      sum[r] = (unsigned)i;
  }
  m->n_w = 0;
  for (size_t i = 0; !rc && i < n; i++) {
    nnt_node *nd = &m->nodes[i];
    unsigned r = owner[i];
    nd->w_owner = r;
    nd->grad_sum = sum[r] != NNT_NO_NODE ? sum[r] : (unsigned)i;
    nd->grad_apply = first[r];
    nd->n_w = nd->fc.n_w;
    if (i == (sum[r] != NNT_NO_NODE ? sum[r] : first[r])) {
      nd->w_first = m->n_w;
      m->n_w += nd->fc.n_w;
    }
  }
  if (!rc) {
    m->wspec = nnt_calloc(m->n_w ? m->n_w : 1, sizeof *m->wspec);
    m->w = nnt_calloc(m->n_w ? m->n_w : 1, sizeof *m->w);
    m->w_node = nnt_calloc(m->n_w ? m->n_w : 1, sizeof *m->w_node);
    if (!m->wspec || !m->w || !m->w_node)
      rc = nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory");
  }
  for (size_t i = 0; !rc && i < n; i++) {
    nnt_node *nd = &m->nodes[i];
    unsigned r = owner[i], save = sum[r] != NNT_NO_NODE ? sum[r] : first[r];
    nd->w_first = m->nodes[save].w_first;
    if (i != save)
      continue;
    /* the owner's initializers and regularizers */
    for (unsigned w = 0; w < nd->fc.n_w; w++) {
      m->wspec[nd->w_first + w] = m->nodes[r].fc.w[w];
      m->w[nd->w_first + w].dim = nd->fc.w[w].dim;
      m->w_node[nd->w_first + w] = (unsigned)i;
    }
  }
  nnt_free(owner);
  return rc;
}
