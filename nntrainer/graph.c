/* Graph compile: realize the keys that add nodes (activation=, flatten=,
 * loss=; unroll_for= in unroll.c), resolve input_layers, sort topologically, infer shapes through
 * each layer's finalize, and build the schedule (schedule.c). */
#include "nntrainer/graph_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int is_type(const nnt_layer *l, const nnt_layer_ops *ops) {
  return l->ops == ops;
}

static int is_loss_type(const nnt_layer *l) {
  return is_type(l, &nnt_layer_mse) || is_type(l, &nnt_layer_cross_softmax) ||
         is_type(l, &nnt_layer_cross_sigmoid);
}

static int push_node(build *b, nnt_layer *l, nnt_err *e) {
  if (b->n == b->cap) {
    size_t cap = b->cap ? 2 * b->cap : 32;
    gnode *g = nnt_realloc(b->g, cap * sizeof *g);
    if (!g)
      return nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory");
    b->g = g;
    b->cap = cap;
  }
  memset(&b->g[b->n], 0, sizeof b->g[b->n]);
  b->g[b->n].l = l;
  b->g[b->n].head = (unsigned)b->n;
  b->n++;
  return NNT_OK;
}

/* Create a layer the compile adds; the model owns it (graph_impl.h). */
int nnt_graph_realize(build *b, const char *type, const char *name, int input_prev,
                      nnt_layer **out, nnt_err *e) {
  nnt_model *m = b->m;
  nnt_layer *l = NULL;
  int rc = nnt_layer_create(type, &l, e);
  if (rc)
    return rc;
  /* the list doubles at powers of two, so n layers cost O(n) copying */
  size_t n = m->n_realized;
  if (!n || (n >= 4 && !(n & (n - 1)))) {
    nnt_layer **r = nnt_realloc(m->realized, (n ? 2 * n : 4) * sizeof *r);
    if (!r) {
      nnt_layer_destroy(l);
      return nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory");
    }
    m->realized = r;
  }
  m->realized[m->n_realized++] = l;
  l->owned = 1;
  snprintf(l->name, sizeof l->name, "%s", name);
  *out = l;
  rc = push_node(b, l, e);
  if (rc)
    return rc;
  gnode *g = &b->g[b->n - 1];
  g->fixed = 1;
  if (input_prev) {
    /* realized right after the node it follows */
    g->n_in = 1;
    g->in[0] = (unsigned)b->n - 2;
    g->in_idx[0] = 0;
    g->head = b->g[b->n - 2].head;
  }
  return NNT_OK;
}

/* Pass 1: section order, with activation and flatten nodes after their
 * layer; a layer's name then stands for the end of its chain. */
static int realize_chains(build *b, nnt_err *e) {
  nnt_model *m = b->m;
  char name[NNT_NAME_MAX + 32];
  for (size_t i = 0; i < m->n_layers; i++) {
    nnt_layer *u = m->layers[i];
    int rc = push_node(b, u, e);
    if (rc)
      return rc;
    unsigned end = (unsigned)b->n - 1;
    nnt_layer *r;
    if (u->has_activation && u->activation != NNT_ACT_NONE &&
        !is_type(u, &nnt_layer_activation)) {
      snprintf(name, sizeof name, "%s/activation_realized", u->name);
      if ((rc = nnt_graph_realize(b, "activation", name, 1, &r, e)))
        return rc;
      if ((rc = nnt_layer_set_property(r, "activation", nnt_act_name(u->activation), e)))
        return rc;
      end = (unsigned)b->n - 1;
    }
    if (u->flatten && !is_type(u, &nnt_layer_flatten)) {
      snprintf(name, sizeof name, "%s/flatten_realized", u->name);
      if ((rc = nnt_graph_realize(b, "flatten", name, 1, &r, e)))
        return rc;
      end = (unsigned)b->n - 1;
    }
    rc = nnt_name_index_put(&b->alias, u->name, end, NULL);
    if (rc < 0)
      return nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory");
    if (rc)
      return nnt_err_set(e, NNT_ERR_INVAL, "layer name '%s' is used twice", u->name);
  }
  return NNT_OK;
}

