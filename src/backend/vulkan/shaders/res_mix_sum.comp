#version 450
// Attention residuals, last pass, for one entry e: out[t] (+)= p[e][t] v[t], the first entry writing and
// the later ones adding, so that out sums the entries in order as the CPU does (grid-stride over n * d).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer V { float v[]; };  // [n, d], entry e
layout(std430, binding = 1) readonly buffer P { float p[]; };  // [m, n], the softmax of the scores
layout(std430, binding = 2) buffer Out { float o[]; };         // [n, d]
layout(push_constant) uniform Push {
    uint n;      // tokens
    uint d;      // row width
    uint entry;  // e
} pc;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.n * pc.d; i += stride) {
        const float weighted = p[pc.entry * pc.n + i / pc.d] * v[i];
        o[i] = pc.entry == 0u ? weighted : o[i] + weighted;
    }
}
