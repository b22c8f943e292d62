/* Nothing outside a backend dereferences a tensor's address: every model
 * runs on the fake device (fake_device.h: memory at addresses that fault
 * when read, computed on by the CPU's kernels through a translation of
 * every address) exactly as on the CPU. Each Applications and benchmarks
 * model and each model of type_models.h (every layer type) trains,
 * validates, evaluates, infers and saves with bitwise the CPU's weights,
 * losses, accuracies, outputs and files; so do continue_train, a save
 * loaded back, check_finite's message on a NaN, a dump, memory
 * optimization off, poison mode and the C API's training, inference and
 * tensor reads.
 * The op harness runs every case on it too, and a layer that reads an
 * address, or hands a host pointer to a kernel, is caught. The backends'
 * memory entries count exactly the live buffers, device or host. */
#include "test_util.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/src/capi.h"
#include "capi_harness.h"
#include "fake_device.h"
#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"
#include "op_harness.h"
#include "type_models.h"

/* ---- one model on both backends ------------------------------------------ */

#define REC_MAX 512

/* What training reported: every callback's values, bit for bit. */
typedef struct record {
  size_t n;
  float v[REC_MAX];
} record;

static void on_progress(const nnt_progress *p, void *ud) {
  record *r = ud;
  float v[] = {(float)p->epoch,
               (float)p->batch,
               p->loss,
               p->batch_loss,
               p->epoch_done ? p->train_loss : 0,
               p->epoch_done && p->has_valid ? p->valid_loss : 0,
               p->epoch_done && p->has_valid ? p->valid_accuracy : 0};
  for (size_t i = 0; i < NNT_ARRAY_LEN(v) && r->n < REC_MAX; i++)
    r->v[r->n++] = v[i];
}

/* The model of the INI at path with overrides, on the fake device (fake)
 * or the CPU. synth: replace its datasets with synthetic ones (train:
 * two batches, valid: one). */
static int poison; /* the next models poison what dies (NNT_POISON) */

