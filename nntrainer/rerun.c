/* Reruns: in the training forward, an addition's input computed again,
 * one image at a time, from the model's inputs, instead of kept from the
 * step that made it to the addition. A residual block's input is read by
 * its first convolution and, several layers later, by the block's
 * addition (the skip connection); where nothing of the block trains, the
 * forward is all that runs, and that one tensor is what keeps two of the
 * block's activations alive at once. With a rerun the first convolution
 * is its last reader (and may write over it, plan.c can_run_inplace), and
 * the addition makes each image of it again just before adding it: the
 * layers that computed it run again on one image (views of one image of
 * each tensor, outputs in image-sized slots of the addition's region),
 * batch normalization with the statistics the batch's forward left
 * (ctx->whole, kept to the addition's step), then the addition of that
 * image.
 *
 * Bit for bit: every layer of the chain must compute an image alone as it
 * did inside the batch: activations and additions do, batch normalization
 * does given the batch's statistics (bn_fwd_stats), a convolution does on
 * the paths nnt_conv_fwd_per_image names (a direct convolution, Winograd
 * chunks that keep to one image, one image's im2col and product); any
 * other layer, one whose backward runs, or a dataset the model does not
 * read in place (plan.c borrows_inputs) leaves the addition as it is.
 *
 * The choice (once per compile, in the training plan): every addition
 * whose backward does not run, for its input made earliest, while the
 * extra FLOPs stay within RERUN_SHARE of the forward's; kept where the
 * plan shrinks, then each dropped again where that is no larger (the
 * default recomputation's rule, recompute.c). Measured with the planner
 * itself (nnt_model_train_total). */
#include "nntrainer/model_impl.h"

#include <string.h>

/* The reruns' FLOPs, at most this share of the forward's */
#define RERUN_SHARE 0.15
/* Slot and scratch offsets in floats: 64 bytes */
#define RERUN_ALIGN 16

static size_t align_up(size_t n) { return (n + RERUN_ALIGN - 1) / RERUN_ALIGN * RERUN_ALIGN; }

static int is_conv(const nnt_node *nd) {
  const char *t = nd->layer->ops->type;
  return !strcmp(t, "conv2d") || !strcmp(t, "conv1d");
}

static size_t image_floats(nnt_dim d) { return d.b ? nnt_dim_len(d) / d.b : 0; }

/* Can node i run in a chain, one image at a time, bit for bit? */
static int chain_node_ok(const nnt_model *m, size_t i) {
  const nnt_node *nd = &m->nodes[i];
  const char *t = nd->layer->ops->type;
  if (nd->do_grad || nd->do_deriv || nd->fc.n_out != 1)
    return 0;
  if (!strcmp(t, "input"))
    return (nd->fc.flags & NNT_LF_VIEW) != 0;
  if (is_conv(nd)) {
    nnt_dim s0 = nnt_dim_make(0, 0, 0, 0);
    if (nd->fc.n_scratch) {
      if (nd->fc.scratch_life[0] != NNT_SCRATCH_FWD)
        return 0;
      s0 = nd->fc.scratch_dim[0];
    }
    return nnt_conv_fwd_per_image(nd->layer, m->k, s0);
  }
  if (!strcmp(t, "batch_normalization"))
    return m->k->bn_fwd_stats != NULL;
  return !strcmp(t, "activation") || !strcmp(t, "addition");
}

/* The chain that computes input k of node a: every node it depends on.
 * Returns 0 where it may not run again (see chain_node_ok). */
static int build_chain(const nnt_model *m, unsigned a, unsigned k, unsigned char *in_chain,
                       nnt_rerun *r) {
  const nnt_node *an = &m->nodes[a];
  unsigned p = an->in_node[k];
  if (p == NNT_NO_NODE)
    return 0;
  memset(in_chain, 0, m->n_nodes);
  in_chain[p] = 1;
  /* the nodes come in execution order: a producer precedes its readers */
  for (size_t i = p + 1; i-- > 0;) {
    if (!in_chain[i])
      continue;
    if (!chain_node_ok(m, i))
      return 0;
    const nnt_node *nd = &m->nodes[i];
    for (unsigned q = 0; q < nd->n_in; q++)
      if (nd->in_node[q] != NNT_NO_NODE)
        in_chain[nd->in_node[q]] = 1;
  }
  r->node = a;
  r->k = k;
  r->n = 0;
  r->flops = 0;
  for (size_t i = 0; i <= p; i++) {
    if (!in_chain[i])
      continue;
    if (r->n == NNT_RERUN_MAX)
      return 0;
    r->chain[r->n++] = (unsigned)i;
    r->flops += nnt_recompute_node_flops(m, i);
  }
  return 1;
}

