/* Which nodes keep less than their output for their backward
 * (nnt_layer_ops.keep_less: a relu's bit mask): at compile where only the
 * node reads that output in the backward, and at the training plan, by
 * its total, where a consumer's backward reads it too. */
#include "nntrainer/model_impl.h"

/* Each node whose backward runs and whose output 0 only it reads there
 * (no consumer reads its input in a backward that runs, directly or
 * through a view; a model output is read after the forward pass) may keep
 * less (nnt_layer_ops.keep_less). One whose consumers read it too is a
 * candidate that nnt_graph_keep_less_choose decides at the training
 * plan. After finalize_each and assign_work. */
int nnt_graph_keep_less(nnt_model *m, nnt_err *e) {
  m->keep_less_done = 0;
  for (size_t j = 0; j < m->n_nodes; j++)
    m->nodes[j].less_cand = 0;
  if (m->keep_outputs || !m->n_nodes)
    return NNT_OK;
  unsigned char *read = nnt_calloc(m->n_nodes, 1);
  if (!read)
    return nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory");
  /* consumers come after their producers: read[j] is final at j */
  for (size_t j = m->n_nodes; j-- > 0;) {
    const nnt_node *c = &m->nodes[j];
    int reads = nnt_node_bwd_reads_input(c);
    int view = (c->fc.flags & NNT_LF_VIEW) && read[j];
    for (unsigned k = 0; k < c->n_in; k++)
      if (c->in_node[k] != NNT_NO_NODE && c->in_idx[k] == 0 && (reads || view))
        read[c->in_node[k]] = 1;
    if (!c->n_consumers[0] || !(c->do_grad || c->do_deriv) ||
        !(c->fc.flags & NNT_LF_BWD_READS_OUTPUT) || !c->layer->ops->keep_less)
      continue;
    if (read[j])
      m->nodes[j].less_cand = 1;
    else
      c->layer->ops->keep_less(c->layer, &m->nodes[j].fc);
  }
  nnt_free(read);
  return NNT_OK;
}

/* Candidate i kept less (on) or as finalize declared (off). */
static void keep_less_set(nnt_node *nd, int on) {
  if (on && nd->less_cand == 1) {
    nd->less_flags = nd->fc.flags, nd->less_scratch = nd->fc.n_scratch;
    nd->layer->ops->keep_less(nd->layer, &nd->fc);
    nd->less_cand = 2;
  } else if (!on && nd->less_cand == 2) {
    nd->fc.flags = nd->less_flags, nd->fc.n_scratch = nd->less_scratch;
    nd->less_cand = 1;
  }
}

int nnt_graph_keep_less_choose(nnt_model *m, nnt_err *e) {
  if (m->keep_less_done || !m->memory_optimization)
    return NNT_OK;
  m->keep_less_done = 1;
  size_t n = m->n_nodes, ncand = 0, best, total;
  for (size_t i = 0; i < n; i++)
    ncand += m->nodes[i].less_cand != 0;
  if (!ncand)
    return NNT_OK;
  /* none, then all, then each left out while that is no larger (less
   * work in the forward for the same memory) */
  int rc = nnt_model_train_total(m, &best, e);
  for (size_t i = 0; i < n; i++)
    keep_less_set(&m->nodes[i], 1);
  if (!rc)
    rc = nnt_model_train_total(m, &total, e);
  int all = !rc && total < best;
  if (all)
    best = total;
  for (size_t i = 0; !all && i < n; i++)
    keep_less_set(&m->nodes[i], 0);
  for (size_t i = 0; all && !rc && i < n; i++) {
    if (m->nodes[i].less_cand != 2)
      continue;
    keep_less_set(&m->nodes[i], 0);
    rc = nnt_model_train_total(m, &total, e);
    if (!rc && total <= best)
      best = total;
    else
      keep_less_set(&m->nodes[i], 1);
  }
  return rc;
}
