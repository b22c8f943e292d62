/* How the Vulkan backend runs work (vk_record.c), on whatever device the
 * machine has (lavapipe in CI) with the validation layer on: barriers only
 * between ops that touch the same bytes with a write; a step recorded once
 * and replayed with new parameters and data, recorded again from where a
 * replay's calls differ, still right when read in its middle; a training
 * step is one submit (no read in its middle, check_finite included); the
 * device-side non-finite check stops training without applying a
 * non-finite update, as the CPU's does; a pool split into chunks
 * (NNTRAINER_VULKAN_CHUNK) trains like the CPU; two instances' addresses
 * never mix. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/compute/backend.h"
#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

#ifndef NNT_HAVE_VULKAN

int main(void) { return tu_main_without_vulkan(); }

#else

#include "nntrainer/vulkan/vk.h"

#define MLP_INI NNT_SOURCE_DIR "/Applications/FashionMNIST/mlp.ini"
#define CNN_INI NNT_SOURCE_DIR "/Applications/FashionMNIST/cnn_bn.ini"

static nnt_vulkan_counters stats(const nnt_backend *be) {
  nnt_vulkan_counters s;
  assert_int_equal(nnt_vulkan_stats(be, &s), NNT_OK);
  return s;
}

static nnt_tensor vec(nnt_buffer *b, size_t first, size_t n) {
  nnt_tensor t;
  memset(&t, 0, sizeof t);
  t.dim = nnt_dim_make(1, 1, 1, (unsigned)n);
  t.data = nnt_buffer_at(b, first * sizeof(float));
  t.buf = b;
  return t;
}

#define N 300

/* Ops on disjoint ranges share a barrier-free stretch; an op that reads
 * what an earlier one wrote, or writes what one read, gets a barrier. */
static void test_barriers_only_where_needed(void **state) {
  (void)state;
  nnt_backend *be = tu_gpu();
  const nnt_kernels *k = be->k;
  nnt_err e = {0};
  nnt_buffer *b;
  assert_int_equal(nnt_buffer_alloc(be->buft, 4 * N * sizeof(float), "ops", &b, &e), NNT_OK);
  float *x = nnt_buffer_at(b, 0), *y = x + N, *z = y + N, *w = z + N;
  assert_int_equal(be->synchronize(be, &e), NNT_OK);
  nnt_vulkan_counters s0 = stats(be);
  /* four independent fills, then two reads of them into disjoint outputs */
  assert_int_equal(k->fill(k, N, 1, x), NNT_OK);
  assert_int_equal(k->fill(k, N, 2, y), NNT_OK);
  assert_int_equal(k->fill(k, N, 3, z), NNT_OK);
  assert_int_equal(k->fill(k, N / 2, 4, w), NNT_OK);
  assert_int_equal(k->add(k, N / 2, x, y, w + N / 2), NNT_OK); /* reads x, y: barrier */
  assert_int_equal(k->scale(k, N / 2, 2, z + N / 2), NNT_OK);   /* z's second half: none */
  assert_int_equal(k->axpy(k, N / 2, 1, w + N / 2, z), NNT_OK); /* reads add's w: one */
  assert_int_equal(be->synchronize(be, &e), NNT_OK);
  nnt_vulkan_counters s1 = stats(be);
  assert_int_equal(s1.dispatches - s0.dispatches, 7);
  assert_int_equal(s1.barriers - s0.barriers, 2);
  assert_int_equal(s1.submits - s0.submits, 1);
  float got[4 * N];
  nnt_tensor all = vec(b, 0, 4 * N);
  assert_int_equal(nnt_tensor_get(&all, 0, got, 4 * N, &e), NNT_OK);
  for (size_t i = 0; i < N; i++) {
    assert_true(got[i] == 1 && got[N + i] == 2);
    assert_true(got[2 * N + i] == 6); /* 3 + (1 + 2), or 3 * 2 */
    assert_true(got[3 * N + i] == (i < N / 2 ? 4 : 3));
  }
  nnt_buffer_free(b);
  tu_backend_free_checked(be);
}

