/* Backends: where tensors live and what computes on them.
 *
 * A backend has a buffer type (how its memory is allocated and reached),
 * a synchronize call, a supports(op) gate, and the op entries of the kernel
 * table (kernels.h). Every tensor lives in a buffer; a tensor's `data` is
 * an address in its buffer's address space: base(buffer) + offset. For a
 * host buffer (the CPU's) that address is a pointer into host memory; for a
 * device buffer it is an opaque number that only the backend's ops
 * understand (they map it back to the buffer and the offset), so code
 * outside a backend may do arithmetic on it (a view is base + offset) but
 * never reads or writes through it: it calls nnt_tensor_set/get/memset, or
 * nnt_tensor_host for a mapped view where the buffer is host memory. */
#ifndef NNT_BACKEND_H
#define NNT_BACKEND_H

#include <stddef.h>
#include "nntrainer/common.h"
#include "nntrainer/tensor.h"
#include "nntrainer/compute/kernels.h"

typedef struct nnt_buffer nnt_buffer;
typedef struct nnt_buffer_type nnt_buffer_type;
typedef struct nnt_backend nnt_backend;

/* Bytes a backend holds now: in device memory (memory the host cannot
 * dereference) and in host memory (host buffers, mapped staging). */
typedef struct nnt_mem_usage {
  size_t device, host;
} nnt_mem_usage;

/* How a backend's memory is allocated and reached. Every entry that can
 * fail returns an NNT_ERR_* code with a message in e. */
struct nnt_buffer_type {
  const char *name;
  /* A buffer of size bytes (size 0 gives a usable empty buffer), zeroed.
   * NNT_ERR_NOMEM when it cannot be had; what names the memory in the
   * message ("the training arena"). */
  int (*alloc)(const nnt_buffer_type *t, size_t size, const char *what, nnt_buffer **out,
               nnt_err *e);
  void (*free)(nnt_buffer *b); /* NULL-safe through nnt_buffer_free */
  /* Every offset the planner gives is a multiple of this. */
  size_t (*alignment)(const nnt_buffer_type *t);
  /* The largest buffer alloc may give. */
  size_t (*max_size)(const nnt_buffer_type *t);
  /* Optional (NULL, or 0 returned: no limit): the chunk C. No tensor the
   * planner places crosses a multiple of C bytes: each lies inside one
   * [k*C, (k+1)*C) of its buffer, so a device whose ops reach at most C
   * bytes through one binding (Vulkan's maxStorageBufferRange) can keep a
   * buffer as separate allocations of C bytes. C is a multiple of
   * alignment(); a tensor larger than C cannot be placed. Buffer entries
   * (set/get/memset) may still span chunks. */
  size_t (*chunk)(const nnt_buffer_type *t);
  /* 1 when base() is host memory the caller may read and write. */
  int (*is_host)(const nnt_buffer_type *t);
  /* The address of byte 0 in this buffer's address space. */
  char *(*base)(const nnt_buffer *b);
  /* Bytes [off, off + n) from/to host memory; memset fills them with v. */
  int (*set)(nnt_buffer *b, size_t off, const void *src, size_t n, nnt_err *e);
  int (*get)(const nnt_buffer *b, size_t off, void *dst, size_t n, nnt_err *e);
  int (*memset)(nnt_buffer *b, size_t off, int v, size_t n, nnt_err *e);
  /* Like get, but dst may be written only when the backend's current step
   * ends (step_end); outside a step it is get. NULL: get. */
  int (*get_later)(const nnt_buffer *b, size_t off, void *dst, size_t n, nnt_err *e);
  void *ctx;
};

struct nnt_buffer {
  const nnt_buffer_type *type;
  size_t size;
  char *base; /* type->base(this), kept for address arithmetic */
  void *ctx;  /* the type's own */
};

/* The ops a layer or the core may ask a backend for: one per entry of the
 * kernel table. A layer type lists those it uses (nnt_layer_ops.kops), and
 * compile asks the backend's supports gate for each. */
