/* Datasets: one producer thread per epoch fills a bounded ring of
 * `buffer_size` whole batches from a source (dataset_sources.c) while the
 * training loop, the one consumer, reads batches from it.
 *
 * The ring: slots [head, head + count) are full and belong to the consumer;
 * the producer writes the slot at head + count, which is never among them
 * while count < cap, so both copy outside the lock and only the counters
 * are shared. The consumer keeps the batch it was last given (the slot at
 * head, `held`) until it asks for the next one: the model reads it there
 * (plan.c, borrowed inputs) and check_finite reads it again; the ring has
 * buffer_size slots with it (at least two: ring_slots), and the producer
 * fills every one that is not full. The producer
 * checks `stop` and the model's stop flag between samples and `stop` while
 * it waits for a free slot, so nnt_dataset_epoch_end returns promptly
 * unless a generator callback itself blocks. When the producer ends (end of
 * data, error, stop, or even pthread_exit inside a callback) it sets `done`
 * and wakes the consumer, so next_batch never waits on a producer that is
 * gone. End of data is `done` with no error: never an error code.
 */
#include "nntrainer/dataset_impl.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

struct nnt_dataset {
  nnt_ds_src *src;
  /* properties */
  unsigned buffer_size;
  int shuffle;
  int shuffle_set; /* shuffle given: the model's default by mode keeps off */
  /* prepared */
  int prepared;
  nnt_ds_shape shape;
  unsigned batch;
  uint64_t seed;
  size_t samples;     /* per epoch; 0 for the generator */
  unsigned epoch;     /* epochs begun since prepare */
  uint32_t *perm;     /* sample order of the epoch */
  size_t off[2 * NNT_DS_MAX_STREAMS]; /* stream offsets in a slot (floats) */
  size_t slot_floats;
  const atomic_int *ext_stop; /* the model's stop request, or NULL */
  /* the ring, sized at epoch_begin: ring_slots() slots */
  float *slots;
  unsigned cap;
  size_t cap_floats;  /* floats per slot the ring was sized for */
  int held; /* the consumer holds the slot at head (under mu) */
  /* the running epoch; counters and flags under mu */
  int running; /* a producer thread exists (consumer's view) */
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t not_full, not_empty;
  unsigned head, count;
  int done, err;
  nnt_err perr;
  atomic_int stop;
};

static int wrap(nnt_ds_src *src, int rc, nnt_dataset **out, nnt_err *e) {
  if (rc)
    return rc;
  nnt_dataset *d = nnt_calloc(1, sizeof *d);
  if (!d) {
    src->ops->destroy(src);
    return nnt_err_set(e, NNT_ERR_NOMEM, "dataset: out of memory creating a dataset");
  }
  d->src = src;
  d->buffer_size = 1; /* NNTrainer's: one batch prepared ahead */
  d->shuffle = src->ops->sized;
  atomic_init(&d->stop, 0);
  if (pthread_mutex_init(&d->mu, NULL)) {
    nnt_free(d);
    src->ops->destroy(src);
    return nnt_err_set(e, NNT_ERR_NOMEM, "dataset: cannot create a mutex");
  }
  if (pthread_cond_init(&d->not_full, NULL)) {
    pthread_mutex_destroy(&d->mu);
    nnt_free(d);
    src->ops->destroy(src);
    return nnt_err_set(e, NNT_ERR_NOMEM, "dataset: cannot create a condition variable");
  }
  if (pthread_cond_init(&d->not_empty, NULL)) {
    pthread_cond_destroy(&d->not_full);
    pthread_mutex_destroy(&d->mu);
    nnt_free(d);
    src->ops->destroy(src);
    return nnt_err_set(e, NNT_ERR_NOMEM, "dataset: cannot create a condition variable");
  }
  *out = d;
  return NNT_OK;
}

