/* `nntrainer summary`: the layer table of a compiled model. */
#include "tools/cli.h"

#include <string.h>

const char *cli_bytes(size_t b, char *buf, size_t n) {
  if (b < 1024)
    snprintf(buf, n, "%zu B", b);
  else if (b < 1024 * 1024)
    snprintf(buf, n, "%.1f KiB", b / 1024.0);
  else
    snprintf(buf, n, "%.2f MiB", b / (1024.0 * 1024.0));
  return buf;
}

void cli_print_summary(FILE *out, nnt_model *m) {
  char a[64], b[64];
  size_t total = 0, trainable = 0;
  fprintf(out, "%-34s %-16s %-18s %-18s %10s\n", "layer", "type", "input", "output",
          "params");
  for (size_t i = 0; i < 100; i++)
    fputc('-', out);
  fputc('\n', out);
  for (size_t i = 0; i < m->n_nodes; i++) {
    nnt_node *nd = &m->nodes[i];
    size_t params = 0;
    for (unsigned w = 0; w < nd->fc.n_w; w++) {
      size_t n = nnt_dim_len(nd->fc.w[w].dim);
      params += n;
      if (nd->fc.w[w].trainable && nd->layer->trainable)
        trainable += n;
    }
    total += params;
    nnt_dim in = nd->fc.in_dim[0], o = nd->fc.out_dim[0];
    fprintf(out, "%-34s %-16s %-18s %-18s %10zu\n", nd->layer->name, nd->layer->ops->type,
            nnt_dim_str(in, a, sizeof a), nnt_dim_str(o, b, sizeof b), params);
    for (unsigned k = 1; k < nd->n_in; k++)
      fprintf(out, "%-34s %-16s %-18s\n", "", "", nnt_dim_str(nd->fc.in_dim[k], a, sizeof a));
  }
  for (size_t i = 0; i < 100; i++)
    fputc('-', out);
  fputc('\n', out);
  fprintf(out, "layers: %zu   parameters: %zu (trainable %zu, %s)   batch: %u\n",
          m->n_nodes, total, trainable, cli_bytes(total * sizeof(float), a, sizeof a),
          m->batch);
}
