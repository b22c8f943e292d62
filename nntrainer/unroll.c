/* Unrolling a group of layers over time with shared weights: NNTrainer's
 * recurrent realizer (compiler/recurrent_realizer.cpp), as a step of the
 * graph compile. The layer that ends the group carries the keys:
 *   unroll_for = T             time steps (positive)
 *   recurrent_input = a(i),... the input slot i of layer a that, from step 1
 *                              on, reads the recurrent output instead
 *   recurrent_output = b(j),.. output j of layer b at the step before; the
 *                              lists pair one to one
 *   as_sequence = end(j)       return output j of every step, joined by a
 *                              concat (NNTrainer's default axis; past
 *                              NNT_MAX_IO steps a tree of them), instead of
 *                              the last step's
 * The group is every layer on a path from a recurrent input to the end.
 * Each of its nodes becomes T copies named name/t (a realized activation
 * name/t/activation_realized), the copies of step t > 0 sharing the
 * weights of step 0's (shared_from = name/0); the outside inputs stay as
 * they are at every step; the end's name becomes an identity of the last
 * step's output (or of the concat, named end/concat_j), as in NNTrainer.
 * The memory planner then sees every step as ordinary nodes. */
#include "nntrainer/graph_impl.h"
#include "nntrainer/unroll.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define MAX_PAIRS NNT_MAX_IO
#define MAX_NODES (1u << 20) /* as the dropout streams assume (architecture.md) */

static const char *const keys[] = {"unroll_for", "recurrent_input", "recurrent_output",
                                   "as_sequence"};

typedef struct conn {
  char name[NNT_NAME_MAX];
  unsigned idx;
} conn;

int nnt_unroll_is_key(const char *key) {
  for (size_t i = 0; i < NNT_ARRAY_LEN(keys); i++)
    if (nnt_streq(key, keys[i]))
      return 1;
  return 0;
}

/* "a, b(1)" into out (at most max), lowercased as layer names are. */
static int parse_conns(const char *key, const char *v, conn *out, unsigned max, unsigned *n,
                       nnt_err *e) {
  *n = 0;
  const char *s = v;
  for (;;) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    while (len && isspace((unsigned char)*s))
      s++, len--;
    while (len && isspace((unsigned char)s[len - 1]))
      len--;
    if (!len)
      return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': empty name in '%s'", key, v);
    if (*n == max)
      return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': more than %u connections in '%s'", key,
                         max, v);
    unsigned idx = 0;
    size_t nlen = len;
    const char *paren = memchr(s, '(', len);
    if (paren) {
      char num[24];
      size_t dl = len - (size_t)(paren - s) - 1;
      if (s[len - 1] != ')' || dl < 2 || dl - 1 >= sizeof num)
        return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': '%.*s' is not name or name(index)",
                           key, (int)len, s);
      memcpy(num, paren + 1, dl - 1);
      num[dl - 1] = '\0';
      if (nnt_parse_uint(key, num, &idx, NULL) || idx >= NNT_MAX_IO)
        return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': bad index in '%.*s'", key, (int)len, s);
      nlen = (size_t)(paren - s);
      while (nlen && isspace((unsigned char)s[nlen - 1]))
        nlen--;
    }
    if (!nlen || nlen >= NNT_NAME_MAX)
      return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': empty or too long name in '%s'", key, v);
    for (size_t i = 0; i < nlen; i++)
      out[*n].name[i] = (char)tolower((unsigned char)s[i]);
    out[*n].name[nlen] = '\0';
    out[(*n)++].idx = idx;
    if (!end)
      return NNT_OK;
    s = end + 1;
  }
}

int nnt_unroll_check_value(const char *key, const char *value, nnt_err *e) {
  conn c[MAX_PAIRS];
  unsigned n;
  if (nnt_streq(key, "unroll_for")) {
    unsigned t;
    int rc = nnt_parse_uint(key, value, &t, e);
    if (rc)
      return rc;
    return t ? NNT_OK
             : nnt_err_set(e, NNT_ERR_INVAL, "key 'unroll_for': must be positive (0 given)");
  }
  int rc = parse_conns(key, value, c, nnt_streq(key, "as_sequence") ? 1 : MAX_PAIRS, &n, e);
  if (rc && nnt_streq(key, "as_sequence") && strchr(value, ','))
    return nnt_err_set(e, NNT_ERR_INVAL, "key 'as_sequence': one connection, not '%s'", value);
  return rc;
}

