/* The non-finite checks of a training step ([Model] check_finite, on by
 * default). Per step they cost one test of the loss, one read of every
 * weight gradient and a copy of the moving statistics (a few floats per
 * batch-norm channel); per epoch, one read of the weights and optimizer
 * state before the checkpoint. Only when a value is not finite is more
 * done: the step is replayed layer by layer on the same batch to name
 * where it began.
 *
 * What they guarantee: no gradient that is not finite is applied or added
 * to the global norm, no moving statistic is left non-finite, training
 * stops at that step with NNT_ERR_RANGE and a message naming the layer
 * (and the weight), and no checkpoint with a value that is not finite is
 * written. The one case that reaches a weight in memory is an update of a
 * finite weight by a finite gradient that overflows float (a learning rate
 * far too large): it is caught at the next step, or before the epoch's
 * checkpoint when it was the epoch's last, naming the weight. */
#include "nntrainer/model_impl.h"
#include "nntrainer/tensor_host.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

/* The exponent of a float is all ones exactly for NaN and the infinities:
 * adding one to it carries into bit 31. One integer OR per value, which
 * the compiler vectorizes (a float reduction it may not reorder). */
static inline __attribute__((always_inline)) int scan_finite(const float *x, size_t n) {
  uint32_t acc = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &x[i], sizeof u);
    acc |= (u & 0x7f800000u) + 0x00800000u;
  }
  return !(acc & 0x80000000u);
}

/* On x86-64, the same loop compiled for AVX-512 and AVX2 too, the widest
 * taken that the CPU has (a test per call, no ifunc: an ifunc resolver runs before the
 * sanitizers' runtime is up). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx2"))) static int scan_finite_avx2(const float *x, size_t n) {
  return scan_finite(x, n);
}
__attribute__((target("avx512f"))) static int scan_finite_avx512(const float *x, size_t n) {
  return scan_finite(x, n);
}
#define NNT_HAVE_AVX2_SCAN 1
#endif

static int all_finite(const float *x, size_t n) {
#ifdef NNT_HAVE_AVX2_SCAN
  if (__builtin_cpu_supports("avx512f"))
    return scan_finite_avx512(x, n);
  if (__builtin_cpu_supports("avx2"))
    return scan_finite_avx2(x, n);
#endif
  return scan_finite(x, n);
}

/* The largest |x| of n values as its bits, in the same way: without the
 * sign bit the bits of finite floats order as their magnitudes do, and
 * those of NaN and the infinities lie above every finite one's. */
static inline __attribute__((always_inline)) uint32_t scan_max_abs(const float *x, size_t n) {
  uint32_t hi = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &x[i], sizeof u);
    u &= 0x7fffffffu;
    hi = u > hi ? u : hi;
  }
  return hi;
}

#ifdef NNT_HAVE_AVX2_SCAN
__attribute__((target("avx2"))) static uint32_t scan_max_abs_avx2(const float *x, size_t n) {
  return scan_max_abs(x, n);
}
__attribute__((target("avx512f"))) static uint32_t scan_max_abs_avx512(const float *x,
                                                                       size_t n) {
  return scan_max_abs(x, n);
}
#endif

int nnt_max_abs_finite(const float *x, size_t n, float *mx) {
  uint32_t hi;
#ifdef NNT_HAVE_AVX2_SCAN
  if (__builtin_cpu_supports("avx512f"))
    hi = scan_max_abs_avx512(x, n);
  else if (__builtin_cpu_supports("avx2"))
    hi = scan_max_abs_avx2(x, n);
  else
#endif
    hi = scan_max_abs(x, n);
  if (hi >= 0x7f800000u)
    return 0;
  memcpy(mx, &hi, sizeof *mx);
  return 1;
}

/* all_finite over the compute threads, one run of neighbouring values a
 * thread (nnt_kernels_parallel), for a tensor of at least two runs of
 * SCAN_PART values. A weight gradient split over the threads by rows (the
 * fully connected layer's, cpu_gemm.c) is then read where it was written:
 * read by the calling thread alone, half of it came from the other core's
 * cache each step, and went back when that core next wrote it: the
 * benchmark MLP at two threads, its cores sharing no cache, 1.44-1.50 ->
 * 1.23-1.28 ms a step (one thread: 1.04). */
