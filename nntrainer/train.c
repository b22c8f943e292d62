/* The training loop: the steps of the schedule (forward, loss, then
 * calc_gradient, calc_derivative, apply_gradient per node, walking
 * backwards), metrics and checkpoints;
 * stopping on request between steps, and on a value that is not finite
 * (the checks are in train_check.c). */
#include "nntrainer/model_impl.h"
#include "nntrainer/profile.h"

#include <math.h>
#include <string.h>

/* A layer pass that returned a kernel's error code. */
static int pass_failed(const nnt_node *nd, const char *pass, int rc, nnt_err *e) {
  return nnt_err_set(e, rc, "[%s] %s: %s failed: %s", nd->layer->name, nd->layer->ops->type,
                     pass, nnt_strerror(rc));
}

static int run_steps(nnt_model *m, unsigned from, unsigned to, int training, nnt_err *e);

int nnt_model_forward(nnt_model *m, int training, float *loss, nnt_err *e) {
  nnt_model_bind_phase(m, 0);
  int rc = run_steps(m, 0, nnt_schedule_forward_end(m, (nnt_mode)m->bound_mode), training, e);
  if (rc || !loss)
    return rc;
  /* in node order, as the values were summed when layers returned them */
  float total = 0;
  for (size_t i = 0; i < m->n_nodes; i++) {
    const nnt_tensor *lt = m->nodes[i].ctx.loss;
    float v;
    if (!lt)
      continue;
    if ((rc = nnt_tensor_get(lt, 0, &v, 1, e)))
      return rc;
    total += v;
  }
  *loss = total;
  return NNT_OK;
}

/* The model's scalar (one float of the backend's memory; then one per
 * weight for the gradient norm on a backend with steps), at first use. */
static int ensure_scalar(nnt_model *m, nnt_err *e) {
  if (m->sbuf)
    return NNT_OK;
  size_t n = m->be->step_begin ? 1 + m->n_w : 1;
  int rc = nnt_buffer_alloc(m->be->buft, n * sizeof(float), "the model's scalar", &m->sbuf, e);
  if (rc)
    return rc;
  m->scalar.dim = nnt_dim_make(1, 1, 1, 1);
  m->scalar.data = nnt_buffer_at(m->sbuf, 0);
  m->scalar.buf = m->sbuf;
  return NNT_OK;
}

/* Optimizer state: slot s of weight i starts at opt_pool + s * stride
 * + opt_off[i] (only weights that train have it: plan.c). */
static int ensure_opt_state(nnt_model *m, nnt_err *e) {
  unsigned slots = nnt_optimizer_state_count(m->opt);
  if (!slots || (m->opt_pool && m->opt_slots == slots))
    return NNT_OK;
  nnt_mgr_free(&m->omgr);
  m->obuf = NULL;
  m->opt_pool = NULL;
  m->opt_slots = 0;
  int rc = nnt_model_plan_opt_state(m, slots, &m->omgr, e); /* bytes checked at compile */
  if (rc)
    return rc;
  m->obuf = m->omgr.buf;
  m->opt_pool = m->omgr.arena;
  m->opt_slots = slots;
  m->opt_stride = nnt_model_opt_stride(m, slots);
  return NNT_OK;
}

int nnt_model_apply_range(nnt_model *m, size_t wi, size_t off, size_t n, const float *g) {
  float *state[4] = {0};
  for (unsigned s = 0; s < m->opt_slots && s < 4; s++)
    state[s] = m->opt_pool + s * m->opt_stride + m->opt_off[wi] + off;
  return nnt_optimizer_apply(m->opt, m->k, m->iter, n, m->w[wi].data + off, g, state, m->skip);
}

static int apply_weight(nnt_model *m, size_t wi, const nnt_tensor *gw) {
  return nnt_model_apply_range(m, wi, 0, nnt_dim_len(gw->dim), gw->data);
}

/* Every weight of the node whose gradient is whole (the others were
 * updated block by block in calc_gradient). */
static int apply_node(nnt_model *m, nnt_node *nd, nnt_err *e) {
  int rc;
  for (unsigned w = 0; w < nd->fc.n_w; w++)
    if (nd->gw[w].data && !nd->gtile[w] &&
        (rc = apply_weight(m, nd->w_first + w, &nd->gw[w])))
      return pass_failed(nd, "the optimizer's update", rc, e);
  return NNT_OK;
}

/* Regularization adds to the gradient before the update, as NNTrainer does
 * in apply_gradient: l2norm adds constant * w, weight decay adds decay * w.
 * Once per weight: a shared weight's by the node that holds its sum, with
 * its owner's keys (m->wspec). */
