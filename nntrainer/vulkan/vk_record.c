/* The Vulkan backend's command recording (vk_impl.h): every dispatch, copy
 * and fill becomes an entry of a recording and is emitted into its command
 * buffer, with a barrier only where the entry reads or writes a byte range
 * that an entry since the last barrier wrote (or writes one it read).
 * Outside a step, ops go to the eager recording, submitted when a read
 * needs its results. A step (step_begin .. step_end) is recorded the first
 * time its key is seen and replayed after: each call is matched against
 * the recorded entry's signature and only writes its parameters (or staged
 * bytes) into the recording's slot; a call that differs records the step
 * anew from there. One submit and one wait per step. */
#include "nntrainer/vulkan/vk_impl.h"

#include <string.h>

#include "nntrainer/vulkan/vk_shaders.h"

#define VK_MAX_STEPS 8         /* step recordings kept (one per mode is typical) */
#define VK_EAGER_ENTRIES 16384 /* the eager recording is submitted past this */

/* ---- host blocks ---- */

static void blocks_free(vk_ctx *c, vk_blocks *bl) {
  for (size_t i = 0; i < bl->n; i++) {
    c->host_bytes -= bl->b[i]->size;
    nnt_vk_buf_destroy(c, bl->b[i]);
    nnt_free(bl->b[i]);
  }
  nnt_free(bl->b);
  memset(bl, 0, sizeof *bl);
}

static int blocks_add(vk_ctx *c, vk_blocks *bl, VkDeviceSize size, VkBufferUsageFlags usage) {
  vk_buf **nb = nnt_realloc(bl->b, (bl->n + 1) * sizeof *nb);
  if (!nb)
    return NNT_ERR_NOMEM;
  bl->b = nb;
  vk_buf *v = nnt_calloc(1, sizeof *v);
  if (!v)
    return NNT_ERR_NOMEM;
  int rc = nnt_vk_buf_create(c, size, 1, usage, v);
  if (rc) {
    nnt_free(v);
    return rc;
  }
  bl->b[bl->n++] = v;
  c->host_bytes += v->size;
  return NNT_OK;
}

/* n bytes of staging in r: its block and offset. */
static int take_staging(vk_ctx *c, vk_rec *r, VkDeviceSize n, uint32_t *blk, VkDeviceSize *off) {
  vk_blocks *bl = &r->staging;
  n = (n + 15) & ~(VkDeviceSize)15;
  /* the block in use is the last one with bytes taken: total counts them */
  size_t i = 0;
  VkDeviceSize skip = bl->total;
  while (i < bl->n && skip >= bl->b[i]->size)
    skip -= bl->b[i]->size, i++;
  /* skip: bytes taken in block i; a request that does not fit moves on */
  while (i < bl->n && bl->b[i]->size - skip < n) {
    bl->total += bl->b[i]->size - skip; /* the tail stays unused */
    skip = 0, i++;
  }
  if (i == bl->n) {
    int rc = blocks_add(c, bl, n > VK_STAGING_BLOCK ? n : VK_STAGING_BLOCK,
                        VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT);
    if (rc)
      return rc;
  }
  *blk = (uint32_t)i;
  *off = skip;
  bl->total += n;
  bl->used += n;
  return NNT_OK;
}

/* A parameter slot in r (slot s: block s / VK_PARAM_SLOTS). */
static int take_param(vk_ctx *c, vk_rec *r, uint32_t *slot) {
  vk_blocks *bl = &r->params;
  size_t s = (size_t)bl->used;
  if (s / VK_PARAM_SLOTS >= bl->n) {
    int rc = blocks_add(c, bl, c->pstride * VK_PARAM_SLOTS, VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT);
    if (rc)
      return rc;
  }
  *slot = (uint32_t)s;
  bl->used++;
  return NNT_OK;
}

static void *param_at(vk_ctx *c, vk_rec *r, uint32_t slot) {
  return (char *)r->params.b[slot / VK_PARAM_SLOTS]->map + (slot % VK_PARAM_SLOTS) * c->pstride;
}

static void *staging_at(vk_rec *r, const vk_entry *en) {
  return (char *)r->staging.b[en->blk]->map + en->soff;
}

/* ---- descriptor sets: one per distinct set of buffers ---- */