#define SCAN_PART ((size_t)16384)

typedef struct scan_job {
  const float *x;
  atomic_int bad;
} scan_job;

static void scan_part(void *p, size_t b, size_t e) {
  scan_job *j = p;
  if (!all_finite(j->x + b, e - b))
    atomic_store_explicit(&j->bad, 1, memory_order_relaxed);
}

static int all_finite_threads(const float *x, size_t n) {
  if (n < 2 * SCAN_PART)
    return all_finite(x, n);
  scan_job j = {x, 0};
  nnt_kernels_parallel(nnt_kernels_cpu(), n, scan_part, &j);
  return !atomic_load_explicit(&j.bad, memory_order_relaxed);
}

size_t nnt_first_nonfinite(const float *x, size_t n) {
  if (all_finite_threads(x, n))
    return n;
  size_t i = 0;
  while (i < n && isfinite(x[i]))
    i++;
  return i;
}

const char *nnt_nonfinite_name(float v) {
  return isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf";
}

int nnt_check_prepare(nnt_model *m, nnt_err *e) {
  if (!m->state_copy) {
    size_t n = 0;
    for (size_t i = 0; i < m->n_w; i++)
      if (!m->wspec[i].trainable)
        n += nnt_dim_len(m->wspec[i].dim);
    m->state_copy = nnt_malloc((n ? n : 1) * sizeof(float));
    if (!m->state_copy)
      return nnt_err_set(e, NNT_ERR_NOMEM, "train: out of memory for a copy of %zu moving "
                         "statistics (check_finite)", n);
    m->state_floats = n;
  }
  return NNT_OK;
}

/* Through the buffer: a few floats per batch-norm channel, so staging
 * costs nothing worth a mapped view. */
int nnt_check_save_states(nnt_model *m, nnt_err *e) {
  float *p = m->state_copy;
  int rc = NNT_OK;
  for (size_t i = 0; !rc && i < m->n_w; i++)
    if (!m->wspec[i].trainable) {
      size_t n = nnt_dim_len(m->wspec[i].dim);
      rc = nnt_tensor_get(&m->w[i], 0, p, n, e);
      p += n;
    }
  return rc;
}

int nnt_check_restore_states(nnt_model *m, nnt_err *e) {
  const float *p = m->state_copy;
  int rc = NNT_OK;
  for (size_t i = 0; !rc && i < m->n_w; i++)
    if (!m->wspec[i].trainable) {
      size_t n = nnt_dim_len(m->wspec[i].dim);
      rc = nnt_tensor_set(&m->w[i], 0, p, n, e);
      p += n;
    }
  return rc;
}

/* Data of the batch: input or label stream s (b samples of len floats). */
static int check_stream(const char *what, unsigned s, const float *x, size_t b, size_t len,
                        float loss, nnt_err *e) {
  size_t k = nnt_first_nonfinite(x, b * len);
  if (k == b * len)
    return NNT_OK;
  return nnt_err_set(e, NNT_ERR_RANGE,
                     "the loss is %s: %s %u of the batch is not finite (%s in sample %zu of %zu)",
                     nnt_nonfinite_name(loss), what, s, nnt_nonfinite_name(x[k]), k / len, b);
}

/* Node nd's outputs all finite, else the error naming it. */
static int check_outputs(const nnt_model *m, const nnt_node *nd, float loss, nnt_err *e) {
  int rc = NNT_OK;
  for (unsigned o = 0; o < nd->fc.n_out && !rc; o++) {
    const nnt_tensor *t = &nd->out[o];
    size_t n = nnt_tensor_len(t), k;
    float v;
    if (!(rc = nnt_tensor_find_nonfinite(t, &k, &v, e)) && k < n)
      rc = nnt_err_set(e, NNT_ERR_RANGE,
                       "the loss is %s: layer '%s' (%s) is the first whose output is not "
                       "finite (%s in sample %zu of %u, output %u)",
                       nnt_nonfinite_name(loss), nd->layer->name, nd->layer->ops->type,
                       nnt_nonfinite_name(v), k / (n / m->batch), m->batch, o);
  }
  return rc;
}

