/* Private: the model's and the compiled graph's structures. */
#ifndef NNT_MODEL_IMPL_H
#define NNT_MODEL_IMPL_H

#include <limits.h>
#include "nntrainer/model.h"
#include "manager/manager.h"
#include "nntrainer/compute/backend.h"
#include "nntrainer/name_index.h"

#define NNT_NO_NODE UINT_MAX

typedef enum nnt_loss_kind {
  NNT_LOSS_NONE = 0,
  NNT_LOSS_MSE,
  NNT_LOSS_CROSS,         /* softmax or sigmoid, by the last activation */
  NNT_LOSS_CROSS_SOFTMAX,
  NNT_LOSS_CROSS_SIGMOID,
} nnt_loss_kind;

/* The [Model] loss value of a kind ("cross"); NULL for a bad value. */
const char *nnt_loss_name(nnt_loss_kind k);

/* How a consumer's derivative reaches its producer's output. */
typedef enum nnt_dmode {
  /* the consumer writes the producer's d_out itself: the only consumer,
   * or with memory_optimization a fan-out's first in backward order */
  NNT_D_DIRECT = 0,
  NNT_D_COPY, /* fan-out, memory_optimization=false: the first, copied in */
  NNT_D_ADD,  /* fan-out: a later consumer: a temporary, added in */
  NNT_D_ACCUM, /* fan-out: a later consumer that adds into the sum (NNT_LF_DERIV_ADDS) */
} nnt_dmode;

/* What a step of the schedule runs. */
typedef enum nnt_step_kind {
  NNT_STEP_NONE = 0,        /* holds its place in the numbering; runs nothing */
  NNT_STEP_FORWARD,         /* the node's forward (a loss layer adds its loss) */
  NNT_STEP_CALC_GRADIENT,   /* dW, regularization, the gradients' finite check */
  NNT_STEP_CALC_DERIVATIVE, /* dX; fan-out: copy or add it into the producer's sum */
  NNT_STEP_APPLY_GRADIENT,  /* the optimizer update of the node's weights */
  NNT_STEP_CLIP_APPLY,      /* clip_grad_by_norm: scale every gradient, update all */
  /* shared weights: add the node's weight gradients into the summed
   * gradients (those of node grad_sum) */
  NNT_STEP_ACCUMULATE_GRADIENT,
  NNT_STEP__COUNT
} nnt_step_kind;

/* One step: a kind and its node (NNT_NO_NODE for the steps of no node).
 * Its index in the schedule is the execution order of the plan. */
typedef struct nnt_step {
  unsigned node;
  nnt_step_kind kind;
} nnt_step;

