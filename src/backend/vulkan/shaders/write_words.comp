#version 450
// dst[first + i] = words[i] for i < count: a small host table (a MoE layer's routing) written by the compute
// units from push constants instead of a transfer command, which slowed the GEMVs after it far more than it
// took itself (VulkanBackend::buffer_write).
layout(local_size_x = 32) in;

const uint kMaxWords = 30;  // = vulkan_backend.cpp's kPushUploadWords: 128 push bytes less 2 words

layout(std430, binding = 0) writeonly buffer Dst { uint dst[]; };
layout(push_constant) uniform Push {
    uint count;               // words written, at most kMaxWords (and the workgroup size)
    uint first;               // first word of dst written
    uint words[kMaxWords];    // the words, from dst[first] on
} pc;

void main() {
    const uint i = gl_LocalInvocationID.x;
    if (i < pc.count) dst[pc.first + i] = pc.words[i];
}
