/* Datasets: four sources behind one producer thread and a bounded queue of
 * batches. The producer fills whole batches into free slots; the consumer
 * copies the oldest full slot into the model's input and label tensors. */
#include "nntrainer/dataset.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

typedef enum ds_kind { DS_GENERATOR, DS_FILE, DS_IDX, DS_SYNTHETIC } ds_kind;

struct nnt_dataset {
  ds_kind kind;
  /* source */
  nnt_datagen_cb cb;
  void *ud;
  char *path, *images, *labels;
  unsigned syn_samples;
  uint64_t syn_seed;
  /* properties */
  unsigned buffer_size;
  int shuffle;
  /* prepared */
  int prepared;
  nnt_ds_shape shape;
  size_t in_total, label_total; /* floats per sample */
  unsigned batch;
  uint64_t seed;
  size_t samples;
  unsigned epoch;
  uint32_t *perm;
  uint8_t *img;   /* IDX images (ubyte) */
  float *imgf;    /* IDX images (float) */
  uint8_t *lab;   /* IDX labels */
  size_t img_len; /* values per image */
  float *rec;     /* one raw-file record */
  /* queue */
  pthread_mutex_t mu;
  pthread_cond_t not_full, not_empty;
  pthread_t th;
  int running, stop, done, err;
  nnt_err perr;
  float *slots;
  size_t slot_floats;
  unsigned cap, head, count;
};

static int new_ds(ds_kind kind, nnt_dataset **out, nnt_err *e) {
  nnt_dataset *d = nnt_calloc(1, sizeof *d);
  if (!d)
    return nnt_err_set(e, NNT_ERR_NOMEM, "out of memory creating a dataset");
  d->kind = kind;
  d->buffer_size = 4;
  d->shuffle = kind != DS_GENERATOR;
  pthread_mutex_init(&d->mu, NULL);
  pthread_cond_init(&d->not_full, NULL);
  pthread_cond_init(&d->not_empty, NULL);
  *out = d;
  return NNT_OK;
}

int nnt_dataset_create_generator(nnt_datagen_cb cb, void *user_data, nnt_dataset **out,
                                 nnt_err *e) {
  if (!cb)
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: the generator callback is NULL");
  int rc = new_ds(DS_GENERATOR, out, e);
  if (!rc) {
    (*out)->cb = cb;
    (*out)->ud = user_data;
  }
  return rc;
}

int nnt_dataset_create_file(const char *path, nnt_dataset **out, nnt_err *e) {
  if (!path || !path[0])
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: no file path given");
  int rc = new_ds(DS_FILE, out, e);
  if (!rc && !((*out)->path = nnt_strdup(path))) {
    nnt_dataset_destroy(*out);
    return nnt_err_set(e, NNT_ERR_NOMEM, "out of memory");
  }
  return rc;
}

int nnt_dataset_create_idx(const char *images, const char *labels, nnt_dataset **out,
                           nnt_err *e) {
  if (!images || !labels)
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: IDX needs both an images and a labels file");
  int rc = new_ds(DS_IDX, out, e);
  if (rc)
    return rc;
  (*out)->images = nnt_strdup(images);
  (*out)->labels = nnt_strdup(labels);
  if (!(*out)->images || !(*out)->labels) {
    nnt_dataset_destroy(*out);
    return nnt_err_set(e, NNT_ERR_NOMEM, "out of memory");
  }
  return NNT_OK;
}

int nnt_dataset_create_synthetic(unsigned samples, uint64_t seed, nnt_dataset **out,
                                 nnt_err *e) {
  if (!samples)
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: synthetic samples must be positive");
  int rc = new_ds(DS_SYNTHETIC, out, e);
  if (!rc) {
    (*out)->syn_samples = samples;
    (*out)->syn_seed = seed;
  }
  return rc;
}

static void free_prepared(nnt_dataset *d) {
  nnt_free(d->perm), nnt_free(d->img), nnt_free(d->imgf), nnt_free(d->lab),
      nnt_free(d->rec), nnt_free(d->slots);
  d->perm = NULL, d->img = NULL, d->imgf = NULL, d->lab = NULL, d->rec = NULL,
  d->slots = NULL;
  d->prepared = 0;
}