/* One step: upload in, y = a * in + bias (scale, add), read y later. */
static int run_step(nnt_backend *be, nnt_buffer *b, const float *in, float a, int extra,
                    float *out, nnt_err *e) {
  const nnt_kernels *k = be->k;
  nnt_tensor tin = vec(b, 0, N), ty = vec(b, 2 * N, N);
  float *bias = nnt_buffer_at(b, N * sizeof(float));
  int rc = nnt_backend_step_begin(be, 7, e);
  if (!rc)
    rc = nnt_tensor_set(&tin, 0, in, N, e);
  if (!rc)
    rc = k->copy(k, N, tin.data, ty.data);
  if (!rc)
    rc = k->scale(k, N, a, ty.data);
  if (!rc && extra) /* a call the recorded step does not have */
    rc = k->scale(k, N, 2, ty.data);
  if (!rc)
    rc = k->add(k, N, ty.data, bias, ty.data);
  if (!rc)
    rc = nnt_tensor_get_later(&ty, 0, out, N, e);
  int r2 = nnt_backend_step_end(be, e);
  return rc ? rc : r2;
}

static void test_steps_replay(void **state) {
  (void)state;
  nnt_backend *be = tu_gpu();
  nnt_err e = {0};
  nnt_buffer *b;
  assert_int_equal(nnt_buffer_alloc(be->buft, 3 * N * sizeof(float), "steps", &b, &e), NNT_OK);
  nnt_tensor tb = vec(b, N, N);
  float in[N], bias[N], out[N];
  for (size_t i = 0; i < N; i++)
    bias[i] = (float)i / 8;
  assert_int_equal(nnt_tensor_set(&tb, 0, bias, N, &e), NNT_OK);
  assert_int_equal(be->synchronize(be, &e), NNT_OK);
  nnt_vulkan_counters s0 = stats(be);
  for (int it = 0; it < 6; it++) {
    /* new data and a new scalar each time; the third run has one call
     * more (recorded again), the fourth goes back (again) */
    int extra = it == 2;
    float a = 0.5f + (float)it;
    for (size_t i = 0; i < N; i++)
      in[i] = (float)(i % 17) - (float)it;
    memset(out, 0xff, sizeof out);
    assert_int_equal(run_step(be, b, in, a, extra, out, &e), NNT_OK);
    for (size_t i = 0; i < N; i++)
      assert_true(out[i] == in[i] * a * (extra ? 2 : 1) + bias[i]);
  }
  nnt_vulkan_counters s1 = stats(be);
  assert_int_equal(s1.submits - s0.submits, 6); /* one per step */
  assert_int_equal(s1.recorded_steps - s0.recorded_steps, 1);
  assert_int_equal(s1.rerecorded_steps - s0.rerecorded_steps, 2);
  assert_int_equal(s1.replayed_steps - s0.replayed_steps, 3);
  assert_int_equal(s1.step_syncs - s0.step_syncs, 0);
  /* a plain get in the middle of a step: right, at the cost of a wait */
  const nnt_kernels *k = be->k;
  nnt_tensor ty = vec(b, 2 * N, N);
  assert_int_equal(nnt_backend_step_begin(be, 7, &e), NNT_OK);
  assert_int_equal(k->fill(k, N, 5, ty.data), NNT_OK);
  assert_int_equal(nnt_tensor_get(&ty, 0, out, N, &e), NNT_OK);
  assert_true(out[0] == 5 && out[N - 1] == 5);
  assert_int_equal(k->scale(k, N, 3, ty.data), NNT_OK);
  assert_int_equal(nnt_tensor_get_later(&ty, 0, out, N, &e), NNT_OK);
  assert_int_equal(nnt_backend_step_end(be, &e), NNT_OK);
  assert_true(out[0] == 15 && out[N - 1] == 15);
  assert_int_equal(stats(be).step_syncs - s0.step_syncs, 1);
  /* misuse: an end without a begin, a begin inside a step */
  assert_int_equal(nnt_backend_step_end(be, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "a step ended that did not begin");
  assert_int_equal(nnt_backend_step_begin(be, 1, &e), NNT_OK);
  assert_int_equal(nnt_backend_step_begin(be, 2, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "a step began inside a step");
  assert_int_equal(nnt_backend_step_end(be, &e), NNT_OK);
  nnt_buffer_free(b);
  tu_backend_free_checked(be);
}

/* The line of `name` in a profile report: its calls (-1: no line). */
static long profile_calls(const char *rep, const char *name) {
  for (const char *l = rep; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
    char got[32];
    long calls;
    if (sscanf(l, "%31s %ld calls", got, &calls) == 2 && !strcmp(got, name))
      return calls;
  }
  return -1;
}

/* NNTRAINER_VULKAN_PROFILE=1: every command of every submit timed (a
 * replayed step's too), per shader; off, the report says why. */
static void test_profile_times_every_command(void **state) {
  (void)state;
  char rep[4096];
  nnt_backend *be = tu_gpu(); /* opened without the variable: off */
  assert_int_equal(nnt_vulkan_profile_report(be, rep, sizeof rep), 0);
  tu_assert_contains(rep, "NNTRAINER_VULKAN_PROFILE=1 was not set");
  tu_backend_free_checked(be);
  setenv("NNTRAINER_VULKAN_PROFILE", "1", 1);
  be = tu_gpu();
  unsetenv("NNTRAINER_VULKAN_PROFILE");
  const nnt_kernels *k = be->k;
  nnt_err e = {0};
  nnt_buffer *b;
  assert_int_equal(nnt_buffer_alloc(be->buft, 3 * N * sizeof(float), "prof", &b, &e), NNT_OK);
  float *x = nnt_buffer_at(b, 0), *y = x + N;
  assert_int_equal(be->synchronize(be, &e), NNT_OK);
  nnt_vulkan_profile_reset(be);
  assert_int_equal(k->fill(k, N, 1, x), NNT_OK);
  assert_int_equal(k->fill(k, N, 2, y), NNT_OK);
  assert_int_equal(k->scale(k, N, 3, y), NNT_OK);
  assert_int_equal(be->synchronize(be, &e), NNT_OK);
  assert_int_equal(nnt_vulkan_profile_report(be, rep, sizeof rep), 3);
  tu_assert_contains(rep, "in 1 submits, 3 commands timed, 0 not");
  assert_int_equal(profile_calls(rep, "fill"), 2);
  assert_int_equal(profile_calls(rep, "scale"), 1);
  double total = -1;
  assert_int_equal(sscanf(rep, "gpu time %lf ms", &total), 1);
  assert_true(total > 0);
  /* three runs of a step (recorded, then replayed): 5 commands each */
  float in[N], out[N];
  for (size_t i = 0; i < N; i++)
    in[i] = (float)i;
  nnt_vulkan_profile_reset(be);
  for (int it = 0; it < 3; it++)
    assert_int_equal(run_step(be, b, in, 2.0f, 0, out, &e), NNT_OK);
  assert_int_equal(stats(be).replayed_steps, 2);
  assert_int_equal(nnt_vulkan_profile_report(be, rep, sizeof rep), 15);
  tu_assert_contains(rep, "in 3 submits, 15 commands timed");
  assert_int_equal(profile_calls(rep, "(copy-in)"), 3);
  assert_int_equal(profile_calls(rep, "(copy-out)"), 3);
  assert_int_equal(profile_calls(rep, "scale"), 3);
  nnt_buffer_free(b);
  tu_backend_free_checked(be);
}

/* Two instances give different addresses, and an op of one refuses the
 * other's. */
static void test_instances_do_not_mix(void **state) {
  (void)state;
  nnt_backend *b1 = tu_gpu(), *b2 = tu_gpu();
  nnt_err e = {0};
  nnt_buffer *x1, *x2;
  assert_int_equal(nnt_buffer_alloc(b1->buft, 64, "one", &x1, &e), NNT_OK);
  assert_int_equal(nnt_buffer_alloc(b2->buft, 64, "two", &x2, &e), NNT_OK);
  assert_true(x1->base != x2->base);
  assert_int_equal(b1->k->fill(b1->k, 16, 1, nnt_buffer_at(x1, 0)), NNT_OK);
  assert_int_equal(b1->k->fill(b1->k, 16, 1, nnt_buffer_at(x2, 0)), NNT_ERR_INVAL);
  assert_int_equal(b2->k->copy(b2->k, 16, nnt_buffer_at(x1, 0), nnt_buffer_at(x2, 0)),
                   NNT_ERR_INVAL);
  nnt_buffer_free(x1);
  nnt_buffer_free(x2);
  tu_backend_free_checked(b1);
  tu_backend_free_checked(b2);
}

static double norm_err(const float *a, const float *b, size_t n) {
  double worst = 0, scale = 1;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - b[i]);
    worst = d > worst || isnan(d) ? d : worst;
    scale = fabs(a[i]) > scale ? fabs(a[i]) : scale;
  }
  return worst / scale;
}

