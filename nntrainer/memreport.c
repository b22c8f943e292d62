/* Where a mode's plan peaks and what is live there (memreport.h). */
#include "nntrainer/memreport.h"

#include <stdio.h>
#include <string.h>

int nnt_model_mem_peak(const nnt_model *m, nnt_mode mode, nnt_mem_peak *p, nnt_err *e) {
  const nnt_mgr *g = &m->mgr[mode];
  memset(p, 0, sizeof *p);
  if (!g->planned)
    return nnt_err_set(e, NNT_ERR_INVAL, "memory report: the %s plan is not made",
                       nnt_mode_name(mode));
  int rc = nnt_mgr_peak(g, &p->step, p->kind_bytes, e);
  if (rc)
    return rc;
  for (int k = 0; k < NNT_TK__COUNT; k++)
    p->live_bytes += p->kind_bytes[k];
  p->n_steps = m->n_steps[mode];
  p->kind = NNT_STEP_NONE;
  if (p->step < p->n_steps) {
    const nnt_step *st = &m->sched[mode][p->step];
    p->kind = st->kind;
    if (st->node != NNT_NO_NODE && st->node < m->n_nodes)
      p->layer = m->nodes[st->node].layer->name;
  }
  /* the pools: the weights always, the optimizer state when training */
  unsigned slots = mode == NNT_MODE_TRAIN && m->opt ? nnt_optimizer_state_count(m->opt) : 0;
  p->kind_bytes[NNT_TK_WEIGHT] = m->wmgr.planned ? m->wmgr.arena_bytes : m->weight_bytes;
  p->kind_bytes[NNT_TK_OPT_STATE] = nnt_model_opt_bytes(m, slots);
  p->total_bytes = p->live_bytes + p->kind_bytes[NNT_TK_WEIGHT] + p->kind_bytes[NNT_TK_OPT_STATE];
  /* the largest live roots in the arena (their reserved bytes: the
   * largest of the root and its views; a borrowed batch holds none), by
   * insertion into a short sorted list */
  size_t *ext = nnt_calloc(g->n ? g->n : 1, sizeof *ext);
  if (!ext)
    return nnt_err_set(e, NNT_ERR_NOMEM, "memory report: out of memory");
  for (size_t i = 0; i < g->n; i++) {
    int r = nnt_mgr_root(g, (int)i);
    if (g->t[i].bytes > ext[r])
      ext[r] = g->t[i].bytes;
  }
  for (size_t i = 0; i < g->n; i++) {
    const nnt_mgr_tensor *t = &g->t[i];
    if (t->parent >= 0 || t->life_first > p->step || t->life_last < p->step ||
        nnt_mgr_borrowed(g, (int)i))
      continue;
    unsigned at = p->n_largest;
    while (at > 0 && p->largest_bytes[at - 1] < ext[i])
      at--;
    if (at >= NNT_MEM_PEAK_TOP)
      continue;
    unsigned end = p->n_largest < NNT_MEM_PEAK_TOP ? p->n_largest : NNT_MEM_PEAK_TOP - 1;
    memmove(p->largest + at + 1, p->largest + at, (end - at) * sizeof *p->largest);
    memmove(p->largest_bytes + at + 1, p->largest_bytes + at,
            (end - at) * sizeof *p->largest_bytes);
    p->largest[at] = (int)i;
    p->largest_bytes[at] = ext[i];
    if (p->n_largest < NNT_MEM_PEAK_TOP)
      p->n_largest++;
  }
  nnt_free(ext);
  return NNT_OK;
}

const char *nnt_mem_peak_where(const nnt_mem_peak *p, char *buf, size_t n) {
  if (p->step >= p->n_steps)
    snprintf(buf, n, "after step %u (the loss values are read)", p->step ? p->step - 1 : 0);
  else if (p->layer)
    snprintf(buf, n, "step %u: %s of %s", p->step, nnt_step_kind_name(p->kind), p->layer);
  else
    snprintf(buf, n, "step %u: %s", p->step, nnt_step_kind_name(p->kind));
  return buf;
}
