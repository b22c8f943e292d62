/* Recomputation under [Model] memory_budget: when the training plan does
 * not fit, some forward results are dropped after the forward pass and
 * computed again in the backward pass, just before the first backward step
 * that reads them. The choice is segment checkpointing (Chen et al. 2016)
 * over the graph's cut nodes (a node no edge jumps over: on a chain every
 * node, on a residual net the block boundaries): every k-th cut is kept,
 * the nodes between are recomputed, for every k; the fitting choice of
 * fewest extra FLOPs is then refined greedily by keeping again the most
 * expensive recomputed nodes while the plan still fits. Every candidate is
 * measured with the real planner (nnt_model_train_total), so what is
 * chosen is what runs. A recompute step is a forward step of the node in
 * the backward part of the schedule; plan.c gives its outputs and forward
 * scratch twins, so the forward ones die with their last forward reader. */
#include "nntrainer/model_impl.h"

#include <string.h>

double nnt_recompute_node_flops(const nnt_model *m, size_t i) {
  const nnt_node *nd = &m->nodes[i];
  double out = 0;
  for (unsigned o = 0; o < nd->fc.n_out; o++)
    out += (double)nnt_dim_len(nd->fc.out_dim[o]);
  const char *type = nd->layer->ops->type;
  if (nd->fc.n_w && !strcmp(type, "conv2d") && nd->fc.w[0].dim.b) /* oc:ic:kh:kw */
    return 2 * out * (double)nnt_dim_len(nd->fc.w[0].dim) / nd->fc.w[0].dim.b;
  if (nd->fc.n_w && !strcmp(type, "fully_connected") && nd->fc.w[0].dim.w) /* in x units */
    return 2 * out * (double)nnt_dim_len(nd->fc.w[0].dim) / nd->fc.w[0].dim.w;
  return out;
}

/* Remove the recompute steps (forward steps after the forward pass). */
void nnt_recompute_clear(nnt_model *m) {
  nnt_step *st = m->sched[NNT_MODE_TRAIN];
  unsigned n = m->n_steps[NNT_MODE_TRAIN], fe = nnt_schedule_forward_end(m, NNT_MODE_TRAIN);
  unsigned w = fe;
  for (unsigned s = fe; s < n; s++)
    if (st[s].kind != NNT_STEP_FORWARD)
      st[w++] = st[s];
  if (w != n) {
    m->n_steps[NNT_MODE_TRAIN] = w;
    nnt_model_release_plan(m, NNT_MODE_TRAIN);
  }
  for (size_t i = 0; i < m->n_nodes; i++)
    m->nodes[i].recompute = 0;
  m->n_recompute = 0;
  m->recompute_flops = 0;
}

/* May node i be dropped and recomputed? Not a loss (its value is counted
 * once), not a model output (read after the step), not the first reader
 * of the model input in place. */
static int eligible(const nnt_model *m, size_t i) {
  const nnt_node *nd = &m->nodes[i];
  if ((nd->fc.flags & NNT_LF_LOSS) || (nd->inplace && nd->in_node[0] == NNT_NO_NODE))
    return 0;
  for (unsigned o = 0; o < nd->fc.n_out; o++)
    if (!nd->n_consumers[o])
      return 0;
  return 1;
}

/* An in-place chain (a node and the in-place nodes over its output) is
 * one unit: recomputed whole or not at all. unit[i]: the chain's first
 * node. A unit with an ineligible node is kept. r[] is per unit:
 * R_KEEP, R_ONCE (recomputed once, its results kept to their last
 * backward reader), R_EACH (recomputed again for each backward step group
 * that reads it: what it computes only to feed another recomputation is
 * dropped right after). */
enum { R_KEEP, R_ONCE, R_EACH };

static void units(const nnt_model *m, unsigned *unit) {
  for (size_t i = 0; i < m->n_nodes; i++) {
    const nnt_node *nd = &m->nodes[i];
    unit[i] = nd->inplace && nd->in_node[0] != NNT_NO_NODE ? unit[nd->in_node[0]] : (unsigned)i;
  }
}

static void close_set(const nnt_model *m, const unsigned *unit, unsigned char *r) {
  for (size_t i = 0; i < m->n_nodes; i++)
    if (!eligible(m, i))
      r[unit[i]] = R_KEEP;
  for (size_t i = 0; i < m->n_nodes; i++)
    r[i] = r[unit[i]];
}

/* Which nodes' outputs or scratch backward step st reads (mirrors plan.c
 * touch_step): into need[]. */