/* Constructors: see dataset.h. The dataset owns its source. */
int nnt_dataset_create_generator(nnt_datagen_cb cb, void *user_data, nnt_dataset **out,
                                 nnt_err *e) {
  nnt_ds_src *s = NULL;
  if (!out)
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: no place for the result");
  int rc = nnt_ds_src_generator(cb, user_data, &s, e);
  return wrap(s, rc, out, e);
}

int nnt_dataset_create_file(const char *path, nnt_dataset **out, nnt_err *e) {
  nnt_ds_src *s = NULL;
  if (!out)
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: no place for the result");
  int rc = nnt_ds_src_file(path, &s, e);
  return wrap(s, rc, out, e);
}

int nnt_dataset_create_idx(const char *images, const char *labels, nnt_dataset **out,
                           nnt_err *e) {
  nnt_ds_src *s = NULL;
  if (!out)
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: no place for the result");
  int rc = nnt_ds_src_idx(images, labels, &s, e);
  return wrap(s, rc, out, e);
}

int nnt_dataset_create_synthetic(unsigned samples, uint64_t seed, nnt_dataset **out,
                                 nnt_err *e) {
  nnt_ds_src *s = NULL;
  if (!out)
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: no place for the result");
  int rc = nnt_ds_src_synthetic(samples, seed, &s, e);
  return wrap(s, rc, out, e);
}

/* Stops the producer, frees the source, the ring and the dataset. NULL is
 * a no-op. */
void nnt_dataset_destroy(nnt_dataset *d) {
  if (!d)
    return;
  nnt_dataset_epoch_end(d);
  d->src->ops->destroy(d->src);
  nnt_free(d->perm);
  nnt_free(d->slots);
  pthread_cond_destroy(&d->not_empty);
  pthread_cond_destroy(&d->not_full);
  pthread_mutex_destroy(&d->mu);
  nnt_free(d);
}

/* buffer_size and shuffle take effect at the next epoch_begin; a source
 * key (a file's path) stops the epoch and needs a new prepare. */
int nnt_dataset_set_property(nnt_dataset *d, const char *key, const char *value, nnt_err *e) {
  if (!d || !key)
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: set_property needs a dataset and a key");
  int rc;
  if (nnt_streq(key, "buffer_size")) {
    unsigned u;
    if ((rc = nnt_parse_uint(key, value, &u, e)))
      return rc;
    if (!u)
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "key 'buffer_size': value '%s' must be a positive number of batches",
                         value);
    d->buffer_size = u;
    return NNT_OK;
  }
  if (nnt_streq(key, "shuffle")) {
    int b;
    if ((rc = nnt_parse_bool(key, value, &b, e)))
      return rc;
    d->shuffle = b && d->src->ops->sized; /* a generator keeps its own order */
    d->shuffle_set = 1;
    return NNT_OK;
  }
  for (const char *const *k = d->src->ops->keys; k && *k; k++)
    if (nnt_streq(key, *k)) {
      nnt_dataset_epoch_end(d);
      if ((rc = d->src->ops->set_property(d->src, *k, value, e)))
        return rc;
      d->prepared = 0;
      return NNT_OK;
    }
  return nnt_err_set(e, NNT_ERR_NOKEY, "dataset: unknown key '%s' for a %s dataset", key,
                     d->src->ops->type);
}

/* The default of shuffle for the mode the dataset serves, unless shuffle
 * was given: on for training (when the source has a size), off for
 * validation and test, as NNTrainer does. */
void nnt_dataset_default_shuffle(nnt_dataset *d, int on) {
  if (d && !d->shuffle_set)
    d->shuffle = on && d->src->ops->sized;
}

