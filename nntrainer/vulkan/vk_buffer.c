/* The Vulkan backend's memory and the backend itself: device buffers made
 * of chunks (device-local VkBuffers no larger than a binding may reach),
 * with opaque base addresses (instance tag and slot, vk_impl.h; never a
 * host pointer), the registry that maps an address back to its chunk,
 * set/get through staging recorded with the ops (vk_record.c), memset
 * through vkCmdFillBuffer, the step hooks, and nnt_backend_vulkan (a new
 * instance per call, closed when its handle and its last buffer are
 * released). */
#include "nntrainer/vulkan/vk_impl.h"

#include <stdio.h>
#include <string.h>

/* The context with a reference more, under the lock. */
static void ctx_ref(vk_ctx *c) { c->refs++; }

/* Under the lock; 1 when it closed c (and released the lock). */
static int ctx_unref(vk_ctx *c) {
  if (--c->refs == 0) {
    nnt_vk_flush(c, NULL);
    pthread_mutex_unlock(&c->lock);
    nnt_vk_close(c);
    return 1;
  }
  return 0;
}

/* ---- the buffer type ---- */

static size_t vk_alignment(const nnt_buffer_type *t) {
  vk_ctx *c = t->ctx;
  size_t a = c ? (size_t)c->props.limits.minStorageBufferOffsetAlignment : 64;
  return a > 64 ? a : 64;
}

/* A buffer is as large as its address span (device memory permitting):
 * its chunks are separate VkBuffers. */
static size_t vk_max_size(const nnt_buffer_type *t) {
  uint64_t m = VK_ADDR_SPAN - 64;
  (void)t;
  return m > SIZE_MAX ? SIZE_MAX : (size_t)m;
}

/* No tensor crosses a chunk (the planner's side of the split). */
static size_t vk_chunk(const nnt_buffer_type *t) {
  const vk_ctx *c = t->ctx;
  return c ? c->chunk : 0;
}

static int vk_is_host(const nnt_buffer_type *t) {
  (void)t;
  return 0;
}

static uint64_t addr_of(const vk_ctx *c, uint32_t slot) {
  return VK_ADDR_BASE | (c->tag << (VK_OFF_BITS + VK_SLOT_BITS)) |
         ((uint64_t)slot << VK_OFF_BITS);
}

static char *vk_base(const nnt_buffer *b) {
  const vk_pool *p = b->ctx;
  return (char *)(uintptr_t)addr_of(b->type->ctx, p->slot);
}

static void pool_destroy(vk_ctx *c, vk_pool *p) {
  for (size_t i = 0; p && i < p->n_chunks; i++) {
    if (p->chunks[i].buf)
      c->dev_bytes -= p->chunks[i].size;
    nnt_vk_buf_destroy(c, &p->chunks[i]);
  }
  if (p)
    nnt_free(p->chunks);
  nnt_free(p);
}

