/* The Vulkan backend's memory and the backend itself: device-local storage
 * buffers with opaque base addresses (VK_ADDR_BASE + k * VK_ADDR_SPAN, never
 * a host pointer), the registry that maps an address back to its buffer,
 * set/get through the staging buffer, memset through vkCmdFillBuffer, and
 * nnt_backend_vulkan (a new instance per call, closed when its handle and
 * its last buffer are released). */
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

static size_t vk_max_size(const nnt_buffer_type *t) {
  vk_ctx *c = t->ctx;
  if (!c)
    return 0;
  uint64_t m = c->max_alloc;
  if ((uint64_t)c->props.limits.maxStorageBufferRange < m)
    m = c->props.limits.maxStorageBufferRange;
  if (m > VK_ADDR_SPAN - 64)
    m = VK_ADDR_SPAN - 64;
  m -= m % 64; /* whole floats, whatever the limit */
  return m > SIZE_MAX ? SIZE_MAX : (size_t)m;
}

static int vk_is_host(const nnt_buffer_type *t) {
  (void)t;
  return 0;
}

static char *vk_base(const nnt_buffer *b) {
  const vk_buf *v = b->ctx;
  return (char *)(uintptr_t)(VK_ADDR_BASE + v->k * VK_ADDR_SPAN);
}

static void destroy_buf(vk_ctx *c, vk_buf *v) {
  if (v->buf)
    c->f.vkDestroyBuffer(c->dev, v->buf, NULL);
  if (v->mem)
    c->f.vkFreeMemory(c->dev, v->mem, NULL);
  nnt_free(v);
}

static int vk_fill_locked(vk_ctx *c, vk_buf *v, size_t off, uint32_t word, size_t n,
                          nnt_err *e);

static int vk_alloc(const nnt_buffer_type *t, size_t size, const char *what, nnt_buffer **out,
                    nnt_err *e) {
  vk_ctx *c = t->ctx;
  pthread_mutex_lock(&c->lock);
  nnt_buffer *b = NULL;
  vk_buf *v = NULL;
  int rc = NNT_OK;
  if (!c) {
    rc = nnt_err_set(e, NNT_ERR_INVAL, "cannot allocate %s: the Vulkan device is not open", what);
    goto out;
  }
  b = nnt_calloc(1, sizeof *b);
  v = b ? nnt_calloc(1, sizeof *v) : NULL;
  if (v && c->n_live + 1 >= c->cap_live) {
    uint64_t cap = c->cap_live ? 2 * c->cap_live : 64;
    vk_buf **live = nnt_realloc(c->live, cap * sizeof *live);
    if (live) {
      memset(live + c->cap_live, 0, (cap - c->cap_live) * sizeof *live);
      c->live = live, c->cap_live = cap;
    } else {
      nnt_free(v), v = NULL;
    }
  }
  if (!v) {
    rc = nnt_err_set(e, NNT_ERR_NOMEM, "cannot allocate %s (%zu bytes)", what, size);
    goto out;
  }
  VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                           .size = size ? (size + 3) / 4 * 4 : 4,
                           .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                    VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                    VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                           .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  VkResult r = c->f.vkCreateBuffer(c->dev, &bi, NULL, &v->buf);
  VkMemoryRequirements req = {0};
  uint32_t type = 0;
  if (r == VK_SUCCESS) {
    c->f.vkGetBufferMemoryRequirements(c->dev, v->buf, &req);
    if (!nnt_vk_find_memory(c, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, &type) &&
        !nnt_vk_find_memory(c, req.memoryTypeBits, 0, &type))
      r = VK_ERROR_OUT_OF_DEVICE_MEMORY;
  }
  if (r == VK_SUCCESS) {
    VkMemoryAllocateInfo mi = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .allocationSize = req.size,
                               .memoryTypeIndex = type};
    r = c->f.vkAllocateMemory(c->dev, &mi, NULL, &v->mem);
  }
  if (r == VK_SUCCESS)
    r = c->f.vkBindBufferMemory(c->dev, v->buf, v->mem, 0);
  if (r != VK_SUCCESS) {
    rc = nnt_err_set(e, NNT_ERR_NOMEM, "cannot allocate %s (%zu bytes) on the Vulkan device '%s' "
                     "(VkResult %d)", what, size, c->props.deviceName, (int)r);
    goto out;
  }
  v->size = size;
  v->range = bi.size < c->props.limits.maxStorageBufferRange
                 ? bi.size : c->props.limits.maxStorageBufferRange;
  v->k = ++c->n_live;
  c->live[v->k] = v;
  b->type = t;
  b->size = size;
  b->ctx = v;
  ctx_ref(c);
  /* zeroed, as alloc promises */
  if ((rc = vk_fill_locked(c, v, 0, 0, (size_t)bi.size, e))) {
    c->live[v->k] = NULL;
    destroy_buf(c, v);
    nnt_free(b);
    if (!ctx_unref(c))
      pthread_mutex_unlock(&c->lock);
    return rc;
  }
  *out = b;
  b = NULL, v = NULL;
out:
  if (v)
    destroy_buf(c, v);
  nnt_free(b);
  pthread_mutex_unlock(&c->lock);
  return rc;
}

