/* Fuzz target: IDX image and label files, gzip or plain. Input:
 *   byte 0    bit 0: gzip the images file, bit 1: gzip the labels file,
 *             bit 2: shuffle, bit 3: a second epoch, bit 4: give the model
 *             one value more per image than the header says, bits 5-7:
 *             the batch size minus one
 *   byte 1    the label width (classes); 0 means 10
 *   bytes 2-3 the length of the images file (little-endian), cut to what
 *             follows
 *   then      the images file, then the labels file (the rest)
 * The model's input width is what the images header says (the product of
 * its dimensions after the first), so that most inputs get past prepare.
 *
 * Promises checked beyond the sanitizers, from the target's own reading of
 * the two files: a pair that is valid (right magic and types, headers
 * whose data is all there, as many labels as images, every label below the
 * width, images of the model's width, a batch or more) is accepted and
 * anything else refused; an epoch gives count / batch batches; each sample
 * is an image (bytes scaled by 1/255, floats as stored) with its one-hot
 * label, in file order without shuffle and each at most once with it. */
#include "fuzz.h"

#include <string.h>

#include "nntrainer/dataset.h"

/* An IDX file as this target reads it. */
typedef struct idx_view {
  int ok;
  uint8_t type;
  unsigned ndims;
  size_t count, per, esize;
  const uint8_t *data;
} idx_view;

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static idx_view read_idx(const uint8_t *b, size_t n) {
  idx_view v = {0};
  if (n < 4 || b[0] || b[1] || (b[2] != 0x08 && b[2] != 0x0D) || !b[3])
    return v;
  v.type = b[2];
  v.ndims = b[3];
  size_t hdr = 4 + 4 * (size_t)v.ndims, values, bytes;
  if (n < hdr)
    return v;
  v.count = be32(b + 4);
  v.per = 1;
  for (unsigned i = 1; i < v.ndims; i++)
    if (__builtin_mul_overflow(v.per, (size_t)be32(b + 4 + 4 * i), &v.per))
      return v;
  v.esize = v.type == 0x0D ? 4 : 1;
  if (__builtin_mul_overflow(v.count, v.per, &values) ||
      __builtin_mul_overflow(values, v.esize, &bytes) || n - hdr < bytes)
    return v;
  v.data = b + hdr;
  v.ok = 1;
  return v;
}

typedef struct check {
  idx_view img, lab;
  size_t width, classes;
  unsigned batch;
  int shuffle;
  uint8_t *used;
  size_t next;
} check;

/* Whether sample j of the batch is image r with its label. */
static int is_sample(const check *c, const float *in, const float *label, unsigned j, size_t r) {
  const float *x = in + j * c->width, *y = label + j * c->classes;
  for (size_t i = 0; i < c->img.per; i++) {
    float want;
    if (c->img.type == 0x08) {
      want = (float)c->img.data[r * c->img.per + i] / 255.0f;
    } else {
      uint32_t u = be32(c->img.data + 4 * (r * c->img.per + i));
      memcpy(&want, &u, 4);
    }
    if (memcmp(&want, &x[i], 4))
      return 0;
  }
  for (size_t i = 0; i < c->classes; i++)
    if (y[i] != (i == c->lab.data[r] ? 1.0f : 0.0f))
      return 0;
  return 1;
}

static void check_batch(check *c, const float *in, const float *label) {
  for (unsigned j = 0; j < c->batch; j++) {
    if (!c->shuffle) {
      if (c->next >= c->img.count || !is_sample(c, in, label, j, c->next))
        nnt_fuzz_fail("sample %u of a batch is not image %zu with its label", j, c->next);
      c->next++;
      continue;
    }
    size_t r = 0;
    while (r < c->img.count && (c->used[r] || !is_sample(c, in, label, j, r)))
      r++;
    if (r == c->img.count)
      nnt_fuzz_fail("sample %u of a shuffled batch is no unused image with its label", j);
    c->used[r] = 1;
  }
}

static int epoch(nnt_dataset *ds, check *c, float *in, float *label) {
  nnt_err e = {0};
  int rc = nnt_dataset_epoch_begin(ds, &e);
  if (rc)
    return nnt_fuzz_check_err("nnt_dataset_epoch_begin", rc, &e);
  memset(c->used, 0, c->img.count);
  c->next = 0;
  size_t got = 0;
  int end = 0;
  while (!(rc = nnt_dataset_next_batch(ds, &in, &label, &end, &e)) && !end) {
    check_batch(c, in, label);
    got++;
  }
  nnt_dataset_epoch_end(ds);
  if (rc)
    return nnt_fuzz_check_err("nnt_dataset_next_batch", rc, &e);
  if (got != c->img.count / c->batch)
    nnt_fuzz_fail("an epoch of %zu samples gave %zu batches of %u", c->img.count, got, c->batch);
  return NNT_OK;
}