/* Replay the forward pass on the batch again, checking every output as
 * soon as it is made (later layers may reuse or overwrite its memory). */
static int replay(nnt_model *m, nnt_dataset *ds, float loss, nnt_err *e) {
  nnt_mgr *g = &m->mgr[m->bound_mode];
  const float *in[NNT_DS_MAX_STREAMS], *label[NNT_DS_MAX_STREAMS];
  /* an update that overflowed in the previous step */
  int rc = nnt_check_weights(m, e);
  if (rc) {
    nnt_err_prefix(e, "the loss is %s: ", nnt_nonfinite_name(loss));
    return rc;
  }
  /* the batch is checked in the dataset's queue (host memory), then
   * written into the input tensors again */
  if (!ds || nnt_dataset_held_batch(ds, in, label, NULL))
    return nnt_err_set(e, NNT_ERR_RANGE, "the loss is %s", nnt_nonfinite_name(loss));
  for (unsigned i = 0; i < m->n_inputs && !rc; i++)
    rc = check_stream("input", i, in[i], m->batch, nnt_dim_feature_len(m->input_dim[i]), loss,
                      e);
  for (unsigned i = 0; i < m->n_labels && !rc; i++)
    rc = check_stream("label", i, label[i], m->batch, nnt_dim_feature_len(m->label_dim[i]),
                      loss, e);
  if (!rc)
    rc = nnt_model_set_batch(m, in, label, e);
  unsigned fwd_end = nnt_schedule_forward_end(m, (nnt_mode)m->bound_mode);
  for (unsigned st = 0; st < fwd_end && !rc; st++) {
    nnt_node *nd = &m->nodes[m->sched[m->bound_mode][st].node];
    nd->ctx.training = 1;
    /* the step's own stream: dropout draws the same mask again */
    nd->ctx.stream = nnt_run_stream(m->iter, m->sched[m->bound_mode][st].node);
    /* the step's own forward: a rerun or a delayed branch as in training */
    if ((rc = nnt_node_forward(m, nd))) {
      rc = nnt_err_set(e, rc, "the loss is %s: replaying it, [%s] %s: forward failed: %s",
                       nnt_nonfinite_name(loss), nd->layer->name, nd->layer->ops->type,
                       nnt_strerror(rc));
      break;
    }
    /* a delayed branch's outputs are made at its addition's step, first */
    int train = m->bound_mode == NNT_MODE_TRAIN;
    if (train && nd->delay) {
      const nnt_delay *d = &m->delays[nd->delay - 1];
      for (unsigned j = 0; j < d->n && !rc; j++)
        rc = check_outputs(m, &m->nodes[d->chain[j]], loss, e);
    }
    if (!rc && !(train && nd->delayed))
      rc = check_outputs(m, nd, loss, e);
    float lv = 0;
    if (!rc && nd->ctx.loss)
      rc = nnt_tensor_get(nd->ctx.loss, 0, &lv, 1, e);
    if (!rc && !isfinite(lv))
      rc = nnt_err_set(e, NNT_ERR_RANGE,
                       "the loss is %s: layer '%s' (%s) is the first whose loss value is not "
                       "finite",
                       nnt_nonfinite_name(loss), nd->layer->name, nd->layer->ops->type);
    nnt_mgr_poison_after(g, st);
  }
  int rs = nnt_check_restore_states(m, rc ? NULL : e);
  if (!rc && rs)
    rc = rs;
  if (!rc)
    rc = nnt_err_set(e, NNT_ERR_RANGE,
                     "the loss is %s, though a replay of the step on the same batch gave "
                     "finite values",
                     nnt_nonfinite_name(loss));
  return rc;
}

/* Per step: the moving statistics are a few floats per channel; the
 * gradients and (per epoch) the weights and optimizer state are read in
 * place through the mapped view when their buffer is host memory, staged
 * through nnt_tensor_get otherwise (tensor_host.h). */
