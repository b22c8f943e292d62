/* Datasets: a producer (generator callback, NNTrainer raw file, IDX files,
 * synthetic) feeds a bounded queue of batches filled by a producer thread,
 * so loading overlaps compute. Errors in the producer thread come back from
 * nnt_dataset_next_batch as error codes with messages; nothing hangs.
 *
 * Policy: samples are shuffled every epoch when shuffle is on (the default
 * for file, IDX and synthetic sources of the training set, as NNTrainer
 * does; validation and test sets are read in order); the last partial batch
 * of an epoch is dropped, as NNTrainer does. */
#ifndef NNT_DATASET_H
#define NNT_DATASET_H

#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include "nntrainer/common.h"

#define NNT_DS_MAX_STREAMS 8 /* inputs or labels per sample */

/* The Tizen ML API's ml_train_datagen_cb: fill input[i] and label[j] with one
 * sample and set *last = true with the last sample of an epoch (that sample
 * is used, as in NNTrainer). Return 0, or any other value to stop with that
 * value as the error (it comes back unchanged, nnt_err.from_callback set). */
typedef int (*nnt_datagen_cb)(float **input, float **label, bool *last,
                              void *user_data);

typedef struct nnt_dataset nnt_dataset;

/* Constructors. Each @return NNT_OK and a dataset in *out, owned by the
 * caller until nnt_dataset_destroy (or until a model takes it). */
int nnt_dataset_create_generator(nnt_datagen_cb cb, void *user_data,
                                 nnt_dataset **out, nnt_err *e);
/* NNTrainer's raw file: per record, the input floats then the one-hot label
 * floats, little-endian float32. */
int nnt_dataset_create_file(const char *path, nnt_dataset **out, nnt_err *e);
/* IDX image + label files (gzip or plain). Images are scaled to [0,1] when
 * their type is unsigned byte; labels become one-hot of the label width. */
int nnt_dataset_create_idx(const char *images, const char *labels,
                           nnt_dataset **out, nnt_err *e);
/* `samples` random samples (inputs about N(0,1), labels one-hot of a random
 * class), the same for the same seed. */
int nnt_dataset_create_synthetic(unsigned samples, uint64_t seed,
                                 nnt_dataset **out, nnt_err *e);
void nnt_dataset_destroy(nnt_dataset *ds);

/* Properties: buffer_size (batches held in the queue), shuffle (bool),
 * and per source: for file sources, `path`. Unknown keys: NNT_ERR_NOKEY. */
int nnt_dataset_set_property(nnt_dataset *ds, const char *key,
                             const char *value, nnt_err *e);

/* Set shuffle's default for the mode the dataset serves (the model calls it
 * when the dataset is attached): on = training. A shuffle given with
 * nnt_dataset_set_property keeps its value. */
void nnt_dataset_default_shuffle(nnt_dataset *ds, int on);

/* Sizes of one sample's streams, given by the model before an epoch. */
typedef struct nnt_ds_shape {
  unsigned n_in, n_label;
  size_t in_len[NNT_DS_MAX_STREAMS];    /* floats per sample */
  size_t label_len[NNT_DS_MAX_STREAMS];
  /* > 0: input stream i holds row indices in [0, in_index[i]) (an
   * embedding reads it), which synthetic data draws; 0: any values */
  size_t in_index[NNT_DS_MAX_STREAMS];
} nnt_ds_shape;

/* Check the source against the shape and batch (file length, IDX header),
 * open files. Must be called before the first epoch; may be called again.
 * seed drives shuffling. */
int nnt_dataset_prepare(nnt_dataset *ds, const nnt_ds_shape *shape,
                        unsigned batch, uint64_t seed, nnt_err *e);
/* Samples per epoch when known (file, IDX, synthetic), 0 when not
 * (generator). */
size_t nnt_dataset_samples(const nnt_dataset *ds);
/* A flag the producer reads between samples (NULL: none): when it is
 * nonzero the producer stops and next_batch, once the batches already made
 * are taken, returns NNT_ERR_CANCELED. The model points it at its stop
 * request. Set it only while no epoch runs; it must outlive the epochs. */
void nnt_dataset_set_stop_flag(nnt_dataset *ds, const atomic_int *flag);
/* Bytes of the queue the next epoch_begin holds after a prepare: buffer_size
 * batches ahead (no more than an epoch of a sized source) and the one being
 * read; 0 before a prepare, SIZE_MAX when it does not fit. */
size_t nnt_dataset_queue_bytes(const nnt_dataset *ds);
/* The queue bytes an epoch would hold with this shape and batch, before
 * or after a prepare: exact once the source was prepared (a sized source
 * holds no more than an epoch), buffer_size batches (at least 2) before; 0 for
 * NULL, SIZE_MAX when it does not fit. The planner reserves it under
 * [Model] memory_budget. */
size_t nnt_dataset_queue_bytes_for(const nnt_dataset *ds, const nnt_ds_shape *shape,
                                   unsigned batch);
/* Start an epoch: starts the producer thread. */
int nnt_dataset_epoch_begin(nnt_dataset *ds, nnt_err *e);
/* Copy the next full batch into in[i] (batch * in_len[i] floats) and
 * label[j]. *end is set to 0 when a batch was copied and to 1 at the end
 * of the epoch (nothing copied; the epoch is then over): end of data is
 * never an error code. @return NNT_OK or the producer's error (then *end
 * is 0). */
int nnt_dataset_next_batch(nnt_dataset *ds, float **in, float **label,
                           int *end, nnt_err *e);
/* next_batch without the copy: in[i] and label[j] (label may be NULL)
 * point at the batch in the queue, host memory that stays the caller's
 * until the next next_batch or epoch_end. The model writes it into its
 * input and label tensors with one nnt_tensor_set each. */
int nnt_dataset_next_batch_view(nnt_dataset *ds, const float **in, const float **label,
                                int *end, nnt_err *e);
/* The batch the last next_batch (or its view) gave, again, as a view. */
int nnt_dataset_held_batch(nnt_dataset *ds, const float **in, const float **label,
                           nnt_err *e);
/* Copy the batch the last next_batch gave again (it stays in the queue
 * until the next next_batch or epoch_end): the training loop replays a
 * step with it to find where a value stopped being finite. */
int nnt_dataset_reread_batch(nnt_dataset *ds, float **in, float **label,
                             nnt_err *e);
/* Stop the producer (safe at any time; idempotent). */
void nnt_dataset_epoch_end(nnt_dataset *ds);

#endif
