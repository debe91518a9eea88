#version 450
// Attention residuals, second pass: each token's m entry scores become their softmax, in place, one
// invocation per token (grid-stride over n) summing in entry order as the CPU does; m is small (the
// blocks of the model), so a token needs no more than one invocation.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(std430, binding = 0) buffer Score { float score[]; };  // [m, n]
layout(push_constant) uniform Push {
    uint n;        // tokens
    uint entries;  // m
} pc;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint t = gl_GlobalInvocationID.x; t < pc.n; t += stride) {
        float top = score[t];
        for (uint e = 1u; e < pc.entries; ++e) top = max(top, score[e * pc.n + t]);
        float total = 0.0;
        for (uint e = 0u; e < pc.entries; ++e) {
            const float p = exp(score[e * pc.n + t] - top);
            score[e * pc.n + t] = p;
            total += p;
        }
        for (uint e = 0u; e < pc.entries; ++e) score[e * pc.n + t] /= total;
    }
}
