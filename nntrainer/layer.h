/* Layers: a layer type is a const descriptor of functions (nnt_layer_ops);
 * a layer is an instance of one, with the properties every layer shares and
 * the private state of its type. Layers compute only through the kernel
 * table in the run context, never on raw memory. */
#ifndef NNT_LAYER_H
#define NNT_LAYER_H

#include "nntrainer/common.h"
#include "nntrainer/tensor.h"
#include "nntrainer/compute/backend.h"
#include "nntrainer/compute/kernels.h"

#define NNT_MAX_IO 16      /* inputs or outputs of one layer */
#define NNT_MAX_WEIGHTS 8  /* weights of one layer */
#define NNT_MAX_SCRATCH 8  /* scratch tensors of one layer */
#define NNT_NAME_MAX 128

/* Weight initializers (NNTrainer's names). */
typedef enum nnt_init {
  NNT_INIT_ZEROS = 0,
  NNT_INIT_ONES,
  NNT_INIT_LECUN_NORMAL,
  NNT_INIT_LECUN_UNIFORM,
  NNT_INIT_XAVIER_NORMAL,
  NNT_INIT_XAVIER_UNIFORM,
  NNT_INIT_HE_NORMAL,
  NNT_INIT_HE_UNIFORM,
} nnt_init;
int nnt_init_from_name(const char *name, nnt_init *out);
const char *nnt_init_name(nnt_init i);
/* An initializer key's value: NNT_OK, or NNT_ERR_INVAL naming the key, the
 * value and the names it takes. */
int nnt_parse_init(const char *key, const char *value, nnt_init *out, nnt_err *e);
/* Values [first, first + n) of a weight by the initializer into w (host
 * memory), drawn from Philox under key (the model's seed) and stream (the
 * weight's index in save order): value i depends on (key, stream, i)
 * alone (layer.c says which counters), so a weight is filled in chunks. */
void nnt_init_fill(nnt_init init, unsigned fan_in, unsigned fan_out, uint64_t key,
                   uint64_t stream, size_t first, float *w, size_t n);

/* The weight-related properties shared by fully_connected, conv2d, ...:
 * weight_initializer, bias_initializer, weight_regularizer,
 * weight_regularizer_constant, weight_decay, bias_decay, disable_bias. */
typedef struct nnt_weight_props {
  nnt_init weight_init;  /* default xavier_uniform */
  nnt_init bias_init;    /* default zeros */
  int l2norm;            /* weight_regularizer = l2norm */
  float l2_constant;     /* weight_regularizer_constant, default 1.0 */
  float weight_decay;    /* default 0 */
  float bias_decay;      /* default 0 */
  int disable_bias;      /* default false */
} nnt_weight_props;
void nnt_weight_props_init(nnt_weight_props *p);
/* @return NNT_OK, NNT_ERR_NOKEY when key is not one of these, or an error. */
int nnt_weight_props_set(nnt_weight_props *p, const char *key,
                         const char *value, nnt_err *e);

/* Window properties shared by conv2d, conv1d and pooling2d: kernel_size
 * (pool_size for pooling), stride, padding (valid, same, or explicit "p",
 * "p,p" for height and width, or "t,b,l,r"), dilation. */
typedef struct nnt_window_props {
  unsigned k[2], s[2], d[2];
  int k_set;
  int pad_mode;            /* 0 explicit, 1 valid, 2 same */
  unsigned pad[4];         /* top, bottom, left, right */
} nnt_window_props;
void nnt_window_props_init(nnt_window_props *p);
/* one_d: conv1d, where values apply to the width only.
 * @return NNT_OK, NNT_ERR_NOKEY for other keys, or an error. */
int nnt_window_props_set(nnt_window_props *p, const char *key, const char *kernel_key,
                         const char *value, int one_d, nnt_err *e);
