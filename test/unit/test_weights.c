/* Weight files (NNTrainer's .bin): the layout written (moments only for
 * weights that train), every layout a load accepts, every file it refuses
 * with the model unchanged, saves that refuse values that are not finite,
 * and copying named layers between models (core and C API). */
#include "test_util.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capi_harness.h"
#include "nntrainer/model_impl.h"

/* in 1:1:6 → fc1 (5) → bn → fc2 (4, relu, trainable=false) → fc3 (units,
 * softmax), cross entropy, batch 4, 16 synthetic samples. Weights in file
 * order: fc1 weight 30, bias 5; bn moving_mean, moving_variance, gamma,
 * beta 5 each; fc2 weight 20, bias 4; fc3 weight 4·units, bias units. */
static int model_rc(unsigned units, const char *opt, const char *const *extra,
                    nnt_model **out, nnt_err *e) {
  nnt_model *m;
  char u[16];
  snprintf(u, sizeof u, "%u", units);
  const char *layers[][9] = {
      {"input", "in", "input_shape", "1:1:6", NULL},
      {"fully_connected", "fc1", "unit", "5", NULL},
      {"batch_normalization", "bn", NULL},
      {"fully_connected", "fc2", "unit", "4", "activation", "relu", "trainable", "false", NULL},
      {"fully_connected", "fc3", "unit", u, "activation", "softmax", NULL},
  };
  assert_int_equal(nnt_model_create(&m, e), NNT_OK);
  const char *props[] = {"batch_size", "4", "epochs", "2", "loss", "cross", "seed", "11", NULL};
  for (size_t i = 0; props[i]; i += 2)
    assert_int_equal(nnt_model_set_property(m, props[i], props[i + 1], e), NNT_OK);
  for (size_t i = 0; extra && extra[i]; i += 2)
    assert_int_equal(nnt_model_set_property(m, extra[i], extra[i + 1], e), NNT_OK);
  for (size_t i = 0; i < NNT_ARRAY_LEN(layers); i++)
    tu_add_layer(m, layers[i], NNT_ARRAY_LEN(layers[i]), e);
  nnt_optimizer *o;
  assert_int_equal(nnt_optimizer_create(opt, &o, e), NNT_OK);
  assert_int_equal(nnt_optimizer_set_property(o, "learning_rate", "0.01", e), NNT_OK);
  assert_int_equal(nnt_model_set_optimizer(m, o, e), NNT_OK);
  nnt_dataset *ds;
  assert_int_equal(nnt_dataset_create_synthetic(16, 7, &ds, e), NNT_OK);
  assert_int_equal(nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, e), NNT_OK);
  *out = m;
  int rc = nnt_model_compile(m, e);
  return rc ? rc : nnt_model_initialize(m, e);
}

static nnt_model *model(unsigned units, const char *opt, const char *const *extra) {
  nnt_model *m;
  nnt_err e = {0};
  if (model_rc(units, opt, extra, &m, &e))
    fail_msg("%s", e.msg);
  return m;
}

static nnt_model *trained(unsigned units, const char *opt) {
  nnt_model *m = model(units, opt, NULL);
  nnt_err e = {0};
  if (nnt_model_train(m, NULL, NULL, &e))
    fail_msg("%s", e.msg);
  return m;
}

/* The sizes of the 3-unit model, from the layer table above. */
#define W_FLOATS 94u
#define W_BYTES (W_FLOATS * 4u)
#define MOM_FLOATS 60u /* fc1 35, bn gamma and beta 10, fc3 15 */
#define FULL_BYTES (W_BYTES + 4u + 2u * MOM_FLOATS * 4u + 8u)
/* wspec indices of the weights with moments: fc1's two, bn gamma and beta,
 * fc3's two; not bn's moving statistics (2, 3), not frozen fc2 (6, 7) */
static const size_t with_moments[] = {0, 1, 4, 5, 8, 9};

typedef struct bytes {
  uint8_t *p;
  size_t n;
} bytes;

static void put(bytes *b, const void *p, size_t n) {
  b->p = realloc(b->p, b->n + n + 1);
  memcpy(b->p + b->n, p, n);
  b->n += n;
}

static void put_u32(bytes *b, uint32_t v) {
  uint8_t c[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  put(b, c, 4);
}

/* Slot s of weight i's optimizer state (a weight that trains). */
static float *st(const nnt_model *m, unsigned s, size_t i) {
  assert_true(m->opt_off[i] != SIZE_MAX);
  return m->opt_pool + s * m->opt_stride + m->opt_off[i];
}

/* What NNTrainer writes for m: weights, "adam", the moments of the weights
 * that train (first then second, weight by weight), the counters. */
static bytes expected_file(const nnt_model *m) {
  bytes b = {0};
  put(&b, m->wpool, m->wpool_floats * 4);
  put(&b, "adam", 4);
  for (size_t k = 0; k < NNT_ARRAY_LEN(with_moments); k++) {
    size_t i = with_moments[k], n = nnt_dim_len(m->wspec[i].dim);
    for (unsigned s = 0; s < 2; s++)
      put(&b, st(m, s, i), n * 4);
  }
  put_u32(&b, m->epoch_idx);
  put_u32(&b, m->iter);
  return b;
}

static void write_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(p, 1, n, f), n);
  fclose(f);
}