void nnt_dataset_destroy(nnt_dataset *d) {
  if (!d)
    return;
  nnt_dataset_epoch_end(d);
  free_prepared(d);
  nnt_free(d->path), nnt_free(d->images), nnt_free(d->labels);
  pthread_mutex_destroy(&d->mu);
  pthread_cond_destroy(&d->not_full);
  pthread_cond_destroy(&d->not_empty);
  nnt_free(d);
}

int nnt_dataset_set_property(nnt_dataset *d, const char *key, const char *value, nnt_err *e) {
  if (nnt_streq(key, "buffer_size")) {
    unsigned u;
    int rc = nnt_parse_uint(key, value, &u, e);
    if (!rc && !u)
      return nnt_err_set(e, NNT_ERR_INVAL, "key 'buffer_size': must be positive");
    if (!rc)
      d->buffer_size = u;
    return rc;
  }
  if (nnt_streq(key, "shuffle")) {
    int rc = nnt_parse_bool(key, value, &d->shuffle, e);
    if (!rc && d->kind == DS_GENERATOR)
      d->shuffle = 0; /* a generator gives samples in its own order */
    return rc;
  }
  return nnt_err_set(e, NNT_ERR_NOKEY, "unknown key '%s' for a dataset", key);
}

/* Read a whole (gzip or plain) file. */
static int read_all(const char *path, uint8_t **out, size_t *len, nnt_err *e) {
  gzFile g = gzopen(path, "rb");
  if (!g)
    return nnt_err_set(e, NNT_ERR_IO, "dataset: cannot open '%s': %s", path, strerror(errno));
  size_t cap = 1 << 20, n = 0;
  uint8_t *buf = nnt_malloc(cap);
  int rc = NNT_OK;
  for (;;) {
    if (!buf) {
      rc = nnt_err_set(e, NNT_ERR_NOMEM, "dataset: out of memory reading '%s'", path);
      break;
    }
    if (n == cap) {
      uint8_t *nb = nnt_realloc(buf, cap * 2);
      if (!nb) {
        nnt_free(buf);
        buf = NULL;
        continue;
      }
      buf = nb;
      cap *= 2;
    }
    int got = gzread(g, buf + n, (unsigned)(cap - n));
    if (got < 0) {
      rc = nnt_err_set(e, NNT_ERR_IO, "dataset: cannot read '%s' (corrupt gzip?)", path);
      break;
    }
    if (!got)
      break;
    n += (size_t)got;
  }
  gzclose(g);
  if (rc) {
    nnt_free(buf);
    return rc;
  }
  *out = buf;
  *len = n;
  return NNT_OK;
}

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Parse an IDX header: type byte and dims; returns data offset. */
static int idx_header(const char *path, const uint8_t *b, size_t len, uint8_t *type,
                      size_t *count, size_t *per, size_t *off, nnt_err *e) {
  if (len < 8 || b[0] || b[1])
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: '%s' is not an IDX file (bad magic)", path);
  unsigned nd = b[3];
  *type = b[2];
  if (!nd || len < 4 + 4 * (size_t)nd)
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: '%s' has a truncated IDX header", path);
  *count = be32(b + 4);
  *per = 1;
  for (unsigned i = 1; i < nd; i++)
    *per *= be32(b + 4 + 4 * i);
  *off = 4 + 4 * (size_t)nd;
  size_t esize = *type == 0x08 ? 1 : *type == 0x0D ? 4 : 0;
  if (!esize)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "dataset: '%s': IDX type 0x%02x is not supported (ubyte or float)",
                       path, *type);
  if (len - *off < *count * *per * esize)
    return nnt_err_set(e, NNT_ERR_IO, "dataset: '%s' is truncated: %zu records of %zu values "
                                      "announced", path, *count, *per);
  return NNT_OK;
}