static int vk_alloc(const nnt_buffer_type *t, size_t size, const char *what, nnt_buffer **out,
                    nnt_err *e) {
  vk_ctx *c = t->ctx;
  if (!c)
    return nnt_err_set(e, NNT_ERR_INVAL, "cannot allocate %s: the Vulkan device is not open",
                       what);
  pthread_mutex_lock(&c->lock);
  nnt_buffer *b = nnt_calloc(1, sizeof *b);
  vk_pool *p = b ? nnt_calloc(1, sizeof *p) : NULL;
  int rc = NNT_OK;
  uint32_t slot = 1;
  while (slot <= VK_MAX_SLOTS && c->live[slot])
    slot++;
  if (p) {
    p->size = size;
    p->chunk = c->chunk;
    p->n_chunks = size ? (size + c->chunk - 1) / c->chunk : 1;
    p->chunks = nnt_calloc(p->n_chunks, sizeof *p->chunks);
  }
  if (!p || !p->chunks) {
    rc = nnt_err_set(e, NNT_ERR_NOMEM, "cannot allocate %s (%zu bytes)", what, size);
    goto out;
  }
  if (slot > VK_MAX_SLOTS) {
    rc = nnt_err_set(e, NNT_ERR_NOMEM, "cannot allocate %s: the Vulkan device '%s' holds %u "
                     "buffers already", what, c->props.deviceName, VK_MAX_SLOTS);
    goto out;
  }
  for (size_t i = 0; i < p->n_chunks && !rc; i++) {
    size_t len = i + 1 < p->n_chunks ? p->chunk : size - i * p->chunk;
    if (nnt_vk_buf_create(c, len ? len : 4, 0,
                          VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                              VK_BUFFER_USAGE_TRANSFER_DST_BIT, &p->chunks[i]))
      rc = nnt_err_set(e, NNT_ERR_NOMEM, "cannot allocate %s (%zu bytes) on the Vulkan device "
                       "'%s'", what, size, c->props.deviceName);
    else
      c->dev_bytes += p->chunks[i].size;
  }
  if (rc)
    goto out;
  /* zeroed, as alloc promises */
  vk_buf *chunks[64];
  for (size_t i = 0; i < p->n_chunks && !rc; i += 64) {
    size_t m = p->n_chunks - i < 64 ? p->n_chunks - i : 64;
    for (size_t j = 0; j < m; j++)
      chunks[j] = &p->chunks[i + j];
    rc = nnt_vk_fill_now(c, chunks, m, e);
  }
  if (rc) {
    nnt_err_prefix(e, "cannot allocate %s: ", what);
    goto out;
  }
  p->slot = slot;
  c->live[slot] = p;
  b->type = t;
  b->size = size;
  b->ctx = p;
  ctx_ref(c);
  *out = b;
  b = NULL, p = NULL;
out:
  pool_destroy(c, p);
  nnt_free(b);
  pthread_mutex_unlock(&c->lock);
  return rc;
}

static void vk_free(nnt_buffer *b) {
  vk_ctx *c = b->type->ctx;
  pthread_mutex_lock(&c->lock);
  vk_pool *p = b->ctx;
  /* pending commands may use it; recordings and descriptor sets name it */
  nnt_vk_forget_buffers(c, NULL);
  c->live[p->slot] = NULL;
  pool_destroy(c, p);
  nnt_free(b);
  if (!ctx_unref(c))
    pthread_mutex_unlock(&c->lock);
}

vk_buf *nnt_vk_resolve(vk_ctx *c, const void *ptr, uint32_t *elem, VkDeviceSize *room) {
  uint64_t a = (uint64_t)(uintptr_t)ptr;
  if ((a & ~(((uint64_t)1 << (VK_OFF_BITS + VK_SLOT_BITS)) - 1)) != addr_of(c, 0))
    return NULL; /* another instance's, or not a device address */
  uint64_t slot = (a >> VK_OFF_BITS) & VK_MAX_SLOTS, off = a & (VK_ADDR_SPAN - 1);
  vk_pool *p = slot ? c->live[slot] : NULL;
  if (!p || off > p->size || off % 4)
    return NULL;
  size_t k = (size_t)(off / p->chunk);
  if (k == p->n_chunks) /* the end of the buffer */
    k--;
  VkDeviceSize in = off - (VkDeviceSize)k * p->chunk;
  if (in / 4 > UINT32_MAX)
    return NULL;
  *elem = (uint32_t)(in / 4);
  *room = p->chunks[k].size - in;
  if (k + 1 == p->n_chunks && p->size - off < *room)
    *room = p->size - off;
  return &p->chunks[k];
}

static int check_range(const nnt_buffer *b, size_t off, size_t n, nnt_err *e) {
  if (off > b->size || n > b->size - off)
    return nnt_err_set(e, NNT_ERR_INVAL, "Vulkan buffer: bytes [%zu, %zu) outside its %zu", off,
                       off + n, b->size);
  return NNT_OK;
}

/* The pieces of [off, off + n) in b's chunks: op(chunk, offset in it,
 * length, host pointer) for each. */
typedef int (*piece_fn)(vk_ctx *c, vk_buf *v, VkDeviceSize off, VkDeviceSize n, void *host,
                        uint32_t word);