static nnt_model *load(const char *path, int fake, const char *const *ov, size_t nov,
                       int synth) {
  nnt_model *m = tu_model_for_ini(path);
  nnt_err e = {0};
  if (nnt_ini_load(m, path, ov, nov, &e))
    fail_msg("%s: %s", path, e.msg);
  for (int mode = 0; synth && mode < 3; mode++) {
    nnt_dataset *ds = NULL;
    unsigned b = nnt_model_batch_size(m);
    if (mode != NNT_DS_TEST)
      assert_int_equal(nnt_dataset_create_synthetic(mode == NNT_DS_TRAIN ? 2 * b : b, 77, &ds,
                                                    &e), NNT_OK);
    assert_int_equal(nnt_model_set_dataset(m, mode, ds, &e), NNT_OK);
  }
  if (fake)
    assert_int_equal(nnt_model_set_backend(m, fdev_backend(), &e), NNT_OK);
  m->poison = poison;
  if (nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("%s on %s: %s", path, fake ? "fakedev" : "cpu", e.msg);
  assert_ptr_equal(m->be, fake ? fdev_backend() : nnt_backend_cpu());
  return m;
}

static void assert_same_weights(nnt_model *c, nnt_model *f, const char *what) {
  assert_int_equal(c->n_w, f->n_w);
  assert_int_equal(c->wpool_floats, f->wpool_floats);
  float *x = tu_weights_of(c), *y = tu_weights_of(f);
  for (size_t i = 0; i < c->wpool_floats; i++)
    if (memcmp(&x[i], &y[i], sizeof *x))
      fail_msg("%s: weight float %zu: cpu %.9g, fakedev %.9g", what, i, x[i], y[i]);
  free(x);
  free(y);
}

/* Train both, then evaluate, infer and save both: the same bits. */
static void train_both(nnt_model *c, nnt_model *f, const char *what) {
  nnt_err e = {0};
  record rc = {0}, rf = {0};
  size_t ops = fdev_count.ops;
  if (nnt_model_train(c, on_progress, &rc, &e))
    fail_msg("%s on cpu: %s", what, e.msg);
  if (nnt_model_train(f, on_progress, &rf, &e))
    fail_msg("%s on fakedev: %s", what, e.msg);
  assert_true(fdev_count.ops > ops);
  assert_true(rc.n > 0);
  assert_int_equal(rc.n, rf.n);
  for (size_t i = 0; i < rc.n; i++)
    if (memcmp(&rc.v[i], &rf.v[i], sizeof rc.v[i]))
      fail_msg("%s: progress value %zu: cpu %.9g, fakedev %.9g", what, i, rc.v[i], rf.v[i]);
  assert_same_weights(c, f, what);
  /* the weights and the optimizer state are the device's; so is every
   * arena, or its addresses would have stopped the fake kernels */
  assert_ptr_equal(f->wbuf->type, fdev_buffer_type());
  assert_true(!f->obuf || f->obuf->type == fdev_buffer_type());
  for (size_t i = 0; i < f->n_w; i++)
    assert_true(fdev_is_opaque(f->w[i].data));
}

static void evaluate_infer_save(nnt_model *c, nnt_model *f, const char *what) {
  nnt_err e = {0};
  if (nnt_model_dataset(c, NNT_DS_VALID)) {
    float lc, ac, lf, af;
    if (nnt_model_evaluate(c, NNT_DS_VALID, &lc, &ac, &e) ||
        nnt_model_evaluate(f, NNT_DS_VALID, &lf, &af, &e))
      fail_msg("%s: evaluate: %s", what, e.msg);
    assert_memory_equal(&lc, &lf, sizeof lc);
    assert_memory_equal(&ac, &af, sizeof ac);
  }
  /* inference on the same random inputs */
  nnt_dim in[NNT_MAX_IO], out[NNT_MAX_IO];
  unsigned ni = nnt_model_input_dims(c, in, NNT_MAX_IO);
  unsigned no = nnt_model_output_dims(c, out, NNT_MAX_IO);
  float *x[NNT_MAX_IO], *yc[NNT_MAX_IO], *yf[NNT_MAX_IO];
  nnt_rng r;
  nnt_rng_seed(&r, 3);
  for (unsigned i = 0; i < ni; i++) {
    /* in [0, 1): also a valid index (0) where an embedding reads it */
    x[i] = malloc(nnt_dim_len(in[i]) * sizeof(float));
    tu_fill_uniform(&r, x[i], nnt_dim_len(in[i]), 0, 1);
  }
  for (unsigned o = 0; o < no; o++) {
    yc[o] = calloc(nnt_dim_len(out[o]), sizeof(float));
    yf[o] = calloc(nnt_dim_len(out[o]), sizeof(float));
  }
  if (nnt_model_infer(c, (const float *const *)x, yc, &e) ||
      nnt_model_infer(f, (const float *const *)x, yf, &e))
    fail_msg("%s: infer: %s", what, e.msg);
  for (unsigned o = 0; o < no; o++)
    assert_memory_equal(yc[o], yf[o], nnt_dim_len(out[o]) * sizeof(float));
  for (unsigned i = 0; i < ni; i++)
    free(x[i]);
  for (unsigned o = 0; o < no; o++)
    free(yc[o]), free(yf[o]);
  /* the files, with the optimizer state and without */
  for (int st = 0; st < 2; st++) {
    const char *pc = tu_path_in("cpu.bin"), *pf = tu_path_in("fake.bin");
    if (nnt_model_save_weights(c, pc, st, &e) || nnt_model_save_weights(f, pf, st, &e))
      fail_msg("%s: save: %s", what, e.msg);
    tu_assert_same_file(pc, pf);
  }
}

static void both(const char *path, const char *const *ov, size_t nov, int synth) {
  nnt_model *c = load(path, 0, ov, nov, synth), *f = load(path, 1, ov, nov, synth);
  train_both(c, f, path);
  evaluate_infer_save(c, f, path);
  nnt_model_destroy(c);
  nnt_model_destroy(f);
}

/* ---- every model ------------------------------------------------------------ */

static void both_app(const char *path, void *ud) {
  (void)ud;
  const char *ov[] = {"epochs=1", "save_path=", "batch_size=2"};
  both(path, ov, NNT_ARRAY_LEN(ov), 1);
}

static void test_applications(void **state) {
  (void)state;
  assert_true(tu_each_app_ini(both_app, NULL) >= 8);
}

/* The memory entry: the fake device's buffers are device memory and it
 * holds nothing on the host; the CPU's are host memory and it holds no
 * device memory. Each counts exactly the bytes of the model's live buffers
 * (the weights and training arena after planning; the optimizer state,
 * the model's scalar and the evaluation arena of validation once it
 * trains), and nothing once it is destroyed. */
static void test_memory_report(void **state) {
  (void)state;
  const char *path = NNT_SOURCE_DIR "/Applications/FashionMNIST/mlp.ini";
  const char *ov[] = {"epochs=1", "save_path=", "batch_size=2"};
  nnt_err e = {0};
  for (int fake = 0; fake < 2; fake++) {
    nnt_backend *be = fake ? fdev_backend() : nnt_backend_cpu();
    nnt_mem_usage before, planned, trained, after;
    nnt_backend_memory(be, &before);
    nnt_model *m = load(path, fake, ov, NNT_ARRAY_LEN(ov), 1);
    assert_int_equal(nnt_model_plan(m, NNT_MODE_TRAIN, &e), NNT_OK);
    nnt_backend_memory(be, &planned);
    size_t held = m->wbuf->size + m->mgr[NNT_MODE_TRAIN].buf->size;
    assert_true(held >= m->mgr[NNT_MODE_TRAIN].arena_bytes + m->wpool_floats * sizeof(float));
    assert_int_equal(fake ? planned.device - before.device : planned.host - before.host, held);
    assert_int_equal(fake ? planned.host : planned.device, 0);
    if (nnt_model_train(m, NULL, NULL, &e))
      fail_msg("%s: %s", fake ? "fakedev" : "cpu", e.msg);
    nnt_backend_memory(be, &trained);
    held = m->wbuf->size + m->omgr.buf->size + m->sbuf->size;
    for (int mode = 0; mode < 3; mode++) /* validation plans the evaluation arena */
      held += m->mgr[mode].buf ? m->mgr[mode].buf->size : 0;
    assert_int_equal(fake ? trained.device - before.device : trained.host - before.host, held);
    tu_model_destroy_checked(m);
    nnt_backend_memory(be, &after);
    assert_int_equal(after.device, before.device);
    assert_int_equal(after.host, before.host);
  }
  /* a backend without the entry counts nothing */
  nnt_backend none = *nnt_backend_cpu();
  none.memory = NULL;
  nnt_mem_usage u = {1, 1};
  nnt_backend_memory(&none, &u);
  assert_int_equal(u.device, 0);
  assert_int_equal(u.host, 0);
}

/* Every layer type, memory optimization on and off, and with the poison
 * of dead tensors (written through the buffer's memset). */
static void test_every_layer_type(void **state) {
  (void)state;
  for (size_t i = 0; i < tu_n_type_models; i++) {
    const char *path = tu_write_text("type.ini", tu_type_models[i]);
    const char *off[] = {"memory_optimization=false"};
    both(path, NULL, 0, 0);
    both(path, off, 1, 0);
    poison = 1;
    both(path, NULL, 0, 0);
    poison = 0;
  }
}

/* ---- the model's features --------------------------------------------------- */

/* conv, batch normalization, a residual (bn's output read by two layers),
 * pooling, dropout, clipping, Adam; two epochs with validation. */
#define FEATURE_INI(model_keys)                                                           \
    "[Model]\ntype = NeuralNetwork\nepochs = 2\nbatch_size = 3\nloss = cross\nseed = 9\n"     \
    "clip_grad_by_norm = 0.5\n" model_keys "\n"                                             \
    "[Optimizer]\ntype = adam\nlearning_rate = 0.01\n\n"                                   \
    "[train_set]\ntype = synthetic\nsamples = 6\n\n[valid_set]\ntype = synthetic\n"        \
    "samples = 3\n\n"                                                                      \
    "[in]\ntype = input\ninput_shape = 2:4:4\n\n"                                          \
    "[conv]\ntype = conv2d\nfilters = 3\nkernel_size = 3\npadding = same\n\n"              \
    "[bn]\ntype = batch_normalization\nactivation = relu\n\n"                              \
    "[c2]\ntype = conv2d\nfilters = 3\nkernel_size = 3\npadding = same\ninput_layers = bn\n\n" \
    "[add]\ntype = addition\ninput_layers = c2, bn\n\n"                                    \
    "[pool]\ntype = pooling2d\npooling = max\npool_size = 2\nstride = 2\n\n"               \
    "[flat]\ntype = flatten\n\n"                                                           \
    "[drop]\ntype = dropout\ndropout_rate = 0.25\n\n"                                      \
    "[out]\ntype = fully_connected\nunit = 3\nactivation = softmax\n"
static const char *feature_ini = FEATURE_INI("");

static void test_features(void **state) {
  (void)state;
  const char *path = tu_write_text("feature.ini", feature_ini);
  const char *off[] = {"memory_optimization=false"};
  both(path, NULL, 0, 0);
  both(path, off, 1, 0);
}

/* A file saved on the CPU loads into both; continue_train resumes from it
 * on both and saves the same file. */
static void test_load_and_continue(void **state) {
  (void)state;
  nnt_err e = {0};
  const char *path = tu_write_text("feature.ini", feature_ini);
  char base[512], pc[512], pf[512], ovc[600], ovf[600];
  snprintf(base, sizeof base, "%s", tu_path_in("base.bin"));
  snprintf(pc, sizeof pc, "%s", tu_path_in("cont_cpu.bin"));
  snprintf(pf, sizeof pf, "%s", tu_path_in("cont_fake.bin"));
  nnt_model *m = load(path, 0, NULL, 0, 0);
  if (nnt_model_train(m, NULL, NULL, &e) || nnt_model_save_weights(m, base, 1, &e))
    fail_msg("%s", e.msg);
  nnt_model_destroy(m);
  /* loaded: the same weights, and a save gives the same bytes; two more
   * epochs than the file's */
  const char *more[] = {"epochs=4"};
  nnt_model *c = load(path, 0, more, 1, 0), *f = load(path, 1, more, 1, 0);
  assert_int_equal(nnt_model_load_weights(c, base, &e), NNT_OK);
  assert_int_equal(nnt_model_load_weights(f, base, &e), NNT_OK);
  assert_same_weights(c, f, "loaded");
  train_both(c, f, "after a load");
  evaluate_infer_save(c, f, "after a load");
  nnt_model_destroy(c);
  nnt_model_destroy(f);
  /* continue_train from the same file under two names */
  size_t n;
  unsigned char *bytes = tu_file_bytes(base, &n);
  FILE *o = fopen(pc, "wb");
  assert_int_equal(fwrite(bytes, 1, n, o), n);
  fclose(o);
  o = fopen(pf, "wb");
  assert_int_equal(fwrite(bytes, 1, n, o), n);
  fclose(o);
  free(bytes);
  snprintf(ovc, sizeof ovc, "save_path=%s", pc);
  snprintf(ovf, sizeof ovf, "save_path=%s", pf);
  const char *oc[] = {"continue_train=true", "epochs=4", ovc},
             *of[] = {"continue_train=true", "epochs=4", ovf};
  c = load(path, 0, oc, 3, 0);
  f = load(path, 1, of, 3, 0);
  assert_true(c->iter > 0);
  assert_int_equal(c->iter, f->iter);
  train_both(c, f, "continue_train");
  tu_assert_same_file(pc, pf);
  nnt_model_destroy(c);
  nnt_model_destroy(f);
}

/* A NaN in a weight stops training at the same step with the same
 * message. */
static void test_check_finite(void **state) {
  (void)state;
  const char *path = tu_write_text("feature.ini", feature_ini);
  nnt_model *c = load(path, 0, NULL, 0, 0), *f = load(path, 1, NULL, 0, 0);
  nnt_err ec = {0}, ef = {0};
  float nan = NAN;
  size_t wi = c->n_w - 2; /* out's weight */
  assert_int_equal(nnt_tensor_set(&c->w[wi], 4, &nan, 1, &ec), NNT_OK);
  assert_int_equal(nnt_tensor_set(&f->w[wi], 4, &nan, 1, &ef), NNT_OK);
  assert_int_equal(nnt_model_train(c, NULL, NULL, &ec), NNT_ERR_RANGE);
  assert_int_equal(nnt_model_train(f, NULL, NULL, &ef), NNT_ERR_RANGE);
  tu_assert_contains(ef.msg, "'out'");
  tu_assert_contains(ef.msg, "not finite");
  assert_string_equal(ec.msg, ef.msg);
  assert_same_weights(c, f, "check_finite");
  nnt_model_destroy(c);
  nnt_model_destroy(f);
}

/* A dump after training (memory optimization off) writes the same
 * files. */
static void test_dump(void **state) {
  (void)state;
  nnt_err e = {0};
  const char *path = tu_write_text("feature.ini", feature_ini);
  const char *off[] = {"memory_optimization=false"};
  nnt_model *c = load(path, 0, off, 1, 0), *f = load(path, 1, off, 1, 0);
  c->keep_train_arena = f->keep_train_arena = 1; /* what a dump reads */
  train_both(c, f, "dump");
  char dc[512], df[512];
  snprintf(dc, sizeof dc, "%s", tu_path_in("dump_cpu"));
  snprintf(df, sizeof df, "%s", tu_path_in("dump_fake"));
  if (nnt_model_dump(c, dc, &e) || nnt_model_dump(f, df, &e))
    fail_msg("%s", e.msg);
  DIR *d = opendir(dc);
  assert_non_null(d);
  struct dirent *ent;
  size_t files = 0;
  while ((ent = readdir(d))) {
    if (ent->d_name[0] == '.')
      continue;
    char a[1024], b[1024];
    snprintf(a, sizeof a, "%s/%s", dc, ent->d_name);
    snprintf(b, sizeof b, "%s/%s", df, ent->d_name);
    tu_assert_same_file(a, b);
    files++;
  }
  closedir(d);
  assert_true(files > c->n_w + 1); /* the weights, the plan's tensors, the index */
  nnt_model_destroy(c);
  nnt_model_destroy(f);
}

/* ---- chunks ------------------------------------------------------------------ */

/* Every root tensor of g lies inside one chunk of c bytes; @return how
 * many chunks g's arena spans. */
static size_t assert_inside_chunks(const nnt_mgr *g, size_t c, const char *what) {
  for (size_t i = 0; i < g->n; i++) {
    const nnt_mgr_tensor *t = &g->t[i];
    if (t->parent < 0 && t->offset / c != (t->offset + t->bytes - 1) / c)
      fail_msg("%s: '%s' [%zu, %zu) crosses a chunk of %zu", what, t->name, t->offset,
               t->offset + t->bytes, c);
  }
  return (g->arena_bytes + c - 1) / c;
}

/* The largest tensor of the training plan and of the weights. */
static size_t largest_tensor(nnt_model *m) {
  nnt_err e = {0};
  assert_int_equal(nnt_model_plan(m, NNT_MODE_TRAIN, &e), NNT_OK);
  size_t big = 0;
  const nnt_mgr *g[2] = {&m->mgr[NNT_MODE_TRAIN], &m->wmgr};
  for (int k = 0; k < 2; k++)
    for (size_t i = 0; i < g[k]->n; i++)
      if (g[k]->t[i].bytes > big)
        big = g[k]->t[i].bytes;
  return big;
}

/* The model at path trained, evaluated, inferred, saved, loaded back and
 * trained again on the fake device with a chunk as small as its largest
 * tensor allows: bitwise the CPU's, no op argument refused, every plan's
 * tensors inside chunks and the arena over several. @return 1 when the
 * optimizer's slots had to be spaced out to whole chunks. */
static int both_chunked(const char *path, const char *const *ov, size_t nov) {
  nnt_err e = {0};
  nnt_model *c = load(path, 0, ov, nov, 0);
  size_t chunk = (largest_tensor(c) + 63) / 64 * 64, refused = fdev_count.chunk_refusals;
  fdev_set_chunk(chunk);
  nnt_model *f = load(path, 1, ov, nov, 0);
  f->keep_train_arena = 1; /* to look at after training */
  train_both(c, f, path);
  assert_true(assert_inside_chunks(&f->mgr[NNT_MODE_TRAIN], chunk, "training") > 1);
  assert_inside_chunks(&f->wmgr, chunk, "weights");
  /* the optimizer's slots (the weights that train, packed) are a whole
   * number of chunks apart, unless they all fit in the first */
  int spaced = 0;
  if (f->obuf) {
    assert_inside_chunks(&f->omgr, chunk, "optimizer state");
    size_t stride = nnt_model_opt_stride(f, f->opt_slots) * sizeof(float);
    spaced = f->opt_slots > 1 && f->opt_slots * stride > chunk;
    assert_true(spaced ? stride % chunk == 0 : f->opt_slots * stride <= chunk);
    assert_int_equal(f->omgr.arena_bytes, nnt_model_opt_bytes(f, f->opt_slots));
  }
  evaluate_infer_save(c, f, path);
  assert_inside_chunks(&f->mgr[NNT_MODE_INFER], chunk, "inference");
  if (f->mgr[NNT_MODE_EVAL].planned)
    assert_inside_chunks(&f->mgr[NNT_MODE_EVAL], chunk, "evaluation");
  /* the file (with the state) back into both, and on from there */
  const char *saved = tu_path_in("cpu.bin");
  if (nnt_model_load_weights(c, saved, &e) || nnt_model_load_weights(f, saved, &e))
    fail_msg("%s: load: %s", path, e.msg);
  assert_same_weights(c, f, "loaded with chunks");
  train_both(c, f, path);
  assert_int_equal(fdev_count.chunk_refusals, refused);
  fdev_set_chunk(0);
  nnt_model_destroy(c);
  nnt_model_destroy(f);
  return spaced;
}

static void test_chunks(void **state) {
  (void)state;
  const char *off[] = {"memory_optimization=false"};
  const char *path = tu_write_text("feature.ini", feature_ini);
  int spaced = both_chunked(path, NULL, 0) + both_chunked(path, off, 1);
  for (size_t i = 0; i < tu_n_type_models; i++) {
    path = tu_write_text("type.ini", tu_type_models[i]);
    spaced += both_chunked(path, NULL, 0) + both_chunked(path, off, 1);
  }
  assert_true(spaced > 0); /* the spaced optimizer state ran */
}

/* With a chunk, an op refuses an argument that crosses one and takes one
 * that ends on its boundary; without, it takes both. */
static void test_an_op_refuses_a_crossing_argument(void **state) {
  (void)state;
  nnt_err e = {0};
  nnt_buffer *b;
  const nnt_kernels *k = fdev_backend()->k;
  fdev_set_chunk(128);
  assert_int_equal(fdev_buffer_type()->chunk(fdev_buffer_type()), 128);
  assert_int_equal(nnt_buffer_type_chunk(fdev_buffer_type()), 128);
  assert_int_equal(nnt_buffer_alloc(fdev_buffer_type(), 256, "a test buffer", &b, &e), NNT_OK);
  size_t refused = fdev_count.chunk_refusals;
  assert_int_equal(k->fill(k, 16, 1.0f, nnt_buffer_at(b, 64)), NNT_OK);
  assert_int_equal(k->fill(k, 16, 1.0f, nnt_buffer_at(b, 96)), NNT_ERR_INVAL);
  assert_int_equal(k->copy(k, 8, nnt_buffer_at(b, 100), nnt_buffer_at(b, 0)), NNT_ERR_INVAL);
  assert_int_equal(fdev_count.chunk_refusals, refused + 2);
  fdev_set_chunk(0);
  assert_int_equal(nnt_buffer_type_chunk(fdev_buffer_type()), 0);
  assert_int_equal(k->fill(k, 16, 1.0f, nnt_buffer_at(b, 96)), NNT_OK);
  nnt_buffer_free(b);
  assert_int_equal(nnt_buffer_type_chunk(nnt_buffer_type_host()), 0);
}

/* ---- the C API -------------------------------------------------------------- */

static void capi_model_on(const char *ini, int fake, ml_train_model_h *out) {
  OK(ml_train_model_construct_with_conf(ini, out));
  if (fake) {
    nnt_err e = {0};
    assert_int_equal(nnt_model_set_backend(((capi_model *)*out)->m, fdev_backend(), &e),
                     NNT_OK);
  }
  OK(ml_train_model_compile(*out, NULL));
}

static void assert_same_data(ml_tensors_data_h a, ml_tensors_data_h b, unsigned count) {
  for (unsigned t = 0; t < count; t++) {
    void *pa, *pb;
    size_t sa, sb;
    OK(ml_tensors_data_get_tensor_data(a, t, &pa, &sa));
    OK(ml_tensors_data_get_tensor_data(b, t, &pb, &sb));
    assert_int_equal(sa, sb);
    assert_memory_equal(pa, pb, sa);
  }
}

/* Training, inference, the weight getter and the layer tensors (memory
 * optimization off) through the C API. */
static void test_capi(void **state) {
  (void)state;
  const char *ini = tu_write_text("capi.ini", FEATURE_INI("memory_optimization = false\n"));
  ml_train_model_h c, f;
  capi_model_on(ini, 0, &c);
  capi_model_on(ini, 1, &f);
  assert_ptr_equal(((capi_model *)f)->m->be, fdev_backend());
  assert_int_equal(((capi_model *)f)->m->memory_optimization, 0);
  OK(ml_train_model_run(c, NULL));
  OK(ml_train_model_run(f, NULL));
  assert_same_weights(((capi_model *)c)->m, ((capi_model *)f)->m, "capi");
  /* weights and the last step's tensors (before an inference replaces
   * them) */
  const char *layers[] = {"conv", "bn", "c2", "out"};
  unsigned read = 0;
  for (size_t l = 0; l < NNT_ARRAY_LEN(layers); l++) {
    ml_tensors_data_h dc, df;
    ml_tensors_info_h ic, iff;
    unsigned cnt;
    OK(ml_train_model_get_weight(c, layers[l], &dc, &ic));
    OK(ml_train_model_get_weight(f, layers[l], &df, &iff));
    OK(ml_tensors_info_get_count(ic, &cnt));
    assert_same_data(dc, df, cnt);
    OK(ml_tensors_data_destroy(dc));
    OK(ml_tensors_data_destroy(df));
    OK(ml_tensors_info_destroy(ic));
    OK(ml_tensors_info_destroy(iff));
    /* every tensor either has, with the same code where it has none */
    for (int what = ML_TRAIN_EXT_TENSOR_OUTPUT; what <= ML_TRAIN_EXT_TENSOR_GRADIENT; what++) {
      int rc = ml_train_ext_model_get_layer_tensor(c, layers[l], what, 0, &dc, &ic);
      assert_int_equal(ml_train_ext_model_get_layer_tensor(f, layers[l], what, 0, &df, &iff),
                       rc);
      if (rc)
        continue;
      assert_same_data(dc, df, 1);
      read++;
      OK(ml_tensors_data_destroy(dc));
      OK(ml_tensors_data_destroy(df));
      OK(ml_tensors_info_destroy(ic));
      OK(ml_tensors_info_destroy(iff));
    }
  }
  assert_true(read >= 9);
  /* inference */
  ml_tensors_info_h info;
  ml_tensors_data_h in, oc, of;
  OK(ml_train_model_get_input_tensors_info(c, &info));
  OK(ml_tensors_data_create(info, &in));
  float x[3 * 2 * 4 * 4];
  nnt_rng r;
  nnt_rng_seed(&r, 8);
  tu_fill_uniform(&r, x, NNT_ARRAY_LEN(x), -1, 1);
  OK(ml_tensors_data_set_tensor_data(in, 0, x, sizeof x));
  OK(ml_train_ext_model_infer(c, in, &oc));
  OK(ml_train_ext_model_infer(f, in, &of));
  assert_same_data(oc, of, 1);
  OK(ml_tensors_data_destroy(in));
  OK(ml_tensors_data_destroy(oc));
  OK(ml_tensors_data_destroy(of));
  OK(ml_tensors_info_destroy(info));
  OK(ml_train_model_destroy(c));
  OK(ml_train_model_destroy(f));
  assert_no_handles();
}

/* ---- the op harness and a host dereference ---------------------------------- */

/* a forward that reads its input's address on the host */
static int peek_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  volatile const float *x = ctx->in[0].data;
  return x[0] == x[0] ? oh_copy_forward(l, ctx) : oh_copy_forward(l, ctx);
}