static int regularize(nnt_model *m, nnt_node *nd, nnt_err *e) {
  int rc = NNT_OK;
  if (&m->nodes[nd->grad_sum] != nd)
    return NNT_OK;
  for (unsigned w = 0; w < nd->fc.n_w && !rc; w++) {
    nnt_tensor *gw = &nd->gw[w];
    if (!gw->data || nd->gtile[w]) /* fused_rows: never regularized */
      continue;
    const nnt_weight_spec *s = &m->wspec[nd->w_first + w];
    size_t n = nnt_dim_len(gw->dim);
    if (s->l2 > 0)
      rc = m->k->axpy(m->k, n, s->l2, nd->ctx.w[w].data, gw->data);
    if (!rc && s->decay > 0)
      rc = m->k->axpy(m->k, n, s->decay, nd->ctx.w[w].data, gw->data);
  }
  return rc ? pass_failed(nd, "regularization", rc, e) : NNT_OK;
}

/* On a backend with steps, without a read: each weight's squared norm
 * into the scalar buffer's floats 1.., their sum into float 0, each
 * gradient scaled by the backend from there (clip_scale). */
static int clip_on_device(nnt_model *m, nnt_err *e) {
  size_t at = 1;
  int rc = NNT_OK;
  for (size_t i = 0; i < m->n_nodes && !rc; i++)
    for (unsigned w = 0; m->nodes[i].grad_sum == i && w < m->nodes[i].fc.n_w && !rc; w++) {
      nnt_tensor *gw = &m->nodes[i].gw[w];
      if (gw->data && (rc = m->k->dot(m->k, nnt_dim_len(gw->dim), gw->data, gw->data,
                                      nnt_buffer_at(m->sbuf, at++ * sizeof(float)))))
        return pass_failed(&m->nodes[i], "the gradient norm", rc, e);
    }
  if ((rc = m->k->sum(m->k, at - 1, nnt_buffer_at(m->sbuf, sizeof(float)), m->scalar.data)))
    return nnt_err_set(e, rc, "the gradient norm: the sum failed: %s", nnt_strerror(rc));
  for (size_t i = 0; i < m->n_nodes; i++) {
    nnt_node *nd = &m->nodes[i];
    if (!nd->do_grad || nd->grad_sum != i)
      continue;
    for (unsigned w = 0; w < nd->fc.n_w; w++)
      if (nd->gw[w].data &&
          (rc = m->k->clip_scale(m->k, nnt_dim_len(nd->gw[w].dim), m->clip_grad_norm,
                                 m->scalar.data, nd->gw[w].data)))
        return pass_failed(nd, "gradient clipping", rc, e);
    if ((rc = apply_node(m, nd, e)))
      return rc;
  }
  return NNT_OK;
}

static int clip_and_apply(nnt_model *m, nnt_err *e) {
  int rc = ensure_scalar(m, e);
  if (rc)
    return rc;
  if (m->be->step_begin)
    return clip_on_device(m, e);
  double sq = 0;
  /* each weight once: a shared weight's gradient is its sum's node's */
  for (size_t i = 0; i < m->n_nodes; i++)
    for (unsigned w = 0; m->nodes[i].grad_sum == i && w < m->nodes[i].fc.n_w; w++) {
      nnt_tensor *gw = &m->nodes[i].gw[w];
      float v;
      if (!gw->data)
        continue;
      if ((rc = m->k->dot(m->k, nnt_dim_len(gw->dim), gw->data, gw->data, m->scalar.data)))
        return pass_failed(&m->nodes[i], "the gradient norm", rc, e);
      if ((rc = nnt_tensor_get(&m->scalar, 0, &v, 1, e)))
        return rc;
      sq += v;
    }
  double norm = sqrt(sq);
  float scale = norm > m->clip_grad_norm ? (float)(m->clip_grad_norm / norm) : 1.0f;
  for (size_t i = 0; i < m->n_nodes; i++) {
    nnt_node *nd = &m->nodes[i];
    if (!nd->do_grad || nd->grad_sum != i)
      continue;
    for (unsigned w = 0; w < nd->fc.n_w; w++)
      if (nd->gw[w].data && scale != 1.0f &&
          (rc = m->k->scale(m->k, nnt_dim_len(nd->gw[w].dim), scale, nd->gw[w].data)))
        return pass_failed(nd, "gradient clipping", rc, e);
    if ((rc = apply_node(m, nd, e)))
      return rc;
  }
  return NNT_OK;
}

