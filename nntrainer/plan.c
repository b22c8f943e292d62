/* From the compiled graph to tensor requests for one mode: lifetimes from
 * the mode's schedule (the first and last step that reads or writes each
 * tensor), in-place and view decisions from the graph, then the manager's
 * plan and the binding of every node's run context to the planned memory. */
#include "nntrainer/model_impl.h"

#include <stdio.h>
#include <string.h>

/* A request; its lifetime comes from the schedule (plan_touch.c). */
static int req(nnt_mgr *g, const char *layer, const char *what, unsigned idx,
               nnt_tkind kind, nnt_dim dim, nnt_err *e) {
  char name[NNT_NAME_MAX + 48];
  snprintf(name, sizeof name, "%s:%s%u", layer, what, idx);
  /* compile checked every shape; this names a tensor that slipped past */
  int id = nnt_dim_check(dim, name, NULL, NULL, e);
  if (id < 0)
    return id;
  id = nnt_mgr_request(g, name, kind, dim, 0, 0);
  if (id < 0)
    return nnt_err_set(e, id, "manager: cannot request '%s': %s", name, nnt_strerror(id));
  return id;
}

/* Does node i read its output in a backward step that runs? */
static int bwd_reads_output(const nnt_node *nd) {
  return (nd->fc.flags & NNT_LF_BWD_READS_OUTPUT) && (nd->do_grad || nd->do_deriv);
}

/* Does the model read its inputs where the caller's batch lies (the
 * dataset's queue slot or the caller's arrays), instead of a copy in the
 * arena? On the CPU's host memory with memory_optimization; nothing may
 * then write over an input (can_run_inplace), so the queue's slot, which
 * check_finite reads again to name a bad value, stays the batch. */
static int borrows_inputs(const nnt_model *m) {
  return m->memory_optimization && m->be == nnt_backend_cpu() && m->be->buft->is_host(m->be->buft);
}

/* Is node i the last to read output pidx of node p, in a forward only:
 * every other reader an earlier node (the forward runs in node order)
 * whose backward, where it runs, does not read it? An addition that
 * computes the value again (rerun.c) does not read it. */
static int last_reader(const nnt_model *m, size_t i, unsigned p, unsigned pidx, nnt_mode mode) {
  int train = mode == NNT_MODE_TRAIN;
  for (size_t j = 0; j < m->n_nodes; j++) {
    const nnt_node *c = &m->nodes[j];
    for (unsigned k = 0; k < c->n_in; k++) {
      if (c->in_node[k] != p || c->in_idx[k] != pidx || j == i)
        continue;
      if (train && c->rerun && m->reruns[c->rerun - 1].k == k)
        continue;
      if (j > i || (train && (c->do_grad || c->do_deriv) && nnt_node_bwd_reads_input(c)))
        return 0;
    }
  }
  return 1;
}

/* May node i overwrite its input 0 in place? Only when the layer can
 * (always, or in a forward whose node has no backward: NNT_LF_INPLACE_FWD)
 * and the value it would overwrite has no other reader: the input has a
 * single consumer, and no earlier step whose memory this value shares
 * reads it in backward. In a forward only, a layer whose output is no
 * larger (NNT_LF_INPLACE_FWD: a convolution) may also be the last of
 * several readers (last_reader): its output is then pinned to the
 * input's memory (request_forward), whose rest the others may take. */