/* a forward that hands a host pointer to a kernel */
static int host_arg_forward(nnt_layer *l, nnt_run_ctx *ctx) {
  static float scratch[4];
  int rc = ctx->k->fill(ctx->k, NNT_ARRAY_LEN(scratch), 1.0f, scratch);
  return rc ? rc : oh_copy_forward(l, ctx);
}

static const nnt_layer_ops peek_ops = {
    .type = "test_peek", .ml_type = -1, .finalize = oh_same_finalize, .forward = peek_forward,
    .calc_derivative = oh_copy_derivative};
static const nnt_layer_ops host_arg_ops = {
    .type = "test_host_arg", .ml_type = -1, .finalize = oh_same_finalize,
    .forward = host_arg_forward, .calc_derivative = oh_copy_derivative};

/* The harness's backends are the CPU and the fake device, and a case runs
 * its kernels on the fake one. */
static void test_harness_runs_on_the_fake_device(void **state) {
  (void)state;
  const nnt_backend *be[OH_MAX_BACKENDS];
  unsigned nb = oh_backends(be);
  assert_true(nb >= 2);
  assert_ptr_equal(be[0], nnt_backend_cpu());
  assert_ptr_equal(be[1], fdev_backend());
  assert_string_equal(be[1]->name, "fakedev");
  assert_int_equal(be[1]->buft->is_host(be[1]->buft), 0);
  oh_case c = {.type = "conv2d", .props = {"filters=2", "kernel_size=3"}, .in = {"2:5:5"}};
  oh_report r;
  size_t ops = fdev_count.ops, gets = fdev_count.gets;
  if (oh_run_case(&c, be[1], 1, &r))
    fail_msg("%s", r.msg);
  assert_true(fdev_count.ops > ops);
  assert_true(fdev_count.gets > gets); /* guards and results read through get */
}