/* One node of the compiled graph, in execution (topological) order. */
typedef struct nnt_node {
  nnt_layer *layer;
  unsigned n_in;
  unsigned in_node[NNT_MAX_IO];   /* producer node, or NNT_NO_NODE */
  unsigned in_idx[NNT_MAX_IO];    /* producer's output, or model input index */
  unsigned n_consumers[NNT_MAX_IO]; /* per output */
  nnt_finalize_ctx fc;
  /* its weights are m->w[w_first .. w_first + n_w): its own, or with
   * shared_from those of the weights' owner, which every node sharing them
   * points at (a layer shares all its weights, so the range is whole) */
  size_t w_first;
  unsigned n_w;
  unsigned w_owner;               /* the node that owns its weights (itself) */
  /* weight sharing (itself when the node shares nothing): grad_sum is the
   * node whose gradients hold the summed gradient of the weights (the
   * first that computes one in backward order); grad_apply the node whose
   * apply_gradient step updates them (the last sharer in backward order) */
  unsigned grad_sum, grad_apply;
  int do_grad;                    /* calc_gradient runs */
  int do_deriv;                   /* calc_derivative runs */
  int needs_d;                    /* some ancestor or itself trains: d_out wanted */
  int inplace;                    /* out[0] shares in[0] (in-place or view) */
  unsigned label_idx;             /* loss nodes: which label stream */
  /* tensor ids in the current plan (-1: none) */
  int t_in[NNT_MAX_IO], t_out[NNT_MAX_IO];
  int t_din[NNT_MAX_IO], t_dout[NNT_MAX_IO];
  nnt_dmode dmode[NNT_MAX_IO];
  int t_dsum[NNT_MAX_IO];         /* fan-out: the producer's d_out */
  int t_gw[NNT_MAX_WEIGHTS];
  /* rows of a block of weight w's gradient where its update follows each
   * block inside calc_gradient (schedule.c, fused_rows), else 0 */
  unsigned gtile[NNT_MAX_WEIGHTS];
  int t_scratch[NNT_MAX_SCRATCH];
  int t_label;
  int t_loss;                     /* loss nodes: the 1-float loss value */
  /* memory_budget (recompute.c): the node's forward runs again in the
   * backward pass (how often: the recompute steps of the schedule) */
  int recompute;
  /* its recompute steps run forward_saved: the output from what forward
   * kept (the default plan's cheap recomputation, recompute.c) */
  int recompute_saved;
  /* keep_less where a consumer reads the output in its backward too
   * (keep_less.c): 1 a candidate, 2 applied; the flags and scratch count to
   * go back to */
  int less_cand;
  unsigned less_flags, less_scratch;
  /* rerun.c: 1 + the index in m->reruns of the input this addition
   * computes again image by image (0: none), and in the training plan the
   * region that holds those images (-1: none) */
  unsigned rerun;
  int t_rerun;
  /* delay.c: on an addition, 1 + the index in m->delays of the branch its
   * training forward step runs first (0: none); on each node of that
   * branch, the same (its own step runs nothing, or the copy); on the
   * branch's convolution, the copy's tensor in the training plan (-1:
   * none) */
  unsigned delay, delayed;
  int t_gather;
  /* run context, bound to the current plan */
  nnt_tensor in[NNT_MAX_IO], out[NNT_MAX_IO], din[NNT_MAX_IO], dout[NNT_MAX_IO];
  nnt_tensor gw[NNT_MAX_WEIGHTS], scratch[NNT_MAX_SCRATCH], label, loss;
  nnt_run_ctx ctx;
} nnt_node;

/* The shape of node nd's gradient tensor of weight w: the weight's, or one
 * block of gtile[w] rows where the update follows each block. */
static inline nnt_dim nnt_grad_dim(const nnt_node *nd, unsigned w) {
  nnt_dim d = nd->fc.w[w].dim;
  if (nd->gtile[w])
    d.h = nd->gtile[w];
  return d;
}

/* The optimizer's update of values [off, off + n) of weight wi (and of its
 * state) from their gradient g (train.c). */
int nnt_model_apply_range(nnt_model *m, size_t wi, size_t off, size_t n, const float *g);

/* calc_gradient of node nd (training, do_grad) where some weight's update
 * follows each block of its gradient (fused_update.c), with check_finite's
 * guarantee that no value that is not finite is applied. */
int nnt_fused_gradient(nnt_model *m, nnt_node *nd, nnt_err *e);

/* Is some weight of node nd updated block by block in its calc_gradient? */
static inline int nnt_node_fused(const nnt_node *nd) {
  for (unsigned w = 0; w < nd->fc.n_w; w++)
    if (nd->gtile[w])
      return 1;
  return 0;
}

/* An addition's input that its training forward computes again, image by
 * image, from the model's inputs (rerun.c), so that the tensor need not
 * live from where it was made to the addition. */
#define NNT_RERUN_MAX 24
typedef struct nnt_rerun {
  unsigned node;                  /* the addition */
  unsigned k;                     /* its input computed again */
  unsigned n;                     /* the nodes that compute it, in order */
  unsigned chain[NNT_RERUN_MAX];
  /* each one's output image: a slot of the region, or -1 where the node
   * is a view of the model input */
  int slot[NNT_RERUN_MAX];
  size_t slot_floats, n_slots;    /* slots of one image each */
  size_t scratch_floats;          /* after them: a convolution's scratch 0 */
  double flops;                   /* per step */
} nnt_rerun;

/* The floats of a rerun's region: its slots, then the scratch. */
static inline size_t nnt_rerun_floats(const nnt_rerun *r) {
  return r->n_slots * r->slot_floats + r->scratch_floats;
}

