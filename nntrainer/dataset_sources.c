/* The four data sources behind nnt_dataset: a generator callback,
 * NNTrainer's raw float file, IDX image + label files (gzip or plain) and
 * seeded synthetic data. Each implements nnt_ds_src_ops (dataset_impl.h);
 * the queue and the producer thread live in dataset.c. */
#include "nntrainer/dataset_impl.h"

#include "nntrainer/file_io.h"
#include "nntrainer/philox.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zlib.h>

/* ------------------------------------------------------------------ */
/* Generator: the application's callback, once per sample.             */

typedef struct gen_src {
  nnt_ds_src base;
  nnt_datagen_cb cb;
  void *ud;
  size_t known; /* samples of an epoch that ended (0: none ended yet) */
} gen_src;

static int gen_prepare(nnt_ds_src *s, uint64_t seed, size_t *samples, nnt_err *e) {
  (void)s, (void)seed, (void)e;
  *samples = 0;
  return NNT_OK;
}

/* Any nonzero return is the callback's error, passed back unchanged
 * (whatever its value: it cannot be taken for one of ours, nor for the end
 * of data, which only *last says). As in NNTrainer's FuncDataProducer and
 * DataBuffer, the sample given with *last = true is used. */
static int gen_fetch(nnt_ds_src *s, size_t idx, float **in, float **label, bool *last,
                     nnt_err *e) {
  gen_src *g = (gen_src *)s;
  int rc = g->cb(in, label, last, g->ud);
  if (rc) {
    nnt_err_set(e, rc, "data generator callback returned %d at sample %zu", rc, idx);
    if (e)
      e->from_callback = 1;
    return rc;
  }
  if (*last) {
    if (idx + 1 > g->known)
      g->known = idx + 1;
    return NNT_OK;
  }
  /* an epoch that runs past the longest earlier one never sets *last */
  if (g->known && idx >= 2 * g->known + 1024)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "data generator callback gave %zu samples without setting *last "
                       "(an earlier epoch ended after %zu)",
                       idx + 1, g->known);
  return NNT_OK;
}

static void gen_destroy(nnt_ds_src *s) { nnt_free(s); }

static const nnt_ds_src_ops gen_ops = {
    .type = "generator",
    .sized = 0,
    .prepare = gen_prepare,
    .fetch = gen_fetch,
    .keys = NULL,
    .set_property = NULL,
    .destroy = gen_destroy,
};

int nnt_ds_src_generator(nnt_datagen_cb cb, void *user_data, nnt_ds_src **out, nnt_err *e) {
  if (!cb)
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: the data generator callback is NULL");
  gen_src *g = nnt_calloc(1, sizeof *g);
  if (!g)
    return nnt_err_set(e, NNT_ERR_NOMEM, "dataset: out of memory creating a generator source");
  g->base.ops = &gen_ops;
  g->base.name = "data generator";
  g->cb = cb;
  g->ud = user_data;
  *out = &g->base;
  return NNT_OK;
}

/* ------------------------------------------------------------------ */
/* NNTrainer's raw file: records of the input floats then the label     */
/* floats, float32 little-endian, no header.                            */
/*                                                                      */
/* Records are read with preadv straight into the batch slot, one call  */
/* per record in whatever order the permutation asks: no stdio buffer   */
/* wasted on random access, no copy, and a file that shrinks gives a    */
/* short read we report (mmap would give SIGBUS instead).               */

typedef struct file_src {
  nnt_ds_src base;
  char *path;
  int fd;
  size_t rec_bytes;
} file_src;

static void file_close(file_src *f) {
  if (f->fd >= 0)
    close(f->fd);
  f->fd = -1;
}