/* Pass 2: resolve input_layers (default: the previous section). */
static int resolve_inputs(build *b, nnt_err *e) {
  unsigned prev_end = NNT_NO_NODE;
  /* a name that is no layer's may still be a node's (a realized one); the
   * last node of a name wins, so the index is filled from the end */
  for (size_t i = b->n; i-- > 0;)
    if (nnt_name_index_put(&b->names, b->g[i].l->name, (unsigned)i, NULL) < 0)
      return nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory");
  for (size_t i = 0; i < b->n; i++) {
    gnode *g = &b->g[i];
    nnt_layer *l = g->l;
    if (g->fixed) {
    } else if (l->n_inputs) {
      g->n_in = l->n_inputs;
      for (unsigned k = 0; k < l->n_inputs; k++) {
        unsigned p = nnt_name_index_get(&b->alias, l->input_names[k]);
        if (p == NNT_NAME_NONE)
          p = nnt_name_index_get(&b->names, l->input_names[k]);
        if (p == NNT_NAME_NONE)
          return nnt_err_set(e, NNT_ERR_INVAL,
                             "[%s] input_layers: no layer named '%s'", l->name,
                             l->input_names[k]);
        if (p == i)
          return nnt_err_set(e, NNT_ERR_INVAL,
                             "[%s] input_layers: a layer cannot be its own input", l->name);
        g->in[k] = p;
        g->in_idx[k] = l->input_idx[k];
      }
    } else if (prev_end != NNT_NO_NODE && !is_type(l, &nnt_layer_input) &&
               !l->has_input_shape) {
      g->n_in = 1;
      g->in[0] = prev_end;
      g->in_idx[0] = 0;
    } else {
      g->n_in = 0; /* a graph input: needs input_shape */
      if (!l->has_input_shape)
        return nnt_err_set(e, NNT_ERR_INVAL,
                           "[%s] input_shape: the first layer needs input_shape "
                           "(or input_layers)", l->name);
    }
    /* the end of this layer's chain is the default input of the next
     * section; realized nodes follow their layer directly */
    prev_end = (unsigned)i;
  }
  return NNT_OK;
}

/* The one node no other node reads, in *out; @return how many there are. */
static int find_outputs(const build *b, unsigned *out, unsigned *n_out, nnt_err *e) {
  unsigned char *read = nnt_calloc(b->n, 1);
  if (!read)
    return nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory");
  for (size_t i = 0; i < b->n; i++)
    for (unsigned k = 0; !b->g[i].removed && k < b->g[i].n_in; k++)
      read[b->g[i].in[k]] = 1;
  *n_out = 0;
  for (size_t i = 0; i < b->n; i++)
    if (!b->g[i].removed && !read[i]) {
      *out = (unsigned)i;
      ++*n_out;
    }
  nnt_free(read);
  return NNT_OK;
}

/* loss = mse | cross | cross_softmax | cross_sigmoid: add the loss node. */
static int realize_loss(build *b, nnt_err *e) {
  nnt_model *m = b->m;
  if (m->loss == NNT_LOSS_NONE)
    return NNT_OK;
  unsigned out = NNT_NO_NODE, n_out = 0;
  int rc0 = find_outputs(b, &out, &n_out, e);
  if (rc0)
    return rc0;
  if (n_out != 1)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "[Model] loss: the model has %u output layers; a loss key "
                       "needs exactly one", n_out);
  gnode *o = &b->g[out];
  if (is_loss_type(o->l))
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "[Model] loss: layer '%s' is already a loss layer", o->l->name);
  const char *type = "mse";
  int replace = 0;
  nnt_act act = NNT_ACT_NONE;
  if (is_type(o->l, &nnt_layer_activation))
    act = o->l->activation;
  if (m->loss == NNT_LOSS_CROSS) {
    if (act == NNT_ACT_SOFTMAX)
      type = "cross_softmax";
    else if (act == NNT_ACT_SIGMOID)
      type = "cross_sigmoid";
    else
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "[Model] loss: 'cross' needs the last layer's activation to "
                         "be softmax or sigmoid ('%s' has %s)",
                         o->l->name,
                         is_type(o->l, &nnt_layer_activation) ? nnt_act_name(act) : "none");
    replace = 1;
  } else if (m->loss == NNT_LOSS_CROSS_SOFTMAX) {
    type = "cross_softmax";
    replace = act == NNT_ACT_SOFTMAX;
  } else if (m->loss == NNT_LOSS_CROSS_SIGMOID) {
    type = "cross_sigmoid";
    replace = act == NNT_ACT_SIGMOID;
  }
  /* named after the user's layer, not its realized activation */
  char name[NNT_NAME_MAX + 16];
  snprintf(name, sizeof name, "%.*s/loss_realized", (int)strcspn(o->l->name, "/"), o->l->name);
  nnt_layer *r;
  unsigned in = out, in_idx = 0;
  if (replace) {
    if (o->n_in != 1)
      return nnt_err_set(e, NNT_ERR_INVAL, "[%s] activation with %u inputs", o->l->name, o->n_in);
    in = o->in[0];
    in_idx = o->in_idx[0];
    o->removed = 1;
  }
  int rc = nnt_graph_realize(b, type, name, 0, &r, e);
  if (rc)
    return rc;
  gnode *g = &b->g[b->n - 1];
  g->n_in = 1;
  g->in[0] = in;
  g->in_idx[0] = in_idx;
  return NNT_OK;
}