static int can_run_inplace(const nnt_model *m, size_t i, nnt_mode mode) {
  const nnt_node *nd = &m->nodes[i];
  int fwd_only = (nd->fc.flags & NNT_LF_INPLACE_FWD) &&
                 (mode != NNT_MODE_TRAIN || !(nd->do_grad || nd->do_deriv));
  if (!(nd->fc.flags & NNT_LF_INPLACE) && !fwd_only)
    return 0;
  int train = mode == NNT_MODE_TRAIN;
  /* an addition that computes its input 0 again does not read it here */
  if (train && nd->rerun && m->reruns[nd->rerun - 1].k == 0)
    return 0;
  unsigned p = nd->in_node[0], pidx = nd->in_idx[0];
  for (;;) {
    if (p == NNT_NO_NODE) {
      /* the model input: a copy of the caller's batch, read by nobody
       * else? (never the batch itself) */
      if (borrows_inputs(m))
        return 0;
      unsigned c = 0;
      for (size_t j = 0; j < m->n_nodes; j++)
        for (unsigned k = 0; k < m->nodes[j].n_in; k++)
          c += m->nodes[j].in_node[k] == NNT_NO_NODE && m->nodes[j].in_idx[k] == pidx;
      return c == 1;
    }
    const nnt_node *pn = &m->nodes[p];
    if ((train ? nnt_rerun_readers(m, p, pidx) : pn->n_consumers[pidx]) != 1 &&
        !(fwd_only && !(nd->fc.flags & NNT_LF_INPLACE) && last_reader(m, i, p, pidx, mode)))
      return 0;
    if (mode == NNT_MODE_TRAIN && bwd_reads_output(pn))
      return 0;
    if (!pn->inplace || pidx != 0)
      return 1;
    /* the producer shares its input's memory: that value is overwritten
     * too, so its readers count as well */
    if (mode == NNT_MODE_TRAIN && nnt_node_bwd_reads_input(pn))
      return 0;
    p = pn->in_node[0];
    pidx = pn->in_idx[0];
  }
}

static int request_forward(nnt_model *m, nnt_mode mode, nnt_mgr *g, nnt_err *e) {
  int opt = m->memory_optimization;
  for (unsigned s = 0; s < NNT_DS_MAX_STREAMS; s++)
    m->label_t[s] = -1;
  for (unsigned s = 0; s < m->n_inputs; s++) {
    int id = req(g, "model", "input", s, NNT_TK_INPUT, m->input_dim[s], e);
    if (id < 0)
      return id;
    if (borrows_inputs(m))
      nnt_mgr_borrow(g, id);
    m->input_t[s] = id;
  }
  for (size_t i = 0; i < m->n_nodes; i++) {
    nnt_node *nd = &m->nodes[i];
    const char *name = nd->layer->name;
    for (unsigned k = 0; k < nd->n_in; k++)
      nd->t_in[k] = nd->in_node[k] == NNT_NO_NODE
                        ? m->input_t[nd->in_idx[k]]
                        : m->nodes[nd->in_node[k]].t_out[nd->in_idx[k]];
    nd->inplace = 0;
    if (opt && (nd->fc.flags & NNT_LF_VIEW))
      nd->inplace = 1;
    else if (opt && can_run_inplace(m, i, mode))
      nd->inplace = 1;
    for (unsigned o = 0; o < nd->fc.n_out; o++) {
      int id = req(g, name, "out", o, NNT_TK_ACTIVATION, nd->fc.out_dim[o], e);
      if (id < 0)
        return id;
      nd->t_out[o] = id;
      /* a forward-only output smaller than its input (a convolution in
       * place) takes the input's memory from its start, and the rest is
       * free from there on (manager.h nnt_mgr_pin) */
      if (o == 0 && nd->inplace && !(nd->fc.flags & (NNT_LF_INPLACE | NNT_LF_VIEW)) &&
          nnt_dim_len(nd->fc.out_dim[0]) < nnt_dim_len(nd->fc.in_dim[0]))
        nnt_mgr_pin(g, id, nd->t_in[0]);
      else if (o == 0 && nd->inplace)
        nnt_mgr_merge(g, id, nd->t_in[0]);
    }
    /* a delayed branch's convolution (delay.c): the copy of what it reads
     * of its input, and no forward scratch (it reads the copy) unless a
     * recompute step in the backward pass runs its forward from the input */
    int head = mode == NNT_MODE_TRAIN && nd->delayed && m->delays[nd->delayed - 1].chain[0] == i;
    nd->t_gather = -1;
    if (head) {
      int id = req(g, name, "gather", 0, NNT_TK_ACTIVATION, nnt_delay_dim(nd), e);
      if (id < 0)
        return id;
      nd->t_gather = id;
    }
    for (unsigned s = 0; s < nd->fc.n_scratch; s++) {
      /* a node whose backward never runs (inference, evaluation, or a
       * frozen node with no trainable layer before it) has no backward
       * scratch */
      nd->t_scratch[s] = -1;
      if (head && !nd->recompute && !nnt_scratch_in_backward(nd->fc.scratch_life[s]))
        continue;
      if ((mode != NNT_MODE_TRAIN || !(nd->do_grad || nd->do_deriv)) &&
          (nd->fc.scratch_life[s] == NNT_SCRATCH_BWD ||
           nd->fc.scratch_life[s] == NNT_SCRATCH_SAVED))
        continue;
      if (nd->fc.scratch_life[s] == NNT_SCRATCH_DERIV && (mode != NNT_MODE_TRAIN || !nd->do_deriv))
        continue;
      if (nd->fc.scratch_life[s] == NNT_SCRATCH_INPLACE && !nd->inplace)
        continue;
      int id = req(g, name, "scratch", s, NNT_TK_SCRATCH, nd->fc.scratch_dim[s], e);
      if (id < 0)
        return id;
      nd->t_scratch[s] = id;
    }
    /* its input computed again image by image (rerun.c): the images */
    nd->t_rerun = -1;
    if (mode == NNT_MODE_TRAIN && nd->rerun) {
      size_t floats = nnt_rerun_floats(&m->reruns[nd->rerun - 1]); /* rerun.c: fits */
      int id = req(g, name, "rerun", 0, NNT_TK_SCRATCH, nnt_dim_make(1, 1, 1, (unsigned)floats),
                   e);
      if (id < 0)
        return id;
      nd->t_rerun = id;
    }
    /* inference holds no label and no loss value: a loss layer gives its
     * output only (ctx->label and ctx->loss are NULL) */
    int with_loss = (nd->fc.flags & NNT_LF_LOSS) && mode != NNT_MODE_INFER;
    nd->t_label = -1;
    if (with_loss) {
      int id = req(g, name, "label", 0, NNT_TK_LABEL, m->label_dim[nd->label_idx], e);
      if (id < 0)
        return id;
      nd->t_label = id;
      m->label_t[nd->label_idx] = id;
    }
    /* the loss value: from this node's forward until train.c has read it,
     * after the forward pass (plan_touch.c) */
    nd->t_loss = -1;
    if (with_loss) {
      int id = req(g, name, "loss", 0, NNT_TK_SCRATCH, nnt_dim_make(1, 1, 1, 1), e);
      if (id < 0)
        return id;
      nd->t_loss = id;
    }
  }
  return NNT_OK;
}

