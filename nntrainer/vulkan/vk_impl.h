/* The Vulkan backend's internals shared by its files: the function table
 * loaded from libvulkan at run time (the library does not link it), the
 * device context, buffers and the recording of commands. */
#ifndef NNT_VK_IMPL_H
#define NNT_VK_IMPL_H

#define VK_NO_PROTOTYPES
#include <pthread.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#include "nntrainer/compute/backend.h"
#include "nntrainer/vulkan/vk.h"

/* Loaded before an instance exists (vkGetInstanceProcAddr with NULL). */
#define VK_GLOBAL_FNS(X)                                                                     \
  X(vkCreateInstance) X(vkEnumerateInstanceLayerProperties)                                 \
  X(vkEnumerateInstanceExtensionProperties) X(vkEnumerateInstanceVersion)
/* Loaded from the instance. */
#define VK_INSTANCE_FNS(X)                                                                   \
  X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)       \
  X(vkGetPhysicalDeviceProperties2) X(vkGetPhysicalDeviceQueueFamilyProperties)             \
  X(vkGetPhysicalDeviceMemoryProperties) X(vkCreateDevice) X(vkGetDeviceProcAddr)
/* Loaded from the device. */
#define VK_DEVICE_FNS(X)                                                                     \
  X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer)               \
  X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory) \
  X(vkMapMemory) X(vkUnmapMemory) X(vkCreateCommandPool) X(vkDestroyCommandPool)            \
  X(vkAllocateCommandBuffers) X(vkBeginCommandBuffer) X(vkEndCommandBuffer)                 \
  X(vkQueueSubmit) X(vkCreateFence) X(vkDestroyFence) X(vkWaitForFences) X(vkResetFences)   \
  X(vkCmdCopyBuffer) X(vkCmdFillBuffer) X(vkCmdPipelineBarrier) X(vkCmdBindPipeline)        \
  X(vkCmdBindDescriptorSets) X(vkCmdPushConstants) X(vkCmdDispatch)                         \
  X(vkCreateShaderModule) X(vkDestroyShaderModule) X(vkCreateComputePipelines)              \
  X(vkDestroyPipeline) X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout)                 \
  X(vkCreateDescriptorSetLayout) X(vkDestroyDescriptorSetLayout)                            \
  X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool) X(vkResetDescriptorPool)             \
  X(vkAllocateDescriptorSets) X(vkUpdateDescriptorSets) X(vkDeviceWaitIdle)

#define VK_FN_FIELD(f) PFN_##f f;
typedef struct vk_fns {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
  VK_GLOBAL_FNS(VK_FN_FIELD)
  VK_INSTANCE_FNS(VK_FN_FIELD)
  VK_DEVICE_FNS(VK_FN_FIELD)
  PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT;
  PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT;
} vk_fns;
#undef VK_FN_FIELD

/* The storage-buffer bindings every shader has (shaders/common.glsl). */
#define VK_BINDINGS 8
/* Descriptor sets recorded before a flush must reset the pool. */
#define VK_SETS_PER_FLUSH 1024
/* Per-buffer opaque address space: buffer k's base is VK_ADDR_BASE + k *
 * VK_ADDR_SPAN, non-canonical on x86-64 (and apart from the test fake
 * device's range), so a host dereference faults. */
#define VK_ADDR_BASE 0x4000800000000000ull
#define VK_ADDR_SPAN ((uint64_t)1 << 36)
#define VK_STAGING_BYTES ((VkDeviceSize)4 << 20)

/* The push-constant block of shaders/common.glsl. */
typedef struct vk_push {
  uint32_t o[VK_BINDINGS];
  uint32_t n, rows, cols, k;
  uint32_t i0, i1, i2, i3;
  uint32_t u0, u1, u2, u3, u4, u5, u6, u7;
  float f0, f1, f2, f3, f4;
} vk_push;

typedef struct vk_buf {
  VkBuffer buf;
  VkDeviceMemory mem;
  VkDeviceSize size;  /* the nnt_buffer's size */
  VkDeviceSize range; /* bound in descriptors: min(allocated, maxStorageBufferRange) */
  uint64_t k;         /* index in the registry */
} vk_buf;

/* The SGEMM variants (vk_gemm.c; shaders/gemm_tile.glsl compiled per
 * tile shape): VK_GEMM_AUTO chooses by shape. */
typedef enum vk_gemm_path {
  VK_GEMM_AUTO = 0,
  VK_GEMM_TILE128, /* 128 x 128 tiles, 8 x 8 per invocation: big m and n */
  VK_GEMM_TILE64,  /* 64 x 64 tiles, 4 x 4 per invocation: the rest */
  VK_GEMM_SMALL32, /* 32 x 32 tiles, 4 x 4 per invocation: m or n <= 32 */
  VK_GEMM_SPLITK,  /* 64 x 64 tiles over slices of k, then gemm_reduce */
  VK_GEMM__COUNT
} vk_gemm_path;

/* What one gemm call runs: the variant, its shader and work groups, and
 * for split-k the slices, their depth and the tile rows per slice. */
typedef struct vk_gemm_plan {
  vk_gemm_path path;
  const char *shader;
  uint32_t gx, gy;
  uint32_t slices, chunk, tiles_m;
} vk_gemm_plan;