/* The value of a given key, or NULL. */
static const char *prop(const nnt_layer *l, const char *key) {
  for (size_t i = 0; i < l->n_props; i++)
    if (nnt_streq(l->prop_key[i], key))
      return l->prop_val[i];
  return NULL;
}

/* The parsed keys of a layer with unroll_for. */
typedef struct ukeys {
  unsigned steps, np, has_seq;
  conn in[MAX_PAIRS], out[MAX_PAIRS], seq;
} ukeys;

static int read_keys(const nnt_model *m, const nnt_layer *l, ukeys *u, const char **key,
                     nnt_err *e) {
  const char *v;
  for (size_t i = 1; i < NNT_ARRAY_LEN(keys); i++)
    if (!prop(l, keys[0]) && prop(l, keys[i])) {
      *key = keys[i];
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "needs unroll_for on the same layer (the layer that ends the group)");
    }
  *key = "unroll_for";
  if (!(v = prop(l, "unroll_for")))
    return NNT_ERR_NOKEY;
  int rc = nnt_parse_uint(*key, v, &u->steps, e);
  unsigned nout = 0;
  for (int k = 1; !rc && k <= 2; k++) {
    *key = keys[k];
    if (!(v = prop(l, *key)))
      return nnt_err_set(e, NNT_ERR_INVAL, "required with unroll_for (none given)");
    rc = parse_conns(*key, v, k == 1 ? u->in : u->out, MAX_PAIRS, k == 1 ? &u->np : &nout, e);
  }
  if (!rc && nout != u->np)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "%u connection(s), but recurrent_input has %u: they pair one to one",
                       nout, u->np);
  for (unsigned j = 0; !rc && j < 2 * u->np; j++) {
    const conn *c = j < u->np ? &u->in[j] : &u->out[j - u->np];
    *key = j < u->np ? "recurrent_input" : "recurrent_output";
    if (nnt_name_index_get(&m->layer_names, c->name) == NNT_NAME_NONE)
      return nnt_err_set(e, NNT_ERR_INVAL, "no layer named '%s'", c->name);
  }
  u->has_seq = 0;
  if (!rc && (v = prop(l, "as_sequence"))) {
    unsigned one;
    *key = "as_sequence";
    rc = parse_conns(*key, v, &u->seq, 1, &one, e);
    if (!rc && !nnt_streq(u->seq.name, l->name))
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "'%s' is not '%s': as_sequence names an output of the layer that ends "
                         "the group, the one with unroll_for", u->seq.name, l->name);
    u->has_seq = 1;
  }
  return rc;
}

int nnt_unroll_check_model(const nnt_model *m, const char **layer, const char **key,
                           nnt_err *e) {
  ukeys u;
  for (size_t k = 0; k < m->n_layers; k++) {
    *layer = m->layers[k]->name;
    int rc = read_keys(m, m->layers[k], &u, key, e);
    if (rc && rc != NNT_ERR_NOKEY)
      return rc;
  }
  return NNT_OK;
}

/* ---- realization ------------------------------------------------------ */

/* The name of node v's copy at step t: its layer's name/t, then what a
 * realized node adds to its layer's name (/activation_realized). */
static int copy_name(const build *b, unsigned v, unsigned t, char *out, size_t n, nnt_err *e) {
  const char *head = b->g[b->g[v].head].l->name, *own = b->g[v].l->name;
  size_t hl = strlen(head);
  const char *suffix = strncmp(own, head, hl) ? "" : own + hl;
  int len = snprintf(out, n, "%s/%u%s", b->g[v].head == v ? own : head, t, suffix);
  if (len < 0 || (size_t)len >= n)
    return nnt_err_set(e, NNT_ERR_INVAL, "[%s] unroll_for: the copy name '%s/%u' is too long",
                       own, own, t);
  return NNT_OK;
}

/* The given keys of from onto to, but those the unrolling sets itself. */
static int copy_props(const nnt_layer *from, nnt_layer *to, nnt_err *e) {
  for (size_t i = 0; i < from->n_props; i++) {
    const char *k = from->prop_key[i];
    if (nnt_unroll_is_key(k) || nnt_streq(k, "input_layers") || nnt_streq(k, "shared_from") ||
        (nnt_streq(k, "activation") && from->ops != &nnt_layer_activation) ||
        (nnt_streq(k, "flatten") && from->ops != &nnt_layer_flatten))
      continue;
    int rc = nnt_layer_set_property(to, k, from->prop_val[i], e);
    if (rc)
      return nnt_err_prefix(e, "[%s] ", to->name), rc;
  }
  return NNT_OK;
}

