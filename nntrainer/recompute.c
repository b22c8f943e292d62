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

/* An in-place node overwrote its input: it is recomputed only with its
 * producer (whose twin it then shares). Drops the others from r. */
static void close_set(const nnt_model *m, unsigned char *r) {
  for (size_t i = 0; i < m->n_nodes; i++)
    if (r[i] && m->nodes[i].inplace &&
        (m->nodes[i].in_node[0] == NNT_NO_NODE || !r[m->nodes[i].in_node[0]]))
      r[i] = 0;
}

/* Which recomputable nodes' twins backward step st reads (mirrors plan.c
 * touch_step): into need[]. */
static void step_needs(const nnt_model *m, const unsigned char *r, const nnt_step *st,
                       unsigned char *need) {
  if (st->kind != NNT_STEP_CALC_GRADIENT && st->kind != NNT_STEP_CALC_DERIVATIVE)
    return;
  const nnt_node *nd = &m->nodes[st->node];
  int grad = st->kind == NNT_STEP_CALC_GRADIENT, deriv = !grad;
  int bwd = grad ? nd->do_grad : nd->do_grad || nd->do_deriv;
  if (r[st->node] && (bwd || deriv))
    for (unsigned c = 0; c < nd->fc.n_scratch; c++)
      if (nd->fc.scratch_life[c] == NNT_SCRATCH_ITER)
        need[st->node] = 1;
  if (!bwd)
    return;
  for (unsigned k = 0; k < nd->n_in; k++)
    if ((nd->fc.flags & NNT_LF_BWD_READS_INPUT) && nd->in_node[k] != NNT_NO_NODE &&
        r[nd->in_node[k]])
      need[nd->in_node[k]] = 1;
  if ((nd->fc.flags & NNT_LF_BWD_READS_OUTPUT) && r[st->node])
    need[st->node] = 1;
}

/* Insert node i's recompute step at *at, its recomputable producers'
 * first (in forward order). */
static int insert_node(nnt_model *m, const unsigned char *r, unsigned char *done, size_t i,
                       unsigned *at, nnt_err *e) {
  const nnt_node *nd = &m->nodes[i];
  for (unsigned k = 0; k < nd->n_in; k++) {
    unsigned p = nd->in_node[k];
    if (p != NNT_NO_NODE && r[p] && !done[p]) {
      int rc = insert_node(m, r, done, p, at, e);
      if (rc)
        return rc;
    }
  }
  if (done[i])
    return NNT_OK;
  int rc = nnt_schedule_insert(m, NNT_MODE_TRAIN, *at, (nnt_step){(unsigned)i, NNT_STEP_FORWARD},
                               e);
  if (rc)
    return rc;
  (*at)++;
  done[i] = 1;
  m->nodes[i].recompute = 1;
  m->n_recompute++;
  m->recompute_flops += nnt_recompute_node_flops(m, i);
  return NNT_OK;
}

/* Make r the schedule's recomputation: each twin is computed just before
 * the first backward step that reads it. scratch: 2 * n_nodes bytes. */
static int apply_set(nnt_model *m, const unsigned char *r, unsigned char *scratch, nnt_err *e) {
  size_t n = m->n_nodes;
  unsigned char *done = scratch, *need = scratch + n;
  nnt_recompute_clear(m);
  memset(done, 0, n);
  unsigned s = nnt_schedule_forward_end(m, NNT_MODE_TRAIN);
  for (; s < m->n_steps[NNT_MODE_TRAIN]; s++) {
    memset(need, 0, n);
    step_needs(m, r, &m->sched[NNT_MODE_TRAIN][s], need);
    for (size_t i = 0; i < n; i++)
      if (need[i] && !done[i]) {
        int rc = insert_node(m, r, done, i, &s, e);
        if (rc)
          return rc;
      }
  }
  return NNT_OK;
}

/* The training total with recomputation set r (applied). */
static int measure(nnt_model *m, const unsigned char *r, unsigned char *scratch, size_t *total,
                   nnt_err *e) {
  int rc = apply_set(m, r, scratch, e);
  return rc ? rc : nnt_model_train_total(m, total, e);
}

int nnt_recompute_fit(nnt_model *m, size_t *min, nnt_err *e) {
  size_t n = m->n_nodes, budget = (size_t)m->memory_budget;
  /* room for the datasets' queues (plan.c) */
  budget = budget > m->budget_reserve ? budget - m->budget_reserve : 0;
  *min = 0;
  if (!n)
    return NNT_ERR_NOMEM;
  /* r, best, cand, scratch (2n), cut flags */
  unsigned char *mem = nnt_calloc(6 * n, 1);
  if (!mem)
    return nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory choosing recomputation");
  unsigned char *r = mem, *best = mem + n, *scratch = mem + 3 * n, *cut = mem + 5 * n;
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
  int rc = NNT_OK, found = 0;
  double best_flops = 0;
  size_t total;
  /* without recomputation: what a smaller plan must beat */
  memset(r, 0, n);
  if ((rc = measure(m, r, scratch, min, e))) {
    nnt_free(mem);
    return rc;
  }
  /* k = ncut + 1: no cut kept (everything eligible recomputed) */
  for (size_t k = 1; k <= ncut + 1 && !rc; k++) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) {
      int keep = cut[i] && (++c % k == 0);
      r[i] = eligible(m, i) && !keep;
    }
    close_set(m, r);
    if ((rc = measure(m, r, scratch, &total, e)))
      break;
    if (total < *min)
      *min = total;
    if (total <= budget && (!found || m->recompute_flops < best_flops)) {
      found = 1;
      best_flops = m->recompute_flops;
      memcpy(best, r, n);
    }
  }
  /* greedy: keep the most expensive recomputed nodes while it fits */
  for (int round = 0; found && !rc && round < 2 * (int)n; round++) {
    size_t pick = n;
    double f = -1;
    memcpy(r, best, n);
    for (size_t i = 0; i < n; i++)
      if (best[i] && !cut[i] && nnt_recompute_node_flops(m, i) > f)
        f = nnt_recompute_node_flops(m, pick = i);
    if (pick == n || f <= 0)
      break;
    r[pick] = 0;
    close_set(m, r);
    if ((rc = measure(m, r, scratch, &total, e)))
      break;
    /* tried once: never again (cut[] marks it) */
    cut[pick] = 1;
    if (total <= budget && m->recompute_flops < best_flops) {
      best_flops = m->recompute_flops;
      memcpy(best, r, n);
    }
  }
  if (!rc && found)
    rc = apply_set(m, best, scratch, e);
  if (rc || !found)
    nnt_recompute_clear(m);
  nnt_free(mem);
  return rc ? rc : found ? NNT_OK : NNT_ERR_NOMEM;
}
