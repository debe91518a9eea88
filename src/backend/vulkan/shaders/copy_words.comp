#version 450
// dst[dst_word + i] = src[src_word + i] for i < count 16-byte words (grid-stride loop): the benchmark's
// device-copy bound, run on the compute units the kernels it bounds run on (a transfer command may be
// served by a slower copy engine).
layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer Src { uvec4 src[]; };
layout(std430, binding = 1) writeonly buffer Dst { uvec4 dst[]; };
layout(push_constant) uniform Push {
    uint count;     // words to copy
    uint src_word;  // first word read
    uint dst_word;  // first word written
} pc;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += stride) dst[pc.dst_word + i] = src[pc.src_word + i];
}
