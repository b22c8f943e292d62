/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fashion_mnist.h: what the C API examples share: reading Fashion-MNIST's
 * IDX files, a data generator callback that feeds them to a model, the
 * accuracy of a compiled model on a set (through inference), and the check
 * that reports a failed call. Only the public headers are used; this file is
 * part of the examples, not of the library.
 */
#ifndef CAPI_FASHION_MNIST_H
#define CAPI_FASHION_MNIST_H

#include <stdbool.h>
#include <stddef.h>

#include <nntrainer.h>

/* Where Debian's dataset-fashion-mnist package puts the files. */
#ifndef FASHION_MNIST_DIR
#define FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"
#endif

#define FM_PIXELS 784 /* 28 x 28 */
#define FM_CLASSES 10

/* One split of the dataset in memory: pixels stay bytes (converted to
 * floats in [0, 1] as they are fed), labels are class ids 0..9. */
typedef struct {
  unsigned char *images; /* count * FM_PIXELS bytes */
  unsigned char *labels; /* count class ids */
  size_t count;
  /* What the generator gives as the label: a one-hot vector of `classes`
   * floats at class_map[label] (or at the label itself when class_map is
   * NULL). The fine-tuning example maps the 10 classes onto 3. */
  unsigned classes;
  const unsigned char *class_map;
  size_t next; /* the generator's position in the epoch */
  /* The order the generator gives samples in: file order when NULL. The
   * library cannot shuffle what a generator gives, so the generator does:
   * see fm_shuffle(). */
  size_t *order;
  unsigned long long rng;
} fm_set;

/* Read the split "train" or "t10k" from dir (gzip or plain IDX files),
 * keeping the first limit samples (all when limit is 0). Prints what is
 * wrong and returns nonzero on failure. */
int fm_load(const char *dir, const char *split, size_t limit, fm_set *set);
void fm_free(fm_set *set);

/* Give the samples in a new random order every epoch (seeded, so two runs
 * see the same orders). Returns nonzero when out of memory. */
int fm_shuffle(fm_set *set, unsigned long long seed);

/* The first train_limit training samples, reshuffled every epoch (seed 1),
 * and the first test_limit test samples (0: all), with a line saying how
 * many. Prints what is wrong and returns nonzero on failure (then nothing
 * is left to free). */
int fm_load_train_test(const char *dir, size_t train_limit, size_t test_limit, fm_set *train,
                       fm_set *test);

/* The data generator callback (ml_train_datagen_cb) for a set given as
 * user_data: one sample per call; with the set's last sample it sets *last
 * and rewinds (reshuffling when fm_shuffle() was called) for the next epoch.
 * The library calls it from its own thread, so the set must stay alive
 * until the model is destroyed. */
int fm_generator(float **input, float **label, bool *last, void *user_data);

/* Accuracy of a compiled model on a set: argmax of the model's output
 * against the set's label, through ml_train_ext_model_infer() a batch at a
 * time (the last, partial batch padded). Returns an ml_error_e. */
int fm_accuracy(ml_train_model_h model, const fm_set *set, float *accuracy);

/* When rc is not ML_ERROR_NONE, print what failed with ml_error()'s
 * message; return rc. Use: if (check(ml_train_...(...), "what")) goto out; */
int check(int rc, const char *what);

/* Wall-clock seconds, for timings. */
double fm_now(void);

/* Parse a non-negative integer option value; prints and returns nonzero
 * when it is not one. */
int fm_parse_size(const char *opt, const char *value, size_t *out);

#endif
