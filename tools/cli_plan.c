/* `nntrainer plan`: the memory plan of a model, as text, JSON or SVG. */
#include "nntrainer/file_io.h"
#include "tools/cli.h"

#include <string.h>

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      fprintf(f, "\\u%04x", *s);
    else
      fputc(*s, f);
  }
  fputc('"', f);
}

/* The node of step i: its layer's name, or none (JSON null, text "-"). */
static void step_node(FILE *out, const cli_plan_info *pi, unsigned i, int json) {
  unsigned n = pi->steps[i].node;
  const char *name = n == NNT_NO_NODE ? NULL : pi->nodes[n].layer->name;
  if (json && name)
    json_str(out, name);
  else
    fputs(name ? name : json ? "null" : "-", out);
}

/* "peak": the step, what runs there, the bytes live there by kind and the
 * largest live tensors. */
static void peak_json(FILE *out, const cli_plan_info *pi) {
  const nnt_mem_peak *p = pi->peak;
  char w[NNT_NAME_MAX + 96];
  fprintf(out, ",\"peak\":{\"step\":%u,\"steps\":%u,\"kind\":\"%s\",\"node\":", p->step,
          p->n_steps, nnt_step_kind_name(p->kind));
  if (p->layer)
    json_str(out, p->layer);
  else
    fputs("null", out);
  fprintf(out, ",\"where\":");
  json_str(out, nnt_mem_peak_where(p, w, sizeof w));
  fprintf(out, ",\"live_bytes\":%zu,\"total_bytes\":%zu,\"kinds\":{", p->live_bytes,
          p->total_bytes);
  for (int k = 0; k < NNT_TK__COUNT; k++)
    fprintf(out, "%s\"%s\":%zu", k ? "," : "", nnt_tkind_name(k), p->kind_bytes[k]);
  fprintf(out, "},\"largest\":[");
  for (unsigned i = 0; i < p->n_largest; i++) {
    const nnt_mgr_tensor *t = &pi->mgr->t[p->largest[i]];
    fprintf(out, "%s{\"name\":", i ? "," : "");
    json_str(out, t->name);
    fprintf(out, ",\"kind\":\"%s\",\"bytes\":%zu}", nnt_tkind_name(t->kind),
            p->largest_bytes[i]);
  }
  fputs("]}", out);
}

/* The peak as text: where, then the bytes live there per kind; with
 * verbose, the largest live tensors by name. */
static void peak_text(FILE *out, const cli_plan_info *pi, int verbose) {
  const nnt_mem_peak *p = pi->peak;
  char w[NNT_NAME_MAX + 96], a[32];
  fprintf(out, "peak         %s (of %u steps): %zu bytes live (%s)\n",
          nnt_mem_peak_where(p, w, sizeof w), p->n_steps, p->total_bytes,
          nnt_bytes_str(p->total_bytes, a, sizeof a));
  for (int k = 0; k < NNT_TK__COUNT; k++)
    if (p->kind_bytes[k])
      fprintf(out, "  %-11s %12zu bytes (%s)%s\n", nnt_tkind_name(k), p->kind_bytes[k],
              nnt_bytes_str(p->kind_bytes[k], a, sizeof a),
              k == NNT_TK_WEIGHT || k == NNT_TK_OPT_STATE ? "   (every step)" : "");
  if (!verbose)
    return;
  fprintf(out, "  largest live there:\n");
  for (unsigned i = 0; i < p->n_largest; i++) {
    const nnt_mgr_tensor *t = &pi->mgr->t[p->largest[i]];
    fprintf(out, "    %-44s %-11s %12zu bytes (%s)\n", t->name, nnt_tkind_name(t->kind),
            p->largest_bytes[i], nnt_bytes_str(p->largest_bytes[i], a, sizeof a));
  }
}

/* Where a pool lives: "host" or "device" memory. */
static const char *where(int host) { return host ? "host" : "device"; }