/* Consumers of every node as lists (CSR): the consumers of i are
 * adj[start[i] .. start[i + 1]), each once, in node order. */
static int consumer_lists(const build *b, size_t **start_out, unsigned **adj_out, nnt_err *e) {
  size_t n = b->n, edges = 0;
  size_t *start = nnt_calloc(n + 1, sizeof *start);
  for (size_t j = 0; start && j < n; j++)
    for (unsigned k = 0; !b->g[j].removed && k < b->g[j].n_in; k++) {
      unsigned p = b->g[j].in[k], dup = 0;
      for (unsigned q = 0; q < k; q++)
        dup |= b->g[j].in[q] == p;
      if (!dup)
        start[p + 1]++, edges++;
    }
  unsigned *adj = start ? nnt_malloc((edges ? edges : 1) * sizeof *adj) : NULL;
  size_t *fill = adj ? nnt_malloc((n ? n : 1) * sizeof *fill) : NULL;
  if (!fill) {
    nnt_free(start), nnt_free(adj);
    return nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory");
  }
  for (size_t i = 0; i < n; i++) {
    start[i + 1] += start[i];
    fill[i] = start[i];
  }
  for (size_t j = 0; j < n; j++)
    for (unsigned k = 0; !b->g[j].removed && k < b->g[j].n_in; k++) {
      unsigned p = b->g[j].in[k], dup = 0;
      for (unsigned q = 0; q < k; q++)
        dup |= b->g[j].in[q] == p;
      if (!dup)
        adj[fill[p]++] = (unsigned)j;
    }
  nnt_free(fill);
  *start_out = start;
  *adj_out = adj;
  return NNT_OK;
}

/* Postorder of a depth-first walk along consumers, from each node in
 * order, with an explicit stack (a chain of many layers must not overflow
 * the thread's stack). A consumer met on the current path is a cycle. */
static int walk_consumers(build *b, unsigned *post, size_t *n_post, nnt_err *e) {
  size_t n = b->n, *start = NULL, *next;
  unsigned *adj = NULL;
  int rc = consumer_lists(b, &start, &adj, e);
  if (rc)
    return rc;
  unsigned char *mark = nnt_calloc(n ? n : 1, 1); /* 0 new, 1 on the path, 2 done */
  unsigned *stack = nnt_malloc((n ? n : 1) * sizeof *stack);
  next = nnt_malloc((n ? n : 1) * sizeof *next);
  if (!mark || !stack || !next)
    rc = nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory");
  for (size_t root = 0; !rc && root < n; root++) {
    if (b->g[root].removed || mark[root])
      continue;
    size_t sp = 0;
    stack[sp++] = (unsigned)root;
    mark[root] = 1;
    next[root] = start[root];
    while (sp && !rc) {
      unsigned v = stack[sp - 1];
      if (next[v] == start[v + 1]) {
        mark[v] = 2;
        post[(*n_post)++] = v;
        sp--;
        continue;
      }
      unsigned j = adj[next[v]++];
      if (mark[j] == 1)
        rc = nnt_err_set(e, NNT_ERR_INVAL, "[%s] input_layers: the layers form a cycle",
                         b->g[j].l->name);
      else if (!mark[j]) {
        mark[j] = 1;
        next[j] = start[j];
        stack[sp++] = j;
      }
    }
  }
  nnt_free(start), nnt_free(adj), nnt_free(mark), nnt_free(stack), nnt_free(next);
  return rc;
}

