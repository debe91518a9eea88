#version 450
// DSA index scores: scores[i][t] = sum_h (weights[i][h] weight_scale) relu(scale q_h(i) . key(t)) for the
// keys t < (pos0 + i + 1) / ratio (ratio 1: dsa_select's causal keys; more: index_topk's compressed keys,
// one per window of ratio positions). Every product and sum is `precise` and in the CPU's order (its dot
// product keeps kLanes partial sums, then adds the columns past the last whole kLanes; kSequential: one
// running sum, index_topk's plain dot product), so the scores, and the top-k chosen from them, equal the
// CPU's. A workgroup takes group_keys keys of query i, one thread per (key,
// head) term; q and the keys pass through shared memory kLanes columns at a time, so that each is read from
// device memory once per workgroup. One thread per key then adds its terms in head order.
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
const uint kThreads = 256u;  // = attention.cpp's kDsaThreads: (key, head) terms of a workgroup at most
const uint kLanes = 16u;     // the CPU dot product's partial sums (cpu_attention.cpp kDotLanes)
const uint kMaxHeads = 128u; // = limits.h's kVulkanDsaMaxHeads
const uint kMaxKeys = 64u;   // = attention.cpp's kDsaMaxGroupKeys: keys of a workgroup at most
layout(constant_id = 0) const bool kSequential = false;  // one running sum per dot product, not kLanes

layout(std430, binding = 0) readonly buffer Q { float q[]; };           // [n, heads dim]
layout(std430, binding = 1) readonly buffer Weights { float weights[]; };  // [n, heads]
layout(std430, binding = 2) readonly buffer Keys { float keys[]; };     // [ctx, dim]
layout(std430, binding = 3) writeonly buffer Scores { float scores[]; };  // [n, total]
layout(push_constant) uniform Push {
    uint total;          // pos0 + n: scores per row
    uint pos0;           // position of query 0
    uint heads;
    uint dim;            // head_dim
    float scale;         // on q . k
    float weight_scale;  // on the head weights
    uint group_keys;     // keys of a workgroup: group_keys x heads <= kThreads, group_keys <= kMaxKeys
    uint ratio;          // positions per key
} pc;

shared float q_s[kLanes][kMaxHeads + 1u];  // this step's columns of every head's q (+1: fewer bank conflicts)
shared float k_s[kMaxKeys][kLanes + 1u];  // and of the workgroup's keys (+1: no bank conflicts)
shared float terms[kThreads];            // [key of the workgroup, head]

void main() {
    const uint t = gl_LocalInvocationID.x, i = gl_WorkGroupID.y, k0 = gl_WorkGroupID.x * pc.group_keys;
    const uint last = min(pc.total, (pc.pos0 + i + 1u) / pc.ratio);  // the visible keys end here
    const uint slot = t / pc.heads, h = t % pc.heads, key = k0 + slot;
    const bool visible = slot < pc.group_keys && key < last;
    const uint q_row = (i * pc.heads + h) * pc.dim, whole = pc.dim - pc.dim % kLanes;

    precise float lanes[kLanes];
    [[unroll]] for (uint l = 0u; l < kLanes; ++l) lanes[l] = 0.0;
    for (uint d0 = 0u; d0 < whole; d0 += kLanes) {
        for (uint e = t; e < pc.heads * kLanes; e += kThreads)
            q_s[e % kLanes][e / kLanes] = q[(i * pc.heads + e / kLanes) * pc.dim + d0 + e % kLanes];
        for (uint e = t; e < pc.group_keys * kLanes; e += kThreads) {
            const uint k = k0 + e / kLanes;
            k_s[e / kLanes][e % kLanes] = k < last ? keys[k * pc.dim + d0 + e % kLanes] : 0.0;
        }
        barrier();
        if (visible)
            [[unroll]] for (uint l = 0u; l < kLanes; ++l)
                lanes[kSequential ? 0u : l] += q_s[l][h] * k_s[slot][l];
        barrier();
    }
    precise float term = 0.0;
    if (visible) {
        precise float sum = 0.0;
        [[unroll]] for (uint l = 0u; l < kLanes; ++l) sum += lanes[l];
        for (uint d = whole; d < pc.dim; ++d) sum += q[q_row + d] * keys[key * pc.dim + d];
        precise float qk = sum * pc.scale;
        precise float w = weights[i * pc.heads + h] * pc.weight_scale;
        term = w * max(qk, 0.0);
    }
    terms[t] = term;
    barrier();

    const uint own = k0 + t;
    if (t >= pc.group_keys || own >= pc.total) return;
    if (own >= last) {
        scores[i * pc.total + own] = kNegInf;
        return;
    }
    precise float score = 0.0;
    for (uint j = 0u; j < pc.heads; ++j) score += terms[t * pc.heads + j];
    scores[i * pc.total + own] = score;
}