/* Gradients and derivatives (training only). */
static int request_backward(nnt_model *m, nnt_mgr *g, nnt_err *e) {
  int opt = m->memory_optimization;
  /* A derivative comes only from a loss: a node whose backward runs needs
   * some output that a loss is downstream of (a layer of several outputs
   * takes the ones nobody reads as zero). A model output without a loss
   * after it, of a node that trains or feeds one, has none. */
  for (size_t i = 0; i < m->n_nodes; i++) {
    const nnt_node *nd = &m->nodes[i];
    unsigned read = 0;
    for (unsigned o = 0; o < nd->fc.n_out; o++)
      read += nd->n_consumers[o];
    if (!(nd->do_grad || nd->do_deriv) || read || (nd->fc.flags & NNT_LF_LOSS))
      continue;
    if (!m->n_labels)
      return nnt_err_set(e, NNT_ERR_INVAL, "training: the model has no loss (set [Model] loss "
                         "or add a loss layer)");
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "[%s] training: '%s' is an output of the model without a loss after "
                       "it, so its backward pass gets no derivative; add a loss layer that "
                       "reads it, or remove it",
                       nd->layer->name, nd->layer->name);
  }
  for (size_t i = 0; i < m->n_nodes; i++) {
    nnt_node *nd = &m->nodes[i];
    for (unsigned w = 0; w < nd->fc.n_w; w++) {
      nd->t_gw[w] = -1;
      if (!nd->do_grad || !nd->fc.w[w].trainable)
        continue;
      /* a gradient applied block by block: one block of rows */
      int id = req(g, nd->layer->name, nd->gtile[w] ? "grad_rows" : "grad", w, NNT_TK_GRADIENT,
                   nnt_grad_dim(nd, w), e);
      if (id < 0)
        return id;
      nd->t_gw[w] = id;
    }
  }
  /* A consumer's d_in is its producer's d_out. A fan-out (an output read
   * by several consumers) gets a sum, its d_out: with memory_optimization
   * the first consumer in backward order (the last in forward) writes it
   * directly (NNT_D_DIRECT), as the first value of the sum is its
   * derivative; each later one writes a temporary that train.c adds in,
   * or adds into the sum itself where its layer can (NNT_D_ACCUM).
   * Without it every consumer keeps its own derivative (a temporary that
   * the first copies into the sum), the reference that --dump reads. */
  for (size_t i = 0; i < m->n_nodes; i++)
    for (unsigned o = 0; o < NNT_MAX_IO; o++)
      m->nodes[i].t_dout[o] = -1;
  for (size_t ci = m->n_nodes; ci-- > 0;) {
    nnt_node *c = &m->nodes[ci];
    for (unsigned k = 0; k < c->n_in; k++) {
      c->t_din[k] = -1;
      c->t_dsum[k] = -1;
      c->dmode[k] = NNT_D_DIRECT;
      if (!c->do_deriv || c->in_node[k] == NNT_NO_NODE)
        continue;
      nnt_node *p = &m->nodes[c->in_node[k]];
      unsigned pi = c->in_idx[k];
      if (!p->needs_d)
        continue;
      if (p->n_consumers[pi] == 1) {
        int id = req(g, c->layer->name, "d_in", k, NNT_TK_DERIVATIVE, c->fc.in_dim[k], e);
        if (id < 0)
          return id;
        c->t_din[k] = id;
        p->t_dout[pi] = id;
      } else {
        if (p->t_dout[pi] < 0) {
          /* the first consumer in backward order is the last in forward */
          int id = req(g, p->layer->name, "d_out", pi, NNT_TK_DERIVATIVE,
                       p->fc.out_dim[pi], e);
          if (id < 0)
            return id;
          p->t_dout[pi] = id;
          if (opt) {
            c->t_din[k] = id;
            continue;
          }
          c->dmode[k] = NNT_D_COPY;
        } else if (opt && (c->fc.flags & NNT_LF_DERIV_ADDS)) {
          c->dmode[k] = NNT_D_ACCUM; /* the layer adds into the sum itself */
          c->t_din[k] = p->t_dout[pi];
          continue;
        } else {
          c->dmode[k] = NNT_D_ADD;
        }
        int id = req(g, c->layer->name, "d_in", k, NNT_TK_DERIVATIVE, c->fc.in_dim[k], e);
        if (id < 0)
          return id;
        c->t_din[k] = id;
        c->t_dsum[k] = p->t_dout[pi];
      }
    }
  }
  /* in-place and view layers write d_in over d_out */
  if (opt)
    for (size_t i = 0; i < m->n_nodes; i++) {
      nnt_node *nd = &m->nodes[i];
      if (nd->inplace && nd->t_din[0] >= 0 && nd->t_dout[0] >= 0)
        nnt_mgr_merge(g, nd->t_din[0], nd->t_dout[0]);
    }
  return NNT_OK;
}