/* Every shape a layer gave at finalize must have a byte size that fits;
 * each layer checks the arithmetic of its own keys, and this catches what
 * none of them names (a wrapped or empty shape). */
static int check_sizes(const nnt_finalize_ctx *fc, nnt_err *e) {
  char what[64];
  int rc = NNT_OK;
  for (unsigned o = 0; o < fc->n_out && !rc; o++) {
    snprintf(what, sizeof what, "output %u", o);
    rc = nnt_dim_check(fc->out_dim[o], what, NULL, NULL, e);
  }
  for (unsigned w = 0; w < fc->n_w && !rc; w++) {
    snprintf(what, sizeof what, "weight '%s'", fc->w[w].name);
    rc = nnt_dim_check(fc->w[w].dim, what, NULL, NULL, e);
  }
  for (unsigned s = 0; s < fc->n_scratch && !rc; s++) {
    snprintf(what, sizeof what, "scratch tensor %u", s);
    rc = nnt_dim_check(fc->scratch_dim[s], what, NULL, NULL, e);
  }
  return rc;
}

static int finalize_nodes(nnt_model *m, nnt_err *e);
static int finalize_each(nnt_model *m, const unsigned *cons, const unsigned *refs,
                         nnt_err *e);

static int sort_and_finalize(build *b, nnt_err *e) {
  nnt_model *m = b->m;
  size_t live = 0;
  for (size_t i = 0; i < b->n; i++)
    live += !b->g[i].removed;
  m->nodes = nnt_calloc(live, sizeof *m->nodes);
  unsigned *pos = nnt_malloc(b->n * sizeof *pos);
  if (!m->nodes || !pos) {
    nnt_free(pos);
    return nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory");
  }
  /* Reverse postorder of a depth-first walk along consumers, started from
   * each layer in section order: the order NNTrainer sorts its graph in, so
   * weight files match (a branch a -> {c, d} runs and saves a, d, c). */
  unsigned *post = nnt_malloc(b->n * sizeof *post);
  if (!post) {
    nnt_free(pos);
    return nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory");
  }
  size_t n_post = 0;
  int rc = walk_consumers(b, post, &n_post, e);
  if (rc) {
    nnt_free(pos), nnt_free(post);
    return rc;
  }
  for (size_t placed = 0; placed < live; placed++) {
    unsigned pick = post[live - 1 - placed];
    pos[pick] = (unsigned)placed;
  }
  for (size_t placed = 0; placed < live; placed++) {
    unsigned pick = post[live - 1 - placed];
    nnt_node *nd = &m->nodes[placed];
    nd->layer = b->g[pick].l;
    nd->n_in = b->g[pick].n_in;
    for (unsigned k = 0; k < nd->n_in; k++) {
      nd->in_node[k] = pos[b->g[pick].in[k]];
      nd->in_idx[k] = b->g[pick].in_idx[k];
    }
  }
  nnt_free(post);
  nnt_free(pos);
  m->n_nodes = live;
  return finalize_nodes(m, e);
}

/* Consumers of each node's output 0 (cons[i]), and 1 + the largest output
 * index read (cons[n_nodes + i]), from one pass over the edges (consumers
 * come later in the order); they do not depend on the batch. A new array
 * in *out. */
static int count_consumers(const nnt_model *m, unsigned **out, nnt_err *e) {
  unsigned *cons = nnt_calloc(2 * (m->n_nodes ? m->n_nodes : 1), sizeof *cons);
  if (!cons)
    return nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory");
  unsigned *refs = cons + m->n_nodes;
  for (size_t j = 0; j < m->n_nodes; j++)
    for (unsigned k = 0; k < m->nodes[j].n_in; k++) {
      unsigned p = m->nodes[j].in_node[k], idx = m->nodes[j].in_idx[k];
      if (p == NNT_NO_NODE || p >= j)
        continue;
      /* a layer that makes as many outputs as are named (multiout) must
       * not be asked for more than it can hold */
      if (idx >= NNT_MAX_IO) {
        nnt_free(cons);
        return nnt_err_set(e, NNT_ERR_INVAL,
                           "[%s] input_layers: '%s(%u)' names output %u; a layer has at most "
                           "%d outputs",
                           m->nodes[j].layer->name, m->nodes[p].layer->name, idx, idx,
                           NNT_MAX_IO);
      }
      cons[p] += idx == 0;
      if (idx + 1 > refs[p])
        refs[p] = idx + 1;
    }
  *out = cons;
  return NNT_OK;
}