typedef struct unroll_ctx {
  build *b;
  unsigned c, end, n;         /* the carrier, the group's end, nodes before the copies */
  ukeys u;
  unsigned rin[MAX_PAIRS], rout[MAX_PAIRS];
  unsigned char *grp;         /* n: in the group */
  unsigned *pos;              /* n: index among the group's nodes */
  unsigned *mem, ng;          /* the group's nodes in list order */
  unsigned *copy;             /* steps * ng: the copies' nodes */
} unroll_ctx;

static int fail(const unroll_ctx *x, const char *key, nnt_err *e, const char *fmt, const char *a,
                const char *b2) {
  char what[NNT_ERR_MSG_MAX / 2];
  snprintf(what, sizeof what, fmt, a, b2);
  return nnt_err_set(e, NNT_ERR_INVAL, "[%s] %s: %s", x->b->g[x->c].l->name, key, what);
}

/* The group: ancestors of the end that descend from a recurrent input. */
static int find_group(unroll_ctx *x, nnt_err *e) {
  build *b = x->b;
  size_t n = x->n;
  unsigned char *anc = x->grp + n;
  unsigned *stack = x->pos; /* free until the positions are set */
  size_t sp = 0;
  anc[x->end] = 1;
  stack[sp++] = x->end;
  while (sp) {
    unsigned v = stack[--sp];
    for (unsigned k = 0; k < b->g[v].n_in; k++) {
      unsigned p = b->g[v].in[k];
      if (p != NNT_NO_NODE && !anc[p])
        anc[p] = 1, stack[sp++] = p;
    }
  }
  for (unsigned j = 0; j < x->u.np; j++) {
    const char *name = x->u.in[j].name;
    if (!anc[x->rin[j]])
      return fail(x, "recurrent_input", e,
                  "'%s' does not lead to '%s' (the group runs from the recurrent inputs to the "
                  "layer with unroll_for)", name, b->g[x->c].l->name);
    if (x->u.in[j].idx >= b->g[x->rin[j]].n_in) {
      char has[16];
      snprintf(has, sizeof has, "%u", b->g[x->rin[j]].n_in);
      return fail(x, "recurrent_input", e, "'%s' has %s input(s): that slot does not exist", name,
                  has);
    }
    x->grp[x->rin[j]] = 1;
  }
  for (int changed = 1; changed;) {
    changed = 0;
    for (size_t v = 0; v < n; v++)
      for (unsigned k = 0; anc[v] && !x->grp[v] && k < b->g[v].n_in; k++)
        if (b->g[v].in[k] != NNT_NO_NODE && x->grp[b->g[v].in[k]])
          x->grp[v] = 1, changed = 1;
  }
  for (unsigned j = 0; j < x->u.np; j++)
    if (!x->grp[x->rout[j]])
      return fail(x, "recurrent_output", e,
                  "'%s' is not in the group (the layers on a path from a recurrent input to "
                  "'%s')", x->u.out[j].name, b->g[x->c].l->name);
  x->ng = 0;
  for (size_t v = 0; v < n; v++) {
    if (!x->grp[v])
      continue;
    if (b->g[v].removed)
      return fail(x, "unroll_for", e, "'%s' is in the group of another unroll_for", b->g[v].l->name,
                  "");
    if (v != x->c && b->g[v].head == v && prop(b->g[v].l, "unroll_for"))
      return fail(x, "unroll_for", e, "'%s' in the group has unroll_for too; groups do not nest",
                  b->g[v].l->name, "");
    x->pos[v] = x->ng;
    x->mem[x->ng++] = (unsigned)v;
  }
  /* outside the group only the end is read */
  for (size_t w = 0; w < n; w++)
    for (unsigned k = 0; !x->grp[w] && !b->g[w].removed && k < b->g[w].n_in; k++) {
      unsigned p = b->g[w].in[k];
      if (p != NNT_NO_NODE && x->grp[p] && p != x->end)
        return nnt_err_set(e, NNT_ERR_INVAL,
                           "[%s] input_layers: '%s' is inside the group that '%s' unrolls; "
                           "layers outside it read only '%s'", b->g[w].l->name,
                           b->g[b->g[p].head].l->name, b->g[x->c].l->name, b->g[x->c].l->name);
    }
  return NNT_OK;
}

