/* The Vulkan backend's device (vk_impl.h): loading libvulkan at run time,
 * the instance (with the validation layer and its messenger on request),
 * choosing the device, the queue, command buffer and descriptor pool, the
 * pipelines (one per embedded shader, created at first use), and
 * submitting. */
#include "nntrainer/vulkan/vk_impl.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nntrainer/vulkan/vk_shaders.h"

/* ---- the validation record (per backend instance) ---- */

vk_ctx *nnt_vk_of(const nnt_backend *be) {
  return be && be->ctx && be->name && !strcmp(be->name, "vulkan") ? be->ctx : NULL;
}

int nnt_vulkan_validation_listening(const nnt_backend *be) {
  vk_ctx *c = nnt_vk_of(be);
  if (!c)
    return 0;
  pthread_mutex_lock(&c->vlock);
  int on = c->vlistening;
  pthread_mutex_unlock(&c->vlock);
  return on;
}

static void validation_record(vk_ctx *c, const char *msg) {
  pthread_mutex_lock(&c->vlock);
  if (!c->vcount++)
    snprintf(c->vfirst, sizeof c->vfirst, "%s", msg ? msg : "?");
  pthread_mutex_unlock(&c->vlock);
}

size_t nnt_vulkan_validation_messages(const nnt_backend *be, char *first, size_t n) {
  vk_ctx *c = nnt_vk_of(be);
  if (first && n)
    first[0] = '\0';
  if (!c)
    return 0;
  pthread_mutex_lock(&c->vlock);
  size_t count = c->vcount;
  if (first && n)
    snprintf(first, n, "%s", c->vfirst);
  pthread_mutex_unlock(&c->vlock);
  return count;
}

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                                 VkDebugUtilsMessageTypeFlagsEXT type,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *d,
                                                 void *user) {
  (void)type;
  if (user && (sev & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)))
    validation_record(user, d && d->pMessage ? d->pMessage : "?");
  return VK_FALSE;
}

/* ---- helpers ---- */

int nnt_vk_fail(vk_ctx *c, nnt_err *e, VkResult r, const char *what) {
  if (c && !c->failed) {
    c->failed = 1;
    snprintf(c->fail_msg, sizeof c->fail_msg, "Vulkan: %s failed (VkResult %d)", what, (int)r);
  }
  return nnt_err_set(e, NNT_ERR_UNKNOWN, "Vulkan: %s failed (VkResult %d)", what, (int)r);
}

static int env_on(const char *name) {
  const char *v = getenv(name);
  return v && (!strcmp(v, "1") || !strcasecmp(v, "on") || !strcasecmp(v, "true"));
}

static int has_layer(vk_ctx *c, const char *name) {
  uint32_t n = 0;
  if (c->f.vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || !n)
    return 0;
  VkLayerProperties *p = nnt_calloc(n, sizeof *p);
  int found = 0;
  if (p && c->f.vkEnumerateInstanceLayerProperties(&n, p) == VK_SUCCESS)
    for (uint32_t i = 0; i < n && !found; i++)
      found = !strcmp(p[i].layerName, name);
  nnt_free(p);
  return found;
}

static const char *type_name(VkPhysicalDeviceType t) {
  switch (t) {
  case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
  case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
  case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
  case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
  default: return "other";
  }
}

static int type_rank(VkPhysicalDeviceType t) {
  switch (t) {
  case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
  case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
  case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
  case VK_PHYSICAL_DEVICE_TYPE_CPU: return 1;
  default: return 0;
  }
}

/* The first queue family with compute (-1: none); its timestamps' valid
 * bits in *ts_bits where ts_bits is not NULL. */
static int compute_family(vk_ctx *c, VkPhysicalDevice pd, uint32_t *ts_bits) {
  uint32_t n = 0;
  c->f.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
  VkQueueFamilyProperties *q = nnt_calloc(n ? n : 1, sizeof *q);
  int fam = -1;
  if (q) {
    c->f.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q);
    for (uint32_t i = 0; i < n && fam < 0; i++)
      if (q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
        fam = (int)i;
        if (ts_bits)
          *ts_bits = q[i].timestampValidBits;
      }
  }
  nnt_free(q);
  return fam;
}

