/* GPU timestamps per command (NNTRAINER_VULKAN_PROFILE=1, docs/gpu.md):
 * each recording has a query pool; its command buffer resets it at the
 * start, writes a timestamp there and one after every command. A replayed
 * step writes the same queries again, so its times are read after every
 * submit and added per shader. Off, none of this is recorded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nntrainer/vulkan/vk_impl.h"
#include "nntrainer/vulkan/vk_shaders.h"

/* the command kinds after the shaders: copy in, copy out, fill */
#define VK_PROF_KINDS (nnt_vk_shader_count + 3)

int nnt_vk_profile_open(vk_ctx *c, uint32_t timestamp_bits, nnt_err *e) {
  const char *v = getenv("NNTRAINER_VULKAN_PROFILE");
  if (!v || strcmp(v, "1"))
    return NNT_OK;
  if (!timestamp_bits || c->props.limits.timestampPeriod <= 0.0f) {
    c->profile_off = "the device's compute queue has no timestamps";
    return NNT_OK;
  }
  c->prof = nnt_calloc(VK_PROF_KINDS, sizeof *c->prof);
  if (!c->prof)
    return nnt_err_set(e, NNT_ERR_NOMEM, "engine 'gpu': no memory for the profile");
  c->ts_period = c->props.limits.timestampPeriod;
  c->ts_mask = timestamp_bits >= 64 ? ~0ull : (1ull << timestamp_bits) - 1;
  c->profile = 1;
  return NNT_OK;
}

int nnt_vk_profile_begin(vk_ctx *c, vk_rec *r) {
  if (!c->profile)
    return NNT_OK;
  if (!r->qpool) {
    VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                .queryCount = VK_PROF_QUERIES};
    r->qwhat = nnt_calloc(VK_PROF_QUERIES, sizeof *r->qwhat);
    r->qts = nnt_calloc(VK_PROF_QUERIES, sizeof *r->qts);
    if (!r->qwhat || !r->qts)
      return NNT_ERR_NOMEM;
    VkResult res = c->f.vkCreateQueryPool(c->dev, &qi, NULL, &r->qpool);
    if (res != VK_SUCCESS)
      return nnt_vk_fail(c, NULL, res, "vkCreateQueryPool");
  }
  c->f.vkCmdResetQueryPool(r->cmd, r->qpool, 0, VK_PROF_QUERIES);
  c->f.vkCmdWriteTimestamp(r->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, r->qpool, 0);
  r->n_q = 1;
  r->qwhat[0] = 0;
  return NNT_OK;
}

void nnt_vk_profile_mark(vk_ctx *c, vk_rec *r, uint32_t what) {
  if (!r->qpool)
    return;
  if (r->n_q == VK_PROF_QUERIES) { /* not timed: counted when it runs */
    r->qwhat[0]++;
    return;
  }
  c->f.vkCmdWriteTimestamp(r->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, r->qpool, r->n_q);
  r->qwhat[r->n_q++] = what;
}

void nnt_vk_profile_collect(vk_ctx *c, vk_rec *r) {
  if (!c->profile || !r->qpool || r->n_q < 2)
    return;
  VkResult res = c->f.vkGetQueryPoolResults(c->dev, r->qpool, 0, r->n_q,
                                            r->n_q * sizeof *r->qts, r->qts, sizeof *r->qts,
                                            VK_QUERY_RESULT_64_BIT);
  if (res != VK_SUCCESS) {
    c->prof_untimed += r->n_q - 1;
    return;
  }
  /* commands that overlap may end out of order: each one's time runs from
   * the latest end before it, never below zero */
  uint64_t t0 = r->qts[0] & c->ts_mask, last = t0;
  for (uint32_t q = 1; q < r->n_q; q++) {
    uint64_t t = r->qts[q] & c->ts_mask;
    vk_prof *p = &c->prof[r->qwhat[q] < VK_PROF_KINDS ? r->qwhat[q] : 0];
    p->calls++;
    if (t > last) {
      p->ns += (double)(t - last) * c->ts_period;
      last = t;
    }
  }
  c->prof_total_ns += (double)(last - t0) * c->ts_period;
  c->prof_submits++;
  c->prof_untimed += r->qwhat[0];
}