static int file_prepare(nnt_ds_src *s, uint64_t seed, size_t *samples, nnt_err *e) {
  file_src *f = (file_src *)s;
  (void)seed;
  /* reopen each time so that a file replaced between runs is seen */
  file_close(f);
  size_t in = 0, lab = 0;
  for (unsigned i = 0; i < s->shape.n_in; i++)
    in += s->shape.in_len[i];
  for (unsigned i = 0; i < s->shape.n_label; i++)
    lab += s->shape.label_len[i];
  f->rec_bytes = (in + lab) * sizeof(float);
  /* a FIFO, folder or device is refused, never waited on */
  uint64_t size;
  int rc = nnt_file_open_regular(f->path, "dataset", &f->fd, &size, e);
  if (rc) {
    f->fd = -1;
    return rc;
  }
  if (size % f->rec_bytes) {
    file_close(f);
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "dataset: '%s' has %llu bytes, not a whole number of %zu-byte records "
                       "(%zu input and %zu label floats each)",
                       f->path, (unsigned long long)size, f->rec_bytes, in, lab);
  }
  *samples = (size_t)(size / f->rec_bytes);
  return NNT_OK;
}

static int file_fetch(nnt_ds_src *s, size_t idx, float **in, float **label, bool *last,
                      nnt_err *e) {
  (void)last;
  file_src *f = (file_src *)s;
  struct iovec iov[2 * NNT_DS_MAX_STREAMS];
  int n = 0;
  for (unsigned i = 0; i < s->shape.n_in; i++, n++)
    iov[n] = (struct iovec){in[i], s->shape.in_len[i] * sizeof(float)};
  for (unsigned i = 0; i < s->shape.n_label; i++, n++)
    iov[n] = (struct iovec){label[i], s->shape.label_len[i] * sizeof(float)};
  off_t off = (off_t)(idx * f->rec_bytes);
  size_t left = f->rec_bytes;
  struct iovec *v = iov;
  while (left) {
    ssize_t got = preadv(f->fd, v, n, off);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return nnt_err_set(e, NNT_ERR_IO,
                         "dataset: cannot read record %zu of '%s' (bytes %lld to %lld): %s", idx,
                         f->path, (long long)(idx * f->rec_bytes),
                         (long long)((idx + 1) * f->rec_bytes),
                         got < 0 ? strerror(errno) : "the file is shorter than at prepare");
    left -= (size_t)got;
    off += got;
    /* a short read: step over the iovecs it filled */
    while (n && (size_t)got >= v->iov_len) {
      got -= (ssize_t)v->iov_len;
      v++, n--;
    }
    if (n) {
      v->iov_base = (char *)v->iov_base + got;
      v->iov_len -= (size_t)got;
    }
  }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  for (unsigned i = 0; i < s->shape.n_in + s->shape.n_label; i++) {
    float *p = i < s->shape.n_in ? in[i] : label[i - s->shape.n_in];
    size_t len = i < s->shape.n_in ? s->shape.in_len[i] : s->shape.label_len[i - s->shape.n_in];
    for (size_t j = 0; j < len; j++) {
      uint32_t u;
      memcpy(&u, &p[j], 4);
      u = __builtin_bswap32(u);
      memcpy(&p[j], &u, 4);
    }
  }
#endif
  return NNT_OK;
}

static const char *const file_keys[] = {"path", NULL};

/* path: another file, opened at the next prepare */
static int file_set_property(nnt_ds_src *s, const char *key, const char *value, nnt_err *e) {
  file_src *f = (file_src *)s;
  (void)key;
  if (!value || !value[0])
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: key 'path': empty value");
  char *p = nnt_strdup(value);
  if (!p)
    return nnt_err_set(e, NNT_ERR_NOMEM, "dataset: out of memory");
  file_close(f);
  nnt_free(f->path);
  f->path = p;
  s->name = p;
  return NNT_OK;
}

static void file_destroy(nnt_ds_src *s) {
  file_src *f = (file_src *)s;
  file_close(f);
  nnt_free(f->path);
  nnt_free(f);
}

static const nnt_ds_src_ops file_ops = {
    .type = "file",
    .sized = 1,
    .prepare = file_prepare,
    .fetch = file_fetch,
    .keys = file_keys,
    .set_property = file_set_property,
    .destroy = file_destroy,
};