static int icontains(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (; *hay; hay++)
    if (!strncasecmp(hay, needle, n))
      return 1;
  return !n;
}

/* ---- opening ---- */

static int load_loader(vk_ctx *c, nnt_err *e) {
  const char *name = getenv("NNTRAINER_VULKAN_LOADER");
  if (!name || !*name)
    name = "libvulkan.so.1";
  c->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!c->lib) {
    const char *why = dlerror();
    return nnt_err_set(e, NNT_ERR_NOT_SUPPORTED, "engine 'gpu': no Vulkan loader (%s): %s", name,
                       why ? why : "not found");
  }
  *(void **)&c->f.vkGetInstanceProcAddr = dlsym(c->lib, "vkGetInstanceProcAddr");
  if (!c->f.vkGetInstanceProcAddr)
    return nnt_err_set(e, NNT_ERR_NOT_SUPPORTED,
                       "engine 'gpu': the Vulkan loader %s has no vkGetInstanceProcAddr", name);
#define LOAD_G(fn)                                                                           \
  if (!(c->f.fn = (PFN_##fn)c->f.vkGetInstanceProcAddr(NULL, #fn)))                          \
    return nnt_err_set(e, NNT_ERR_NOT_SUPPORTED, "engine 'gpu': the Vulkan loader lacks " #fn);
  VK_GLOBAL_FNS(LOAD_G)
#undef LOAD_G
  return NNT_OK;
}

static int create_instance(vk_ctx *c, nnt_err *e) {
  uint32_t ver = 0;
  if (c->f.vkEnumerateInstanceVersion(&ver) != VK_SUCCESS || ver < VK_API_VERSION_1_1)
    return nnt_err_set(e, NNT_ERR_NOT_SUPPORTED,
                       "engine 'gpu': the Vulkan loader offers version %u.%u; 1.1 is needed",
                       VK_API_VERSION_MAJOR(ver), VK_API_VERSION_MINOR(ver));
  int validate = env_on("NNTRAINER_VULKAN_VALIDATION");
  const char *layer = "VK_LAYER_KHRONOS_validation";
  const char *ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
  int use_layer = validate && has_layer(c, layer);
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .pApplicationName = "nntrainer",
                           .pEngineName = "nntrainer",
                           .apiVersion = VK_API_VERSION_1_1};
  VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                             .pApplicationInfo = &app,
                             .enabledLayerCount = use_layer ? 1 : 0,
                             .ppEnabledLayerNames = use_layer ? &layer : NULL,
                             .enabledExtensionCount = validate ? 1 : 0,
                             .ppEnabledExtensionNames = validate ? &ext : NULL};
  VkResult r = c->f.vkCreateInstance(&ci, NULL, &c->inst);
  if (r != VK_SUCCESS && validate) { /* no debug utils: run without the messenger */
    ci.enabledExtensionCount = 0;
    validate = 0;
    r = c->f.vkCreateInstance(&ci, NULL, &c->inst);
  }
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER) /* the loader found no driver */
    return nnt_err_set(e, NNT_ERR_NOT_SUPPORTED,
                       "engine 'gpu': no Vulkan device: the Vulkan loader found no driver "
                       "(VK_ERROR_INCOMPATIBLE_DRIVER)");
  if (r != VK_SUCCESS)
    return nnt_err_set(e, NNT_ERR_NOT_SUPPORTED,
                       "engine 'gpu': cannot create a Vulkan instance (VkResult %d)", (int)r);
#define LOAD_I(fn)                                                                           \
  if (!(c->f.fn = (PFN_##fn)c->f.vkGetInstanceProcAddr(c->inst, #fn)))                       \
    return nnt_err_set(e, NNT_ERR_NOT_SUPPORTED, "engine 'gpu': the Vulkan instance lacks " #fn);
  VK_INSTANCE_FNS(LOAD_I)
#undef LOAD_I
  if (validate) {
    c->f.vkCreateDebugUtilsMessengerEXT = (PFN_vkCreateDebugUtilsMessengerEXT)
        c->f.vkGetInstanceProcAddr(c->inst, "vkCreateDebugUtilsMessengerEXT");
    c->f.vkDestroyDebugUtilsMessengerEXT = (PFN_vkDestroyDebugUtilsMessengerEXT)
        c->f.vkGetInstanceProcAddr(c->inst, "vkDestroyDebugUtilsMessengerEXT");
    VkDebugUtilsMessengerCreateInfoEXT mi = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_message,
        .pUserData = c};
    if (c->f.vkCreateDebugUtilsMessengerEXT && c->f.vkDestroyDebugUtilsMessengerEXT &&
        c->f.vkCreateDebugUtilsMessengerEXT(c->inst, &mi, NULL, &c->messenger) != VK_SUCCESS)
      c->messenger = VK_NULL_HANDLE;
    if (c->messenger && use_layer) {
      pthread_mutex_lock(&c->vlock);
      c->vlistening = 1;
      pthread_mutex_unlock(&c->vlock);
    }
  }
  return NNT_OK;
}

/* discrete > integrated > virtual > CPU, or the device `device` names
 * ([Model] gpu_device), else NNTRAINER_VULKAN_DEVICE. */
static int choose_device(vk_ctx *c, const char *device, nnt_err *e) {
  uint32_t n = 0;
  VkResult r = c->f.vkEnumeratePhysicalDevices(c->inst, &n, NULL);
  if (r != VK_SUCCESS || !n)
    return nnt_err_set(e, NNT_ERR_NOT_SUPPORTED, "engine 'gpu': no Vulkan device (VkResult %d)",
                       (int)r);
  VkPhysicalDevice *pd = nnt_calloc(n, sizeof *pd);
  if (!pd)
    return nnt_err_set(e, NNT_ERR_NOMEM, "engine 'gpu': cannot list the Vulkan devices");
  c->f.vkEnumeratePhysicalDevices(c->inst, &n, pd);
  const char *from = device ? "gpu_device" : "NNTRAINER_VULKAN_DEVICE";
  const char *want = device ? device : getenv("NNTRAINER_VULKAN_DEVICE");
  int best = -1, best_rank = -1, rc = NNT_OK;
  char names[512] = "";
  size_t len = 0;
  for (uint32_t i = 0; i < n; i++) {
    VkPhysicalDeviceProperties p;
    c->f.vkGetPhysicalDeviceProperties(pd[i], &p);
    if (len < sizeof names)
      len += (size_t)snprintf(names + len, sizeof names - len, "%s%u: %s", i ? ", " : "", i,
                              p.deviceName);
    if (p.apiVersion < VK_API_VERSION_1_1 || compute_family(c, pd[i], NULL) < 0 ||
        p.limits.maxPerStageDescriptorStorageBuffers < VK_BINDINGS ||
        p.limits.maxDescriptorSetUniformBuffersDynamic < 1 ||
        p.limits.maxUniformBufferRange < sizeof(vk_push))
      continue;
    int rank = type_rank(p.deviceType);
    if (want && *want) {
      char *end;
      unsigned long idx = strtoul(want, &end, 10);
      int match = (*end == '\0' && end != want) ? idx == i : icontains(p.deviceName, want);
      if (match && best < 0)
        best = (int)i;
    } else if (rank > best_rank) {
      best = (int)i, best_rank = rank;
    }
  }
  if (best < 0)
    rc = want && *want
             ? nnt_err_set(e, NNT_ERR_NOT_SUPPORTED,
                           "engine 'gpu': %s='%s' matches no Vulkan 1.1 device with a compute "
                           "queue (devices: %s)", from, want, names)
             : nnt_err_set(e, NNT_ERR_NOT_SUPPORTED,
                           "engine 'gpu': no Vulkan 1.1 device with a compute queue (devices: "
                           "%s)", names);
  else
    c->phys = pd[best];
  nnt_free(pd);
  if (rc)
    return rc;
  c->f.vkGetPhysicalDeviceProperties(c->phys, &c->props);
  c->f.vkGetPhysicalDeviceMemoryProperties(c->phys, &c->memprops);
  VkPhysicalDeviceMaintenance3Properties m3 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                    .pNext = &m3};
  c->f.vkGetPhysicalDeviceProperties2(c->phys, &p2);
  c->max_alloc = m3.maxMemoryAllocationSize ? m3.maxMemoryAllocationSize : ((VkDeviceSize)1 << 30);
  uint32_t ts_bits = 0;
  c->qfam = (uint32_t)compute_family(c, c->phys, &ts_bits);
  if ((rc = nnt_vk_profile_open(c, ts_bits, e)))
    return rc;
  VkDeviceSize ua = c->props.limits.minUniformBufferOffsetAlignment;
  ua = ua > 16 ? ua : 16;
  c->pstride = (sizeof(vk_push) + ua - 1) / ua * ua;
  /* a device buffer is split into chunks no binding or allocation exceeds */
  VkDeviceSize chunk = c->max_alloc;
  if (c->props.limits.maxStorageBufferRange < chunk)
    chunk = c->props.limits.maxStorageBufferRange;
  if (chunk > VK_ADDR_SPAN)
    chunk = VK_ADDR_SPAN;
  const char *force = getenv("NNTRAINER_VULKAN_CHUNK"); /* smaller, for tests */
  if (force && *force) {
    char *end;
    unsigned long long v = strtoull(force, &end, 10);
    if (*end || v < 4096 || v > chunk)
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "engine 'gpu': NNTRAINER_VULKAN_CHUNK='%s' is not a byte count in "
                         "[4096, %llu]", force, (unsigned long long)chunk);
    chunk = v;
  }
  VkDeviceSize al = c->props.limits.minStorageBufferOffsetAlignment;
  al = al > 64 ? al : 64;
  chunk -= chunk % al;
  c->chunk = (size_t)chunk;
  snprintf(c->device_desc, sizeof c->device_desc, "%s (%s, Vulkan %u.%u)", c->props.deviceName,
           type_name(c->props.deviceType), VK_API_VERSION_MAJOR(c->props.apiVersion),
           VK_API_VERSION_MINOR(c->props.apiVersion));
  return NNT_OK;
}

int nnt_vk_find_memory(vk_ctx *c, uint32_t bits, VkMemoryPropertyFlags want, uint32_t *out) {
  for (uint32_t i = 0; i < c->memprops.memoryTypeCount; i++)
    if ((bits & (1u << i)) && (c->memprops.memoryTypes[i].propertyFlags & want) == want) {
      *out = i;
      return 1;
    }
  return 0;
}

static int create_device(vk_ctx *c, nnt_err *e) {
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                .queueFamilyIndex = c->qfam,
                                .queueCount = 1,
                                .pQueuePriorities = &prio};
  VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                           .queueCreateInfoCount = 1,
                           .pQueueCreateInfos = &qi};
  VkResult r = c->f.vkCreateDevice(c->phys, &di, NULL, &c->dev);
  if (r != VK_SUCCESS)
    return nnt_err_set(e, NNT_ERR_NOT_SUPPORTED,
                       "engine 'gpu': cannot open the Vulkan device '%s' (VkResult %d)",
                       c->props.deviceName, (int)r);
