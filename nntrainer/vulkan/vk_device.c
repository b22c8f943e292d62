/* The Vulkan backend's device (vk_impl.h): loading libvulkan at run time,
 * the instance (with the validation layer and its messenger on request),
 * choosing the device, the queue, command buffer and descriptor pool, the
 * pipelines (one per embedded shader, created at first use), and
 * submitting. */
#include "nntrainer/vulkan/vk_impl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nntrainer/vulkan/vk_shaders.h"

/* ---- the validation record (per backend instance) ---- */

static vk_ctx *vk_of(const nnt_backend *be) {
  return be && be->ctx && be->name && !strcmp(be->name, "vulkan") ? be->ctx : NULL;
}

int nnt_vulkan_validation_listening(const nnt_backend *be) {
  vk_ctx *c = vk_of(be);
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
  vk_ctx *c = vk_of(be);
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

/* A queue family with compute, or -1. */
static int compute_family(vk_ctx *c, VkPhysicalDevice pd) {
  uint32_t n = 0;
  c->f.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
  VkQueueFamilyProperties *q = nnt_calloc(n ? n : 1, sizeof *q);
  int fam = -1;
  if (q) {
    c->f.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q);
    for (uint32_t i = 0; i < n && fam < 0; i++)
      if (q[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
        fam = (int)i;
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

/* discrete > integrated > virtual > CPU, or NNTRAINER_VULKAN_DEVICE. */
static int choose_device(vk_ctx *c, nnt_err *e) {
  uint32_t n = 0;
  VkResult r = c->f.vkEnumeratePhysicalDevices(c->inst, &n, NULL);
  if (r != VK_SUCCESS || !n)
    return nnt_err_set(e, NNT_ERR_NOT_SUPPORTED, "engine 'gpu': no Vulkan device (VkResult %d)",
                       (int)r);
  VkPhysicalDevice *pd = nnt_calloc(n, sizeof *pd);
  if (!pd)
    return nnt_err_set(e, NNT_ERR_NOMEM, "engine 'gpu': cannot list the Vulkan devices");
  c->f.vkEnumeratePhysicalDevices(c->inst, &n, pd);
  const char *want = getenv("NNTRAINER_VULKAN_DEVICE");
  int best = -1, best_rank = -1, rc = NNT_OK;
  char names[512] = "";
  size_t len = 0;
  for (uint32_t i = 0; i < n; i++) {
    VkPhysicalDeviceProperties p;
    c->f.vkGetPhysicalDeviceProperties(pd[i], &p);
    if (len < sizeof names)
      len += (size_t)snprintf(names + len, sizeof names - len, "%s%u: %s", i ? ", " : "", i,
                              p.deviceName);
    if (p.apiVersion < VK_API_VERSION_1_1 || compute_family(c, pd[i]) < 0 ||
        p.limits.maxPerStageDescriptorStorageBuffers < VK_BINDINGS ||
        p.limits.maxPushConstantsSize < sizeof(vk_push))
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
                           "engine 'gpu': NNTRAINER_VULKAN_DEVICE='%s' matches no Vulkan 1.1 "
                           "device with a compute queue (devices: %s)", want, names)
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
  c->qfam = (uint32_t)compute_family(c, c->phys);
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
  VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                    .commandPool = c->pool,
                                    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                    .commandBufferCount = 1};
  if ((r = c->f.vkAllocateCommandBuffers(c->dev, &ai, &c->cmd)) != VK_SUCCESS)
    return nnt_vk_fail(NULL, e, r, "vkAllocateCommandBuffers");
  VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  if ((r = c->f.vkCreateFence(c->dev, &fi, NULL, &c->fence)) != VK_SUCCESS)
    return nnt_vk_fail(NULL, e, r, "vkCreateFence");

  VkDescriptorSetLayoutBinding b[VK_BINDINGS];
  for (unsigned i = 0; i < VK_BINDINGS; i++)
    b[i] = (VkDescriptorSetLayoutBinding){.binding = i,
                                          .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                          .descriptorCount = 1,
                                          .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
  VkDescriptorSetLayoutCreateInfo li = {.sType =
                                            VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                        .bindingCount = VK_BINDINGS,
                                        .pBindings = b};
  if ((r = c->f.vkCreateDescriptorSetLayout(c->dev, &li, NULL, &c->dsl)) != VK_SUCCESS)
    return nnt_vk_fail(NULL, e, r, "vkCreateDescriptorSetLayout");
  VkPushConstantRange pr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = sizeof(vk_push)};
  VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                    .setLayoutCount = 1,
                                    .pSetLayouts = &c->dsl,
                                    .pushConstantRangeCount = 1,
                                    .pPushConstantRanges = &pr};
  if ((r = c->f.vkCreatePipelineLayout(c->dev, &pli, NULL, &c->layout)) != VK_SUCCESS)
    return nnt_vk_fail(NULL, e, r, "vkCreatePipelineLayout");
  VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                             .descriptorCount = VK_SETS_PER_FLUSH * VK_BINDINGS};
  VkDescriptorPoolCreateInfo dpi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                    .maxSets = VK_SETS_PER_FLUSH,
                                    .poolSizeCount = 1,
                                    .pPoolSizes = &ps};
  if ((r = c->f.vkCreateDescriptorPool(c->dev, &dpi, NULL, &c->dpool)) != VK_SUCCESS)
    return nnt_vk_fail(NULL, e, r, "vkCreateDescriptorPool");
  c->pipes = nnt_calloc(nnt_vk_shader_count, sizeof *c->pipes);
  if (!c->pipes)
    return nnt_err_set(e, NNT_ERR_NOMEM, "engine 'gpu': no memory for the pipelines");

  /* the staging buffer: host-visible, coherent */
  VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                           .size = VK_STAGING_BYTES,
                           .usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                    VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                           .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  if ((r = c->f.vkCreateBuffer(c->dev, &bi, NULL, &c->stage)) != VK_SUCCESS)
    return nnt_vk_fail(NULL, e, r, "vkCreateBuffer (staging)");
  VkMemoryRequirements req;
  c->f.vkGetBufferMemoryRequirements(c->dev, c->stage, &req);
  uint32_t type;
  if (!nnt_vk_find_memory(c, req.memoryTypeBits,
                          VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                              VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, &type))
    return nnt_err_set(e, NNT_ERR_NOT_SUPPORTED,
                       "engine 'gpu': the Vulkan device has no host-visible coherent memory");
  VkMemoryAllocateInfo mi = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                             .allocationSize = req.size,
                             .memoryTypeIndex = type};
  if ((r = c->f.vkAllocateMemory(c->dev, &mi, NULL, &c->stage_mem)) != VK_SUCCESS ||
      (r = c->f.vkBindBufferMemory(c->dev, c->stage, c->stage_mem, 0)) != VK_SUCCESS ||
      (r = c->f.vkMapMemory(c->dev, c->stage_mem, 0, VK_WHOLE_SIZE, 0, &c->stage_map)) !=
          VK_SUCCESS)
    return nnt_vk_fail(NULL, e, r, "allocating the staging buffer");
  return NNT_OK;
}

