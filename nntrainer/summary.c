/* The model summary: the layer table the CLI prints and
 * ml_train_model_get_summary() returns. */
#include "nntrainer/model_impl.h"

#include <string.h>

const char *nnt_bytes_str(size_t b, char *buf, size_t n) {
  if (b < 1024)
    snprintf(buf, n, "%zu B", b);
  else if (b < 1024 * 1024)
    snprintf(buf, n, "%.1f KiB", b / 1024.0);
  else
    snprintf(buf, n, "%.2f MiB", b / (1024.0 * 1024.0));
  return buf;
}

static void rule(FILE *out) {
  for (size_t i = 0; i < 100; i++)
    fputc('-', out);
  fputc('\n', out);
}

static void print_props(FILE *out, const nnt_layer *l) {
  for (size_t i = 0; i < l->n_props; i++)
    fprintf(out, "    %s = %s\n", l->prop_key[i], l->prop_val[i]);
}

/* Before compile: the layers as added. */
static void print_uncompiled(FILE *out, nnt_model *m, int verbosity) {
  fprintf(out, "%-34s %-16s\n", "layer", "type");
  rule(out);
  for (size_t i = 0; i < m->n_layers; i++) {
    fprintf(out, "%-34s %-16s\n", m->layers[i]->name, m->layers[i]->ops->type);
    if (verbosity >= 1)
      print_props(out, m->layers[i]);
  }
  rule(out);
  fprintf(out, "layers: %zu (not compiled)   batch: %u\n", m->n_layers, m->batch);
}

void nnt_model_print_summary(FILE *out, nnt_model *m, int verbosity) {
  if (!m->compiled) {
    print_uncompiled(out, m, verbosity);
    return;
  }
  char a[64], b[64];
  size_t total = 0, trainable = 0;
  fprintf(out, "%-34s %-16s %-18s %-18s %10s\n", "layer", "type", "input", "output",
          "params");
  rule(out);
  for (size_t i = 0; i < m->n_nodes; i++) {
    nnt_node *nd = &m->nodes[i];
    size_t params = 0;
    /* weights shared by several layers count once, at the layer where the
     * table holds them (which trains them if any sharer does) */
    int counts = nd->fc.n_w && m->w_node[nd->w_first] == i;
    for (unsigned w = 0; w < nd->fc.n_w; w++) {
      size_t n = nnt_dim_len(nd->fc.w[w].dim);
      params += n;
      if (counts && nd->fc.w[w].trainable && nd->layer->trainable)
        trainable += n;
    }
    if (counts)
      total += params;
    nnt_dim in = nd->fc.in_dim[0], o = nd->fc.out_dim[0];
    fprintf(out, "%-34s %-16s %-18s %-18s %10zu\n", nd->layer->name, nd->layer->ops->type,
            nnt_dim_str(in, a, sizeof a), nnt_dim_str(o, b, sizeof b), params);
    for (unsigned k = 1; k < nd->n_in; k++)
      fprintf(out, "%-34s %-16s %-18s\n", "", "", nnt_dim_str(nd->fc.in_dim[k], a, sizeof a));
    if (verbosity >= 1)
      print_props(out, nd->layer);
    for (unsigned w = 0; verbosity >= 2 && w < nd->fc.n_w; w++)
      fprintf(out, "    weight %-20s %s%s\n", nd->fc.w[w].name,
              nnt_dim_str(nd->fc.w[w].dim, a, sizeof a),
              nd->fc.w[w].trainable && nd->layer->trainable ? "" : " (not trained)");
  }
  rule(out);
  fprintf(out, "layers: %zu   parameters: %zu (trainable %zu, %s)   batch: %u\n", m->n_nodes,
          total, trainable, nnt_bytes_str(total * sizeof(float), a, sizeof a), m->batch);
}
