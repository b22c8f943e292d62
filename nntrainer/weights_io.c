/* NNTrainer's weight file (.bin), as NNTrainer's NeuralNetwork::save and
 * load define it (docs/weights.md): raw little-endian float32, no header.
 *
 *   weights      every weight of every node, in graph order
 *   "adam"       4 bytes, when the optimizer's type is exactly adam
 *   moments      Adam's first then second moment of each weight that has a
 *                gradient (a trainable weight of a layer that trains):
 *                batch-norm's moving statistics and the weights of a layer
 *                with trainable=false have none
 *   counters     epoch and iteration, uint32 each, in a save made for
 *                training
 *
 * A load accepts exactly the layouts this model can have (weights only;
 * weights + counters; weights + "adam" + moments + counters; weights +
 * "adam", what NNTrainer writes for an Adam model compiled for inference;
 * weights + "adam" + counters, what it writes after training has ended)
 * and refuses anything else, values that are not finite and counters no run
 * can write, before it changes anything. Saves go through nnt_file_save. */
#include "nntrainer/model_impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nntrainer/file_io.h"
#include "nntrainer/tensor_host.h"

static int is_adam(const nnt_model *m) { return m->opt && m->opt->type == NNT_OPT_ADAM; }

/* Whether weight i has Adam moments in the file: it has a gradient (and
 * so optimizer state in the model). */
static int has_moments(const nnt_model *m, size_t i) { return nnt_model_weight_trains(m, i); }

static const char *layer_of(const nnt_model *m, size_t i) {
  return m->nodes[m->w_node[i]].layer->name;
}

static size_t wlen(const nnt_model *m, size_t i) { return nnt_dim_len(m->wspec[i].dim); }

/* Whether the model holds Adam's two moments (the optimizer state exists:
 * it is made at the first step or by a load). */
static int has_state(const nnt_model *m) { return m->opt_pool && m->opt_slots == 2; }

/* The index of the first value of p[0..n) that is not finite, or n. */
static size_t first_bad(const float *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(p[i]))
      return i;
  return n;
}

static void bswap_floats(void *p, size_t n) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  uint32_t *u = p;
  for (size_t i = 0; i < n; i++)
    u[i] = __builtin_bswap32(u[i]);
#else
  (void)p, (void)n;
#endif
}

/* ---- layouts -------------------------------------------------------- */

enum { L_WEIGHTS, L_COUNTERS, L_ADAM, L_TAG, L_TAG_COUNTERS, L_COUNT };

typedef struct layout {
  size_t bytes;
  int tag, moments, counters;
  const char *what;
} layout;

static void layouts(const nnt_model *m, layout out[L_COUNT]) {
  size_t w = m->wpool_floats * sizeof(float), mom = 0;
  for (size_t i = 0; i < m->n_w; i++)
    if (has_moments(m, i))
      mom += 2 * wlen(m, i) * sizeof(float);
  out[L_WEIGHTS] = (layout){w, 0, 0, 0, "weights only"};
  out[L_COUNTERS] = (layout){w + 8, 0, 0, 1, "with the epoch and iteration counters"};
  out[L_ADAM] = (layout){w + 4 + mom + 8, 1, 1, 1, "with Adam's moments and the counters"};
  out[L_TAG] = (layout){w + 4, 1, 0, 0, "with the 'adam' tag alone"};
  /* NNTrainer's save after training has ended: its gradients (and with
   * them the moments) are gone, the tag and the counters are written */
  out[L_TAG_COUNTERS] = (layout){w + 4 + 8, 1, 0, 1, "with the 'adam' tag and the counters"};
}

/* ---- save ----------------------------------------------------------- */

typedef struct save_job {
  const nnt_model *m;
  int with_state;
} save_job;

static int put_zeros(FILE *f, size_t n) {
  static const float zero[256];
  for (size_t k; n; n -= k) {
    k = n < 256 ? n : 256;
    if (fwrite(zero, sizeof(float), k, f) != k)
      return 0;
  }
  return 1;
}