int nnt_ds_src_file(const char *path, nnt_ds_src **out, nnt_err *e) {
  if (!path || !path[0])
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: no file path given");
  file_src *f = nnt_calloc(1, sizeof *f);
  char *p = nnt_strdup(path);
  if (!f || !p) {
    nnt_free(f), nnt_free(p);
    return nnt_err_set(e, NNT_ERR_NOMEM, "dataset: out of memory creating a file source");
  }
  f->base.ops = &file_ops;
  f->base.name = p;
  f->path = p;
  f->fd = -1;
  *out = &f->base;
  return NNT_OK;
}

/* ------------------------------------------------------------------ */
/* IDX: magic 00 00 <type> <ndims>, ndims big-endian uint32 sizes, then */
/* the values (big-endian). Images: type 0x08 (unsigned byte, scaled to */
/* [0,1]) or 0x0D (float); labels: type 0x08, one dimension. Both files */
/* are read whole at the first prepare; zlib reads gzip and plain files */
/* alike. Byte images stay bytes in memory (a quarter of floats).       */
/* Memory follows the data, not the header: a plain file must be as     */
/* long as its header says before anything is allocated, and a gzip     */
/* file's buffer grows as its data arrives.                             */

typedef struct idx_src {
  nnt_ds_src base;
  char *images, *labels;
  int loaded;
  uint8_t *img8; /* count * per bytes, or */
  float *imgf;   /* count * per floats (host order) */
  uint8_t *lab;  /* count class ids */
  size_t count, per;
} idx_src;

/* An open IDX file and what its header says. */
typedef struct idx_file {
  const char *path;
  gzFile g;
  int gzip;           /* compressed (else plain: size is the data's) */
  uint64_t size;      /* of the file on disk */
  uint8_t type;
  unsigned ndims;
  size_t count, per;  /* the first dimension; the product of the others */
  size_t data_bytes;  /* what the header announces after itself */
} idx_file;

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Read up to n bytes (n may pass INT_MAX); *got the count read, less than
 * n only at the end of the data. */
static int gz_read_all(gzFile g, const char *path, void *buf, size_t n, size_t *got,
                       nnt_err *e) {
  *got = 0;
  while (*got < n) {
    size_t want = n - *got;
    if (want > (1u << 30))
      want = 1u << 30;
    int r = gzread(g, (char *)buf + *got, (unsigned)want);
    if (r < 0) {
      int zerr;
      const char *msg = gzerror(g, &zerr);
      return nnt_err_set(e, NNT_ERR_IO, "dataset: cannot read '%s': %s", path,
                         zerr == Z_ERRNO ? strerror(errno) : msg);
    }
    if (!r)
      break;
    *got += (size_t)r;
  }
  return NNT_OK;
}

static int truncated(const char *path, size_t want, size_t have, nnt_err *e) {
  return nnt_err_set(e, NNT_ERR_INVAL,
                     "dataset: '%s' is truncated: its header announces %zu bytes of data, it "
                     "holds %zu",
                     path, want, have);
}