/* Recomputation: every forward step of the backward part (recompute.c
 * may run a node's forward there more than once) writes a fresh version of
 * the node's outputs and forward scratch; each step reads the latest
 * version of what it touches, so an older version dies with its last
 * reader. An in-place node's version shares its producer's, which must be
 * a version recomputed just before (recompute.c recomputes an in-place
 * chain as one unit). m->alt holds, per training step, the ids its node's
 * inputs, outputs and scratch are bound to (NNT_STEP_IDS each). */
static int request_recompute(nnt_model *m, nnt_mgr *g, nnt_err *e) {
  size_t n0 = g->n;
  unsigned ns = m->n_steps[NNT_MODE_TRAIN], fe = nnt_schedule_forward_end(m, NNT_MODE_TRAIN);
  const nnt_step *st = m->sched[NNT_MODE_TRAIN];
  int *cur = nnt_malloc((n0 ? n0 : 1) * sizeof *cur);
  nnt_free(m->alt);
  m->alt = nnt_malloc((ns ? ns : 1) * NNT_STEP_IDS * sizeof *m->alt);
  m->n_alt = m->alt ? ns : 0;
  if (!cur || !m->alt) {
    nnt_free(cur);
    return nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory planning recomputation");
  }
  for (size_t i = 0; i < n0; i++)
    cur[i] = (int)i;
  int rc = NNT_OK;
  for (unsigned s = 0; s < ns && !rc; s++) {
    int *ids = m->alt + (size_t)s * NNT_STEP_IDS;
    for (unsigned k = 0; k < NNT_STEP_IDS; k++)
      ids[k] = -1;
    if (st[s].kind == NNT_STEP_NONE || st[s].kind == NNT_STEP_CLIP_APPLY)
      continue;
    nnt_node *nd = &m->nodes[st[s].node];
    /* forward_saved: reads what forward kept, no input; a fresh output */
    int saved = s >= fe && st[s].kind == NNT_STEP_FORWARD && nd->recompute_saved;
    if (s >= fe && st[s].kind == NNT_STEP_FORWARD) {
      for (unsigned o = 0; o < nd->fc.n_out; o++) {
        int id = req(g, nd->layer->name, "recomputed_out", o, NNT_TK_ACTIVATION,
                     nd->fc.out_dim[o], e);
        if (id < 0) {
          rc = id;
          break;
        }
        if (o == 0 && nd->inplace && nd->t_in[0] >= 0 && !saved) {
          int p = cur[nd->t_in[0]];
          if ((size_t)p < n0) {
            rc = nnt_err_set(e, NNT_ERR_INVAL,
                             "compile: [%s] runs in place and is recomputed without its "
                             "producer",
                             nd->layer->name);
            break;
          }
          nnt_mgr_merge(g, id, p);
        }
        cur[nd->t_out[o]] = id;
      }
      for (unsigned c = 0; c < nd->fc.n_scratch && !rc; c++) {
        if (nnt_scratch_in_backward(nd->fc.scratch_life[c]) || nd->t_scratch[c] < 0 || saved)
          continue;
        int id = req(g, nd->layer->name, "recomputed_scratch", c, NNT_TK_SCRATCH,
                     nd->fc.scratch_dim[c], e);
        if (id < 0)
          rc = id;
        else
          cur[nd->t_scratch[c]] = id;
      }
    }
    for (unsigned k = 0; k < nd->n_in; k++)
      ids[k] = nd->t_in[k] >= 0 && !saved ? cur[nd->t_in[k]] : -1;
    for (unsigned o = 0; o < nd->fc.n_out; o++)
      ids[NNT_MAX_IO + o] = nd->t_out[o] >= 0 ? cur[nd->t_out[o]] : -1;
    for (unsigned c = 0; c < nd->fc.n_scratch; c++)
      ids[2 * NNT_MAX_IO + c] =
          nd->t_scratch[c] >= 0 && !(saved && nd->fc.scratch_life[c] != NNT_SCRATCH_ITER &&
                                     nd->fc.scratch_life[c] != NNT_SCRATCH_SAVED)
              ? cur[nd->t_scratch[c]]
              : -1;
  }
  nnt_free(cur);
  return rc;
}

