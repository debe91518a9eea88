#version 450
// Kimi delta attention, token by token from the state S (decode; a prefill runs kda_chunk.comp) (per head [dk, dv]): one workgroup per head, one
// invocation per value column j, which keeps column j of the head's state in registers for the whole call,
// so the delta rule needs no sum across invocations; only the l2 norms of q and k are workgroup sums (tree
// sums in shared memory, no subgroups). The workgroup size is the head size (a power of two), set by
// specialization constant 0. Per token, with q = l2norm(q_h) / sqrt(dk), k = l2norm(k_h), b = sigmoid(beta):
//   S = Diag(alpha) S;  u = S^T k;  S += k (b (v - u))^T;  out_h = S^T q.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "activations.glsl"

layout(local_size_x_id = 0) in;
const uint kDim = gl_WorkGroupSize.x;  // dk = dv, a power of two up to kMaxDim
// The arrays have a fixed size (spec-constant array sizes do not carry over to every driver, e.g.
// MoltenVK); limits.h kVulkanKdaMaxHeadDim.
const uint kMaxDim = 128u;
layout(std430, binding = 0) readonly buffer Q { float q[]; };          // [n, H d]
layout(std430, binding = 1) readonly buffer K { float k[]; };          // [n, H d]
layout(std430, binding = 2) readonly buffer V { float v[]; };          // [n, H d]
layout(std430, binding = 3) readonly buffer LogDecay { float log_decay[]; };  // [n, H d], kda_decay's output
layout(std430, binding = 4) readonly buffer Beta { float beta[]; };    // [n, H]
layout(std430, binding = 5) buffer State { float state[]; };           // [H d, d]
layout(std430, binding = 6) writeonly buffer Out { float o[]; };       // [n, H d]
layout(push_constant) uniform Push {
    uint n;      // tokens
    uint heads;  // H
} pc;

shared float qs[kMaxDim];      // this token's normalized q of the head
shared float ks[kMaxDim];      // this token's normalized k of the head
shared float decay[kMaxDim];   // this token's alpha of the head
shared vec2 partial[kMaxDim];  // (q^2, k^2) per invocation, summed in a tree

vec2 head_sum(vec2 value) {
    const uint j = gl_LocalInvocationID.x;
    partial[j] = value;
    barrier();
    for (uint s = kDim / 2u; s > 0u; s >>= 1u) {
        if (j < s) partial[j] += partial[j + s];
        barrier();
    }
    const vec2 total = partial[0];
    barrier();
    return total;
}

void main() {
    const uint h = gl_WorkGroupID.x, j = gl_LocalInvocationID.x;
    const uint width = pc.heads * kDim, c = h * kDim + j;
    const uint s0 = h * kDim * kDim;  // S[0][0] of head h in state
    float col[kMaxDim];  // S[:, j], its first kDim rows
    for (uint i = 0u; i < kDim; ++i) col[i] = state[s0 + i * kDim + j];
    const float q_scale = 1.0 / sqrt(float(kDim));
    for (uint t = 0u; t < pc.n; ++t) {
        const float qj = q[t * width + c], kj = k[t * width + c];
        const vec2 norms = head_sum(vec2(qj * qj, kj * kj));
        qs[j] = qj * (q_scale / sqrt(norms.x + kKdaL2NormEps));
        ks[j] = kj * (1.0 / sqrt(norms.y + kKdaL2NormEps));
        decay[j] = exp(log_decay[t * width + c]);
        barrier();
        const float b = sigmoid(beta[t * pc.heads + h]);
        float u = 0.0;
        for (uint i = 0u; i < kDim; ++i) {
            col[i] *= decay[i];
            u += ks[i] * col[i];
        }
        const float delta = b * (v[t * width + c] - u);
        float out_j = 0.0;
        for (uint i = 0u; i < kDim; ++i) {
            col[i] += ks[i] * delta;
            out_j += qs[i] * col[i];
        }
        o[t * width + c] = out_j;
        barrier();  // the next token overwrites qs, ks, decay
    }
    for (uint i = 0u; i < kDim; ++i) state[s0 + i * kDim + j] = col[i];
}