/* A branch into an addition that runs at the addition's training forward
 * step, from a copy of what its first node (a convolution) reads of its
 * input, made at that node's own step (delay.c). */
#define NNT_DELAY_MAX 4
typedef struct nnt_delay {
  unsigned node;                 /* the addition */
  unsigned k;                    /* its input the branch makes */
  unsigned n;                    /* the branch's nodes in order, the convolution first */
  unsigned chain[NNT_DELAY_MAX];
} nnt_delay;

/* The copy's shape: the convolution's input channels at its output's size. */
static inline nnt_dim nnt_delay_dim(const nnt_node *conv) {
  return nnt_dim_make(conv->fc.in_dim[0].b, conv->fc.in_dim[0].c, conv->fc.out_dim[0].h,
                      conv->fc.out_dim[0].w);
}

/* delay.c: choose the delays of the training plan (after the reruns); the
 * training forward step of a node with one (nnt_node_forward); the chosen
 * ones dropped. */
int nnt_delay_choose(nnt_model *m, nnt_err *e);
int nnt_delay_forward(nnt_model *m, nnt_node *nd);
void nnt_delay_clear(nnt_model *m);

/* rerun.c: whether the training forward may compute a layer again or
 * later (reruns, delays): memory_optimization on, no output kept for the caller,
 * the CPU's host memory (the borrowed inputs and the image views of rerun.c
 * read it directly). */
int nnt_forward_rework_ok(const nnt_model *m);

/* The reruns' and the delays' rule (rerun.c): the candidates set in
 * use[n] against none, by the training plan's total (nnt_model_train_total);
 * where they shrink it, each is dropped again in turn (next names the next
 * one still set, n when none) where the plan is no larger without it;
 * else none. apply makes a choice the model's; the kept one ends applied
 * and in use. best: n bytes of scratch. */
typedef void (*nnt_choice_fn)(nnt_model *m, void *arg, const unsigned char *use);
int nnt_keep_if_smaller(nnt_model *m, size_t n, unsigned char *use, unsigned char *best,
                        nnt_choice_fn apply, size_t (*next)(void *arg, const unsigned char *use),
                        void *arg, nnt_err *e);

/* rerun.c: choose the reruns of the training plan (after the default
 * recomputation); the forward of a node that has one; the chosen ones
 * dropped. */
int nnt_rerun_choose(nnt_model *m, nnt_err *e);
int nnt_rerun_forward(nnt_model *m, nnt_node *nd);
/* The forward a training, evaluation or inference step of nd runs, its
 * ctx set: the layer's, or a recompute step's from what forward kept
 * (recompute_saved), or an addition's with its rerun (recompute.c). */
int nnt_node_forward(nnt_model *m, nnt_node *nd);
void nnt_rerun_clear(nnt_model *m);
/* How many layers read output o of node p in the training forward: its
 * consumers, less the additions that compute it again instead. */
unsigned nnt_rerun_readers(const nnt_model *m, unsigned p, unsigned o);

/* The plans: training (forward, loss, backward, update); inference (the
 * forward steps, no label and no loss value: loss layers give their output
 * only); evaluation (the forward steps with the labels and the loss
 * values: what evaluate needs outside a training run). */
typedef enum nnt_mode {
  NNT_MODE_TRAIN = 0,
  NNT_MODE_INFER = 1,
  NNT_MODE_EVAL = 2,
} nnt_mode;
#define NNT_MODE__COUNT 3