static void bind(nnt_tensor *t, const nnt_mgr *g, int id, nnt_dim dim) {
  *t = nnt_mgr_bind(g, id, dim);
}

static void bind_contexts(nnt_model *m, nnt_mode mode) {
  nnt_mgr *g = &m->mgr[mode];
  for (size_t i = 0; i < m->n_nodes; i++) {
    nnt_node *nd = &m->nodes[i];
    nnt_run_ctx *c = &nd->ctx;
    memset(c, 0, sizeof *c);
    for (unsigned k = 0; k < nd->n_in; k++) {
      bind(&nd->in[k], g, nd->t_in[k], nd->fc.in_dim[k]);
      bind(&nd->din[k], g, mode == NNT_MODE_TRAIN ? nd->t_din[k] : -1, nd->fc.in_dim[k]);
    }
    for (unsigned o = 0; o < nd->fc.n_out; o++) {
      bind(&nd->out[o], g, nd->t_out[o], nd->fc.out_dim[o]);
      bind(&nd->dout[o], g, mode == NNT_MODE_TRAIN ? nd->t_dout[o] : -1, nd->fc.out_dim[o]);
    }
    for (unsigned w = 0; w < nd->fc.n_w; w++)
      bind(&nd->gw[w], g, mode == NNT_MODE_TRAIN ? nd->t_gw[w] : -1, nnt_grad_dim(nd, w));
    for (unsigned s = 0; s < nd->fc.n_scratch; s++)
      bind(&nd->scratch[s], g, nd->t_scratch[s], nd->fc.scratch_dim[s]);
    if (nd->t_label >= 0)
      bind(&nd->label, g, nd->t_label, m->label_dim[nd->label_idx]);
    bind(&nd->loss, g, nd->t_loss, nnt_dim_make(1, 1, 1, 1));
    c->k = m->k;
    c->n_in = nd->n_in;
    c->n_out = nd->fc.n_out;
    c->n_w = nd->fc.n_w;
    c->n_scratch = nd->fc.n_scratch;
    c->in = nd->in;
    c->out = nd->out;
    c->d_in = nd->din;
    c->d_add = 0;
    for (unsigned k = 0; k < nd->n_in && mode == NNT_MODE_TRAIN; k++)
      if (nd->dmode[k] == NNT_D_ACCUM)
        c->d_add |= 1u << k;
    c->d_out = nd->dout;
    c->w = m->w + nd->w_first;
    c->gw = nd->gw;
    c->scratch = nd->scratch;
    c->label = nd->t_label >= 0 ? &nd->label : NULL;
    c->loss = nd->t_loss >= 0 ? &nd->loss : NULL;
    c->seed = m->seed; /* the stream is set per step (nnt_model_forward) */
  }
  m->bound_mode = mode;
}

