/* SPDX-License-Identifier: Apache-2.0 */
/* Fashion-MNIST for the C API examples: see fashion_mnist.h. */
#include "fashion_mnist.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nntrainer-ext.h>
#include <zlib.h>

int check(int rc, const char *what) {
  if (rc != ML_ERROR_NONE) {
    const char *msg = ml_error(); /* this thread's last error; NULL if none */
    const char *name = ml_strerror(rc);
    if (!msg)
      msg = "no message";
    /* the message names the function that failed; `what` adds context */
    if (strncmp(msg, what, strlen(what)) == 0)
      fprintf(stderr, "error: %s (%s, %d)\n", msg, name ? name : "not an ml_error_e", rc);
    else
      fprintf(stderr, "error: %s: %s (%s, %d)\n", what, msg, name ? name : "not an ml_error_e",
              rc);
  }
  return rc;
}

double fm_now(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int fm_parse_size(const char *opt, const char *value, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = value ? strtoull(value, &end, 10) : 0;
  if (!value || !*value || *end || errno || value[0] == '-') {
    fprintf(stderr, "error: %s needs a non-negative integer, not '%s'\n", opt,
            value ? value : "(nothing)");
    return 1;
  }
  *out = (size_t)v;
  return 0;
}

/* ---- IDX files ----
 * A big-endian header: the magic 00 00 08 NN (unsigned bytes, NN dimensions),
 * NN 32-bit sizes, then the values. gzread() reads gzip and plain files. */

static int read_u32(gzFile f, uint32_t *v) {
  unsigned char b[4];
  if (gzread(f, b, 4) != 4)
    return 1;
  *v = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
  return 0;
}

/* Read an IDX file of unsigned bytes with `dims` dimensions whose sample
 * size (the product of all but the first) is sample_bytes; keep the first
 * `limit` samples (all when 0). */
static int read_idx(const char *path, unsigned dims, size_t sample_bytes, size_t limit,
                    unsigned char **data, size_t *count) {
  gzFile f = gzopen(path, "rb");
  if (!f) {
    fprintf(stderr, "error: cannot open '%s': %s\n", path, strerror(errno));
    return 1;
  }
  uint32_t magic, n, size = 1;
  int bad = read_u32(f, &magic) || magic != (0x800u | dims) || read_u32(f, &n);
  for (unsigned d = 1; !bad && d < dims; d++) {
    uint32_t s;
    bad = read_u32(f, &s);
    size *= s;
  }
  if (bad || size != sample_bytes) {
    fprintf(stderr, "error: '%s' is not an IDX file of %u dimensions with %zu bytes per sample\n",
            path, dims, sample_bytes);
    gzclose(f);
    return 1;
  }
  size_t keep = limit && limit < n ? limit : n;
  size_t bytes = keep * sample_bytes;
  unsigned char *buf = malloc(bytes ? bytes : 1);
  size_t got = 0;
  while (buf && got < bytes) { /* gzread takes an unsigned count */
    size_t chunk = bytes - got < (1u << 30) ? bytes - got : (1u << 30);
    int r = gzread(f, buf + got, (unsigned)chunk);
    if (r <= 0)
      break;
    got += (size_t)r;
  }
  gzclose(f);
  if (!buf || got != bytes) {
    fprintf(stderr, "error: '%s': %s\n", path,
            buf ? "shorter than its header says" : "out of memory");
    free(buf);
    return 1;
  }
  *data = buf;
  *count = keep;
  return 0;
}

int fm_load(const char *dir, const char *split, size_t limit, fm_set *set) {
  char images[4096], labels[4096];
  snprintf(images, sizeof images, "%s/%s-images-idx3-ubyte.gz", dir, split);
  snprintf(labels, sizeof labels, "%s/%s-labels-idx1-ubyte.gz", dir, split);
  memset(set, 0, sizeof *set);
  set->classes = FM_CLASSES;
  size_t n_images, n_labels;
  if (read_idx(images, 3, FM_PIXELS, limit, &set->images, &n_images))
    return 1;
  if (read_idx(labels, 1, 1, limit, &set->labels, &n_labels)) {
    fm_free(set);
    return 1;
  }
  if (n_images != n_labels) {
    fprintf(stderr, "error: %zu images but %zu labels in %s\n", n_images, n_labels, dir);
    fm_free(set);
    return 1;
  }
  for (size_t i = 0; i < n_labels; i++) {
    if (set->labels[i] >= FM_CLASSES) {
      fprintf(stderr, "error: %s: label %u of sample %zu is not a class\n", labels,
              set->labels[i], i);
      fm_free(set);
      return 1;
    }
  }
  set->count = n_images;
  return 0;
}

void fm_free(fm_set *set) {
  free(set->images);
  free(set->labels);
  free(set->order);
  memset(set, 0, sizeof *set);
}

static unsigned label_of(const fm_set *s, size_t i) {
  return s->class_map ? s->class_map[s->labels[i]] : s->labels[i];
}

/* xorshift64*: a small seeded generator, good enough for shuffling */
static unsigned long long next_random(unsigned long long *state) {
  unsigned long long x = *state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545F4914F6CDD1DULL;
}

static void reshuffle(fm_set *s) { /* Fisher-Yates */
  for (size_t i = s->count; i > 1; i--) {
    size_t j = (size_t)(next_random(&s->rng) % i);
    size_t t = s->order[i - 1];
    s->order[i - 1] = s->order[j];
    s->order[j] = t;
  }
}

int fm_shuffle(fm_set *set, unsigned long long seed) {
  free(set->order);
  set->order = malloc((set->count ? set->count : 1) * sizeof *set->order);
  if (!set->order) {
    fprintf(stderr, "error: out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < set->count; i++)
    set->order[i] = i;
  set->rng = seed ? seed : 1;
  reshuffle(set);
  return 0;
}

int fm_load_train_test(const char *dir, size_t train_limit, size_t test_limit, fm_set *train,
                       fm_set *test) {
  if (fm_load(dir, "train", train_limit, train))
    return 1;
  /* a new order every epoch: the library cannot shuffle what a generator
   * gives, so the generator does */
  if (fm_shuffle(train, 1) || fm_load(dir, "t10k", test_limit, test)) {
    fm_free(train);
    return 1;
  }
  printf("Fashion-MNIST: %zu training and %zu test samples\n", train->count, test->count);
  return 0;
}

/* ---- the generator ---- */

int fm_generator(float **input, float **label, bool *last, void *user_data) {
  fm_set *s = user_data;
  size_t k = s->order ? s->order[s->next] : s->next;
  const unsigned char *px = s->images + k * FM_PIXELS;
  for (unsigned i = 0; i < FM_PIXELS; i++)
    input[0][i] = px[i] / 255.0f;
  for (unsigned c = 0; c < s->classes; c++)
    label[0][c] = 0.0f;
  label[0][label_of(s, k)] = 1.0f;
  /* the set's last sample comes with *last = true (and is used); the next
   * call starts the next epoch */
  *last = ++s->next == s->count;
  if (*last) {
    s->next = 0;
    if (s->order)
      reshuffle(s);
  }
  return ML_ERROR_NONE;
}

/* ---- accuracy through inference ---- */

int fm_accuracy(ml_train_model_h model, const fm_set *set, float *accuracy) {
  ml_tensors_info_h in_info = NULL, out_info = NULL;
  ml_tensors_data_h in = NULL, out = NULL;
  ml_tensor_dimension dim;
  size_t correct = 0;
  int rc;
  /* the input is batch x 1 x 1 x 784 (batch, channel, height, width) */
  if ((rc = check(ml_train_model_get_input_tensors_info(model, &in_info), "input tensors info")) ||
      (rc = check(ml_train_model_get_output_tensors_info(model, &out_info),
                  "output tensors info")) ||
      (rc = check(ml_tensors_info_get_tensor_dimension(in_info, 0, dim), "input dimension")))
    goto out;
  size_t batch = dim[0];
  if ((rc = check(ml_tensors_info_get_tensor_dimension(out_info, 0, dim), "output dimension")))
    goto out;
  size_t classes = dim[3];
  if (classes != set->classes || batch == 0) {
    fprintf(stderr, "error: the model gives %zu classes, the set has %u\n", classes, set->classes);
    rc = ML_ERROR_INVALID_PARAMETER;
    goto out;
  }
  if ((rc = check(ml_tensors_data_create(in_info, &in), "ml_tensors_data_create")))
    goto out;
  void *raw;
  size_t x_bytes;
  if ((rc = check(ml_tensors_data_get_tensor_data(in, 0, &raw, &x_bytes), "input data")))
    goto out;
  float *x = raw; /* points into `in`: filling it fills the input */

  for (size_t start = 0; start < set->count; start += batch) {
    size_t n = set->count - start < batch ? set->count - start : batch;
    memset(x, 0, x_bytes); /* the last batch is padded with zeros */
    for (size_t s = 0; s < n; s++)
      for (unsigned i = 0; i < FM_PIXELS; i++)
        x[s * FM_PIXELS + i] = set->images[(start + s) * FM_PIXELS + i] / 255.0f;
    if ((rc = check(ml_train_ext_model_infer(model, in, &out), "ml_train_ext_model_infer")))
      goto out;
    size_t y_bytes;
    if ((rc = check(ml_tensors_data_get_tensor_data(out, 0, &raw, &y_bytes), "output data")))
      goto out;
    const float *y = raw; /* batch x classes probabilities */
    for (size_t s = 0; s < n; s++) {
      const float *p = y + s * classes;
      size_t best = 0;
      for (size_t c = 1; c < classes; c++)
        if (p[c] > p[best])
          best = c;
      correct += best == label_of(set, start + s);
    }
    check(ml_tensors_data_destroy(out), "ml_tensors_data_destroy");
    out = NULL;
  }
  *accuracy = set->count ? (float)correct / (float)set->count : 0.0f;
out:
  if (out)
    check(ml_tensors_data_destroy(out), "ml_tensors_data_destroy");
  if (in)
    check(ml_tensors_data_destroy(in), "ml_tensors_data_destroy");
  if (out_info)
    check(ml_tensors_info_destroy(out_info), "ml_tensors_info_destroy");
  if (in_info)
    check(ml_tensors_info_destroy(in_info), "ml_tensors_info_destroy");
  return rc;
}