#define LOAD_D(fn)                                                                           \
  if (!(c->f.fn = (PFN_##fn)c->f.vkGetDeviceProcAddr(c->dev, #fn)))                          \
    return nnt_err_set(e, NNT_ERR_NOT_SUPPORTED, "engine 'gpu': the Vulkan device lacks " #fn);
  VK_DEVICE_FNS(LOAD_D)
#undef LOAD_D
  c->f.vkGetDeviceQueue(c->dev, c->qfam, 0, &c->queue);

  VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                .queueFamilyIndex = c->qfam};
  if ((r = c->f.vkCreateCommandPool(c->dev, &pi, NULL, &c->pool)) != VK_SUCCESS)
    return nnt_vk_fail(NULL, e, r, "vkCreateCommandPool");
  VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  if ((r = c->f.vkCreateFence(c->dev, &fi, NULL, &c->fence)) != VK_SUCCESS)
    return nnt_vk_fail(NULL, e, r, "vkCreateFence");

  VkDescriptorSetLayoutBinding b[VK_BINDINGS + 1];
  for (unsigned i = 0; i <= VK_BINDINGS; i++)
    b[i] = (VkDescriptorSetLayoutBinding){
        .binding = i,
        .descriptorType = i < VK_BINDINGS ? VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
                                          : VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER_DYNAMIC,
        .descriptorCount = 1,
        .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
  VkDescriptorSetLayoutCreateInfo li = {.sType =
                                            VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                        .bindingCount = VK_BINDINGS + 1,
                                        .pBindings = b};
  if ((r = c->f.vkCreateDescriptorSetLayout(c->dev, &li, NULL, &c->dsl)) != VK_SUCCESS)
    return nnt_vk_fail(NULL, e, r, "vkCreateDescriptorSetLayout");
  VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                    .setLayoutCount = 1,
                                    .pSetLayouts = &c->dsl};
  if ((r = c->f.vkCreatePipelineLayout(c->dev, &pli, NULL, &c->layout)) != VK_SUCCESS)
    return nnt_vk_fail(NULL, e, r, "vkCreatePipelineLayout");
  c->pipes = nnt_calloc(nnt_vk_shader_count, sizeof *c->pipes);
  if (!c->pipes)
    return nnt_err_set(e, NNT_ERR_NOMEM, "engine 'gpu': no memory for the pipelines");

  return NNT_OK;
}

int nnt_vk_buf_create(vk_ctx *c, VkDeviceSize size, int host, VkBufferUsageFlags usage,
                      vk_buf *out) {
  memset(out, 0, sizeof *out);
  VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                           .size = size ? (size + 3) / 4 * 4 : 4,
                           .usage = usage,
                           .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  VkResult r = c->f.vkCreateBuffer(c->dev, &bi, NULL, &out->buf);
  VkMemoryRequirements req = {0};
  uint32_t type = 0;
  if (r == VK_SUCCESS) {
    c->f.vkGetBufferMemoryRequirements(c->dev, out->buf, &req);
    VkMemoryPropertyFlags hv =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int found = host ? (usage & VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT) &&
                           nnt_vk_find_memory(c, req.memoryTypeBits,
                                              hv | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, &type)
                     : nnt_vk_find_memory(c, req.memoryTypeBits,
                                          VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, &type);
    if (!found)
      found = nnt_vk_find_memory(c, req.memoryTypeBits, host ? hv : 0, &type);
    if (!found)
      r = VK_ERROR_OUT_OF_DEVICE_MEMORY;
  }
  if (r == VK_SUCCESS) {
    VkMemoryAllocateInfo mi = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .allocationSize = req.size,
                               .memoryTypeIndex = type};
    r = c->f.vkAllocateMemory(c->dev, &mi, NULL, &out->mem);
  }
  if (r == VK_SUCCESS)
    r = c->f.vkBindBufferMemory(c->dev, out->buf, out->mem, 0);
  if (r == VK_SUCCESS && host)
    r = c->f.vkMapMemory(c->dev, out->mem, 0, VK_WHOLE_SIZE, 0, &out->map);
  if (r != VK_SUCCESS) {
    nnt_vk_buf_destroy(c, out);
    return NNT_ERR_NOMEM;
  }
  out->size = bi.size;
  out->range = bi.size < c->props.limits.maxStorageBufferRange
                   ? bi.size : c->props.limits.maxStorageBufferRange;
  out->serial = ++c->next_serial;
  return NNT_OK;
}

void nnt_vk_buf_destroy(vk_ctx *c, vk_buf *v) {
  if (v->map)
    c->f.vkUnmapMemory(c->dev, v->mem);
  if (v->buf)
    c->f.vkDestroyBuffer(c->dev, v->buf, NULL);
  if (v->mem)
    c->f.vkFreeMemory(c->dev, v->mem, NULL);
  memset(v, 0, sizeof *v);
}

/* Each instance's address tag: the one process-wide counter of the
 * backend (atomic), so two instances never hand out the same address. */
static atomic_uint_fast32_t next_tag;

int nnt_vk_open(vk_ctx **out, const char *device, nnt_err *e) {
  vk_ctx *c = nnt_calloc(1, sizeof *c);
  if (!c)
    return nnt_err_set(e, NNT_ERR_NOMEM, "engine 'gpu': no memory for the Vulkan context");
  pthread_mutex_init(&c->lock, NULL);
  pthread_mutex_init(&c->vlock, NULL);
  c->tag = (atomic_fetch_add(&next_tag, 1) % ((1u << VK_TAG_BITS) - 1)) + 1;
  c->cur = &c->eager;
  pthread_mutex_init(&c->glock, NULL);
  /* Each instance dlopens the loader itself (the C library counts the
   * handles), so no handle is kept at file scope. */
  int rc = load_loader(c, e);
  if (!rc)
    rc = create_instance(c, e);
  if (!rc)
    rc = choose_device(c, device, e);
  if (!rc)
    rc = create_device(c, e);
  if (rc) {
    nnt_vk_close(c);
    return rc;
  }
  *out = c;
  return NNT_OK;
}

void nnt_vk_close(vk_ctx *c) {
  if (!c)
    return;
  if (c->dev) {
    if (c->f.vkDeviceWaitIdle)
      c->f.vkDeviceWaitIdle(c->dev);
    nnt_vk_records_close(c);
    for (size_t i = 0; c->pipes && i < nnt_vk_shader_count; i++)
      if (c->pipes[i].pipe)
        c->f.vkDestroyPipeline(c->dev, c->pipes[i].pipe, NULL);
    if (c->layout)
      c->f.vkDestroyPipelineLayout(c->dev, c->layout, NULL);
    if (c->dsl)
      c->f.vkDestroyDescriptorSetLayout(c->dev, c->dsl, NULL);
    if (c->fence)
      c->f.vkDestroyFence(c->dev, c->fence, NULL);
    if (c->pool)
      c->f.vkDestroyCommandPool(c->dev, c->pool, NULL);
    c->f.vkDestroyDevice(c->dev, NULL);
  }
  if (c->messenger)
    c->f.vkDestroyDebugUtilsMessengerEXT(c->inst, c->messenger, NULL);
  if (c->inst)
    c->f.vkDestroyInstance(c->inst, NULL);
  if (c->lib)
    dlclose(c->lib);
  nnt_free(c->pipes);
  nnt_free(c->prof);
  pthread_mutex_destroy(&c->lock);
  pthread_mutex_destroy(&c->vlock);
  pthread_mutex_destroy(&c->glock);
  nnt_free(c);
}

/* ---- pipelines ---- */

int nnt_vk_pipeline(vk_ctx *c, const char *shader, uint32_t *idx) {
  size_t i = 0;
  while (i < nnt_vk_shader_count && strcmp(nnt_vk_shaders[i].name, shader))
    i++;
  if (i == nnt_vk_shader_count)
    return nnt_vk_fail(c, NULL, VK_ERROR_UNKNOWN, "finding an embedded shader");
  *idx = (uint32_t)i;
  if (c->pipes[i].pipe)
    return NNT_OK;
  VkShaderModuleCreateInfo si = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                 .codeSize = nnt_vk_shaders[i].size,
                                 .pCode = nnt_vk_shaders[i].code};
  VkShaderModule mod;
  VkResult r = c->f.vkCreateShaderModule(c->dev, &si, NULL, &mod);
  if (r != VK_SUCCESS)
    return nnt_vk_fail(c, NULL, r, "vkCreateShaderModule");
  VkComputePipelineCreateInfo pi = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = mod,
                .pName = "main"},
      .layout = c->layout};
  r = c->f.vkCreateComputePipelines(c->dev, VK_NULL_HANDLE, 1, &pi, NULL, &c->pipes[i].pipe);
  c->f.vkDestroyShaderModule(c->dev, mod, NULL);
  if (r != VK_SUCCESS)
    return nnt_vk_fail(c, NULL, r, "vkCreateComputePipelines");
  return NNT_OK;
}