struct nnt_model {
  /* as built */
  nnt_layer **layers;
  size_t n_layers, cap_layers;
  nnt_name_index layer_names; /* name -> index in layers (names borrowed) */
  nnt_optimizer *opt;
  nnt_dataset *ds[3];
  /* [Model] properties */
  unsigned epochs, batch;
  nnt_loss_kind loss;
  char *save_path;          /* resolved against base_dir */
  int continue_train;
  int memory_optimization;
  /* tests only: 1 leaves every layer's backward reads as its finalize
   * declared them (no keep_less), to compare both ways bit for bit */
  int keep_outputs;
  /* tests only: 1 computes every weight gradient whole before its update
   * (no blocks of rows fused with the update: schedule.c), to compare */
  int fuse_off;
  /* tests only: the share of the forward's FLOPs that reruns may add
   * (rerun.c; 0: RERUN_SHARE), for models too small for the default */
  double rerun_share;
  int plan_quick; /* nnt_model_train_total: plans without best fit's order search */
  float clip_grad_norm;     /* 0: off */
  uint64_t seed;
  int seed_set;
  nnt_planner_kind planner;
  uint64_t memory_budget;   /* bytes; 0: no limit */
  int load_on_init;         /* load_weights: load save_path at initialize */
  nnt_engine engine;        /* engine: selects m->be at compile */
  int engine_set;           /* engine given (written back by the INI writer) */
  char *gpu_device;         /* gpu_device: the Vulkan device (index or name); NULL: chosen */
  char *base_dir;
  /* compiled */
  int compiled, initialized;
  nnt_layer **realized;     /* layers the compile added (activation, loss) */
  size_t n_realized;
  nnt_node *nodes;
  size_t n_nodes;
  nnt_step *sched[NNT_MODE__COUNT]; /* per mode (nnt_mode): the steps in order */
  unsigned n_steps[NNT_MODE__COUNT];
  /* profiling (profile.c): seconds per step of each mode's schedule
   * (prof_len steps), its iterations begun */
  int prof_on;
  double *prof_s[NNT_MODE__COUNT];
  unsigned prof_len[NNT_MODE__COUNT], prof_runs[NNT_MODE__COUNT];
  unsigned n_inputs, n_labels;
  nnt_dim input_dim[NNT_DS_MAX_STREAMS], label_dim[NNT_DS_MAX_STREAMS];
  /* weights (allocated at initialize), in save order: request i of wmgr */
  size_t n_w;
  nnt_weight_spec *wspec;
  nnt_tensor *w;
  unsigned *w_node;         /* the node at whose position the weight is saved */
  size_t weight_bytes;      /* all weights, checked at compile */
  nnt_mgr wmgr;             /* the weight pool: NNT_TK_WEIGHT requests */
  nnt_buffer *wbuf;         /* wmgr's arena, a buffer of the backend */
  float *wpool;             /* its base address (in the backend's space) */
  size_t wpool_floats;
  /* optimizer state, allocated at the first training step, for the
   * weights that train only (nnt_model_weight_trains): slot s of weight i
   * at opt_pool + s * opt_stride + opt_off[i] (opt_off[i] is SIZE_MAX for
   * a weight without state); one slot packs those weights in save order */
  nnt_mgr omgr;             /* NNT_TK_OPT_STATE: slot s of each weight that trains */
  size_t *opt_off;          /* n_w offsets in floats (plan.c), or NULL */
  size_t opt_stride;        /* nnt_model_opt_stride(m, opt_slots) */
  nnt_buffer *obuf;         /* omgr's arena */
  float *opt_pool;          /* obuf's base address */
  unsigned opt_slots;
  /* one float of the backend's memory for a scalar the core reads back
   * (the correct predictions of a batch, a gradient's squared norm),
   * allocated at first use */
  nnt_buffer *sbuf;
  nnt_tensor scalar;
  /* per-mode plans */
  nnt_mgr mgr[NNT_MODE__COUNT];
  int bound_mode;           /* which plan the nodes' contexts point into; -1 */
  /* recomputation (recompute.c): how many nodes recompute, their extra
   * FLOPs per step, and for the training plan the ids each step binds
   * (NNT_STEP_IDS per step: inputs, outputs, scratch), n_alt steps */
  unsigned n_recompute;
  double recompute_flops;
  /* the default plan's cheap recomputation was chosen (recompute.c
   * nnt_recompute_default); reset by compile */
  int recompute_default_done;
  /* keep_less's candidates whose consumers read the output too were
   * chosen (keep_less.c nnt_graph_keep_less_choose); reset by compile */
  int keep_less_done;
  unsigned char *cheap; /* its chains: 2 a head, 1 the rest, 0 none; NULL */
  /* inputs of additions computed again image by image in the training
   * forward (rerun.c), chosen once per compile */
  struct nnt_rerun *reruns;
  unsigned n_reruns;
  int reruns_done;
  /* the branches run at their addition's step (delay.c), chosen with them */
  struct nnt_delay *delays;
  unsigned n_delays;
  int delays_done;
  double rerun_flops;
  /* bytes the training plan left free under memory_budget for the
   * datasets' queues when it was made (plan.c queue_reserve) */
  size_t budget_reserve;
  int *alt;
  size_t n_alt;
#define NNT_STEP_IDS (2 * NNT_MAX_IO + NNT_MAX_SCRATCH)
  int input_t[NNT_DS_MAX_STREAMS], label_t[NNT_DS_MAX_STREAMS]; /* label_t: -1 in inference */
  /* counters */
  unsigned epoch_idx;       /* epochs done */
  unsigned iter;            /* iterations done */
  nnt_backend *be;          /* computes every op and owns every buffer */
  /* where the weights and the optimizer state live; NULL: be->buft (the
   * arenas are always be->buft) */
  const nnt_buffer_type *state_buft;
  const nnt_kernels *k;     /* be->k */
  int poison;
  int keep_train_arena;     /* keep the training arena after training */
  /* faults (train_check.c) */
  int check_finite;         /* [Model] check_finite (ours, default 1) */
  atomic_int stop;          /* nnt_model_request_stop: a run should stop */
  float *state_copy;        /* check_finite: moving statistics before a step */
  size_t state_floats;
  /* check_finite on a backend with steps (train_check.c): flags in the
   * backend's memory, read once when the step ends: [0] any, [1] the loss
   * or a moving statistic, [2 + i] weight i's gradient; then a copy of
   * the moving statistics. skip: &flags[0] while a step runs (the
   * optimizer's updates do nothing once it is set), NULL otherwise. */
  nnt_buffer *cbuf;
  float *chost;             /* the flags, read back */
  const float *skip;
  /* read back when a step ends: each node's loss, the accuracy count */
  float *loss_host;
  float acc_host;
};

