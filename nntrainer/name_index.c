/* The case-insensitive name map of name_index.h: open addressing with
 * linear probing, kept at most half full, over an FNV-1a hash of the
 * lowercased name. */
#include "nntrainer/name_index.h"

#include <ctype.h>
#include <stdint.h>

#include "nntrainer/common.h"

static size_t hash_name(const char *s) {
  uint64_t h = 1469598103934665603ULL;
  for (; *s; s++) {
    h ^= (unsigned char)tolower((unsigned char)*s);
    h *= 1099511628211ULL;
  }
  return (size_t)(h ^ (h >> 29));
}

void nnt_name_index_free(nnt_name_index *x) {
  nnt_free(x->name);
  nnt_free(x->value);
  x->name = NULL;
  x->value = NULL;
  x->cap = x->used = 0;
}

/* The slot holding name, or the empty slot where it would go. */
static size_t find_slot(const nnt_name_index *x, const char *name) {
  size_t mask = x->cap - 1, i = hash_name(name) & mask;
  while (x->name[i] && !nnt_streq(x->name[i], name))
    i = (i + 1) & mask;
  return i;
}

unsigned nnt_name_index_get(const nnt_name_index *x, const char *name) {
  if (!x->cap || !name)
    return NNT_NAME_NONE;
  size_t i = find_slot(x, name);
  return x->name[i] ? x->value[i] : NNT_NAME_NONE;
}

static int grow(nnt_name_index *x) {
  size_t cap = x->cap ? 2 * x->cap : 64;
  if (cap > SIZE_MAX / sizeof(const char *))
    return -1;
  nnt_name_index bigger = {nnt_calloc(cap, sizeof(const char *)),
                           nnt_calloc(cap, sizeof(unsigned)), cap, x->used};
  if (!bigger.name || !bigger.value) {
    nnt_name_index_free(&bigger);
    return -1;
  }
  for (size_t i = 0; i < x->cap; i++)
    if (x->name[i]) {
      size_t j = find_slot(&bigger, x->name[i]);
      bigger.name[j] = x->name[i];
      bigger.value[j] = x->value[i];
    }
  nnt_name_index_free(x);
  *x = bigger;
  return 0;
}

int nnt_name_index_put(nnt_name_index *x, const char *name, unsigned value, unsigned *old) {
  if (x->cap) {
    size_t i = find_slot(x, name);
    if (x->name[i]) {
      if (old)
        *old = x->value[i];
      return 1;
    }
  }
  if (2 * (x->used + 1) > x->cap && grow(x))
    return -1;
  size_t i = find_slot(x, name);
  x->name[i] = name;
  x->value[i] = value;
  x->used++;
  return 0;
}
