/* Private to the graph compile (graph.c) and its realizers (unroll.c): the
 * list of nodes before sorting, with their resolved inputs. */
#ifndef NNT_GRAPH_IMPL_H
#define NNT_GRAPH_IMPL_H

#include "nntrainer/model_impl.h"

/* A layer in section order before sorting, with its resolved inputs. */
typedef struct gnode {
  nnt_layer *l;
  unsigned n_in;
  unsigned in[NNT_MAX_IO];     /* index into the gnode list, or NNT_NO_NODE */
  unsigned in_idx[NNT_MAX_IO];
  int removed;                 /* replaced by a loss node, or unrolled */
  int fixed;                   /* inputs set by the compile itself */
  int placed;
  unsigned head;               /* the user's layer whose chain this node is in */
} gnode;

/* unroll.c: a recurrent connection of an unrolled group, kept for the shape
 * check after finalize: input slot `slot` of step 1's copy (l1) reads the
 * recurrent output; step 0's copy (l0) reads the group's outside input. */
typedef struct nnt_unroll_link {
  const nnt_layer *l0, *l1, *carrier;
  unsigned slot, pair;
} nnt_unroll_link;

typedef struct build {
  gnode *g;
  size_t n, cap;
  nnt_name_index alias; /* a layer's name -> the end of its realized chain */
  nnt_name_index names; /* every node's name -> its node (the last such) */
  nnt_model *m;
  nnt_unroll_link *links;
  size_t n_links;
} build;

/* Add a node for a new layer of type named name, owned by the model; with
 * input_prev its one input is the node before it. */
int nnt_graph_realize(build *b, const char *type, const char *name, int input_prev,
                      nnt_layer **out, nnt_err *e);

/* unroll.c: after input_layers are resolved, replace each group marked by
 * unroll_for with its copies per time step (see unroll.c). */
int nnt_unroll_realize(build *b, nnt_err *e);
/* unroll.c: after finalize, each recurrent output has the shape of the
 * input it stands for. */
int nnt_unroll_check_shapes(const build *b, nnt_err *e);

#endif
