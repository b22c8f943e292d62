/* The Vulkan backend's entry points for the rest of the library and for
 * tests (docs/gpu.md). Present only in builds with NNT_HAVE_VULKAN. */
#ifndef NNT_VK_H
#define NNT_VK_H

#include <stddef.h>
#include "nntrainer/compute/backend.h"

/* A new Vulkan backend instance: NNT_OK and *out (release with
 * nnt_backend_free; its buffers may outlive the handle), or
 * NNT_ERR_NOT_SUPPORTED saying why (no loader, no device, ...). Each call
 * loads libvulkan.so.1 (NNTRAINER_VULKAN_LOADER names another file), opens
 * its own instance and device (NNTRAINER_VULKAN_DEVICE: an index or part of
 * a name) with its own queue, pipelines and buffers, so two instances may
 * compute at once from two threads; NNTRAINER_VULKAN_VALIDATION=1 turns the
 * validation layer on. */
int nnt_backend_vulkan(nnt_backend **out, nnt_err *e);
/* On the device `device` names (an index or part of its name), which
 * overrides NNTRAINER_VULKAN_DEVICE; NULL: as nnt_backend_vulkan. */
int nnt_backend_vulkan_on(nnt_backend **out, const char *device, nnt_err *e);

/* The warnings and errors the validation layer reported for the Vulkan
 * backend instance be since it was opened: their count, and the first
 * one's text in first (may be NULL). 0 for a backend that is not Vulkan's. */
size_t nnt_vulkan_validation_messages(const nnt_backend *be, char *first, size_t n);
/* 1 when be was opened with the validation layer and its messenger
 * (NNTRAINER_VULKAN_VALIDATION=1 and the layer installed). */
int nnt_vulkan_validation_listening(const nnt_backend *be);

/* What a Vulkan backend instance has done and holds, for tests and
 * benchmarks: submits, dispatches and barriers executed; steps recorded,
 * replayed, recorded again (a replay whose calls differed) and broken by a
 * read in their middle; bytes of device and host memory it holds; the
 * bytes of a chunk (the largest range one binding reaches). */
typedef struct nnt_vulkan_counters {
  uint64_t submits, dispatches, barriers;
  uint64_t recorded_steps, replayed_steps, rerecorded_steps, step_syncs;
  size_t device_bytes, host_bytes, chunk_bytes;
} nnt_vulkan_counters;
/* NNT_ERR_INVAL for a backend that is not Vulkan's. */
int nnt_vulkan_stats(const nnt_backend *be, nnt_vulkan_counters *out);
/* Which SGEMM variant ran how often on the Vulkan backend instance be
 * since it was opened (one count per gemm call, split-k's two dispatches
 * included), as text in buf: "gemm paths: tile128 0, tile64 3, small32 1,
 * splitk 2" (truncated to n - 1 characters). @return the number of gemm
 * calls counted; 0 (and "" in buf) for a backend that is not Vulkan's. */
size_t nnt_vulkan_gemm_report(const nnt_backend *be, char *buf, size_t n);

/* GPU time per shader (and per copy and fill) on the Vulkan backend
 * instance be since it was opened or last reset, from timestamps written
 * after every command of a submit: on when NNTRAINER_VULKAN_PROFILE=1 was
 * set when it opened (and its queue has timestamps). A command's time is
 * from the end of the one before it (or the submit's start) to its own
 * end, waits at barriers included. As text in buf (truncated to n - 1
 * characters): a total line, then one line per kind of command by time,
 * most first. @return the commands timed; 0 with the reason in buf where
 * profiling is off or be is not Vulkan's. */
size_t nnt_vulkan_profile_report(const nnt_backend *be, char *buf, size_t n);
/* Empties the profile (after warm-up steps, say). */
void nnt_vulkan_profile_reset(const nnt_backend *be);

#endif