/* The fan-out of node nd's derivatives: each temporary into its sum. */
static int sum_derivatives(nnt_model *m, nnt_mgr *g, nnt_node *nd) {
  int rc = NNT_OK;
  for (unsigned k = 0; k < nd->n_in && !rc; k++) {
    if (nd->dmode[k] == NNT_D_DIRECT || nd->dmode[k] == NNT_D_ACCUM || !nd->din[k].data)
      continue;
    float *sum = nnt_mgr_data(g, nd->t_dsum[k]);
    size_t n = nnt_dim_len(nd->din[k].dim);
    if (nd->dmode[k] == NNT_D_COPY)
      rc = m->k->copy(m->k, n, nd->din[k].data, sum);
    else
      rc = m->k->add(m->k, n, sum, nd->din[k].data, sum);
  }
  return rc;
}

/* Shared weights: node nd's weight gradients into the sums. */
static int accumulate(nnt_model *m, nnt_node *nd) {
  int rc = NNT_OK;
  for (unsigned w = 0; w < nd->fc.n_w && !rc; w++) {
    const nnt_tensor *own = &nd->gw[w], *sum = &m->nodes[nd->grad_sum].gw[w];
    if (own->data && sum->data)
      rc = m->k->add(m->k, nnt_dim_len(own->dim), sum->data, own->data, sum->data);
  }
  return rc;
}

/* Steps [from, to) of the bound mode's schedule, each followed by the
 * poison of what dies there. */
static int run_steps_in(nnt_model *m, unsigned from, unsigned to, int training, nnt_err *e) {
  nnt_mgr *g = &m->mgr[m->bound_mode];
  const nnt_step *steps = m->sched[m->bound_mode];
  unsigned fwd_end = nnt_schedule_forward_end(m, (nnt_mode)m->bound_mode);
  int rc = NNT_OK;
  for (unsigned s = from; s < to; s++) {
    nnt_node *nd = steps[s].node < m->n_nodes ? &m->nodes[steps[s].node] : NULL;
    double t0 = m->prof_on ? nnt_now_s() : 0;
    nnt_model_bind_step(m, s); /* recomputation: this step's versions */
    switch (steps[s].kind) {
    case NNT_STEP_FORWARD:
      nd->ctx.training = training;
      nd->ctx.stream = nnt_run_stream(m->iter, steps[s].node);
      nd->ctx.recompute = s >= fwd_end; /* memory_budget: a second forward */
      nd->ctx.grad_done = 0;
      if ((rc = nnt_node_forward(m, nd)))
        return pass_failed(nd, "forward", rc, e);
      break;
    case NNT_STEP_CALC_GRADIENT:
      if (!nd->do_grad)
        break;
      if (nnt_node_fused(nd)) {
        if ((rc = nnt_fused_gradient(m, nd, e)))
          return rc;
      } else if ((rc = nd->layer->ops->calc_gradient(nd->layer, &nd->ctx))) {
        return pass_failed(nd, "calc_gradient", rc, e);
      }
      nd->ctx.grad_done = 1;
      if ((rc = regularize(m, nd, e)))
        return rc;
      /* before the gradient enters the global norm or an update */
      if (m->check_finite && (rc = nnt_check_on_device(m) ? nnt_check_dev_gradients(m, nd, e)
                                                          : nnt_check_gradients(nd, e)))
        return rc;
      break;
    case NNT_STEP_CALC_DERIVATIVE:
      if (!nd->do_deriv)
        break;
      if ((rc = nd->layer->ops->calc_derivative(nd->layer, &nd->ctx)))
        return pass_failed(nd, "calc_derivative", rc, e);
      if ((rc = sum_derivatives(m, g, nd)))
        return pass_failed(nd, "the derivative sum", rc, e);
      break;
    case NNT_STEP_APPLY_GRADIENT:
      /* a shared weight's update uses the node that holds the sums */
      if (m->nodes[nd->grad_sum].do_grad && (rc = apply_node(m, &m->nodes[nd->grad_sum], e)))
        return rc;
      break;
    case NNT_STEP_ACCUMULATE_GRADIENT:
      if ((rc = accumulate(m, nd)))
        return pass_failed(nd, "the sum of a shared weight's gradients", rc, e);
      break;
    case NNT_STEP_CLIP_APPLY:
      if ((rc = clip_and_apply(m, e)))
        return rc;
      break;
    default:
      break;
    }
    if (m->prof_on && (rc = nnt_profile_add(m, s, t0, e)))
      return rc;
    nnt_mgr_poison_after(g, s);
  }
  return NNT_OK;
}

/* run_steps_in in the library's floating-point mode (common.h: subnormals
 * are 0), the calling thread's own mode restored after. */
static int run_steps(nnt_model *m, unsigned from, unsigned to, int training, nnt_err *e) {
  unsigned mode = nnt_fp_flush_begin();
  int rc = run_steps_in(m, from, to, training, e);
  nnt_fp_mode_set(mode);
  return rc;
}

int nnt_model_backward(nnt_model *m, nnt_err *e) {
  nnt_mode mode = (nnt_mode)m->bound_mode;
  nnt_model_bind_phase(m, 1);
  return run_steps(m, nnt_schedule_forward_end(m, mode), m->n_steps[mode], 1, e);
}

