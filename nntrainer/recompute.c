/* Recomputation under [Model] memory_budget: when the training plan does
 * not fit, some forward results are dropped after the forward pass and
 * computed again in the backward pass, just before the first backward step
 * that reads them. The unit is an in-place chain, kept, recomputed once or
 * recomputed for each reader (what only fed another recomputation is
 * dropped at once and computed again when read). The choice: segment
 * checkpointing (Chen et al. 2016) over the graph's cut nodes, prefixes of
 * the graph, a descent towards the smallest plan when nothing fits, then a
 * descent over unit and group moves for fewer extra FLOPs under the
 * budget. Every candidate is measured with the real planner
 * (nnt_model_train_total), so what is chosen is what runs. A recompute
 * step is a forward step of the node in the backward part of the
 * schedule; plan.c gives each one fresh outputs and forward scratch, and
 * each step binds the latest (nnt_model_bind_step, here). Without a
 * budget, the default plan recomputes cheap chains from what batch
 * normalization keeps (nnt_recompute_default, at the end). */
#include "nntrainer/model_impl.h"

#include <string.h>

void nnt_model_bind_phase(nnt_model *m, int bwd) {
  if (m->bound_mode != NNT_MODE_TRAIN || !m->n_recompute || bwd)
    return;
  const nnt_mgr *g = &m->mgr[NNT_MODE_TRAIN];
  for (size_t i = 0; i < m->n_nodes; i++) {
    nnt_node *nd = &m->nodes[i];
    for (unsigned k = 0; k < nd->n_in; k++)
      nd->in[k] = nnt_mgr_bind(g, nd->t_in[k], nd->fc.in_dim[k]);
    for (unsigned o = 0; o < nd->fc.n_out; o++)
      nd->out[o] = nnt_mgr_bind(g, nd->t_out[o], nd->fc.out_dim[o]);
    for (unsigned c = 0; c < nd->fc.n_scratch; c++)
      nd->scratch[c] = nnt_mgr_bind(g, nd->t_scratch[c], nd->fc.scratch_dim[c]);
  }
}

void nnt_model_bind_step(nnt_model *m, unsigned s) {
  if (m->bound_mode != NNT_MODE_TRAIN || !m->n_recompute || s >= m->n_alt)
    return;
  const nnt_step *st = &m->sched[NNT_MODE_TRAIN][s];
  if (st->node >= m->n_nodes)
    return;
  const nnt_mgr *g = &m->mgr[NNT_MODE_TRAIN];
  nnt_node *nd = &m->nodes[st->node];
  for (unsigned k = 0; k < nd->n_in; k++)
    nd->in[k] = nnt_mgr_bind(g, nnt_step_id(m, 1, s, k, nd->t_in[k]), nd->fc.in_dim[k]);
  for (unsigned o = 0; o < nd->fc.n_out; o++)
    nd->out[o] =
        nnt_mgr_bind(g, nnt_step_id(m, 1, s, NNT_MAX_IO + o, nd->t_out[o]), nd->fc.out_dim[o]);
  for (unsigned c = 0; c < nd->fc.n_scratch; c++)
    nd->scratch[c] = nnt_mgr_bind(g, nnt_step_id(m, 1, s, 2 * NNT_MAX_IO + c, nd->t_scratch[c]),
                                  nd->fc.scratch_dim[c]);
}

int nnt_node_forward(nnt_model *m, nnt_node *nd) {
  /* the default plan's cheap recomputation: from what forward kept */
  if (nd->ctx.recompute && nd->recompute_saved)
    return nd->layer->ops->forward_saved(nd->layer, &nd->ctx);
  /* an addition's input computed again image by image (rerun.c) */
  if (nd->rerun && m->bound_mode == NNT_MODE_TRAIN && !nd->ctx.recompute)
    return nnt_rerun_forward(m, nd);
  /* a branch run at its addition's step (delay.c) */
  if ((nd->delay || nd->delayed) && m->bound_mode == NNT_MODE_TRAIN && !nd->ctx.recompute)
    return nnt_delay_forward(m, nd);
  return nd->layer->ops->forward(nd->layer, &nd->ctx);
}

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
    m->nodes[i].recompute = m->nodes[i].recompute_saved = 0;
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
static void step_needs(const nnt_model *m, const nnt_step *st, const unsigned char *saved,
                       unsigned char *need) {
  if (st->kind != NNT_STEP_CALC_GRADIENT && st->kind != NNT_STEP_CALC_DERIVATIVE)
    return;
  const nnt_node *nd = &m->nodes[st->node];
  int grad = st->kind == NNT_STEP_CALC_GRADIENT;
  int bwd = grad ? nd->do_grad : nd->do_grad || nd->do_deriv;
  /* forward_saved keeps the scratch forward made: what it reads stays */
  if (bwd && !(saved && saved[st->node]))
    for (unsigned c = 0; c < nd->fc.n_scratch; c++)
      if (nd->fc.scratch_life[c] == NNT_SCRATCH_ITER ||
          nd->fc.scratch_life[c] == NNT_SCRATCH_SAVED)
        need[st->node] = 1;
  if (!bwd)
    return;
  for (unsigned k = 0; k < nd->n_in; k++)
    if (nnt_node_step_reads_input(nd, grad) && nd->in_node[k] != NNT_NO_NODE)
      need[nd->in_node[k]] = 1;
  if (nd->fc.flags & NNT_LF_BWD_READS_OUTPUT)
    need[st->node] = 1;
}