static bytes read_file(const char *path) {
  bytes b = {0};
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  uint8_t buf[4096];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, f)) > 0)
    put(&b, buf, k);
  fclose(f);
  return b;
}

/* ---- the layout written -------------------------------------------- */

static void test_layout_written(void **state) {
  (void)state;
  nnt_model *m = trained(3, "adam");
  assert_int_equal(m->wpool_floats, W_FLOATS);
  assert_int_equal(m->iter, 8); /* 2 epochs of 4 batches */
  char *dir = tu_mkdtemp(), path[512];
  snprintf(path, sizeof path, "%s/w.bin", dir);
  nnt_err e = {0};
  assert_int_equal(nnt_model_save_weights(m, path, 1, &e), NNT_OK);
  bytes got = read_file(path), want = expected_file(m);
  assert_int_equal(got.n, FULL_BYTES);
  assert_int_equal(want.n, FULL_BYTES);
  assert_memory_equal(got.p, want.p, want.n);
  /* the frozen layer's and the moving statistics' state is not there, and
   * the model holds none for them: one slot is the moments' weights only */
  size_t mom = 0;
  for (size_t i = 0; i < m->n_w; i++) {
    int listed = 0;
    for (size_t k = 0; k < NNT_ARRAY_LEN(with_moments); k++)
      listed |= with_moments[k] == i;
    assert_int_equal(m->opt_off[i] != SIZE_MAX, listed);
    mom += listed ? nnt_dim_len(m->wspec[i].dim) : 0;
  }
  assert_int_equal(m->opt_stride, mom);
  assert_true(mom < W_FLOATS);
  assert_int_equal(m->omgr.arena_bytes, 2 * mom * 4);
  free(got.p);
  /* sgd and adamw: weights and counters, no tag */
  const char *opts[] = {"sgd", "adamw"};
  for (int k = 0; k < 2; k++) {
    nnt_model *s = trained(3, opts[k]);
    assert_int_equal(nnt_model_save_weights(s, path, 1, &e), NNT_OK);
    got = read_file(path);
    assert_int_equal(got.n, W_BYTES + 8);
    assert_memory_equal(got.p, s->wpool, W_BYTES);
    uint8_t c[8] = {2, 0, 0, 0, 8, 0, 0, 0};
    assert_memory_equal(got.p + W_BYTES, c, 8);
    free(got.p);
    nnt_model_destroy(s);
  }
  /* without state: the weights alone */
  assert_int_equal(nnt_model_save_weights(m, path, 0, &e), NNT_OK);
  got = read_file(path);
  assert_int_equal(got.n, W_BYTES);
  free(got.p);
  free(want.p);
  nnt_model_destroy(m);
  tu_rmdir(dir);
  free(dir);
}

/* ---- accepted layouts ------------------------------------------------ */

typedef struct snap {
  float *w, *opt;
  size_t nopt;
  unsigned epoch, iter;
} snap;

static snap snap_take(const nnt_model *m) {
  snap s = {0};
  s.w = malloc(m->wpool_floats * 4);
  memcpy(s.w, m->wpool, m->wpool_floats * 4);
  if (m->opt_pool) {
    s.nopt = nnt_model_opt_bytes(m, m->opt_slots) / 4;
    s.opt = malloc(s.nopt * 4);
    memcpy(s.opt, m->opt_pool, s.nopt * 4);
  }
  s.epoch = m->epoch_idx;
  s.iter = m->iter;
  return s;
}

static void snap_same(const nnt_model *m, const snap *s) {
  assert_memory_equal(m->wpool, s->w, m->wpool_floats * 4);
  assert_int_equal(m->opt_pool != NULL, s->opt != NULL);
  if (s->opt) {
    assert_int_equal(nnt_model_opt_bytes(m, m->opt_slots) / 4, s->nopt);
    assert_memory_equal(m->opt_pool, s->opt, s->nopt * 4);
  }
  assert_int_equal(m->epoch_idx, s->epoch);
  assert_int_equal(m->iter, s->iter);
}

static void snap_free(snap *s) {
  free(s->w);
  free(s->opt);
}