static int check_shape(const nnt_ds_shape *s, nnt_err *e) {
  if (!s->n_in || s->n_in > NNT_DS_MAX_STREAMS || s->n_label > NNT_DS_MAX_STREAMS)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "dataset: %u inputs and %u labels: between 1 and %d inputs and at most "
                       "%d labels",
                       s->n_in, s->n_label, NNT_DS_MAX_STREAMS, NNT_DS_MAX_STREAMS);
  for (unsigned i = 0; i < s->n_in; i++)
    if (!s->in_len[i])
      return nnt_err_set(e, NNT_ERR_INVAL, "dataset: input %u has no values", i);
  for (unsigned i = 0; i < s->n_label; i++)
    if (!s->label_len[i])
      return nnt_err_set(e, NNT_ERR_INVAL, "dataset: label %u has no values", i);
  return NNT_OK;
}

/* Checks the source against the shape (opening or loading files), sizes
 * the permutation and lays out a slot. Stops a running epoch. */
int nnt_dataset_prepare(nnt_dataset *d, const nnt_ds_shape *shape, unsigned batch,
                        uint64_t seed, nnt_err *e) {
  if (!d || !shape)
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: prepare needs a dataset and a shape");
  if (!batch)
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: batch size must be positive");
  int rc = check_shape(shape, e);
  if (rc)
    return rc;
  nnt_dataset_epoch_end(d);
  d->prepared = 0;
  d->src->shape = *shape;
  size_t samples = 0;
  if ((rc = d->src->ops->prepare(d->src, seed, &samples, e)))
    return rc;
  if (d->src->ops->sized) {
    if (samples < batch)
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "dataset: '%s' has %zu samples, fewer than one batch of %u",
                         d->src->name, samples, batch);
    if (samples > UINT32_MAX)
      return nnt_err_set(e, NNT_ERR_INVAL, "dataset: '%s' has %zu samples, more than %u",
                         d->src->name, samples, UINT32_MAX);
    if (samples != d->samples || !d->perm) {
      uint32_t *p = nnt_realloc(d->perm, samples * sizeof *p);
      if (!p)
        return nnt_err_set(e, NNT_ERR_NOMEM, "dataset: out of memory for %zu samples", samples);
      d->perm = p;
    }
  }
  size_t off = 0, n = 0;
  for (unsigned i = 0; i < shape->n_in; i++, n++) {
    d->off[n] = off;
    if (__builtin_mul_overflow((size_t)batch, shape->in_len[i], &off) ||
        __builtin_add_overflow(off, d->off[n], &off))
      return nnt_err_set(e, NNT_ERR_INVAL, "dataset: a batch is too large");
  }
  for (unsigned i = 0; i < shape->n_label; i++, n++) {
    d->off[n] = off;
    if (__builtin_mul_overflow((size_t)batch, shape->label_len[i], &off) ||
        __builtin_add_overflow(off, d->off[n], &off))
      return nnt_err_set(e, NNT_ERR_INVAL, "dataset: a batch is too large");
  }
  d->slot_floats = off;
  d->shape = *shape;
  d->batch = batch;
  d->seed = seed;
  d->samples = samples;
  d->epoch = 0;
  d->prepared = 1;
  return NNT_OK;
}

/* Samples per epoch of a prepared sized source; 0 for a generator or
 * before prepare. */
size_t nnt_dataset_samples(const nnt_dataset *d) {
  return d && d->prepared ? d->samples : 0;
}

/* Runs if the producer leaves through pthread_exit inside a callback: the
 * consumer must still learn that no more batches come. */
static void producer_gone(void *arg) {
  nnt_dataset *d = arg;
  pthread_mutex_lock(&d->mu);
  if (!d->done) {
    d->done = 1;
    d->err = nnt_err_set(&d->perr, NNT_ERR_UNKNOWN,
                         "dataset: the producer thread of '%s' exited inside the source",
                         d->src->name);
    pthread_cond_broadcast(&d->not_empty);
  }
  pthread_mutex_unlock(&d->mu);
}

void nnt_dataset_set_stop_flag(nnt_dataset *d, const atomic_int *flag) {
  if (d)
    d->ext_stop = flag;
}

static int stop_requested(const nnt_dataset *d) {
  return d->ext_stop && atomic_load_explicit(d->ext_stop, memory_order_relaxed);
}

