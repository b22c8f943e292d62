/* nntrainer: train or inspect a model described by an INI file. main()
 * (cli_main.c) only calls nnt_cli_main, which tests call in-process. */
#include <ctype.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nntrainer-ext.h"
#include "nntrainer/ini.h"
#include "nntrainer/profile.h"
#include "tools/cli.h"

#define MAX_OVERRIDES 256
#define MAX_THREADS 1024

static void usage(FILE *out) {
  fprintf(out,
          "usage: nntrainer <command> [options]\n"
          "\n"
          "commands:\n"
          "  train CONFIG [Section.key=value ...] [--synthetic[=SAMPLES]] [--seed N]\n"
          "        [--dump DIR] [--profile]\n"
          "        train the model of CONFIG (an INI file); a bare key=value sets\n"
          "        a [Model] key (engine=cpu|gpu|qnn picks the compute engine: gpu\n"
          "        is Vulkan where this build and machine have it, docs/gpu.md).\n"
          "        --synthetic replaces the datasets with seeded\n"
          "        random data of the model's shapes (default 1024 samples).\n"
          "        --dump trains with memory_optimization=false and writes every\n"
          "        weight, output, derivative and gradient of the last step to DIR.\n"
          "        --profile prints each layer's share of a training step (forward,\n"
          "        recomputed forward, gradient, derivative, update; ms per step,\n"
          "        the first step not counted; the CPU engine).\n"
          "  summary CONFIG [Section.key=value ...]\n"
          "        print the compiled layer table and parameter counts\n"
          "  plan CONFIG [--mode train|eval|infer] [--planner basic|pool|best_fit] [--json]\n"
          "       [--svg FILE] [--verbose] [Section.key=value ...]\n"
          "        print the memory plan: bytes per kind, the arena, its lower\n"
          "        bound, the saving against memory_optimization=false\n"
          "  plan CONFIG --budget BYTES [...]\n"
          "        the training plan under memory_budget=BYTES (K, M, G suffixes):\n"
          "        the layers recomputed in the backward pass, their extra FLOPs,\n"
          "        the plan with the datasets' queues against BYTES\n"
          "  plan CONFIG --max-batch BYTES [...]\n"
          "        the largest batch_size whose training plan (recomputing as\n"
          "        needed, the queues included) fits BYTES, and its plan\n"
          "\n"
          "options:\n"
          "  --help     show this help\n"
          "  --version  show the version\n"
          "\n"
          "environment: OPENBLAS_NUM_THREADS / NNTRAINER_THREADS set the BLAS threads\n"
          "(default: all cores; one under a memory limit such as ulimit -v).\n");
}

typedef struct cli_opts {
  const char *config;
  const char *overrides[MAX_OVERRIDES];
  size_t n_overrides;
  unsigned synthetic;       /* samples, 0 = off */
  int seed_set;
  unsigned seed;
  /* plan */
  const char *mode;         /* train | eval | infer */
  const char *planner;
  const char *svg;
  const char *dump;         /* train: write every tensor after training */
  const char *budget, *max_batch; /* plan: --budget / --max-batch BYTES */
  int json, verbose;
  int profile;              /* train: print where a step's time went */
} cli_opts;

/* The decimal integer s, from min to max, for what (an option or variable):
 * digits only, no sign, no junk. Prints why not and returns -1. */
static int parse_number(const char *what, const char *s, unsigned long long min,
                        unsigned long long max, unsigned long long *out) {
  const char *p = s;
  if (*p == '-' && isdigit((unsigned char)p[1])) {
    fprintf(stderr, "nntrainer: %s: '%s' must not be negative\n", what, s);
    return -1;
  }
  char *end;
  errno = 0;
  unsigned long long v = isdigit((unsigned char)*p) ? strtoull(p, &end, 10) : 0;
  if (!isdigit((unsigned char)*p) || *end) {
    fprintf(stderr, "nntrainer: %s: '%s' is not a whole number\n", what, s);
    return -1;
  }
  if (errno == ERANGE || v < min || v > max) {
    fprintf(stderr, "nntrainer: %s: '%s' is out of range (%llu to %llu)\n", what, s, min, max);
    return -1;
  }
  *out = v;
  return 0;
}