static int prepare_idx(nnt_dataset *d, nnt_err *e) {
  uint8_t *ib = NULL, *lb = NULL;
  size_t il, ll, icount, iper, ioff, lcount, lper, loff;
  uint8_t it, lt;
  int rc = read_all(d->images, &ib, &il, e);
  if (!rc)
    rc = read_all(d->labels, &lb, &ll, e);
  if (!rc)
    rc = idx_header(d->images, ib, il, &it, &icount, &iper, &ioff, e);
  if (!rc)
    rc = idx_header(d->labels, lb, ll, &lt, &lcount, &lper, &loff, e);
  if (!rc && (lt != 0x08 || lper != 1))
    rc = nnt_err_set(e, NNT_ERR_INVAL, "dataset: '%s' is not an IDX label file (ubyte, 1-D)",
                     d->labels);
  if (!rc && icount != lcount)
    rc = nnt_err_set(e, NNT_ERR_INVAL, "dataset: '%s' has %zu images but '%s' %zu labels",
                     d->images, icount, d->labels, lcount);
  if (!rc && (d->shape.n_in != 1 || d->shape.n_label != 1))
    rc = nnt_err_set(e, NNT_ERR_INVAL, "dataset: IDX files give one input and one label");
  if (!rc && iper != d->shape.in_len[0])
    rc = nnt_err_set(e, NNT_ERR_INVAL,
                     "dataset: '%s' has %zu values per image but the model input takes %zu",
                     d->images, iper, d->shape.in_len[0]);
  for (size_t i = 0; !rc && i < lcount; i++)
    if (lb[loff + i] >= d->shape.label_len[0])
      rc = nnt_err_set(e, NNT_ERR_INVAL,
                       "dataset: '%s': label %u of sample %zu is out of range for %zu classes",
                       d->labels, lb[loff + i], i, d->shape.label_len[0]);
  if (!rc) {
    size_t esize = it == 0x08 ? 1 : 4;
    uint8_t *img = nnt_malloc(icount * iper * esize + 1);
    uint8_t *lab = nnt_malloc(lcount + 1);
    if (!img || !lab) {
      nnt_free(img), nnt_free(lab);
      rc = nnt_err_set(e, NNT_ERR_NOMEM, "dataset: out of memory for '%s'", d->images);
    } else {
      memcpy(img, ib + ioff, icount * iper * esize);
      memcpy(lab, lb + loff, lcount);
      if (it == 0x08) {
        d->img = img;
      } else {
        /* IDX floats are big-endian */
        float *f = (float *)img;
        for (size_t i = 0; i < icount * iper; i++) {
          uint32_t u = be32(img + 4 * i);
          memcpy(&f[i], &u, 4);
        }
        d->imgf = f;
      }
      d->lab = lab;
      d->img_len = iper;
      d->samples = icount;
    }
  }
  nnt_free(ib);
  nnt_free(lb);
  return rc;
}

int nnt_dataset_prepare(nnt_dataset *d, const nnt_ds_shape *shape, unsigned batch,
                        uint64_t seed, nnt_err *e) {
  if (!batch)
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: batch size must be positive");
  nnt_dataset_epoch_end(d);
  int same = d->prepared && !memcmp(&d->shape, shape, sizeof *shape) && d->batch == batch;
  d->seed = seed;
  d->epoch = 0;
  if (same)
    return NNT_OK;
  free_prepared(d);
  d->shape = *shape;
  d->batch = batch;
  d->in_total = d->label_total = 0;
  for (unsigned i = 0; i < shape->n_in; i++)
    d->in_total += shape->in_len[i];
  for (unsigned i = 0; i < shape->n_label; i++)
    d->label_total += shape->label_len[i];
  int rc = NNT_OK;
  if (d->kind == DS_FILE) {
    struct stat st;
    size_t rec = (d->in_total + d->label_total) * sizeof(float);
    if (stat(d->path, &st))
      return nnt_err_set(e, NNT_ERR_IO, "dataset: cannot open '%s': %s", d->path,
                         strerror(errno));
    if ((size_t)st.st_size % rec)
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "dataset: '%s' has %lld bytes, not a whole number of %zu-byte records "
                         "(%zu input and %zu label floats)",
                         d->path, (long long)st.st_size, rec, d->in_total, d->label_total);
    d->samples = (size_t)st.st_size / rec;
    if (!(d->rec = nnt_malloc(rec)))
      return nnt_err_set(e, NNT_ERR_NOMEM, "dataset: out of memory");
  } else if (d->kind == DS_IDX) {
    rc = prepare_idx(d, e);
  } else if (d->kind == DS_SYNTHETIC) {
    d->samples = d->syn_samples;
  }
  if (rc) {
    free_prepared(d);
    return rc;
  }
  if (d->kind != DS_GENERATOR && d->samples < batch) {
    free_prepared(d);
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: %zu samples make no full batch of %u",
                       d->samples, batch);
  }
  d->cap = d->buffer_size;
  d->slot_floats = batch * (d->in_total + d->label_total);
  d->slots = nnt_malloc(d->cap * d->slot_floats * sizeof(float) + 1);
  d->perm = d->samples ? nnt_malloc(d->samples * sizeof *d->perm) : NULL;
  if (!d->slots || (d->samples && !d->perm)) {
    free_prepared(d);
    return nnt_err_set(e, NNT_ERR_NOMEM, "dataset: out of memory for the queue");
  }
  d->prepared = 1;
  return NNT_OK;
}