int nnt_vk_open(vk_ctx **out, nnt_err *e) {
  vk_ctx *c = nnt_calloc(1, sizeof *c);
  if (!c)
    return nnt_err_set(e, NNT_ERR_NOMEM, "engine 'gpu': no memory for the Vulkan context");
  pthread_mutex_init(&c->lock, NULL);
  pthread_mutex_init(&c->vlock, NULL);
  pthread_mutex_init(&c->glock, NULL);
  /* Each instance dlopens the loader itself (the C library counts the
   * handles), so no handle is kept at file scope. */
  int rc = load_loader(c, e);
  if (!rc)
    rc = create_instance(c, e);
  if (!rc)
    rc = choose_device(c, e);
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
    for (size_t i = 0; c->pipes && i < nnt_vk_shader_count; i++)
      if (c->pipes[i].pipe)
        c->f.vkDestroyPipeline(c->dev, c->pipes[i].pipe, NULL);
    if (c->stage_map)
      c->f.vkUnmapMemory(c->dev, c->stage_mem);
    if (c->stage)
      c->f.vkDestroyBuffer(c->dev, c->stage, NULL);
    if (c->stage_mem)
      c->f.vkFreeMemory(c->dev, c->stage_mem, NULL);
    if (c->dpool)
      c->f.vkDestroyDescriptorPool(c->dev, c->dpool, NULL);
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
  nnt_free(c->live);
  pthread_mutex_destroy(&c->lock);
  pthread_mutex_destroy(&c->vlock);
  pthread_mutex_destroy(&c->glock);
  nnt_free(c);
}

/* ---- recording and submitting ---- */

int nnt_vk_begin(vk_ctx *c) {
  if (c->recording)
    return NNT_OK;
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  VkResult r = c->f.vkBeginCommandBuffer(c->cmd, &bi);
  if (r != VK_SUCCESS)
    return nnt_vk_fail(c, NULL, r, "vkBeginCommandBuffer");
  c->recording = 1;
  return NNT_OK;
}

int nnt_vk_flush(vk_ctx *c, nnt_err *e) {
  if (c->failed)
    return nnt_err_set(e, NNT_ERR_UNKNOWN, "engine 'gpu': an earlier error: %s", c->fail_msg);
  if (!c->recording)
    return NNT_OK;
  c->recording = 0;
  VkResult r = c->f.vkEndCommandBuffer(c->cmd);
  if (r != VK_SUCCESS)
    return nnt_vk_fail(c, e, r, "vkEndCommandBuffer");
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                     .commandBufferCount = 1,
                     .pCommandBuffers = &c->cmd};
  if ((r = c->f.vkQueueSubmit(c->queue, 1, &si, c->fence)) != VK_SUCCESS)
    return nnt_vk_fail(c, e, r, "vkQueueSubmit");
  if ((r = c->f.vkWaitForFences(c->dev, 1, &c->fence, VK_TRUE, UINT64_MAX)) != VK_SUCCESS)
    return nnt_vk_fail(c, e, r, "vkWaitForFences");
  if ((r = c->f.vkResetFences(c->dev, 1, &c->fence)) != VK_SUCCESS)
    return nnt_vk_fail(c, e, r, "vkResetFences");
  c->f.vkResetDescriptorPool(c->dev, c->dpool, 0);
  c->sets_used = 0;
  return NNT_OK;
}

void nnt_vk_barrier(vk_ctx *c) {
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT |
                                         VK_ACCESS_TRANSFER_WRITE_BIT,
                        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                         VK_ACCESS_TRANSFER_READ_BIT |
                                         VK_ACCESS_TRANSFER_WRITE_BIT};
  VkPipelineStageFlags st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  c->f.vkCmdPipelineBarrier(c->cmd, st, st, 0, 1, &mb, 0, NULL, 0, NULL);
}

int nnt_vk_pipeline(vk_ctx *c, const char *shader, VkPipeline *out) {
  size_t i = 0;
  while (i < nnt_vk_shader_count && strcmp(nnt_vk_shaders[i].name, shader))
    i++;
  if (i == nnt_vk_shader_count)
    return nnt_vk_fail(c, NULL, VK_ERROR_UNKNOWN, "finding an embedded shader");
  if (c->pipes[i].pipe) {
    *out = c->pipes[i].pipe;
    return NNT_OK;
  }
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
  *out = c->pipes[i].pipe;
  return NNT_OK;
}