static int get_set(vk_ctx *c, vk_buf *const bind[VK_BINDINGS], vk_buf *params,
                   VkDescriptorSet *out) {
  VkBuffer key[VK_BINDINGS + 1];
  for (unsigned i = 0; i < VK_BINDINGS; i++)
    key[i] = bind[i]->buf;
  key[VK_BINDINGS] = params->buf;
  for (size_t i = 0; i < c->n_dsets; i++)
    if (!memcmp(c->dsets[i].b, key, sizeof key)) {
      *out = c->dsets[i].set;
      return NNT_OK;
    }
  if (c->n_dsets == c->cap_dsets) {
    size_t cap = c->cap_dsets ? 2 * c->cap_dsets : 32;
    vk_dset *nd = nnt_realloc(c->dsets, cap * sizeof *nd);
    if (!nd)
      return NNT_ERR_NOMEM;
    c->dsets = nd, c->cap_dsets = cap;
  }
  VkResult r;
  if (!c->n_dpools || c->sets_in_last == VK_SETS_PER_POOL) {
    VkDescriptorPool *np = nnt_realloc(c->dpools, (c->n_dpools + 1) * sizeof *np);
    if (!np)
      return NNT_ERR_NOMEM;
    c->dpools = np;
    VkDescriptorPoolSize ps[2] = {
        {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
         .descriptorCount = VK_SETS_PER_POOL * VK_BINDINGS},
        {.type = VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER_DYNAMIC, .descriptorCount = VK_SETS_PER_POOL}};
    VkDescriptorPoolCreateInfo dpi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                      .maxSets = VK_SETS_PER_POOL,
                                      .poolSizeCount = 2,
                                      .pPoolSizes = ps};
    if ((r = c->f.vkCreateDescriptorPool(c->dev, &dpi, NULL, &c->dpools[c->n_dpools])) !=
        VK_SUCCESS)
      return nnt_vk_fail(c, NULL, r, "vkCreateDescriptorPool");
    c->n_dpools++;
    c->sets_in_last = 0;
  }
  VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                    .descriptorPool = c->dpools[c->n_dpools - 1],
                                    .descriptorSetCount = 1,
                                    .pSetLayouts = &c->dsl};
  VkDescriptorSet set;
  if ((r = c->f.vkAllocateDescriptorSets(c->dev, &ai, &set)) != VK_SUCCESS)
    return nnt_vk_fail(c, NULL, r, "vkAllocateDescriptorSets");
  c->sets_in_last++;
  VkDescriptorBufferInfo bi[VK_BINDINGS + 1];
  VkWriteDescriptorSet w[VK_BINDINGS + 1];
  for (unsigned i = 0; i <= VK_BINDINGS; i++) {
    int uni = i == VK_BINDINGS;
    bi[i] = (VkDescriptorBufferInfo){.buffer = key[i],
                                     .offset = 0,
                                     .range = uni ? sizeof(vk_push) : bind[i]->range};
    w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                  .dstSet = set,
                                  .dstBinding = i,
                                  .descriptorCount = 1,
                                  .descriptorType = uni ? VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER_DYNAMIC
                                                        : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                  .pBufferInfo = &bi[i]};
  }
  c->f.vkUpdateDescriptorSets(c->dev, VK_BINDINGS + 1, w, 0, NULL);
  memcpy(c->dsets[c->n_dsets].b, key, sizeof key);
  c->dsets[c->n_dsets++].set = set;
  *out = set;
  return NNT_OK;
}

static void sets_drop(vk_ctx *c) {
  for (size_t i = 0; i < c->n_dpools; i++)
    c->f.vkDestroyDescriptorPool(c->dev, c->dpools[i], NULL);
  nnt_free(c->dpools);
  c->dpools = NULL;
  c->n_dpools = 0;
  c->sets_in_last = 0;
  c->n_dsets = 0;
}

/* ---- recordings ---- */

static void rec_reset(vk_rec *r) {
  r->n_ent = 0;
  r->params.used = 0;
  r->staging.used = r->staging.total = 0;
  r->n_pend = 0;
  r->n_barriers = r->n_dispatch = 0;
  r->any_out = 0;
  r->bound = VK_NULL_HANDLE;
}

/* The cached descriptor sets that name one of r's parameter blocks go
 * (a later buffer may get a destroyed one's handle). */