/* Fill the batch in slot `slot` with samples k .. k + batch - 1 of the
 * epoch; *n counts the samples written. *last: the generator gave the last
 * sample of its epoch (the batch is full only if that was its last one). */
static int fill_batch(nnt_dataset *d, unsigned slot, size_t k, unsigned *n, bool *last,
                      nnt_err *e) {
  float *base = d->slots + (size_t)slot * d->slot_floats;
  const nnt_ds_shape *sh = &d->shape;
  float *in[NNT_DS_MAX_STREAMS], *lab[NNT_DS_MAX_STREAMS];
  int sized = d->src->ops->sized;
  *n = 0;
  *last = false;
  for (unsigned s = 0; s < d->batch && !*last; s++, k++) {
    if (atomic_load_explicit(&d->stop, memory_order_relaxed))
      return NNT_ERR_CANCELED;
    if (stop_requested(d))
      return nnt_err_set(e, NNT_ERR_CANCELED, "dataset: '%s': stopped on request",
                         d->src->name);
    for (unsigned i = 0; i < sh->n_in; i++)
      in[i] = base + d->off[i] + s * sh->in_len[i];
    for (unsigned i = 0; i < sh->n_label; i++)
      lab[i] = base + d->off[sh->n_in + i] + s * sh->label_len[i];
    int rc = d->src->ops->fetch(d->src, sized ? d->perm[k] : k, in, lab, last, e);
    if (rc)
      return rc;
    *n = s + 1;
  }
  return NNT_OK;
}

static void *producer(void *arg) {
  nnt_dataset *d = arg;
  nnt_err e;
  nnt_err_clear(&e);
  int rc = NNT_OK;
  bool last = false;
  size_t batches = d->src->ops->sized ? d->samples / d->batch : SIZE_MAX;
  pthread_cleanup_push(producer_gone, d);
  /* the last partial batch of a sized source is never read */
  for (size_t b = 0; b < batches && !rc && !last; b++) {
    pthread_mutex_lock(&d->mu);
    while (d->count == d->cap && !atomic_load(&d->stop))
      pthread_cond_wait(&d->not_full, &d->mu);
    unsigned slot = (d->head + d->count) % d->cap;
    pthread_mutex_unlock(&d->mu);
    if (atomic_load(&d->stop))
      break;
    /* a generator's partial batch ending with its `last` is dropped too */
    unsigned n;
    rc = fill_batch(d, slot, b * d->batch, &n, &last, &e);
    if (!rc && n == d->batch) {
      pthread_mutex_lock(&d->mu);
      d->count++;
      pthread_cond_signal(&d->not_empty);
      pthread_mutex_unlock(&d->mu);
    }
  }
  pthread_cleanup_pop(0);
  pthread_mutex_lock(&d->mu);
  d->done = 1;
  /* after epoch_end's stop nobody reads err; a stop request is an error */
  d->err = rc;
  if (d->err)
    d->perr = e;
  pthread_cond_broadcast(&d->not_empty);
  pthread_mutex_unlock(&d->mu);
  return NULL;
}

/* Draws the epoch's order, sizes the ring and starts the producer; an
 * epoch still running is stopped first. */
/* Slots of a ring of buffer_size batches (for `batches` an epoch of a
 * sized source holds, else SIZE_MAX): buffer_size slots with the one being
 * read, as NNTrainer's iteration queue counts them, but at least two, so
 * that one batch loads while the model reads another (NNTrainer's default
 * of 1 has it wait); and no more than the batches of an epoch. The
 * producer fills every slot that is not full. */
static size_t slots_for(size_t buffer_size, size_t batches) {
  size_t slots = buffer_size > 2 ? buffer_size : 2;
  if (batches < slots)
    slots = batches ? batches : 1;
  return slots;
}