/* model.c: make be the model's backend (m->be, and m->k = be->k), freeing
 * the one it had (nnt_backend_free). Before compile only: the model's
 * buffers are the backend's (NNT_ERR_INVAL after). Compile keeps it when
 * its engine (be->engine, or its name when that is NULL) is the model's
 * ("cpu"), so a backend set here for the engine (a test's) is the one
 * compile checks and runs on; otherwise
 * compile replaces it with nnt_backend_get's. The model owns be. */
int nnt_model_set_backend(nnt_model *m, nnt_backend *be, nnt_err *e);
/* The buffer type of the weights and the optimizer state. */
static inline const nnt_buffer_type *nnt_model_state_buft(const nnt_model *m) {
  return m->state_buft ? m->state_buft : m->be->buft;
}

/* Keep the weights and optimizer state in buffers of state_buft (NULL: the
 * backend's) while the backend's buffer type holds the arenas. Only before
 * compile: NNT_ERR_INVAL after. Tests use it to keep the state off the
 * host while the CPU kernels compute (test_nonhost.c). */
int nnt_model_set_state_buffer_type(nnt_model *m, const nnt_buffer_type *state_buft,
                                    nnt_err *e);

/* plan.c: whether weight i has optimizer state (and a gradient): the node
 * that holds its gradient sum trains it. Frozen weights have none. */
int nnt_model_weight_trains(const nnt_model *m, size_t i);
/* plan.c: floats from one slot of optimizer state to the next, for
 * `slots` slots: one slot's size (the weights that train, packed; without
 * a chunk the sum of their sizes); with a chunk, rounded up to whole
 * chunks unless all the slots fit in one, so every slot's tensors lie
 * inside chunks as the weights do. */
size_t nnt_model_opt_stride(const nnt_model *m, unsigned slots);
/* The optimizer state's bytes for `slots` slots, gaps included. */
size_t nnt_model_opt_bytes(const nnt_model *m, unsigned slots);

/* Slot s of weight i's optimizer state as a tensor of the state buffer
 * (i must have state: nnt_model_weight_trains):
 * it starts at opt_pool + s * opt_stride + opt_off[i].
 * Only an address: it is reached through tensor_host.h or
 * nnt_tensor_get/set. */
