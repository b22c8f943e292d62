/* A case-insensitive map from names to small integers (layer indices),
 * so that looking names up stays linear in the size of a model: graph
 * compile resolves every input_layers name through it, and adding a layer
 * checks its name against the others with it. The names are borrowed, not
 * copied: they must outlive the index. */
#ifndef NNT_NAME_INDEX_H
#define NNT_NAME_INDEX_H

#include <stddef.h>

typedef struct nnt_name_index {
  const char **name; /* NULL: an empty slot */
  unsigned *value;
  size_t cap, used;  /* cap is 0 or a power of two */
} nnt_name_index;

#define NNT_NAME_NONE ((unsigned)-1)

/* Free what the index holds; it is then empty and may be used again. */
void nnt_name_index_free(nnt_name_index *x);
/* The value of name (compared without case), or NNT_NAME_NONE. */
unsigned nnt_name_index_get(const nnt_name_index *x, const char *name);
/* Add name -> value. When the name is there already, nothing changes and
 * *old (if not NULL) gets its value. @return 0, 1 when the name was there,
 * or -1 when memory ran out (the index is unchanged). */
int nnt_name_index_put(nnt_name_index *x, const char *name, unsigned value, unsigned *old);

#endif