typedef struct vk_pipe {
  VkPipeline pipe; /* VK_NULL_HANDLE until first use */
} vk_pipe;

/* One backend instance (nnt_backend_get(NNT_ENGINE_GPU) makes a new one):
 * its own loader handle, instance, device, queue, pipelines, buffer
 * registry and validation record. be.ctx, buft.ctx and k.ctx point back
 * here, so every op and buffer call finds its instance from its argument;
 * the backend's files hold no mutable data at file scope (only const
 * tables). Every op, buffer and backend entry takes lock; the validation
 * record has vlock. */
typedef struct vk_ctx {
  pthread_mutex_t lock;
  nnt_backend be;
  nnt_buffer_type buft;
  nnt_kernels k;
  /* the validation record: its own lock (the driver may call the
   * messenger from its threads) */
  pthread_mutex_t vlock;
  size_t vcount;
  int vlistening; /* a messenger was installed */
  char vfirst[512];
  void *lib;
  vk_fns f;
  VkInstance inst;
  VkDebugUtilsMessengerEXT messenger;
  VkPhysicalDevice phys;
  VkPhysicalDeviceProperties props;
  VkPhysicalDeviceMemoryProperties memprops;
  VkDeviceSize max_alloc;
  char device_desc[320]; /* "llvmpipe (...) (cpu, Vulkan 1.3)" */
  VkDevice dev;
  uint32_t qfam;
  VkQueue queue;
  VkCommandPool pool;
  VkCommandBuffer cmd;
  VkFence fence;
  int recording;
  VkDescriptorSetLayout dsl;
  VkPipelineLayout layout;
  VkDescriptorPool dpool;
  unsigned sets_used;
  vk_pipe *pipes; /* one per embedded shader */
  /* staging for set/get */
  VkBuffer stage;
  VkDeviceMemory stage_mem;
  void *stage_map;
  /* live buffers by index; NULL once freed */
  vk_buf **live;
  uint64_t n_live, cap_live;
  unsigned refs; /* the backend handle and live buffers */
  int failed;    /* a device error happened: later ops refuse */
  char fail_msg[256];
  /* SGEMM (vk_gemm.c): glock makes one gemm call's dispatches and its use
   * of the split-k scratch one step (taken before lock, never inside it);
   * gemm_force (under glock) overrides the choice, for tests and
   * benchmarks; gemm_runs counts calls per variant (under lock). */
  pthread_mutex_t glock;
  vk_gemm_path gemm_force;
  nnt_buffer *gemm_scratch; /* holds a reference: released with the handle */
  size_t gemm_runs[VK_GEMM__COUNT];
} vk_ctx;

/* vk_device.c */
/* A new instance (its locks initialized, refs 0); no lock is held, as
 * nothing else can see it yet. */
int nnt_vk_open(vk_ctx **out, nnt_err *e);
/* Destroys c: called without c->lock held (ctx_unref releases it first),
 * once nothing else refers to c. */
void nnt_vk_close(vk_ctx *c);
int nnt_vk_begin(vk_ctx *c);                /* the command buffer in the recording state */
int nnt_vk_flush(vk_ctx *c, nnt_err *e);    /* submit what is recorded and wait */
void nnt_vk_barrier(vk_ctx *c);             /* everything before before everything after */
int nnt_vk_pipeline(vk_ctx *c, const char *shader, VkPipeline *out);
int nnt_vk_find_memory(vk_ctx *c, uint32_t bits, VkMemoryPropertyFlags want,
                       uint32_t *out);
int nnt_vk_fail(vk_ctx *c, nnt_err *e, VkResult r, const char *what);

/* vk_buffer.c */
void nnt_vk_buffer_type_init(vk_ctx *c); /* c->buft */
/* The buffer and element offset of a device address; NULL when p lies in
 * no live buffer or is not float-aligned. */
vk_buf *nnt_vk_resolve(vk_ctx *c, const void *p, uint32_t *elem);

/* vk_gemm.c */
/* The plan for gemm of m x n x k on c (force: a variant, or VK_GEMM_AUTO);
 * NNT_ERR_INVAL when the work groups exceed the device's limits. */
int nnt_vk_gemm_plan(const vk_ctx *c, size_t m, size_t n, size_t k, vk_gemm_path force,
                     vk_gemm_plan *out);
/* Under glock: the split-k scratch of at least `floats` elements (grown on
 * demand through the buffer type); NULL when it cannot be had. */
float *nnt_vk_gemm_scratch(vk_ctx *c, size_t floats);
void nnt_vk_gemm_count(vk_ctx *c, vk_gemm_path path); /* takes lock */
/* Sets gemm_force (takes glock). */
void nnt_vk_gemm_force(vk_ctx *c, vk_gemm_path path);
/* Frees the scratch (takes glock, then the buffer code takes lock): called
 * when the backend handle is released, as the scratch holds a reference. */
void nnt_vk_gemm_release(vk_ctx *c);

/* vk_ops.c */
void nnt_vk_kernels_init(vk_ctx *c); /* c->k */
int nnt_vk_supports(const nnt_backend *be, nnt_kop op);

#endif