static void sets_forget_params(vk_ctx *c, const vk_rec *r) {
  for (size_t i = 0; i < c->n_dsets;) {
    int hit = 0;
    for (size_t j = 0; j < r->params.n && !hit; j++)
      hit = c->dsets[i].b[VK_BINDINGS] == r->params.b[j]->buf;
    if (hit)
      c->dsets[i] = c->dsets[--c->n_dsets];
    else
      i++;
  }
}

static void rec_release(vk_ctx *c, vk_rec *r) {
  sets_forget_params(c, r);
  if (r->cmd)
    c->f.vkFreeCommandBuffers(c->dev, c->pool, 1, &r->cmd);
  blocks_free(c, &r->params);
  blocks_free(c, &r->staging);
  nnt_vk_profile_release(c, r);
  nnt_free(r->ent);
  nnt_free(r->pend);
  memset(r, 0, sizeof *r);
}

static int rec_open(vk_ctx *c, vk_rec *r) {
  if (r->open)
    return NNT_OK;
  VkResult res;
  if (!r->cmd) {
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = c->pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    if ((res = c->f.vkAllocateCommandBuffers(c->dev, &ai, &r->cmd)) != VK_SUCCESS)
      return nnt_vk_fail(c, NULL, res, "vkAllocateCommandBuffers");
  }
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = r->is_step ? 0
                                                     : VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  if ((res = c->f.vkBeginCommandBuffer(r->cmd, &bi)) != VK_SUCCESS)
    return nnt_vk_fail(c, NULL, res, "vkBeginCommandBuffer");
  int rc = nnt_vk_profile_begin(c, r);
  if (rc)
    return rc;
  r->open = 1;
  r->n_pend = 0;
  r->bound = VK_NULL_HANDLE;
  return NNT_OK;
}

static void barrier(vk_ctx *c, vk_rec *r) {
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT |
                                         VK_ACCESS_TRANSFER_WRITE_BIT,
                        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                         VK_ACCESS_TRANSFER_READ_BIT |
                                         VK_ACCESS_TRANSFER_WRITE_BIT};
  VkPipelineStageFlags st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  c->f.vkCmdPipelineBarrier(r->cmd, st, st, 0, 1, &mb, 0, NULL, 0, NULL);
  r->n_pend = 0;
  r->n_barriers++;
}

/* A barrier before the spans when one of them overlaps a span since the
 * last barrier and one of the two writes; then the spans join the list. */
static int track(vk_ctx *c, vk_rec *r, const vk_span *s, unsigned n) {
  int need = 0;
  for (unsigned i = 0; i < n && !need; i++)
    for (size_t j = 0; j < r->n_pend && !need; j++) {
      const vk_span *p = &r->pend[j];
      need = p->serial == s[i].serial && p->lo < s[i].hi && s[i].lo < p->hi &&
             (p->write || s[i].write);
    }
  if (need)
    barrier(c, r);
  if (r->n_pend + n > r->cap_pend) {
    size_t cap = r->cap_pend ? 2 * r->cap_pend : 64;
    while (cap < r->n_pend + n)
      cap *= 2;
    vk_span *np = nnt_realloc(r->pend, cap * sizeof *np);
    if (!np)
      return NNT_ERR_NOMEM;
    r->pend = np, r->cap_pend = cap;
  }
  for (unsigned i = 0; i < n; i++)
    if (s[i].hi > s[i].lo)
      r->pend[r->n_pend++] = s[i];
  return NNT_OK;
}