static int parse_args(int argc, char **argv, cli_opts *o) {
  memset(o, 0, sizeof *o);
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    unsigned long long v;
    if (!strncmp(a, "--synthetic", 11)) {
      o->synthetic = 1024;
      if (a[11] == '=') {
        if (parse_number("--synthetic", a + 12, 1, UINT_MAX, &v))
          return -1;
        o->synthetic = (unsigned)v;
      } else if (a[11]) {
        fprintf(stderr, "nntrainer: unknown option '%s'\n", a);
        return -1;
      }
    } else if (!strcmp(a, "--seed")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "nntrainer: --seed needs a number\n");
        return -1;
      }
      /* the range of [Model] seed */
      if (parse_number("--seed", argv[++i], 0, UINT_MAX, &v))
        return -1;
      o->seed = (unsigned)v;
      o->seed_set = 1;
    } else if (!strcmp(a, "--budget") || !strcmp(a, "--max-batch")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "nntrainer: %s needs a byte count (as in 512M)\n", a);
        return -1;
      }
      *(a[2] == 'b' ? &o->budget : &o->max_batch) = argv[++i];
    } else if (!strcmp(a, "--mode") || !strcmp(a, "--planner") || !strcmp(a, "--svg") ||
               !strcmp(a, "--dump")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "nntrainer: %s needs a value\n", a);
        return -1;
      }
      const char **dst = a[2] == 'm' ? &o->mode
                         : a[2] == 'p' ? &o->planner
                         : a[2] == 's' ? &o->svg
                                       : &o->dump;
      *dst = argv[++i];
    } else if (!strcmp(a, "--json")) {
      o->json = 1;
    } else if (!strcmp(a, "--profile")) {
      o->profile = 1;
    } else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
      o->verbose = 1;
    } else if (a[0] == '-' && a[1] == '-') {
      fprintf(stderr, "nntrainer: unknown option '%s'\n", a);
      return -1;
    } else if (!o->config) {
      o->config = a;
    } else if (strchr(a, '=')) {
      if (o->n_overrides == MAX_OVERRIDES) {
        fprintf(stderr, "nntrainer: too many overrides\n");
        return -1;
      }
      o->overrides[o->n_overrides++] = a;
    } else {
      fprintf(stderr, "nntrainer: unexpected argument '%s' (overrides look like "
                      "Section.key=value)\n", a);
      return -1;
    }
  }
  if (!o->config) {
    fprintf(stderr, "nntrainer: missing CONFIG (an INI file)\n");
    return -1;
  }
  return 0;
}

static int fail(const nnt_err *e) {
  fprintf(stderr, "nntrainer: error: %s\n", e->msg[0] ? e->msg : nnt_strerror(e->code));
  return 1;
}

/* Load, apply options, compile. */
static int build_model(const cli_opts *o, nnt_model **out, nnt_err *e) {
  nnt_model *m;
  int rc = nnt_model_create(&m, e);
  if (rc)
    return rc;
  char *copy = nnt_strdup(o->config);
  rc = copy ? nnt_model_set_base_dir(m, dirname(copy), e)
            : nnt_err_set(e, NNT_ERR_NOMEM, "out of memory");
  nnt_free(copy);
  if (!rc)
    rc = nnt_ini_load(m, o->config, o->overrides, o->n_overrides, e);
  if (!rc && o->seed_set) {
    char buf[32];
    snprintf(buf, sizeof buf, "%u", o->seed);
    rc = nnt_model_set_property(m, "seed", buf, e);
  }
  for (int mode = 0; !rc && o->synthetic && mode < 3; mode++) {
    if (mode != NNT_DS_TRAIN && !nnt_model_dataset(m, mode))
      continue;
    nnt_dataset *ds;
    unsigned samples = mode == NNT_DS_TRAIN ? o->synthetic
                                            : (o->synthetic / 4 ? o->synthetic / 4 : 1);
    rc = nnt_dataset_create_synthetic(samples, 0x5157ULL + mode, &ds, e);
    if (!rc)
      rc = nnt_model_set_dataset(m, mode, ds, e);
  }
  if (!rc)
    rc = nnt_model_compile(m, e);
  if (rc) {
    nnt_model_destroy(m);
    return rc;
  }
  *out = m;
  return NNT_OK;
}