static int pieces(vk_ctx *c, const nnt_buffer *b, size_t off, size_t n, void *host,
                  uint32_t word, piece_fn fn) {
  const vk_pool *p = b->ctx;
  int rc = NNT_OK;
  while (n && !rc) {
    size_t k = off / p->chunk, in = off - k * p->chunk;
    size_t len = p->chunk - in < n ? p->chunk - in : n;
    rc = fn(c, &p->chunks[k], in, len, host, word);
    off += len, n -= len;
    if (host)
      host = (char *)host + len;
  }
  return rc;
}

static int piece_in(vk_ctx *c, vk_buf *v, VkDeviceSize off, VkDeviceSize n, void *host,
                    uint32_t word) {
  (void)word;
  return nnt_vk_record_copy_in(c, v, off, host, n);
}
static int piece_out(vk_ctx *c, vk_buf *v, VkDeviceSize off, VkDeviceSize n, void *host,
                     uint32_t word) {
  (void)word;
  return nnt_vk_record_copy_out(c, v, off, host, n);
}
static int piece_fill(vk_ctx *c, vk_buf *v, VkDeviceSize off, VkDeviceSize n, void *host,
                      uint32_t word) {
  (void)host;
  return nnt_vk_record_fill(c, v, off, n, word);
}

static int op_failed(vk_ctx *c, int rc, const char *what, nnt_err *e) {
  if (c->failed)
    return nnt_err_set(e, NNT_ERR_UNKNOWN, "engine 'gpu': %s: %s", what, c->fail_msg);
  return nnt_err_set(e, rc, "engine 'gpu': %s failed: %s", what, nnt_strerror(rc));
}

/* The bytes land in host memory in order with the ops: set stages them
 * (no wait), get waits for them, get_later has them when the current step
 * ends (at once outside a step). */
static int vk_set(nnt_buffer *b, size_t off, const void *src, size_t n, nnt_err *e) {
  int rc = check_range(b, off, n, e);
  if (rc || !n)
    return rc;
  vk_ctx *c = b->type->ctx;
  pthread_mutex_lock(&c->lock);
  if ((rc = pieces(c, b, off, n, (void *)src, 0, piece_in)))
    rc = op_failed(c, rc, "writing a buffer", e);
  pthread_mutex_unlock(&c->lock);
  return rc;
}

static int get_common(const nnt_buffer *b, size_t off, void *dst, size_t n, int later,
                      nnt_err *e) {
  int rc = check_range(b, off, n, e);
  if (rc || !n)
    return rc;
  vk_ctx *c = b->type->ctx;
  pthread_mutex_lock(&c->lock);
  if ((rc = pieces(c, b, off, n, dst, 0, piece_out)))
    rc = op_failed(c, rc, "reading a buffer", e);
  else if (!later || !c->in_step)
    rc = nnt_vk_flush(c, e);
  pthread_mutex_unlock(&c->lock);
  return rc;
}

static int vk_get(const nnt_buffer *b, size_t off, void *dst, size_t n, nnt_err *e) {
  return get_common(b, off, dst, n, 0, e);
}

static int vk_get_later(const nnt_buffer *b, size_t off, void *dst, size_t n, nnt_err *e) {
  return get_common(b, off, dst, n, 1, e);
}

static int vk_memset(nnt_buffer *b, size_t off, int val, size_t n, nnt_err *e) {
  int rc = check_range(b, off, n, e);
  if (rc || !n)
    return rc;
  unsigned char u = (unsigned char)val;
  if (off % 4 || n % 4) { /* not whole words: through the host */
    unsigned char *tmp = nnt_malloc(n);
    if (!tmp)
      return nnt_err_set(e, NNT_ERR_NOMEM, "Vulkan memset: no memory for %zu bytes", n);
    memset(tmp, u, n);
    rc = vk_set(b, off, tmp, n, e);
    nnt_free(tmp);
    return rc;
  }
  vk_ctx *c = b->type->ctx;
  pthread_mutex_lock(&c->lock);
  if ((rc = pieces(c, b, off, n, NULL, u * 0x01010101u, piece_fill)))
    rc = op_failed(c, rc, "filling a buffer", e);
  pthread_mutex_unlock(&c->lock);
  return rc;
}