void nnt_model_ds_shape(const nnt_model *m, nnt_ds_shape *s) {
  memset(s, 0, sizeof *s);
  s->n_in = m->n_inputs;
  s->n_label = m->n_labels;
  for (unsigned i = 0; i < m->n_inputs; i++)
    s->in_len[i] = nnt_dim_feature_len(m->input_dim[i]);
  for (unsigned i = 0; i < m->n_labels; i++)
    s->label_len[i] = nnt_dim_feature_len(m->label_dim[i]);
  /* inputs an embedding reads through their input layer hold indices */
  for (size_t n = 0; n < m->n_nodes; n++) {
    const nnt_node *nd = &m->nodes[n];
    if (!(nd->fc.flags & NNT_LF_INDEX_INPUT) || !nd->fc.n_w || nd->in_node[0] == NNT_NO_NODE)
      continue;
    const nnt_node *p = &m->nodes[nd->in_node[0]];
    if (p->in_node[0] == NNT_NO_NODE && p->in_idx[0] < m->n_inputs)
      s->in_index[p->in_idx[0]] = nd->fc.w[0].dim.h;
  }
}

/* Lend input `id`'s memory (borrowed: plan.c borrows_inputs) the batch
 * at src, and bind every tensor of the nodes that shares it there. The
 * model only reads it (nothing runs in place over an input). */
static int lend_input(nnt_model *m, int id, const float *src, nnt_err *e) {
  nnt_mgr *g = &m->mgr[m->bound_mode];
  if (!src)
    return nnt_err_set(e, NNT_ERR_INVAL, "the batch has no data for model input '%s'",
                       g->t[id].name);
  nnt_mgr_lend(g, id, (float *)src);
  int root = nnt_mgr_root(g, id);
  for (size_t i = 0; i < m->n_nodes; i++) {
    nnt_node *nd = &m->nodes[i];
    for (unsigned k = 0; k < nd->n_in; k++)
      if (nd->t_in[k] >= 0 && nnt_mgr_root(g, nd->t_in[k]) == root)
        nd->in[k] = nnt_mgr_bind(g, nd->t_in[k], nd->fc.in_dim[k]);
    for (unsigned o = 0; o < nd->fc.n_out; o++)
      if (nd->t_out[o] >= 0 && nnt_mgr_root(g, nd->t_out[o]) == root)
        nd->out[o] = nnt_mgr_bind(g, nd->t_out[o], nd->fc.out_dim[o]);
  }
  return NNT_OK;
}

/* One stream of the batch into its tensor (id in the bound plan, dim one
 * sample's shape); src NULL: zeros. A borrowed input reads src itself. */
static int set_stream(nnt_model *m, int id, nnt_dim dim, const float *src, nnt_err *e) {
  if (nnt_mgr_borrowed(&m->mgr[m->bound_mode], id))
    return lend_input(m, id, src, e);
  dim.b = m->batch;
  nnt_tensor t = nnt_mgr_bind(&m->mgr[m->bound_mode], id, dim);
  return src ? nnt_tensor_set(&t, 0, src, nnt_tensor_len(&t), e) : nnt_tensor_memset(&t, 0, e);
}

int nnt_model_set_batch(nnt_model *m, const float *const *in, const float *const *label,
                        nnt_err *e) {
  int rc = NNT_OK;
  for (unsigned i = 0; !rc && i < m->n_inputs; i++)
    rc = set_stream(m, m->input_t[i], m->input_dim[i], in[i], e);
  for (unsigned i = 0; !rc && i < m->n_labels; i++)
    rc = set_stream(m, m->label_t[i], m->label_dim[i], label ? label[i] : NULL, e);
  return rc;
}

/* The queues of the datasets that hold one (prepared), against the budget
 * with the plan of mode: what training holds at once. */
static int queues_fit(nnt_model *m, nnt_mode mode, nnt_err *e) {
  size_t total = 0;
  for (int k = 0; k < 3; k++) {
    size_t q = nnt_dataset_queue_bytes(m->ds[k]);
    if (nnt_size_add(total, q, &total))
      total = SIZE_MAX;
  }
  return nnt_model_budget_with(m, mode, total, "the datasets' queues (buffer_size batches each)",
                               e);
}

/* Correct predictions in the batch (argmax of the first loss layer's
 * output vs argmax of its label), computed by the backend, into
 * m->acc_host by the end of the step. */