static unsigned ring_slots(const nnt_dataset *d) {
  size_t batches = d->src->ops->sized && d->batch ? d->samples / d->batch : SIZE_MAX;
  return (unsigned)slots_for(d->buffer_size, batches);
}

size_t nnt_dataset_queue_bytes(const nnt_dataset *d) {
  size_t bytes;
  if (!d || !d->prepared || d->buffer_size == UINT_MAX ||
      __builtin_mul_overflow(d->slot_floats * sizeof(float), (size_t)ring_slots(d), &bytes))
    return d && d->prepared ? SIZE_MAX : 0;
  return bytes;
}

size_t nnt_dataset_queue_bytes_for(const nnt_dataset *d, const nnt_ds_shape *shape,
                                   unsigned batch) {
  if (!d || !shape || !batch)
    return 0;
  size_t floats = 0, bytes;
  for (unsigned i = 0; i < shape->n_in + shape->n_label; i++) {
    size_t len = i < shape->n_in ? shape->in_len[i] : shape->label_len[i - shape->n_in];
    if (__builtin_mul_overflow(len, (size_t)batch, &len) ||
        __builtin_add_overflow(floats, len, &floats))
      return SIZE_MAX;
  }
  /* a sized source prepared once knows its samples: no more than an epoch */
  size_t batches = d->prepared && d->src->ops->sized ? d->samples / batch : SIZE_MAX;
  if (d->buffer_size == UINT_MAX || __builtin_mul_overflow(floats, sizeof(float), &floats) ||
      __builtin_mul_overflow(floats, slots_for(d->buffer_size, batches), &bytes))
    return SIZE_MAX;
  return bytes;
}

int nnt_dataset_epoch_begin(nnt_dataset *d, nnt_err *e) {
  if (!d)
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: epoch_begin needs a dataset");
  if (!d->prepared)
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: '%s' must be prepared before an epoch",
                       d->src->name);
  nnt_dataset_epoch_end(d);
  /* a new batch size or shape since the ring was made changes its slots */
  unsigned slots = ring_slots(d);
  if (d->cap != slots || d->cap_floats != d->slot_floats || !d->slots) {
    size_t bytes = nnt_dataset_queue_bytes(d);
    if (bytes == SIZE_MAX)
      return nnt_err_set(e, NNT_ERR_NOMEM, "dataset: buffer_size %u batches is too large",
                         d->buffer_size);
    nnt_free(d->slots);
    d->cap = 0;
    if (!(d->slots = nnt_malloc(bytes)))
      return nnt_err_set(e, NNT_ERR_NOMEM,
                         "dataset: out of memory for %u batches of %zu floats (buffer_size "
                         "and the one being read)",
                         slots, d->slot_floats);
    d->cap = slots;
    d->cap_floats = d->slot_floats;
  }
  for (size_t i = 0; i < d->samples; i++)
    d->perm[i] = (uint32_t)i;
  if (d->shuffle && d->samples > 1) {
    nnt_rng r;
    nnt_rng_seed(&r, nnt_ds_mix64(d->seed) ^ nnt_ds_mix64(0x5eed0000ULL + d->epoch));
    for (size_t i = d->samples - 1; i > 0; i--) {
      size_t j = nnt_rng_below(&r, (uint32_t)(i + 1));
      uint32_t t = d->perm[i];
      d->perm[i] = d->perm[j];
      d->perm[j] = t;
    }
  }
  d->epoch++;
  d->head = d->count = 0;
  d->held = 0;
  d->done = 0;
  d->err = NNT_OK;
  nnt_err_clear(&d->perr);
  atomic_store(&d->stop, 0);
  int rc = pthread_create(&d->th, NULL, producer, d);
  if (rc)
    return nnt_err_set(e, NNT_ERR_NOMEM, "dataset: cannot start the producer thread: %s",
                       strerror(rc));
  d->running = 1;
  return NNT_OK;
}

