/* `nntrainer plan --budget BYTES` and `--max-batch BYTES`: what the plan
 * recomputes under a memory budget (nntrainer/recompute.c), its extra
 * FLOPs, the plan and the datasets' queues against the budget; the largest
 * batch whose training plan fits. */
#include "tools/cli.h"

#include <stdlib.h>
#include <string.h>

int cli_parse_bytes(const char *opt, const char *v, uint64_t *out) {
  uint64_t x = 0;
  int r = nnt_parse_bytes(v, &x);
  if (r == 2) {
    fprintf(stderr, "nntrainer: %s: '%s' is more than %zu bytes\n", opt, v, (size_t)SIZE_MAX);
    return -1;
  }
  if (r) {
    fprintf(stderr, "nntrainer: %s: '%s' is not a byte count (digits with an optional K, M or "
                    "G suffix, as in 512M)\n", opt, v);
    return -1;
  }
  if (!x) {
    fprintf(stderr, "nntrainer: %s: '%s' must be more than 0 bytes\n", opt, v);
    return -1;
  }
  *out = x;
  return 0;
}

/* One training step's FLOPs, estimated: the forward (recompute.c's count)
 * and a backward of twice that (a convolution or fully connected layer
 * computes dX and dW, each as costly as its forward). */
static double step_flops(const nnt_model *m) {
  double f = 0;
  for (size_t i = 0; i < m->n_nodes; i++)
    f += nnt_recompute_node_flops(m, i);
  return 3 * f;
}

static void json_name(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++)
    if (*s == '"' || *s == '\\')
      fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      fprintf(f, "\\u%04x", *s);
    else
      fputc(*s, f);
  fputc('"', f);
}

/* The recomputation's fields (JSON members, no braces) or lines. */
static void budget_part(FILE *out, const nnt_model *m, const cli_budget_info *bi, int json) {
  const nnt_mgr *g = &m->mgr[NNT_MODE_TRAIN];
  size_t parts = g->arena_bytes + bi->weight_bytes + bi->optimizer_bytes;
  size_t reserve = m->budget_reserve, with = parts + reserve;
  double step = step_flops(m), rel = step > 0 ? m->recompute_flops / step : 0;
  char a[32], b[32], c[32], d[32];
  if (json) {
    fprintf(out, ",\"recompute\":{\"budget_bytes\":%llu,\"queue_bytes\":%zu,"
                 "\"total_with_queues_bytes\":%zu,\"extra_flops\":%.0f,\"step_flops\":%.0f,"
                 "\"extra_relative\":%.4f,\"layers\":[",
            (unsigned long long)bi->budget, reserve, with, m->recompute_flops, step, rel);
    for (size_t i = 0, k = 0; i < m->n_nodes; i++)
      if (m->nodes[i].recompute) {
        fputs(k++ ? "," : "", out);
        json_name(out, m->nodes[i].layer->name);
      }
    fputs("]}", out);
    if (bi->max_batch)
      fprintf(out, ",\"max_batch\":%u", bi->max_batch);
    if (bi->next_refused) {
      fputs(",\"next_batch_refused\":", out);
      json_name(out, bi->next_refused);
    }
    return;
  }
  if (bi->max_batch)
    fprintf(out, "max batch    %u (batch_size %u fits %llu bytes)\n", bi->max_batch,
            bi->max_batch, (unsigned long long)bi->budget);
  cli_plan_report_recompute(out, m);
  fprintf(out, "with queues  %zu bytes (%s) = plan %s + datasets' queues %s; budget %llu bytes "
               "(%s)\n", with, nnt_bytes_str(with, a, sizeof a),
          nnt_bytes_str(parts, b, sizeof b), nnt_bytes_str(reserve, c, sizeof c),
          (unsigned long long)bi->budget,
          nnt_bytes_str((size_t)bi->budget, d, sizeof d));
  if (bi->next_refused)
    fprintf(out, "batch %u     refused: %s\n", bi->max_batch + 1, bi->next_refused);
}

void cli_plan_report_recompute(FILE *out, const nnt_model *m) {
  double step = step_flops(m), rel = step > 0 ? m->recompute_flops / step : 0;
  unsigned saved = 0;
  for (size_t i = 0; i < m->n_nodes; i++)
    saved += m->nodes[i].recompute_saved != 0;
  fprintf(out, "recomputed   %u layers", m->n_recompute);
  const char *sep = ": ";
  for (size_t i = 0; i < m->n_nodes; i++)
    if (m->nodes[i].recompute) {
      fprintf(out, "%s%s", sep, m->nodes[i].layer->name);
      sep = ", ";
    }
  if (saved)
    fprintf(out, "; %u of them from what they keep", saved);
  fputc('\n', out);
  fprintf(out, "extra FLOPs  %.4g per step, %.1f%% of one forward + backward (%.4g)\n",
          m->recompute_flops, 100 * rel, step);
}

int cli_plan_report_budget(FILE *out, const cli_plan_info *pi, const nnt_model *m,
                           const cli_budget_info *bi, int json, int verbose) {
  if (!json) {
    cli_plan_report(out, pi, 0, verbose);
    budget_part(out, m, bi, 0);
    return 0;
  }
  /* the report's object with the recomputation's members added */
  char *buf = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&buf, &len);
  if (!mem)
    return -1;
  cli_plan_report(mem, pi, 1, verbose);
  if (fclose(mem)) {
    free(buf);
    return -1;
  }
  while (len && (buf[len - 1] == '\n' || buf[len - 1] == '}'))
    if (buf[--len] == '}')
      break;
  fwrite(buf, 1, len, out);
  free(buf);
  budget_part(out, m, bi, 1);
  fputs("}\n", out);
  return 0;
}
