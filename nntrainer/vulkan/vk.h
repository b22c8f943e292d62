/* The Vulkan backend's entry points for the rest of the library and for
 * tests (docs/gpu.md). Present only in builds with NNT_HAVE_VULKAN. */
#ifndef NNT_VK_H
#define NNT_VK_H

#include <stddef.h>
#include "nntrainer/compute/backend.h"

/* The Vulkan backend: NNT_OK and *out (release with nnt_backend_free), or
 * NNT_ERR_NOT_SUPPORTED saying why (no loader, no device, ...). The first
 * call loads libvulkan.so.1 (NNTRAINER_VULKAN_LOADER names another file)
 * and picks a device (NNTRAINER_VULKAN_DEVICE: an index or part of a
 * name); NNTRAINER_VULKAN_VALIDATION=1 turns the validation layer on. */
int nnt_backend_vulkan(nnt_backend **out, nnt_err *e);

/* The warnings and errors the validation layer reported since the process
 * started: their count, and the first one's text in first (may be NULL). */
size_t nnt_vulkan_validation_messages(char *first, size_t n);
/* 1 once a device was opened with the validation layer and its messenger
 * (NNTRAINER_VULKAN_VALIDATION=1 and the layer installed). */
int nnt_vulkan_validation_listening(void);

#endif
