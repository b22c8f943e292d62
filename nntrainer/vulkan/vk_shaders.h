/* The embedded SPIR-V of nntrainer/vulkan/shaders (cmake/vk_embed.cmake
 * generates the table at build time). */
#ifndef NNT_VK_SHADERS_H
#define NNT_VK_SHADERS_H

#include <stddef.h>
#include <stdint.h>

typedef struct nnt_vk_shader {
  const char *name; /* the .comp file's name without the extension */
  const uint32_t *code;
  size_t size; /* bytes */
} nnt_vk_shader;

extern const nnt_vk_shader nnt_vk_shaders[];
extern const size_t nnt_vk_shader_count;

#endif
