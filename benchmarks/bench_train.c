/* Training-step benchmark for one INI: warm-up steps excluded, median ms
 * per step, planned memory, peak RSS. Prints one JSON object. Every step
 * trains on the same batch, made once before the loop (one seeded
 * synthetic batch, which the dataset keeps as its held batch for the
 * non-finite checks' replay), as benchmarks/torch_models.py does with
 * PyTorch: no producer thread makes data while steps are timed, so the
 * two programs do the same work per step. Usage:
 *   nnt_bench_train CONFIG [WARMUP] [STEPS] [Section.key=value ...]
 * (overrides as the CLI takes them: engine=gpu, batch_size=128). On a
 * backend with steps (Vulkan) a step is the whole backend step, the
 * batch's upload and the wait for its end included, and the JSON adds
 * its dispatches and barriers per step; with NNTRAINER_VULKAN_PROFILE=1
 * the timed steps' GPU time per shader goes to stderr. cpu_ms is the
 * process's CPU time (user + system) per timed step, every thread's.
 * BENCH_WARMUP_MS and BENCH_MIN_MS (as benchmarks/torch_models.py takes
 * them) make the warm-up last at least that many milliseconds and the
 * timed steps as many as fill that many: a model of about a millisecond a
 * step ran slower over its first 100 ms at two threads (the MLP's steps
 * 1.6 -> 1.25 ms over its first 80 steps, cores apart), and 3 + 20 steps
 * timed that start. "steps" in the JSON is how many were timed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"
#ifdef NNT_HAVE_VULKAN
#include "nntrainer/vulkan/vk.h"
#endif

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static double cpu_ms(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: nnt_bench_train CONFIG [WARMUP] [STEPS] [Section.key=value ...]\n");
    return 2;
  }
  int warmup = argc > 2 ? atoi(argv[2]) : 3, steps = argc > 3 ? atoi(argv[3]) : 10;
  const char *t = getenv("NNTRAINER_THREADS");
  nnt_err e = {0};
  if (nnt_cpu_set_threads(t ? (unsigned)atoi(t) : 0, &e)) {
    fprintf(stderr, "%s\n", e.msg);
    return 1;
  }
  nnt_model *m;
  nnt_dataset *ds;
  const char *const *ov = argc > 4 ? (const char *const *)argv + 4 : NULL;
  if (nnt_model_create(&m, &e) || nnt_ini_load(m, argv[1], ov, argc > 4 ? argc - 4 : 0, &e))
    goto fail;
  unsigned batch = nnt_model_batch_size(m);
  if (nnt_dataset_create_synthetic(batch, 1, &ds, &e) ||
      nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, &e) || nnt_model_compile(m, &e) ||
      nnt_model_initialize(m, &e) || nnt_model_plan(m, NNT_MODE_TRAIN, &e))
    goto fail;
  /* the optimizer state is allocated at the first step, as in training */
  nnt_ds_shape shape = {0};
  shape.n_in = m->n_inputs;
  shape.n_label = m->n_labels;
  for (unsigned i = 0; i < m->n_inputs; i++)
    shape.in_len[i] = nnt_dim_feature_len(m->input_dim[i]);
  for (unsigned i = 0; i < m->n_labels; i++)
    shape.label_len[i] = nnt_dim_feature_len(m->label_dim[i]);
  /* the one batch: its producer thread has ended before the first step */
  const float *in[NNT_DS_MAX_STREAMS], *lab[NNT_DS_MAX_STREAMS];
  int end;
  if (nnt_dataset_prepare(ds, &shape, batch, 1, &e) || nnt_dataset_epoch_begin(ds, &e) ||
      nnt_dataset_next_batch_view(ds, in, lab, &end, &e))
    goto fail;
  if (end) {
    fprintf(stderr, "nnt_bench_train: the synthetic dataset gave no batch\n");
    nnt_model_destroy(m);
    return 1;
  }
  unsigned slots = nnt_optimizer_state_count(m->opt);
  if (nnt_model_plan_opt_state(m, slots, &m->omgr, &e))
    goto fail;
  m->obuf = m->omgr.buf;
  m->opt_pool = m->omgr.arena;
  m->opt_slots = slots;
  m->opt_stride = nnt_model_opt_stride(m, slots);
  /* as a run does before it computes (the CPU's compute threads start here) */
  if (m->k->prepare && m->k->prepare(m->k, &e))
    goto fail;
  const char *wm = getenv("BENCH_WARMUP_MS"), *mm = getenv("BENCH_MIN_MS");
  double warm_ms = wm ? atof(wm) : 0.0, min_ms = mm ? atof(mm) : 0.0, t_start = now_ms();
  double t_timed = 0.0;
  if (steps < 1)
    steps = 1;
  size_t cap = (size_t)steps;
  double *ms = malloc(sizeof(double) * cap), cpu0 = 0.0;
  if (!ms) {
    fprintf(stderr, "nnt_bench_train: out of memory\n");
    nnt_model_destroy(m);
    return 1;
  }