/* The geometry over an input of dim in, computed in 64 bits; an error
 * names the key and shapes when the window does not fit the padded input,
 * or when the dilated window or the output does not fit a 32-bit axis. */
int nnt_window_geom(const nnt_window_props *p, nnt_dim in, const char *kernel_key,
                    nnt_conv_geom *g, nnt_err *e);

/* For finalize: NNT_OK when v, a dimension or leading dimension the layer
 * will pass to the kernels' gemm, is at most NNT_GEMM_DIM_MAX; otherwise
 * NNT_ERR_INVAL with "<what>: <v> is more than ...". */
int nnt_check_gemm_dim(size_t v, const char *what, nnt_err *e);

/* A weight the layer asks for at finalize. */
typedef struct nnt_weight_spec {
  char name[32];     /* "weight", "bias", "moving_mean", ... */
  nnt_dim dim;
  nnt_init init;
  unsigned fan_in, fan_out;
  float l2;          /* l2norm regularizer constant; 0 = none */
  float decay;       /* decoupled weight decay */
  int trainable;     /* 0 for non-trainable state such as moving statistics */
} nnt_weight_spec;

/* When a scratch tensor is alive. */
typedef enum nnt_scratch_life {
  NNT_SCRATCH_FWD = 0, /* within forward only */
  NNT_SCRATCH_ITER,    /* from forward until this layer's backward is done */
  NNT_SCRATCH_BWD,     /* within calc_gradient / calc_derivative only */
  /* as NNT_SCRATCH_ITER, but only in training where the layer's backward
   * runs: elsewhere it is not planned (its data is NULL in forward) */
  NNT_SCRATCH_SAVED,
  /* as NNT_SCRATCH_FWD, but planned only where the node runs with its
   * output over its input (NNT_LF_INPLACE_FWD): elsewhere its data is NULL */
  NNT_SCRATCH_INPLACE,
  /* within calc_derivative only, planned only in training where the node
   * computes dX; a node with one runs calc_derivative before
   * calc_gradient (schedule.c), so its whole gradients are not alive
   * beside it */
  NNT_SCRATCH_DERIV,
} nnt_scratch_life;

/* Does scratch of this life belong to the backward steps alone? */
static inline int nnt_scratch_in_backward(nnt_scratch_life life) {
  return life == NNT_SCRATCH_BWD || life == NNT_SCRATCH_DERIV;
}

/* Layer facts given at finalize (nnt_finalize_ctx.flags). */
enum {
  /* calc_gradient or calc_derivative reads the forward input(s) */
  NNT_LF_BWD_READS_INPUT = 1u << 0,
  /* calc_gradient or calc_derivative reads the forward output(s) */
  NNT_LF_BWD_READS_OUTPUT = 1u << 1,
  /* may run with out[0] == in[0] and d_in[0] == d_out[0] */
  NNT_LF_INPLACE = 1u << 2,
  /* output 0 is input 0 reinterpreted (flatten, reshape): same memory */
  NNT_LF_VIEW = 1u << 3,
  /* a loss layer: reads ctx->label, writes ctx->loss */
  NNT_LF_LOSS = 1u << 4,
  /* input 0 holds row indices into weight 0 (embedding: [in_dim, ...]):
   * synthetic data feeds it whole numbers in [0, weight 0's height) */
  NNT_LF_INDEX_INPUT = 1u << 5,
  /* forward may run with out[0] over in[0] whatever their sizes (the
   * planned memory is the larger of the two) where the node's backward
   * does not run: inference, evaluation, and a frozen node with no
   * trainable layer before it. The layer sees ctx->out[0].data ==
   * ctx->in[0].data and must read each part of its input before it
   * writes the output over it (conv2d: a group of images at a time). */
  NNT_LF_INPLACE_FWD = 1u << 6,
  /* with NNT_LF_BWD_READS_INPUT: calc_derivative does not read the
   * input(s), only calc_gradient does (fully_connected, conv2d: dX needs
   * the weights and dY alone), so they live to calc_gradient's step */
  NNT_LF_DERIV_SKIPS_INPUT = 1u << 7,
  /* calc_derivative adds its derivative into d_in[k] where ctx->d_add
   * has bit k (d_in[k] then holds the sum of the derivatives of the
   * input's consumers after this one): an input that several layers read
   * then needs no temporary of its size for this layer's part of the sum.
   * The layer must add it as train.c would, an add of the whole
   * derivative (computed as it would have been into d_in[k]) into the
   * sum, input by input in order, so that the sum keeps its bits. */
  NNT_LF_DERIV_ADDS = 1u << 8,
};