typedef struct {
  const unsigned char *r;
  const unsigned char *saved; /* heads recomputed by forward_saved, or NULL */
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
    for (unsigned k = 0; k < nd->n_in && !(a->saved && a->saved[i]); k++) {
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
    nnt_step st = {(unsigned)i, NNT_STEP_FORWARD};
    int rc = nnt_schedule_insert(m, NNT_MODE_TRAIN, a->at, st, e);
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
static int apply_saved(nnt_model *m, const unsigned *unit, const unsigned char *r,
                       const unsigned char *saved, unsigned char *scratch, unsigned *inst,
                       nnt_err *e) {
  size_t n = m->n_nodes;
  unsigned char *need = scratch;
  apply_st a = {r, saved, unit, scratch + n, inst, 0, 0};
  nnt_recompute_clear(m);
  memset(a.usable, 0, n);
  for (size_t i = 0; i < n; i++)
    inst[i] = 0;
  a.at = nnt_schedule_forward_end(m, NNT_MODE_TRAIN);
  for (; a.at < m->n_steps[NNT_MODE_TRAIN]; a.at++) {
    memset(need, 0, n);
    step_needs(m, &m->sched[NNT_MODE_TRAIN][a.at], saved, need);
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
  for (size_t i = 0; saved && i < n; i++)
    m->nodes[i].recompute_saved = saved[i] && m->nodes[i].recompute;
  return NNT_OK;
}

static int apply_set(nnt_model *m, const unsigned *unit, const unsigned char *r,
                     unsigned char *scratch, unsigned *inst, nnt_err *e) {
  return apply_saved(m, unit, r, NULL, scratch, inst, e);
}

typedef struct {
  unsigned *unit, *inst;
  unsigned char *scratch;
  unsigned *unit2; /* apply_mixed: n each */
  unsigned char *r2, *saved2;
} search_ws;

/* r over the search's units, and the default plan's cheap chains
 * (m->cheap) recomputed from what they keep wherever r keeps their unit. */
static int apply_mixed(nnt_model *m, search_ws *w, const unsigned char *r, nnt_err *e) {
  if (!m->cheap)
    return apply_set(m, w->unit, r, w->scratch, w->inst, e);
  for (size_t i = 0; i < m->n_nodes; i++) {
    int tail = m->cheap[i] && r[w->unit[i]] == R_KEEP;
    w->saved2[i] = tail && m->cheap[i] == 2;
    w->unit2[i] = !tail ? w->unit[i]
                  : w->saved2[i] ? (unsigned)i
                                 : w->unit2[m->nodes[i].in_node[0]];
    w->r2[i] = tail ? R_ONCE : r[i];
  }
  return apply_saved(m, w->unit2, w->r2, w->saved2, w->scratch, w->inst, e);
}

/* The training total with recomputation set r (applied). */
static int measure(nnt_model *m, search_ws *w, const unsigned char *r, size_t *total,
                   nnt_err *e) {
  int rc = apply_mixed(m, w, r, e);
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

#define NNT_RECOMPUTE_EVALS 600 /* plans per descent */

/* Move k of a search over units: k < 3n sets group k / 3 (the units
 * whose gid is k / 3) to choice k % 3; k < 6n sets unit k / 3 - n. No
 * change (or no such group): 0. */
static int move(const nnt_model *m, const search_ws *w, const unsigned *gid, unsigned char *r,
                size_t k) {
  size_t n = m->n_nodes, x = k / 3;
  unsigned char v = (unsigned char)(k % 3);
  int changed = 0;
  for (size_t u = 0; u < n; u++) {
    int hit = x < n ? gid[u] == x : u == x - n;
    if (hit && w->unit[u] == u && eligible(m, u) && r[u] != v) {
      r[u] = v;
      changed = 1;
    }
  }
  if (changed)
    close_set(m, w->unit, r);
  return changed;
}

/* Fewer FLOPs under the budget from start (which fits, with flops f):
 * first-improvement descent over single moves and pairs (a move that
 * saves FLOPs with a group move that saves memory), at most evals plans.
 * cur, r: n bytes each. */
static int reduce_flops(nnt_model *m, search_ws *w, search_best *b, const unsigned *gid,
                        const unsigned char *start, double f, unsigned char *cur,
                        unsigned char *r, size_t evals, nnt_err *e) {
  size_t n = m->n_nodes, total;
  unsigned char *base = r + n; /* r's second half */
  int rc = NNT_OK;
  memcpy(cur, start, n);
  /* cyclic: go on after the move that improved; stop after a whole round
   * of moves without a gain */
  for (size_t k = 0, quiet = 0; quiet < 6 * n && !rc && evals; k = (k + 1) % (6 * n), quiet++) {
    int improved = 0;
    memcpy(base, cur, n);
    if (!move(m, w, gid, base, k))
      continue;
    memcpy(r, base, n);
    rc = try_set(m, w, b, r, &total, e);
    evals--;
    improved = !rc && total <= b->budget && m->recompute_flops < f;
    if (!improved && !rc && total > b->budget && m->recompute_flops < f)
      for (size_t j = 0; j < 3 * n && !improved && !rc && evals; j++) {
        memcpy(r, base, n);
        if (j / 3 == k / 3 || !move(m, w, gid, r, j))
          continue;
        rc = try_set(m, w, b, r, &total, e);
        evals--;
        improved = !rc && total <= b->budget && m->recompute_flops < f;
      }
    if (improved) {
      memcpy(cur, r, n);
      f = m->recompute_flops;
      quiet = 0;
    }
  }
  return rc;
}

int nnt_recompute_fit(nnt_model *m, size_t *min, nnt_err *e) {
  size_t n = m->n_nodes, budget = (size_t)m->memory_budget;
  /* room for the datasets' queues (plan.c) */
  budget = budget > m->budget_reserve ? budget - m->budget_reserve : 0;
  *min = 0;
  if (!n)
    return NNT_ERR_NOMEM;
  /* r (2n), best, smallest, scratch (2n), cut flags, base, start, r2,
   * saved2 */
  unsigned char *mem = nnt_calloc(11 * n, 1);
  unsigned *umem = nnt_calloc(4 * n, sizeof *umem);
  if (!mem || !umem) {
    nnt_free(mem);
    nnt_free(umem);
    return nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory choosing recomputation");
  }
  unsigned char *r = mem, *cut = mem + 6 * n, *base = mem + 7 * n, *start = mem + 8 * n;
  search_ws w = {umem, umem + n, mem + 4 * n, umem + 3 * n, mem + 9 * n, mem + 10 * n};
  search_best b = {budget, SIZE_MAX, 0, 0, mem + 2 * n, mem + 3 * n};
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
  /* the early layers hold the largest activations: the units before the
   * a-th recomputed for each reader, those before the b-th once, the rest
   * kept */
  size_t nu = 0;
  for (size_t i = 0; i < n; i++)
    nu += w.unit[i] == i;
  for (size_t ua = 0; ua <= nu && !rc; ua++)
    for (size_t ub = ua; ub <= nu && !rc; ub++) {
      size_t c = 0;
      for (size_t i = 0; i < n; i++) {
        r[i] = w.unit[i] != i ? R_KEEP : c < ua ? R_EACH : c < ub ? R_ONCE : R_KEEP;
        c += w.unit[i] == i;
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
  /* fewer FLOPs: moves that set a unit, or a group of alike units (the
   * same output size, cut or not), to one choice; a move that saves FLOPs
   * but does not fit is tried with each group move that saves memory */
  if (b.found && !rc) {
    unsigned *gid = w.inst + n; /* after units(): one per node */
    for (size_t u = 0; u < n; u++) {
      gid[u] = (unsigned)u;
      for (size_t v = 0; v < u && w.unit[u] == u; v++)
        if (w.unit[v] == v && cut[v] == cut[u] &&
            nnt_dim_len(m->nodes[v].fc.out_dim[0]) == nnt_dim_len(m->nodes[u].fc.out_dim[0])) {
          gid[u] = (unsigned)v;
          break;
        }
    }
    /* from the fitting set of fewest FLOPs, then from the smallest */
    memcpy(start, b.best, n);
    rc = reduce_flops(m, &w, &b, gid, start, b.flops, base, r, NNT_RECOMPUTE_EVALS, e);
    memcpy(start, b.smallest, n);
    if (!rc && measure(m, &w, start, &total, e) == NNT_OK && total <= budget)
      rc = reduce_flops(m, &w, &b, gid, start, m->recompute_flops, base, r,
                        NNT_RECOMPUTE_EVALS, e);
  }
  *min = b.min;
  if (!rc && b.found)
    rc = apply_mixed(m, &w, b.best, e);
  if (rc || !b.found)
    nnt_recompute_clear(m);
  nnt_free(mem);
  nnt_free(umem);
  return rc ? rc : b.found ? NNT_OK : NNT_ERR_NOMEM;
}

/* The default plan's cheap recomputation. A chain is a head with
 * forward_saved (batch normalization: gamma * xhat + beta from its kept
 * xhat) and the activations and additions that run in place over it:
 * O(1) work per element, no matrix product, and the same bits. Its output
 * is then dropped after the forward pass and computed again just before
 * the first backward step that reads it (a convolution's calc_gradient,
 * a relu's calc_derivative), kept to the last such step. */
static int cheap_follower(const nnt_node *nd) {
  const char *t = nd->layer->ops->type;
  return !strcmp(t, "activation") || !strcmp(t, "addition");
}

static int saved_head(const nnt_model *m, size_t i) {
  const nnt_node *nd = &m->nodes[i];
  const nnt_layer_ops *o = nd->layer->ops;
  if (!o->forward_saved || !(nd->do_grad || nd->do_deriv) || !eligible(m, i))
    return 0;
  for (unsigned k = 0; k < NNT_KOP__COUNT; k++)
    if (((o->saved_kops >> k) & 1) && !m->be->supports(m->be, (nnt_kop)k))
      return 0;
  return 1;
}

int nnt_recompute_default(nnt_model *m, nnt_err *e) {
  size_t n = m->n_nodes, total, best_total;
  if (m->recompute_default_done || !m->memory_optimization || m->keep_outputs || !n)
    return NNT_OK;
  m->recompute_default_done = 1;
  /* a schedule already edited (recompute steps inserted) stays as it is */
  const nnt_step *sch = m->sched[NNT_MODE_TRAIN];
  for (unsigned s = nnt_schedule_forward_end(m, NNT_MODE_TRAIN); s < m->n_steps[NNT_MODE_TRAIN];
       s++)
    if (sch[s].kind == NNT_STEP_FORWARD)
      return NNT_OK;
  unsigned char *mem = nnt_calloc(6 * n, 1);
  unsigned *umem = nnt_calloc(2 * n, sizeof *umem);
  if (!mem || !umem) {
    nnt_free(mem);
    nnt_free(umem);
    return nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory choosing recomputation");
  }
  unsigned char *r = mem, *best = mem + n, *saved = mem + 2 * n, *scr = mem + 3 * n;
  unsigned char *cand = mem + 5 * n;
  unsigned *unit = umem, *inst = umem + n;
  size_t ncand = 0;
  /* the plan without (which sets the nodes' in-place flags) */
  memset(best, R_KEEP, n);
  int rc = nnt_model_train_total(m, &best_total, e);
  for (size_t i = 0; i < n && !rc; i++) {
    const nnt_node *nd = &m->nodes[i];
    saved[i] = (unsigned char)saved_head(m, i);
    unit[i] = !saved[i] && nd->inplace && nd->in_node[0] != NNT_NO_NODE ? unit[nd->in_node[0]]
                                                                       : (unsigned)i;
    cand[i] = saved[i];
  }
  for (size_t i = 0; i < n; i++)
    if (unit[i] != i && (!cheap_follower(&m->nodes[i]) || !eligible(m, i)))
      cand[unit[i]] = 0;
  for (size_t i = 0; i < n; i++)
    ncand += cand[i];
  if (rc || !ncand)
    goto out;
  /* every chain, then each chain left out while that is no larger (fewer
   * recomputations for the same memory) */
  for (size_t i = 0; i < n; i++)
    r[i] = cand[unit[i]] ? R_ONCE : R_KEEP;
  if (!rc)
    rc = apply_saved(m, unit, r, saved, scr, inst, e);
  if (!rc)
    rc = nnt_model_train_total(m, &total, e);
  if (!rc && total < best_total) {
    best_total = total;
    memcpy(best, r, n);
  }
  for (size_t u = 0; u < n && !rc; u++) {
    if (!cand[u] || best[u] == R_KEEP)
      continue;
    memcpy(r, best, n);
    for (size_t i = u; i < n; i++)
      if (unit[i] == u)
        r[i] = R_KEEP;
    rc = apply_saved(m, unit, r, saved, scr, inst, e);
    if (!rc)
      rc = nnt_model_train_total(m, &total, e);
    if (!rc && total <= best_total) {
      best_total = total;
      memcpy(best, r, n);
    }
  }
  if (!rc)
    rc = apply_saved(m, unit, best, saved, scr, inst, e);
  /* for a budget's search (apply_mixed): 2 a head, 1 the rest */
  if (!rc && !(m->cheap = nnt_calloc(n, 1)))
    rc = nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory choosing recomputation");
  for (size_t i = 0; !rc && i < n; i++)
    m->cheap[i] = best[unit[i]] == R_KEEP ? 0 : saved[i] ? 2 : 1;
out:
  if (rc)
    nnt_recompute_clear(m);
  nnt_free(mem);
  nnt_free(umem);
  return rc;
}
