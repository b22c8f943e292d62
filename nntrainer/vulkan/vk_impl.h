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
  X(vkAllocateCommandBuffers) X(vkFreeCommandBuffers) X(vkBeginCommandBuffer)             \
  X(vkEndCommandBuffer)                                                                      \
  X(vkQueueSubmit) X(vkCreateFence) X(vkDestroyFence) X(vkWaitForFences) X(vkResetFences)   \
  X(vkCmdCopyBuffer) X(vkCmdFillBuffer) X(vkCmdPipelineBarrier) X(vkCmdBindPipeline)        \
  X(vkCmdBindDescriptorSets) X(vkCmdPushConstants) X(vkCmdDispatch)                         \
  X(vkCreateShaderModule) X(vkDestroyShaderModule) X(vkCreateComputePipelines)              \
  X(vkDestroyPipeline) X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout)                 \
  X(vkCreateDescriptorSetLayout) X(vkDestroyDescriptorSetLayout)                            \
  X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool) X(vkResetDescriptorPool)             \
  X(vkAllocateDescriptorSets) X(vkUpdateDescriptorSets) X(vkDeviceWaitIdle)                 \
  X(vkCreateQueryPool) X(vkDestroyQueryPool) X(vkCmdResetQueryPool) X(vkCmdWriteTimestamp)  \
  X(vkGetQueryPoolResults)

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

/* The storage-buffer bindings every shader has (shaders/common.glsl), and
 * binding VK_BINDINGS, the uniform block of the dispatch's parameters (a
 * slot of a parameter block, chosen by a dynamic offset). */
#define VK_BINDINGS 8
#define VK_PARAM_SLOTS 4096 /* slots per parameter block */
#define VK_SETS_PER_POOL 64 /* descriptor sets per descriptor pool */
/* Opaque addresses: bits 0-35 the byte offset in its buffer, 36-47 the
 * buffer's slot in the instance (1-4095), 48-61 the instance's tag; bit 62
 * set and 63 clear make the address non-canonical on x86-64 (and apart
 * from the test fake device's range), so a host dereference faults. */
#define VK_ADDR_BASE 0x4000000000000000ull
#define VK_OFF_BITS 36
#define VK_SLOT_BITS 12
#define VK_TAG_BITS 14
#define VK_MAX_SLOTS ((1u << VK_SLOT_BITS) - 1)
#define VK_ADDR_SPAN ((uint64_t)1 << VK_OFF_BITS)
/* Staging between host and device outside recorded steps: in blocks of
 * this size, submitted when this much is pending. */
#define VK_STAGING_BLOCK ((VkDeviceSize)4 << 20)
#define VK_STAGING_MAX ((VkDeviceSize)32 << 20)

/* The parameter block of shaders/common.glsl (128 bytes, std140 scalars). */
typedef struct vk_push {
  uint32_t o[VK_BINDINGS];
  uint32_t n, rows, cols, k;
  uint32_t i0, i1, i2, i3;
  uint32_t u0, u1, u2, u3, u4, u5, u6, u7;
  float f0, f1, f2, f3, f4, f5, f6, f7;
} vk_push;

/* One VkBuffer and its memory: a chunk of a device buffer, or a host block
 * (staging or parameters, mapped). */
typedef struct vk_buf {
  VkBuffer buf;
  VkDeviceMemory mem;
  VkDeviceSize size;  /* bytes of the buffer */
  VkDeviceSize range; /* bound in descriptors: min(size, maxStorageBufferRange) */
  uint64_t serial;    /* unique in the instance, never reused */
  void *map;          /* host blocks: the mapping */
} vk_buf;

/* A device buffer (an nnt_buffer's ctx): chunks of `chunk` bytes, each its
 * own VkBuffer, so no binding exceeds the device's storage-buffer range or
 * one allocation's limit; the planner keeps every tensor inside a chunk. */
typedef struct vk_pool {
  size_t size;
  size_t chunk; /* bytes per chunk (the last may be shorter) */
  uint32_t slot;
  size_t n_chunks;
  vk_buf *chunks;
} vk_pool;

/* A byte range of a buffer one command reads or writes, for barriers. */
typedef struct vk_span {
  uint64_t serial;
  VkDeviceSize lo, hi;
  uint64_t write; /* 64 bits: no padding, signatures compare with memcmp */
} vk_span;

typedef enum vk_ekind { VK_E_DISPATCH = 1, VK_E_COPY_IN, VK_E_COPY_OUT, VK_E_FILL } vk_ekind;

/* What a recorded command buffer depends on: a replay whose calls give the
 * same signatures, in the same order, may reuse it; the parameters (sizes,
 * scalars, element offsets) live in the parameter slots and may differ. */
typedef struct vk_sig {
  uint32_t kind, pipe, gx, gy, n_span;
  uint32_t word; /* fill */
  vk_span span[VK_BINDINGS];
  VkDeviceSize off, size; /* copies and fills: the device side */
} vk_sig;

