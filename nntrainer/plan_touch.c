/* Every tensor's lifetime in a mode's plan (plan.c): the first and the
 * last step of the mode's schedule that reads or writes it, from what each
 * step runs (a layer's forward, a rerun or a delayed branch, a backward
 * step, an update). */
#include "nntrainer/model_impl.h"

#include <limits.h>

static void use(nnt_mgr *g, int id, unsigned step) {
  if (id >= 0)
    nnt_mgr_use(g, id, step);
}

/* The tensors step st (at index s) reads or writes, in mode. A node's
 * backward (its calc_gradient step where it computes dW, and its
 * calc_derivative step) reads what its layer's flags say, its output's
 * derivative and its backward scratch; the calc_derivative step ends it,
 * and holds the label and the iteration's scratch even where the node
 * computes no dX. A node with neither (frozen, and no trainable layer
 * before it) keeps nothing past its forward step: its scratch lives in
 * that step only, and its backward scratch is not requested. */
static void touch_step(nnt_model *m, nnt_mode mode, nnt_mgr *g, unsigned s,
                       const nnt_step *st, int re) {
  int train = mode == NNT_MODE_TRAIN;
  if (st->kind == NNT_STEP_CLIP_APPLY) {
    /* every weight's gradient once: a shared weight's sum */
    for (size_t i = 0; train && i < m->n_nodes; i++)
      for (unsigned w = 0; m->nodes[i].grad_sum == i && w < m->nodes[i].fc.n_w; w++)
        use(g, m->nodes[i].t_gw[w], s);
    return;
  }
  if (st->kind == NNT_STEP_NONE)
    return;
  nnt_node *nd = &m->nodes[st->node];
  unsigned flags = nd->fc.flags;
  int grad = st->kind == NNT_STEP_CALC_GRADIENT, deriv = st->kind == NNT_STEP_CALC_DERIVATIVE;
  if (st->kind == NNT_STEP_FORWARD) {
    int fwd = train && s < nnt_schedule_forward_end(m, mode);
    if (fwd && nd->delayed) { /* it runs at its addition's step; the copy here */
      if (nd->t_gather >= 0) {
        use(g, nd->t_in[0], s);
        use(g, nd->t_gather, s);
        for (unsigned c = 0; c < nd->fc.n_scratch; c++) /* planned where recomputed */
          if (!nnt_scratch_in_backward(nd->fc.scratch_life[c]))
            use(g, nd->t_scratch[c], s);
      }
      return;
    }
    if (fwd && nd->delay) { /* the branch first: the copy, its outputs and scratch */
      const nnt_delay *d = &m->delays[nd->delay - 1];
      for (unsigned j = 0; j < d->n; j++) {
        const nnt_node *c = &m->nodes[d->chain[j]];
        use(g, j ? c->t_in[0] : c->t_gather, s);
        use(g, c->t_out[0], s);
        for (unsigned q = 0; q < c->fc.n_scratch; q++)
          if (!nnt_scratch_in_backward(c->fc.scratch_life[q]))
            use(g, c->t_scratch[q], s);
      }
    }
    const nnt_rerun *r = fwd && nd->rerun ? &m->reruns[nd->rerun - 1] : NULL;
    for (unsigned k = 0; k < nd->n_in; k++)
      if (!r || k != r->k)
        use(g, nnt_step_id(m, re, s, k, nd->t_in[k]), s);
    if (r) { /* the model inputs and the batch's statistics the chain reads */
      use(g, nd->t_rerun, s);
      for (unsigned j = 0; j < r->n; j++) {
        const nnt_node *c = &m->nodes[r->chain[j]];
        for (unsigned k = 0; k < c->n_in; k++)
          if (c->in_node[k] == NNT_NO_NODE)
            use(g, c->t_in[k], s);
        for (unsigned q = 0; q < c->fc.n_scratch; q++)
          if (c->layer->ops->whole_scratch >> q & 1)
            use(g, c->t_scratch[q], s);
      }
    }
    for (unsigned o = 0; o < nd->fc.n_out; o++)
      use(g, nnt_step_id(m, re, s, NNT_MAX_IO + o, nd->t_out[o]), s);
    for (unsigned c = 0; c < nd->fc.n_scratch; c++)
      if (!train || !nnt_scratch_in_backward(nd->fc.scratch_life[c]))
        use(g, nnt_step_id(m, re, s, 2 * NNT_MAX_IO + c, nd->t_scratch[c]), s);
    use(g, nd->t_label, s);
    use(g, nd->t_loss, s);
  } else if (train && st->kind == NNT_STEP_APPLY_GRADIENT) {
    /* the gradients that hold the sums (the node's own unless it shares) */
    const nnt_node *src = &m->nodes[nd->grad_sum];
    for (unsigned w = 0; w < src->fc.n_w; w++)
      use(g, src->t_gw[w], s);
  } else if (train && st->kind == NNT_STEP_ACCUMULATE_GRADIENT) {
    for (unsigned w = 0; w < nd->fc.n_w; w++) {
      use(g, nd->t_gw[w], s);
      use(g, m->nodes[nd->grad_sum].t_gw[w], s);
    }
  } else if (train && (grad || deriv)) {
    int bwd = grad ? nd->do_grad : nd->do_grad || nd->do_deriv;
    if (deriv)
      use(g, nd->t_label, s);
    for (unsigned c = 0; c < nd->fc.n_scratch; c++)
      if (bwd && nd->fc.scratch_life[c] != NNT_SCRATCH_FWD &&
          nd->fc.scratch_life[c] != NNT_SCRATCH_INPLACE &&
          (nd->fc.scratch_life[c] != NNT_SCRATCH_DERIV || deriv))
        use(g, nnt_step_id(m, re, s, 2 * NNT_MAX_IO + c, nd->t_scratch[c]), s);
    if (!bwd)
      return;
    for (unsigned k = 0; k < nd->n_in; k++) {
      if (nnt_node_step_reads_input(nd, grad))
        use(g, nnt_step_id(m, re, s, k, nd->t_in[k]), s);
      if (deriv && nd->do_deriv) {
        use(g, nd->t_din[k], s);
        use(g, nd->t_dsum[k], s);
      }
    }
    for (unsigned o = 0; o < nd->fc.n_out; o++) {
      if (flags & NNT_LF_BWD_READS_OUTPUT)
        use(g, nnt_step_id(m, re, s, NNT_MAX_IO + o, nd->t_out[o]), s);
      use(g, nd->t_dout[o], s);
    }
    for (unsigned w = 0; grad && w < nd->fc.n_w; w++)
      use(g, nd->t_gw[w], s);
  }
}

