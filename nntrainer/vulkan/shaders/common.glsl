// What every shader of the Vulkan backend shares: eight storage-buffer
// bindings (whole buffers or chunks; element offsets are parameters) and
// the parameter block, a uniform block of 32 scalars (128 bytes) at binding
// 8, one slot of a host-written parameter buffer per dispatch (selected by
// a dynamic offset), so a recorded command buffer replays with new values.
// The C side is struct vk_push in nntrainer/vulkan/vk_impl.h: keep the two
// equal.
#extension GL_GOOGLE_include_directive : enable

layout(std430, binding = 0) buffer B0 { float v[]; } b0;
layout(std430, binding = 1) buffer B1 { float v[]; } b1;
layout(std430, binding = 2) buffer B2 { float v[]; } b2;
layout(std430, binding = 3) buffer B3 { float v[]; } b3;
layout(std430, binding = 4) buffer B4 { float v[]; } b4;
layout(std430, binding = 5) buffer B5 { float v[]; } b5;
layout(std430, binding = 6) buffer B6 { float v[]; } b6;
layout(std430, binding = 7) buffer B7 { float v[]; } b7;

layout(std140, binding = 8) uniform P {
  uint o0, o1, o2, o3, o4, o5, o6, o7; // element offsets of the eight arguments
  uint n, rows, cols, k;       // sizes
  uint i0, i1, i2, i3;         // op-specific integers
  uint u0, u1, u2, u3, u4, u5, u6, u7; // more of them (window geometry)
  float f0, f1, f2, f3, f4, f5, f6, f7; // op-specific floats
} p;

// The flat index of this invocation: dispatches larger than the
// work-group count limit use a second dimension (vk_ops.c).
uint flat_id() {
  return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
}