void nnt_vk_profile_release(vk_ctx *c, vk_rec *r) {
  if (r->qpool)
    c->f.vkDestroyQueryPool(c->dev, r->qpool, NULL);
  nnt_free(r->qwhat);
  nnt_free(r->qts);
  r->qpool = VK_NULL_HANDLE;
  r->qwhat = NULL;
  r->qts = NULL;
  r->n_q = 0;
}

static const char *kind_name(size_t k) {
  static const char *const extra[3] = {"(copy-in)", "(copy-out)", "(fill-buffer)"};
  return k < nnt_vk_shader_count ? nnt_vk_shaders[k].name : extra[k - nnt_vk_shader_count];
}

size_t nnt_vulkan_profile_report(const nnt_backend *be, char *buf, size_t n) {
  vk_ctx *c = nnt_vk_of(be);
  if (n)
    buf[0] = '\0';
  if (!c) {
    snprintf(buf, n, "no profile: not a Vulkan backend");
    return 0;
  }
  pthread_mutex_lock(&c->lock);
  if (!c->profile) {
    snprintf(buf, n, "no profile: %s",
             c->profile_off ? c->profile_off : "NNTRAINER_VULKAN_PROFILE=1 was not set");
    pthread_mutex_unlock(&c->lock);
    return 0;
  }
  size_t kinds = VK_PROF_KINDS, timed = 0, len = 0;
  size_t *order = nnt_calloc(kinds, sizeof *order);
  if (!order) {
    snprintf(buf, n, "no profile: out of memory");
    pthread_mutex_unlock(&c->lock);
    return 0;
  }
  for (size_t k = 0; k < kinds; k++) {
    order[k] = k;
    timed += c->prof[k].calls;
  }
  for (size_t a = 1; a < kinds; a++) /* by time, most first */
    for (size_t b = a; b > 0 && c->prof[order[b]].ns > c->prof[order[b - 1]].ns; b--) {
      size_t t = order[b];
      order[b] = order[b - 1];
      order[b - 1] = t;
    }
#define PUT(...)                                                                             \
  do {                                                                                       \
    int w_ = snprintf(buf + len, len < n ? n - len : 0, __VA_ARGS__);                       \
    if (w_ > 0)                                                                              \
      len += (size_t)w_;                                                                     \
  } while (0)
  PUT("gpu time %.3f ms in %llu submits, %zu commands timed, %llu not\n",
      c->prof_total_ns / 1e6, (unsigned long long)c->prof_submits, timed,
      (unsigned long long)c->prof_untimed);
  for (size_t i = 0; i < kinds; i++) {
    const vk_prof *p = &c->prof[order[i]];
    if (!p->calls)
      continue;
    PUT("%-18s %8llu calls %10.3f ms %5.1f%% %9.2f us/call\n", kind_name(order[i]),
        (unsigned long long)p->calls, p->ns / 1e6,
        c->prof_total_ns > 0 ? 100.0 * p->ns / c->prof_total_ns : 0.0, p->ns / 1e3 / p->calls);
  }
#undef PUT
  nnt_free(order);
  pthread_mutex_unlock(&c->lock);
  return timed;
}

void nnt_vulkan_profile_reset(const nnt_backend *be) {
  vk_ctx *c = nnt_vk_of(be);
  if (!c)
    return;
  pthread_mutex_lock(&c->lock);
  if (c->prof)
    memset(c->prof, 0, VK_PROF_KINDS * sizeof *c->prof);
  c->prof_total_ns = 0.0;
  c->prof_submits = c->prof_untimed = 0;
  pthread_mutex_unlock(&c->lock);
}