typedef struct progress_state {
  int tty;
  double last_draw;
} progress_state;

static void progress(const nnt_progress *p, void *ud) {
  progress_state *s = ud;
  if (p->epoch_done) {
    if (s->tty)
      fprintf(stderr, "\r\033[K");
    fprintf(stderr, "epoch %u/%u  train loss %.4f", p->epoch, p->epochs, p->train_loss);
    if (p->has_valid)
      fprintf(stderr, "  valid loss %.4f  valid accuracy %.4f", p->valid_loss,
              p->valid_accuracy);
    fprintf(stderr, "  %.0f samples/s  %.1f ms/step  %.1fs\n", p->samples_per_sec, p->step_ms,
            p->elapsed_s);
    return;
  }
  if (!s->tty || p->elapsed_s - s->last_draw < 0.1)
    return;
  s->last_draw = p->elapsed_s;
  double frac = p->batches ? (double)p->batch / p->batches : 0;
  double done = ((p->epoch - 1) + frac) / p->epochs;
  double left = done > 0 ? p->elapsed_s * (1 - done) / done : 0;
  char bar[31];
  int fill = (int)(frac * 30);
  for (int i = 0; i < 30; i++)
    bar[i] = i < fill ? '#' : '.';
  bar[30] = '\0';
  fprintf(stderr, "\r\033[Kepoch %u/%u [%s] %zu/%zu  loss %.4f  %.0f samples/s  %.0fs left",
          p->epoch, p->epochs, bar, p->batch, p->batches, p->loss, p->samples_per_sec, left);
}

/* The BLAS threads from the environment (empty or unset: all cores, or
 * one under a process memory limit). @return 0, 2 (printed) when the
 * variable is not a thread count, 1 (printed) when the threads do not fit
 * under the process's memory limit. */
static int set_threads(void) {
  const char *var = "NNTRAINER_THREADS", *t = getenv(var);
  if (!t || !t[0])
    t = getenv(var = "OPENBLAS_NUM_THREADS");
  unsigned long long n = 0;
  if (t && t[0] && parse_number(var, t, 0, MAX_THREADS, &n))
    return 2;
  nnt_err e = {0};
  if (nnt_cpu_set_threads((unsigned)n, &e))
    return fail(&e);
  return 0;
}

/* Ctrl-C while training: the first asks the model to stop after the step
 * in progress (nnt_model_request_stop is one atomic store, safe in a
 * handler, on whichever thread gets the signal); SA_RESETHAND puts the
 * default action back, so a second Ctrl-C ends the process at once. */
static nnt_model *volatile sigint_model;

static void on_sigint(int sig) {
  (void)sig;
  nnt_model *m = sigint_model;
  if (m)
    nnt_model_request_stop(m);
}

/* Send SIGINT to m; NULL: back to the default action. */
static void stop_on_sigint(nnt_model *m) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  if (m) {
    sigint_model = m;
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESETHAND | SA_RESTART; /* reads in progress go on */
  } else {
    sa.sa_handler = SIG_DFL;
  }
  sigaction(SIGINT, &sa, NULL);
  if (!m)
    sigint_model = NULL;
}

/* Training stopped by Ctrl-C: say so, and what the save file holds. */
static int report_interrupted(nnt_model *m, const nnt_err *e) {
  fprintf(stderr, "\nnntrainer: training stopped (interrupted): %s\n", e->msg);
  if (m->save_path && m->epoch_idx)
    fprintf(stderr, "nntrainer: %s holds the weights of epoch %u\n", m->save_path,
            m->epoch_idx);
  nnt_model_destroy(m);
  return 130;
}

static int by_total_desc(const void *a, const void *b) {
  const nnt_profile_row *x = a, *y = b;
  double tx = x->forward_ms + x->recompute_ms + x->gradient_ms + x->derivative_ms + x->apply_ms;
  double ty = y->forward_ms + y->recompute_ms + y->gradient_ms + y->derivative_ms + y->apply_ms;
  return tx < ty ? 1 : tx > ty ? -1 : 0;
}