/* The held slot's streams: in[i] and label[j] point into it. */
static void view_of(const nnt_dataset *d, const float **in, const float **label) {
  const float *slot = d->slots + (size_t)d->head * d->slot_floats;
  const nnt_ds_shape *sh = &d->shape;
  for (unsigned i = 0; i < sh->n_in; i++)
    in[i] = slot + d->off[i];
  for (unsigned i = 0; label && i < sh->n_label; i++)
    label[i] = slot + d->off[sh->n_in + i];
}

static void copy_out(const nnt_dataset *d, float **in, float **label) {
  const float *vin[NNT_DS_MAX_STREAMS], *vlabel[NNT_DS_MAX_STREAMS];
  const nnt_ds_shape *sh = &d->shape;
  view_of(d, vin, vlabel);
  for (unsigned i = 0; i < sh->n_in; i++)
    memcpy(in[i], vin[i], d->batch * sh->in_len[i] * sizeof(float));
  for (unsigned i = 0; label && i < sh->n_label; i++)
    if (label[i])
      memcpy(label[i], vlabel[i], d->batch * sh->label_len[i] * sizeof(float));
}

/* Gives the batch held back to the producer, then holds the oldest full
 * batch and points in[i] and label[j] at it. */
int nnt_dataset_next_batch_view(nnt_dataset *d, const float **in, const float **label,
                                int *end, nnt_err *e) {
  if (!d || !in || !end)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "dataset: next_batch needs a dataset, inputs and an end flag");
  *end = 0;
  if (!d->running)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "dataset: '%s': no epoch is running (call nnt_dataset_epoch_begin)",
                       d->src->name);
  pthread_mutex_lock(&d->mu);
  if (d->held) { /* its slot is free for the producer */
    d->head = (d->head + 1) % d->cap;
    d->count--;
    d->held = 0;
    pthread_cond_signal(&d->not_full);
  }
  while (!d->count && !d->done)
    pthread_cond_wait(&d->not_empty, &d->mu);
  if (!d->count) {
    int rc = d->err;
    if (rc && e)
      *e = d->perr;
    pthread_mutex_unlock(&d->mu);
    *end = !rc;
    return rc;
  }
  d->held = 1;
  pthread_mutex_unlock(&d->mu);
  /* the slot at head is the consumer's until it is given back */
  view_of(d, in, label);
  return NNT_OK;
}

int nnt_dataset_next_batch(nnt_dataset *d, float **in, float **label, int *end, nnt_err *e) {
  const float *vin[NNT_DS_MAX_STREAMS], *vlabel[NNT_DS_MAX_STREAMS];
  int rc = nnt_dataset_next_batch_view(d, vin, vlabel, end, e);
  if (!rc && !*end)
    copy_out(d, in, label);
  return rc;
}

int nnt_dataset_held_batch(nnt_dataset *d, const float **in, const float **label,
                           nnt_err *e) {
  if (!d || !in)
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: reread_batch needs a dataset and inputs");
  if (!d->running || !d->held)
    return nnt_err_set(e, NNT_ERR_INVAL, "dataset: '%s': no batch to read again",
                       d->src->name);
  view_of(d, in, label);
  return NNT_OK;
}

int nnt_dataset_reread_batch(nnt_dataset *d, float **in, float **label, nnt_err *e) {
  const float *vin[NNT_DS_MAX_STREAMS];
  int rc = nnt_dataset_held_batch(d, in ? vin : NULL, NULL, e);
  if (!rc)
    copy_out(d, in, label);
  return rc;
}

/* Stops and joins the producer. Safe at any time, idempotent, NULL ok. */
void nnt_dataset_epoch_end(nnt_dataset *d) {
  if (!d || !d->running)
    return;
  atomic_store(&d->stop, 1);
  pthread_mutex_lock(&d->mu);
  pthread_cond_broadcast(&d->not_full);
  pthread_mutex_unlock(&d->mu);
  pthread_join(d->th, NULL);
  d->running = 0;
  d->held = 0;
}
