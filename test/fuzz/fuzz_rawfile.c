/* Fuzz target: NNTrainer's raw data file (records of input floats then
 * label floats). Input: byte 0 picks the sample shape and batch from the
 * table below (its low 3 bits); byte 1 sets shuffle (bit 0), buffer_size
 * (bits 1-2, plus one), a second epoch (bit 3) and how many batches to read
 * per epoch (bits 4-7; 0: all). The rest is the file.
 *
 * Promises checked beyond the sanitizers: the file is accepted exactly when
 * its size is a whole number of records, at least one batch; an epoch gives samples / batch
 * full batches; each sample of a batch is a record of the file, bit for
 * bit, in file order without shuffle and each record at most once with it. */
#include "fuzz.h"

#include <stdio.h>
#include <string.h>

#include "nntrainer/dataset.h"

typedef struct shape_case {
  unsigned n_in, n_label;
  size_t in[3], label[2];
  unsigned batch;
} shape_case;

static const shape_case shapes[8] = {
    {1, 1, {6}, {3}, 4},     /* test/golden/nntrainer/fc_* train.dat */
    {1, 1, {36}, {3}, 4},    /* test/golden/nntrainer/conv_bn_* train.dat */
    {1, 1, {1}, {1}, 1},     {2, 1, {2, 3}, {2}, 2}, {1, 2, {4}, {2, 1}, 3},
    {1, 1, {1}, {1}, 7},     {3, 1, {1, 2, 1}, {5}, 2}, {1, 1, {8}, {2}, 1},
};

typedef struct check {
  const shape_case *sc;
  const uint8_t *file;
  size_t rec_bytes, samples;
  int shuffle;
  uint8_t *used; /* per record, this epoch */
  size_t next;   /* the record expected next without shuffle */
} check;

/* Whether sample j of the batch is record r, bit for bit. */
static int is_record(const check *c, float **in, float **label, unsigned j, size_t r) {
  const uint8_t *p = c->file + r * c->rec_bytes;
  for (unsigned i = 0; i < c->sc->n_in; i++) {
    size_t n = c->sc->in[i] * sizeof(float);
    if (memcmp(in[i] + j * c->sc->in[i], p, n))
      return 0;
    p += n;
  }
  for (unsigned i = 0; i < c->sc->n_label; i++) {
    size_t n = c->sc->label[i] * sizeof(float);
    if (memcmp(label[i] + j * c->sc->label[i], p, n))
      return 0;
    p += n;
  }
  return 1;
}

static void check_batch(check *c, float **in, float **label) {
  for (unsigned j = 0; j < c->sc->batch; j++) {
    if (!c->shuffle) {
      if (c->next >= c->samples || !is_record(c, in, label, j, c->next))
        nnt_fuzz_fail("sample %u of a batch is not record %zu of the file", j, c->next);
      c->next++;
      continue;
    }
    size_t r = 0;
    while (r < c->samples && (c->used[r] || !is_record(c, in, label, j, r)))
      r++;
    if (r == c->samples)
      nnt_fuzz_fail("sample %u of a shuffled batch is no unused record of the file", j);
    c->used[r] = 1;
  }
}

/* One epoch; @return NNT_OK or the error (checked). */
static int epoch(nnt_dataset *ds, check *c, float **in, float **label, unsigned max_batches) {
  nnt_err e = {0};
  int rc = nnt_dataset_epoch_begin(ds, &e);
  if (rc)
    return nnt_fuzz_check_err("nnt_dataset_epoch_begin", rc, &e);
  memset(c->used, 0, c->samples + 1);
  c->next = 0;
  size_t got = 0;
  int end = 0;
  while (!max_batches || got < max_batches) {
    rc = nnt_dataset_next_batch(ds, in, label, &end, &e);
    if (rc || end)
      break;
    check_batch(c, in, label);
    got++;
  }
  nnt_dataset_epoch_end(ds);
  if (!rc && end) {
    if (got != c->samples / c->sc->batch)
      nnt_fuzz_fail("an epoch of %zu samples gave %zu batches of %u", c->samples, got,
                    c->sc->batch);
    rc = NNT_OK;
  } else if (rc) {
    nnt_fuzz_check_err("nnt_dataset_next_batch", rc, &e);
  }
  return rc;
}