int nnt_check_forward(nnt_model *m, nnt_dataset *ds, float loss, nnt_err *e) {
  int rc;
  if (isfinite(loss)) {
    for (size_t i = 0; i < m->n_w; i++) {
      if (m->wspec[i].trainable)
        continue;
      size_t n = nnt_dim_len(m->wspec[i].dim), k;
      float v;
      if ((rc = nnt_tensor_find_nonfinite(&m->w[i], &k, &v, e)))
        return rc;
      if (k == n)
        continue;
      if ((rc = nnt_check_restore_states(m, e)))
        return rc;
      return nnt_err_set(e, NNT_ERR_RANGE,
                         "the forward pass made weight '%s' of layer '%s' not finite (%s at "
                         "element %zu of %zu); it was put back",
                         m->wspec[i].name, m->nodes[m->w_node[i]].layer->name,
                         nnt_nonfinite_name(v), k, n);
    }
    return NNT_OK;
  }
  if ((rc = nnt_check_restore_states(m, e)))
    return rc;
  return replay(m, ds, loss, e);
}

int nnt_check_gradients(const nnt_node *nd, nnt_err *e) {
  for (unsigned w = 0; w < nd->fc.n_w; w++) {
    const nnt_tensor *gw = &nd->gw[w];
    if (!gw->data || nd->gtile[w]) /* blocks of rows: fused_update.c checks those */
      continue;
    size_t n = nnt_tensor_len(gw), k;
    float v;
    int rc = nnt_tensor_find_nonfinite(gw, &k, &v, e);
    if (rc)
      return rc;
    if (k < n)
      return nnt_err_set(e, NNT_ERR_RANGE,
                         "the gradient of weight '%s' of layer '%s' is not finite (%s at "
                         "element %zu of %zu); it was not applied",
                         nd->fc.w[w].name, nd->layer->name, nnt_nonfinite_name(v), k, n);
  }
  return NNT_OK;
}

int nnt_check_weights(const nnt_model *m, nnt_err *e) {
  for (unsigned s = 0; s <= m->opt_slots; s++)
    for (size_t i = 0; i < m->n_w; i++) {
      if (s && !nnt_model_weight_trains(m, i)) /* a frozen weight has no state */
        continue;
      nnt_tensor x = s ? nnt_model_state_tensor(m, s - 1, i) : m->w[i];
      size_t n = nnt_dim_len(m->wspec[i].dim), k;
      float v;
      int rc = nnt_tensor_find_nonfinite(&x, &k, &v, e);
      if (rc)
        return rc;
      if (k < n)
        return nnt_err_set(e, NNT_ERR_RANGE,
                           "%s '%s' of layer '%s' is not finite (%s at element %zu of %zu): "
                           "an update overflowed from a finite gradient (learning rate too "
                           "large?)",
                           s ? "the optimizer state of weight" : "weight", m->wspec[i].name,
                           m->nodes[m->w_node[i]].layer->name, nnt_nonfinite_name(v), k, n);
    }
  return NNT_OK;
}

/* ---- the checks on a backend with steps ---- */

int nnt_check_on_device(const nnt_model *m) {
  return m->check_finite && m->be && m->be->step_begin &&
         (!m->state_buft || m->state_buft == m->be->buft);
}

static size_t dev_flags(const nnt_model *m) { return 2 + m->n_w; }

/* floats [first, first + n) of the check buffer */
static nnt_tensor check_tensor(const nnt_model *m, size_t first, size_t n) {
  nnt_tensor t;
  memset(&t, 0, sizeof t);
  t.dim = nnt_dim_make(1, 1, 1, (unsigned)n);
  t.data = nnt_buffer_at(m->cbuf, first * sizeof(float));
  t.buf = m->cbuf;
  return t;
}

static float *flag_at(const nnt_model *m, size_t i) {
  return nnt_buffer_at(m->cbuf, i * sizeof(float));
}

int nnt_check_dev_prepare(nnt_model *m, nnt_err *e) {
  int rc = nnt_check_prepare(m, e);
  if (rc || m->cbuf)
    return rc;
  size_t nf = dev_flags(m);
  if (!(m->chost = nnt_calloc(nf, sizeof(float))))
    return nnt_err_set(e, NNT_ERR_NOMEM, "train: out of memory for %zu check flags", nf);
  return nnt_buffer_alloc(m->be->buft, (nf + m->state_floats) * sizeof(float),
                          "the non-finite check's flags (check_finite)", &m->cbuf, e);
}