static int count_correct(nnt_model *m, nnt_err *e) {
  m->acc_host = 0;
  for (size_t i = 0; i < m->n_nodes; i++) {
    const nnt_node *nd = &m->nodes[i];
    if (!(nd->fc.flags & NNT_LF_LOSS))
      continue;
    const nnt_tensor *y = &nd->out[0], *t = &nd->label;
    int rc = m->k->argmax_match(m->k, y->dim.b, nnt_dim_feature_len(y->dim), y->data, t->data,
                                m->scalar.data);
    if (rc)
      return pass_failed(nd, "the accuracy count", rc, e);
    return nnt_tensor_get_later(&m->scalar, 0, &m->acc_host, 1, e);
  }
  return NNT_OK;
}

/* Each node's loss into m->loss_host by the end of the step. */
static int queue_losses(nnt_model *m, nnt_err *e) {
  if (!m->loss_host && !(m->loss_host = nnt_calloc(m->n_nodes ? m->n_nodes : 1, sizeof(float))))
    return nnt_err_set(e, NNT_ERR_NOMEM, "out of memory for the loss values");
  int rc = NNT_OK;
  for (size_t i = 0; i < m->n_nodes && !rc; i++)
    if (m->nodes[i].ctx.loss)
      rc = nnt_tensor_get_later(m->nodes[i].ctx.loss, 0, &m->loss_host[i], 1, e);
  return rc;
}

/* in node order, as nnt_model_forward sums them */
static float sum_losses(const nnt_model *m) {
  float total = 0;
  for (size_t i = 0; i < m->n_nodes; i++)
    if (m->nodes[i].ctx.loss)
      total += m->loss_host[i];
  return total;
}

/* The key of a step of the bound plan: what runs in it (1 training, 2
 * evaluation, 3 inference). */
static uint64_t step_key(const nnt_model *m, unsigned what) {
  return ((uint64_t)m->bound_mode << 8) | what;
}

/* Ends the step begun for a pass, keeping the pass's error first. */
static int step_end(nnt_model *m, int rc, nnt_err *e) {
  int r2 = nnt_backend_step_end(m->be, rc ? NULL : e);
  return rc ? rc : r2;
}

int nnt_model_train_batch(nnt_model *m, nnt_dataset *ds, const float *const *in,
                          const float *const *label, float *loss, nnt_err *e) {
  if (!m->be->step_begin) { /* ops run as called: the host checks */
    int rc = nnt_model_set_batch(m, in, label, e);
    return rc ? rc : nnt_model_train_step(m, ds, loss, e);
  }
  int dev = nnt_check_on_device(m);
  int rc = dev ? nnt_check_dev_prepare(m, e) : NNT_OK;
  if (rc || (rc = nnt_backend_step_begin(m->be, step_key(m, 1), e)))
    return rc;
  if (!(rc = nnt_model_set_batch(m, in, label, e)) && (!dev || !(rc = nnt_check_dev_begin(m, e))) &&
      !(rc = nnt_model_forward(m, 1, NULL, e)) && !(rc = queue_losses(m, e)) &&
      (!dev || !(rc = nnt_check_dev_forward(m, e))) && !(rc = nnt_model_backward(m, e)) && dev)
    rc = nnt_check_dev_end(m, e);
  rc = step_end(m, rc, e);
  m->skip = NULL;
  if (rc)
    return rc;
  *loss = sum_losses(m);
  return dev ? nnt_check_dev_verdict(m, ds, *loss, e) : NNT_OK;
}

/* One evaluation batch: its loss and correct count. */
static int eval_batch(nnt_model *m, const float *const *in, const float *const *label,
                      float *loss, size_t *ok, nnt_err *e) {
  int rc = nnt_backend_step_begin(m->be, step_key(m, 2), e);
  if (rc)
    return rc;
  if (!(rc = nnt_model_set_batch(m, in, label, e)) && !(rc = nnt_model_forward(m, 0, NULL, e)) &&
      !(rc = queue_losses(m, e)))
    rc = count_correct(m, e);
  if ((rc = step_end(m, rc, e)))
    return rc;
  *loss = sum_losses(m);
  *ok = (size_t)m->acc_host;
  return NNT_OK;
}

/* What the backend needs before a run's first op (OpenBLAS's buffer under
 * a memory limit, for the CPU). */
static int backend_ready(const nnt_model *m, nnt_err *e) {
  return m->k->prepare ? m->k->prepare(m->k, e) : NNT_OK;
}

static int check_ready(nnt_model *m, const char *what, nnt_err *e) {
  if (!m->initialized)
    return nnt_err_set(e, NNT_ERR_INVAL, "%s: initialize the model first", what);
  if (!m->n_labels)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "%s: the model has no loss (set [Model] loss or add a loss layer)", what);
  return NNT_OK;
}

static int stop_requested(const nnt_model *m) {
  return atomic_load_explicit(&m->stop, memory_order_relaxed) != 0;
}