static inline nnt_tensor nnt_model_state_tensor(const nnt_model *m, unsigned s, size_t i) {
  nnt_tensor t = {.dim = m->wspec[i].dim, .buf = m->obuf};
  t.data = m->opt_pool + s * m->opt_stride + m->opt_off[i];
  return t;
}

/* graph.c */
int nnt_graph_compile(nnt_model *m, nnt_err *e);
/* share.c: resolve shared_from and build the weight table (m->n_w, wspec,
 * w, w_node; each node's w_first, n_w, w_owner, grad_sum, grad_apply),
 * after finalize and after do_grad is known. A shared weight is in the
 * table once, at the position NNTrainer saves it (share.c). */
int nnt_graph_weights(nnt_model *m, nnt_err *e);
/* The kernel ops the core calls for this compiled model besides its
 * layers' (the optimizer's step, the sums of fan-out derivatives, the
 * regularizers, clip_grad_by_norm), as NNT_KOP_BIT(...)s. */
uint64_t nnt_graph_core_kops(const nnt_model *m);
void nnt_graph_free(nnt_model *m);
/* Finalize the compiled graph again for another batch size (shapes and
 * scratch change, weights do not). On failure the model keeps its batch. */
int nnt_graph_set_batch(nnt_model *m, unsigned batch, nnt_err *e);
/* schedule.c */
const char *nnt_step_kind_name(nnt_step_kind k);
/* "training", "inference", "evaluation". */
const char *nnt_mode_name(nnt_mode mode);
/* The training, inference and evaluation schedules of the compiled graph. */
int nnt_schedule_build(nnt_model *m, nnt_err *e);
void nnt_schedule_free(nnt_model *m);
/* The steps of the forward pass: the leading forward steps. */
unsigned nnt_schedule_forward_end(const nnt_model *m, nnt_mode mode);
/* Insert step at index at of mode's schedule (steps from at move one
 * later) and release that mode's plan, which plans again from the new
 * schedule when it next runs. NNT_ERR_INVAL for a bad index or node. */
int nnt_schedule_insert(nnt_model *m, nnt_mode mode, unsigned at, nnt_step step, nnt_err *e);
/* plan_touch.c: every request's first and last step from the mode's
 * schedule (the batch written before step 0, the model's outputs and loss
 * values read after the forward pass). */
int nnt_plan_touch_steps(nnt_model *m, nnt_mode mode, nnt_mgr *g, nnt_err *e);
/* plan.c: build the requests of a mode, plan them, allocate the arena and
 * bind node contexts. */
int nnt_model_plan(nnt_model *m, nnt_mode mode, nnt_err *e);
/* The same plan without its memory (what `nntrainer plan` reports: the
 * host allocator zeroes an arena, which a report need not touch);
 * nnt_model_plan allocates and binds it later. */
int nnt_model_plan_layout(nnt_model *m, nnt_mode mode, nnt_err *e);
/* plan.c, for recompute.c: the training plan's total bytes (weights,
 * optimizer state, arena) with the current schedule, planned in a
 * scratch manager (nothing allocated, the bound plan untouched). */
int nnt_model_train_total(nnt_model *m, size_t *total, nnt_err *e);
/* The bytes of the datasets' queues a training run holds with the
 * model's shape and batch (every dataset set; buffer_size batches, at least 2,
 * each before its prepare): what the training plan leaves free under
 * memory_budget. */
size_t nnt_model_queue_reserve(const nnt_model *m);
/* The datasets' sample shape for m (train.c): floats per sample of each
 * input and label stream, and the inputs an embedding reads as indices. */
void nnt_model_ds_shape(const nnt_model *m, nnt_ds_shape *s);
/* Bind the training contexts to the forward tensors (bwd 0; bwd 1 does
 * nothing: nnt_model_bind_step binds each backward step); nothing without
 * recomputation. */
void nnt_model_bind_phase(nnt_model *m, int bwd);
/* Recomputation: bind the node of training step s to the versions that
 * step reads and writes (recompute.c). */
void nnt_model_bind_step(nnt_model *m, unsigned s);
/* The id training step s binds for its node's input k / output o / scratch
 * c (slot k, NNT_MAX_IO + o, 2 * NNT_MAX_IO + c) with recomputation (re),
 * or the plain id. */