static void step_needs(const nnt_model *m, const nnt_step *st, unsigned char *need) {
  if (st->kind != NNT_STEP_CALC_GRADIENT && st->kind != NNT_STEP_CALC_DERIVATIVE)
    return;
  const nnt_node *nd = &m->nodes[st->node];
  int grad = st->kind == NNT_STEP_CALC_GRADIENT;
  int bwd = grad ? nd->do_grad : nd->do_grad || nd->do_deriv;
  if (bwd)
    for (unsigned c = 0; c < nd->fc.n_scratch; c++)
      if (nd->fc.scratch_life[c] == NNT_SCRATCH_ITER)
        need[st->node] = 1;
  if (!bwd)
    return;
  for (unsigned k = 0; k < nd->n_in; k++)
    if ((nd->fc.flags & NNT_LF_BWD_READS_INPUT) && nd->in_node[k] != NNT_NO_NODE)
      need[nd->in_node[k]] = 1;
  if (nd->fc.flags & NNT_LF_BWD_READS_OUTPUT)
    need[st->node] = 1;
}

typedef struct {
  const unsigned char *r;
  const unsigned *unit;
  unsigned char *usable; /* a unit's latest version may be read later */
  unsigned *inst;        /* the instance that last recomputed a unit */
  unsigned cur;          /* this instance */
  unsigned at;           /* where the next step goes */
} apply_st;

/* Recompute unit u at a->at: first the producer units it reads that have
 * no version to read (they are recomputed for this instance only unless
 * R_ONCE), then its nodes in order. target: a backward step reads u. */
static int insert_unit(nnt_model *m, apply_st *a, unsigned u, int target, nnt_err *e) {
  a->inst[u] = a->cur;
  for (size_t i = u; i < m->n_nodes; i++) {
    if (a->unit[i] != u)
      continue;
    const nnt_node *nd = &m->nodes[i];
    for (unsigned k = 0; k < nd->n_in; k++) {
      unsigned p = nd->in_node[k];
      if (p == NNT_NO_NODE)
        continue;
      unsigned pu = a->unit[p];
      if (pu == u || a->r[pu] == R_KEEP || a->usable[pu] || a->inst[pu] == a->cur)
        continue;
      int rc = insert_unit(m, a, pu, 0, e);
      if (rc)
        return rc;
    }
  }
  for (size_t i = u; i < m->n_nodes; i++) {
    if (a->unit[i] != u)
      continue;
    int rc = nnt_schedule_insert(m, NNT_MODE_TRAIN, a->at, (nnt_step){(unsigned)i, NNT_STEP_FORWARD},
                                 e);
    if (rc)
      return rc;
    a->at++;
    if (!m->nodes[i].recompute)
      m->n_recompute++;
    m->nodes[i].recompute = 1;
    m->recompute_flops += nnt_recompute_node_flops(m, i);
  }
  if (target || a->r[u] == R_ONCE)
    a->usable[u] = 1;
  return NNT_OK;
}

/* Make r the schedule's recomputation: a unit is recomputed just before
 * the first backward step that reads it while no version of it may be
 * read. scratch: 3 * n_nodes bytes plus n_nodes unsigned (inst). */
static int apply_set(nnt_model *m, const unsigned *unit, const unsigned char *r,
                     unsigned char *scratch, unsigned *inst, nnt_err *e) {
  size_t n = m->n_nodes;
  unsigned char *need = scratch;
  apply_st a = {r, unit, scratch + n, inst, 0, 0};
  nnt_recompute_clear(m);
  memset(a.usable, 0, n);
  for (size_t i = 0; i < n; i++)
    inst[i] = 0;
  a.at = nnt_schedule_forward_end(m, NNT_MODE_TRAIN);
  for (; a.at < m->n_steps[NNT_MODE_TRAIN]; a.at++) {
    memset(need, 0, n);
    step_needs(m, &m->sched[NNT_MODE_TRAIN][a.at], need);
    for (size_t i = 0; i < n; i++) {
      unsigned u = unit[i];
      if (need[i] && r[u] != R_KEEP && !a.usable[u]) {
        a.cur++;
        int rc = insert_unit(m, &a, u, 1, e);
        if (rc)
          return rc;
      }
    }
  }
  return NNT_OK;
}

typedef struct {
  unsigned *unit, *inst;
  unsigned char *scratch;
} search_ws;

/* The training total with recomputation set r (applied). */
static int measure(nnt_model *m, search_ws *w, const unsigned char *r, size_t *total,
                   nnt_err *e) {
  int rc = apply_set(m, w->unit, r, w->scratch, w->inst, e);
  return rc ? rc : nnt_model_train_total(m, total, e);
}

/* The search's best: fewest extra FLOPs among the fitting sets, and the
 * smallest total of all. */
typedef struct {
  size_t budget, min;
  int found;
  double flops;
  unsigned char *best, *smallest;
} search_best;

