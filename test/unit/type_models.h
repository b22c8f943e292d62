/* Small models, as INI text, that together use every registered layer
 * type, every loss (as a [Model] key and as a layer), sgd, adam and adamw,
 * clipping, a regularizer, the input layer's normalizations and an output
 * read by two layers. Each trains one epoch of 6 synthetic samples at
 * batch 3 and validates on 3. test_kops checks that every type ran in one
 * of them. */
#ifndef NNT_TYPE_MODELS_H
#define NNT_TYPE_MODELS_H

#include <stddef.h>

extern const char *const tu_type_models[];
extern const size_t tu_n_type_models;

#endif