/* Slots: each output image in a slot of the region, written over its
 * input's where the layer runs in place and no later node of the chain
 * reads that input; a slot is free again after its last reader. */
static void assign_slots(const nnt_model *m, nnt_rerun *r) {
  size_t last[NNT_RERUN_MAX], owner_last[NNT_RERUN_MAX], floats = 0;
  int pos[NNT_RERUN_MAX];
  unsigned ns = 0;
  for (unsigned j = 0; j < r->n; j++) {
    last[j] = r->n; /* the last one: the addition reads it */
    floats = floats > image_floats(m->nodes[r->chain[j]].fc.out_dim[0])
                 ? floats
                 : image_floats(m->nodes[r->chain[j]].fc.out_dim[0]);
  }
  for (unsigned j = 0; j + 1 < r->n; j++) {
    last[j] = 0;
    for (unsigned i = j + 1; i < r->n; i++) {
      const nnt_node *nd = &m->nodes[r->chain[i]];
      for (unsigned q = 0; q < nd->n_in; q++)
        if (nd->in_node[q] == r->chain[j])
          last[j] = i;
    }
  }
  size_t scratch = 0;
  for (unsigned j = 0; j < r->n; j++) {
    const nnt_node *nd = &m->nodes[r->chain[j]];
    pos[j] = -1;
    for (unsigned i = 0; i < j; i++)
      if (nd->in_node[0] == r->chain[i])
        pos[j] = (int)i;
    if (nd->fc.flags & NNT_LF_VIEW) { /* the model input itself, or its producer's slot */
      r->slot[j] = pos[j] < 0 ? -1 : r->slot[pos[j]];
    } else if ((nd->fc.flags & NNT_LF_INPLACE) && pos[j] >= 0 && r->slot[pos[j]] >= 0 &&
               last[pos[j]] == j) {
      r->slot[j] = r->slot[pos[j]];
    } else {
      int s = -1;
      for (unsigned t = 0; t < ns && s < 0; t++)
        if (owner_last[t] < j)
          s = (int)t;
      if (s < 0)
        s = (int)ns++;
      r->slot[j] = s;
    }
    if (r->slot[j] >= 0)
      owner_last[r->slot[j]] = last[j];
    if (nd->fc.n_scratch && is_conv(nd)) {
      size_t s0 = nnt_dim_len(nd->fc.scratch_dim[0]);
      scratch = scratch > s0 ? scratch : s0;
    }
  }
  r->slot_floats = align_up(floats);
  r->n_slots = ns;
  r->scratch_floats = scratch;
}

unsigned nnt_rerun_readers(const nnt_model *m, unsigned p, unsigned o) {
  unsigned n = m->nodes[p].n_consumers[o];
  for (unsigned i = 0; i < m->n_reruns; i++) {
    const nnt_node *a = &m->nodes[m->reruns[i].node];
    unsigned k = m->reruns[i].k;
    if (a->in_node[k] == p && a->in_idx[k] == o && n)
      n--;
  }
  return n;
}

void nnt_rerun_clear(nnt_model *m) {
  for (unsigned i = 0; i < m->n_reruns; i++)
    m->nodes[m->reruns[i].node].rerun = 0;
  nnt_free(m->reruns);
  m->reruns = NULL;
  m->n_reruns = 0;
  m->rerun_flops = 0;
}