typedef struct nnt_finalize_ctx {
  /* given */
  unsigned batch;
  unsigned n_in;
  nnt_dim in_dim[NNT_MAX_IO];
  unsigned n_consumers;   /* how many layers read output 0 (for multiout) */
  unsigned n_out_refs;    /* 1 + the largest output index a consumer names */
  int trainable;          /* the layer's `trainable` property */
  nnt_engine engine;      /* the model's: a layer may shape its work for it */
  size_t chunk;           /* the largest tensor its buffers hold (0: no limit) */
  /* set by the layer (n_out defaults to 1) */
  unsigned n_out;
  nnt_dim out_dim[NNT_MAX_IO];
  unsigned n_w;
  nnt_weight_spec w[NNT_MAX_WEIGHTS];
  unsigned n_scratch;
  nnt_dim scratch_dim[NNT_MAX_SCRATCH];
  nnt_scratch_life scratch_life[NNT_MAX_SCRATCH];
  unsigned flags;
  /* Bit w: the layer can compute weight w's gradient a block of rows (the
   * weight's h) at a time, handing each to ctx->grad_rows (nnt_grad_tiled),
   * so that the update can follow it without the whole gradient in memory.
   * Only for a gradient each of whose elements is a sum over in[0]'s rows
   * of an in[0] value times a d_out[0] value, with the layer's other
   * gradients sums of d_out[0] values (fully_connected): the training loop
   * bounds them from those two tensors before anything is applied. */
  unsigned grad_tiles;
  /* set by nnt_fctx_add_weight / _add_scratch when a table is full: the
   * compile refuses the layer rather than dropping the request */
  int overfull;
} nnt_finalize_ctx;

/* Ask for a weight; returns its index in ctx->w and in the run context. */
unsigned nnt_fctx_add_weight(nnt_finalize_ctx *ctx, const char *name,
                             nnt_dim dim, nnt_init init, unsigned fan_in,
                             unsigned fan_out, float l2, float decay,
                             int trainable);
unsigned nnt_fctx_add_scratch(nnt_finalize_ctx *ctx, nnt_dim dim,
                              nnt_scratch_life life);

/* What a layer sees when it runs. Tensors whose .data is NULL are not
 * needed in this step (e.g. d_in of a layer fed by the model input). */