/* --profile: the training steps' time per layer, the largest first. */
static int print_profile(const nnt_model *m, nnt_err *e) {
  nnt_profile_row *rows = calloc(m->n_nodes ? m->n_nodes : 1, sizeof *rows);
  if (!rows)
    return nnt_err_set(e, NNT_ERR_NOMEM, "--profile: no memory for %zu rows", m->n_nodes);
  size_t n;
  unsigned iters;
  double other, all = 0;
  int rc = nnt_model_profile(m, NNT_MODE_TRAIN, rows, m->n_nodes, &n, &iters, &other, e);
  if (rc) {
    free(rows);
    return rc;
  }
  for (size_t i = 0; i < n; i++)
    all += rows[i].forward_ms + rows[i].recompute_ms + rows[i].gradient_ms +
           rows[i].derivative_ms + rows[i].apply_ms;
  all += other;
  qsort(rows, n, sizeof *rows, by_total_desc);
  printf("profile: %.3f ms per training step over %u steps (the first not counted)\n", all,
         iters);
  printf("%-24s %-22s %9s %9s %9s %9s %9s %9s %6s\n", "layer", "type", "forward", "recompute",
         "gradient", "deriv", "update", "total", "%");
  for (size_t i = 0; i < n; i++) {
    const nnt_profile_row *r = &rows[i];
    double t = r->forward_ms + r->recompute_ms + r->gradient_ms + r->derivative_ms + r->apply_ms;
    printf("%-24s %-22s %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %6.1f\n", r->layer, r->type,
           r->forward_ms, r->recompute_ms, r->gradient_ms, r->derivative_ms, r->apply_ms, t,
           all > 0 ? 100 * t / all : 0.0);
  }
  if (other > 0)
    printf("%-24s %-22s %59s %9.3f %6.1f\n", "(all weights)", "clip_grad_by_norm", "", other,
           all > 0 ? 100 * other / all : 0.0);
  free(rows);
  return NNT_OK;
}

static int cmd_train(int argc, char **argv) {
  cli_opts o;
  if (parse_args(argc, argv, &o))
    return 2;
  if (o.dump && o.n_overrides < MAX_OVERRIDES)
    o.overrides[o.n_overrides++] = "memory_optimization=false";
  int bad = set_threads();
  if (bad)
    return bad;
  nnt_err e = {0};
  nnt_model *m;
  if (build_model(&o, &m, &e))
    return fail(&e);
  int rc = nnt_model_initialize(m, &e);
  if (!rc)
    rc = nnt_model_plan(m, NNT_MODE_TRAIN, &e);
  if (rc) {
    nnt_model_destroy(m);
    return fail(&e);
  }
  char a[32], b[32], c[32];
  const nnt_mgr *g = &m->mgr[NNT_MODE_TRAIN];
  size_t wbytes = m->wpool_floats * sizeof(float);
  size_t obytes = nnt_model_opt_bytes(m, nnt_optimizer_state_count(m->opt)), trains = 0,
         frozen = 0;
  for (size_t i = 0; i < m->n_w; i++)
    *(nnt_model_weight_trains(m, i) ? &trains : &frozen) += nnt_dim_len(m->wspec[i].dim);
  if (m->be->device) { /* engine=gpu: which device computes */
    fprintf(stderr, "device: %s, backend '%s'\n", m->be->device, m->be->name);
  } else { /* the CPU: the kernels OpenBLAS chose for it */
    char blas[160];
    nnt_cpu_blas_describe(blas, sizeof blas);
    fprintf(stderr, "blas: %s\n", blas);
  }
  fprintf(stderr, "model: %zu layers, %zu parameters (%zu train, %zu frozen); planned memory "
                  "%s (weights %s, training arena %s",
          m->n_nodes, m->wpool_floats, trains, frozen,
          nnt_bytes_str(wbytes + obytes + g->arena_bytes, a, sizeof a),
          nnt_bytes_str(wbytes, b, sizeof b), nnt_bytes_str(g->arena_bytes, c, sizeof c));
  if (obytes)
    fprintf(stderr, ", optimizer %s", nnt_bytes_str(obytes, a, sizeof a));
  /* what the backend holds now (weights and training arena allocated),
   * by where it lives: the optimizer state comes with the first step */
  nnt_mem_usage mu;
  nnt_backend_memory(m->be, &mu);
  fprintf(stderr, "); on %s: %s device, %s host\n", m->be->device ? m->be->device : m->be->name,
          nnt_bytes_str(mu.device, a, sizeof a), nnt_bytes_str(mu.host, b, sizeof b));
  m->keep_train_arena = o.dump != NULL;
  nnt_model_profile_enable(m, o.profile);
  progress_state ps = {isatty(STDERR_FILENO), -1};
  stop_on_sigint(m);
  rc = nnt_model_train(m, progress, &ps, &e);
  stop_on_sigint(NULL);
  if (rc == NNT_ERR_CANCELED)
    return report_interrupted(m, &e);
  if (rc) {
    if (ps.tty)
      fprintf(stderr, "\n");
    nnt_model_destroy(m);
    return fail(&e);
  }
  if ((o.dump && (rc = nnt_model_dump(m, o.dump, &e))) ||
      (o.profile && (rc = print_profile(m, &e)))) {
    nnt_model_destroy(m);
    return fail(&e);
  }
  float loss, acc;
  if (nnt_model_dataset(m, NNT_DS_TEST)) {
    stop_on_sigint(m);
    rc = nnt_model_evaluate(m, NNT_DS_TEST, &loss, &acc, &e);
    stop_on_sigint(NULL);
    if (rc) {
      if (rc == NNT_ERR_CANCELED)
        return report_interrupted(m, &e);
      nnt_model_destroy(m);
      return fail(&e);
    }
    printf("test loss %.4f  test accuracy %.4f\n", loss, acc);
  }
  if (m->save_path)
    printf("weights saved to %s\n", m->save_path);
  nnt_model_destroy(m);
  return 0;
}

