/* The finite-difference harness shared by the layer tests: run one layer
 * from its descriptor on malloc'd tensors, and compare calc_derivative and
 * calc_gradient with central differences of J = sum(out * R), or of the loss
 * for loss layers. */
#ifndef NNT_FD_HARNESS_H
#define NNT_FD_HARNESS_H

#include "test_util.h"
#include "nntrainer/layer.h"

typedef struct fd_harness {
  nnt_layer *l;
  nnt_finalize_ctx fc;
  nnt_run_ctx ctx;
  nnt_tensor in, out, din, dout, label, w[NNT_MAX_WEIGHTS], gw[NNT_MAX_WEIGHTS],
      scratch[NNT_MAX_SCRATCH];
  float *r; /* the objective's weights */
  nnt_tensor losst; /* ctx.loss: one float, lossv */
  float lossv;
  int loss;
} fd_harness;

/* distinct: inputs all different and apart by more than the step (for max);
 * otherwise random, away from 0 so relu's kink is not straddled. */
void fd_setup(fd_harness *h, const char *type, const char *const *props, nnt_dim in,
              int distinct);
void fd_teardown(fd_harness *h);
double fd_objective(fd_harness *h);
/* For golden data: fd_setup, then the input x, the weights w[k] (the
 * layer's order), label (when given) in place of the random ones; forward;
 * d_out = r (NaN when r is NULL: a loss layer must not read it); then
 * calc_gradient and calc_derivative where the type has them. */
void fd_run_golden(fd_harness *h, const char *type, const char *const *props, nnt_dim in,
                   const float *x, const float *const *w, const float *r, const float *label);

/* Central differences, whatever holds x: set(ctx, i, v) puts v in x[i],
 * objective(ctx) evaluates. For each i, (J(x0[i] + eps) - J(x0[i] - eps)) /
 * 2 eps in double against analytic[i], x[i] put back to x0[i] after.
 * @return 0 when every |numeric - analytic| / max(1, |numeric|) <= tol,
 * otherwise 1 with the first disagreement ("<layer> <what>[i]: ...") in msg. */
typedef struct fd_target {
  void (*set)(void *ctx, size_t i, float v);
  double (*objective)(void *ctx);
  void *ctx;
} fd_target;
int fd_compare(const char *layer, const char *what, const float *x0, const float *analytic,
               size_t n, const fd_target *t, float eps, double tol, char *msg, size_t msg_len);
void fd_check(const char *what, float *x, const float *analytic, size_t n, fd_harness *h,
              float eps, double tol);
/* Forward; dX and the gradients filled with junk (the layer must overwrite
 * them); backward; then dX and every weight gradient against differences.
 * want_out, when given, must equal the output shape. */
void fd_layer_check(const char *type, const char *const *props, nnt_dim in,
                    const nnt_dim *want_out, float eps, double tol, int distinct);

#endif