#define NNT_KOP_LIST(X)                                                                   \
  X(GEMM, gemm) X(GEMM_ROWS, gemm_rows) X(FILL, fill) X(COPY, copy) X(SCALE, scale)        \
  X(AXPY, axpy) X(ADD, add)                                                               \
  X(SUB, sub) X(MUL, mul) X(DOT, dot) X(SUM, sum) X(ADD_ROW_VEC, add_row_vec)             \
  X(ADD_COL_VEC, add_col_vec) X(SUM_COLS, sum_cols) X(SUM_ROWS, sum_rows)                 \
  X(ACT_FWD, act_fwd) X(ACT_BWD, act_bwd) X(ACT_MASK, act_mask)                           \
  X(ACT_BWD_MASK, act_bwd_mask) X(SOFTMAX_FWD, softmax_fwd)                               \
  X(SOFTMAX_BWD, softmax_bwd) X(NORMALIZE_ROWS, normalize_rows)                           \
  X(XENT_SOFTMAX_FWD, xent_softmax_fwd)                                                   \
  X(XENT_SOFTMAX_BWD, xent_softmax_bwd) X(XENT_SIGMOID_FWD, xent_sigmoid_fwd)             \
  X(XENT_SIGMOID_BWD, xent_sigmoid_bwd) X(MSE_FWD, mse_fwd) X(MSE_BWD, mse_bwd)           \
  X(ARGMAX_MATCH, argmax_match) X(DROPOUT_MASK, dropout_mask)                             \
  X(BN_FWD_TRAIN, bn_fwd_train)                                                           \
  X(BN_FWD_INFER, bn_fwd_infer) X(BN_BWD, bn_bwd) X(PERMUTE3, permute3)                   \
  X(UPSAMPLE_NEAREST_FWD, upsample_nearest_fwd)                                           \
  X(UPSAMPLE_NEAREST_BWD, upsample_nearest_bwd) X(IM2COL, im2col) X(COL2IM, col2im)       \
  X(POOL_FWD, pool_fwd) X(POOL_BWD, pool_bwd) X(SGD_STEP, sgd_step)                       \
  X(ADAM_STEP, adam_step) X(FLAG_NONFINITE, flag_nonfinite) X(CLIP_SCALE, clip_scale)        \
  X(MASK_UPPER, mask_upper) X(GATHER_ROWS, gather_rows)                                   \
  X(SCATTER_ADD_ROWS, scatter_add_rows) X(LN_FWD, ln_fwd) X(LN_BWD, ln_bwd)               \
  X(POS_ENCODING, pos_encoding) X(DIV, div) X(BN_AFFINE, bn_affine)                       \
  X(CONV_FWD, conv_fwd) X(CONV_BWD_X, conv_bwd_x) X(CONV_BWD_W, conv_bwd_w)               \
  X(CONV_WINO, conv_wino) X(CONV_WINO_DW, conv_wino_dw) X(COPY2D, copy2d)                 \
  X(COL2IM_SET, col2im_set) X(BN_BWD_MEANS, bn_bwd_means) X(CONV_BWD_X_ADD, conv_bwd_x_add)  \
  X(BN_FWD_STATS, bn_fwd_stats)

typedef enum nnt_kop {
#define NNT_KOP_ENUM(E, n) NNT_KOP_##E,
  NNT_KOP_LIST(NNT_KOP_ENUM)
#undef NNT_KOP_ENUM
  NNT_KOP__COUNT
} nnt_kop;

/* "gemm", "im2col", ... */
const char *nnt_kop_name(nnt_kop op);
#define NNT_KOP_BIT(E) (1ull << NNT_KOP_##E)

struct nnt_backend {
  const char *name;             /* in messages: "cpu" */
  /* The engine value it serves ("cpu"); NULL: its name. Compile keeps a
   * backend set on the model whose engine is the model's, so a test's
   * backend named otherwise ("fakedev") can stand in for the CPU. */
  const char *engine;
  const nnt_buffer_type *buft;  /* memory the ops compute on */
  const nnt_kernels *k;         /* the ops; addresses are in buft's space */
  const char *device;           /* the device in words, for the CLI; NULL: none */
  /* Wait until every op issued so far has finished and its results are
   * visible to get. */
  int (*synchronize)(nnt_backend *be, nnt_err *e);
  /* 1 when the backend can run op. */
  int (*supports)(const nnt_backend *be, nnt_kop op);
  void (*free)(nnt_backend *be); /* NULL for a static backend */
  /* Steps (NULL: ops run as they are called). The ops, sets, memsets and
   * get_laters between step_begin(key) and step_end form one step; a
   * backend may record the first step of a key and replay it while the
   * calls match, submitting it once, and lands the get_laters' bytes by
   * the time step_end returns. A plain get inside a step works but makes
   * the backend wait in the middle of it. */
  int (*step_begin)(nnt_backend *be, uint64_t key, nnt_err *e);
  int (*step_end)(nnt_backend *be, nnt_err *e);
  /* The bytes it holds now, its buffers and its own staging, by where they
   * live; NULL: it does not say (nnt_backend_memory counts nothing). */
  void (*memory)(const nnt_backend *be, nnt_mem_usage *out);
  void *ctx;
};