/* Every lifetime from the schedule: the batch (inputs, labels) is written
 * before step 0, each step touches what it reads or writes, and the model's
 * outputs stay readable to the end of the forward pass (inference reads
 * them there, on whichever plan it runs; a training step's backward reads
 * one only where a layer declares it, as a loss layer's derivative does). */
int nnt_plan_touch_steps(nnt_model *m, nnt_mode mode, nnt_mgr *g, nnt_err *e) {
  unsigned n = m->n_steps[mode];
  for (size_t i = 0; i < g->n; i++) {
    g->t[i].first = UINT_MAX;
    g->t[i].last = 0;
  }
  for (unsigned s = 0; s < m->n_inputs; s++)
    use(g, m->input_t[s], 0);
  for (unsigned s = 0; s < m->n_labels; s++)
    use(g, m->label_t[s], 0);
  unsigned fwd_end = nnt_schedule_forward_end(m, mode);
  int re = mode == NNT_MODE_TRAIN && m->n_recompute;
  for (unsigned s = 0; s < n; s++)
    touch_step(m, mode, g, s, &m->sched[mode][s], re);
  /* past the end of an inference schedule, as the loss values below: the
   * caller reads them after the last step (the poison mode fills what
   * dies at a step right after it) */
  for (size_t i = 0; n && i < m->n_nodes; i++)
    for (unsigned o = 0; o < m->nodes[i].fc.n_out; o++)
      if (!m->nodes[i].n_consumers[o])
        use(g, m->nodes[i].t_out[o], fwd_end);
  /* train.c reads the loss values when the forward steps are done: at the
   * step after them (past the end of an inference schedule) */
  for (size_t i = 0; i < m->n_nodes; i++)
    use(g, m->nodes[i].t_loss, fwd_end);
  for (size_t i = 0; i < g->n; i++)
    if (g->t[i].first > g->t[i].last)
      return nnt_err_set(e, NNT_ERR_INVAL, "schedule: no step of the %s schedule touches '%s'",
                         nnt_mode_name(mode), g->t[i].name);
  return NNT_OK;
}