#ifdef NNT_HAVE_VULKAN
  nnt_vulkan_counters vc0 = {0}, vc1 = {0};
#endif
  /* warm-up: at least warmup steps and warm_ms; then at least steps steps
   * and min_ms of them (at most a million) */
  int timed = 0;
  for (int s = 0;; s++) {
    if (s >= warmup && timed == 0 && now_ms() - t_start < warm_ms)
      warmup = s + 1;
    if (s >= warmup && timed >= steps && (t_timed >= min_ms || timed >= 1000000))
      break;
    if (s == warmup) {
      cpu0 = cpu_ms();
#ifdef NNT_HAVE_VULKAN
      nnt_vulkan_stats(m->be, &vc0);
      nnt_vulkan_profile_reset(m->be);
#endif
    }
    int steps_api = m->be->step_begin != NULL;
    if (!steps_api && nnt_model_set_batch(m, in, lab, &e))
      goto fail;
    double t0 = now_ms();
    float loss;
    if (steps_api ? nnt_model_train_batch(m, ds, in, lab, &loss, &e)
                  : nnt_model_train_step(m, ds, &loss, &e))
      goto fail;
    m->iter++;
    if (s >= warmup) {
      double d = now_ms() - t0;
      if ((size_t)timed == cap) {
        double *more = realloc(ms, sizeof(double) * cap * 2);
        if (!more) {
          free(ms);
          fprintf(stderr, "nnt_bench_train: out of memory\n");
          nnt_model_destroy(m);
          return 1;
        }
        ms = more;
        cap *= 2;
      }
      ms[timed++] = d;
      t_timed += d;
    }
  }
  steps = timed;
  double cpu_step = (cpu_ms() - cpu0) / steps;
  qsort(ms, (size_t)steps, sizeof *ms, cmp_double);
  char gpu[96] = "";
#ifdef NNT_HAVE_VULKAN
  if (!nnt_vulkan_stats(m->be, &vc1)) {
    snprintf(gpu, sizeof gpu, ",\"dispatches\":%.1f,\"barriers\":%.1f",
             (double)(vc1.dispatches - vc0.dispatches) / steps,
             (double)(vc1.barriers - vc0.barriers) / steps);
    if (getenv("NNTRAINER_VULKAN_PROFILE")) {
      static char prof[16384];
      nnt_vulkan_profile_report(m->be, prof, sizeof prof);
      fprintf(stderr, "%d steps: %s", steps, prof);
    }
  }
#endif
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  const nnt_mgr *g = &m->mgr[NNT_MODE_TRAIN];
  size_t wbytes = m->wpool_floats * sizeof(float);
  char blas[160];
  nnt_cpu_blas_describe(blas, sizeof blas);
  printf("{\"backend\":\"%s\",\"blas\":\"%s\",\"batch\":%u,\"ms_median\":%.3f,"
         "\"ms_min\":%.3f,\"ms_max\":%.3f,\"peak_rss_kb\":%ld,\"arena_bytes\":%zu,"
         "\"lower_bound_bytes\":%zu,\"total_planned_bytes\":%zu,\"cpu_ms\":%.3f,"
         "\"steps\":%d,\"warmup\":%d%s}\n",
         m->be->name, blas, batch, ms[steps / 2], ms[0], ms[steps - 1], ru.ru_maxrss,
         g->arena_bytes, g->lower_bound, g->arena_bytes + wbytes + nnt_model_opt_bytes(m, slots),
         cpu_step, steps, warmup, gpu);
  free(ms);
  nnt_model_destroy(m);
  return 0;
fail:
  fprintf(stderr, "nnt_bench_train: %s\n", e.msg);
  return 1;
}