size_t nnt_dataset_samples(const nnt_dataset *d) {
  return d->kind == DS_GENERATOR ? 0 : d->samples;
}

/* Pointers to sample s of a slot, stream by stream. */
static void slot_ptrs(const nnt_dataset *d, float *slot, unsigned s, float **in, float **lab) {
  float *p = slot;
  for (unsigned i = 0; i < d->shape.n_in; i++) {
    in[i] = p + s * d->shape.in_len[i];
    p += d->batch * d->shape.in_len[i];
  }
  for (unsigned i = 0; i < d->shape.n_label; i++) {
    lab[i] = p + s * d->shape.label_len[i];
    p += d->batch * d->shape.label_len[i];
  }
}

/* Fill one sample. @return NNT_OK, NNT_ERR_EOD (generator said last), or an error. */
static int fetch(nnt_dataset *d, size_t k, float **in, float **lab, nnt_err *e) {
  switch (d->kind) {
  case DS_GENERATOR: {
    bool last = false;
    int rc = d->cb(in, lab, &last, d->ud);
    if (rc)
      return nnt_err_set(e, rc < 0 ? rc : NNT_ERR_INVAL,
                         "data generator callback returned %d at sample %zu", rc, k);
    return last ? NNT_ERR_EOD : NNT_OK;
  }
  case DS_FILE: {
    size_t idx = d->perm[k], rec = d->in_total + d->label_total;
    FILE *f = fopen(d->path, "rb");
    int ok = f && fseeko(f, (off_t)(idx * rec * sizeof(float)), SEEK_SET) == 0 &&
             fread(d->rec, sizeof(float), rec, f) == rec;
    if (f)
      fclose(f);
    if (!ok)
      return nnt_err_set(e, NNT_ERR_IO, "dataset: cannot read record %zu of '%s'", idx, d->path);
    const float *p = d->rec;
    for (unsigned i = 0; i < d->shape.n_in; i++, p += d->shape.in_len[i - 1])
      memcpy(in[i], p, d->shape.in_len[i] * sizeof(float));
    for (unsigned i = 0; i < d->shape.n_label; i++, p += d->shape.label_len[i - 1])
      memcpy(lab[i], p, d->shape.label_len[i] * sizeof(float));
    return NNT_OK;
  }
  case DS_IDX: {
    size_t idx = d->perm[k], n = d->img_len;
    if (d->img)
      for (size_t i = 0; i < n; i++)
        in[0][i] = d->img[idx * n + i] * (1.0f / 255.0f);
    else
      memcpy(in[0], d->imgf + idx * n, n * sizeof(float));
    memset(lab[0], 0, d->shape.label_len[0] * sizeof(float));
    lab[0][d->lab[idx]] = 1.0f;
    return NNT_OK;
  }
  case DS_SYNTHETIC: {
    size_t idx = d->perm[k];
    nnt_rng r;
    nnt_rng_seed(&r, d->syn_seed + 0x9e3779b97f4a7c15ULL * (idx + 1));
    for (unsigned i = 0; i < d->shape.n_in; i++)
      for (size_t j = 0; j < d->shape.in_len[i]; j++)
        in[i][j] = nnt_rng_normal(&r);
    for (unsigned i = 0; i < d->shape.n_label; i++) {
      memset(lab[i], 0, d->shape.label_len[i] * sizeof(float));
      lab[i][nnt_rng_below(&r, (uint32_t)d->shape.label_len[i])] = 1.0f;
    }
    return NNT_OK;
  }
  }
  return NNT_ERR_UNKNOWN;
}