/* The engines a model or layer may name (NNTrainer's `engine` values). */
typedef enum nnt_engine { NNT_ENGINE_CPU = 0, NNT_ENGINE_GPU, NNT_ENGINE_QNN } nnt_engine;
/* Case-insensitive "cpu", "gpu", "qnn"; NNT_ERR_INVAL for anything else. */
int nnt_engine_from_name(const char *name, nnt_engine *out);
const char *nnt_engine_name(nnt_engine en);

/* The backend for an engine: NNT_OK and *out, or NNT_ERR_NOT_SUPPORTED
 * with the reason this build or machine cannot give it. Release with
 * nnt_backend_free. */
int nnt_backend_get(nnt_engine en, nnt_backend **out, nnt_err *e);
/* The same on a chosen device (an index or part of its name, as [Model]
 * gpu_device gives it; NULL: NNTRAINER_VULKAN_DEVICE, else the best). */
int nnt_backend_get_on(nnt_engine en, const char *device, nnt_backend **out, nnt_err *e);
void nnt_backend_free(nnt_backend *be);
/* What be->memory says; zeros for a backend without the entry. The CPU
 * backend's figure is every live host buffer of the process (the CPU
 * backend and the host buffer type are one static instance shared by all
 * models), all host memory. */
void nnt_backend_memory(const nnt_backend *be, nnt_mem_usage *out);

/* The CPU backend (OpenBLAS and loops) and its host buffer type. */
nnt_backend *nnt_backend_cpu(void);
const nnt_buffer_type *nnt_buffer_type_host(void);

/* t's chunk (see nnt_buffer_type.chunk): 0 when it has none. */
size_t nnt_buffer_type_chunk(const nnt_buffer_type *t);

/* Buffers. */
int nnt_buffer_alloc(const nnt_buffer_type *t, size_t size, const char *what, nnt_buffer **out,
                     nnt_err *e);
void nnt_buffer_free(nnt_buffer *b);
/* The address of byte off (base + off); NULL for a NULL buffer. */
static inline float *nnt_buffer_at(const nnt_buffer *b, size_t off) {
  return b ? (float *)(void *)(b->base + off) : NULL;
}
/* A host pointer to byte off, or NULL when the buffer is not host memory. */
void *nnt_buffer_host(const nnt_buffer *b, size_t off);

/* Tensor memory from the host's side. elem_off and n count floats from the
 * tensor's start; they must lie inside the tensor (NNT_ERR_INVAL if not). */
int nnt_tensor_set(const nnt_tensor *t, size_t elem_off, const float *src, size_t n,
                   nnt_err *e);
int nnt_tensor_get(const nnt_tensor *t, size_t elem_off, float *dst, size_t n, nnt_err *e);
/* get_later: dst is written by the end of the backend's current step. */
int nnt_tensor_get_later(const nnt_tensor *t, size_t elem_off, float *dst, size_t n,
                         nnt_err *e);
/* The backend's step hooks, where it has them (NNT_OK otherwise). */
int nnt_backend_step_begin(nnt_backend *be, uint64_t key, nnt_err *e);
int nnt_backend_step_end(nnt_backend *be, nnt_err *e);
/* Every byte of the tensor to v (0: zeros). */
int nnt_tensor_memset(const nnt_tensor *t, int v, nnt_err *e);
/* The mapped view: a host pointer to the tensor's first float when its
 * buffer is host memory, NULL otherwise (then use set/get). */
float *nnt_tensor_host(const nnt_tensor *t);

#endif