/* An epoch of ds runs with the model's stop request as its stop flag. */
static int epoch_begin(nnt_model *m, nnt_dataset *ds, nnt_err *e) {
  nnt_dataset_set_stop_flag(ds, &m->stop);
  return nnt_dataset_epoch_begin(ds, e);
}

static void epoch_end(nnt_dataset *ds) {
  nnt_dataset_epoch_end(ds);
  nnt_dataset_set_stop_flag(ds, NULL);
}

static int evaluate(nnt_model *m, nnt_ds_mode mode, float *loss, float *accuracy,
                    nnt_err *e) {
  int rc = check_ready(m, "evaluate", e);
  if (rc)
    return rc;
  nnt_dataset *ds = nnt_model_dataset(m, mode);
  if (!ds)
    return nnt_err_set(e, NNT_ERR_INVAL, "evaluate: no dataset for this mode");
  /* validation in a training run uses the training arena, which holds
   * everything a forward with labels and losses needs: a run holds one
   * arena; otherwise the evaluation plan */
  nnt_mode pm = m->mgr[NNT_MODE_TRAIN].planned ? NNT_MODE_TRAIN : NNT_MODE_EVAL;
  if ((rc = nnt_model_plan(m, pm, e)) || (rc = backend_ready(m, e)) ||
      (rc = ensure_scalar(m, e)))
    return rc;
  nnt_ds_shape shape;
  nnt_model_ds_shape(m, &shape);
  if ((rc = nnt_dataset_prepare(ds, &shape, m->batch, m->seed + 1000003ULL * (mode + 1), e)) ||
      (rc = queues_fit(m, pm, e)))
    return rc;
  if ((rc = epoch_begin(m, ds, e)))
    return rc;
  const float *in[NNT_DS_MAX_STREAMS], *label[NNT_DS_MAX_STREAMS];
  double sum = 0;
  size_t batches = 0, correct = 0;
  for (int end = 0;;) {
    if (stop_requested(m)) {
      rc = nnt_err_set(e, NNT_ERR_CANCELED, "evaluate: stopped on request after %zu batches",
                       batches);
      break;
    }
    if ((rc = nnt_dataset_next_batch_view(ds, in, label, &end, e)) || end)
      break;
    float l;
    size_t ok;
    if ((rc = eval_batch(m, in, label, &l, &ok, e)))
      break;
    sum += l;
    correct += ok;
    batches++;
  }
  epoch_end(ds);
  if (rc)
    return rc;
  if (!batches)
    return nnt_err_set(e, NNT_ERR_INVAL, "evaluate: the dataset gave no full batch of %u",
                       m->batch);
  if (loss)
    *loss = (float)(sum / batches);
  if (accuracy)
    *accuracy = (float)correct / (float)(batches * m->batch);
  return NNT_OK;
}

int nnt_model_evaluate(nnt_model *m, nnt_ds_mode mode, float *loss, float *accuracy,
                       nnt_err *e) {
  int rc = evaluate(m, mode, loss, accuracy, e);
  atomic_store(&m->stop, 0); /* a request stops one run */
  return rc;
}

void nnt_model_request_stop(nnt_model *m) {
  if (m)
    atomic_store(&m->stop, 1);
}

void nnt_model_clear_stop(nnt_model *m) {
  if (m)
    atomic_store(&m->stop, 0);
}

int nnt_model_train_step(nnt_model *m, nnt_dataset *ds, float *loss, nnt_err *e) {
  int rc;
  if (m->check_finite) {
    if ((rc = nnt_check_prepare(m, e)))
      return rc;
    if ((rc = nnt_check_save_states(m, e)))
      return rc;
  }
  if ((rc = nnt_model_forward(m, 1, loss, e)))
    return rc;
  if (m->check_finite && (rc = nnt_check_forward(m, ds, *loss, e)))
    return rc;
  return nnt_model_backward(m, e);
}