/* Graph inputs, consumers and shapes of the sorted nodes, for m->batch:
 * every node's finalize again. */
static int finalize_nodes(nnt_model *m, nnt_err *e) {
  unsigned *cons;
  int rc = count_consumers(m, &cons, e);
  if (rc)
    return rc;
  rc = finalize_each(m, cons, cons + m->n_nodes, e);
  nnt_free(cons);
  return rc;
}

/* Also run when the batch size changes after compile (a model input node
 * then already has its one input slot). Allocates nothing. */
static int finalize_each(nnt_model *m, const unsigned *cons, const unsigned *refs,
                         nnt_err *e) {
  m->n_inputs = m->n_labels = 0;
  for (size_t i = 0; i < m->n_nodes; i++) {
    nnt_node *nd = &m->nodes[i];
    nnt_finalize_ctx *fc = &nd->fc;
    memset(fc, 0, sizeof *fc);
    fc->batch = m->batch;
    fc->trainable = nd->layer->trainable;
    fc->engine = m->engine;
    fc->chunk = m->be ? nnt_buffer_type_chunk(m->be->buft) : 0;
    if (!nd->n_in || nd->in_node[0] == NNT_NO_NODE) {
      if (m->n_inputs == NNT_DS_MAX_STREAMS)
        return nnt_err_set(e, NNT_ERR_INVAL, "[%s] too many model inputs", nd->layer->name);
      nd->n_in = 1;
      nd->in_node[0] = NNT_NO_NODE;
      nd->in_idx[0] = m->n_inputs;
      nnt_dim d = nd->layer->input_shape;
      d.b = m->batch;
      int rc = nnt_dim_check(d, "input_shape: batch_size x input_shape", NULL, NULL, e);
      if (rc) {
        nnt_err_prefix(e, "[%s] ", nd->layer->name);
        return rc;
      }
      m->input_dim[m->n_inputs++] = d;
    }
    fc->n_in = nd->n_in;
    for (unsigned k = 0; k < nd->n_in; k++) {
      if (nd->in_node[k] == NNT_NO_NODE) {
        fc->in_dim[k] = m->input_dim[nd->in_idx[k]];
        continue;
      }
      nnt_node *p = &m->nodes[nd->in_node[k]];
      if (nd->in_idx[k] >= p->fc.n_out)
        return nnt_err_set(e, NNT_ERR_INVAL,
                           "[%s] input_layers: '%s' has %u output(s); index %u does not exist",
                           nd->layer->name, p->layer->name, p->fc.n_out, nd->in_idx[k]);
      fc->in_dim[k] = p->fc.out_dim[nd->in_idx[k]];
    }
    fc->n_consumers = cons[i];
    fc->n_out_refs = refs[i] ? refs[i] : 1;
    fc->n_out = 1;
    int rc = nd->layer->ops->finalize(nd->layer, fc, e);
    if (rc) {
      nnt_err_prefix(e, "[%s] ", nd->layer->name);
      return rc;
    }
    if (fc->n_out == 0 || fc->n_out > NNT_MAX_IO)
      return nnt_err_set(e, NNT_ERR_INVAL, "[%s] bad output count %u", nd->layer->name, fc->n_out);
    if (fc->overfull)
      return nnt_err_set(e, NNT_ERR_NOT_SUPPORTED,
                         "[%s] asks for more than %d weights or %d scratch tensors, the most "
                         "one layer may have", nd->layer->name, NNT_MAX_WEIGHTS, NNT_MAX_SCRATCH);
    if ((rc = check_sizes(fc, e))) {
      nnt_err_prefix(e, "[%s] ", nd->layer->name);
      return rc;
    }
    if (fc->flags & NNT_LF_LOSS) {
      /* as in NNTrainer, where a label layer must be a leaf: a loss read
       * by another layer would pass on a value with no derivative */
      if (cons[i] || refs[i] > 1)
        return nnt_err_set(e, NNT_ERR_INVAL,
                           "[%s] a loss layer must end the model, but another layer reads its "
                           "output",
                           nd->layer->name);
      if (m->n_labels == NNT_DS_MAX_STREAMS)
        return nnt_err_set(e, NNT_ERR_INVAL, "[%s] too many loss layers", nd->layer->name);
      nd->label_idx = m->n_labels;
      m->label_dim[m->n_labels++] = fc->out_dim[0];
    }
  }
  return NNT_OK;
}