static int valid(const check *c) {
  if (!c->img.ok || !c->lab.ok || c->lab.type != 0x08 || c->lab.ndims != 1 ||
      c->img.count != c->lab.count || c->img.per != c->width || c->img.count < c->batch)
    return 0;
  for (size_t i = 0; i < c->lab.count; i++)
    if (c->lab.data[i] >= c->classes)
      return 0;
  return 1;
}

int nnt_fuzz_idx(const uint8_t *data, size_t size) {
  nnt_fuzz_init();
  if (size < 4)
    return NNT_FUZZ_REFUSED;
  uint8_t flags = data[0];
  size_t n_img = (size_t)data[2] | (size_t)data[3] << 8;
  check c = {.classes = data[1] ? data[1] : 10, .batch = 1u + (flags >> 5),
             .shuffle = (flags >> 2) & 1};
  data += 4, size -= 4;
  if (n_img > size)
    n_img = size;
  const uint8_t *img = data, *lab = data + n_img;
  size_t n_lab = size - n_img;
  char pi[4200], pl[4200];
  nnt_fuzz_path(pi, sizeof pi, "images.idx");
  nnt_fuzz_path(pl, sizeof pl, "labels.idx");
  (flags & 1 ? nnt_fuzz_write_gzip : nnt_fuzz_write)(pi, img, n_img);
  (flags & 2 ? nnt_fuzz_write_gzip : nnt_fuzz_write)(pl, lab, n_lab);
  c.img = read_idx(img, n_img);
  c.lab = read_idx(lab, n_lab);
  c.width = (c.img.ok ? c.img.per : 1) + ((flags >> 4) & 1);
  if (!c.width || c.width > ((size_t)1 << 16)) /* an empty or huge input stays refused */
    c.width = 1;
  /* a plain part that is itself gzip: zlib reads it, this target does not */
  int opaque = (!(flags & 1) && n_img >= 2 && img[0] == 0x1f && img[1] == 0x8b) ||
               (!(flags & 2) && n_lab >= 2 && lab[0] == 0x1f && lab[1] == 0x8b);

  nnt_ds_shape shape = {.n_in = 1, .n_label = 1, .in_len = {c.width}, .label_len = {c.classes}};
  float *in = nnt_malloc(c.batch * c.width * sizeof(float));
  float *label = nnt_malloc(c.batch * c.classes * sizeof(float));
  if (!in || !label)
    nnt_fuzz_fail("out of memory");
  nnt_dataset *ds;
  nnt_err e = {0};
  int rc = nnt_dataset_create_idx(pi, pl, &ds, &e);
  if (rc)
    nnt_fuzz_fail("nnt_dataset_create_idx: %s", e.msg);
  if (nnt_dataset_set_property(ds, "shuffle", c.shuffle ? "true" : "false", &e))
    nnt_fuzz_fail("nnt_dataset_set_property: %s", e.msg);
  rc = nnt_dataset_prepare(ds, &shape, c.batch, 7, &e);
  if (rc) {
    nnt_fuzz_check_err("nnt_dataset_prepare", rc, &e);
    if (!opaque && rc != NNT_ERR_NOMEM && valid(&c))
      nnt_fuzz_fail("valid IDX files (%zu samples of %zu values, %zu classes) were refused: %s",
                    c.img.count, c.img.per, c.classes, e.msg);
  } else if (!opaque) {
    if (!valid(&c))
      nnt_fuzz_fail("invalid IDX files were accepted (images %s, labels %s)",
                    c.img.ok ? "readable" : "not readable", c.lab.ok ? "readable" : "not readable");
    if (nnt_dataset_samples(ds) != c.img.count)
      nnt_fuzz_fail("the dataset counts %zu samples, the files hold %zu", nnt_dataset_samples(ds),
                    c.img.count);
    /* only now: a header may announce far more images than the file holds */
    if (!(c.used = nnt_malloc(c.img.count)))
      nnt_fuzz_fail("out of memory");
    rc = epoch(ds, &c, in, label);
    if (!rc && (flags & 8))
      rc = epoch(ds, &c, in, label);
  }
  nnt_dataset_destroy(ds);
  nnt_free(in);
  nnt_free(label);
  nnt_free(c.used);
  return rc ? NNT_FUZZ_REFUSED : NNT_FUZZ_ACCEPTED;
}