/* ini on synthetic data, epochs 1, no checkpoint, plus overrides. */
static nnt_model *model_of(const char *ini, const char **extra, int n_extra, unsigned train) {
  nnt_model *m = tu_model_for_ini(ini);
  nnt_err e = {0};
  const char *ov[12] = {"epochs=1", "save_path="};
  int n = 2;
  for (int i = 0; i < n_extra; i++)
    ov[n++] = extra[i];
  if (nnt_ini_load(m, ini, ov, n, &e))
    fail_msg("%s", e.msg);
  for (int mode = 0; mode < 2; mode++) {
    nnt_dataset *ds = NULL;
    assert_int_equal(
        nnt_dataset_create_synthetic(mode == NNT_DS_TRAIN ? train : 16, 77, &ds, &e), NNT_OK);
    assert_int_equal(nnt_model_set_dataset(m, mode, ds, &e), NNT_OK);
  }
  if (nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("%s", e.msg);
  return m;
}

typedef struct watch {
  nnt_backend *be;
  nnt_vulkan_counters at[16];
  unsigned n;
} watch;

static void on_step(const nnt_progress *p, void *ud) {
  watch *w = ud;
  if (!p->epoch_done && w->n < 16)
    w->at[w->n++] = stats(w->be);
}

/* Training steps after the first: one submit each, replayed, no read in
 * their middle (check_finite on, its default), fewer barriers than
 * dispatches. */
static void test_training_step_is_one_submit(void **state) {
  (void)state;
  const char *ov[] = {"engine=gpu", "batch_size=8"};
  nnt_model *m = model_of(CNN_INI, ov, 2, 48);
  assert_true(m->check_finite);
  watch w = {.be = m->be};
  nnt_err e = {0};
  if (nnt_model_train(m, on_step, &w, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(w.n, 6);
  nnt_vulkan_counters a = w.at[1], b = w.at[5];
  assert_int_equal(b.submits - a.submits, 4);
  assert_int_equal(b.replayed_steps - a.replayed_steps, 4);
  assert_int_equal(b.recorded_steps - a.recorded_steps, 0);
  /* none, the first step included (it allocates the split-k gemm's
   * scratch: a submit of its own, the step's recording undisturbed) */
  assert_int_equal(b.step_syncs, 0);
  uint64_t d = (b.dispatches - a.dispatches) / 4, br = (b.barriers - a.barriers) / 4;
  print_message("cnn_bn.ini on the gpu, batch 8: per step %llu dispatches, %llu barriers, "
                "1 submit\n", (unsigned long long)d, (unsigned long long)br);
  assert_true(br < d);
  tu_model_destroy_checked(m);
}

/* Gradient clipping by the global norm runs on the device too (the norm is
 * never read back): the same weights as the CPU's, still one submit a step. */
static void test_clipping_stays_on_the_device(void **state) {
  (void)state;
  const char *gov[] = {"engine=gpu", "batch_size=8", "Optimizer.type=sgd",
                       "Model.clip_grad_by_norm=0.05"};
  const char *cov[] = {"engine=cpu", "batch_size=8", "Optimizer.type=sgd",
                       "Model.clip_grad_by_norm=0.05"};
  nnt_model *g = model_of(MLP_INI, gov, 4, 48), *c = model_of(MLP_INI, cov, 4, 48);
  watch w = {.be = g->be};
  nnt_err e = {0};
  if (nnt_model_train(g, on_step, &w, &e))
    fail_msg("gpu: %s", e.msg);
  assert_int_equal(nnt_model_train(c, NULL, NULL, &e), NNT_OK);
  assert_int_equal(w.n, 6);
  assert_int_equal(w.at[5].submits - w.at[1].submits, 4);
  assert_int_equal(w.at[5].step_syncs, 0);
  /* the clip acts: the same run unclipped ends elsewhere */
  nnt_model *free_run = model_of(MLP_INI, cov, 3, 48);
  assert_int_equal(nnt_model_train(free_run, NULL, NULL, &e), NNT_OK);
  float *wc = tu_weights_of(c), *wg = tu_weights_of(g), *wf = tu_weights_of(free_run);
  double clip = norm_err(wf, wc, c->wpool_floats), err = norm_err(wc, wg, c->wpool_floats);
  print_message("mlp.ini clipped at 0.05: %.3g from the unclipped run, gpu within %.3g of the "
                "cpu\n", clip, err);
  assert_true(err <= 1e-6 && clip > 100 * err);
  free(wc), free(wg), free(wf);
  tu_model_destroy_checked(free_run);
  tu_model_destroy_checked(g);
  tu_model_destroy_checked(c);
}

/* A learning rate that overflows: the device's check stops training as
 * the CPU's does, with the same error, and no update that is not finite
 * reached a weight. */
static void test_nonfinite_stops_like_the_cpu(void **state) {
  (void)state;
  const char *cpu[] = {"engine=cpu", "batch_size=8", "Optimizer.type=sgd",
                       "Optimizer.learning_rate=1e30"};
  const char *gpu_ov[] = {"engine=gpu", "batch_size=8", "Optimizer.type=sgd",
                          "Optimizer.learning_rate=1e30"};
  nnt_model *c = model_of(MLP_INI, cpu, 4, 48), *g = model_of(MLP_INI, gpu_ov, 4, 48);
  nnt_err ec = {0}, eg = {0};
  int rc = nnt_model_train(c, NULL, NULL, &ec), rg = nnt_model_train(g, NULL, NULL, &eg);
  print_message("cpu: %s\ngpu: %s\n", ec.msg, eg.msg);
  assert_int_equal(rc, NNT_ERR_RANGE);
  assert_int_equal(rg, NNT_ERR_RANGE);
  /* the same step, and the same kind of finding */
  const char *it = strstr(ec.msg, "iteration");
  assert_non_null(it);
  char head[64];
  snprintf(head, sizeof head, "%.*s", (int)strcspn(it, ":"), it);
  tu_assert_contains(eg.msg, head);
  tu_assert_contains(eg.msg, strstr(ec.msg, "the loss is") ? "the loss is" : "not finite");
  float *wg = tu_weights_of(g);
  for (size_t i = 0; i < g->wpool_floats; i++)
    if (!isfinite(wg[i]))
      fail_msg("weight float %zu is %g after the stop", i, wg[i]);
  free(wg);
  tu_model_destroy_checked(c);
  tu_model_destroy_checked(g);
}

/* Pools split into small chunks (each its own VkBuffer) train like the
 * CPU: the planner keeps every tensor inside one. */
static void test_chunked_pools_train_like_the_cpu(void **state) {
  (void)state;
  setenv("NNTRAINER_VULKAN_CHUNK", "2097152", 1);
  const char *gov[] = {"engine=gpu", "batch_size=16", "Optimizer.type=sgd"};
  const char *cov[] = {"engine=cpu", "batch_size=16", "Optimizer.type=sgd"};
  nnt_model *g = model_of(CNN_INI, gov, 3, 32);
  unsetenv("NNTRAINER_VULKAN_CHUNK");
  nnt_model *c = model_of(CNN_INI, cov, 3, 32);
  nnt_vulkan_counters s = stats(g->be);
  assert_int_equal(s.chunk_bytes, 2097152);
  g->keep_train_arena = 1;
  nnt_err e = {0};
  if (nnt_model_train(g, NULL, NULL, &e))
    fail_msg("gpu: %s", e.msg);
  assert_int_equal(nnt_model_train(c, NULL, NULL, &e), NNT_OK);
  size_t arena = g->mgr[NNT_MODE_TRAIN].buf ? g->mgr[NNT_MODE_TRAIN].buf->size : 0;
  print_message("cnn_bn.ini, batch 16: a training arena of %zu bytes in 2 MiB chunks\n", arena);
  assert_true(arena > 2 * s.chunk_bytes); /* three chunks or more */
  float *wc = tu_weights_of(c), *wg = tu_weights_of(g);
  double err = norm_err(wc, wg, c->wpool_floats);
  print_message("cnn_bn.ini in 2 MiB chunks: weights within %.3g of the cpu's\n", err);
  assert_true(err <= 1e-4);
  free(wc), free(wg);
  tu_model_destroy_checked(g);
  tu_model_destroy_checked(c);
  /* a chunk smaller than a tensor is refused, naming it */
  setenv("NNTRAINER_VULKAN_CHUNK", "4096", 1);
  nnt_model *m = tu_model_for_ini(MLP_INI);
  const char *ov[] = {"engine=gpu", "save_path="};
  assert_int_equal(nnt_ini_load(m, MLP_INI, ov, 2, &e), NNT_OK);
  int rc = nnt_model_compile(m, &e);
  if (!rc)
    rc = nnt_model_initialize(m, &e);
  unsetenv("NNTRAINER_VULKAN_CHUNK");
  assert_int_not_equal(rc, NNT_OK);
  tu_assert_contains(e.msg, "largest storage-buffer range");
  tu_model_destroy_checked(m);
}

/* [Model] gpu_device chooses the device by index or name and overrides
 * NNTRAINER_VULKAN_DEVICE; one that matches nothing is refused naming the
 * key and the devices; an empty one is refused. */
static void test_gpu_device_key(void **state) {
  (void)state;
  nnt_err e = {0};
  setenv("NNTRAINER_VULKAN_DEVICE", "no-such-device", 1);
  const char *by_index[] = {"engine=gpu", "batch_size=8", "gpu_device=0"};
  nnt_model *m = model_of(MLP_INI, by_index, 3, 16);
  assert_string_equal(m->be->name, "vulkan");
  tu_model_destroy_checked(m);
  unsetenv("NNTRAINER_VULKAN_DEVICE");
  nnt_backend *be = tu_gpu();
  char part[16];
  snprintf(part, sizeof part, "%.8s", be->device); /* the first letters of its name */
  tu_backend_free_checked(be);
  char key[64];
  snprintf(key, sizeof key, "gpu_device=%s", part);
  const char *by_name[] = {"engine=gpu", "batch_size=8", key};
  m = model_of(MLP_INI, by_name, 3, 16);
  tu_assert_contains(m->be->device, part);
  tu_model_destroy_checked(m);
  m = tu_model_for_ini(MLP_INI);
  const char *bad[] = {"engine=gpu", "save_path=", "gpu_device=no-such-device"};
  assert_int_equal(nnt_ini_load(m, MLP_INI, bad, 3, &e), NNT_OK);
  assert_int_equal(nnt_model_compile(m, &e), NNT_ERR_NOT_SUPPORTED);
  tu_assert_contains(e.msg, "[Model] engine 'gpu': gpu_device='no-such-device' matches no");
  tu_assert_contains(e.msg, "(devices: 0: ");
  tu_model_destroy_checked(m);
  m = tu_model_for_ini(MLP_INI);
  const char *empty[] = {"gpu_device="};
  assert_int_equal(nnt_ini_load(m, MLP_INI, empty, 1, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "gpu_device");
  tu_model_destroy_checked(m);
}

int main(void) {
  setenv("NNTRAINER_VULKAN_VALIDATION", "1", 1);
  tu_keep_vulkan_driver();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_barriers_only_where_needed),
      cmocka_unit_test(test_steps_replay),
      cmocka_unit_test(test_profile_times_every_command),
      cmocka_unit_test(test_instances_do_not_mix),
      cmocka_unit_test(test_training_step_is_one_submit),
      cmocka_unit_test(test_clipping_stays_on_the_device),
      cmocka_unit_test(test_nonfinite_stops_like_the_cpu),
      cmocka_unit_test(test_chunked_pools_train_like_the_cpu),
      cmocka_unit_test(test_gpu_device_key),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
