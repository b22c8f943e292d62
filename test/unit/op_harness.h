/* The op harness: one table of layer cases run on every backend present.
 * For each case and backend it finalizes the layer, places every tensor of
 * the case in ONE buffer of the backend's buffer type (aligned offsets,
 * guard bytes before, between and after), fills and reads it only through
 * nnt_tensor_set/get, runs forward (inference and training),
 * calc_gradient and calc_derivative, and checks that
 *   - no call wrote a guard byte (a kernel writing past its tensor),
 *   - the results equal a reference CPU run whose tensors sit in separate
 *     host buffers allocated in the opposite order (normalised error
 *     max |a - b| / max(1, max |ref|) within the case's tolerance),
 *   - dX and every trainable dW agree with central differences of the
 *     layer's own forward (fd_harness.h's fd_compare).
 * Results come back as a report, so tests can also show that a broken
 * layer or kernel is caught. docs/architecture.md, "The op harness". */
#ifndef NNT_OP_HARNESS_H
#define NNT_OP_HARNESS_H

#include "test_util.h"
#include "nntrainer/compute/backend.h"
#include "nntrainer/layer.h"

#define OH_MAX_PROPS 8
#define OH_MAX_IN 4

typedef struct oh_case {
  const char *type;                   /* registry name */
  const char *props[OH_MAX_PROPS];    /* "key=value", as a user writes them */
  const char *in[OH_MAX_IN];          /* input shapes "c:h:w" (or "w", "h:w") */
  unsigned batch;                     /* 0: 2 */
  unsigned outs;                      /* outputs the model reads (split, multiout); 0: 1 */
  double tol;                         /* against the reference; 0: 1e-5 */
  double fd_tol;                      /* finite differences; 0: 3e-3 */
  float fd_eps;                       /* the step; 0: 1e-2 */
  int distinct;                       /* inputs all apart by more than 2 steps (max-like) */
  int no_fd;                          /* the backward is not the forward's derivative by design */
  int keep_less;                      /* after finalize, the type's keep_less (as compile
                                       * calls it when only the layer reads its output) */
  const nnt_layer_ops *ops;           /* a test-only layer instead of type's */
  unsigned indices;                   /* > 0: inputs are indices in [0, indices), some with
                                       * fractions (embedding) */
} oh_case;

/* What a run found: failed != 0 and the first problem in msg. */
typedef struct oh_report {
  int failed;
  int skipped; /* the backend does not support an op of the layer: not run */
  char msg[512];
} oh_report;

/* The backends to test, into out; @return how many. The CPU backend, the
 * fake device (fake_device.h), and the Vulkan backend when this build has
 * one and the machine a device (with the validation layer on; the handle
 * is kept until oh_backends_release). */
#define OH_MAX_BACKENDS 4
unsigned oh_backends(const nnt_backend *out[OH_MAX_BACKENDS]);
/* Fails the test when the shared Vulkan instance's validation record holds
 * a message, then frees it (a later oh_backends opens a new one). The last
 * test of a file that used oh_backends calls it. */
void oh_backends_release(void);

/* A short name for messages: "conv2d filters=2 stride=2 [1:2:5:5]". */
const char *oh_case_name(const oh_case *c, char *buf, size_t n);

/* Run one case on be against the CPU reference. fd: also the finite
 * differences. A case whose layer uses an op be does not support is not
 * run: r->skipped = 1 and r->msg names the op. @return r->failed. */
int oh_run_case(const oh_case *c, const nnt_backend *be, int fd, oh_report *r);

/* The registered types with no case in cases[0..n): their names, comma
 * separated, in missing (empty when every type has one). */
void oh_missing_types(const oh_case *cases, size_t n, char *missing, size_t len);

/* Pieces of a test-only identity layer (one input, one output of the same
 * shape, no flags), to build layers with one defect each: the finalize,
 * a forward that copies in to out and a calc_derivative that copies d_out
 * to d_in, both through the context's kernels. */
int oh_same_finalize(nnt_layer *l, nnt_finalize_ctx *ctx, nnt_err *e);
int oh_copy_forward(nnt_layer *l, nnt_run_ctx *ctx);
int oh_copy_derivative(nnt_layer *l, nnt_run_ctx *ctx);

#endif
