#version 450
// Attention residuals, first pass, for one entry: score[t] = sum_d v[t][d] w[d] / rms(v[t]) with
// rms(v) = sqrt(mean(v^2) + eps), one workgroup per token (tree sums in shared memory, no subgroups).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

const uint kThreads = 256u;
layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer V { float v[]; };           // [n, d], the entry
layout(std430, binding = 1) readonly buffer W { float w[]; };           // [d]
layout(std430, binding = 2) writeonly buffer Score { float score[]; };  // [m, n]
layout(push_constant) uniform Push {
    uint n;      // tokens
    uint d;      // row width
    uint entry;  // the entry's row of score
    float eps;   // added to the mean square
} pc;

shared vec2 partial[kThreads];  // (sum of squares, dot with w) per invocation

vec2 row_sum(vec2 value) {
    const uint t = gl_LocalInvocationID.x;
    partial[t] = value;
    barrier();
    for (uint s = kThreads / 2u; s > 0u; s >>= 1u) {
        if (t < s) partial[t] += partial[t + s];
        barrier();
    }
    return partial[0];
}

void main() {
    const uint token = group_index();
    if (token >= pc.n) return;  // the whole workgroup: the 2-D grid rounds the tokens up
    const uint base = token * pc.d;
    vec2 sums = vec2(0.0);
    for (uint i = gl_LocalInvocationID.x; i < pc.d; i += kThreads)
        sums += vec2(v[base + i] * v[base + i], v[base + i] * w[i]);
    const vec2 total = row_sum(sums);
    if (gl_LocalInvocationID.x == 0u)
        score[pc.entry * pc.n + token] = total.y / sqrt(total.x / float(pc.d) + pc.eps);
}