static int cmd_summary(int argc, char **argv) {
  cli_opts o;
  if (parse_args(argc, argv, &o))
    return 2;
  nnt_err e = {0};
  nnt_model *m;
  if (build_model(&o, &m, &e))
    return fail(&e);
  nnt_model_print_summary(stdout, m, 0);
  nnt_model_destroy(m);
  return 0;
}

/* Plan one mode of a built model; fills the arena size. Nothing here runs
 * the model, so its arena is never allocated (the host's would be zeroed:
 * `plan` of ResNet-18 touched 931 MB for the plan and the unoptimized one
 * it compares with, and --max-batch an arena per batch it tried). */
static int plan_mode(nnt_model *m, nnt_mode mode, const char *planner, nnt_err *e) {
  if (planner && nnt_planner_from_name(planner, &m->planner))
    return nnt_err_set(e, NNT_ERR_INVAL, "--planner: unknown planner '%s' (basic, pool, best_fit)",
                       planner);
  return nnt_model_plan_layout(m, mode, e);
}

/* The training plan of o under memory_budget=bytes (batch_size=batch
 * unless 0), into *out. A model without a training dataset is planned
 * with --synthetic's, so its queue counts as `train --synthetic` holds
 * it. On an error nothing is left. */
static int budget_probe(const cli_opts *o, unsigned batch, uint64_t bytes, nnt_model **out,
                        nnt_err *e) {
  cli_opts b = *o;
  char ms[48], bs[48];
  if (b.n_overrides + 2 > MAX_OVERRIDES)
    return nnt_err_set(e, NNT_ERR_INVAL, "too many overrides");
  snprintf(ms, sizeof ms, "memory_budget=%llu", (unsigned long long)bytes);
  b.overrides[b.n_overrides++] = ms;
  if (batch) {
    snprintf(bs, sizeof bs, "batch_size=%u", batch);
    b.overrides[b.n_overrides++] = bs;
  }
  nnt_model *m;
  int rc = build_model(&b, &m, e);
  if (rc)
    return rc;
  if (!nnt_model_dataset(m, NNT_DS_TRAIN)) {
    nnt_dataset *ds;
    rc = nnt_dataset_create_synthetic(1024, 0x5157ULL, &ds, e);
    if (!rc)
      rc = nnt_model_set_dataset(m, NNT_DS_TRAIN, ds, e);
  }
  if (!rc)
    rc = plan_mode(m, NNT_MODE_TRAIN, o->planner, e);
  if (rc)
    nnt_model_destroy(m);
  else
    *out = m;
  return rc;
}