/* Which backward steps run, and the weight table (share.c). */
static int assign_work(nnt_model *m, nnt_err *e) {
  size_t n = m->n_nodes;
  for (size_t i = 0; i < n; i++) {
    nnt_node *nd = &m->nodes[i];
    for (unsigned o = 0; o < nd->fc.n_out; o++)
      nd->n_consumers[o] = 0;
  }
  for (size_t i = 0; i < n; i++) {
    nnt_node *nd = &m->nodes[i];
    int trains = 0;
    for (unsigned w = 0; w < nd->fc.n_w; w++)
      trains |= nd->fc.w[w].trainable;
    nd->do_grad = trains && nd->layer->trainable && nd->layer->ops->calc_gradient;
    nd->needs_d = nd->do_grad;
    nd->do_deriv = 0;
    for (unsigned k = 0; k < nd->n_in; k++) {
      if (nd->in_node[k] == NNT_NO_NODE)
        continue;
      nnt_node *p = &m->nodes[nd->in_node[k]];
      p->n_consumers[nd->in_idx[k]]++;
      if (p->needs_d) {
        nd->needs_d = 1;
        nd->do_deriv = 1;
      }
    }
    if (nd->do_deriv && !nd->layer->ops->calc_derivative)
      return nnt_err_set(e, NNT_ERR_NOT_SUPPORTED,
                         "[%s] layer type '%s' has no backward pass", nd->layer->name,
                         nd->layer->ops->type);
  }
  return nnt_graph_weights(m, e);
}

/* The weight pool and the optimizer state are one allocation each: their
 * totals must fit as well as each weight does. */
static int weight_totals(nnt_model *m, nnt_err *e) {
  size_t total = 0;
  for (size_t i = 0; i < m->n_w; i++) {
    size_t bytes;
    int rc = nnt_dim_check(m->wspec[i].dim, "weight", NULL, &bytes, e);
    if (!rc && (nnt_size_add(total, bytes, &total) || total > NNT_BYTES_MAX))
      rc = nnt_err_set(e, NNT_ERR_INVAL,
                       "weight '%s': the model's weights add up to more than %zu bytes",
                       m->wspec[i].name, NNT_BYTES_MAX);
    if (rc) {
      nnt_err_prefix(e, "[%s] ", m->nodes[m->w_node[i]].layer->name);
      return rc;
    }
  }
  unsigned slots = m->opt ? nnt_optimizer_state_count(m->opt) : 0;
  size_t state;
  if (nnt_size_mul(total, slots, &state) || nnt_size_add(state, total, &state) ||
      state > NNT_BYTES_MAX)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "[Optimizer] type: %s keeps %u values per weight; with %zu bytes of "
                       "weights that is more than %zu bytes",
                       nnt_optimizer_type_name(m->opt), slots, total, NNT_BYTES_MAX);
  m->weight_bytes = total;
  return NNT_OK;
}

