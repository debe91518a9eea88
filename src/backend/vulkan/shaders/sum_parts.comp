#version 450
// out[e] = parts[0][e] + parts[1][e] + ... in that order: the partial sums of a product split over its
// inner dimension (attn_mix.comp), added the same way on every run. Grid-stride over `count` floats.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer Parts { float parts[]; };  // [n_parts, count]
layout(std430, binding = 1) writeonly buffer Out { float o[]; };       // [first + count]
layout(push_constant) uniform Push {
    uint count;    // floats of each part
    uint n_parts;  // parts to add
    uint first;    // where the sums go in out
} pc;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint e = gl_GlobalInvocationID.x; e < pc.count; e += stride) {
        float sum = parts[e];
        for (uint s = 1u; s < pc.n_parts; ++s) sum += parts[s * pc.count + e];
        o[pc.first + e] = sum;
    }
}