/* --max-batch: the largest batch_size whose training plan fits bytes
 * (doubling, then bisection), and in why the reason batch + 1 does not.
 * @return 0, or the exit code after saying why. */
static int find_max_batch(const cli_opts *o, uint64_t bytes, unsigned *best, char *why,
                          size_t n) {
  unsigned lo = 0, hi = 0; /* the largest batch that fits, the smallest that does not */
  nnt_err e = {0};
  for (unsigned b = 1; !hi; b = b > UINT_MAX / 2 ? UINT_MAX : 2 * b) {
    nnt_model *m;
    if (budget_probe(o, b, bytes, &m, &e)) {
      hi = b;
      snprintf(why, n, "%s", e.msg);
    } else {
      nnt_model_destroy(m);
      lo = b;
      if (b == UINT_MAX)
        break;
    }
  }
  while (hi && hi - lo > 1) {
    unsigned mid = lo + (hi - lo) / 2;
    nnt_model *m;
    if (budget_probe(o, mid, bytes, &m, &e)) {
      hi = mid;
      snprintf(why, n, "%s", e.msg);
    } else {
      nnt_model_destroy(m);
      lo = mid;
    }
  }
  if (!lo) {
    fprintf(stderr, "nntrainer: --max-batch: no batch size fits %llu bytes: batch_size 1: %s\n",
            (unsigned long long)bytes, why);
    return 1;
  }
  *best = lo;
  return 0;
}

/* --budget / --max-batch into bi: @return 0 to go on, else the exit code. */
static int budget_options(const cli_opts *o, nnt_mode mode, cli_budget_info *bi, char *why,
                          size_t n) {
  if (!o->budget && !o->max_batch)
    return 0;
  if (o->budget && o->max_batch) {
    fprintf(stderr, "nntrainer: --budget and --max-batch: give one of them\n");
    return 2;
  }
  const char *opt = o->budget ? "--budget" : "--max-batch";
  if (mode != NNT_MODE_TRAIN) {
    fprintf(stderr, "nntrainer: %s plans training: not with --mode %s\n", opt, o->mode);
    return 2;
  }
  if (cli_parse_bytes(opt, o->budget ? o->budget : o->max_batch, &bi->budget))
    return 2;
  if (o->max_batch) {
    int rc = find_max_batch(o, bi->budget, &bi->max_batch, why, n);
    if (rc)
      return rc;
    bi->next_refused = why;
  }
  return 0;
}