static int write_bin(FILE *f, void *ud, nnt_err *e) {
  const save_job *j = ud;
  const nnt_model *m = j->m;
  /* the values are staged through the buffer (the mapped view when it is
   * host memory); write errors are the stream's, seen by nnt_file_save */
  int rc = NNT_OK;
  for (size_t i = 0; !rc && !ferror(f) && i < m->n_w; i++)
    rc = nnt_tensor_fwrite(f, &m->w[i], e);
  if (rc || !j->with_state)
    return rc;
  int ok = !ferror(f);
  if (ok && is_adam(m)) {
    ok = fwrite("adam", 1, 4, f) == 4;
    for (size_t i = 0; !rc && ok && i < m->n_w; i++)
      for (unsigned s = 0; !rc && ok && s < 2 && has_moments(m, i); s++) {
        if (has_state(m)) {
          /* only an address in the state's buffer, which exists here */
          nnt_tensor t = nnt_model_state_tensor(m, s, i);
          rc = nnt_tensor_fwrite(f, &t, e), ok = !ferror(f);
        } else {
          ok = put_zeros(f, wlen(m, i));
        }
      }
  }
  uint8_t c[8];
  uint32_t v[2] = {m->epoch_idx, m->iter};
  for (int k = 0; k < 8; k++)
    c[k] = (uint8_t)(v[k / 4] >> (8 * (k % 4)));
  if (!rc && ok)
    fwrite(c, 1, 8, f);
  return rc;
}

/* A value that is not finite must not replace good weights on disk. */
static int check_before_save(const nnt_model *m, const char *path, int with_state,
                             nnt_err *e) {
  size_t k;
  float v;
  int rc;
  for (size_t i = 0; i < m->n_w; i++) {
    if ((rc = nnt_tensor_find_nonfinite(&m->w[i], &k, &v, e)))
      return rc;
    if (k < wlen(m, i))
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "save: not writing '%s': layer '%s' weight '%s' holds %g at index "
                         "%zu (training diverged?); the file on disk is left as it was",
                         path, layer_of(m, i), m->wspec[i].name, v, k);
  }
  for (size_t i = 0; with_state && is_adam(m) && has_state(m) && i < m->n_w; i++)
    for (unsigned s = 0; s < 2 && has_moments(m, i); s++) {
      nnt_tensor t = nnt_model_state_tensor(m, s, i);
      if ((rc = nnt_tensor_find_nonfinite(&t, &k, &v, e)))
        return rc;
      if (k < wlen(m, i))
        return nnt_err_set(e, NNT_ERR_INVAL,
                           "save: not writing '%s': Adam's %s moment of layer '%s' weight "
                           "'%s' holds %g at index %zu; the file on disk is left as it was",
                           path, s ? "second" : "first", layer_of(m, i), m->wspec[i].name, v,
                           k);
    }
  return NNT_OK;
}

int nnt_model_save_weights(nnt_model *m, const char *path, int with_state, nnt_err *e) {
  if (!m->initialized)
    return nnt_err_set(e, NNT_ERR_INVAL, "save: initialize the model first");
  if (!path || !path[0])
    return nnt_err_set(e, NNT_ERR_INVAL, "save: no path given");
  int rc = check_before_save(m, path, with_state, e);
  if (rc)
    return rc;
  save_job j = {m, with_state};
  return nnt_file_save(path, "save", write_bin, &j, e);
}

/* ---- load ----------------------------------------------------------- */

/* Read the whole file (size bytes) into buf; a file that changed size
 * since it was measured is an error. */
