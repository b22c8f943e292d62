/* Delays: in the training forward, a branch into an addition (ResNet's
 * downsampling shortcut: a 1x1 convolution with a stride, then batch
 * normalization) runs at the addition's step instead of its own, from a
 * copy of what its convolution reads of its input, made at the
 * convolution's own step.
 *
 * Why: a block's input is read by the shortcut and by the block's first
 * convolution. The shortcut, run first, keeps its output alive beside the
 * input while that convolution runs; run first but delayed, it keeps only
 * the subsampled copy (a quarter of the input's positions at a stride of
 * 2, half the bytes of its output where it doubles the channels), and its
 * output lives in the addition's step alone. The first convolution is
 * still the input's last reader (plan.c last_reader: the copy is made
 * earlier) and writes over it.
 *
 * Bit for bit: the convolution computes from the copy what it computes
 * from its input (nnt_conv_gathers: the CPU's subsampling product packs
 * the same values into the same panels, or one image's product takes the
 * copy as its im2col columns); batch normalization and activations run on
 * the whole batch as they would have, only later: the batch statistics
 * and the moving averages are those of the same values.
 *
 * Which branches: the addition and every node of the branch without a
 * backward pass, each node's output read by the next alone, the
 * convolution's input read again by a later node; none that a rerun
 * (rerun.c) runs again, and no addition with one. The same memory as
 * reruns ask (memory_optimization, the CPU's host memory). Kept where the
 * training plan shrinks, then each dropped again where that is no larger
 * (as rerun.c chooses). */
#include "nntrainer/model_impl.h"

#include <string.h>

static int is_type(const nnt_node *nd, const char *t) { return !strcmp(nd->layer->ops->type, t); }

/* Is node i in a rerun's chain or an addition with a rerun? */
static int in_rerun(const nnt_model *m, unsigned i) {
  for (unsigned r = 0; r < m->n_reruns; r++) {
    if (m->reruns[r].node == i)
      return 1;
    for (unsigned j = 0; j < m->reruns[r].n; j++)
      if (m->reruns[r].chain[j] == i)
        return 1;
  }
  return 0;
}

/* Does a node after i read output pidx of node p (p NNT_NO_NODE: model
 * input pidx)? */
static int read_later(const nnt_model *m, unsigned i, unsigned p, unsigned pidx) {
  for (size_t j = i + 1; j < m->n_nodes; j++)
    for (unsigned k = 0; k < m->nodes[j].n_in; k++)
      if (m->nodes[j].in_node[k] == p && m->nodes[j].in_idx[k] == pidx)
        return 1;
  return 0;
}

/* The branch that makes input k of addition a, into d; 0 where there is
 * none to delay. */
static int build_branch(const nnt_model *m, unsigned a, unsigned k, nnt_delay *d) {
  unsigned rev[NNT_DELAY_MAX], n = 0, q = m->nodes[a].in_node[k];
  if (m->nodes[a].in_idx[k])
    return 0;
  for (;;) {
    if (q == NNT_NO_NODE || n == NNT_DELAY_MAX || in_rerun(m, q))
      return 0;
    const nnt_node *nd = &m->nodes[q];
    if (nd->do_grad || nd->do_deriv || nd->fc.n_out != 1 || nd->n_in != 1 ||
        nd->n_consumers[0] != 1 || nd->fc.n_out_refs > 1)
      return 0;
    rev[n++] = q;
    if (is_type(nd, "conv2d")) {
      if (!nnt_conv_gathers(nd->layer, m->k) ||
          !read_later(m, q, nd->in_node[0], nd->in_idx[0]))
        return 0;
      break;
    }
    if (!is_type(nd, "batch_normalization") && !is_type(nd, "activation"))
      return 0;
    q = nd->in_node[0];
  }
  d->node = a;
  d->k = k;
  d->n = n;
  for (unsigned j = 0; j < n; j++)
    d->chain[j] = rev[n - 1 - j];
  return 1;
}

void nnt_delay_clear(nnt_model *m) {
  for (unsigned i = 0; i < m->n_delays; i++) {
    m->nodes[m->delays[i].node].delay = 0;
    for (unsigned j = 0; j < m->delays[i].n; j++)
      m->nodes[m->delays[i].chain[j]].delayed = 0;
  }
  nnt_free(m->delays);
  m->delays = NULL;
  m->n_delays = 0;
}

