/* Private to the dataset module (dataset.c, dataset_sources.c): the
 * interface every data source implements. dataset.c owns the queue, the
 * producer thread and the epoch logic; a source only knows how to check
 * itself against a sample shape and how to write one sample.
 *
 * Threads: prepare, set_property and destroy run on the consumer's thread
 * while no epoch runs; fetch runs on the producer thread. dataset.c never
 * lets the two overlap (prepare and set_property stop the epoch first), and
 * thread creation and joining order the memory between them. */
#ifndef NNT_DATASET_IMPL_H
#define NNT_DATASET_IMPL_H

#include "nntrainer/dataset.h"

typedef struct nnt_ds_src nnt_ds_src;

typedef struct nnt_ds_src_ops {
  const char *type; /* "generator", "file", "idx", "synthetic" */
  int sized;        /* 1: a known number of samples, addressed by index and
                       shuffled; 0 (generator): samples come in its order */
  /* Check the source against s->shape and load or open what it needs;
   * seed is the one given to nnt_dataset_prepare. Sets *samples for sized
   * sources. Consumer thread. */
  int (*prepare)(nnt_ds_src *s, uint64_t seed, size_t *samples, nnt_err *e);
  /* Write one sample into in[i] (s->shape.in_len[i] floats) and label[j].
   * idx: the record (already permuted) for sized sources, the sample's
   * ordinal in the epoch for the generator. *last (false on entry) is set
   * by the generator with the last sample of its epoch; that sample is
   * used. Sized sources leave it alone: dataset.c counts their samples.
   * Producer thread; must not allocate. @return NNT_OK or an error with a
   * message (end of data is never a return code). */
  int (*fetch)(nnt_ds_src *s, size_t idx, float **in, float **label, bool *last,
               nnt_err *e);
  /* Source-specific property keys (NULL-terminated; NULL for none) and
   * their setter, called with one of them while no epoch runs. */
  const char *const *keys;
  int (*set_property)(nnt_ds_src *s, const char *key, const char *value, nnt_err *e);
  /* Free the source and everything it holds. */
  void (*destroy)(nnt_ds_src *s);
} nnt_ds_src_ops;

/* The common head of every source struct. */
struct nnt_ds_src {
  const nnt_ds_src_ops *ops;
  const char *name;   /* for messages: the path, or "data generator"; owned
                         by the source */
  nnt_ds_shape shape; /* set by dataset.c before prepare */
};

/* Source constructors (dataset_sources.c). Each @return NNT_OK and a new
 * source in *out owned by the caller (free with (*out)->ops->destroy), or
 * an error with a message. Strings are copied. */
int nnt_ds_src_generator(nnt_datagen_cb cb, void *user_data, nnt_ds_src **out, nnt_err *e);
int nnt_ds_src_file(const char *path, nnt_ds_src **out, nnt_err *e);
int nnt_ds_src_idx(const char *images, const char *labels, nnt_ds_src **out, nnt_err *e);
int nnt_ds_src_synthetic(unsigned samples, uint64_t seed, nnt_ds_src **out, nnt_err *e);

/* A 64-bit mixing function (the splitmix64 finalizer): spreads nearby
 * inputs (seeds, sample and epoch numbers) over unrelated outputs. */
static inline uint64_t nnt_ds_mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

#endif