/* Make m->reruns the candidates whose bit is set in use. */
static void apply(nnt_model *m, const nnt_rerun *cand, const unsigned char *use, size_t n) {
  for (unsigned i = 0; i < m->n_reruns; i++)
    m->nodes[m->reruns[i].node].rerun = 0;
  m->n_reruns = 0;
  m->rerun_flops = 0;
  for (size_t c = 0; c < n; c++) {
    if (!use[c])
      continue;
    m->reruns[m->n_reruns] = cand[c];
    m->nodes[cand[c].node].rerun = ++m->n_reruns;
    m->rerun_flops += cand[c].flops;
  }
}

int nnt_forward_rework_ok(const nnt_model *m) {
  return m->memory_optimization && !m->keep_outputs && m->n_nodes &&
         m->be == nnt_backend_cpu() && m->be->buft->is_host(m->be->buft);
}

typedef struct rerun_choice {
  const nnt_rerun *cand;
  size_t n;
} rerun_choice;

static void apply_choice(nnt_model *m, void *arg, const unsigned char *use) {
  const rerun_choice *ch = arg;
  apply(m, ch->cand, use, ch->n);
}

/* The dearest candidate still in use (n: none). */
static size_t dearest(void *arg, const unsigned char *use) {
  const rerun_choice *ch = arg;
  size_t drop = ch->n;
  for (size_t c = 0; c < ch->n; c++)
    if (use[c] && (drop == ch->n || ch->cand[c].flops > ch->cand[drop].flops))
      drop = c;
  return drop;
}

int nnt_keep_if_smaller(nnt_model *m, size_t n, unsigned char *use, unsigned char *best,
                        nnt_choice_fn apply_fn, size_t (*next)(void *, const unsigned char *),
                        void *arg, nnt_err *e) {
  size_t base, total;
  int rc = nnt_model_train_total(m, &base, e);
  if (!rc) {
    apply_fn(m, arg, use);
    rc = nnt_model_train_total(m, &total, e);
  }
  if (rc)
    return rc;
  if (total >= base) {
    memset(use, 0, n);
    apply_fn(m, arg, use);
    return NNT_OK;
  }
  memcpy(best, use, n);
  for (size_t drop; (drop = next(arg, use)) < n;) {
    use[drop] = 0; /* tried */
    best[drop] = 0;
    apply_fn(m, arg, best);
    size_t t;
    if ((rc = nnt_model_train_total(m, &t, e)))
      return rc;
    if (t > total)
      best[drop] = 1;
    else
      total = t;
  }
  memcpy(use, best, n);
  apply_fn(m, arg, use);
  return NNT_OK;
}

int nnt_rerun_choose(nnt_model *m, nnt_err *e) {
  if (m->reruns_done)
    return NNT_OK;
  m->reruns_done = 1;
  nnt_rerun_clear(m);
  if (!nnt_forward_rework_ok(m))
    return NNT_OK;
  size_t n = m->n_nodes, nc = 0;
  nnt_rerun *cand = nnt_calloc(n, sizeof *cand);
  unsigned char *mem = nnt_calloc(3 * n, 1);
  if (!cand || !mem) {
    nnt_free(cand);
    nnt_free(mem);
    return nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory choosing reruns");
  }
  unsigned char *in_chain = mem, *use = mem + n, *best = mem + 2 * n;
  double fwd = 0;
  for (size_t i = 0; i < n; i++)
    fwd += nnt_recompute_node_flops(m, i);
  for (size_t a = 0; a < n; a++) {
    const nnt_node *an = &m->nodes[a];
    if (strcmp(an->layer->ops->type, "addition") || an->n_in != 2 || an->do_grad ||
        an->do_deriv)
      continue;
    /* the input made first lives longest */
    unsigned p0 = an->in_node[0], p1 = an->in_node[1];
    if (p0 == NNT_NO_NODE || p1 == NNT_NO_NODE || p0 == p1)
      continue;
    unsigned k = p0 < p1 ? 0 : 1;
    if (build_chain(m, (unsigned)a, k, in_chain, &cand[nc])) {
      assign_slots(m, &cand[nc]);
      nc += nnt_rerun_floats(&cand[nc]) <= UINT_MAX; /* a region's dim */
    }
  }
  /* the cheapest first, within the share */
  double spent = 0, share = m->rerun_share > 0 ? m->rerun_share : RERUN_SHARE;
  while (1) {
    size_t pick = nc;
    for (size_t c = 0; c < nc; c++)
      if (!use[c] && spent + cand[c].flops <= share * fwd &&
          (pick == nc || cand[c].flops < cand[pick].flops))
        pick = c;
    if (pick == nc)
      break;
    use[pick] = 1;
    spent += cand[pick].flops;
  }
  int rc = NNT_OK, any = 0;
  for (size_t c = 0; c < nc; c++)
    any |= use[c];
  m->reruns = any ? nnt_calloc(nc, sizeof *m->reruns) : NULL;
  if (any && !m->reruns)
    rc = nnt_err_set(e, NNT_ERR_NOMEM, "compile: out of memory choosing reruns");
  rerun_choice ch = {cand, nc};
  if (!rc && any)
    rc = nnt_keep_if_smaller(m, nc, use, best, apply_choice, dearest, &ch, e);
  if (rc || !m->n_reruns)
    nnt_rerun_clear(m);
  nnt_free(cand);
  nnt_free(mem);
  return rc;
}