static inline int nnt_step_id(const nnt_model *m, int re, unsigned s, unsigned slot, int id) {
  return re && s < m->n_alt ? m->alt[(size_t)s * NNT_STEP_IDS + slot] : id;
}

/* recompute.c: under [Model] memory_budget, when the training plan does
 * not fit: choose the nodes whose forward results are dropped and
 * recomputed in the backward pass, insert their steps (nodes' recompute,
 * m->n_recompute, m->recompute_flops). NNT_ERR_NOMEM when no choice
 * fits, *min the smallest total found; NNT_OK with the schedule changed
 * otherwise. */
int nnt_recompute_fit(nnt_model *m, size_t *min, nnt_err *e);
/* recompute.c: the default training plan (memory_optimization, no
 * keep_outputs): recompute in the backward pass the cheap chains (a layer
 * with forward_saved and the activations and additions in place over it)
 * whose outputs a backward step reads, where that lowers the plan. Once
 * per compile. */
int nnt_recompute_default(nnt_model *m, nnt_err *e);
/* Whether nd's calc_gradient (grad 1) or calc_derivative step, where it
 * runs its backward, reads the node's inputs; and whether any step of its
 * backward that runs does. */
static inline int nnt_node_step_reads_input(const nnt_node *nd, int grad) {
  return (nd->fc.flags & NNT_LF_BWD_READS_INPUT) &&
         (grad || !(nd->fc.flags & NNT_LF_DERIV_SKIPS_INPUT));
}
static inline int nnt_node_bwd_reads_input(const nnt_node *nd) {
  return (nd->do_grad && nnt_node_step_reads_input(nd, 1)) ||
         ((nd->do_grad || nd->do_deriv) && nnt_node_step_reads_input(nd, 0));
}
/* keep_less.c. At compile (after every node's finalize): each node whose
 * output only its own backward reads keeps less (nnt_layer_ops.keep_less);
 * one whose consumers' backward reads it too becomes a candidate. */
int nnt_graph_keep_less(nnt_model *m, nnt_err *e);
/* Before nnt_recompute_default: which candidates keep less all the same,
 * by the training plan's total: the output then lives to that consumer's
 * read instead of to the node's own backward, for a smaller tensor kept
 * from the forward. */
int nnt_graph_keep_less_choose(nnt_model *m, nnt_err *e);
/* Forget every recomputation: the schedule's recompute steps and the
 * nodes' flags. */
void nnt_recompute_clear(nnt_model *m);
/* Approximate FLOPs of node i's forward (2 per multiply-add of conv and
 * fully_connected, 1 per output element otherwise). */
double nnt_recompute_node_flops(const nnt_model *m, size_t i);
void nnt_model_release_plan(nnt_model *m, nnt_mode mode);
/* The persistent pools, planned and allocated into a fresh g (whole-run
 * lifetime, packed in save order, the basic planner): the weights (request
 * i: weight i), and `slots` values per weight that trains of optimizer
 * state (slot s of weight i at s * nnt_model_opt_stride + m->opt_off[i],
 * a table this sets). NNT_ERR_NOMEM naming the pool. With a
 * chunk the weight pool has gaps before weights that would cross one. */
int nnt_model_plan_weights(nnt_model *m, nnt_mgr *g, nnt_err *e);
int nnt_model_plan_opt_state(nnt_model *m, unsigned slots, nnt_mgr *g, nnt_err *e);
/* A planned mode plus extra bytes (the datasets' queues, what) against
 * [Model] memory_budget: NNT_ERR_NOMEM naming both when over it. */
int nnt_model_budget_with(const nnt_model *m, nnt_mode mode, size_t extra, const char *what,
                          nnt_err *e);
/* dump.c: every tensor of the training plan and the weights, as raw
 * float32 files with an index.tsv, into dir. */
int nnt_model_dump(nnt_model *m, const char *dir, nnt_err *e);
/* train.c */
/* Forward through every node; *loss (when loss is not NULL) the sum of the
 * loss layers' values in node order. A kernel's error names the layer. */
