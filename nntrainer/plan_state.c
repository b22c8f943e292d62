/* Where the persistent tensors go: the weights (allocated at initialize)
 * and the optimizer state (slots of the trained weights, packed in save
 * order, allocated at the first training step), each a plan of its own in
 * the model's state buffer type. */
#include "nntrainer/model_impl.h"

#include <stdio.h>
#include <string.h>

/* Whether weight i has optimizer state: it has a gradient (the node that
 * holds its sum trains it), as NNTrainer saves Adam's moments. */
int nnt_model_weight_trains(const nnt_model *m, size_t i) {
  return m->nodes[m->w_node[i]].do_grad && m->wspec[i].trainable;
}

/* One slot of optimizer state: the weights that train, packed in save
 * order; with a chunk, a tensor that would cross one starts the next.
 * off (may be NULL) receives each weight's offset in bytes, SIZE_MAX for
 * a weight without state. Returns the slot's bytes. */
static size_t slot_layout(const nnt_model *m, size_t *off) {
  size_t at = 0, c = m->wmgr.chunk;
  for (size_t i = 0; i < m->n_w; i++) {
    if (!nnt_model_weight_trains(m, i)) {
      if (off)
        off[i] = SIZE_MAX;
      continue;
    }
    size_t b = nnt_dim_len(m->wspec[i].dim) * sizeof(float);
    if (c && b <= c && at / c != (at + b - 1) / c)
      at = (at + c - 1) / c * c;
    if (off)
      off[i] = at;
    at += b; /* fits: compile checked the weights' total */
  }
  return at;
}

static size_t stride_of(const nnt_model *m, size_t bytes, unsigned slots) {
  size_t c = m->wmgr.chunk;
  if (c && slots > 1 && bytes > c / slots) /* the slots do not share one chunk */
    bytes = (bytes + c - 1) / c * c;
  return bytes / sizeof(float);
}

size_t nnt_model_opt_stride(const nnt_model *m, unsigned slots) {
  return stride_of(m, slot_layout(m, NULL), slots);
}

size_t nnt_model_opt_bytes(const nnt_model *m, unsigned slots) {
  if (!slots)
    return 0;
  size_t last = slot_layout(m, NULL);
  return (slots - 1) * stride_of(m, last, slots) * sizeof(float) + last;
}

/* slot s of weight i at s * stride + off[i]: request s * n + k for the
 * k-th weight that trains, n of them */
static int place_slots(nnt_model *m, unsigned slots, nnt_mgr *g, size_t slot_bytes,
                       const size_t *woff, nnt_err *e) {
  size_t *off = nnt_malloc((g->n + 1) * sizeof *off);
  if (!off)
    return nnt_err_set(e, NNT_ERR_NOMEM, "manager: out of memory placing the optimizer state");
  size_t stride = stride_of(m, slot_bytes, slots) * sizeof(float), r = 0;
  for (unsigned s = 0; s < slots; s++)
    for (size_t i = 0; i < m->n_w; i++)
      if (woff[i] != SIZE_MAX)
        off[r++] = s * stride + woff[i];
  int rc = nnt_mgr_place(g, off, nnt_model_opt_bytes(m, slots), e);
  nnt_free(off);
  return rc;
}

/* slots = 0: the weights; otherwise that many values per weight that
 * trains, and m->opt_off (each weight's offset in a slot, in floats;
 * SIZE_MAX for a weight without state) and m->opt_stride. */
static int plan_persistent(nnt_model *m, unsigned slots, nnt_mgr *g, nnt_err *e) {
  nnt_mgr_init(g);
  nnt_mgr_set_buffer_type(g, nnt_model_state_buft(m));
  nnt_mgr_set_align(g, sizeof(float));
  nnt_tkind kind = slots ? NNT_TK_OPT_STATE : NNT_TK_WEIGHT;
  size_t *woff = NULL, slot_bytes = 0;
  if (slots) {
    woff = nnt_malloc((m->n_w + 1) * sizeof *woff);
    if (!woff)
      return nnt_err_set(e, NNT_ERR_NOMEM, "manager: out of memory planning the optimizer state");
    slot_bytes = slot_layout(m, woff);
  }
  int rc = NNT_OK;
  for (unsigned s = 0; s < (slots ? slots : 1) && !rc; s++)
    for (size_t i = 0; i < m->n_w && !rc; i++) {
      char name[NNT_NAME_MAX + 64];
      if (slots && woff[i] == SIZE_MAX)
        continue;
      if (slots)
        snprintf(name, sizeof name, "%s:%.40s:state%u", m->nodes[m->w_node[i]].layer->name,
                 m->wspec[i].name, s);
      else
        snprintf(name, sizeof name, "%s:%.40s", m->nodes[m->w_node[i]].layer->name,
                 m->wspec[i].name);
      int id = nnt_mgr_request(g, name, kind, m->wspec[i].dim, 0, 0);
      if (id < 0)
        rc = nnt_err_set(e, id, "manager: cannot request '%s': %s", name, nnt_strerror(id));
    }
  if (!rc && slots)
    rc = place_slots(m, slots, g, slot_bytes, woff, e);
  else if (!rc)
    rc = nnt_mgr_plan(g, NNT_PLANNER_BASIC, 0, e);
  if (!rc)
    rc = nnt_mgr_alloc(g, slots ? "optimizer state" : "weights", e);
  if (!rc && slots) {
    /* the table is the same for every plan of this compiled model */
    for (size_t i = 0; i < m->n_w; i++)
      woff[i] = woff[i] == SIZE_MAX ? SIZE_MAX : woff[i] / sizeof(float);
    nnt_free(m->opt_off);
    m->opt_off = woff;
    woff = NULL;
  }
  nnt_free(woff);
  if (rc)
    nnt_mgr_free(g);
  return rc;
}

int nnt_model_plan_weights(nnt_model *m, nnt_mgr *g, nnt_err *e) {
  return plan_persistent(m, 0, g, e);
}

int nnt_model_plan_opt_state(nnt_model *m, unsigned slots, nnt_mgr *g, nnt_err *e) {
  if (!slots) {
    nnt_mgr_init(g);
    return NNT_OK;
  }
  return plan_persistent(m, slots, g, e);
}