static void test_layouts_accepted(void **state) {
  (void)state;
  nnt_model *src = trained(3, "adam");
  bytes full = expected_file(src);
  char *dir = tu_mkdtemp(), path[512];
  snprintf(path, sizeof path, "%s/w.bin", dir);
  nnt_err e = {0};
  /* length of the file, counters present, moments present */
  const struct {
    size_t len;
    int counters, moments;
  } cases[] = {
      {W_BYTES, 0, 0},      /* weights only */
      {W_BYTES + 4, 0, 0},  /* "adam" alone (NNTrainer, compiled for inference) */
      {FULL_BYTES, 1, 1},   /* training save with adam */
  };
  for (size_t k = 0; k < NNT_ARRAY_LEN(cases); k++) {
    nnt_model *m = trained(3, "adam");
    write_file(path, full.p, cases[k].len);
    if (nnt_model_load_weights(m, path, &e))
      fail_msg("case %zu: %s", k, e.msg);
    assert_memory_equal(m->wpool, src->wpool, W_BYTES);
    assert_int_equal(m->epoch_idx, cases[k].counters ? 2 : 0);
    assert_int_equal(m->iter, cases[k].counters ? 8 : 0);
    if (cases[k].moments) {
      assert_non_null(m->opt_pool);
      for (size_t j = 0; j < NNT_ARRAY_LEN(with_moments); j++) {
        size_t i = with_moments[j], n = nnt_dim_len(m->wspec[i].dim);
        for (unsigned s = 0; s < 2; s++)
          assert_memory_equal(st(m, s, i), st(src, s, i), n * 4);
      }
      assert_true(m->opt_off[2] == SIZE_MAX); /* bn moving_mean has no moments */
    } else {
      assert_null(m->opt_pool); /* the old moments do not fit new weights */
    }
    nnt_model_destroy(m);
  }
  /* weights and counters (a save with sgd), into an adam model */
  bytes wc = {0};
  put(&wc, src->wpool, W_BYTES);
  put_u32(&wc, 3);
  put_u32(&wc, 2); /* NNTrainer's save after training: one epoch past */
  write_file(path, wc.p, wc.n);
  nnt_model *m = model(3, "adam", NULL);
  if (nnt_model_load_weights(m, path, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(m->epoch_idx, 3);
  assert_int_equal(m->iter, 2);
  nnt_model_destroy(m);
  /* an adam file into an sgd model: weights and counters, no state */
  write_file(path, full.p, full.n);
  m = model(3, "sgd", NULL);
  if (nnt_model_load_weights(m, path, &e))
    fail_msg("%s", e.msg);
  assert_memory_equal(m->wpool, src->wpool, W_BYTES);
  assert_null(m->opt_pool);
  assert_int_equal(m->iter, 8);
  nnt_model_destroy(m);
  /* weights, "adam" and counters: NNTrainer's save after training ended,
   * when its moments are gone (test/golden/nntrainer/fc_adam_after_train) */
  bytes tc = {0};
  put(&tc, src->wpool, W_BYTES);
  put(&tc, "adam", 4);
  put_u32(&tc, 3);
  put_u32(&tc, 8);
  write_file(path, tc.p, tc.n);
  m = model(3, "adam", NULL);
  if (nnt_model_load_weights(m, path, &e))
    fail_msg("%s", e.msg);
  assert_memory_equal(m->wpool, src->wpool, W_BYTES);
  assert_null(m->opt_pool);
  assert_int_equal(m->epoch_idx, 3);
  assert_int_equal(m->iter, 8);
  nnt_model_destroy(m);
  free(tc.p);
  /* and training goes on from a loaded file */
  m = model(3, "adam", NULL);
  assert_int_equal(nnt_model_load_weights(m, path, &e), NNT_OK);
  assert_int_equal(nnt_model_train(m, NULL, NULL, &e), NNT_OK);
  nnt_model_destroy(m);
  free(wc.p);
  free(full.p);
  nnt_model_destroy(src);
  tu_rmdir(dir);
  free(dir);
}

/* ---- refused files --------------------------------------------------- */

typedef struct bad_case {
  const char *what;
  size_t len;      /* the file's length (a prefix of the full file, zeros after) */
  size_t at;       /* patch these 4 bytes (at < len) */
  uint8_t patch[4];
  int do_patch;
  uint32_t epoch, iter; /* counters written at len - 8 when set_counters */
  int set_counters;
  int code;
  const char *n1, *n2;
} bad_case;

static const float nanf_ = NAN;

static void test_files_refused(void **state) {
  (void)state;
  nnt_model *src = trained(3, "adam");
  bytes full = expected_file(src);
  char *dir = tu_mkdtemp(), path[512];
  snprintf(path, sizeof path, "%s/w.bin", dir);
  uint8_t nan_b[4], inf_b[4], neg_b[4];
  float inf = INFINITY, neg = -1.0f;
  memcpy(nan_b, &nanf_, 4);
  memcpy(inf_b, &inf, 4);
  memcpy(neg_b, &neg, 4);
  const size_t fc3_bias = (35 + 20 + 24 + 12) * 4, bn_mv = (35 + 5) * 4;
  const size_t mom = W_BYTES + 4, fc1_v = mom + 30 * 4;
  bad_case cases[] = {
      {"short", W_BYTES - 4, 0, {0}, 0, 0, 0, 0, NNT_ERR_IO, "372 bytes", "truncated"},
      {"empty", 0, 0, {0}, 0, 0, 0, 0, NNT_ERR_IO, "has 0 bytes", "376 bytes (weights only)"},
      {"one byte more", W_BYTES + 1, 0, {0}, 0, 0, 0, 0, NNT_ERR_IO, "377 bytes",
       "bytes after the data"},
      {"trailing bytes", FULL_BYTES + 4, 0, {0}, 0, 0, 0, 0, NNT_ERR_IO, "872 bytes",
       "868 (with Adam's moments and the counters)"},
      {"nan weight", FULL_BYTES, fc3_bias + 4, {0}, 1, 0, 0, 0, NNT_ERR_INVAL,
       "layer 'fc3' weight 'bias' holds nan at index 1", "byte 368"},
      {"inf statistic", W_BYTES, bn_mv, {0}, 2, 0, 0, 0, NNT_ERR_INVAL,
       "layer 'bn' weight 'moving_variance' holds inf at index 0", "w.bin"},
      {"bad tag", FULL_BYTES, W_BYTES, {'x', 'd', 'a', 'm'}, 3, 0, 0, 0, NNT_ERR_INVAL,
       "expected the tag 'adam' after the weights (byte 376)", "78 64 61 6d"},
      {"nan moment", FULL_BYTES, mom + 8, {0}, 1, 0, 0, 0, NNT_ERR_INVAL,
       "Adam's first moment of layer 'fc1' weight 'weight' holds nan at index 2", "w.bin"},
      {"negative moment", FULL_BYTES, fc1_v, {0}, 4, 0, 0, 0, NNT_ERR_INVAL,
       "second moment of layer 'fc1' weight 'weight' holds -1", "never negative"},
      {"epochs past iterations", FULL_BYTES, 0, {0}, 0, 5, 3, 1, NNT_ERR_INVAL,
       "5 epochs after 3 iterations", "no run writes that"},
      {"epochs past iterations (sgd)", W_BYTES + 8, 0, {0}, 0, 9, 2, 1, NNT_ERR_INVAL,
       "9 epochs after 2 iterations", "w.bin"},
      {"iteration counter at its end", FULL_BYTES, 0, {0}, 0, 1, UINT32_MAX, 1,
       NNT_ERR_INVAL, "iteration counter is at its largest value", "could not continue"},
      {"epoch counter at its end", FULL_BYTES, 0, {0}, 0, UINT32_MAX, UINT32_MAX - 1, 1,
       NNT_ERR_INVAL, "epoch counter is at its largest value", "w.bin"},
  };
  nnt_model *m = trained(3, "adam");
  m->w[0].data[0] = 123.0f; /* a state no file holds */
  snap before = snap_take(m);
  for (size_t k = 0; k < NNT_ARRAY_LEN(cases); k++) {
    bad_case *c = &cases[k];
    uint8_t *b = calloc(c->len + 8, 1);
    memcpy(b, full.p, c->len < full.n ? c->len : full.n);
    const uint8_t *patch = c->do_patch == 1   ? nan_b
                           : c->do_patch == 2 ? inf_b
                           : c->do_patch == 3 ? c->patch
                                              : neg_b;
    if (c->do_patch)
      memcpy(b + c->at, patch, 4);
    if (c->set_counters)
      for (int j = 0; j < 8; j++)
        b[c->len - 8 + j] = (uint8_t)((j < 4 ? c->epoch : c->iter) >> (8 * (j % 4)));
    write_file(path, b, c->len);
    free(b);
    nnt_err e = {0};
    int rc = nnt_model_load_weights(m, path, &e);
    if (rc != c->code)
      fail_msg("%s: got %d (%s), want %d", c->what, rc, e.msg, c->code);
    if (!strstr(e.msg, c->n1) || !strstr(e.msg, c->n2) || !strstr(e.msg, path))
      fail_msg("%s: message lacks '%s', '%s' or the path: %s", c->what, c->n1, c->n2, e.msg);
    snap_same(m, &before);
  }
  /* a file made for another model (4 output units) */
  nnt_model *other = model(4, "adam", NULL);
  nnt_err e = {0};
  assert_int_equal(nnt_model_save_weights(other, path, 1, &e), NNT_OK);
  assert_int_equal(nnt_model_load_weights(m, path, &e), NNT_ERR_IO);
  tu_assert_contains(e.msg, path);
  tu_assert_contains(e.msg, "has 928 bytes");
  tu_assert_contains(e.msg,
                     "376 bytes (weights only), 384 (with the epoch and iteration "
                     "counters), 868 (with Adam's moments and the counters), 380 (with the 'adam' "
                     "tag alone) or 388 (with the 'adam' tag and the counters)");
  snap_same(m, &before);
  /* paths that are not regular files: refused at once, never waited on */
  alarm(20);
  char fifo[512];
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  const struct {
    const char *path, *needle;
    int code;
  } paths[] = {
      {dir, "a directory", NNT_ERR_INVAL},
      {fifo, "a FIFO", NNT_ERR_INVAL},
      {"/dev/null", "a character device", NNT_ERR_INVAL},
      {"/dev/zero", "a character device", NNT_ERR_INVAL},
      {"/nonexistent/w.bin", "cannot open", NNT_ERR_IO},
  };
  for (size_t k = 0; k < NNT_ARRAY_LEN(paths); k++) {
    assert_int_equal(nnt_model_load_weights(m, paths[k].path, &e), paths[k].code);
    tu_assert_contains(e.msg, paths[k].path);
    tu_assert_contains(e.msg, paths[k].needle);
    snap_same(m, &before);
  }
  alarm(0);
  snap_free(&before);
  nnt_model_destroy(other);
  nnt_model_destroy(m);
  free(full.p);
  nnt_model_destroy(src);
  tu_rmdir(dir);
  free(dir);
}

/* continue_train with a file of another model: initialize says why */
static void test_continue_train_other_model(void **state) {
  (void)state;
  char *dir = tu_mkdtemp(), path[512];
  snprintf(path, sizeof path, "%s/ck.bin", dir);
  nnt_model *a = trained(4, "adam");
  nnt_err e = {0};
  assert_int_equal(nnt_model_save_weights(a, path, 1, &e), NNT_OK);
  nnt_model_destroy(a);
  const char *props[] = {"continue_train", "true", "save_path", path, NULL};
  nnt_model *m;
  assert_int_equal(model_rc(3, "adam", props, &m, &e), NNT_ERR_IO);
  tu_assert_contains(e.msg, path);
  tu_assert_contains(e.msg, "has 928 bytes");
  assert_false(nnt_model_is_initialized(m));
  nnt_model_destroy(m);
  /* the model's own file resumes */
  nnt_model *b = trained(3, "adam");
  assert_int_equal(nnt_model_save_weights(b, path, 1, &e), NNT_OK);
  nnt_model_destroy(b);
  assert_int_equal(model_rc(3, "adam", props, &m, &e), NNT_OK);
  assert_int_equal(m->epoch_idx, 2);
  assert_int_equal(m->iter, 8);
  nnt_model_destroy(m);
  /* a save_path that is a folder is not silently skipped (a fresh start
   * would lose the run the user meant to resume); a missing file is a
   * fresh start */
  char sub[600];
  snprintf(sub, sizeof sub, "%s/folder.bin", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  const char *folder[] = {"continue_train", "true", "save_path", sub, NULL};
  assert_int_not_equal(model_rc(3, "adam", folder, &m, &e), NNT_OK);
  tu_assert_contains(e.msg, sub);
  tu_assert_contains(e.msg, "directory");
  nnt_model_destroy(m);
  rmdir(sub);
  snprintf(sub, sizeof sub, "%s/none.bin", dir);
  const char *none[] = {"continue_train", "true", "save_path", sub, NULL};
  assert_int_equal(model_rc(3, "adam", none, &m, &e), NNT_OK);
  assert_int_equal(m->epoch_idx, 0);
  nnt_model_destroy(m);
  tu_rmdir(dir);
  free(dir);
}

/* A run without continue_train starts afresh: counters and Adam's
 * moments, as NNTrainer clears its optimizer variables. A second run of a
 * trained model equals a first run of a model given its weights alone. */
static void test_new_run_clears_moments(void **state) {
  (void)state;
  nnt_err e = {0};
  nnt_model *a = trained(3, "adam");
  nnt_model *b = model(3, "adam", NULL);
  memcpy(b->wpool, a->wpool, W_BYTES);
  assert_int_equal(nnt_model_train(a, NULL, NULL, &e), NNT_OK);
  assert_int_equal(nnt_model_train(b, NULL, NULL, &e), NNT_OK);
  assert_memory_equal(a->wpool, b->wpool, W_BYTES);
  assert_int_equal(a->omgr.arena_bytes, b->omgr.arena_bytes);
  assert_memory_equal(a->opt_pool, b->opt_pool, a->omgr.arena_bytes);
  assert_int_equal(a->iter, b->iter);
  nnt_model_destroy(a);
  nnt_model_destroy(b);
}

/* ---- saves refuse values that are not finite -------------------------- */

static void test_save_refuses_non_finite(void **state) {
  (void)state;
  nnt_model *m = trained(3, "adam");
  char *dir = tu_mkdtemp(), path[512];
  snprintf(path, sizeof path, "%s/w.bin", dir);
  nnt_err e = {0};
  assert_int_equal(nnt_model_save_weights(m, path, 1, &e), NNT_OK);
  bytes good = read_file(path);
  float keep = m->w[7].data[2];
  m->w[7].data[2] = NAN; /* fc2's bias */
  assert_int_equal(nnt_model_save_weights(m, path, 1, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "layer 'fc2' weight 'bias' holds nan at index 2");
  tu_assert_contains(e.msg, path);
  bytes now = read_file(path);
  assert_int_equal(now.n, good.n);
  assert_memory_equal(now.p, good.p, good.n);
  free(now.p);
  m->w[7].data[2] = keep;
  /* a moment that overflowed */
  float *v = st(m, 1, 9);
  v[0] = INFINITY;
  assert_int_equal(nnt_model_save_weights(m, path, 1, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "second moment of layer 'fc3' weight 'bias' holds inf");
  now = read_file(path);
  assert_memory_equal(now.p, good.p, good.n);
  free(now.p);
  /* the moments are not in a save without state */
  assert_int_equal(nnt_model_save_weights(m, path, 0, &e), NNT_OK);
  free(good.p);
  nnt_model_destroy(m);
  tu_rmdir(dir);
  free(dir);
}

/* The INI writer and the weight writer share the atomic save: through a
 * link, with fopen's mode, never onto a folder. */
static void test_writers_use_the_atomic_save(void **state) {
  (void)state;
  nnt_model *m = model(3, "adam", NULL);
  char *dir = tu_mkdtemp(), real[512], link[512], bin[512];
  snprintf(real, sizeof real, "%s/real.ini", dir);
  snprintf(link, sizeof link, "%s/model.ini", dir);
  snprintf(bin, sizeof bin, "%s/model.bin", dir);
  FILE *f = fopen(real, "w");
  fclose(f);
  assert_int_equal(chmod(real, 0640), 0);
  assert_int_equal(symlink("real.ini", link), 0);
  nnt_err e = {0};
  mode_t old = umask(022);
  assert_int_equal(nnt_model_save_ini(m, link, bin, &e), NNT_OK);
  assert_int_equal(nnt_model_save_weights(m, bin, 1, &e), NNT_OK);
  umask(old);
  struct stat st;
  assert_int_equal(lstat(link, &st), 0);
  assert_true(S_ISLNK(st.st_mode));
  assert_int_equal(stat(real, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0640);
  assert_true(st.st_size > 100);
  assert_int_equal(stat(bin, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0644); /* not mkstemp's 0600 */
  assert_int_equal(st.st_size, FULL_BYTES);
  assert_int_equal(nnt_model_save_ini(m, dir, NULL, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "it is a directory");
  assert_int_equal(nnt_model_save_weights(m, dir, 1, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "it is a directory");
  nnt_model_destroy(m);
  tu_rmdir(dir);
  free(dir);
}

/* ---- copying named layers ------------------------------------------- */

static void test_copy_layers(void **state) {
  (void)state;
  nnt_model *base = trained(10, "adam"), *head = trained(3, "adam");
  nnt_err e = {0};
  snap before = snap_take(head);
  /* all or nothing: fc1 fits, fc3 (10 units against 3) does not */
  const char *mixed[] = {"fc1", "fc3"};
  assert_int_equal(nnt_model_copy_layer_weights(head, base, mixed, 2, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "layer 'fc3' weight 0 is 'weight' 1:1:4:10 in the source model "
                            "and 'weight' 1:1:4:3 in the destination");
  snap_same(head, &before);
  const char *missing[] = {"fc1", "fc9"};
  assert_int_equal(nnt_model_copy_layer_weights(head, base, missing, 2, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "the source model has no layer 'fc9'");
  assert_int_equal(nnt_model_copy_layer_weights(head, base, missing, 0, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "no layer named");
  float keep = base->w[0].data[3];
  base->w[0].data[3] = NAN;
  assert_int_equal(nnt_model_copy_layer_weights(head, base, mixed, 1, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "layer 'fc1' weight 'weight' of the source model holds nan at "
                            "index 3");
  base->w[0].data[3] = keep;
  snap_same(head, &before);
  nnt_model *raw;
  assert_int_equal(nnt_model_create(&raw, &e), NNT_OK);
  assert_int_equal(nnt_model_copy_layer_weights(head, raw, mixed, 1, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "compile the source model first");
  assert_int_equal(nnt_model_copy_layer_weights(raw, base, mixed, 1, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "compile the destination model first");
  nnt_model_destroy(raw);
  snap_same(head, &before);
  /* the features (and the input, which has no weights; names are
   * case-insensitive as everywhere) */
  const char *features[] = {"in", "FC1", "bn", "fc2"};
  if (nnt_model_copy_layer_weights(head, base, features, 4, &e))
    fail_msg("%s", e.msg);
  size_t feat = (size_t)(head->w[8].data - head->wpool); /* fc1, bn, fc2 */
  assert_int_equal(feat, 35 + 20 + 24);
  assert_memory_equal(head->wpool, base->wpool, feat * 4);
  assert_memory_equal(head->wpool + feat, before.w + feat, (W_FLOATS - feat) * 4);
  /* the copied weights' moments start again; the head's are kept */
  for (unsigned s = 0; s < 2; s++)
    for (size_t i = 0; i < head->n_w; i++) {
      if (head->opt_off[i] == SIZE_MAX)
        continue;
      size_t n = nnt_dim_len(head->wspec[i].dim), at = s * head->opt_stride + head->opt_off[i];
      if (i < 8) /* fc1, bn, fc2 */
        for (size_t j = 0; j < n; j++)
          assert_true(head->opt_pool[at + j] == 0);
      else
        assert_memory_equal(head->opt_pool + at, before.opt + at, n * 4);
    }
  assert_int_equal(head->iter, before.iter);
  /* and the head trains on them */
  assert_int_equal(nnt_model_train(head, NULL, NULL, &e), NNT_OK);
  snap_free(&before);
  nnt_model_destroy(base);
  nnt_model_destroy(head);
}

/* Every allocation of a load, a save and a copy fails in turn: the call
 * says NNT_ERR_NOMEM and changes nothing (the sanitizer build checks that
 * nothing leaks), until it succeeds. */
static void test_allocation_failures(void **state) {
  (void)state;
  nnt_model *src = trained(3, "adam"), *m = trained(3, "adam"), *base = trained(10, "adam");
  char *dir = tu_mkdtemp(), path[512];
  snprintf(path, sizeof path, "%s/w.bin", dir);
  nnt_err e = {0};
  assert_int_equal(nnt_model_save_weights(src, path, 1, &e), NNT_OK);
  bytes good = read_file(path);
  m->iter = 5;
  snap before = snap_take(m);
  const char *features[] = {"fc1", "bn", "fc2"};
  long n, fails[3] = {0, 0, 0};
  for (int what = 0; what < 3; what++) {
    for (n = 0; n < 1000; n++) {
      nnt_alloc_fail_after(n);
      int rc = what == 0   ? nnt_model_load_weights(m, path, &e)
               : what == 1 ? nnt_model_save_weights(m, path, 1, &e)
                           : nnt_model_copy_layer_weights(m, base, features, 3, &e);
      nnt_alloc_fail_after(-1);
      if (rc == NNT_OK)
        break;
      if (rc != NNT_ERR_NOMEM)
        fail_msg("call %d, allocation %ld: %s", what, n, e.msg);
      tu_assert_contains(e.msg, "out of memory");
      snap_same(m, &before);
      bytes now = read_file(path);
      assert_int_equal(now.n, good.n);
      assert_memory_equal(now.p, good.p, good.n);
      free(now.p);
      fails[what]++;
    }
    /* the folder holds the file alone: no temporary file left behind */
    struct stat st;
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s/.w.bin.nnt-tmp", dir);
    assert_int_equal(stat(tmp, &st), -1);
    snap_free(&before);
    before = snap_take(m);
    if (what == 1) {
      free(good.p);
      good = read_file(path);
    }
  }
  print_message("failed allocations: load %ld, save %ld, copy %ld\n", fails[0], fails[1],
                fails[2]);
  assert_true(fails[0] > 0 && fails[1] > 0 && fails[2] > 0);
  snap_free(&before);
  free(good.p);
  nnt_model_destroy(src);
  nnt_model_destroy(m);
  nnt_model_destroy(base);
  tu_rmdir(dir);
  free(dir);
}

/* in 1:1:8 → feat (f units) → out (o units, softmax), sgd, compiled */
static ml_train_model_h api_model(unsigned f, unsigned o) {
  ml_train_model_h m;
  ml_train_layer_h in, l1, l2;
  ml_train_optimizer_h opt;
  char p1[64], p2[64];
  snprintf(p1, sizeof p1, "name=feat | unit=%u", f);
  snprintf(p2, sizeof p2, "name=out | unit=%u | activation=softmax", o);
  OK(ml_train_model_construct(&m));
  OK(ml_train_layer_create(&in, ML_TRAIN_LAYER_TYPE_INPUT));
  OK(ml_train_layer_set_property(in, "name=in", "input_shape=1:1:8", NULL));
  OK(ml_train_layer_create(&l1, ML_TRAIN_LAYER_TYPE_FC));
  OK(ml_train_layer_set_property_with_single_param(l1, p1));
  OK(ml_train_layer_create(&l2, ML_TRAIN_LAYER_TYPE_FC));
  OK(ml_train_layer_set_property_with_single_param(l2, p2));
  OK(ml_train_model_add_layer(m, in));
  OK(ml_train_model_add_layer(m, l1));
  OK(ml_train_model_add_layer(m, l2));
  OK(ml_train_optimizer_create(&opt, ML_TRAIN_OPTIMIZER_TYPE_SGD));
  OK(ml_train_model_set_optimizer(m, opt));
  char seed[16];
  snprintf(seed, sizeof seed, "seed=%u", f * 100 + o);
  OK(ml_train_model_compile(m, "loss=cross", "batch_size=4", seed, NULL));
  return m;
}

static void same_weight(ml_train_model_h a, ml_train_model_h b, const char *layer, bool want) {
  ml_tensors_data_h da, db;
  ml_tensors_info_h ia, ib;
  OK(ml_train_model_get_weight(a, layer, &da, &ia));
  OK(ml_train_model_get_weight(b, layer, &db, &ib));
  void *pa, *pb;
  size_t na, nb;
  OK(ml_tensors_data_get_tensor_data(da, 0, &pa, &na));
  OK(ml_tensors_data_get_tensor_data(db, 0, &pb, &nb));
  assert_int_equal(na == nb && !memcmp(pa, pb, na), want);
  OK(ml_tensors_data_destroy(da));
  OK(ml_tensors_data_destroy(db));
  OK(ml_tensors_info_destroy(ia));
  OK(ml_tensors_info_destroy(ib));
}

static void test_capi_copy_and_load(void **state) {
  (void)state;
  ml_train_model_h a = api_model(6, 3), b = api_model(6, 5), c = api_model(7, 3), raw;
  OK(ml_train_model_construct(&raw));
  const char *feat[] = {"feat", NULL}, *out[] = {"out", NULL}, *none[] = {NULL};
  const char *missing[] = {"feat", "nope", NULL};
  same_weight(a, b, "feat", false);
  OK(ml_train_ext_model_copy_layer_weights(b, a, feat));
  same_weight(a, b, "feat", true);
  same_weight(a, c, "out", false);
  const char *w = "ml_train_ext_model_copy_layer_weights";
  EXPECT_FAIL(ml_train_ext_model_copy_layer_weights(b, a, out), ML_ERROR_INVALID_PARAMETER,
              "layer 'out' weight 0 is 'weight' 1:1:6:3 in the source model and 'weight' "
              "1:1:6:5 in the destination");
  EXPECT_FAIL(ml_train_ext_model_copy_layer_weights(c, a, feat), ML_ERROR_INVALID_PARAMETER,
              "layer 'feat'");
  EXPECT_FAIL(ml_train_ext_model_copy_layer_weights(c, a, missing), ML_ERROR_INVALID_PARAMETER,
              "the source model has no layer 'nope'");
  EXPECT_FAIL(ml_train_ext_model_copy_layer_weights(b, a, NULL), ML_ERROR_INVALID_PARAMETER,
              "layer_names is NULL or empty");
  EXPECT_FAIL(ml_train_ext_model_copy_layer_weights(b, a, none), ML_ERROR_INVALID_PARAMETER,
              w);
  EXPECT_FAIL(ml_train_ext_model_copy_layer_weights(raw, a, feat), ML_ERROR_INVALID_PARAMETER,
              "compile the model first");
  EXPECT_FAIL(ml_train_ext_model_copy_layer_weights(b, raw, feat), ML_ERROR_INVALID_PARAMETER,
              "compile the model first");
  EXPECT_FAIL(ml_train_ext_model_copy_layer_weights(NULL, a, feat), ML_ERROR_INVALID_PARAMETER,
              w);
  same_weight(a, c, "out", false); /* the failures changed nothing */
  /* a weight file of another model's shape is refused by load */
  char *dir = tu_mkdtemp(), path[512];
  snprintf(path, sizeof path, "%s/a.bin", dir);
  OK(ml_train_model_save(a, path, ML_TRAIN_MODEL_FORMAT_BIN));
  EXPECT_FAIL(ml_train_model_load(b, path, ML_TRAIN_MODEL_FORMAT_BIN),
              ML_ERROR_INVALID_PARAMETER, "has 308 bytes (shorter than the weights");
  OK(ml_train_model_load(a, path, ML_TRAIN_MODEL_FORMAT_BIN));
  EXPECT_FAIL(ml_train_model_load(a, dir, ML_TRAIN_MODEL_FORMAT_BIN), ML_ERROR_INVALID_PARAMETER,
              "a directory");
  OK(ml_train_model_destroy(a));
  OK(ml_train_model_destroy(b));
  OK(ml_train_model_destroy(c));
  OK(ml_train_model_destroy(raw));
  assert_no_handles();
  tu_rmdir(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layout_written),
      cmocka_unit_test(test_layouts_accepted),
      cmocka_unit_test(test_files_refused),
      cmocka_unit_test(test_continue_train_other_model),
      cmocka_unit_test(test_new_run_clears_moments),
      cmocka_unit_test(test_save_refuses_non_finite),
      cmocka_unit_test(test_writers_use_the_atomic_save),
      cmocka_unit_test(test_copy_layers),
      cmocka_unit_test(test_allocation_failures),
      cmocka_unit_test(test_capi_copy_and_load),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