/* Make m->delays the candidates whose bit is set in use. */
static void apply(nnt_model *m, const nnt_delay *cand, const unsigned char *use, size_t n) {
  for (unsigned i = 0; i < m->n_delays; i++) {
    m->nodes[m->delays[i].node].delay = 0;
    for (unsigned j = 0; j < m->delays[i].n; j++)
      m->nodes[m->delays[i].chain[j]].delayed = 0;
  }
  m->n_delays = 0;
  for (size_t c = 0; c < n; c++) {
    if (!use[c])
      continue;
    m->delays[m->n_delays++] = cand[c];
    m->nodes[cand[c].node].delay = m->n_delays;
    for (unsigned j = 0; j < cand[c].n; j++)
      m->nodes[cand[c].chain[j]].delayed = m->n_delays;
  }
}

typedef struct delay_choice {
  const nnt_delay *cand;
  size_t n;
} delay_choice;

static void apply_choice(nnt_model *m, void *arg, const unsigned char *use) {
  const delay_choice *ch = arg;
  apply(m, ch->cand, use, ch->n);
}

/* The last candidate still in use (n: none): each dropped again in turn. */
static size_t last_used(void *arg, const unsigned char *use) {
  const delay_choice *ch = arg;
  for (size_t c = ch->n; c-- > 0;)
    if (use[c])
      return c;
  return ch->n;
}

int nnt_delay_choose(nnt_model *m, nnt_err *e) {
  if (m->delays_done)
    return NNT_OK;
  m->delays_done = 1;
  nnt_delay_clear(m);
  if (!nnt_forward_rework_ok(m))
    return NNT_OK;
  size_t n = m->n_nodes, nc = 0;
  nnt_delay *cand = nnt_calloc(n, sizeof *cand);
  unsigned char *use = nnt_calloc(2 * n, 1);
  if (!cand || !use) {
    nnt_free(cand);
    nnt_free(use);
    return nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory choosing delays");
  }
  unsigned char *best = use + n;
  for (size_t a = 0; a < n; a++) {
    const nnt_node *an = &m->nodes[a];
    if (!is_type(an, "addition") || an->n_in != 2 || an->do_grad || an->do_deriv ||
        an->rerun || an->in_node[0] == an->in_node[1])
      continue;
    for (unsigned k = 0; k < 2; k++)
      if (build_branch(m, (unsigned)a, k, &cand[nc])) {
        use[nc++] = 1;
        break; /* one branch an addition */
      }
  }
  int rc = NNT_OK;
  m->delays = nc ? nnt_calloc(nc, sizeof *m->delays) : NULL;
  if (nc && !m->delays)
    rc = nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory choosing delays");
  delay_choice ch = {cand, nc};
  if (!rc && nc)
    rc = nnt_keep_if_smaller(m, nc, use, best, apply_choice, last_used, &ch, e);
  if (rc || !m->n_delays)
    nnt_delay_clear(m);
  nnt_free(cand);
  nnt_free(use);
  return rc;
}

int nnt_delay_forward(nnt_model *m, nnt_node *nd) {
  if (nd->delayed) { /* the branch's own step: the copy, or nothing */
    const nnt_delay *d = &m->delays[nd->delayed - 1];
    if (&m->nodes[d->chain[0]] != nd)
      return NNT_OK;
    nnt_tensor copy = nnt_mgr_bind(&m->mgr[NNT_MODE_TRAIN], nd->t_gather, nnt_delay_dim(nd));
    if (!copy.data)
      return NNT_ERR_INVAL;
    return nnt_conv_gather(nd->layer, &nd->ctx, copy.data);
  }
  /* the addition's step: its branch, then the addition */
  const nnt_delay *d = &m->delays[nd->delay - 1];
  for (unsigned j = 0; j < d->n; j++) {
    nnt_node *c = &m->nodes[d->chain[j]];
    nnt_run_ctx ctx = c->ctx;
    nnt_tensor copy;
    if (j == 0) {
      copy = nnt_mgr_bind(&m->mgr[NNT_MODE_TRAIN], c->t_gather, nnt_delay_dim(c));
      if (!copy.data)
        return NNT_ERR_INVAL;
      ctx.in = &copy;
      ctx.gathered = 1;
    }
    int rc = c->layer->ops->forward(c->layer, &ctx);
    if (rc)
      return rc;
  }
  return nd->layer->ops->forward(nd->layer, &nd->ctx);
}