typedef struct nnt_run_ctx {
  const nnt_kernels *k;
  unsigned n_in, n_out, n_w, n_scratch;
  nnt_tensor *in;       /* forward inputs */
  nnt_tensor *out;      /* forward outputs */
  nnt_tensor *d_out;    /* backward: derivative of the loss wrt each output */
  nnt_tensor *d_in;     /* backward: calc_derivative writes (overwrites) these */
  unsigned d_add;       /* ... or adds into d_in[k] where bit k is set (NNT_LF_DERIV_ADDS) */
  nnt_tensor *w;        /* weights */
  nnt_tensor *gw;       /* calc_gradient writes (overwrites); NULL data: frozen */
  nnt_tensor *scratch;
  const nnt_tensor *label; /* loss layers: the label batch */
  /* loss layers: a 1-float tensor (the planner's) that forward writes the
   * loss value into when it has a label; the caller reads it with
   * nnt_tensor_get. NULL for other layers. */
  nnt_tensor *loss;
  int training;            /* forward: 1 in training, 0 in inference */
  /* forward: 1 when it runs again in the backward pass (memory_budget):
   * same inputs, same outputs, but no side effect a second time (batch
   * normalization's moving statistics) */
  int recompute;
  /* calc_derivative: 1 when this node's calc_gradient ran after its last
   * forward (in this iteration: what calc_gradient left in BWD scratch is
   * still there); 0 otherwise, and wherever a caller does not say */
  int grad_done;
  /* For dropout and similar: the key and stream of the counter-based
   * generator (nntrainer/philox.h). seed is the model's seed; stream is
   * (iteration << 20) | node index, unique per (iteration, node) for graphs
   * of fewer than 2^20 nodes, so a step's masks follow from the seed. */
  uint64_t seed, stream;
  /* calc_gradient of a weight whose gradient is applied a block of rows
   * at a time (nnt_grad_tiled): gw[w] holds one block (its h the rows of
   * a block); the layer computes the rows [r0, r1) into it and calls
   * grad_rows(ctx, w, r0 * width, (r1 - r0) * width, gw[w].data), which
   * updates those weight values; a nonzero return is the step's error. */
  int (*grad_rows)(const struct nnt_run_ctx *ctx, unsigned w, size_t off, size_t n,
                   const float *g);
  void *grad_arg; /* the caller's, for grad_rows */
  /* forward of one image again (rerun.c): the context of the same layer
   * whose training forward over the whole batch ran earlier in this step,
   * its scratch of ops->whole_scratch still holding what that forward
   * left; NULL in every other call */
  const struct nnt_run_ctx *whole;
  /* forward of a convolution whose input was gathered at an earlier step
   * (delay.c, nnt_conv_gather): in[0] holds only the positions the window
   * reads; 0 in every other call */
  int gathered;
} nnt_run_ctx;

/* Is weight w's gradient computed and applied in blocks of gw[w].dim.h
 * rows (the weight's h being larger) in this calc_gradient? */
static inline int nnt_grad_tiled(const nnt_run_ctx *ctx, unsigned w) {
  return ctx->gw[w].data && ctx->grad_rows && ctx->gw[w].dim.h < ctx->w[w].dim.h;
}

/* The run context's stream for node `node` in iteration `iter`. */
static inline uint64_t nnt_run_stream(uint64_t iter, size_t node) {
  return (iter << 20) | (uint64_t)node;
}

/* In a layer's forward or backward: return the kernel's code when it is
 * not NNT_OK. */
#define NNT_TRY(call)                                                                     \
  do {                                                                                    \
    int nnt_try_rc_ = (call);                                                             \
    if (nnt_try_rc_)                                                                      \
      return nnt_try_rc_;                                                                 \
  } while (0)

typedef struct nnt_layer nnt_layer;

