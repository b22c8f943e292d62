/* Shared between the CLI's files. */
#ifndef NNT_CLI_H
#define NNT_CLI_H

#include <stdio.h>
#include "nntrainer/memreport.h"
#include "nntrainer/model_impl.h"

/* The whole command line tool: what main() returns. */
int nnt_cli_main(int argc, char **argv);

/* What `nntrainer plan` reports. */
typedef struct cli_plan_info {
  const char *mode;          /* "train" or "infer" */
  const nnt_mgr *mgr;
  unsigned orders;
  size_t unoptimized_arena;  /* the same mode with memory_optimization=false */
  size_t weight_bytes, optimizer_bytes;
  uint64_t memory_budget;    /* [Model] memory_budget; 0: none */
  const nnt_step *steps;     /* the mode's schedule (--verbose, --json) */
  unsigned n_steps;
  const nnt_node *nodes;
  /* where the pools live on the chosen engine */
  const char *engine;        /* "cpu", "gpu" */
  const char *backend;       /* "cpu", "vulkan" */
  const char *device;        /* the device in words; NULL: none (the CPU) */
  int arena_host, state_host; /* 1: host memory; 0: device memory */
  const nnt_mem_peak *peak;  /* where the plan peaks; NULL: not reported */
  /* training: the additions whose input is computed again image by image
   * (rerun.c), their extra FLOPs and the forward's */
  const struct nnt_rerun *reruns;
  unsigned n_reruns;
  const struct nnt_delay *delays; /* delay.c: branches run at their addition's step */
  unsigned n_delays;
  double rerun_flops, forward_flops;
} cli_plan_info;

void cli_plan_report(FILE *out, const cli_plan_info *pi, int json, int verbose);
/* What the training plan recomputes in the backward pass and its extra
 * FLOPs (under a budget, or the default plan's cheap chains). */
void cli_plan_report_recompute(FILE *out, const nnt_model *m);
/* Write the plan as an SVG picture. @return NNT_OK, or an error in e. */
int cli_plan_svg(const char *path, const cli_plan_info *pi, nnt_err *e);

/* cli_budget.c: `plan --budget` / `--max-batch`. */
typedef struct cli_budget_info {
  uint64_t budget;           /* the bytes of --budget or --max-batch */
  size_t weight_bytes, optimizer_bytes;
  unsigned max_batch;        /* --max-batch: the largest batch that fits; 0: not asked */
  const char *next_refused;  /* --max-batch: why max_batch + 1 does not fit */
} cli_budget_info;
/* A byte count with an optional K, M or G suffix (as memory_budget), more
 * than 0; prints why not (naming opt) and returns -1. */
int cli_parse_bytes(const char *opt, const char *v, uint64_t *out);
/* The training plan's report (cli_plan_report) and what is recomputed,
 * its extra FLOPs, the plan with the datasets' queues against the budget
 * (JSON: members of the same object). @return 0, -1 out of memory. */
int cli_plan_report_budget(FILE *out, const cli_plan_info *pi, const nnt_model *m,
                           const cli_budget_info *bi, int json, int verbose);
#endif