uint64_t nnt_graph_core_kops(const nnt_model *m) {
  uint64_t k = m->opt ? nnt_optimizer_kops(m->opt) : 0;
  if (m->clip_grad_norm > 0)
    k |= NNT_KOP_BIT(DOT) |
         (m->be && m->be->step_begin ? NNT_KOP_BIT(SUM) | NNT_KOP_BIT(CLIP_SCALE)
                                     : NNT_KOP_BIT(SCALE));
  /* check_finite on a backend with steps tests on the device */
  if (m->check_finite && m->be && m->be->step_begin)
    k |= NNT_KOP_BIT(FLAG_NONFINITE) | NNT_KOP_BIT(COPY);
  for (size_t i = 0; i < m->n_w; i++)
    if (m->wspec[i].l2 > 0 || m->wspec[i].decay > 0)
      k |= NNT_KOP_BIT(AXPY);
  /* accuracy: the argmax of a loss layer's output against its label */
  for (size_t i = 0; i < m->n_nodes; i++)
    if (m->nodes[i].fc.flags & NNT_LF_LOSS)
      k |= NNT_KOP_BIT(ARGMAX_MATCH);
  /* several consumers of one output: their derivatives are summed */
  for (size_t i = 0; i < m->n_nodes; i++)
    for (unsigned o = 0; o < m->nodes[i].fc.n_out; o++)
      if (m->nodes[i].n_consumers[o] > 1)
        k |= NNT_KOP_BIT(COPY) | NNT_KOP_BIT(ADD);
  /* shared weights trained by several layers: their gradients are summed */
  for (size_t i = 0; i < m->n_nodes; i++)
    if (m->nodes[i].do_grad && m->nodes[i].grad_sum != i)
      k |= NNT_KOP_BIT(ADD);
  return k;
}

/* The first op of want the backend says no to, or NNT_KOP__COUNT. */
static nnt_kop first_unsupported(const nnt_backend *be, uint64_t want) {
  for (unsigned op = 0; op < NNT_KOP__COUNT; op++)
    if ((want >> op & 1) && !be->supports(be, (nnt_kop)op))
      return (nnt_kop)op;
  return NNT_KOP__COUNT;
}

/* "<who>: backend '<be>' does not support the op '<op>' it needs" for the
 * first op of want the backend says no to; NNT_OK when there is none. */
