/* The schedule: the one list of steps a mode runs, in order. Graph compile
 * builds it; the planner takes every lifetime from it (a step's index is
 * its execution order) and the training loop walks it. Inserting a step
 * (recomputation, accumulation) is an edit of this list only. */
#include "nntrainer/model_impl.h"
#include "nntrainer/compute/kernels.h"

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

/* The bytes of a block of a gradient applied as it is made, at most (but
 * FUSED_ROWS rows at least, and enough for two compute threads where the
 * whole product has that: fused_rows): 64 KiB. The Fashion-MNIST MLP's
 * fc1 gradient (784 x 256) at batch 64 in blocks of 144 rows, at batch 1
 * of 48 (docs/memory.md, "Updates fused with the gradient"). */
#define FUSED_BLOCK_BYTES 65536
/* Blocks are a multiple of this many rows: a product of a block of rows
 * on gemm_rows then gives each value the bits of the whole product on
 * OpenBLAS 0.3.21's x86-64 kernels, measured: its AVX2 ones (Haswell, Zen)
 * compute rows in runs of 24, so blocks of 16, 32, 64 or 128 rows changed
 * bits of every product tried and multiples of 24 none; its AVX-512, AVX
 * and SSE ones none at any multiple of 8 (nnt_cpu_blas_row_quantum). 48
 * is also a multiple of every other run length 16 or below. */
#define FUSED_ROWS NNT_GEMM_ROW_BLOCK

/* Rows of a block of node i's weight w when its update follows each block
 * inside calc_gradient, so that the whole gradient never exists; 0 when
 * the gradient stays whole: the layer cannot (grad_tiles), the weight does
 * not train here, it is shared (its gradients are summed) or regularized
 * (l2norm and weight decay read the weight's gradient whole in train.c),
 * clip_grad_by_norm needs every gradient before any update, the backend
 * is not the CPU's or the state not in host memory, the CPU's products
 * may give a block of rows other bits than the whole product (OpenBLAS's
 * kernels on a core whose row quantum, nnt_cpu_blas_row_quantum, was not
 * measured; the results would then differ from memory_optimization=false's
 * in their last bits: the layer makes both on gemm_rows, which cuts rows
 * at that quantum only), a block would be the whole gradient, or
 * memory_optimization=false keeps every tensor. */
static unsigned fused_rows(const nnt_model *m, size_t i, unsigned w) {
  const nnt_node *nd = &m->nodes[i];
  const nnt_buffer_type *st = m->be ? nnt_model_state_buft(m) : NULL;
  if (!m->memory_optimization || m->fuse_off || m->clip_grad_norm > 0 || !m->opt || !m->be ||
      m->be != nnt_backend_cpu() || !nnt_cpu_blas_row_quantum() ||
      FUSED_ROWS % nnt_cpu_blas_row_quantum() || !st->is_host(st) ||
      !nd->do_grad || nd->grad_sum != i || nd->grad_apply != i ||
      !(nd->fc.grad_tiles >> w & 1u) || !nd->fc.w[w].trainable)
    return 0;
  const nnt_weight_spec *s = &m->wspec[nd->w_first + w];
  size_t width = nd->fc.w[w].dim.w, rows = nd->fc.w[w].dim.h, b = nd->fc.w[w].dim.b;
  if (s->l2 > 0 || s->decay > 0 || b != 1 || nd->fc.w[w].dim.c != 1 || !width)
    return 0;
  size_t per = FUSED_BLOCK_BYTES / sizeof(float) / width / FUSED_ROWS * FUSED_ROWS;
  if (per < FUSED_ROWS)
    per = FUSED_ROWS;
  /* a product over the input's rows (k): where the whole one splits over
   * two compute threads, so does a block (else the gradient would run on
   * one thread: the benchmark MLP at two threads took 0.70-0.75 -> 0.88-0.91
   * ms a step with blocks of 48 rows). Every block is then a product and
   * an update on the threads: on a Zen 2 at two threads the MLP's step took
   * 0.92 ms with whole gradients and 0.99-1.07 with its blocks of 144 rows,
   * 0.94-0.96 with blocks of 288; the larger blocks would add 144 KiB to
   * the plans where blocks were fused before (AVX-512), so not taken */
  nnt_dim in = nd->fc.in_dim[0];
  size_t k = (size_t)in.b * in.c * in.h, two = 2 * NNT_CPU_GEMM_MIN_PART;
  size_t least = nnt_gemm_rows_least(rows, width, k); /* the whole product's bits */
  per = per > least ? per : least;
  if (k && rows * width * k >= two) {
    size_t need = (two + width * k - 1) / (width * k);
    need = (need + FUSED_ROWS - 1) / FUSED_ROWS * FUSED_ROWS;
    per = per > need ? per : need;
  }
  /* a fused node runs its derivative first (it reads the weight before
   * the blocks update it), so its input's derivative then lives beside
   * its input: where that is larger than the gradient's rows a block
   * leaves out, the plan would grow (Applications/CharLM/lstm.ini's
   * output layer, a 2.75 MiB derivative for 192 KiB of gradient: arena
   * 15.00 -> 15.49 MiB) */
  if (per >= rows || (nd->do_deriv && nnt_dim_len(in) > (rows - per) * width))
    return 0;
  return (unsigned)per;
}

/* Training: every node forwards in graph order; then, walking back from
 * the last node, each node that has backward work has three steps:
 * calc_gradient, calc_derivative and apply_gradient (one of them may do
 * nothing, e.g. calc_gradient of a layer without weights; a node with a
 * weight updated block by block inside calc_gradient, fused_rows, or with
 * scratch for calc_derivative alone, NNT_SCRATCH_DERIV, runs
 * calc_derivative first); a node without
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
  for (size_t i = 0; i < n; i++)
    for (unsigned w = 0; w < NNT_MAX_WEIGHTS; w++)
      m->nodes[i].gtile[w] = w < m->nodes[i].fc.n_w ? fused_rows(m, i, w) : 0;
  for (size_t i = 0; i < n; i++) {
    tr[s++] = (nnt_step){(unsigned)i, NNT_STEP_FORWARD};
    inf[i] = ev[i] = (nnt_step){(unsigned)i, NNT_STEP_FORWARD};
  }
  for (size_t i = n; i-- > 0;) {
    const nnt_node *nd = &m->nodes[i];
    if (!has_backward(m, i))
      continue;
    unsigned deriv_first = 0;
    for (unsigned w = 0; w < nd->fc.n_w; w++)
      deriv_first |= nd->gtile[w];
    /* a fused update changes weights that calc_derivative reads: it runs
     * first there; so it does where it has scratch of its own
     * (NNT_SCRATCH_DERIV), which then never lies beside the gradients */
    for (unsigned c = 0; nd->do_deriv && c < nd->fc.n_scratch; c++)
      deriv_first |= nd->fc.scratch_life[c] == NNT_SCRATCH_DERIV;
    if (deriv_first)
      tr[s++] = (nnt_step){(unsigned)i, NNT_STEP_CALC_DERIVATIVE};
    tr[s++] = (nnt_step){(unsigned)i, NNT_STEP_CALC_GRADIENT};
    if (accumulates(m, i))
      tr[s++] = (nnt_step){(unsigned)i, NNT_STEP_ACCUMULATE_GRADIENT};
    if (!deriv_first)
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