/* Open an IDX file (a regular file, without blocking) and read its header. */
static int idx_open(const char *path, idx_file *x, nnt_err *e) {
  memset(x, 0, sizeof *x);
  x->path = path;
  int fd;
  int rc = nnt_file_open_regular(path, "dataset", &fd, &x->size, e);
  if (rc)
    return rc;
  uint8_t magic[2] = {0, 0};
  x->gzip = pread(fd, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  x->g = gzdopen(fd, "rb"); /* owns fd from here */
  if (!x->g) {
    close(fd);
    return nnt_err_set(e, NNT_ERR_NOMEM, "dataset: out of memory opening '%s'", path);
  }
  uint8_t hdr[4 + 4 * 255];
  size_t got;
  rc = gz_read_all(x->g, path, hdr, 4, &got, e);
  if (!rc && got < 4)
    rc = nnt_err_set(e, NNT_ERR_INVAL, "dataset: '%s' is not an IDX file (shorter than a header)",
                     path);
  if (!rc && (hdr[0] || hdr[1] || !hdr[3] || (hdr[2] != 0x08 && hdr[2] != 0x0D)))
    rc = nnt_err_set(e, NNT_ERR_INVAL,
                     "dataset: '%s' is not an IDX file of bytes or floats: bad magic 0x%08x "
                     "(expected 0x000008NN or 0x00000DNN, NN the number of dimensions)",
                     path, be32(hdr));
  unsigned nd = hdr[3];
  if (!rc)
    rc = gz_read_all(x->g, path, hdr + 4, 4 * (size_t)nd, &got, e);
  if (!rc && got < 4 * (size_t)nd)
    rc = nnt_err_set(e, NNT_ERR_INVAL, "dataset: '%s': the IDX header is cut short", path);
  x->type = hdr[2];
  x->ndims = nd;
  x->count = be32(hdr + 4);
  x->per = 1;
  for (unsigned i = 1; !rc && i < nd; i++)
    if (__builtin_mul_overflow(x->per, (size_t)be32(hdr + 4 + 4 * i), &x->per))
      rc = nnt_err_set(e, NNT_ERR_INVAL, "dataset: '%s': IDX dimensions overflow", path);
  size_t esize = x->type == 0x0D ? 4 : 1;
  size_t values;
  if (!rc && (__builtin_mul_overflow(x->count, x->per, &values) ||
              __builtin_mul_overflow(values, esize, &x->data_bytes)))
    rc = nnt_err_set(e, NNT_ERR_INVAL, "dataset: '%s': IDX dimensions overflow", path);
  /* a plain file shows its length: refuse a lying header before any
   * allocation it would ask for */
  uint64_t hdr_bytes = 4 + 4 * (uint64_t)nd;
  if (!rc && !x->gzip && x->size - hdr_bytes < x->data_bytes)
    rc = truncated(path, x->data_bytes, (size_t)(x->size - hdr_bytes), e);
  if (rc) {
    gzclose(x->g);
    x->g = NULL;
  }
  return rc;
}

/* Read the data the header announces into a new buffer (*out, n bytes)
 * grown as the data arrives, so that a compressed file that holds less
 * than it announces fails as truncated having allocated about what it
 * holds, not what it claims. */
static int idx_body(idx_file *x, void **out, nnt_err *e) {
  size_t n = x->data_bytes, cap = n < ((size_t)1 << 20) ? n : (size_t)1 << 20, got = 0;
  uint8_t *buf = nnt_malloc(cap + 1);
  if (!buf)
    return nnt_err_set(e, NNT_ERR_NOMEM, "dataset: out of memory reading '%s'", x->path);
  for (;;) {
    size_t r;
    int rc = gz_read_all(x->g, x->path, buf + got, cap - got, &r, e);
    if (rc) {
      nnt_free(buf);
      return rc;
    }
    got += r;
    if (got < cap || cap == n)
      break;
    size_t grown = cap <= n / 2 ? 2 * cap : n;
    uint8_t *p = nnt_realloc(buf, grown + 1);
    if (!p) {
      nnt_free(buf);
      return nnt_err_set(e, NNT_ERR_NOMEM,
                         "dataset: out of memory reading '%s' (%zu of %zu bytes read)", x->path,
                         got, n);
    }
    buf = p;
    cap = grown;
  }
  if (got < n) {
    nnt_free(buf);
    return truncated(x->path, n, got, e);
  }
  *out = buf;
  return NNT_OK;
}

static void idx_unload(idx_src *x) {
  nnt_free(x->img8), nnt_free(x->imgf), nnt_free(x->lab);
  x->img8 = NULL, x->imgf = NULL, x->lab = NULL;
  x->loaded = 0;
}

static int idx_load(idx_src *x, nnt_err *e) {
  idx_file fi, fl;
  fl.g = NULL;
  int rc = idx_open(x->images, &fi, e);
  if (!rc)
    rc = idx_open(x->labels, &fl, e);
  if (!rc && (fl.type != 0x08 || fl.ndims != 1))
    rc = nnt_err_set(e, NNT_ERR_INVAL,
                     "dataset: '%s' is not an IDX label file: expected one dimension of "
                     "unsigned bytes (magic 0x00000801), found type 0x%02x with %u dimensions",
                     x->labels, fl.type, fl.ndims);
  if (!rc && fi.count != fl.count)
    rc = nnt_err_set(e, NNT_ERR_INVAL, "dataset: '%s' has %zu images but '%s' has %zu labels",
                     x->images, fi.count, x->labels, fl.count);
  void *img = NULL, *lab = NULL;
  if (!rc)
    rc = idx_body(&fi, &img, e);
  if (!rc)
    rc = idx_body(&fl, &lab, e);
  if (fi.g)
    gzclose(fi.g);
  if (fl.g)
    gzclose(fl.g);
  if (rc) {
    nnt_free(img);
    nnt_free(lab);
    return rc;
  }
  idx_unload(x);
  x->lab = lab;
  if (fi.type == 0x08) {
    x->img8 = img;
  } else { /* IDX floats are big-endian */
    x->imgf = img;
    for (size_t i = 0; i < fi.count * fi.per; i++) {
      uint32_t u = be32((const uint8_t *)&x->imgf[i]);
      memcpy(&x->imgf[i], &u, 4);
    }
  }
  x->count = fi.count;
  x->per = fi.per;
  x->loaded = 1;
  return NNT_OK;
}

static int idx_prepare(nnt_ds_src *s, uint64_t seed, size_t *samples, nnt_err *e) {
  idx_src *x = (idx_src *)s;
  (void)seed;
  const nnt_ds_shape *sh = &s->shape;
  if (sh->n_in != 1 || sh->n_label != 1)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "dataset: IDX files '%s' and '%s' give one input and one label, the "
                       "model takes %u inputs and %u labels",
                       x->images, x->labels, sh->n_in, sh->n_label);
  int rc;
  if (!x->loaded && (rc = idx_load(x, e)))
    return rc;
  if (x->per != sh->in_len[0])
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "dataset: '%s' has %zu values per image but the model input takes %zu",
                       x->images, x->per, sh->in_len[0]);
  for (size_t i = 0; i < x->count; i++)
    if (x->lab[i] >= sh->label_len[0])
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "dataset: '%s': label %u of sample %zu is out of range for a label "
                         "of %zu classes",
                         x->labels, x->lab[i], i, sh->label_len[0]);
  *samples = x->count;
  return NNT_OK;
}

