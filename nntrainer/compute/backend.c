/* The backend registry (engine names to backends), buffers and tensor
 * access from the host's side, and the CPU backend: host memory aligned
 * for SIMD, OpenBLAS and loops (cpu_kernels.c). */
#include "nntrainer/compute/backend.h"
#include "nntrainer/compute/cpu_impl.h"

#include <stdatomic.h>
#include <string.h>

#ifdef NNT_HAVE_VULKAN
#include "nntrainer/vulkan/vk.h"
#endif

static const char *const kop_names[] = {
#define NNT_KOP_NAME(E, n) #n,
    NNT_KOP_LIST(NNT_KOP_NAME)
#undef NNT_KOP_NAME
};

const char *nnt_kop_name(nnt_kop op) {
  return (unsigned)op < NNT_KOP__COUNT ? kop_names[op] : "?";
}

static const char *const engine_names[] = {"cpu", "gpu", "qnn"};

int nnt_engine_from_name(const char *name, nnt_engine *out) {
  for (unsigned i = 0; i < NNT_ARRAY_LEN(engine_names); i++)
    if (nnt_streq(name, engine_names[i])) {
      *out = (nnt_engine)i;
      return NNT_OK;
    }
  return NNT_ERR_INVAL;
}

const char *nnt_engine_name(nnt_engine en) {
  return (unsigned)en < NNT_ARRAY_LEN(engine_names) ? engine_names[en] : "?";
}

/* ---- host buffers ---- */

#define HOST_ALIGN 64

/* Bytes of live host buffers, for the CPU backend's memory entry. The host
 * buffer type and the CPU backend are one static instance for the whole
 * process, so this is process-wide accounting (every model's host buffers
 * together), kept atomic as buffers come and go on any thread. */
static atomic_size_t host_live_bytes;

static int host_alloc(const nnt_buffer_type *t, size_t size, const char *what, nnt_buffer **out,
                      nnt_err *e) {
  nnt_buffer *b = nnt_calloc(1, sizeof *b);
  char *mem = b && size <= NNT_BYTES_MAX ? nnt_aligned_alloc(HOST_ALIGN, size) : NULL;
  if (!mem) {
    nnt_free(b);
    return nnt_err_set(e, NNT_ERR_NOMEM, "cannot allocate %s (%zu bytes)", what, size);
  }
  memset(mem, 0, size);
  atomic_fetch_add(&host_live_bytes, size);
  b->type = t;
  b->size = size;
  b->ctx = mem;
  b->base = mem;
  *out = b;
  return NNT_OK;
}

static void host_free(nnt_buffer *b) {
  atomic_fetch_sub(&host_live_bytes, b->size);
  nnt_free(b->ctx);
  nnt_free(b);
}

static size_t host_alignment(const nnt_buffer_type *t) {
  (void)t;
  return HOST_ALIGN;
}

static size_t host_max_size(const nnt_buffer_type *t) {
  (void)t;
  return NNT_BYTES_MAX;
}

static int host_is_host(const nnt_buffer_type *t) {
  (void)t;
  return 1;
}

static char *host_base(const nnt_buffer *b) { return b->ctx; }

static int host_set(nnt_buffer *b, size_t off, const void *src, size_t n, nnt_err *e) {
  (void)e;
  if (n)
    memmove((char *)b->ctx + off, src, n);
  return NNT_OK;
}

static int host_get(const nnt_buffer *b, size_t off, void *dst, size_t n, nnt_err *e) {
  (void)e;
  if (n)
    memmove(dst, (const char *)b->ctx + off, n);
  return NNT_OK;
}

static int host_memset(nnt_buffer *b, size_t off, int v, size_t n, nnt_err *e) {
  (void)e;
  if (n)
    memset((char *)b->ctx + off, v, n);
  return NNT_OK;
}

static const nnt_buffer_type host_type = {
    .name = "host",
    .alloc = host_alloc,
    .free = host_free,
    .alignment = host_alignment,
    .max_size = host_max_size,
    .is_host = host_is_host,
    .base = host_base,
    .set = host_set,
    .get = host_get,
    .memset = host_memset,
};

const nnt_buffer_type *nnt_buffer_type_host(void) { return &host_type; }

/* ---- the CPU backend ---- */

static int cpu_synchronize(nnt_backend *be, nnt_err *e) {
  (void)be, (void)e; /* every op has finished when it returns */
  return NNT_OK;
}

static int cpu_supports(const nnt_backend *be, nnt_kop op) {
  (void)be;
  return (unsigned)op < NNT_KOP__COUNT;
}

static void cpu_memory(const nnt_backend *be, nnt_mem_usage *out) {
  (void)be;
  out->device = 0;
  out->host = atomic_load(&host_live_bytes);
}

/* Never written: a backend without state is one instance for everyone. */
static nnt_backend cpu_backend = {
    .name = "cpu",
    .buft = &host_type,
    .k = &nnt_cpu_kernel_table,
    .synchronize = cpu_synchronize,
    .supports = cpu_supports,
    .memory = cpu_memory,
};

nnt_backend *nnt_backend_cpu(void) { return &cpu_backend; }

int nnt_backend_get(nnt_engine en, nnt_backend **out, nnt_err *e) {
  return nnt_backend_get_on(en, NULL, out, e);
}