int nnt_model_forward(nnt_model *m, int training, float *loss, nnt_err *e);
/* Backward and the optimizer update. With check_finite it stops at the
 * first weight gradient that is not finite, before applying it or adding
 * it to the global norm: NNT_ERR_RANGE naming the layer and weight. */
int nnt_model_backward(nnt_model *m, nnt_err *e);
/* One training step (forward, the checks, backward and update) on the
 * batch in the input tensors, which ds gave last (NULL: none to replay);
 * *loss its loss. Does not count the iteration. */
int nnt_model_train_step(nnt_model *m, nnt_dataset *ds, float *loss, nnt_err *e);
/* A whole training step on a batch (in and label as for
 * nnt_model_set_batch): on a backend with steps, one step of it (the
 * batch's upload, forward, backward, updates, the loss and check reads:
 * one submit), the checks on the device; otherwise set_batch and
 * nnt_model_train_step. */
int nnt_model_train_batch(nnt_model *m, nnt_dataset *ds, const float *const *in,
                          const float *const *label, float *loss, nnt_err *e);

/* The batch into the input and label tensors of the bound plan, one
 * nnt_tensor_set per tensor (a device backend gets one upload each): in[i]
 * holds batch samples of input i, label[j] of label j; label NULL (or
 * label[j] NULL) sets zeros. */
int nnt_model_set_batch(nnt_model *m, const float *const *in, const float *const *label,
                        nnt_err *e);

/* train_check.c: the non-finite checks of a training step. */
/* Allocate the copy the checks need (once per model; then a no-op). */
int nnt_check_prepare(nnt_model *m, nnt_err *e);
/* Index of the first value of x[0..n) that is NaN or infinite; n if none. */
size_t nnt_first_nonfinite(const float *x, size_t n);
/* The largest magnitude of n values into *mx; 0 (and *mx as it was) when
 * one is NaN or infinite. */
int nnt_max_abs_finite(const float *x, size_t n, float *mx);
/* "NaN", "inf" or "-inf" for a non-finite value. */
const char *nnt_nonfinite_name(float v);
/* Copy the non-trainable weights (moving statistics, which forward
 * updates) aside before a step, and put them back. */
int nnt_check_save_states(nnt_model *m, nnt_err *e);
int nnt_check_restore_states(nnt_model *m, nnt_err *e);
/* After forward: NNT_OK when the loss and the moving statistics are
 * finite; otherwise the statistics are put back and NNT_ERR_RANGE says
 * where it began: a weight (an update that overflowed), the batch, or the
 * first layer whose output is not finite, found by replaying the step on
 * the batch ds holds. */
int nnt_check_forward(nnt_model *m, nnt_dataset *ds, float loss, nnt_err *e);
/* The gradients of node nd after calc_gradient: NNT_ERR_RANGE naming the
 * first weight whose gradient is not finite. */
int nnt_check_gradients(const nnt_node *nd, nnt_err *e);
/* Every weight and optimizer state value (before a checkpoint is
 * written): NNT_ERR_RANGE naming the first that is not finite. */
int nnt_check_weights(const nnt_model *m, nnt_err *e);

/* The same checks on a backend with steps, without a read in the middle
 * of the step: flags computed by the backend (flag_nonfinite), updates
 * skipped on the device once one is set, read back when the step ends.
 * In the step: dev_begin before forward (flags cleared, the moving
 * statistics copied aside), dev_forward after it, dev_gradients after
 * each node's calc_gradient, dev_end last (the flags' read). After
 * step_end: dev_verdict gives the error the host checks would have given
 * (the statistics put back, the replay that names the layer). */
int nnt_check_dev_prepare(nnt_model *m, nnt_err *e); /* before the step: its memory */
int nnt_check_dev_begin(nnt_model *m, nnt_err *e);
int nnt_check_dev_forward(nnt_model *m, nnt_err *e);
int nnt_check_dev_gradients(nnt_model *m, const nnt_node *nd, nnt_err *e);
int nnt_check_dev_end(nnt_model *m, nnt_err *e);
int nnt_check_dev_verdict(nnt_model *m, nnt_dataset *ds, float loss, nnt_err *e);
/* 1 when the model's checks run on the backend (check_finite and a
 * backend with steps). */
int nnt_check_on_device(const nnt_model *m);

#endif