typedef struct vk_entry {
  vk_sig sig;
  vk_buf *bind[VK_BINDINGS]; /* dispatch: the buffer of each binding */
  vk_buf *dev;               /* copies and fills */
  uint32_t slot;             /* dispatch: parameter slot in the recording */
  uint32_t blk;              /* copies: staging block */
  VkDeviceSize soff;         /* copies: offset in it */
} vk_entry;

/* A list of host blocks (parameters or staging) of a recording. */
typedef struct vk_blocks {
  vk_buf **b;
  size_t n;
  VkDeviceSize used; /* bytes (staging) or slots (parameters) used in the last */
  VkDeviceSize total;
} vk_blocks;

/* A command buffer with what it was recorded from: the eager one (ops as
 * they come, submitted at the next read or synchronize) or a step's,
 * replayed while the step's calls match it. */
typedef struct vk_rec {
  uint64_t key;
  int is_step;
  VkCommandBuffer cmd;
  int open; /* begun, not ended */
  vk_entry *ent;
  size_t n_ent, cap_ent;
  vk_blocks params, staging;
  vk_span *pend; /* accessed since the last barrier */
  size_t n_pend, cap_pend;
  VkPipeline bound;
  uint32_t n_barriers, n_dispatch;
  int any_out;
  /* profiling (vk_profile.c): a timestamp at the start and after each
   * command, query q's command kind in qwhat[q] (a shader's index, or
   * nnt_vk_shader_count + its vk_ekind for a copy or fill) */
  VkQueryPool qpool;
  uint32_t n_q;
  uint32_t *qwhat;
  uint64_t *qts;
} vk_rec;

/* A read whose bytes land in host memory when its recording completes. */
typedef struct vk_delivery {
  void *dst;
  size_t ent; /* the copy-out entry in the current recording */
} vk_delivery;

typedef struct vk_dset {
  VkBuffer b[VK_BINDINGS + 1];
  VkDescriptorSet set;
} vk_dset;

/* Counters for tests and benchmarks (nnt_vulkan_stats). */
typedef struct vk_counters {
  uint64_t submits, dispatches, barriers, copies, recorded_steps, replayed_steps,
      rerecorded_steps, step_syncs;
} vk_counters;
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

/* Timestamps per recording (NNTRAINER_VULKAN_PROFILE=1): commands past
 * this many in one submit are not timed (counted as untimed). */
#define VK_PROF_QUERIES 16384
/* What the timestamps gave, per shader and per copy/fill kind. */
typedef struct vk_prof {
  uint64_t calls;
  double ns;
} vk_prof;

typedef struct vk_pipe {
  VkPipeline pipe; /* VK_NULL_HANDLE until first use */
} vk_pipe;

/* One backend instance (nnt_backend_get(NNT_ENGINE_GPU) makes a new one):
 * its own loader handle, instance, device, queue, pipelines, buffer
 * registry and validation record. be.ctx, buft.ctx and k.ctx point back
 * here, so every op and buffer call finds its instance from its argument;
 * the backend's files hold no mutable data at file scope (only const
 * tables and the counter that gives each instance its address tag). Every
 * op, buffer and backend entry takes lock; the validation record has
 * vlock. */
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
  size_t chunk; /* bytes per chunk of a device buffer */
  char device_desc[320]; /* "llvmpipe (...) (cpu, Vulkan 1.3)" */
  VkDevice dev;
  uint32_t qfam;
  VkQueue queue;
  VkCommandPool pool;
  VkFence fence;
  VkDescriptorSetLayout dsl;
  VkPipelineLayout layout;
  VkDescriptorPool *dpools;
  size_t n_dpools;
  unsigned sets_in_last;
  vk_dset *dsets; /* descriptor sets by their buffers */
  size_t n_dsets, cap_dsets;
  VkDeviceSize pstride; /* bytes per parameter slot */
  vk_pipe *pipes;       /* one per embedded shader */
  uint64_t tag;         /* this instance's address tag */
  uint64_t next_serial;
  /* recordings: the eager one, the steps', the one in use */
  vk_rec eager;
  vk_rec **steps;
  size_t n_steps;
  vk_rec *cur;   /* the recording ops go to: &eager or a step's */
  int in_step;   /* between step_begin and step_end */
  int replaying; /* cur is a step's recording being replayed */
  int rerecorded; /* this step's replay diverged and was recorded again */
  size_t cursor; /* replay: the next entry to match */
  vk_delivery *dl;
  size_t n_dl, cap_dl;
  vk_counters cnt;
  /* live device buffers by slot; NULL when free */
  vk_pool *live[VK_MAX_SLOTS + 1];
  size_t dev_bytes, host_bytes;
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
  int bn_narrow; /* tests: batch normalization in work groups of 256 */
  /* profiling (under lock): on where NNTRAINER_VULKAN_PROFILE=1 and the
   * queue has timestamps; ns per tick, the valid bits' mask, per kind of
   * command (nnt_vk_shader_count shaders, then copy in, copy out, fill),
   * the submits' GPU time from first to last timestamp, untimed commands */
  int profile;
  const char *profile_off; /* why not, when asked for and unavailable */
  double ts_period;
  uint64_t ts_mask;
  vk_prof *prof;
  double prof_total_ns;
  uint64_t prof_submits, prof_untimed;
} vk_ctx;