static const nnt_buffer_type vk_type = {
    .name = "vulkan",
    .alloc = vk_alloc,
    .free = vk_free,
    .alignment = vk_alignment,
    .max_size = vk_max_size,
    .is_host = vk_is_host,
    .base = vk_base,
    .set = vk_set,
    .get = vk_get,
    .memset = vk_memset,
    .get_later = vk_get_later,
    .chunk = vk_chunk,
};

void nnt_vk_buffer_type_init(vk_ctx *c) {
  c->buft = vk_type;
  c->buft.ctx = c;
}

/* ---- the backend ---- */

static int vk_step_begin(nnt_backend *be, uint64_t key, nnt_err *e) {
  vk_ctx *c = be->ctx;
  pthread_mutex_lock(&c->lock);
  int rc = nnt_vk_step_begin(c, key, e);
  pthread_mutex_unlock(&c->lock);
  return rc;
}

static int vk_step_end(nnt_backend *be, nnt_err *e) {
  vk_ctx *c = be->ctx;
  pthread_mutex_lock(&c->lock);
  int rc = nnt_vk_step_end(c, e);
  pthread_mutex_unlock(&c->lock);
  return rc;
}

int nnt_vulkan_stats(const nnt_backend *be, nnt_vulkan_counters *out) {
  memset(out, 0, sizeof *out);
  vk_ctx *c = nnt_vk_of(be);
  if (!c)
    return NNT_ERR_INVAL;
  pthread_mutex_lock(&c->lock);
  out->submits = c->cnt.submits;
  out->dispatches = c->cnt.dispatches;
  out->barriers = c->cnt.barriers;
  out->recorded_steps = c->cnt.recorded_steps;
  out->replayed_steps = c->cnt.replayed_steps;
  out->rerecorded_steps = c->cnt.rerecorded_steps;
  out->step_syncs = c->cnt.step_syncs;
  out->device_bytes = c->dev_bytes;
  out->host_bytes = c->host_bytes;
  out->chunk_bytes = c->chunk;
  pthread_mutex_unlock(&c->lock);
  return NNT_OK;
}

static int vk_synchronize(nnt_backend *be, nnt_err *e) {
  vk_ctx *c = be->ctx;
  pthread_mutex_lock(&c->lock);
  int rc = nnt_vk_flush(c, e);
  pthread_mutex_unlock(&c->lock);
  return rc;
}

static void vk_memory(const nnt_backend *be, nnt_mem_usage *out) {
  vk_ctx *c = be->ctx;
  pthread_mutex_lock(&c->lock);
  *out = (nnt_mem_usage){c->dev_bytes, c->host_bytes};
  pthread_mutex_unlock(&c->lock);
}

/* The handle goes; the instance stays while a buffer of it lives. */
static void vk_backend_free(nnt_backend *be) {
  vk_ctx *c = be->ctx;
  nnt_vk_gemm_release(c); /* gemm's scratch refers to c too */
  pthread_mutex_lock(&c->lock);
  if (!ctx_unref(c))
    pthread_mutex_unlock(&c->lock);
}

int nnt_backend_vulkan(nnt_backend **out, nnt_err *e) {
  return nnt_backend_vulkan_on(out, NULL, e);
}

int nnt_backend_vulkan_on(nnt_backend **out, const char *device, nnt_err *e) {
  vk_ctx *c = NULL;
  int rc = nnt_vk_open(&c, device, e);
  if (rc)
    return rc;
  nnt_vk_buffer_type_init(c);
  nnt_vk_kernels_init(c);
  c->be = (nnt_backend){.name = "vulkan",
                        .engine = "gpu",
                        .buft = &c->buft,
                        .k = &c->k,
                        .device = c->device_desc,
                        .synchronize = vk_synchronize,
                        .step_begin = vk_step_begin,
                        .step_end = vk_step_end,
                        .supports = nnt_vk_supports,
                        .free = vk_backend_free,
                        .memory = vk_memory,
                        .ctx = c};
  c->refs = 1;
  *out = &c->be;
  return NNT_OK;
}
