/* Writing every tensor of the training plan to a folder, for debugging with
 * memory_optimization=false (where every tensor keeps its value). */
#include "nntrainer/model_impl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Tensor names carry '/' and ':'; file names get '_' instead. */
static void file_name(char *out, size_t n, const char *name) {
  size_t i = 0;
  for (; name[i] && i + 1 < n; i++)
    out[i] = (name[i] == '/' || name[i] == ':' || name[i] == ' ') ? '_' : name[i];
  out[i] = '\0';
}

static int dump_one(FILE *idx, const char *dir, const char *name, const char *kind,
                    const float *data, size_t floats, nnt_err *e) {
  char fname[256], path[4096];
  file_name(fname, sizeof fname, name);
  snprintf(path, sizeof path, "%s/%s.raw", dir, fname);
  FILE *f = fopen(path, "wb");
  if (!f)
    return nnt_err_set(e, NNT_ERR_IO, "dump: cannot write '%s': %s", path, strerror(errno));
  int ok = fwrite(data, sizeof(float), floats, f) == floats;
  ok = (fclose(f) == 0) && ok;
  if (!ok)
    return nnt_err_set(e, NNT_ERR_IO, "dump: cannot write '%s'", path);
  fprintf(idx, "%s.raw\t%s\t%s\t%zu\n", fname, name, kind, floats);
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
  snprintf(path, sizeof path, "%s/index.tsv", dir);
  FILE *idx = fopen(path, "w");
  if (!idx)
    return nnt_err_set(e, NNT_ERR_IO, "dump: cannot write '%s': %s", path, strerror(errno));
  fprintf(idx, "file\ttensor\tkind\tfloats\n");
  int rc = NNT_OK;
  for (size_t i = 0; !rc && i < m->n_w; i++) {
    char name[NNT_NAME_MAX + 40];
    snprintf(name, sizeof name, "%s:%s", m->nodes[m->w_node[i]].layer->name,
             m->wspec[i].name);
    rc = dump_one(idx, dir, name, "weight", m->w[i].data, nnt_dim_len(m->wspec[i].dim), e);
  }
  for (size_t i = 0; !rc && i < g->n; i++)
    rc = dump_one(idx, dir, g->t[i].name, nnt_tkind_name(g->t[i].kind),
                  nnt_mgr_data(g, (int)i), g->t[i].bytes / sizeof(float), e);
  if (fclose(idx) && !rc)
    rc = nnt_err_set(e, NNT_ERR_IO, "dump: cannot write '%s'", path);
  return rc;
}