/* vk_device.c */
/* be's instance, or NULL where be is not a Vulkan backend. */
vk_ctx *nnt_vk_of(const nnt_backend *be);
/* A new instance (its locks initialized, refs 0); no lock is held, as
 * nothing else can see it yet. */
int nnt_vk_open(vk_ctx **out, const char *device, nnt_err *e);
/* Destroys c: called without c->lock held (ctx_unref releases it first),
 * once nothing else refers to c. */
void nnt_vk_close(vk_ctx *c);
/* The pipeline of an embedded shader (created at first use): its index in
 * c->pipes. */
int nnt_vk_pipeline(vk_ctx *c, const char *shader, uint32_t *idx);
int nnt_vk_find_memory(vk_ctx *c, uint32_t bits, VkMemoryPropertyFlags want,
                       uint32_t *out);
int nnt_vk_fail(vk_ctx *c, nnt_err *e, VkResult r, const char *what);
/* A buffer with its own memory: device-local (host == 0) or host-visible,
 * coherent and mapped (usage: its VkBufferUsageFlags). */
int nnt_vk_buf_create(vk_ctx *c, VkDeviceSize size, int host, VkBufferUsageFlags usage,
                      vk_buf *out);
void nnt_vk_buf_destroy(vk_ctx *c, vk_buf *v);

/* vk_record.c: every command goes through here, under c->lock. */
/* A dispatch of shader with its bindings (bufs[i] NULL: unused) and the
 * byte ranges they read or write (span), parameters pc. */
int nnt_vk_record_dispatch(vk_ctx *c, const char *shader, vk_buf *const bufs[VK_BINDINGS],
                           const vk_span *span, unsigned n_span, const vk_push *pc, uint32_t gx,
                           uint32_t gy);
/* Host bytes into a device range (staged; the copy runs in order with the
 * ops), a device range into host memory (lands when the recording
 * completes: at once outside a step, at step_end inside one), a fill. */
int nnt_vk_record_copy_in(vk_ctx *c, vk_buf *dev, VkDeviceSize off, const void *src,
                          VkDeviceSize n);
int nnt_vk_record_copy_out(vk_ctx *c, vk_buf *dev, VkDeviceSize off, void *dst, VkDeviceSize n);
int nnt_vk_record_fill(vk_ctx *c, vk_buf *dev, VkDeviceSize off, VkDeviceSize n, uint32_t word);
/* Zero n buffers now, in a submit of their own: a step in progress is not
 * disturbed (an allocation inside a step does not break its recording). */
int nnt_vk_fill_now(vk_ctx *c, vk_buf *const *dev, size_t n, nnt_err *e);
/* Submit what the eager recording holds and wait; deliver its reads. */
int nnt_vk_flush(vk_ctx *c, nnt_err *e);
int nnt_vk_step_begin(vk_ctx *c, uint64_t key, nnt_err *e);
int nnt_vk_step_end(vk_ctx *c, nnt_err *e);
/* Before a buffer is destroyed: everything is submitted and finished, the
 * step recordings and descriptor sets (which may name it) are dropped. */
int nnt_vk_forget_buffers(vk_ctx *c, nnt_err *e);
void nnt_vk_records_close(vk_ctx *c);

/* vk_profile.c */
/* At open: profiling on when NNTRAINER_VULKAN_PROFILE=1 and the compute
 * queue family (timestamp_bits of it) has timestamps. */
int nnt_vk_profile_open(vk_ctx *c, uint32_t timestamp_bits, nnt_err *e);
/* At a recording's begin (its pool made at first use, reset, the start
 * written) and after each command (what: as vk_rec's qwhat). */
int nnt_vk_profile_begin(vk_ctx *c, vk_rec *r);
void nnt_vk_profile_mark(vk_ctx *c, vk_rec *r, uint32_t what);
/* After r's submit finished: its timestamps added to c->prof. */
void nnt_vk_profile_collect(vk_ctx *c, vk_rec *r);
void nnt_vk_profile_release(vk_ctx *c, vk_rec *r);

/* vk_buffer.c */
void nnt_vk_buffer_type_init(vk_ctx *c); /* c->buft */
/* The chunk and element offset of a device address; NULL when p lies in
 * no live buffer of this instance or is not float-aligned. The chunk's
 * extent from there is in *room (bytes). */
vk_buf *nnt_vk_resolve(vk_ctx *c, const void *p, uint32_t *elem, VkDeviceSize *room);

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