/* An image-sized view of image b of t (of dim d, b images). */
static nnt_tensor image_view(const nnt_tensor *t, unsigned b) {
  nnt_tensor v = *t;
  size_t per = image_floats(t->dim);
  v.dim.b = 1;
  v.data = t->data ? t->data + (size_t)b * per : NULL;
  return v;
}

static nnt_tensor slot_view(const nnt_rerun *r, float *region, int slot, nnt_dim d) {
  nnt_tensor v = {.dim = d, .data = region + (size_t)slot * r->slot_floats, .buf = NULL};
  v.dim.b = 1;
  return v;
}

int nnt_rerun_forward(nnt_model *m, nnt_node *an) {
  const nnt_rerun *r = &m->reruns[an->rerun - 1];
  nnt_tensor region = nnt_mgr_bind(&m->mgr[NNT_MODE_TRAIN], an->t_rerun,
                                   nnt_dim_make(1, 1, 1, (unsigned)nnt_rerun_floats(r)));
  if (!region.data)
    return NNT_ERR_INVAL;
  float *scr = region.data + r->n_slots * r->slot_floats;
  unsigned batch = an->out[0].dim.b;
  nnt_tensor in[NNT_MAX_IO], out, scratch[NNT_MAX_SCRATCH], val[NNT_RERUN_MAX];
  for (unsigned b = 0; b < batch; b++) {
    for (unsigned j = 0; j <= r->n; j++) {
      nnt_node *nd = j < r->n ? &m->nodes[r->chain[j]] : an;
      for (unsigned q = 0; q < nd->n_in; q++) {
        unsigned p = nd->in_node[q];
        int at = -1;
        for (unsigned i = 0; i < (j < r->n ? j : r->n) && p != NNT_NO_NODE; i++)
          if (r->chain[i] == p)
            at = (int)i;
        in[q] = at >= 0 ? val[at] : image_view(&nd->in[q], b);
      }
      if (j == r->n) { /* the addition of this image */
        out = image_view(&an->out[0], b);
      } else if (r->slot[j] < 0) { /* a view of the model input */
        val[j] = in[0];
        continue;
      } else {
        out = slot_view(r, region.data, r->slot[j], nd->fc.out_dim[0]);
      }
      for (unsigned c = 0; c < nd->fc.n_scratch; c++) {
        scratch[c].dim = nd->fc.scratch_dim[c];
        scratch[c].data = NULL;
        scratch[c].buf = NULL;
      }
      if (j < r->n && nd->fc.n_scratch && r->scratch_floats && is_conv(nd))
        scratch[0].data = scr;
      nnt_run_ctx ctx = nd->ctx;
      ctx.in = in;
      ctx.out = &out;
      ctx.scratch = scratch;
      ctx.d_in = ctx.d_out = NULL;
      ctx.training = 1;
      ctx.recompute = 0;
      ctx.whole = j < r->n ? &nd->ctx : NULL;
      int rc = nd->layer->ops->forward(nd->layer, &ctx);
      if (rc)
        return rc;
      if (j < r->n)
        val[j] = out;
    }
  }
  return NNT_OK;
}
