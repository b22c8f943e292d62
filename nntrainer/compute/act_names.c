/* Activation names and what each one's backward needs: facts about the
 * functions themselves, shared by every backend and the layers. */
#include "nntrainer/compute/kernels.h"

#include <stddef.h>

static const char *const act_names[NNT_ACT__COUNT] = {
    "none", "relu", "leaky_relu", "sigmoid", "tanh", "softmax",
    "swish", "gelu", "elu", "selu", "softplus", "mish"};

/* Look an activation up by name, case-insensitively. */
int nnt_act_from_name(const char *name, nnt_act *out) {
  for (int i = 0; i < NNT_ACT__COUNT; i++)
    if (nnt_streq(name, act_names[i])) {
      *out = (nnt_act)i;
      return NNT_OK;
    }
  return NNT_ERR_INVAL;
}

/* The lowercase name of a; a static string. */
const char *nnt_act_name(nnt_act a) {
  return (unsigned)a < NNT_ACT__COUNT ? act_names[a] : "?";
}

/* Whether dx can be computed from y alone (the activation may run in place). */
int nnt_act_bwd_needs_output_only(nnt_act a) {
  switch (a) {
  case NNT_ACT_NONE:
  case NNT_ACT_RELU:
  case NNT_ACT_LEAKY_RELU:
  case NNT_ACT_SIGMOID:
  case NNT_ACT_TANH:
  case NNT_ACT_SOFTMAX:
    return 1;
  default:
    return 0;
  }
}

int nnt_act_bwd_sign_only(nnt_act a) { return a == NNT_ACT_RELU || a == NNT_ACT_LEAKY_RELU; }