/* The commands of entry en into r's command buffer. */
static int emit(vk_ctx *c, vk_rec *r, const vk_entry *en) {
  int rc = rec_open(c, r);
  if (!rc)
    rc = track(c, r, en->sig.span, en->sig.n_span);
  if (rc)
    return rc;
  switch ((vk_ekind)en->sig.kind) {
  case VK_E_DISPATCH: {
    VkPipeline pipe = c->pipes[en->sig.pipe].pipe;
    VkDescriptorSet set;
    if ((rc = get_set(c, en->bind, r->params.b[en->slot / VK_PARAM_SLOTS], &set)))
      return rc;
    if (r->bound != pipe) {
      c->f.vkCmdBindPipeline(r->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
      r->bound = pipe;
    }
    uint32_t dyn = (uint32_t)((en->slot % VK_PARAM_SLOTS) * c->pstride);
    c->f.vkCmdBindDescriptorSets(r->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, c->layout, 0, 1, &set,
                                 1, &dyn);
    c->f.vkCmdDispatch(r->cmd, en->sig.gx, en->sig.gy, 1);
    nnt_vk_profile_mark(c, r, en->sig.pipe);
    r->n_dispatch++;
    break;
  }
  case VK_E_COPY_IN:
  case VK_E_COPY_OUT: {
    int in = en->sig.kind == VK_E_COPY_IN;
    VkBuffer st = r->staging.b[en->blk]->buf;
    VkBufferCopy cp = {.srcOffset = in ? en->soff : en->sig.off,
                       .dstOffset = in ? en->sig.off : en->soff,
                       .size = en->sig.size};
    c->f.vkCmdCopyBuffer(r->cmd, in ? st : en->dev->buf, in ? en->dev->buf : st, 1, &cp);
    nnt_vk_profile_mark(c, r, (uint32_t)nnt_vk_shader_count + (in ? 0 : 1));
    r->any_out |= !in;
    break;
  }
  case VK_E_FILL:
    c->f.vkCmdFillBuffer(r->cmd, en->dev->buf, en->sig.off, en->sig.size, en->sig.word);
    nnt_vk_profile_mark(c, r, (uint32_t)nnt_vk_shader_count + 2);
    break;
  }
  return NNT_OK;
}

/* Space for entry en's parameters or staged bytes in r. */
static int take_room(vk_ctx *c, vk_rec *r, vk_entry *en) {
  if (en->sig.kind == VK_E_DISPATCH)
    return take_param(c, r, &en->slot);
  if (en->sig.kind == VK_E_COPY_IN || en->sig.kind == VK_E_COPY_OUT)
    return take_staging(c, r, en->sig.size, &en->blk, &en->soff);
  return NNT_OK;
}

static int append(vk_ctx *c, vk_rec *r, const vk_entry *en) {
  if (r->n_ent == r->cap_ent) {
    size_t cap = r->cap_ent ? 2 * r->cap_ent : 256;
    vk_entry *ne = nnt_realloc(r->ent, cap * sizeof *ne);
    if (!ne)
      return NNT_ERR_NOMEM;
    r->ent = ne, r->cap_ent = cap;
  }
  r->ent[r->n_ent++] = *en;
  return emit(c, r, &r->ent[r->n_ent - 1]);
}

/* Submit r, wait, and land its reads. */
static int rec_submit(vk_ctx *c, vk_rec *r, nnt_err *e) {
  VkResult res;
  if (r->open) {
    if (r->any_out) { /* the copies' bytes visible to the host after the wait */
      VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                            .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                            .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
      c->f.vkCmdPipelineBarrier(r->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                                VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    }
    r->open = 0;
    if ((res = c->f.vkEndCommandBuffer(r->cmd)) != VK_SUCCESS)
      return nnt_vk_fail(c, e, res, "vkEndCommandBuffer");
  }
  if (!r->n_ent)
    return NNT_OK;
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                     .commandBufferCount = 1,
                     .pCommandBuffers = &r->cmd};
  if ((res = c->f.vkQueueSubmit(c->queue, 1, &si, c->fence)) != VK_SUCCESS)
    return nnt_vk_fail(c, e, res, "vkQueueSubmit");
  if ((res = c->f.vkWaitForFences(c->dev, 1, &c->fence, VK_TRUE, UINT64_MAX)) != VK_SUCCESS)
    return nnt_vk_fail(c, e, res, "vkWaitForFences");
  if ((res = c->f.vkResetFences(c->dev, 1, &c->fence)) != VK_SUCCESS)
    return nnt_vk_fail(c, e, res, "vkResetFences");
  nnt_vk_profile_collect(c, r);
  c->cnt.submits++;
  c->cnt.dispatches += r->n_dispatch;
  c->cnt.barriers += r->n_barriers;
  for (size_t i = 0; i < c->n_dl; i++) {
    const vk_entry *en = &r->ent[c->dl[i].ent];
    memcpy(c->dl[i].dst, staging_at(r, en), (size_t)en->sig.size);
  }
  c->n_dl = 0;
  return NNT_OK;
}

static int failed(vk_ctx *c, nnt_err *e) {
  return c->failed ? nnt_err_set(e, NNT_ERR_UNKNOWN, "engine 'gpu': an earlier error: %s",
                                 c->fail_msg)
                   : NNT_OK;
}

/* The eager recording submitted (its reads landed) and emptied. */
static int eager_submit(vk_ctx *c, nnt_err *e) {
  vk_rec *r = &c->eager;
  int rc = rec_submit(c, r, e);
  rec_reset(r);
  /* a large transfer's staging is not kept */
  if (r->staging.n > 1 || (r->staging.n && r->staging.b[0]->size > VK_STAGING_BLOCK))
    blocks_free(c, &r->staging);
  return rc;
}

/* A replay that diverges at c->cursor: a new recording of the step made of
 * the entries matched so far (with this run's parameters and bytes), which
 * the calls from here extend. */
static int rerecord(vk_ctx *c) {
  vk_rec *old = c->cur, *nr = nnt_calloc(1, sizeof *nr);
  if (!nr)
    return NNT_ERR_NOMEM;
  nr->key = old->key;
  nr->is_step = 1;
  int rc = NNT_OK;
  for (size_t i = 0; i < c->cursor && !rc; i++) {
    vk_entry en = old->ent[i];
    if (!(rc = take_room(c, nr, &en))) {
      if (en.sig.kind == VK_E_DISPATCH)
        memcpy(param_at(c, nr, en.slot), param_at(c, old, old->ent[i].slot), sizeof(vk_push));
      else if (en.sig.kind == VK_E_COPY_IN)
        memcpy(staging_at(nr, &en), staging_at(old, &old->ent[i]), (size_t)en.sig.size);
      rc = append(c, nr, &en);
    }
  }
  if (rc) {
    rec_release(c, nr);
    nnt_free(nr);
    return rc;
  }
  for (size_t i = 0; i < c->n_steps; i++)
    if (c->steps[i] == old)
      c->steps[i] = nr;
  rec_release(c, old);
  nnt_free(old);
  c->cur = nr;
  c->replaying = 0;
  c->rerecorded = 1;
  c->cnt.rerecorded_steps++;
  return NNT_OK;
}

/* Entry en (signature and bindings filled) in the current recording: the
 * matching one in a replay, else appended and emitted. *out: where its
 * parameters or bytes go. */
static int route(vk_ctx *c, vk_entry *en, vk_entry **out) {
  int rc;
  if (c->replaying) {
    vk_rec *r = c->cur;
    if (c->cursor < r->n_ent && !memcmp(&r->ent[c->cursor].sig, &en->sig, sizeof en->sig)) {
      *out = &r->ent[c->cursor++];
      return NNT_OK;
    }
    if ((rc = rerecord(c)))
      return rc;
  }
  vk_rec *r = c->cur;
  if (!r->is_step && (r->n_ent >= VK_EAGER_ENTRIES || r->staging.used >= VK_STAGING_MAX) &&
      (rc = eager_submit(c, NULL)))
    return rc;
  if ((rc = take_room(c, r, en)) || (rc = append(c, r, en)))
    return rc;
  *out = &r->ent[r->n_ent - 1];
  return NNT_OK;
}

static vk_span span_of(const vk_buf *v, VkDeviceSize off, VkDeviceSize n, int write) {
  return (vk_span){.serial = v->serial, .lo = off, .hi = off + n, .write = (uint32_t)write};
}

int nnt_vk_record_dispatch(vk_ctx *c, const char *shader, vk_buf *const bufs[VK_BINDINGS],
                           const vk_span *span, unsigned n_span, const vk_push *pc, uint32_t gx,
                           uint32_t gy) {
  if (c->failed)
    return NNT_ERR_UNKNOWN;
  vk_entry en;
  memset(&en, 0, sizeof en);
  int rc = nnt_vk_pipeline(c, shader, &en.sig.pipe);
  if (rc)
    return rc;
  en.sig.kind = VK_E_DISPATCH;
  en.sig.gx = gx, en.sig.gy = gy;
  en.sig.n_span = n_span;
  memcpy(en.sig.span, span, n_span * sizeof *span);
  vk_buf *any = NULL;
  for (unsigned i = 0; i < VK_BINDINGS && !any; i++)
    any = bufs[i];
  if (!any)
    return NNT_ERR_INVAL;
  for (unsigned i = 0; i < VK_BINDINGS; i++)
    en.bind[i] = bufs[i] ? bufs[i] : any;
  vk_entry *at;
  if ((rc = route(c, &en, &at)))
    return rc;
  memcpy(param_at(c, c->cur, at->slot), pc, sizeof *pc);
  return NNT_OK;
}

/* Host bytes into a device range (in) or back (out, landing when the
 * recording is submitted); outside a step, large transfers go through the
 * staging in pieces. */
static int record_copy(vk_ctx *c, int in, vk_buf *dev, VkDeviceSize off, char *host,
                       VkDeviceSize n) {
  while (n) {
    VkDeviceSize len = !c->in_step && n > VK_STAGING_BLOCK ? VK_STAGING_BLOCK : n;
    vk_entry en, *at;
    memset(&en, 0, sizeof en);
    en.sig.kind = in ? VK_E_COPY_IN : VK_E_COPY_OUT;
    en.sig.off = off, en.sig.size = len;
    en.sig.n_span = 1;
    en.sig.span[0] = span_of(dev, off, len, in);
    en.dev = dev;
    int rc = failed(c, NULL);
    if (rc || (rc = route(c, &en, &at)))
      return rc;
    if (in) {
      memcpy(staging_at(c->cur, at), host, (size_t)len);
    } else {
      if (c->n_dl == c->cap_dl) {
        size_t cap = c->cap_dl ? 2 * c->cap_dl : 64;
        vk_delivery *nd = nnt_realloc(c->dl, cap * sizeof *nd);
        if (!nd)
          return NNT_ERR_NOMEM;
        c->dl = nd, c->cap_dl = cap;
      }
      c->dl[c->n_dl++] = (vk_delivery){.dst = host, .ent = (size_t)(at - c->cur->ent)};
    }
    host += len, off += len, n -= len;
  }
  return NNT_OK;
}

int nnt_vk_record_copy_in(vk_ctx *c, vk_buf *dev, VkDeviceSize off, const void *src,
                          VkDeviceSize n) {
  return record_copy(c, 1, dev, off, (char *)(uintptr_t)src, n);
}

int nnt_vk_record_copy_out(vk_ctx *c, vk_buf *dev, VkDeviceSize off, void *dst, VkDeviceSize n) {
  return record_copy(c, 0, dev, off, dst, n);
}

int nnt_vk_record_fill(vk_ctx *c, vk_buf *dev, VkDeviceSize off, VkDeviceSize n, uint32_t word) {
  vk_entry en, *at;
  memset(&en, 0, sizeof en);
  en.sig.kind = VK_E_FILL;
  en.sig.off = off, en.sig.size = n, en.sig.word = word;
  en.sig.n_span = 1;
  en.sig.span[0] = span_of(dev, off, n, 1);
  en.dev = dev;
  int rc = failed(c, NULL);
  return rc ? rc : route(c, &en, &at);
}

int nnt_vk_fill_now(vk_ctx *c, vk_buf *const *dev, size_t n, nnt_err *e) {
  /* the step in progress (if any) stays as it is: its recording, replay
   * position and pending reads are set aside */
  vk_rec *cur = c->cur;
  int in_step = c->in_step, replaying = c->replaying;
  size_t n_dl = c->n_dl;
  int rc = eager_submit(c, e); /* empty inside a step: step_begin submitted it */
  c->cur = &c->eager, c->in_step = 0, c->replaying = 0, c->n_dl = 0;
  for (size_t i = 0; i < n && !rc; i++)
    rc = nnt_vk_record_fill(c, dev[i], 0, dev[i]->size, 0);
  int r2 = eager_submit(c, rc ? NULL : e);
  c->cur = cur, c->in_step = in_step, c->replaying = replaying, c->n_dl = n_dl;
  return rc ? nnt_err_set(e, rc, "engine 'gpu': zeroing a new buffer failed") : r2;
}

int nnt_vk_flush(vk_ctx *c, nnt_err *e) {
  int rc = failed(c, e);
  if (rc)
    return rc;
  if (!c->in_step || c->cur == &c->eager)
    return eager_submit(c, e);
  /* a read inside a step needs what is recorded so far: the step runs as
   * recorded up to here and the rest of it eagerly; it is not kept */
  if (c->replaying && (rc = rerecord(c)))
    return nnt_err_set(e, rc, "engine 'gpu': no memory to record a step");
  vk_rec *r = c->cur;
  rc = rec_submit(c, r, e);
  for (size_t i = 0; i < c->n_steps; i++)
    if (c->steps[i] == r)
      c->steps[i] = c->steps[--c->n_steps];
  rec_release(c, r);
  nnt_free(r);
  c->cur = &c->eager;
  c->replaying = 0;
  c->cnt.step_syncs++;
  return rc;
}

int nnt_vk_step_begin(vk_ctx *c, uint64_t key, nnt_err *e) {
  if (c->in_step)
    return nnt_err_set(e, NNT_ERR_INVAL, "engine 'gpu': a step began inside a step");
  int rc = nnt_vk_flush(c, e);
  if (rc)
    return rc;
  vk_rec *r = NULL;
  for (size_t i = 0; i < c->n_steps && !r; i++)
    if (c->steps[i]->key == key)
      r = c->steps[i];
  if (r) {
    c->replaying = 1;
    c->cursor = 0;
  } else {
    if (c->n_steps == VK_MAX_STEPS) { /* the oldest goes */
      rec_release(c, c->steps[0]);
      nnt_free(c->steps[0]);
      memmove(c->steps, c->steps + 1, --c->n_steps * sizeof *c->steps);
    }
    vk_rec **ns = nnt_realloc(c->steps, (c->n_steps + 1) * sizeof *ns);
    r = ns ? nnt_calloc(1, sizeof *r) : NULL;
    if (ns)
      c->steps = ns;
    if (!r)
      return nnt_err_set(e, NNT_ERR_NOMEM, "engine 'gpu': no memory to record a step");
    r->key = key;
    r->is_step = 1;
    c->steps[c->n_steps++] = r;
    c->replaying = 0;
  }
  c->cur = r;
  c->in_step = 1;
  c->rerecorded = 0;
  return NNT_OK;
}

int nnt_vk_step_end(vk_ctx *c, nnt_err *e) {
  if (!c->in_step)
    return nnt_err_set(e, NNT_ERR_INVAL, "engine 'gpu': a step ended that did not begin");
  int rc = failed(c, e);
  if (!rc && c->replaying && c->cursor != c->cur->n_ent && (rc = rerecord(c)))
    rc = nnt_err_set(e, rc, "engine 'gpu': no memory to record a step");
  if (!rc) {
    vk_rec *r = c->cur;
    if (r == &c->eager)
      ; /* a read broke the step: the rest ran eagerly */
    else if (c->replaying)
      c->cnt.replayed_steps++;
    else if (!c->rerecorded)
      c->cnt.recorded_steps++;
    rc = r == &c->eager ? eager_submit(c, e) : rec_submit(c, r, e);
  }
  c->in_step = 0;
  c->replaying = 0;
  c->cur = &c->eager;
  c->n_dl = 0;
  return rc;
}

int nnt_vk_forget_buffers(vk_ctx *c, nnt_err *e) {
  int rc = NNT_OK;
  if (c->in_step) /* a buffer freed inside a step: what was recorded runs */
    rc = nnt_vk_flush(c, e);
  int r2 = eager_submit(c, e);
  rc = rc ? rc : r2;
  if (c->dev && c->f.vkDeviceWaitIdle)
    c->f.vkDeviceWaitIdle(c->dev);
  for (size_t i = 0; i < c->n_steps; i++) {
    if (c->cur == c->steps[i])
      c->cur = &c->eager, c->in_step = 0, c->replaying = 0;
    rec_release(c, c->steps[i]);
    nnt_free(c->steps[i]);
  }
  c->n_steps = 0;
  sets_drop(c);
  return rc;
}

void nnt_vk_records_close(vk_ctx *c) {
  if (!c->dev)
    return;
  for (size_t i = 0; i < c->n_steps; i++) {
    rec_release(c, c->steps[i]);
    nnt_free(c->steps[i]);
  }
  nnt_free(c->steps);
  c->steps = NULL;
  c->n_steps = 0;
  rec_release(c, &c->eager);
  sets_drop(c);
  nnt_free(c->dsets);
  c->dsets = NULL;
  nnt_free(c->dl);
  c->dl = NULL;
}