/* The planned bytes of a mode: the weights, the optimizer state (training
 * only) and the arena. parts[] receives the three, in that order. */
static int mode_total(const nnt_model *m, nnt_mode mode, const nnt_mgr *g, size_t parts[3],
                      size_t *total) {
  unsigned slots = mode == NNT_MODE_TRAIN && m->opt ? nnt_optimizer_state_count(m->opt) : 0;
  /* with a chunk, the pools' gaps count too */
  parts[0] = m->wmgr.planned ? m->wmgr.arena_bytes : m->weight_bytes;
  parts[1] = nnt_model_opt_bytes(m, slots); /* fits: compile checked it */
  parts[2] = g->arena_bytes;
  return nnt_size_add(parts[0], parts[1], total) || nnt_size_add(*total, parts[2], total);
}

int nnt_model_budget_with(const nnt_model *m, nnt_mode mode, size_t extra, const char *what,
                          nnt_err *e) {
  size_t parts[3], total;
  if (!m->memory_budget)
    return NNT_OK;
  int wrapped = mode_total(m, mode, &m->mgr[mode], parts, &total) ||
                nnt_size_add(total, extra, &total);
  if (!wrapped && total <= m->memory_budget)
    return NNT_OK;
  char a[32], b[32];
  return nnt_err_set(
      e, NNT_ERR_NOMEM,
      "[Model] memory_budget: the %s plan (%s) and %s (%s) need more than the "
      "budget of %llu bytes; lower buffer_size or raise the budget",
      nnt_mode_name(mode), nnt_bytes_str(parts[0] + parts[1] + parts[2], a, sizeof a), what,
      extra == SIZE_MAX ? "more than SIZE_MAX bytes" : nnt_bytes_str(extra, b, sizeof b),
      (unsigned long long)m->memory_budget);
}

/* "12.0 MiB (12582912 bytes)" */
static const char *bytes_both(uint64_t b, char *buf, size_t n) {
  char s[32];
  snprintf(buf, n, "%s (%llu bytes)", nnt_bytes_str((size_t)b, s, sizeof s),
           (unsigned long long)b);
  return buf;
}

/* A mode's plan against [Model] memory_budget, before its arena exists.
 * Over the budget is an error today, stating the planned bytes, the budget
 * and the largest parts; a later step that recomputes activations instead
 * of keeping them would, here, plan again with a schedule that frees them. */