/* Run case c on be in a child, its stderr into err; @return its status. */
static int run_in_child(const oh_case *c, const nnt_backend *be, char *err, size_t n) {
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 2);
    signal(SIGSEGV, SIG_DFL); /* the kernel's verdict, not a sanitizer's */
    signal(SIGBUS, SIG_DFL);
    oh_report r;
    int failed = oh_run_case(c, be, 0, &r);
    if (failed)
      fprintf(stderr, "%s\n", r.msg);
    _exit(failed ? 3 : 0);
  }
  close(fds[1]);
  size_t got = 0;
  ssize_t k;
  while (got + 1 < n && (k = read(fds[0], err + got, n - 1 - got)) > 0)
    got += (size_t)k;
  err[got] = '\0';
  close(fds[0]);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return status;
}

/* A layer reading a tensor's address passes on the CPU and faults on the
 * fake device; one handing a host pointer to a kernel stops with a message
 * naming the op and the argument. */
static void test_a_host_dereference_is_caught(void **state) {
  (void)state;
  char err[4096];
  oh_case peek = {.type = "test_peek", .ops = &peek_ops, .in = {"2:3"}};
  oh_report r;
  if (oh_run_case(&peek, nnt_backend_cpu(), 1, &r))
    fail_msg("%s", r.msg);
  int st = run_in_child(&peek, fdev_backend(), err, sizeof err);
  if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGSEGV)
    fail_msg("a host read of a fake device address: status %#x, not SIGSEGV (%s)", st, err);
  oh_case arg = {.type = "test_host_arg", .ops = &host_arg_ops, .in = {"2:3"}};
  if (oh_run_case(&arg, nnt_backend_cpu(), 1, &r))
    fail_msg("%s", r.msg);
  st = run_in_child(&arg, fdev_backend(), err, sizeof err);
  if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGABRT)
    fail_msg("a host pointer handed to a kernel: status %#x, not SIGABRT (%s)", st, err);
  tu_assert_contains(err, "fakedev: op 'fill': argument 'y'");
  tu_assert_contains(err, "is not a device address");
}

/* Runs last: the shared Vulkan instance (when there is one) reported
 * nothing to its validation record over every case above. */
static void test_gpu_validation_is_silent(void **state) {
  (void)state;
  oh_backends_release();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_harness_runs_on_the_fake_device),
      cmocka_unit_test(test_a_host_dereference_is_caught),
      cmocka_unit_test_setup_teardown(test_applications, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_memory_report, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_every_layer_type, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_features, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_load_and_continue, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_check_finite, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_dump, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_capi, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test(test_an_op_refuses_a_crossing_argument),
      cmocka_unit_test_setup_teardown(test_chunks, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test(test_gpu_validation_is_silent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
