#version 450
// Attention residuals, second pass, for one entry e: out[t] (+)= softmax(score[:, t])_e v[t], the first
// entry writing and the later ones adding, so that out sums the entries in order as the CPU does
// (grid-stride over n * d; each invocation takes the softmax of its token's m scores itself).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer V { float v[]; };          // [n, d], entry e
layout(std430, binding = 1) readonly buffer Score { float score[]; };  // [m, n]
layout(std430, binding = 2) buffer Out { float o[]; };                 // [n, d]
layout(push_constant) uniform Push {
    uint n;        // tokens
    uint d;        // row width
    uint entries;  // m
    uint entry;    // e
} pc;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.n * pc.d; i += stride) {
        const uint token = i / pc.d;
        float top = score[token];
        for (uint e = 1u; e < pc.entries; ++e) top = max(top, score[e * pc.n + token]);
        float total = 0.0;
        for (uint e = 0u; e < pc.entries; ++e) total += exp(score[e * pc.n + token] - top);
        const float p = exp(score[pc.entry * pc.n + token] - top) / total;
        o[i] = pc.entry == 0u ? p * v[i] : o[i] + p * v[i];
    }
}