static int idx_fetch(nnt_ds_src *s, size_t idx, float **in, float **label, bool *last,
                     nnt_err *e) {
  (void)last;
  idx_src *x = (idx_src *)s;
  (void)e;
  size_t n = x->per;
  if (x->img8) {
    const uint8_t *p = x->img8 + idx * n;
    for (size_t i = 0; i < n; i++)
      in[0][i] = (float)p[i] / 255.0f;
  } else {
    memcpy(in[0], x->imgf + idx * n, n * sizeof(float));
  }
  memset(label[0], 0, s->shape.label_len[0] * sizeof(float));
  label[0][x->lab[idx]] = 1.0f;
  return NNT_OK;
}

static void idx_destroy(nnt_ds_src *s) {
  idx_src *x = (idx_src *)s;
  idx_unload(x);
  nnt_free(x->images);
  nnt_free(x->labels);
  nnt_free(x);
}

static const nnt_ds_src_ops idx_ops = {
    .type = "idx",
    .sized = 1,
    .prepare = idx_prepare,
    .fetch = idx_fetch,
    .keys = NULL,
    .set_property = NULL,
    .destroy = idx_destroy,
};

int nnt_ds_src_idx(const char *images, const char *labels, nnt_ds_src **out, nnt_err *e) {
  if (!images || !images[0] || !labels || !labels[0])
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: IDX needs both an images and a labels file");
  idx_src *x = nnt_calloc(1, sizeof *x);
  char *i = nnt_strdup(images), *l = nnt_strdup(labels);
  if (!x || !i || !l) {
    nnt_free(x), nnt_free(i), nnt_free(l);
    return nnt_err_set(e, NNT_ERR_NOMEM, "dataset: out of memory creating an IDX source");
  }
  x->base.ops = &idx_ops;
  x->base.name = i;
  x->images = i;
  x->labels = l;
  *out = &x->base;
  return NNT_OK;
}