/* Step t's copies, then their inputs. */
static int make_copies(unroll_ctx *x, nnt_err *e) {
  build *b = x->b;
  char name[NNT_NAME_MAX], from[NNT_NAME_MAX];
  for (unsigned t = 0; t < x->u.steps; t++)
    for (unsigned q = 0; q < x->ng; q++) {
      unsigned v = x->mem[q];
      nnt_layer *orig = b->g[v].l, *r;
      int rc = copy_name(b, v, t, name, sizeof name, e);
      if (!rc)
        rc = nnt_graph_realize(b, orig->ops->type, name, 0, &r, e);
      if (!rc)
        rc = copy_props(orig, r, e);
      from[0] = '\0';
      if (!rc && t)
        rc = copy_name(b, v, 0, from, sizeof from, e);
      else if (!rc && orig->shared_from[0]) {
        /* a group layer that shares another's weights: that layer's copy
         * at step 0 when it is in the group, else the layer */
        unsigned s = nnt_name_index_get(&b->names, orig->shared_from);
        if (s != NNT_NAME_NONE && s < x->n && x->grp[s])
          rc = copy_name(b, s, 0, from, sizeof from, e);
        else
          snprintf(from, sizeof from, "%s", orig->shared_from);
      }
      if (!rc && from[0])
        rc = nnt_layer_set_property(r, "shared_from", from, e);
      if (rc)
        return rc;
      x->copy[(size_t)t * x->ng + q] = (unsigned)b->n - 1;
    }
  for (unsigned t = 0; t < x->u.steps; t++)
    for (unsigned q = 0; q < x->ng; q++) {
      gnode *o = &b->g[x->mem[q]], *g = &b->g[x->copy[(size_t)t * x->ng + q]];
      g->n_in = o->n_in;
      for (unsigned k = 0; k < o->n_in; k++) {
        unsigned p = o->in[k];
        g->in[k] = p != NNT_NO_NODE && x->grp[p] ? x->copy[(size_t)t * x->ng + x->pos[p]] : p;
        g->in_idx[k] = o->in_idx[k];
      }
      for (unsigned j = 0; t && j < x->u.np; j++)
        if (x->rin[j] == x->mem[q]) {
          unsigned k = x->u.in[j].idx;
          g->in[k] = x->copy[(size_t)(t - 1) * x->ng + x->pos[x->rout[j]]];
          g->in_idx[k] = x->u.out[j].idx;
        }
    }
  return NNT_OK;
}

/* Join the outputs seq of steps [t0, t0 + n) by concats: one when n is at
 * most NNT_MAX_IO, else a tree: step t0's output, then the rest in at most
 * NNT_MAX_IO - 1 groups joined the same way. Every concat's first input is
 * a step's own output, so each takes the axis a single concat would
 * (NNTrainer's default reads the first input's channels), and the tree's
 * result is that concat's. The root is named name, the others
 * name/1, name/2, ... (*k counts them). *node and *idx: what reads the
 * result reads. */
static int join_steps(unroll_ctx *x, unsigned t0, unsigned n, const char *name, unsigned *k,
                      unsigned *node, unsigned *idx, nnt_err *e) {
  build *b = x->b;
  unsigned seq = x->u.seq.idx, at = x->pos[x->end];
  if (n == 1) {
    *node = x->copy[(size_t)t0 * x->ng + at], *idx = seq;
    return NNT_OK;
  }
  char own[NNT_NAME_MAX + 40];
  if (*k)
    snprintf(own, sizeof own, "%s/%u", name, *k);
  else
    snprintf(own, sizeof own, "%s", name);
  (*k)++;
  nnt_layer *r;
  int rc = nnt_graph_realize(b, "concat", own, 0, &r, e);
  if (rc)
    return rc;
  unsigned cat = (unsigned)b->n - 1;
  unsigned rest = n - 1, groups = n <= NNT_MAX_IO ? rest : (rest - 1) / NNT_MAX_IO + 1;
  if (groups > NNT_MAX_IO - 1)
    groups = NNT_MAX_IO - 1;
  unsigned parts = groups + 1, t = t0 + 1;
  b->g[cat].n_in = parts;
  b->g[cat].in[0] = x->copy[(size_t)t0 * x->ng + at];
  b->g[cat].in_idx[0] = seq;
  for (unsigned j = 1; j < parts; j++) {
    /* n <= NNT_MAX_IO: one step each; else rest spread over the groups */
    unsigned len = rest / groups + (j - 1 < rest % groups), nd, ni;
    if ((rc = join_steps(x, t, len, name, k, &nd, &ni, e)))
      return rc;
    b->g[cat].in[j] = nd, b->g[cat].in_idx[j] = ni;
    t += len;
  }
  *node = cat, *idx = 0;
  return NNT_OK;
}