int nnt_fuzz_rawfile(const uint8_t *data, size_t size) {
  nnt_fuzz_init();
  if (size < 2)
    return NNT_FUZZ_REFUSED;
  const shape_case *sc = &shapes[data[0] & 7];
  uint8_t flags = data[1];
  data += 2, size -= 2;
  char path[4200], buf[16];
  nnt_fuzz_path(path, sizeof path, "data.dat");
  nnt_fuzz_write(path, data, size);

  nnt_ds_shape shape = {.n_in = sc->n_in, .n_label = sc->n_label};
  size_t rec = 0, total = 0;
  for (unsigned i = 0; i < sc->n_in; i++)
    rec += shape.in_len[i] = sc->in[i];
  for (unsigned i = 0; i < sc->n_label; i++)
    rec += shape.label_len[i] = sc->label[i];
  check c = {.sc = sc, .file = data, .rec_bytes = rec * sizeof(float), .shuffle = flags & 1};
  float *in[3] = {0}, *label[2] = {0};
  for (unsigned i = 0; i < sc->n_in; i++)
    total += sc->batch * sc->in[i];
  for (unsigned i = 0; i < sc->n_label; i++)
    total += sc->batch * sc->label[i];
  float *mem = nnt_malloc(total * sizeof(float));
  c.used = nnt_malloc(size / c.rec_bytes + 1);
  if (!mem || !c.used)
    nnt_fuzz_fail("out of memory");
  float *p = mem;
  for (unsigned i = 0; i < sc->n_in; i++) {
    in[i] = p;
    p += sc->batch * sc->in[i];
  }
  for (unsigned i = 0; i < sc->n_label; i++) {
    label[i] = p;
    p += sc->batch * sc->label[i];
  }

  nnt_dataset *ds = NULL;
  nnt_err e = {0};
  int rc = nnt_dataset_create_file(path, &ds, &e);
  if (rc)
    nnt_fuzz_fail("nnt_dataset_create_file: %s", e.msg);
  snprintf(buf, sizeof buf, "%u", 1u + ((flags >> 1) & 3));
  if (nnt_dataset_set_property(ds, "shuffle", c.shuffle ? "true" : "false", &e) ||
      nnt_dataset_set_property(ds, "buffer_size", buf, &e))
    nnt_fuzz_fail("nnt_dataset_set_property: %s", e.msg);
  rc = nnt_dataset_prepare(ds, &shape, sc->batch, 42, &e);
  /* whole records, at least one batch of them */
  int whole = size % c.rec_bytes == 0 && size / c.rec_bytes >= sc->batch;
  if (rc) {
    nnt_fuzz_check_err("nnt_dataset_prepare", rc, &e);
    if (whole && rc != NNT_ERR_NOMEM)
      nnt_fuzz_fail("a file of %zu whole records of %zu bytes (a batch or more) was refused: %s",
                    size / c.rec_bytes, c.rec_bytes, e.msg);
  } else {
    if (!whole)
      nnt_fuzz_fail("a file of %zu bytes, not whole records of %zu or less than a batch of %u, "
                    "was accepted", size, c.rec_bytes, sc->batch);
    c.samples = size / c.rec_bytes;
    if (nnt_dataset_samples(ds) != c.samples)
      nnt_fuzz_fail("the dataset counts %zu samples, the file holds %zu",
                    nnt_dataset_samples(ds), c.samples);
    unsigned max_batches = flags >> 4;
    rc = epoch(ds, &c, in, label, max_batches);
    if (!rc && (flags & 8))
      rc = epoch(ds, &c, in, label, max_batches);
  }
  nnt_dataset_destroy(ds);
  nnt_free(mem);
  nnt_free(c.used);
  return rc ? NNT_FUZZ_REFUSED : NNT_FUZZ_ACCEPTED;
}
