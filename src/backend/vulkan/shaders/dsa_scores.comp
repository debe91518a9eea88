#version 450
// DSA index scores: scores[i][t] = sum_h (weights[i][h] weight_scale) relu(scale q_h(i) . key(t)) for the
// keys t <= pos0 + i. Every product and sum is `precise` and in the CPU's order (its dot product keeps 16
// partial sums), so the scores, and the top-k chosen from them, equal the CPU's. One thread per (i, t).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;
const uint kLanes = 16u;  // the CPU dot product's partial sums (cpu_attention.cpp kDotLanes)

layout(std430, binding = 0) readonly buffer Q { float q[]; };           // [n, heads dim]
layout(std430, binding = 1) readonly buffer Weights { float weights[]; };  // [n, heads]
layout(std430, binding = 2) readonly buffer Keys { float keys[]; };     // [ctx, dim]
layout(std430, binding = 3) writeonly buffer Scores { float scores[]; };  // [n, total]
layout(push_constant) uniform Push {
    uint total;         // pos0 + n: scores per row
    uint pos0;          // position of query 0
    uint heads;
    uint dim;           // head_dim
    float scale;        // on q . k
    float weight_scale;  // on the head weights
} pc;

float dot_cpu(uint a, uint b) {
    precise float lanes[kLanes];
    for (uint l = 0u; l < kLanes; ++l) lanes[l] = 0.0;
    uint d = 0u;
    for (; d + kLanes <= pc.dim; d += kLanes)
        for (uint l = 0u; l < kLanes; ++l) lanes[l] += q[a + d + l] * keys[b + d + l];
    precise float sum = 0.0;
    for (uint l = 0u; l < kLanes; ++l) sum += lanes[l];
    for (; d < pc.dim; ++d) sum += q[a + d] * keys[b + d];
    return sum;
}

void main() {
    const uint t = gl_GlobalInvocationID.x, i = gl_WorkGroupID.y;
    if (t >= pc.total) return;
    if (t > pc.pos0 + i) {
        scores[i * pc.total + t] = kNegInf;
        return;
    }
    precise float sum = 0.0;
    for (uint h = 0u; h < pc.heads; ++h) {
        precise float qk = dot_cpu((i * pc.heads + h) * pc.dim, t * pc.dim) * pc.scale;
        precise float w = weights[i * pc.heads + h] * pc.weight_scale;
        sum += w * max(qk, 0.0);
    }
    scores[i * pc.total + t] = sum;
}