/* The end's name for the readers outside: an identity of the last step's
 * output 0 or of the concat of every step's; then the group goes. */
static int connect_output(unroll_ctx *x, nnt_err *e) {
  build *b = x->b;
  const char *cname = b->g[x->c].l->name;
  unsigned T = x->u.steps, last = x->copy[(size_t)(T - 1) * x->ng + x->pos[x->end]];
  unsigned cat = NNT_NO_NODE, seq = x->u.seq.idx;
  char name[NNT_NAME_MAX + 24];
  nnt_layer *r;
  int rc;
  if (x->u.has_seq) {
    snprintf(name, sizeof name, "%s/concat_%u", cname, seq);
    unsigned k = 0, ci;
    if ((rc = join_steps(x, 0, T, name, &k, &cat, &ci, e)))
      return rc;
    if (T == 1) { /* one step: a concat of one input, as NNTrainer's */
      if ((rc = nnt_graph_realize(b, "concat", name, 0, &r, e)))
        return rc;
      b->g[b->n - 1].n_in = 1;
      b->g[b->n - 1].in[0] = cat, b->g[b->n - 1].in_idx[0] = ci;
      cat = (unsigned)b->n - 1;
    }
  }
  if ((rc = nnt_graph_realize(b, "identity", cname, 0, &r, e)))
    return rc;
  unsigned id = (unsigned)b->n - 1;
  b->g[id].n_in = 1;
  b->g[id].in[0] = cat != NNT_NO_NODE && seq == 0 ? cat : last;
  b->g[id].in_idx[0] = 0;
  int cat_read = seq == 0;
  for (size_t w = 0; w < x->n; w++)
    for (unsigned k = 0; !x->grp[w] && !b->g[w].removed && k < b->g[w].n_in; k++) {
      if (b->g[w].in[k] != x->end)
        continue;
      unsigned i = b->g[w].in_idx[k];
      cat_read |= cat != NNT_NO_NODE && i == seq;
      b->g[w].in[k] = i == 0 ? id : cat != NNT_NO_NODE && i == seq ? cat : last;
      b->g[w].in_idx[k] = i == 0 || (cat != NNT_NO_NODE && i == seq) ? 0 : i;
    }
  if (cat != NNT_NO_NODE && !cat_read) {
    char c[NNT_NAME_MAX + 16];
    snprintf(c, sizeof c, "%s(%u)", cname, seq);
    return fail(x, "as_sequence", e, "no layer reads '%s' (the layer named '%s' stands for "
                "output 0 of the last step)", c, cname);
  }
  for (unsigned q = 0; q < x->ng; q++)
    b->g[x->mem[q]].removed = 1;
  return NNT_OK;
}

/* The links the shape check reads after finalize. */
static int keep_links(unroll_ctx *x, nnt_err *e) {
  build *b = x->b;
  if (x->u.steps < 2)
    return NNT_OK;
  nnt_unroll_link *l = nnt_realloc(b->links, (b->n_links + x->u.np) * sizeof *l);
  if (!l)
    return nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory");
  b->links = l;
  for (unsigned j = 0; j < x->u.np; j++) {
    nnt_unroll_link *k = &b->links[b->n_links++];
    k->l0 = b->g[x->copy[x->pos[x->rin[j]]]].l;
    k->l1 = b->g[x->copy[(size_t)x->ng + x->pos[x->rin[j]]]].l;
    k->carrier = b->g[x->c].l;
    k->slot = x->u.in[j].idx;
    k->pair = j;
  }
  return NNT_OK;
}