static int need_ops(const nnt_backend *be, uint64_t want, nnt_err *e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int need_ops(const nnt_backend *be, uint64_t want, nnt_err *e, const char *fmt, ...) {
  nnt_kop op = first_unsupported(be, want);
  if (op == NNT_KOP__COUNT)
    return NNT_OK;
  char who[NNT_ERR_MSG_MAX / 2];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(who, sizeof who, fmt, ap);
  va_end(ap);
  return nnt_err_set(e, NNT_ERR_NOT_SUPPORTED, "%s: backend '%s' does not support the op '%s' "
                     "it needs", who, be->name, nnt_kop_name(op));
}

/* The supports gate: every op a node's layer type or the core will call
 * (nnt_graph_core_kops, checked here part by part to name the part) must
 * be one the model's backend runs. */
static int check_backend_ops(const nnt_model *m, nnt_err *e) {
  const nnt_backend *be = m->be;
  int rc = NNT_OK;
  for (size_t i = 0; !rc && i < m->n_nodes; i++) {
    const nnt_node *nd = &m->nodes[i];
    const nnt_layer *l = nd->layer;
    rc = need_ops(be, l->ops->kops, e, "layer '%s' (%s)", l->name, l->ops->type);
    for (unsigned w = 0; !rc && w < nd->fc.n_w; w++)
      if (nd->fc.w[w].l2 > 0 || nd->fc.w[w].decay > 0)
        rc = need_ops(be, NNT_KOP_BIT(AXPY), e, "layer '%s': the regularizer or decay of "
                      "weight '%s'", l->name, nd->fc.w[w].name);
    for (unsigned o = 0; !rc && o < nd->fc.n_out; o++)
      if (nd->n_consumers[o] > 1)
        rc = need_ops(be, NNT_KOP_BIT(COPY) | NNT_KOP_BIT(ADD), e, "layer '%s': the sum of "
                      "the derivatives of its output %u, which %u layers read", l->name, o,
                      nd->n_consumers[o]);
    if (!rc && nd->do_grad && nd->grad_sum != i)
      rc = need_ops(be, NNT_KOP_BIT(ADD), e, "layer '%s': the sum of the gradients of the "
                    "weights it shares with '%s'", l->name, m->nodes[nd->w_owner].layer->name);
  }
  if (!rc && m->opt)
    rc = need_ops(be, nnt_optimizer_kops(m->opt), e, "the optimizer '%s'",
                  nnt_optimizer_type_name(m->opt));
  if (!rc && m->clip_grad_norm > 0)
    rc = need_ops(be,
                  NNT_KOP_BIT(DOT) | (be->step_begin ? NNT_KOP_BIT(SUM) | NNT_KOP_BIT(CLIP_SCALE)
                                                     : NNT_KOP_BIT(SCALE)),
                  e, "[Model] clip_grad_by_norm");
  if (!rc && m->check_finite && be->step_begin)
    rc = need_ops(be, NNT_KOP_BIT(FLAG_NONFINITE) | NNT_KOP_BIT(COPY), e,
                  "[Model] check_finite");
  /* whatever the parts above do not name yet */
  if (!rc)
    rc = need_ops(be, nnt_graph_core_kops(m), e, "the training loop");
  return rc;
}

int nnt_graph_compile(nnt_model *m, nnt_err *e) {
  build b = {0};
  b.m = m;
  int rc = realize_chains(&b, e);
  if (!rc)
    rc = resolve_inputs(&b, e);
  if (!rc)
    rc = nnt_unroll_realize(&b, e);
  if (!rc)
    rc = realize_loss(&b, e);
  if (!rc)
    rc = sort_and_finalize(&b, e);
  if (!rc)
    rc = nnt_unroll_check_shapes(&b, e);
  if (!rc)
    rc = assign_work(m, e);
  if (!rc)
    rc = nnt_graph_keep_less(m, e);
  if (!rc)
    rc = nnt_schedule_build(m, e);
  if (!rc)
    rc = weight_totals(m, e);
  if (!rc)
    rc = check_backend_ops(m, e);
  nnt_free(b.g);
  nnt_free(b.links);
  nnt_name_index_free(&b.alias);
  nnt_name_index_free(&b.names);
  if (rc)
    nnt_graph_free(m);
  return rc;
}

int nnt_graph_set_batch(nnt_model *m, unsigned batch, nnt_err *e) {
  /* counted once, so that going back to the old batch allocates nothing */
  unsigned *cons;
  int rc = count_consumers(m, &cons, e);
  if (rc)
    return rc;
  unsigned old = m->batch;
  m->batch = batch;
  rc = finalize_each(m, cons, cons + m->n_nodes, e);
  if (!rc)
    rc = nnt_graph_keep_less(m, e);
  /* weights do not depend on the batch; a layer whose weights did would
   * invalidate the ones already allocated */
  for (size_t i = 0; !rc && i < m->n_nodes; i++) {
    const nnt_node *nd = &m->nodes[i];
    int same = nd->fc.n_w == nd->n_w;
    for (unsigned w = 0; same && w < nd->fc.n_w; w++)
      same = nnt_dim_eq(nd->fc.w[w].dim, m->wspec[nd->w_first + w].dim);
    if (!same)
      rc = nnt_err_set(e, NNT_ERR_NOT_SUPPORTED,
                       "[%s] its weights depend on the batch size; set batch_size before "
                       "compile", nd->layer->name);
  }
  if (rc) {
    /* back to the batch it was compiled for, which finalized before */
    nnt_err ignored;
    nnt_err_clear(&ignored);
    m->batch = old;
    if (!finalize_each(m, cons, cons + m->n_nodes, &ignored))
      nnt_graph_keep_less(m, &ignored);
  }
  nnt_free(cons);
  return rc;
}

void nnt_graph_free(nnt_model *m) {
  nnt_rerun_clear(m); /* before the nodes it marks */
  m->reruns_done = 0;
  nnt_delay_clear(m);
  m->delays_done = 0;
  for (size_t i = 0; i < m->n_realized; i++)
    nnt_layer_destroy(m->realized[i]);
  nnt_free(m->realized);
  m->realized = NULL;
  m->n_realized = 0;
  nnt_free(m->nodes);
  m->nodes = NULL;
  m->n_nodes = 0;
  nnt_free(m->alt); /* recomputation (recompute.c) */
  m->alt = NULL;
  m->n_alt = 0;
  m->n_recompute = 0;
  m->recompute_flops = 0;
  m->recompute_default_done = 0;
  nnt_free(m->cheap);
  m->cheap = NULL;
  nnt_free(m->wspec);
  nnt_free(m->w);
  nnt_free(m->w_node);
  nnt_free(m->opt_off);
  m->opt_off = NULL;
  m->wspec = NULL;
  m->w = NULL;
  m->w_node = NULL;
  m->n_w = 0;
  nnt_schedule_free(m);
}