static int cmd_plan(int argc, char **argv) {
  cli_opts o;
  if (parse_args(argc, argv, &o))
    return 2;
  nnt_mode mode = NNT_MODE_TRAIN;
  if (o.mode && !strcmp(o.mode, "infer"))
    mode = NNT_MODE_INFER;
  else if (o.mode && !strcmp(o.mode, "eval"))
    mode = NNT_MODE_EVAL;
  else if (o.mode && strcmp(o.mode, "train")) {
    fprintf(stderr, "nntrainer: --mode: '%s' is not train, eval or infer\n", o.mode);
    return 2;
  }
  nnt_err e = {0};
  nnt_model *m, *base;
  cli_budget_info bi = {0};
  char why[NNT_ERR_MSG_MAX], bs[48];
  int brc = budget_options(&o, mode, &bi, why, sizeof why);
  if (brc)
    return brc;
  if (bi.budget ? budget_probe(&o, bi.max_batch, bi.budget, &m, &e) : build_model(&o, &m, &e))
    return fail(&e);
  if (!bi.budget && plan_mode(m, mode, o.planner, &e)) {
    nnt_model_destroy(m);
    return fail(&e);
  }
  /* the same model with memory_optimization=false, for the saving */
  cli_opts ob = o;
  if (ob.n_overrides + 1 < MAX_OVERRIDES) {
    ob.overrides[ob.n_overrides++] = "memory_optimization=false";
    ob.overrides[ob.n_overrides++] = "memory_budget=0"; /* only compared, never run */
  }
  if (bi.max_batch && ob.n_overrides < MAX_OVERRIDES) { /* at the batch found */
    snprintf(bs, sizeof bs, "batch_size=%u", bi.max_batch);
    ob.overrides[ob.n_overrides++] = bs;
  }
  if (build_model(&ob, &base, &e)) {
    nnt_model_destroy(m);
    return fail(&e);
  }
  if (plan_mode(base, mode, NULL, &e)) {
    nnt_model_destroy(base);
    nnt_model_destroy(m);
    return fail(&e);
  }
  cli_plan_info pi = {0};
  pi.mode = mode == NNT_MODE_TRAIN ? "train" : mode == NNT_MODE_EVAL ? "eval" : "infer";
  pi.mgr = &m->mgr[mode];
  pi.orders = m->n_steps[mode];
  pi.n_steps = m->n_steps[mode];
  pi.steps = m->sched[mode];
  pi.nodes = m->nodes;
  pi.unoptimized_arena = base->mgr[mode].arena_bytes;
  pi.memory_budget = m->memory_budget;
  pi.engine = nnt_engine_name(m->engine);
  pi.backend = m->be->name;
  pi.device = m->be->device;
  pi.arena_host = m->be->buft->is_host(m->be->buft);
  pi.state_host = nnt_model_state_buft(m)->is_host(nnt_model_state_buft(m));
  size_t wfloats = 0;
  for (size_t i = 0; i < m->n_w; i++)
    wfloats += nnt_dim_len(m->wspec[i].dim);
  pi.weight_bytes = wfloats * sizeof(float);
  /* state for the weights that train only (frozen ones have none) */
  pi.optimizer_bytes = mode == NNT_MODE_TRAIN && m->opt
                           ? nnt_model_opt_bytes(m, nnt_optimizer_state_count(m->opt))
                           : 0;
  nnt_mem_peak peak;
  if (nnt_model_mem_peak(m, mode, &peak, &e)) {
    nnt_model_destroy(base);
    nnt_model_destroy(m);
    return fail(&e);
  }
  pi.peak = &peak;
  if (mode == NNT_MODE_TRAIN) {
    pi.reruns = m->reruns;
    pi.n_reruns = m->n_reruns;
    pi.delays = m->delays;
    pi.n_delays = m->n_delays;
    pi.rerun_flops = m->rerun_flops;
    for (size_t i = 0; i < m->n_nodes; i++)
      pi.forward_flops += nnt_recompute_node_flops(m, i);
  }
  int rc = 0;
  if (bi.budget) {
    bi.weight_bytes = pi.weight_bytes;
    bi.optimizer_bytes = pi.optimizer_bytes;
    if (cli_plan_report_budget(stdout, &pi, m, &bi, o.json, o.verbose))
      rc = 1;
  } else {
    cli_plan_report(stdout, &pi, o.json, o.verbose);
    if (!o.json && mode == NNT_MODE_TRAIN && m->n_recompute)
      cli_plan_report_recompute(stdout, m);
  }
  nnt_err se;
  if (o.svg && cli_plan_svg(o.svg, &pi, &se)) {
    fprintf(stderr, "nntrainer: error: %s\n", se.msg);
    rc = 1;
  }
  nnt_model_destroy(base);
  nnt_model_destroy(m);
  return rc;
}

/* The library's notices and warnings (the default log level), one line
 * each on stderr. */
static void log_to_stderr(int level, const char *msg, void *ud) {
  static const char *const names[] = {"debug", "info", "notice", "warning"};
  (void)ud;
  fprintf(stderr, "nntrainer: %s: %s\n",
          level >= 0 && level <= ML_TRAIN_EXT_LOG_WARNING ? names[level] : "log", msg);
}

static void install_log(void) { ml_train_ext_set_log_callback(log_to_stderr, NULL); }

int nnt_cli_main(int argc, char **argv) {
  install_log();
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(cmd, "--version")) {
    printf("nntrainer %s\n", NNT_VERSION);
    return 0;
  }
  if (!strcmp(cmd, "train"))
    return cmd_train(argc - 2, argv + 2);
  if (!strcmp(cmd, "summary"))
    return cmd_summary(argc - 2, argv + 2);
  if (!strcmp(cmd, "plan"))
    return cmd_plan(argc - 2, argv + 2);
  fprintf(stderr, "nntrainer: unknown command '%s'\n\n", cmd);
  usage(stderr);
  return 2;
}