int nnt_backend_get_on(nnt_engine en, const char *device, nnt_backend **out, nnt_err *e) {
  switch (en) {
  case NNT_ENGINE_CPU:
    *out = nnt_backend_cpu();
    return NNT_OK;
  case NNT_ENGINE_GPU:
#ifdef NNT_HAVE_VULKAN
    return nnt_backend_vulkan_on(out, device, e);
#else
    (void)device;
    return nnt_err_set(e, NNT_ERR_NOT_SUPPORTED,
                       "engine 'gpu': this build has no GPU backend (built without Vulkan: "
                       "NNT_VULKAN=OFF); only 'cpu'");
#endif
  case NNT_ENGINE_QNN:
    return nnt_err_set(e, NNT_ERR_NOT_SUPPORTED,
                       "engine 'qnn': this build has no QNN backend (only 'cpu')");
  }
  return nnt_err_set(e, NNT_ERR_INVAL, "engine %d: unknown", (int)en);
}

void nnt_backend_free(nnt_backend *be) {
  if (be && be->free)
    be->free(be);
}

void nnt_backend_memory(const nnt_backend *be, nnt_mem_usage *out) {
  *out = (nnt_mem_usage){0, 0};
  if (be && be->memory)
    be->memory(be, out);
}

/* ---- buffers and tensors from the host's side ---- */

size_t nnt_buffer_type_chunk(const nnt_buffer_type *t) {
  return t && t->chunk ? t->chunk(t) : 0;
}

int nnt_buffer_alloc(const nnt_buffer_type *t, size_t size, const char *what, nnt_buffer **out,
                     nnt_err *e) {
  *out = NULL;
  if (size > t->max_size(t))
    return nnt_err_set(e, NNT_ERR_NOMEM, "cannot allocate %s: %zu bytes, more than the %zu one "
                       "buffer of '%s' may hold", what, size, t->max_size(t), t->name);
  int rc = t->alloc(t, size, what, out, e);
  if (!rc)
    (*out)->base = t->base(*out);
  return rc;
}

void nnt_buffer_free(nnt_buffer *b) {
  if (b)
    b->type->free(b);
}

void *nnt_buffer_host(const nnt_buffer *b, size_t off) {
  return b && b->type->is_host(b->type) ? b->base + off : NULL;
}

/* The byte range of floats [elem_off, elem_off + n) of t in its buffer.
 * A tensor with data and no buffer is host memory the caller lent (a model
 * input bound to the batch, nnt_mgr_lend): its callers read and write it
 * directly (off unused). */
static int tensor_range(const nnt_tensor *t, size_t elem_off, size_t n, const char *what,
                        size_t *off, nnt_err *e) {
  size_t len = nnt_tensor_len(t);
  if (!t->data)
    return nnt_err_set(e, NNT_ERR_INVAL, "%s: the tensor has no memory", what);
  if (elem_off > len || n > len - elem_off)
    return nnt_err_set(e, NNT_ERR_INVAL, "%s: floats [%zu, %zu) are outside the tensor of %zu",
                       what, elem_off, elem_off + n, len);
  *off = t->buf ? (size_t)((char *)t->data - t->buf->base) + elem_off * sizeof(float) : 0;
  return NNT_OK;
}

int nnt_tensor_set(const nnt_tensor *t, size_t elem_off, const float *src, size_t n,
                   nnt_err *e) {
  size_t off = 0;
  int rc = tensor_range(t, elem_off, n, "tensor set", &off, e);
  if (rc || t->buf)
    return rc ? rc : t->buf->type->set(t->buf, off, src, n * sizeof(float), e);
  if (n)
    memcpy(t->data + elem_off, src, n * sizeof(float));
  return NNT_OK;
}

int nnt_tensor_get(const nnt_tensor *t, size_t elem_off, float *dst, size_t n, nnt_err *e) {
  size_t off = 0;
  int rc = tensor_range(t, elem_off, n, "tensor get", &off, e);
  if (rc || t->buf)
    return rc ? rc : t->buf->type->get(t->buf, off, dst, n * sizeof(float), e);
  if (n)
    memcpy(dst, t->data + elem_off, n * sizeof(float));
  return NNT_OK;
}

int nnt_tensor_get_later(const nnt_tensor *t, size_t elem_off, float *dst, size_t n,
                         nnt_err *e) {
  size_t off = 0;
  int rc = tensor_range(t, elem_off, n, "tensor get", &off, e);
  if (rc || !t->buf)
    return rc ? rc : nnt_tensor_get(t, elem_off, dst, n, e);
  const nnt_buffer_type *bt = t->buf->type;
  return (bt->get_later ? bt->get_later : bt->get)(t->buf, off, dst, n * sizeof(float), e);
}

int nnt_backend_step_begin(nnt_backend *be, uint64_t key, nnt_err *e) {
  return be && be->step_begin ? be->step_begin(be, key, e) : NNT_OK;
}

int nnt_backend_step_end(nnt_backend *be, nnt_err *e) {
  return be && be->step_end ? be->step_end(be, e) : NNT_OK;
}

int nnt_tensor_memset(const nnt_tensor *t, int v, nnt_err *e) {
  size_t off = 0, n = nnt_tensor_len(t);
  int rc = tensor_range(t, 0, n, "tensor memset", &off, e);
  if (rc || t->buf)
    return rc ? rc : t->buf->type->memset(t->buf, off, v, n * sizeof(float), e);
  if (n)
    memset(t->data, v, n * sizeof(float));
  return NNT_OK;
}

float *nnt_tensor_host(const nnt_tensor *t) {
  if (!t->buf) /* lent host memory, or none */
    return t->data;
  return t->data && t->buf->type->is_host(t->buf->type) ? t->data : NULL;
}