/* The epochs of nnt_model_train. */
static int train_epochs(nnt_model *m, nnt_progress_cb cb, void *ud, nnt_err *e) {
  int rc = check_ready(m, "train", e);
  if (rc)
    return rc;
  if (!m->opt)
    return nnt_err_set(e, NNT_ERR_INVAL, "train: no optimizer (add an [Optimizer] section)");
  if ((rc = nnt_optimizer_validate(m->opt, e))) {
    nnt_err_prefix(e, "train: [Optimizer] ");
    return rc;
  }
  nnt_dataset *ds = m->ds[NNT_DS_TRAIN];
  if (!ds)
    return nnt_err_set(e, NNT_ERR_INVAL, "train: no training dataset");
  if (!m->continue_train) {
    m->epoch_idx = 0;
    m->iter = 0;
  }
  /* the scalar before the first step: an allocation inside a step would
   * make a device backend wait in its middle */
  if ((rc = nnt_model_plan(m, NNT_MODE_TRAIN, e)) || (rc = ensure_opt_state(m, e)) ||
      (rc = backend_ready(m, e)) || (rc = ensure_scalar(m, e)))
    return rc;
  /* a run that does not continue starts its optimizer afresh too, as
   * NNTrainer clears the optimizer variables with the counters */
  if (!m->continue_train && m->obuf &&
      (rc = m->obuf->type->memset(m->obuf, 0, 0, m->obuf->size, e)))
    return rc;
  nnt_ds_shape shape;
  nnt_model_ds_shape(m, &shape);
  if ((rc = nnt_dataset_prepare(ds, &shape, m->batch, m->seed, e)) ||
      (rc = queues_fit(m, NNT_MODE_TRAIN, e)))
    return rc;
  size_t per_epoch = nnt_dataset_samples(ds) / m->batch;
  const float *in[NNT_DS_MAX_STREAMS], *label[NNT_DS_MAX_STREAMS];
  double t0 = nnt_now_s();
  size_t samples_done = 0;
  /* counted in 64 bits: epochs = 4294967295 must not wrap to 0 and go on */
  for (uint64_t ep = (uint64_t)m->epoch_idx + 1; ep <= m->epochs; ep++) {
    unsigned epoch = (unsigned)ep;
    if ((rc = epoch_begin(m, ds, e)))
      return rc;
    double sum = 0, step_s = 0;
    size_t b = 0;
    int stopped = 0;
    for (int end = 0;;) {
      if ((stopped = stop_requested(m)))
        break;
      rc = nnt_dataset_next_batch_view(ds, in, label, &end, e);
      /* the producer saw the request (a generator's own -125 is its error) */
      stopped = rc == NNT_ERR_CANCELED && stop_requested(m) && !(e && e->from_callback);
      if (rc || end)
        break;
      /* a weight file's counter must stay below its largest value, which
       * no load accepts (training on from it would wrap) */
      if (m->iter >= UINT_MAX - 1) {
        rc = nnt_err_set(e, NNT_ERR_INVAL,
                         "train: the iteration counter is at %u, the most a weight file can "
                         "carry; train without continue_train to count from 0 again",
                         m->iter);
        break;
      }
      float l;
      double ts = nnt_now_s();
      if ((rc = nnt_model_train_batch(m, ds, in, label, &l, e))) {
        nnt_err_prefix(e, "train: epoch %u, iteration %u (batch %zu of the epoch): ", epoch,
                       m->iter + 1, b + 1);
        break;
      }
      step_s += nnt_now_s() - ts;
      m->iter++;
      b++;
      sum += l;
      samples_done += m->batch;
      if (cb) {
        nnt_progress p = {0};
        p.epoch = epoch;
        p.epochs = m->epochs;
        p.batch = b;
        p.batches = per_epoch;
        p.loss = (float)(sum / b);
        p.batch_loss = l;
        p.elapsed_s = nnt_now_s() - t0;
        p.samples_per_sec = p.elapsed_s > 0 ? samples_done / p.elapsed_s : 0;
        cb(&p, ud);
      }
    }
    epoch_end(ds);
    if (stopped)
      return nnt_err_set(e, NNT_ERR_CANCELED,
                         "train: stopped on request in epoch %u after %zu of its steps "
                         "(iteration %u); the weights are those of its last completed step, no "
                         "checkpoint was written for this epoch",
                         epoch, b, m->iter);
    if (rc)
      return rc;
    if (!b)
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "train: the training set gave no full batch of %u samples", m->batch);
    nnt_progress p = {0};
    p.epoch = epoch;
    p.epochs = m->epochs;
    p.batch = p.batches = b;
    p.loss = p.train_loss = (float)(sum / b);
    p.epoch_done = 1;
    p.step_ms = 1e3 * step_s / b;
    if (m->ds[NNT_DS_VALID]) {
      if ((rc = evaluate(m, NNT_DS_VALID, &p.valid_loss, &p.valid_accuracy, e)))
        return rc == NNT_ERR_CANCELED ? nnt_err_prefix(e, "train: epoch %u: ", epoch) : rc;
      p.has_valid = 1;
    }
    /* an update that overflowed in the epoch's last step shows here */
    if (m->check_finite && (rc = nnt_check_weights(m, e))) {
      nnt_err_prefix(e, "train: epoch %u, before its checkpoint: ", epoch);
      return rc;
    }
    m->epoch_idx = epoch;
    if (m->save_path && (rc = nnt_model_save_weights(m, m->save_path, 1, e)))
      return rc;
    p.elapsed_s = nnt_now_s() - t0;
    p.samples_per_sec = p.elapsed_s > 0 ? samples_done / p.elapsed_s : 0;
    if (cb)
      cb(&p, ud);
  }
  /* the training arena is released when training ends, unless kept (for
   * reading tensors after a step); inference plans its own, smaller one */
  if (!m->keep_train_arena)
    nnt_model_release_plan(m, NNT_MODE_TRAIN);
  return NNT_OK;
}

