/* The schedule: the one list of steps a mode runs, in order. Graph compile
 * builds it; the planner takes every lifetime from it (a step's index is
 * its execution order) and the training loop walks it. Inserting a step
 * (recomputation, accumulation) is an edit of this list only. */
#include "nntrainer/model_impl.h"

#include <string.h>

const char *nnt_step_kind_name(nnt_step_kind k) {
  switch (k) {
  case NNT_STEP_NONE:
    return "none";
  case NNT_STEP_FORWARD:
    return "forward";
  case NNT_STEP_CALC_GRADIENT:
    return "calc_gradient";
  case NNT_STEP_CALC_DERIVATIVE:
    return "calc_derivative";
  case NNT_STEP_APPLY_GRADIENT:
    return "apply_gradient";
  case NNT_STEP_CLIP_APPLY:
    return "clip_and_apply";
  case NNT_STEP_ACCUMULATE_GRADIENT:
    return "accumulate_gradient";
  default:
    return "?";
  }
}

const char *nnt_mode_name(nnt_mode mode) {
  return mode == NNT_MODE_TRAIN ? "training" : mode == NNT_MODE_EVAL ? "evaluation" : "inference";
}

/* Does node i add its weight gradients into shared weights' sums? */
static int accumulates(const nnt_model *m, size_t i) {
  const nnt_node *nd = &m->nodes[i];
  return nd->do_grad && nd->grad_sum != i;
}

/* Does node i have backward steps? Not when it computes no gradient and
 * no derivative (a frozen node with no trainable layer before it, a model
 * input) and applies no shared weight's update. */
static int has_backward(const nnt_model *m, size_t i) {
  const nnt_node *nd = &m->nodes[i];
  return nd->do_grad || nd->do_deriv || (nd->grad_apply == i && m->nodes[nd->grad_sum].do_grad);
}

/* Training: every node forwards in graph order; then, walking back from
 * the last node, each node that has backward work has three steps:
 * calc_gradient, calc_derivative and apply_gradient (one of them may do
 * nothing, e.g. calc_gradient of a layer without weights); a node without
 * any (has_backward) has none, so nothing of it lives into the backward
 * part of the schedule. With clip_grad_by_norm
 * no node applies alone: the last step clips the global norm of every
 * gradient and applies them all. Inference and evaluation: the forward
 * steps (they differ in what their plans hold, not in what runs).
 * Shared weights (share.c): the first node in backward order to compute
 * their gradients writes the sums; each later one computes its own and
 * adds them in, in an accumulate_gradient step right after its
 * calc_gradient; the group's one apply_gradient is that of its last
 * member in backward order, and the other members' are none. */
int nnt_schedule_build(nnt_model *m, nnt_err *e) {
  size_t n = m->n_nodes, acc = 0;
  nnt_schedule_free(m);
  for (size_t i = 0; i < n; i++)
    acc += accumulates(m, i);
  if (n > (UINT_MAX - acc) / 4)
    return nnt_err_set(e, NNT_ERR_INVAL, "compile: %zu layers are too many", n);
  nnt_step *tr = nnt_malloc((n ? 4 * n + acc : 1) * sizeof *tr);
  nnt_step *inf = nnt_malloc((n ? n : 1) * sizeof *inf);
  nnt_step *ev = nnt_malloc((n ? n : 1) * sizeof *ev);
  if (!tr || !inf || !ev) {
    nnt_free(tr), nnt_free(inf), nnt_free(ev);
    return nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory");
  }
  int clip = m->clip_grad_norm > 0;
  size_t s = 0;
  for (size_t i = 0; i < n; i++) {
    tr[s++] = (nnt_step){(unsigned)i, NNT_STEP_FORWARD};
    inf[i] = ev[i] = (nnt_step){(unsigned)i, NNT_STEP_FORWARD};
  }
  for (size_t i = n; i-- > 0;) {
    const nnt_node *nd = &m->nodes[i];
    if (!has_backward(m, i))
      continue;
    tr[s++] = (nnt_step){(unsigned)i, NNT_STEP_CALC_GRADIENT};
    if (accumulates(m, i))
      tr[s++] = (nnt_step){(unsigned)i, NNT_STEP_ACCUMULATE_GRADIENT};
    tr[s++] = (nnt_step){(unsigned)i, NNT_STEP_CALC_DERIVATIVE};
    int apply = !clip && nd->grad_apply == i;
    tr[s++] = (nnt_step){(unsigned)i, apply ? NNT_STEP_APPLY_GRADIENT : NNT_STEP_NONE};
  }
  if (clip && s > n) /* the last apply_gradient slot (every one is none) */
    tr[s - 1] = (nnt_step){NNT_NO_NODE, NNT_STEP_CLIP_APPLY};
  m->sched[NNT_MODE_TRAIN] = tr;
  m->n_steps[NNT_MODE_TRAIN] = (unsigned)s;
  m->sched[NNT_MODE_INFER] = inf;
  m->n_steps[NNT_MODE_INFER] = (unsigned)n;
  m->sched[NNT_MODE_EVAL] = ev;
  m->n_steps[NNT_MODE_EVAL] = (unsigned)n;
  return NNT_OK;
}

void nnt_schedule_free(nnt_model *m) {
  for (int i = 0; i < NNT_MODE__COUNT; i++) {
    nnt_free(m->sched[i]);
    m->sched[i] = NULL;
    m->n_steps[i] = 0;
    nnt_free(m->prof_s[i]); /* the profile's times were of these steps */
    m->prof_s[i] = NULL;
    m->prof_len[i] = m->prof_runs[i] = 0;
  }
}

unsigned nnt_schedule_forward_end(const nnt_model *m, nnt_mode mode) {
  unsigned s = 0;
  while (s < m->n_steps[mode] && m->sched[mode][s].kind == NNT_STEP_FORWARD)
    s++;
  return s;
}

int nnt_schedule_insert(nnt_model *m, nnt_mode mode, unsigned at, nnt_step step, nnt_err *e) {
  if (!m->compiled)
    return nnt_err_set(e, NNT_ERR_INVAL, "schedule: compile the model first");
  unsigned n = m->n_steps[mode];
  int per_node = step.kind != NNT_STEP_NONE && step.kind != NNT_STEP_CLIP_APPLY;
  if (at > n || step.kind >= NNT_STEP__COUNT || (per_node && step.node >= m->n_nodes) ||
      (mode != NNT_MODE_TRAIN && per_node && step.kind != NNT_STEP_FORWARD) ||
      (step.kind == NNT_STEP_ACCUMULATE_GRADIENT && !accumulates(m, step.node)))
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "schedule: cannot insert a %s step of node %u at %u (%u steps, %zu "
                       "nodes)",
                       nnt_step_kind_name(step.kind), step.node, at, n, m->n_nodes);
  if (n == UINT_MAX)
    return nnt_err_set(e, NNT_ERR_INVAL, "schedule: too many steps");
  nnt_step *s = nnt_realloc(m->sched[mode], ((size_t)n + 1) * sizeof *s);
  if (!s)
    return nnt_err_set(e, NNT_ERR_NOMEM, "schedule: out of memory");
  memmove(s + at + 1, s + at, (size_t)(n - at) * sizeof *s);
  s[at] = step;
  m->sched[mode] = s;
  m->n_steps[mode] = n + 1;
  /* the lifetimes change: the mode plans again when it next runs */
  nnt_model_release_plan(m, mode);
  return NNT_OK;
}
