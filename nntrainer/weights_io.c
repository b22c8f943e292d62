/* NNTrainer's weight file: raw little-endian float32 weights in graph order;
 * a save made for training adds a trailer: the 4-byte tag "adam" and both
 * moments of every weight when the optimizer is Adam, then the epoch and
 * iteration counters (uint32 each). Saves go through a temporary file and a
 * rename, so an interrupted save leaves the previous file intact. */
#include "nntrainer/model_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int is_adam(const nnt_model *m) {
  return m->opt && m->opt->type == NNT_OPT_ADAM;
}

static int write_all(FILE *f, const void *p, size_t n) {
  return fwrite(p, 1, n, f) == n;
}

int nnt_model_save_weights(nnt_model *m, const char *path, int with_state,
                           nnt_err *e) {
  if (!m->initialized)
    return nnt_err_set(e, NNT_ERR_INVAL, "save: initialize the model first");
  if (!path || !path[0])
    return nnt_err_set(e, NNT_ERR_INVAL, "save: no path given");
  size_t n = strlen(path);
  char *tmp = nnt_malloc(n + 16);
  if (!tmp)
    return nnt_err_set(e, NNT_ERR_NOMEM, "save: out of memory");
  snprintf(tmp, n + 16, "%s.tmpXXXXXX", path);
  int fd = mkstemp(tmp);
  if (fd < 0) {
    int rc = nnt_err_set(e, NNT_ERR_IO, "save: cannot create a file next to '%s': %s", path,
                         strerror(errno));
    nnt_free(tmp);
    return rc;
  }
  FILE *f = fdopen(fd, "wb");
  int ok = f != NULL;
  for (size_t i = 0; ok && i < m->n_w; i++)
    ok = write_all(f, m->w[i].data, nnt_dim_len(m->wspec[i].dim) * sizeof(float));
  if (ok && with_state) {
    if (is_adam(m)) {
      ok = write_all(f, "adam", 4);
      for (size_t i = 0; ok && i < m->n_w; i++) {
        size_t len = nnt_dim_len(m->wspec[i].dim);
        size_t off = (size_t)(m->w[i].data - m->wpool);
        for (unsigned s = 0; ok && s < 2; s++) {
          if (m->opt_pool && m->opt_slots == 2) {
            ok = write_all(f, m->opt_pool + s * m->wpool_floats + off, len * sizeof(float));
          } else {
            float z = 0;
            for (size_t j = 0; ok && j < len; j++)
              ok = write_all(f, &z, sizeof z);
          }
        }
      }
    }
    uint32_t counters[2] = {m->epoch_idx, m->iter};
    if (ok)
      ok = write_all(f, counters, sizeof counters);
  }
  if (ok)
    ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
  int err = errno;
  if (f)
    ok = (fclose(f) == 0) && ok;
  else
    close(fd);
  if (ok && rename(tmp, path) != 0) {
    err = errno;
    ok = 0;
  }
  int rc = NNT_OK;
  if (!ok) {
    unlink(tmp);
    rc = nnt_err_set(e, NNT_ERR_IO, "save: cannot write '%s': %s", path, strerror(err));
  }
  nnt_free(tmp);
  return rc;
}

int nnt_model_load_weights(nnt_model *m, const char *path, nnt_err *e) {
  if (!m->initialized)
    return nnt_err_set(e, NNT_ERR_INVAL, "load: initialize the model first");
  FILE *f = fopen(path, "rb");
  if (!f)
    return nnt_err_set(e, NNT_ERR_IO, "load: cannot open weight file '%s': %s", path,
                       strerror(errno));
  /* read everything into a staging buffer first: a bad file changes nothing */
  size_t need = m->wpool_floats * sizeof(float);
  float *stage = nnt_malloc(need + 1);
  if (!stage) {
    fclose(f);
    return nnt_err_set(e, NNT_ERR_NOMEM, "load: out of memory");
  }
  size_t got = fread(stage, 1, need, f);
  if (got != need) {
    fclose(f);
    nnt_free(stage);
    return nnt_err_set(e, NNT_ERR_IO,
                       "load: weight file '%s' is truncated: the model has %zu bytes of "
                       "weights, the file %zu",
                       path, need, got);
  }
  /* optional trailer */
  float *moments = NULL;
  uint32_t counters[2];
  int have_counters = 0;
  char tag[4];
  long pos = ftell(f);
  if (is_adam(m) && fread(tag, 1, 4, f) == 4 && !memcmp(tag, "adam", 4)) {
    moments = nnt_calloc(2 * m->wpool_floats + 1, sizeof(float));
    int ok = moments != NULL;
    for (size_t i = 0; ok && i < m->n_w; i++) {
      size_t len = nnt_dim_len(m->wspec[i].dim);
      size_t off = (size_t)(m->w[i].data - m->wpool);
      for (unsigned s = 0; ok && s < 2; s++)
        ok = fread(moments + s * m->wpool_floats + off, sizeof(float), len, f) == len;
    }
    if (!ok) {
      nnt_free(moments);
      moments = NULL;
      fseek(f, pos, SEEK_SET);
    }
  } else {
    fseek(f, pos, SEEK_SET);
  }
  if (fread(counters, sizeof counters, 1, f) == 1)
    have_counters = 1;
  fclose(f);
  memcpy(m->wpool, stage, need);
  nnt_free(stage);
  if (moments) {
    nnt_free(m->opt_pool);
    m->opt_pool = moments;
    m->opt_slots = 2;
  }
  if (have_counters) {
    m->epoch_idx = counters[0];
    m->iter = counters[1];
  }
  return NNT_OK;
}