void cli_plan_report(FILE *out, const cli_plan_info *pi, int json, int verbose) {
  const nnt_mgr *g = pi->mgr;
  char a[32], b[32];
  size_t total = pi->weight_bytes + pi->optimizer_bytes + g->arena_bytes;
  if (json) {
    fprintf(out, "{\"mode\":\"%s\",\"planner\":\"%s\",\"arena_bytes\":%zu,"
                 "\"lower_bound_bytes\":%zu,\"unoptimized_arena_bytes\":%zu,"
                 "\"weight_bytes\":%zu,\"optimizer_bytes\":%zu,\"total_bytes\":%zu,"
                 "\"planning_ms\":%.3f,",
            pi->mode, nnt_planner_name(g->planner), g->arena_bytes, g->lower_bound,
            pi->unoptimized_arena, pi->weight_bytes, pi->optimizer_bytes, total,
            g->planning_ms);
    if (pi->memory_budget)
      fprintf(out, "\"memory_budget_bytes\":%llu,", (unsigned long long)pi->memory_budget);
    else
      fprintf(out, "\"memory_budget_bytes\":null,");
    fprintf(out, "\"engine\":\"%s\",\"backend\":", pi->engine);
    json_str(out, pi->backend);
    fprintf(out, ",\"device\":");
    if (pi->device)
      json_str(out, pi->device);
    else
      fputs("null", out);
    fprintf(out, ",\"memory\":{\"arena\":\"%s\",\"weights\":\"%s\",\"optimizer\":\"%s\"},",
            where(pi->arena_host), where(pi->state_host), where(pi->state_host));
    fprintf(out, "\"kinds\":{");
    for (int k = 0; k < NNT_TK__COUNT; k++)
      fprintf(out, "%s\"%s\":%zu", k ? "," : "", nnt_tkind_name(k),
              nnt_mgr_kind_bytes(g, k));
    fprintf(out, "},\"tensors\":[");
    for (size_t i = 0; i < g->n; i++) {
      const nnt_mgr_tensor *t = &g->t[i];
      fprintf(out, "%s{\"name\":", i ? "," : "");
      json_str(out, t->name);
      fprintf(out, ",\"kind\":\"%s\",\"bytes\":%zu,\"first\":%u,\"last\":%u,\"offset\":%zu,"
                   "\"view\":%s}",
              nnt_tkind_name(t->kind), t->bytes, t->first, t->last, t->offset,
              t->parent >= 0 ? "true" : "false");
    }
    fprintf(out, "],\"schedule\":[");
    for (unsigned i = 0; i < pi->n_steps; i++) {
      fprintf(out, "%s{\"step\":%u,\"node\":", i ? "," : "", i);
      step_node(out, pi, i, 1);
      fprintf(out, ",\"kind\":\"%s\"}", nnt_step_kind_name(pi->steps[i].kind));
    }
    fputc(']', out);
    if (pi->peak)
      peak_json(out, pi);
    if (pi->n_reruns) {
      fprintf(out, ",\"reruns\":[");
      for (unsigned i = 0; i < pi->n_reruns; i++) {
        fprintf(out, "%s{\"node\":", i ? "," : "");
        json_str(out, pi->nodes[pi->reruns[i].node].layer->name);
        fprintf(out, ",\"input\":%u,\"layers\":%u}", pi->reruns[i].k, pi->reruns[i].n);
      }
      fprintf(out, "],\"rerun_flops\":%.6g,\"forward_flops\":%.6g", pi->rerun_flops,
              pi->forward_flops);
    }
    if (pi->n_delays) {
      fprintf(out, ",\"delays\":[");
      for (unsigned i = 0; i < pi->n_delays; i++) {
        const nnt_delay *d = &pi->delays[i];
        fprintf(out, "%s{\"node\":", i ? "," : "");
        json_str(out, pi->nodes[d->node].layer->name);
        fprintf(out, ",\"input\":%u,\"layers\":[", d->k);
        for (unsigned j = 0; j < d->n; j++) {
          fputs(j ? "," : "", out);
          json_str(out, pi->nodes[d->chain[j]].layer->name);
        }
        fputs("]}", out);
      }
      fputc(']', out);
    }
    fprintf(out, "}\n");
    return;
  }
  fprintf(out, "mode %s, planner %s, %zu tensors, %u execution orders\n", pi->mode,
          nnt_planner_name(g->planner), g->n, pi->orders);
  for (int k = 0; k < NNT_TK__COUNT; k++) {
    size_t s = nnt_mgr_kind_bytes(g, k);
    if (s)
      fprintf(out, "  %-11s %12zu bytes (%s)\n", nnt_tkind_name(k), s,
              nnt_bytes_str(s, a, sizeof a));
  }
  fprintf(out, "arena        %12zu bytes (%s)\n", g->arena_bytes,
          nnt_bytes_str(g->arena_bytes, a, sizeof a));
  fprintf(out, "lower bound  %12zu bytes (%s)   arena / lower bound = %.3f\n", g->lower_bound,
          nnt_bytes_str(g->lower_bound, a, sizeof a),
          g->lower_bound ? (double)g->arena_bytes / g->lower_bound : 1.0);
  fprintf(out, "unoptimized  %12zu bytes (%s)   saving %.1f%% (memory_optimization=false)\n",
          pi->unoptimized_arena, nnt_bytes_str(pi->unoptimized_arena, b, sizeof b),
          pi->unoptimized_arena ? 100.0 * (1.0 - (double)g->arena_bytes / pi->unoptimized_arena)
                                : 0);
  fprintf(out, "weights      %12zu bytes   optimizer %zu bytes   total %zu bytes (%s)\n",
          pi->weight_bytes, pi->optimizer_bytes, total, nnt_bytes_str(total, a, sizeof a));
  if (pi->memory_budget)
    fprintf(out, "budget       %12llu bytes (%s)   total / budget = %.3f\n",
            (unsigned long long)pi->memory_budget,
            nnt_bytes_str((size_t)pi->memory_budget, a, sizeof a),
            (double)total / (double)pi->memory_budget);
  else
    fprintf(out, "budget       none (memory_budget)\n");
  if (pi->n_reruns) {
    fprintf(out, "rerun        %u additions compute an input again, image by image:",
            pi->n_reruns);
    for (unsigned i = 0; i < pi->n_reruns; i++)
      fprintf(out, "%s %s (input %u, %u layers)", i ? "," : "",
              pi->nodes[pi->reruns[i].node].layer->name, pi->reruns[i].k, pi->reruns[i].n);
    fprintf(out, "\n             extra FLOPs %.4g per step, %.1f%% of the forward's (%.4g)\n",
            pi->rerun_flops, pi->forward_flops > 0 ? 100 * pi->rerun_flops / pi->forward_flops : 0,
            pi->forward_flops);
  }
  if (pi->n_delays) {
    fprintf(out, "delay        %u %s at %s addition's step, from a copy of what %s read:",
            pi->n_delays, pi->n_delays == 1 ? "branch runs" : "branches run",
            pi->n_delays == 1 ? "its" : "their", pi->n_delays == 1 ? "it" : "they");
    for (unsigned i = 0; i < pi->n_delays; i++) {
      const nnt_delay *d = &pi->delays[i];
      fprintf(out, "%s %s (", i ? "," : "", pi->nodes[d->node].layer->name);
      for (unsigned j = 0; j < d->n; j++)
        fprintf(out, "%s%s", j ? " " : "", pi->nodes[d->chain[j]].layer->name);
      fputc(')', out);
    }
    fputc('\n', out);
  }
  if (pi->peak)
    peak_text(out, pi, verbose);
  fprintf(out, "planning     %.3f ms\n", g->planning_ms);
  fprintf(out, "engine       %s (backend '%s'%s%s): arena in %s memory, weights and optimizer "
               "state in %s memory\n", pi->engine, pi->backend, pi->device ? " on " : "",
          pi->device ? pi->device : "", where(pi->arena_host), where(pi->state_host));
  if (!verbose)
    return;
  fprintf(out, "\n%-48s %-11s %12s %6s %6s %12s\n", "tensor", "kind", "bytes", "first", "last",
          "offset");
  for (size_t i = 0; i < g->n; i++) {
    const nnt_mgr_tensor *t = &g->t[i];
    fprintf(out, "%-48s %-11s %12zu %6u %6u %12zu%s\n", t->name, nnt_tkind_name(t->kind),
            t->bytes, t->life_first, t->life_last, t->offset, t->parent >= 0 ? "  (shared)" : "");
  }
  fprintf(out, "\n%6s  %-16s %s\n", "step", "kind", "node");
  for (unsigned i = 0; i < pi->n_steps; i++) {
    fprintf(out, "%6u  %-16s ", i, nnt_step_kind_name(pi->steps[i].kind));
    step_node(out, pi, i, 0);
    fputc('\n', out);
  }
}