/* A layer type. Optional entries may be NULL. */
typedef struct nnt_layer_ops {
  const char *type;     /* registry name, lowercase: "fully_connected" */
  int ml_type;          /* ml_train_layer_type_e value, or -1 */
  size_t priv_size;     /* bytes of private state (zeroed, then init) */
  void (*init)(nnt_layer *l); /* set property defaults in l->priv */
  void (*destroy)(nnt_layer *l); /* free what init/set_property took */
  /* @return NNT_OK, NNT_ERR_NOKEY for a key this type does not know, or an
   * error naming the key and value. */
  int (*set_property)(nnt_layer *l, const char *key, const char *value,
                      nnt_err *e);
  /* Infer output shapes, request weights and scratch, declare flags. */
  int (*finalize)(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e);
  /* The passes return NNT_OK or the first kernel's error code. */
  int (*forward)(nnt_layer *l, nnt_run_ctx *ctx);
  int (*calc_gradient)(nnt_layer *l, nnt_run_ctx *ctx);   /* dW */
  int (*calc_derivative)(nnt_layer *l, nnt_run_ctx *ctx); /* dX */
  /* At compile, before finalize: log a notice for each key that was not
   * given and whose default here differs from NNTrainer's (or that
   * NNTrainer requires), and a warning for given keys the layer ignores.
   * nnt_layer_has_key says what was given. */
  void (*log_defaults)(const nnt_layer *l);
  /* At compile, after every node's finalize, for a node whose backward
   * runs and whose output 0 no other layer reads in the backward pass (so
   * that memory would be kept for this layer alone): it may give up
   * NNT_LF_BWD_READS_OUTPUT in ctx->flags for a smaller scratch of life
   * NNT_SCRATCH_SAVED (activation: a bit per element for relu). NULL:
   * nothing. Results must stay bit for bit the same. */
  void (*keep_less)(nnt_layer *l, nnt_finalize_ctx *ctx);
  /* The kernel ops forward, calc_gradient and calc_derivative may call, as
   * NNT_KOP_BIT(...)s: compile refuses the layer on a backend whose
   * supports gate says no to one of them. */
  uint64_t kops;
  /* Optional: output 0 again, in a recompute step of the backward pass,
   * from what forward kept for the backward (scratch of life
   * NNT_SCRATCH_ITER) without reading the input, bit for bit the value
   * forward wrote (batch normalization: gamma * xhat + beta). The default
   * training plan uses it (recompute.c) only where the backend supports
   * every op of saved_kops; compile does not require them. */
  int (*forward_saved)(nnt_layer *l, nnt_run_ctx *ctx);
  uint64_t saved_kops;
  /* Bit c: forward, given ctx->whole (one image of a batch computed again,
   * rerun.c), reads the whole batch's scratch c instead of computing it
   * (batch normalization: the batch's mean and 1/std), so that scratch
   * must live until then. A layer whose forward over one image depends on
   * the other images sets this; rerun.c takes only the layers it knows. */
  unsigned whole_scratch;
  /* Optional ops the layer calls only where the table's entry is not NULL
   * (a faster path; conv2d's conv_fwd), else it computes without them:
   * compile does not require them. */
  uint64_t opt_kops;
} nnt_layer_ops;

struct nnt_layer {
  const nnt_layer_ops *ops;
  void *priv;
  char name[NNT_NAME_MAX];
  /* properties shared by every layer */
  unsigned n_inputs;                  /* input_layers given */
  char input_names[NNT_MAX_IO][NNT_NAME_MAX];
  unsigned input_idx[NNT_MAX_IO];     /* "name(idx)": output index */
  int has_input_shape;
  nnt_dim input_shape;                /* c:h:w (b is ignored) */
  int has_activation;
  nnt_act activation;                 /* activation = ..., realized as a node */
  int flatten;                        /* flatten = true, realized as a node */
  int trainable;                      /* default 1 */
  int has_engine;                     /* engine given */
  nnt_engine engine;                  /* engine = cpu | gpu | qnn */
  char shared_from[NNT_NAME_MAX];     /* shared_from: use this layer's weights ("": own) */
  int owned;                          /* added to a model */
  /* the properties as given (lowercase key, value), for writing the model
   * back as an INI; name and type are not among them */
  size_t n_props;
  char **prop_key, **prop_val;
};

/* Registry. */
const nnt_layer_ops *nnt_layer_ops_find(const char *type);
const nnt_layer_ops *nnt_layer_ops_find_ml(int ml_type);
/* The registered types, NULL-terminated. */
const nnt_layer_ops *const *nnt_layer_ops_all(void);

/* Create a layer of a registered type (case-insensitive name). */
int nnt_layer_create(const char *type, nnt_layer **out, nnt_err *e);
void nnt_layer_destroy(nnt_layer *l);
/* Set one property: the type's own keys first, then the shared ones.
 * The message names the key; callers add the section or layer. */