static int try_set(nnt_model *m, search_ws *w, search_best *b, const unsigned char *r,
                   size_t *total, nnt_err *e) {
  int rc = measure(m, w, r, total, e);
  if (rc)
    return rc;
  size_t n = m->n_nodes;
  if (*total < b->min) {
    b->min = *total;
    memcpy(b->smallest, r, n);
  }
  if (*total <= b->budget && (!b->found || m->recompute_flops < b->flops)) {
    b->found = 1;
    b->flops = m->recompute_flops;
    memcpy(b->best, r, n);
  }
  return NNT_OK;
}

int nnt_recompute_fit(nnt_model *m, size_t *min, nnt_err *e) {
  size_t n = m->n_nodes, budget = (size_t)m->memory_budget;
  /* room for the datasets' queues (plan.c) */
  budget = budget > m->budget_reserve ? budget - m->budget_reserve : 0;
  *min = 0;
  if (!n)
    return NNT_ERR_NOMEM;
  /* r, best, smallest, scratch (2n), cut flags; unit, inst */
  unsigned char *mem = nnt_calloc(7 * n, 1);
  unsigned *umem = nnt_calloc(2 * n, sizeof *umem);
  if (!mem || !umem) {
    nnt_free(mem);
    nnt_free(umem);
    return nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory choosing recomputation");
  }
  unsigned char *r = mem, *cut = mem + 5 * n, *tried = mem + 6 * n;
  search_ws w = {umem, umem + n, mem + 3 * n};
  search_best b = {budget, SIZE_MAX, 0, 0, mem + n, mem + 2 * n};
  units(m, w.unit);
  /* cut nodes: no edge from before i to after i */
  size_t reach = 0, ncut = 0;
  for (size_t i = 0; i < n; i++) {
    cut[i] = reach <= i && eligible(m, i);
    ncut += cut[i];
    for (size_t j = i + 1; j < n; j++)
      for (unsigned k = 0; k < m->nodes[j].n_in; k++)
        if (m->nodes[j].in_node[k] == i && j > reach)
          reach = j;
  }
  int rc = NNT_OK;
  size_t total;
  /* without recomputation: what a smaller plan must beat */
  memset(r, 0, n);
  rc = try_set(m, &w, &b, r, &total, e);
  /* every k-th cut kept (k = ncut + 1: none), the rest recomputed once
   * or for each reader */
  for (int how = R_ONCE; how <= R_EACH && !rc; how++)
    for (size_t k = 1; k <= ncut + 1 && !rc; k++) {
      size_t c = 0;
      for (size_t i = 0; i < n; i++) {
        int keep = cut[i] && (++c % k == 0);
        r[i] = eligible(m, i) && !keep ? (unsigned char)how : R_KEEP;
      }
      close_set(m, w.unit, r);
      rc = try_set(m, &w, &b, r, &total, e);
    }
  /* nothing fits: change one unit at a time from the smallest while the
   * total falls */
  for (int round = 0; !rc && !b.found && round < 8; round++) {
    size_t before = b.min;
    for (size_t u = 0; u < n && !rc && !b.found; u++) {
      if (w.unit[u] != u || !eligible(m, u))
        continue;
      for (unsigned char v = R_KEEP; v <= R_EACH && !rc; v++) {
        memcpy(r, b.smallest, n);
        if (r[u] == v)
          continue;
        r[u] = v;
        close_set(m, w.unit, r);
        rc = try_set(m, &w, &b, r, &total, e);
      }
    }
    if (b.min >= before)
      break;
  }
  /* fewer FLOPs: recompute the most expensive units less while it fits */
  memset(tried, 0, n);
  for (int round = 0; b.found && !rc && round < 4 * (int)n; round++) {
    size_t pick = n;
    double f = -1;
    for (size_t i = 0; i < n; i++)
      if (b.best[i] && !tried[i] && w.unit[i] == i) {
        double fl = 0;
        for (size_t j = i; j < n; j++)
          if (w.unit[j] == i)
            fl += nnt_recompute_node_flops(m, j);
        if (fl > f) {
          f = fl;
          pick = i;
        }
      }
    if (pick == n || f <= 0)
      break;
    memcpy(r, b.best, n);
    r[pick]--;
    close_set(m, w.unit, r);
    double before = b.flops;
    rc = try_set(m, &w, &b, r, &total, e);
    /* no gain: leave the unit as it is */
    if (!rc && b.flops >= before)
      tried[pick] = 1;
  }
  *min = b.min;
  if (!rc && b.found)
    rc = apply_set(m, w.unit, b.best, w.scratch, w.inst, e);
  if (rc || !b.found)
    nnt_recompute_clear(m);
  nnt_free(mem);
  nnt_free(umem);
  return rc ? rc : b.found ? NNT_OK : NNT_ERR_NOMEM;
}