int nnt_model_train(nnt_model *m, nnt_progress_cb cb, void *ud, nnt_err *e) {
  int rc = train_epochs(m, cb, ud, e);
  atomic_store(&m->stop, 0); /* a request stops one run */
  return rc;
}

/* The model's outputs: every output of a node that no other node reads
 * (for a model with a loss, the loss layers' outputs). */
static unsigned each_output(const nnt_model *m, unsigned max, const nnt_node **nodes,
                            unsigned *idx) {
  unsigned n = 0;
  for (size_t i = 0; i < m->n_nodes; i++) {
    const nnt_node *nd = &m->nodes[i];
    for (unsigned o = 0; o < nd->fc.n_out; o++) {
      if (nd->n_consumers[o])
        continue;
      if (n < max) {
        nodes[n] = nd;
        idx[n] = o;
      }
      n++;
    }
  }
  return n;
}

unsigned nnt_model_output_dims(const nnt_model *m, nnt_dim *dims, unsigned max) {
  if (!m->compiled)
    return 0;
  const nnt_node *nodes[NNT_DS_MAX_STREAMS];
  unsigned idx[NNT_DS_MAX_STREAMS];
  unsigned n = each_output(m, NNT_DS_MAX_STREAMS, nodes, idx);
  for (unsigned i = 0; i < n && i < max && i < NNT_DS_MAX_STREAMS; i++) {
    dims[i] = nodes[i]->fc.out_dim[idx[i]];
    dims[i].b = m->batch;
  }
  return n;
}

/* The plan inference runs on: the inference plan, unless the model holds
 * a training arena (kept after training) or an evaluation arena already
 * and no inference one: each holds what inference needs, so inference
 * runs there instead of allocating one arena more. */
static nnt_mode infer_mode(const nnt_model *m) {
  if (m->mgr[NNT_MODE_INFER].planned)
    return NNT_MODE_INFER;
  if (m->mgr[NNT_MODE_TRAIN].planned)
    return NNT_MODE_TRAIN;
  return m->mgr[NNT_MODE_EVAL].planned ? NNT_MODE_EVAL : NNT_MODE_INFER;
}

/* The forward pass of inference: a loss layer gives its output only, with
 * ctx->label and ctx->loss NULL, whichever plan the contexts are bound to
 * (on a training or evaluation plan, its label and loss stay untouched). */
static int infer_forward(nnt_model *m, nnt_err *e) {
  for (size_t i = 0; i < m->n_nodes; i++)
    m->nodes[i].ctx.label = NULL, m->nodes[i].ctx.loss = NULL;
  int rc = nnt_model_forward(m, 0, NULL, e);
  for (size_t i = 0; i < m->n_nodes; i++) {
    nnt_node *nd = &m->nodes[i];
    nd->ctx.label = nd->t_label >= 0 ? &nd->label : NULL;
    nd->ctx.loss = nd->t_loss >= 0 ? &nd->loss : NULL;
  }
  return rc;
}

int nnt_model_infer(nnt_model *m, const float *const *in, float *const *out, nnt_err *e) {
  if (!m->initialized)
    return nnt_err_set(e, NNT_ERR_INVAL, "infer: compile the model first");
  const nnt_node *nodes[NNT_DS_MAX_STREAMS];
  unsigned idx[NNT_DS_MAX_STREAMS];
  unsigned n_out = each_output(m, NNT_DS_MAX_STREAMS, nodes, idx);
  if (n_out > NNT_DS_MAX_STREAMS)
    return nnt_err_set(e, NNT_ERR_NOT_SUPPORTED, "infer: more than %d outputs",
                       NNT_DS_MAX_STREAMS);
  int rc = nnt_model_plan(m, infer_mode(m), e);
  if (!rc)
    rc = backend_ready(m, e);
  if (rc)
    return rc;
  if ((rc = nnt_backend_step_begin(m->be, step_key(m, 3), e)))
    return rc;
  /* the inputs only: an inference plan holds no labels */
  for (unsigned i = 0; i < m->n_inputs && !rc; i++)
    rc = set_stream(m, m->input_t[i], m->input_dim[i], in[i], e);
  if (!rc)
    rc = infer_forward(m, e);
  for (unsigned i = 0; !rc && i < n_out; i++) {
    const nnt_tensor *t = &nodes[i]->out[idx[i]];
    rc = nnt_tensor_get_later(t, 0, out[i], nnt_tensor_len(t), e);
  }
  return step_end(m, rc, e);
}