int nnt_layer_set_property(nnt_layer *l, const char *key, const char *value,
                           nnt_err *e);

/* Whether key was given (set successfully through nnt_layer_set_property). */
int nnt_layer_has_key(const nnt_layer *l, const char *key);
/* Log, through nnt_log, the notices and warnings of the layer's type
 * (nnt_layer_ops.log_defaults). */
void nnt_layer_log_defaults(const nnt_layer *l);
/* The notice for a key that was not given: "layer 'name' (type): key 'key'
 * not given: using <used> (<why>)". */
void nnt_layer_notice_default(const nnt_layer *l, const char *key, const char *used,
                              const char *why);

/* conv2d and conv1d (layers/conv.c), for rerun.c: does forward over one
 * image of the batch (image-sized views of in[0] and out[0], not in
 * place, scratch 0 of dims s0 as planned for the batch, the other scratch
 * NULL) give bit for bit what the batch's forward gives that image? */
int nnt_conv_fwd_per_image(const nnt_layer *l, const nnt_kernels *k, nnt_dim s0);
/* conv2d, for delay.c: may its forward read a gathered input (ctx->gathered:
 * [c][oh][ow] an image, what nnt_conv_gather copies) for the same bits: a
 * 1x1 window with a stride and no padding whose forward takes the CPU's
 * subsampling product or one image's im2col and product? The gather: the
 * values of ctx->in[0] the forward reads, into dst (the images' im2col of
 * one image each). */
int nnt_conv_gathers(const nnt_layer *l, const nnt_kernels *k);
int nnt_conv_gather(const nnt_layer *l, const nnt_run_ctx *ctx, float *dst);

/* Descriptors, one per file in layers/. */
extern const nnt_layer_ops nnt_layer_input;
extern const nnt_layer_ops nnt_layer_fully_connected;
extern const nnt_layer_ops nnt_layer_activation;
extern const nnt_layer_ops nnt_layer_flatten;
extern const nnt_layer_ops nnt_layer_reshape;
extern const nnt_layer_ops nnt_layer_dropout;
extern const nnt_layer_ops nnt_layer_mse;
extern const nnt_layer_ops nnt_layer_cross_softmax;
extern const nnt_layer_ops nnt_layer_cross_sigmoid;
extern const nnt_layer_ops nnt_layer_batch_normalization;
extern const nnt_layer_ops nnt_layer_addition;
extern const nnt_layer_ops nnt_layer_concat;
extern const nnt_layer_ops nnt_layer_split;
extern const nnt_layer_ops nnt_layer_multiout;
extern const nnt_layer_ops nnt_layer_identity;
extern const nnt_layer_ops nnt_layer_permute;
extern const nnt_layer_ops nnt_layer_upsample2d;
extern const nnt_layer_ops nnt_layer_conv2d;
extern const nnt_layer_ops nnt_layer_conv1d;
extern const nnt_layer_ops nnt_layer_pooling2d;
extern const nnt_layer_ops nnt_layer_lstm;
extern const nnt_layer_ops nnt_layer_lstmcell;
extern const nnt_layer_ops nnt_layer_attention;
extern const nnt_layer_ops nnt_layer_multi_head_attention;
extern const nnt_layer_ops nnt_layer_rnn;
extern const nnt_layer_ops nnt_layer_rnncell;
extern const nnt_layer_ops nnt_layer_gru;
extern const nnt_layer_ops nnt_layer_grucell;
extern const nnt_layer_ops nnt_layer_embedding;
extern const nnt_layer_ops nnt_layer_layer_normalization;
extern const nnt_layer_ops nnt_layer_positional_encoding;
extern const nnt_layer_ops nnt_layer_add;
extern const nnt_layer_ops nnt_layer_subtract;
extern const nnt_layer_ops nnt_layer_multiply;
extern const nnt_layer_ops nnt_layer_divide;
extern const nnt_layer_ops nnt_layer_reduce_mean;

#endif