static const char *kind_color(nnt_tkind k) {
  static const char *c[NNT_TK__COUNT] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                         "#59a14f", "#edc948", "#b07aa1", "#ff9da7"};
  return k < NNT_TK__COUNT ? c[k] : "#999";
}

static int write_svg(FILE *f, void *ud, nnt_err *e) {
  (void)e; /* write errors are the stream's, seen by nnt_file_save */
  const cli_plan_info *pi = ud;
  const nnt_mgr *g = pi->mgr;
  const double W = 1200, H = 700, left = 90, top = 40, right = 160, bottom = 40;
  unsigned orders = pi->orders ? pi->orders : 1;
  double span = g->arena_bytes ? (double)g->arena_bytes : 1;
  double xs = (W - left - right) / orders, ys = (H - top - bottom) / span;
  fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
             "font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
  fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
  fprintf(f, "<text x=\"%.0f\" y=\"20\" font-size=\"15\">memory plan: mode %s, planner %s, "
             "arena %zu bytes, lower bound %zu bytes</text>\n",
          left, pi->mode, nnt_planner_name(g->planner), g->arena_bytes, g->lower_bound);
  for (size_t i = 0; i < g->n; i++) {
    const nnt_mgr_tensor *t = &g->t[i];
    if (t->parent >= 0 || !t->bytes)
      continue;
    double x = left + t->life_first * xs, w = (t->life_last - t->life_first + 1) * xs;
    double y = top + t->offset * ys, h = t->bytes * ys;
    fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" "
               "stroke=\"#333\" stroke-width=\"0.3\"><title>",
            x, y, w, h < 0.5 ? 0.5 : h, kind_color(t->kind));
    for (const char *s = t->name; *s; s++)
      fputs(*s == '<' ? "&lt;" : *s == '&' ? "&amp;" : (char[2]){*s, 0}, f);
    fprintf(f, " (%s, %zu bytes, orders %u..%u, offset %zu)</title></rect>\n",
            nnt_tkind_name(t->kind), t->bytes, t->life_first, t->life_last, t->offset);
  }
  double lb = top + g->lower_bound * ys;
  fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.2f\" y2=\"%.2f\" stroke=\"red\" "
             "stroke-dasharray=\"6,4\"/>\n", left, W - right, lb, lb);
  fprintf(f, "<text x=\"%.0f\" y=\"%.2f\" fill=\"red\">lower bound</text>\n", W - right + 5,
          lb + 4);
  fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">execution order &#8594;</text>\n", left, H - 12);
  fprintf(f, "<text x=\"12\" y=\"%.0f\">address &#8595;</text>\n", top + 12);
  for (int k = 0; k < NNT_TK__COUNT; k++) {
    fprintf(f, "<rect x=\"%.0f\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>"
               "<text x=\"%.0f\" y=\"%d\">%s</text>\n",
            W - right + 5, 60 + 18 * k, kind_color(k), W - right + 22, 70 + 18 * k,
            nnt_tkind_name(k));
  }
  fprintf(f, "</svg>\n");
  return NNT_OK;
}

/* Written as the library writes its files: atomically, through a link,
 * with the mode fopen would give. */
int cli_plan_svg(const char *path, const cli_plan_info *pi, nnt_err *e) {
  return nnt_file_save(path, "svg", write_svg, (void *)pi, e);
}