int nnt_check_dev_begin(nnt_model *m, nnt_err *e) {
  size_t nf = dev_flags(m);
  int rc;
  nnt_tensor f = check_tensor(m, 0, nf);
  if ((rc = nnt_tensor_memset(&f, 0, e)))
    return rc;
  size_t at = nf;
  for (size_t i = 0; i < m->n_w; i++)
    if (!m->wspec[i].trainable) {
      size_t n = nnt_dim_len(m->wspec[i].dim);
      if ((rc = m->k->copy(m->k, n, m->w[i].data, flag_at(m, at))))
        return nnt_err_set(e, rc, "train: copying the moving statistics aside failed: %s",
                           nnt_strerror(rc));
      at += n;
    }
  m->skip = flag_at(m, 0);
  return NNT_OK;
}

int nnt_check_dev_forward(nnt_model *m, nnt_err *e) {
  int rc = NNT_OK;
  for (size_t i = 0; i < m->n_nodes && !rc; i++)
    if (m->nodes[i].ctx.loss)
      rc = m->k->flag_nonfinite(m->k, 1, m->nodes[i].ctx.loss->data, flag_at(m, 1),
                                flag_at(m, 0));
  for (size_t i = 0; i < m->n_w && !rc; i++)
    if (!m->wspec[i].trainable)
      rc = m->k->flag_nonfinite(m->k, nnt_dim_len(m->wspec[i].dim), m->w[i].data,
                                flag_at(m, 1), flag_at(m, 0));
  return rc ? nnt_err_set(e, rc, "train: the non-finite check of the forward pass failed: %s",
                          nnt_strerror(rc))
            : NNT_OK;
}

int nnt_check_dev_gradients(nnt_model *m, const nnt_node *nd, nnt_err *e) {
  for (unsigned w = 0; w < nd->fc.n_w; w++) {
    const nnt_tensor *gw = &nd->gw[w];
    if (!gw->data)
      continue;
    int rc = m->k->flag_nonfinite(m->k, nnt_tensor_len(gw), gw->data,
                                  flag_at(m, 2 + nd->w_first + w), flag_at(m, 0));
    if (rc)
      return nnt_err_set(e, rc, "[%s] the non-finite check of its gradients failed: %s",
                         nd->layer->name, nnt_strerror(rc));
  }
  return NNT_OK;
}

int nnt_check_dev_end(nnt_model *m, nnt_err *e) {
  nnt_tensor f = check_tensor(m, 0, dev_flags(m));
  return nnt_tensor_get_later(&f, 0, m->chost, dev_flags(m), e);
}

int nnt_check_dev_verdict(nnt_model *m, nnt_dataset *ds, float loss, nnt_err *e) {
  m->skip = NULL;
  if (!m->chost[0] && isfinite(loss))
    return NNT_OK;
  /* the moving statistics from before the step, where the host checks
   * keep them: the host's verdict follows (put back, replay, message) */
  nnt_tensor bk = check_tensor(m, dev_flags(m), m->state_floats);
  int rc = m->state_floats ? nnt_tensor_get(&bk, 0, m->state_copy, m->state_floats, e) : NNT_OK;
  if (rc)
    return rc;
  if ((m->chost[1] || !isfinite(loss)) && (rc = nnt_check_forward(m, ds, loss, e)))
    return rc;
  /* a gradient: the first in the order backward ran */
  const nnt_step *st = m->sched[m->bound_mode];
  for (unsigned s = 0; s < m->n_steps[m->bound_mode]; s++) {
    if (st[s].kind != NNT_STEP_CALC_GRADIENT || st[s].node >= m->n_nodes)
      continue;
    const nnt_node *nd = &m->nodes[st[s].node];
    for (unsigned w = 0; nd->do_grad && w < nd->fc.n_w; w++)
      if (nd->gw[w].data && m->chost[2 + nd->w_first + w])
        return nnt_err_set(e, NNT_ERR_RANGE,
                           "the gradient of weight '%s' of layer '%s' is not finite; it was "
                           "not applied, nor any update after it in the step",
                           nd->fc.w[w].name, nd->layer->name);
  }
  return nnt_err_set(e, NNT_ERR_RANGE, "a value of the step was not finite; no update after "
                     "it was applied");
}