/* ------------------------------------------------------------------ */
/* Synthetic: sample k is drawn from Philox (philox.h) under the create  */
/* seed with stream k, so any thread or backend makes sample k alone, in */
/* any order and in every pass. The seed given to prepare only orders   */
/* the samples (dataset.c): the training loop prepares with one seed to */
/* train and another to evaluate, and evaluating the training set must  */
/* see the samples trained on.                                          */
typedef struct syn_src {
  nnt_ds_src base;
  unsigned samples;
  uint64_t seed;
} syn_src;

static int syn_prepare(nnt_ds_src *s, uint64_t seed, size_t *samples, nnt_err *e) {
  syn_src *y = (syn_src *)s;
  (void)seed, (void)e;
  *samples = y->samples;
  return NNT_OK;
}

static int syn_fetch(nnt_ds_src *s, size_t idx, float **in, float **label, bool *last,
                     nnt_err *e) {
  (void)last;
  syn_src *y = (syn_src *)s;
  (void)e;
  /* about N(0, 1) at the cost of 64 bits: the sum of four 16-bit uniforms
   * (mean 2, variance 1/3), centred and scaled; no log or cos, so data
   * making does not take the cores from training in benchmarks. Input
   * value v (counted across the input streams) takes words 2(v % 2) and
   * 2(v % 2) + 1 of counter (k, v / 2); label stream i's class is word 0
   * of counter (k, 2^63 + i), scaled to [0, width). An input of indices
   * (shape.in_index) takes word 2(v % 2) scaled to [0, in_index) instead. */
  uint64_t v = 0;
  nnt_philox_out r = {{0}};
  for (unsigned i = 0; i < s->shape.n_in; i++)
    for (size_t j = 0; j < s->shape.in_len[i]; j++, v++) {
      if (!(v & 1))
        r = nnt_philox(y->seed, idx, v >> 1);
      uint32_t a = r.v[2 * (v & 1)], b = r.v[2 * (v & 1) + 1];
      if (s->shape.in_index[i]) {
        in[i][j] = (float)(((uint64_t)a * s->shape.in_index[i]) >> 32);
        continue;
      }
      uint32_t sum = (a & 0xffff) + (a >> 16) + (b & 0xffff) + (b >> 16);
      in[i][j] = ((float)sum * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
    }
  for (unsigned i = 0; i < s->shape.n_label; i++) {
    size_t w = s->shape.label_len[i];
    uint32_t u = nnt_philox(y->seed, idx, (1ull << 63) + i).v[0];
    memset(label[i], 0, w * sizeof(float));
    label[i][((uint64_t)u * (uint32_t)w) >> 32] = 1.0f;
  }
  return NNT_OK;
}

static void syn_destroy(nnt_ds_src *s) { nnt_free(s); }

static const nnt_ds_src_ops syn_ops = {
    .type = "synthetic",
    .sized = 1,
    .prepare = syn_prepare,
    .fetch = syn_fetch,
    .keys = NULL,
    .set_property = NULL,
    .destroy = syn_destroy,
};

int nnt_ds_src_synthetic(unsigned samples, uint64_t seed, nnt_ds_src **out, nnt_err *e) {
  if (!samples)
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: synthetic samples must be positive");
  syn_src *y = nnt_calloc(1, sizeof *y);
  if (!y)
    return nnt_err_set(e, NNT_ERR_NOMEM, "dataset: out of memory creating a synthetic source");
  y->base.ops = &syn_ops;
  y->base.name = "synthetic data";
  y->samples = samples;
  y->seed = seed;
  *out = &y->base;
  return NNT_OK;
}
