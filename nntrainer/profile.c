/* Per-step wall time (profile.h). run_steps (train.c) calls
 * nnt_profile_add after each step while profiling is on; a mode's
 * iteration begins with its step 0. */
#include "nntrainer/profile.h"

#include <string.h>

void nnt_model_profile_enable(nnt_model *m, int on) {
  m->prof_on = on != 0;
  if (!on)
    return;
  for (int i = 0; i < NNT_MODE__COUNT; i++) {
    m->prof_runs[i] = 0;
    if (m->prof_s[i])
      memset(m->prof_s[i], 0, m->prof_len[i] * sizeof *m->prof_s[i]);
  }
}

int nnt_profile_add(nnt_model *m, unsigned s, double t0, nnt_err *e) {
  int mode = m->bound_mode;
  if (mode < 0 || mode >= NNT_MODE__COUNT || s >= m->n_steps[mode] || m->be->step_begin)
    return NNT_OK;
  if (m->prof_len[mode] != m->n_steps[mode]) { /* first use, or a new schedule */
    double *p = nnt_calloc(m->n_steps[mode], sizeof *p);
    if (!p)
      return nnt_err_set(e, NNT_ERR_NOMEM, "profile: no memory for the times of %u steps",
                         m->n_steps[mode]);
    nnt_free(m->prof_s[mode]);
    m->prof_s[mode] = p;
    m->prof_len[mode] = m->n_steps[mode];
    m->prof_runs[mode] = 0;
  }
  if (s == 0)
    m->prof_runs[mode]++;
  if (m->prof_runs[mode] > 1) /* the first iteration is not counted */
    m->prof_s[mode][s] += nnt_now_s() - t0;
  return NNT_OK;
}

int nnt_model_profile(const nnt_model *m, nnt_mode mode, nnt_profile_row *rows, size_t max,
                      size_t *n_rows, unsigned *iters, double *other_ms, nnt_err *e) {
  if (!m->compiled || (unsigned)mode >= NNT_MODE__COUNT)
    return nnt_err_set(e, NNT_ERR_INVAL, "profile: the model is not compiled");
  if (m->be && m->be->step_begin)
    return nnt_err_set(e, NNT_ERR_NOT_SUPPORTED,
                       "profile: engine '%s' records its steps for the device and runs them "
                       "later; the host's time of a step is not the step's",
                       m->be->name);
  if (max < m->n_nodes)
    return nnt_err_set(e, NNT_ERR_INVAL, "profile: %zu rows for %zu layers", max, m->n_nodes);
  unsigned runs = m->prof_runs[mode] > 1 ? m->prof_runs[mode] - 1 : 0;
  double per = runs ? 1e3 / runs : 0, other = 0;
  for (size_t i = 0; i < m->n_nodes; i++)
    rows[i] = (nnt_profile_row){m->nodes[i].layer->name, m->nodes[i].layer->ops->type, 0, 0,
                                0, 0, 0};
  const nnt_step *steps = m->sched[mode];
  unsigned fwd_end = nnt_schedule_forward_end(m, mode);
  for (unsigned s = 0; s < m->prof_len[mode] && s < m->n_steps[mode]; s++) {
    double ms = m->prof_s[mode][s] * per;
    if (steps[s].node >= m->n_nodes) {
      other += ms;
      continue;
    }
    nnt_profile_row *r = &rows[steps[s].node];
    switch (steps[s].kind) {
    case NNT_STEP_FORWARD:
      *(s < fwd_end ? &r->forward_ms : &r->recompute_ms) += ms;
      break;
    case NNT_STEP_CALC_GRADIENT:
      r->gradient_ms += ms;
      break;
    case NNT_STEP_CALC_DERIVATIVE:
      r->derivative_ms += ms;
      break;
    default: /* the update, a shared weight's sum, clip_grad_by_norm's */
      r->apply_ms += ms;
      break;
    }
  }
  *n_rows = m->n_nodes;
  *iters = runs;
  *other_ms = other;
  return NNT_OK;
}