static int unroll_one(build *b, unsigned c, nnt_err *e) {
  unroll_ctx x = {.b = b, .c = c, .n = (unsigned)b->n};
  const char *key;
  int rc = read_keys(b->m, b->g[c].l, &x.u, &key, e);
  if (rc)
    return nnt_err_prefix(e, "[%s] %s: ", b->g[c].l->name, key), rc;
  x.end = nnt_name_index_get(&b->alias, b->g[c].l->name);
  for (unsigned j = 0; j < x.u.np; j++) {
    x.rin[j] = nnt_name_index_get(&b->names, x.u.in[j].name);
    x.rout[j] = nnt_name_index_get(&b->alias, x.u.out[j].name);
    for (int k = 0; k < 2; k++) {
      unsigned v = k ? x.rout[j] : x.rin[j];
      if (v == NNT_NAME_NONE || b->g[v].removed)
        return fail(&x, k ? "recurrent_output" : "recurrent_input", e,
                    "'%s' is not in the compiled graph (a loss or another unroll_for replaced "
                    "it)", k ? x.u.out[j].name : x.u.in[j].name, "");
    }
  }
  size_t n = x.n ? x.n : 1;
  x.grp = nnt_calloc(2 * n, 1);
  x.pos = nnt_malloc(2 * n * sizeof *x.pos);
  x.mem = x.pos ? x.pos + n : NULL;
  if (!x.grp || !x.pos) {
    rc = nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory");
    goto out;
  }
  if ((rc = find_group(&x, e)))
    goto out;
  /* the copies, the identity and the concats (fewer than the steps) */
  if ((uint64_t)(x.ng + 1) * x.u.steps + 2 + b->n >= MAX_NODES) {
    char s[48];
    snprintf(s, sizeof s, "%u steps of %u layers", x.u.steps, x.ng);
    rc = fail(&x, "unroll_for", e, "%s make more than 2^20 nodes%s", s, "");
    goto out;
  }
  x.copy = nnt_malloc((size_t)x.ng * x.u.steps * sizeof *x.copy);
  if (!x.copy) {
    rc = nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory");
    goto out;
  }
  if (!(rc = make_copies(&x, e)) && !(rc = keep_links(&x, e)))
    rc = connect_output(&x, e);
out:
  nnt_free(x.grp), nnt_free(x.pos), nnt_free(x.copy);
  return rc;
}

int nnt_unroll_realize(build *b, nnt_err *e) {
  const char *layer, *key;
  int rc = nnt_unroll_check_model(b->m, &layer, &key, e);
  if (rc)
    return nnt_err_prefix(e, "[%s] %s: ", layer, key), rc;
  size_t n0 = b->n;
  for (size_t i = 0; !rc && i < n0; i++)
    if (!b->g[i].removed && b->g[i].head == i && prop(b->g[i].l, "unroll_for"))
      rc = unroll_one(b, (unsigned)i, e);
  return rc;
}

static unsigned node_of(const nnt_model *m, const nnt_layer *l) {
  for (size_t i = 0; i < m->n_nodes; i++)
    if (m->nodes[i].layer == l)
      return (unsigned)i;
  return NNT_NO_NODE;
}

int nnt_unroll_check_shapes(const build *b, nnt_err *e) {
  const nnt_model *m = b->m;
  for (size_t i = 0; i < b->n_links; i++) {
    const nnt_unroll_link *k = &b->links[i];
    unsigned n0 = node_of(m, k->l0), n1 = node_of(m, k->l1);
    if (n0 == NNT_NO_NODE || n1 == NNT_NO_NODE)
      continue;
    nnt_dim d0 = m->nodes[n0].fc.in_dim[k->slot], d1 = m->nodes[n1].fc.in_dim[k->slot];
    if (nnt_dim_eq(d0, d1))
      continue;
    char s0[64], s1[64];
    ukeys u;
    const char *key;
    nnt_err ignore = {0};
    if (read_keys(m, k->carrier, &u, &key, &ignore))
      return nnt_err_set(e, NNT_ERR_INVAL, "[%s] unroll_for: keys changed", k->carrier->name);
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "[%s] recurrent_output: '%s(%u)' gives %s, but '%s(%u)' (recurrent_input "
                       "%u) reads %s from outside the group at step 0; from step 1 on it reads "
                       "the recurrent output instead, so both need one shape",
                       k->carrier->name, u.out[k->pair].name, u.out[k->pair].idx,
                       nnt_dim_str(d1, s1, sizeof s1), u.in[k->pair].name, k->slot, k->pair + 1,
                       nnt_dim_str(d0, s0, sizeof s0));
  }
  return NNT_OK;
}
