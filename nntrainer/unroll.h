/* NNTrainer's recurrent realizer keys (unroll_for, recurrent_input,
 * recurrent_output, as_sequence) on the layer that ends a group of layers
 * unrolled over time: checking their values when set and their names once
 * the model is whole. The unrolling itself is part of the graph compile
 * (graph_impl.h, unroll.c). */
#ifndef NNT_UNROLL_H
#define NNT_UNROLL_H

#include <stddef.h>
#include "nntrainer/common.h"

struct nnt_model;

/* Whether key is one of the four (lowercase or not). */
int nnt_unroll_is_key(const char *key);
/* Check a value of one of the keys: unroll_for a positive integer; the
 * others a list of name or name(index) (as_sequence: one). The message
 * names the key. The layer keeps the string (its record of given keys),
 * which the compile reads. */
int nnt_unroll_check_value(const char *key, const char *value, nnt_err *e);
/* Check what can be checked before the graph exists, for every layer with
 * one of the keys: unroll_for is given; recurrent_input and
 * recurrent_output are both given, with as many connections each; each
 * names a layer of the model; as_sequence names the layer itself. On an
 * error *layer is the layer's name and *key the key at fault, and the
 * message says what without the layer or key. */
int nnt_unroll_check_model(const struct nnt_model *m, const char **layer, const char **key,
                           nnt_err *e);

#endif