static int fit_budget(const nnt_model *m, nnt_mode mode, const nnt_mgr *g, nnt_err *e) {
  size_t parts[3], total;
  int wrapped = mode_total(m, mode, g, parts, &total);
  if (!m->memory_budget || (!wrapped && total <= m->memory_budget))
    return NNT_OK;
  const char *mname = nnt_mode_name(mode);
  char a[64], b[64], c[64];
  char msg[NNT_ERR_MSG_MAX];
  int n = snprintf(msg, sizeof msg, "[Model] memory_budget: the %s plan needs %s, more than "
                   "the budget of %s: arena %s",
                   mname, wrapped ? "more than SIZE_MAX bytes" : bytes_both(total, a, sizeof a),
                   bytes_both(m->memory_budget, b, sizeof b), nnt_bytes_str(parts[2], c, sizeof c));
  /* the arena by kind, then the three largest tensors in it */
  const char *sep = " (shared by ";
  for (int k = 0; k < NNT_TK__COUNT && n > 0 && (size_t)n < sizeof msg; k++) {
    size_t kb = nnt_mgr_kind_bytes(g, (nnt_tkind)k);
    if (kb) {
      n += snprintf(msg + n, sizeof msg - n, "%s%s %s", sep, nnt_tkind_name((nnt_tkind)k),
                    nnt_bytes_str(kb, c, sizeof c));
      sep = ", ";
    }
  }
  if (n > 0 && (size_t)n < sizeof msg)
    n += snprintf(msg + n, sizeof msg - n, "%s, weights %s, optimizer state %s",
                  sep[0] == ',' ? ")" : "", nnt_bytes_str(parts[0], a, sizeof a),
                  nnt_bytes_str(parts[1], b, sizeof b));
  int top[3] = {-1, -1, -1};
  for (size_t i = 0; i < g->n; i++) {
    if (g->t[i].parent >= 0)
      continue;
    for (int r = 0; r < 3; r++)
      if (top[r] < 0 || g->t[i].bytes > g->t[top[r]].bytes) {
        for (int q = 2; q > r; q--)
          top[q] = top[q - 1];
        top[r] = (int)i;
        break;
      }
  }
  for (int r = 0; r < 3 && top[r] >= 0 && n > 0 && (size_t)n < sizeof msg; r++)
    n += snprintf(msg + n, sizeof msg - n, "%s%.64s %s", r ? ", " : "; largest tensors: ",
                  g->t[top[r]].name, nnt_bytes_str(g->t[top[r]].bytes, c, sizeof c));
  return nnt_err_set(e, NNT_ERR_NOMEM, "%s", msg);
}

/* The requests of a mode into g; they also set the nodes' tensor ids, which
 * are the same every time for the same mode. */
static int build_requests(nnt_model *m, nnt_mode mode, nnt_mgr *g, nnt_err *e) {
  int rc = request_forward(m, mode, g, e);
  if (!rc && mode == NNT_MODE_TRAIN)
    rc = request_backward(m, g, e);
  if (!rc && mode == NNT_MODE_TRAIN && m->n_recompute)
    rc = request_recompute(m, g, e);
  if (!rc)
    rc = nnt_plan_touch_steps(m, mode, g, e);
  return rc;
}

/* A fresh manager g planned for mode (no memory yet). */
static int plan_requests(nnt_model *m, nnt_mode mode, nnt_mgr *g, nnt_err *e) {
  nnt_mgr_init(g);
  nnt_mgr_set_buffer_type(g, m->be->buft);
  g->quick = m->plan_quick;
  g->poison = m->poison;
  int rc = build_requests(m, mode, g, e);
  if (!rc) {
    nnt_planner_kind k = m->memory_optimization ? m->planner : NNT_PLANNER_BASIC;
    rc = nnt_mgr_plan(g, k, 0, e);
  }
  return rc;
}

int nnt_model_train_total(nnt_model *m, size_t *total, nnt_err *e) {
  nnt_mgr g;
  size_t parts[3];
  /* a candidate of the recomputation search: the fixed block orders only
   * (the search over orders, run for the plan that trains, costs several
   * placements each time) */
  m->plan_quick = 1;
  int rc = plan_requests(m, NNT_MODE_TRAIN, &g, e);
  m->plan_quick = 0;
  if (!rc && mode_total(m, NNT_MODE_TRAIN, &g, parts, total))
    *total = SIZE_MAX;
  nnt_mgr_free(&g);
  /* the nodes' ids are this scratch plan's now: rebind before running */
  if (m->bound_mode == NNT_MODE_TRAIN)
    m->bound_mode = -1;
  return rc;
}

size_t nnt_model_queue_reserve(const nnt_model *m) {
  nnt_ds_shape sh;
  nnt_model_ds_shape(m, &sh);
  size_t total = 0;
  for (int k = 0; k < 3; k++)
    if (nnt_size_add(total, nnt_dataset_queue_bytes_for(m->ds[k], &sh, m->batch), &total))
      return SIZE_MAX;
  return total;
}