static void *producer(void *arg) {
  nnt_dataset *d = arg;
  float *in[NNT_DS_MAX_STREAMS], *lab[NNT_DS_MAX_STREAMS];
  size_t k = 0;
  nnt_err e = {0};
  int rc = NNT_OK;
  for (;;) {
    pthread_mutex_lock(&d->mu);
    while (d->count == d->cap && !d->stop)
      pthread_cond_wait(&d->not_full, &d->mu);
    int stop = d->stop;
    unsigned slot = (d->head + d->count) % d->cap;
    pthread_mutex_unlock(&d->mu);
    if (stop)
      break;
    float *base = d->slots + slot * d->slot_floats;
    unsigned s = 0;
    for (; s < d->batch; s++, k++) {
      if (d->kind != DS_GENERATOR && k >= d->samples) {
        rc = NNT_ERR_EOD; /* the last partial batch is dropped */
        break;
      }
      slot_ptrs(d, base, s, in, lab);
      if ((rc = fetch(d, k, in, lab, &e)))
        break;
    }
    pthread_mutex_lock(&d->mu);
    if (s == d->batch && !rc)
      d->count++;
    pthread_cond_broadcast(&d->not_empty);
    pthread_mutex_unlock(&d->mu);
    if (rc)
      break;
  }
  pthread_mutex_lock(&d->mu);
  d->done = 1;
  d->err = rc == NNT_ERR_EOD ? NNT_OK : rc;
  if (d->err)
    d->perr = e;
  pthread_cond_broadcast(&d->not_empty);
  pthread_mutex_unlock(&d->mu);
  return NULL;
}

int nnt_dataset_epoch_begin(nnt_dataset *d, nnt_err *e) {
  if (!d->prepared)
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: prepare it before an epoch");
  nnt_dataset_epoch_end(d);
  for (size_t i = 0; i < d->samples; i++)
    d->perm[i] = (uint32_t)i;
  if (d->shuffle && d->samples > 1) {
    nnt_rng r;
    nnt_rng_seed(&r, d->seed * 1000003ULL + d->epoch);
    for (size_t i = d->samples - 1; i > 0; i--) {
      size_t j = nnt_rng_below(&r, (uint32_t)(i + 1));
      uint32_t t = d->perm[i];
      d->perm[i] = d->perm[j];
      d->perm[j] = t;
    }
  }
  d->epoch++;
  d->head = d->count = 0;
  d->stop = d->done = 0;
  d->err = NNT_OK;
  if (pthread_create(&d->th, NULL, producer, d))
    return nnt_err_set(e, NNT_ERR_UNKNOWN, "dataset: cannot start the producer thread");
  d->running = 1;
  return NNT_OK;
}

int nnt_dataset_next_batch(nnt_dataset *d, float **in, float **label, nnt_err *e) {
  if (!d->running)
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: no epoch is running");
  pthread_mutex_lock(&d->mu);
  while (!d->count && !d->done)
    pthread_cond_wait(&d->not_empty, &d->mu);
  if (!d->count) {
    int rc = d->err;
    if (rc && e)
      *e = d->perr;
    pthread_mutex_unlock(&d->mu);
    return rc ? rc : NNT_ERR_EOD;
  }
  float *slot = d->slots + d->head * d->slot_floats;
  pthread_mutex_unlock(&d->mu);
  /* the slot is the consumer's until count drops */
  const float *p = slot;
  for (unsigned i = 0; i < d->shape.n_in; i++) {
    size_t n = d->batch * d->shape.in_len[i];
    memcpy(in[i], p, n * sizeof(float));
    p += n;
  }
  for (unsigned i = 0; i < d->shape.n_label; i++) {
    size_t n = d->batch * d->shape.label_len[i];
    if (label && label[i])
      memcpy(label[i], p, n * sizeof(float));
    p += n;
  }
  pthread_mutex_lock(&d->mu);
  d->head = (d->head + 1) % d->cap;
  d->count--;
  pthread_cond_signal(&d->not_full);
  pthread_mutex_unlock(&d->mu);
  return NNT_OK;
}

void nnt_dataset_epoch_end(nnt_dataset *d) {
  if (!d || !d->running)
    return;
  pthread_mutex_lock(&d->mu);
  d->stop = 1;
  pthread_cond_broadcast(&d->not_full);
  pthread_mutex_unlock(&d->mu);
  pthread_join(d->th, NULL);
  d->running = 0;
}