static void vk_free(nnt_buffer *b) {
  vk_ctx *c = b->type->ctx;
  pthread_mutex_lock(&c->lock);
  vk_buf *v = b->ctx;
  /* pending commands may use it */
  nnt_vk_flush(c, NULL);
  c->live[v->k] = NULL;
  destroy_buf(c, v);
  nnt_free(b);
  if (!ctx_unref(c))
    pthread_mutex_unlock(&c->lock);
}

vk_buf *nnt_vk_resolve(vk_ctx *c, const void *p, uint32_t *elem) {
  uint64_t a = (uint64_t)(uintptr_t)p;
  if (a < VK_ADDR_BASE)
    return NULL;
  uint64_t k = (a - VK_ADDR_BASE) / VK_ADDR_SPAN, off = (a - VK_ADDR_BASE) % VK_ADDR_SPAN;
  vk_buf *v = k && k <= c->n_live ? c->live[k] : NULL;
  if (!v || off > v->size || off % 4 || off / 4 > UINT32_MAX)
    return NULL;
  *elem = (uint32_t)(off / 4);
  return v;
}

static int check_range(const nnt_buffer *b, size_t off, size_t n, nnt_err *e) {
  if (off > b->size || n > b->size - off)
    return nnt_err_set(e, NNT_ERR_INVAL, "Vulkan buffer: bytes [%zu, %zu) outside its %zu", off,
                       off + n, b->size);
  return NNT_OK;
}

/* Copy n bytes between a buffer and host memory through the staging
 * buffer, in chunks; to_dev: host -> device. Flushes first. */
static int transfer(vk_ctx *c, vk_buf *v, size_t off, void *host, size_t n, int to_dev,
                    nnt_err *e) {
  int rc = nnt_vk_flush(c, e);
  while (!rc && n) {
    size_t len = n < VK_STAGING_BYTES ? n : (size_t)VK_STAGING_BYTES;
    if (to_dev)
      memcpy(c->stage_map, host, len);
    if ((rc = nnt_vk_begin(c)))
      return nnt_err_set(e, rc, "engine 'gpu': %s", c->fail_msg);
    VkBufferCopy cp = {.srcOffset = to_dev ? 0 : off, .dstOffset = to_dev ? off : 0, .size = len};
    c->f.vkCmdCopyBuffer(c->cmd, to_dev ? c->stage : v->buf, to_dev ? v->buf : c->stage, 1, &cp);
    if ((rc = nnt_vk_flush(c, e)))
      break;
    if (!to_dev)
      memcpy(host, c->stage_map, len);
    host = (char *)host + len, off += len, n -= len;
  }
  return rc;
}

static int vk_set(nnt_buffer *b, size_t off, const void *src, size_t n, nnt_err *e) {
  int rc = check_range(b, off, n, e);
  if (rc || !n)
    return rc;
  vk_ctx *c = b->type->ctx;
  pthread_mutex_lock(&c->lock);
  rc = transfer(c, b->ctx, off, (void *)src, n, 1, e);
  pthread_mutex_unlock(&c->lock);
  return rc;
}

static int vk_get(const nnt_buffer *b, size_t off, void *dst, size_t n, nnt_err *e) {
  int rc = check_range(b, off, n, e);
  if (rc || !n)
    return rc;
  vk_ctx *c = b->type->ctx;
  pthread_mutex_lock(&c->lock);
  rc = transfer(c, b->ctx, off, dst, n, 0, e);
  pthread_mutex_unlock(&c->lock);
  return rc;
}

/* vkCmdFillBuffer recorded in order with the ops (offset and size
 * multiples of 4). */
static int vk_fill_locked(vk_ctx *c, vk_buf *v, size_t off, uint32_t word, size_t n,
                          nnt_err *e) {
  if (c->failed)
    return nnt_err_set(e, NNT_ERR_UNKNOWN, "engine 'gpu': an earlier error: %s", c->fail_msg);
  if (nnt_vk_begin(c))
    return nnt_err_set(e, NNT_ERR_UNKNOWN, "engine 'gpu': %s", c->fail_msg);
  c->f.vkCmdFillBuffer(c->cmd, v->buf, off, n, word);
  nnt_vk_barrier(c);
  return NNT_OK;
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
  rc = vk_fill_locked(c, b->ctx, off, u * 0x01010101u, n, e);
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
};

void nnt_vk_buffer_type_init(vk_ctx *c) {
  c->buft = vk_type;
  c->buft.ctx = c;
}

/* ---- the backend ---- */

static int vk_synchronize(nnt_backend *be, nnt_err *e) {
  vk_ctx *c = be->ctx;
  pthread_mutex_lock(&c->lock);
  int rc = nnt_vk_flush(c, e);
  pthread_mutex_unlock(&c->lock);
  return rc;
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
  vk_ctx *c = NULL;
  int rc = nnt_vk_open(&c, e);
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
                        .supports = nnt_vk_supports,
                        .free = vk_backend_free,
                        .ctx = c};
  c->refs = 1;
  *out = &c->be;
  return NNT_OK;
}