int nnt_model_plan_layout(nnt_model *m, nnt_mode mode, nnt_err *e) {
  nnt_mgr *g = &m->mgr[mode];
  /* under a budget the training plan leaves room for the datasets' queues;
   * datasets set (or grown) since it was made: fit it again */
  size_t reserve = mode == NNT_MODE_TRAIN && m->memory_budget ? nnt_model_queue_reserve(m) : 0;
  if (g->planned && reserve > m->budget_reserve)
    nnt_model_release_plan(m, mode);
  if (g->planned) {
    if (m->bound_mode != (int)mode) {
      /* the nodes hold the other mode's ids: rebuild this mode's */
      nnt_mgr tmp;
      nnt_mgr_init(&tmp);
      int rc = build_requests(m, mode, &tmp, e);
      nnt_mgr_free(&tmp);
      if (rc)
        return rc;
      if (g->allocated) /* else nnt_model_plan binds once it allocates */
        bind_contexts(m, mode);
      else /* the nodes' ids are this mode's now, bound to none */
        m->bound_mode = -1;
    }
    return NNT_OK;
  }
  nnt_mgr_free(g);
  if (mode == NNT_MODE_TRAIN)
    m->budget_reserve = reserve;
  /* the default plan's cheap recomputation (once per compile) */
  int rc = mode == NNT_MODE_TRAIN ? nnt_graph_keep_less_choose(m, e) : NNT_OK;
  if (!rc && mode == NNT_MODE_TRAIN)
    rc = nnt_recompute_default(m, e);
  if (!rc && mode == NNT_MODE_TRAIN)
    rc = nnt_rerun_choose(m, e);
  if (!rc && mode == NNT_MODE_TRAIN)
    rc = nnt_delay_choose(m, e);
  if (!rc)
    rc = plan_requests(m, mode, g, e);
  /* over the budget in training, with the queues: recompute activations
   * to fit */
  size_t parts[3], total, min = 0;
  int fit = NNT_OK;
  if (!rc && mode == NNT_MODE_TRAIN && m->memory_budget &&
      (mode_total(m, mode, g, parts, &total) || nnt_size_add(total, reserve, &total) ||
       total > m->memory_budget)) {
    fit = nnt_recompute_fit(m, &min, e);
    /* the plan as it was (with the default's cheap recomputation, which
     * the search lacks) fits its own total */
    if (fit == NNT_ERR_NOMEM && total - reserve < min)
      min = total - reserve;
    if (fit == NNT_OK) {
      nnt_mgr_free(g);
      rc = plan_requests(m, mode, g, e);
    } else if (fit != NNT_ERR_NOMEM) {
      rc = fit;
    } else { /* the plan without, for the message */
      nnt_mgr_free(g);
      rc = plan_requests(m, mode, g, e);
    }
  }
  if (!rc)
    rc = fit_budget(m, mode, g, e);
  if (!rc && fit == NNT_ERR_NOMEM) /* the plan fits, not with the queues */
    rc = nnt_model_budget_with(m, mode, reserve, "the datasets' queues (buffer_size batches each)",
                               e);
  if (rc == NNT_ERR_NOMEM && min) {
    size_t len = strlen(e->msg), need;
    char a[64], b[64], c[64];
    if (nnt_size_add(min, reserve, &need))
      need = SIZE_MAX;
    snprintf(e->msg + len, sizeof e->msg - len, "; recomputing activations in the backward pass, "
             "the smallest training plan found needs %s, plus %s for the datasets' queues: "
             "the minimum budget that fits is %s", bytes_both(min, a, sizeof a),
             nnt_bytes_str(reserve, b, sizeof b), bytes_both(need, c, sizeof c));
  }
  if (rc)
    nnt_mgr_free(g);
  /* the nodes' ids are this mode's now: a mode bound before is not */
  if (m->bound_mode != (int)mode)
    m->bound_mode = -1;
  return rc;
}

int nnt_model_plan(nnt_model *m, nnt_mode mode, nnt_err *e) {
  nnt_mgr *g = &m->mgr[mode];
  int rc = nnt_model_plan_layout(m, mode, e);
  if (rc || g->allocated)
    return rc;
  if ((rc = nnt_mgr_alloc(g, nnt_mode_name(mode), e))) {
    nnt_mgr_free(g);
    return rc;
  }
  bind_contexts(m, mode);
  return NNT_OK;
}

void nnt_model_release_plan(nnt_model *m, nnt_mode mode) {
  nnt_mgr_free(&m->mgr[mode]);
  if (m->bound_mode == (int)mode)
    m->bound_mode = -1;
}