static int read_exact(int fd, const char *path, uint8_t *buf, size_t size, nnt_err *e) {
  size_t got = 0;
  while (got < size) {
    ssize_t r = read(fd, buf + got, size - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return nnt_err_set(e, NNT_ERR_IO, "load: cannot read '%s': %s", path, strerror(errno));
    if (r == 0)
      return nnt_err_set(e, NNT_ERR_IO,
                         "load: '%s' is truncated: it shrank to %zu bytes while being read "
                         "(%zu expected)",
                         path, got, size);
    got += (size_t)r;
  }
  uint8_t extra;
  ssize_t r;
  while ((r = read(fd, &extra, 1)) < 0 && errno == EINTR)
    ;
  if (r > 0)
    return nnt_err_set(e, NNT_ERR_IO, "load: '%s' grew while being read (%zu bytes expected)",
                       path, size);
  return NNT_OK;
}

static int size_mismatch(const nnt_model *m, const char *path, uint64_t size,
                         const layout *L, nnt_err *e) {
  const char *why = size < L[L_WEIGHTS].bytes
                        ? "shorter than the weights: truncated, or made for a smaller model"
                        : "made for another model, or with bytes after the data";
  return nnt_err_set(e, NNT_ERR_IO,
                     "load: '%s' has %llu bytes (%s); a weight file of this model (%zu "
                     "weights in %zu tensors) has %zu bytes (%s), %zu (%s), %zu (%s), %zu "
                     "(%s) or %zu (%s)",
                     path, (unsigned long long)size, why, m->wpool_floats, m->n_w,
                     L[L_WEIGHTS].bytes, L[L_WEIGHTS].what, L[L_COUNTERS].bytes,
                     L[L_COUNTERS].what, L[L_ADAM].bytes, L[L_ADAM].what, L[L_TAG].bytes,
                     L[L_TAG].what, L[L_TAG_COUNTERS].bytes, L[L_TAG_COUNTERS].what);
}

/* Check the values of a file that has the sizes of layout L. */
static int check_file(const nnt_model *m, const char *path, const uint8_t *buf,
                      const layout *L, nnt_err *e) {
  const float *w = (const float *)buf;
  size_t at = 0;
  for (size_t i = 0; i < m->n_w; i++) {
    size_t n = wlen(m, i), k = first_bad(w + at, n);
    if (k < n)
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "load: '%s': layer '%s' weight '%s' holds %g at index %zu (byte %zu "
                         "of the file)",
                         path, layer_of(m, i), m->wspec[i].name, w[at + k], k,
                         (at + k) * sizeof(float));
    at += n;
  }
  size_t off = at * sizeof(float);
  if (L->tag && memcmp(buf + off, "adam", 4))
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "load: '%s': expected the tag 'adam' after the weights (byte %zu), found "
                       "bytes %02x %02x %02x %02x",
                       path, off, buf[off], buf[off + 1], buf[off + 2], buf[off + 3]);
  off += L->tag ? 4 : 0;
  for (size_t i = 0; L->moments && i < m->n_w; i++) {
    if (!has_moments(m, i))
      continue;
    size_t n = wlen(m, i);
    const float *mo = (const float *)(buf + off);
    for (unsigned s = 0; s < 2; s++, mo += n) {
      size_t k = first_bad(mo, n);
      if (k == n && s == 1)
        for (k = 0; k < n && mo[k] >= 0; k++)
          ;
      if (k < n)
        return nnt_err_set(e, NNT_ERR_INVAL,
                           "load: '%s': Adam's %s moment of layer '%s' weight '%s' holds %g "
                           "at index %zu (byte %zu of the file)%s",
                           path, s ? "second" : "first", layer_of(m, i), m->wspec[i].name,
                           mo[k], k, (size_t)((const uint8_t *)(mo + k) - buf),
                           isfinite(mo[k]) ? ": a mean of squares is never negative" : "");
    }
    off += 2 * n * sizeof(float);
  }
  if (L->counters) {
    uint32_t c[2] = {0, 0};
    for (int k = 0; k < 8; k++)
      c[k / 4] |= (uint32_t)buf[off + k] << (8 * (k % 4));
    /* every finished epoch takes an iteration at least; NNTrainer's save
     * after training counts one epoch past the last */
    if ((uint64_t)c[0] > (uint64_t)c[1] + 1)
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "load: '%s': its counters say %u epochs after %u iterations (bytes "
                         "%zu to %zu); no run writes that",
                         path, c[0], c[1], off, off + 8);
    if (c[0] == UINT32_MAX || c[1] == UINT32_MAX)
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "load: '%s': its %s counter is at its largest value (%u); training "
                         "could not continue from it",
                         path, c[0] == UINT32_MAX ? "epoch" : "iteration", UINT32_MAX);
  }
  return NNT_OK;
}

/* The moments of the file at buf + off in a new optimizer pool (the
 * manager's persistent pool, a buffer of the model's backend): NNT_OK and
 * *out, or an error. */
