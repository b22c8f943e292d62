/* Writing every tensor of the training plan to a folder, for debugging with
 * memory_optimization=false (where every tensor keeps its value). Each file
 * is saved atomically (nnt_file_save), the index last. */
#include "nntrainer/model_impl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "nntrainer/file_io.h"
#include "nntrainer/tensor_host.h"

/* Tensor names carry '/' and ':'; file names get '_' instead. */
static void file_name(char *out, size_t n, const char *name) {
  size_t i = 0;
  for (; name[i] && i + 1 < n; i++)
    out[i] = (name[i] == '/' || name[i] == ':' || name[i] == ' ') ? '_' : name[i];
  out[i] = '\0';
}

/* The k-th tensor of a dump: the weights, then the training plan's. */
typedef struct dump_item {
  char name[NNT_NAME_MAX + 40];
  const char *kind;
  nnt_tensor t; /* its values, read through the buffer */
  size_t floats;
} dump_item;

static void item(nnt_model *m, size_t k, dump_item *it) {
  if (k < m->n_w) {
    snprintf(it->name, sizeof it->name, "%s:%s", m->nodes[m->w_node[k]].layer->name,
             m->wspec[k].name);
    it->kind = "weight";
    it->t = m->w[k];
    it->floats = nnt_dim_len(m->wspec[k].dim);
    return;
  }
  nnt_mgr *g = &m->mgr[NNT_MODE_TRAIN];
  size_t i = k - m->n_w;
  snprintf(it->name, sizeof it->name, "%s", g->t[i].name);
  it->kind = nnt_tkind_name(g->t[i].kind);
  it->floats = g->t[i].bytes / sizeof(float);
  it->t = nnt_mgr_bind(g, (int)i, nnt_dim_make(1, 1, 1, (unsigned)it->floats));
}

static int write_raw(FILE *f, void *ud, nnt_err *e) {
  const dump_item *it = ud;
  return nnt_tensor_fwrite(f, &it->t, e);
}

static int write_index(FILE *f, void *ud, nnt_err *e) {
  nnt_model *m = ud;
  (void)e;
  fprintf(f, "file\ttensor\tkind\tfloats\n");
  size_t n = m->n_w + m->mgr[NNT_MODE_TRAIN].n;
  for (size_t k = 0; k < n; k++) {
    dump_item it;
    char fname[256];
    item(m, k, &it);
    file_name(fname, sizeof fname, it.name);
    fprintf(f, "%s.raw\t%s\t%s\t%zu\n", fname, it.name, it.kind, it.floats);
  }
  return NNT_OK;
}

int nnt_model_dump(nnt_model *m, const char *dir, nnt_err *e) {
  if (!m->initialized)
    return nnt_err_set(e, NNT_ERR_INVAL, "dump: initialize the model first");
  nnt_mgr *g = &m->mgr[NNT_MODE_TRAIN];
  if (!g->planned)
    return nnt_err_set(e, NNT_ERR_INVAL, "dump: the model has not trained");
  if (mkdir(dir, 0777) && errno != EEXIST)
    return nnt_err_set(e, NNT_ERR_IO, "dump: cannot create '%s': %s", dir, strerror(errno));
  char path[4096];
  int rc = NNT_OK;
  for (size_t k = 0; !rc && k < m->n_w + g->n; k++) {
    dump_item it;
    char fname[256];
    item(m, k, &it);
    file_name(fname, sizeof fname, it.name);
    snprintf(path, sizeof path, "%s/%s.raw", dir, fname);
    rc = nnt_file_save(path, "dump", write_raw, &it, e);
  }
  if (!rc) {
    snprintf(path, sizeof path, "%s/index.tsv", dir);
    rc = nnt_file_save(path, "dump", write_index, m, e);
  }
  return rc;
}