static int moments_pool(nnt_model *m, const uint8_t *buf, size_t off, nnt_mgr *out,
                        nnt_err *e) {
  int rc = nnt_model_plan_opt_state(m, 2, out, e);
  nnt_buffer *pool = out->buf;
  size_t stride = nnt_model_opt_stride(m, 2);
  for (size_t i = 0; !rc && i < m->n_w; i++) {
    if (!has_moments(m, i))
      continue;
    size_t n = wlen(m, i), at = m->opt_off[i]; /* set by the plan */
    for (unsigned s = 0; !rc && s < 2; s++, off += n * sizeof(float))
      rc = pool->type->set(pool, (s * stride + at) * sizeof(float), buf + off,
                           n * sizeof(float), e);
  }
  if (rc)
    nnt_mgr_free(out);
  return rc;
}

/* The file's packed weights into the weight pool: at once, or weight by
 * weight where a chunk left gaps in the pool. */
static int put_weights(nnt_model *m, const uint8_t *buf, size_t w_bytes, nnt_err *e) {
  if (m->wmgr.arena_bytes == w_bytes)
    return m->wbuf->type->set(m->wbuf, 0, buf, w_bytes, e);
  int rc = NNT_OK;
  for (size_t i = 0, off = 0; !rc && i < m->n_w; off += wlen(m, i++) * sizeof(float))
    rc = nnt_tensor_set(&m->w[i], 0, (const float *)(const void *)(buf + off), wlen(m, i), e);
  return rc;
}

int nnt_model_load_weights(nnt_model *m, const char *path, nnt_err *e) {
  if (!m->initialized)
    return nnt_err_set(e, NNT_ERR_INVAL, "load: initialize the model first");
  if (!path || !path[0])
    return nnt_err_set(e, NNT_ERR_INVAL, "load: no path given");
  layout L[L_COUNT];
  layouts(m, L);
  int fd;
  uint64_t size;
  int rc = nnt_file_open_regular(path, "load", &fd, &size, e);
  if (rc)
    return rc;
  int which = -1;
  for (int k = 0; k < L_COUNT && which < 0; k++)
    if (size == L[k].bytes)
      which = k;
  if (which < 0) {
    close(fd);
    return size_mismatch(m, path, size, L, e);
  }
  const layout *l = &L[which];
  /* the whole file is staged and checked: a bad file changes nothing */
  uint8_t *buf = nnt_malloc(l->bytes + 1);
  if (!buf) {
    close(fd);
    return nnt_err_set(e, NNT_ERR_NOMEM, "load: out of memory reading '%s' (%zu bytes)", path,
                       l->bytes);
  }
  rc = read_exact(fd, path, buf, l->bytes, e);
  close(fd);
  size_t w_bytes = L[L_WEIGHTS].bytes, mom_off = w_bytes + 4;
  if (!rc) {
    bswap_floats(buf, m->wpool_floats);
    if (l->moments)
      bswap_floats(buf + mom_off, (l->bytes - mom_off - 8) / sizeof(float));
    rc = check_file(m, path, buf, l, e);
  }
  nnt_mgr pool;
  nnt_mgr_init(&pool);
  if (!rc && l->moments && is_adam(m) && nnt_optimizer_state_count(m->opt) == 2 &&
      moments_pool(m, buf, mom_off, &pool, NULL))
    rc = nnt_err_set(e, NNT_ERR_NOMEM, "load: out of memory for the optimizer state of '%s'",
                     path);
  /* the weights go in through the buffer; a backend that cannot take them
   * fails here, before anything else changes */
  if (!rc && w_bytes && (rc = put_weights(m, buf, w_bytes, e)))
    nnt_mgr_free(&pool);
  if (rc) {
    nnt_free(buf);
    return rc;
  }
  /* commit: the model now holds the file's state; what the file lacks
   * starts afresh (moments of other weights would not fit these) */
  nnt_mgr_free(&m->omgr);
  m->omgr = pool;
  m->obuf = pool.buf;
  m->opt_pool = pool.arena;
  m->opt_slots = pool.buf ? 2 : 0;
  m->opt_stride = nnt_model_opt_stride(m, 2);
  m->epoch_idx = m->iter = 0;
  if (l->counters) {
    const uint8_t *c = buf + l->bytes - 8;
    m->epoch_idx = (uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16 |
                   (uint32_t)c[3] << 24;
    m->iter = (uint32_t)c[4] | (uint32_t)c[5] << 8 | (uint32_t)c[6] << 16 | (uint32_t)c[7] << 24;
  }
  nnt_free(buf);
  return NNT_OK;
}
