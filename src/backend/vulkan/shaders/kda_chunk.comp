#version 450
// Kimi delta attention over a prefill, by chunks of kChunk tokens from the state S (per head [dk, dv]); the
// CPU's cpu_kda_chunk.cpp derives the chunked form. One workgroup per head, one invocation per value column
// j, which keeps column j of the head's state in registers, as kda.comp; per chunk, with G_t the cumulative
// log decay of the chunk's tokens up to t (per channel) and E(s,t] = exp(G_t - G_s) <= 1 for s <= t:
//   M[t,s] = sum_i k_t[i] k_s[i] E(s,t][i] (s < t),   P[t,s] = sum_i q_t[i] k_s[i] E(s,t][i] (s <= t)
//   u_t = b_t (v_t - S0^T (k_t exp(G_t)) - sum_{s<t} M[t,s] u_s)      (forward substitution)
//   o_t = S0^T (q_t exp(G_t)) + sum_{s<=t} P[t,s] u_s
//   S = Diag(exp(G_last)) S0 + sum_s (k_s E(s,last]) u_s^T
// Column j of u and o is private to invocation j: only M, P and the chunk's q, k and decays are shared.
// The chunk is shorter than the CPU's 64 tokens so that those fit in shared memory (3 x 16 x 128 floats).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "activations.glsl"

layout(local_size_x_id = 0) in;
const uint kDim = gl_WorkGroupSize.x;  // dk = dv, a power of two up to kMaxDim
const uint kMaxDim = 128u;             // limits.h kVulkanKdaMaxHeadDim
const uint kChunk = 16u;               // tokens per chunk
layout(std430, binding = 0) readonly buffer Q { float q[]; };                // [n, H d]
layout(std430, binding = 1) readonly buffer K { float k[]; };                // [n, H d]
layout(std430, binding = 2) readonly buffer V { float v[]; };                // [n, H d]
layout(std430, binding = 3) readonly buffer LogDecay { float log_decay[]; };  // [n, H d], kda_decay's output
layout(std430, binding = 4) readonly buffer Beta { float beta[]; };          // [n, H]
layout(std430, binding = 5) buffer State { float state[]; };                 // [H d, d]
layout(std430, binding = 6) writeonly buffer Out { float o[]; };             // [n, H d]
layout(push_constant) uniform Push {
    uint n;      // tokens
    uint heads;  // H
} pc;

// [t][i] of the chunk. qs: q, then q_t exp(G_t); ks: k, then k_t exp(G_t); gs: G_t, then k_t E(t,last].
shared float qs[kChunk * kMaxDim];
shared float ks[kChunk * kMaxDim];
shared float gs[kChunk * kMaxDim];
shared float m[kChunk * kChunk];  // [t][s], zero for s >= t
shared float p[kChunk * kChunk];  // [t][s], zero for s > t
shared float decay_last[kMaxDim]; // exp(G_last) per channel
shared vec2 partial[kMaxDim];     // (q^2, k^2) per invocation, summed in a tree

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
    for (uint t0 = 0u; t0 < pc.n; t0 += kChunk) {
        const uint len = min(kChunk, pc.n - t0);
        // Stage the chunk: normalized q and k, and G (invocation j cumulates its channel).
        float cum = 0.0;
        for (uint t = 0u; t < len; ++t) {
            const uint x = (t0 + t) * width + c;
            const float qj = q[x], kj = k[x];
            const vec2 norms = head_sum(vec2(qj * qj, kj * kj));
            qs[t * kDim + j] = qj * (q_scale / sqrt(norms.x + kKdaL2NormEps));
            ks[t * kDim + j] = kj * (1.0 / sqrt(norms.y + kKdaL2NormEps));
            cum += log_decay[x];
            gs[t * kDim + j] = cum;
        }
        barrier();
        // M and P, one entry per invocation at a time.
        for (uint e = j; e < kChunk * kChunk; e += kDim) {
            const uint t = e / kChunk, s = e % kChunk;
            float mts = 0.0, pts = 0.0;
            if (s <= t && t < len) {
                for (uint i = 0u; i < kDim; ++i) {
                    const float ke = ks[s * kDim + i] * exp(gs[t * kDim + i] - gs[s * kDim + i]);
                    mts += ks[t * kDim + i] * ke;
                    pts += qs[t * kDim + i] * ke;
                }
            }
            m[e] = s < t ? mts : 0.0;
            p[e] = pts;
        }
        barrier();
        // Channel j of the decayed factors, in place.
        const float g_last = gs[(len - 1u) * kDim + j];
        decay_last[j] = exp(g_last);
        for (uint t = 0u; t < len; ++t) {
            const uint x = t * kDim + j;
            const float decay_in = exp(gs[x]);
            gs[x] = ks[x] * exp(g_last - gs[x]);
            qs[x] *= decay_in;
            ks[x] *= decay_in;
        }
        barrier();
        // Column j of u: what S0 contributes, then the forward substitution; then column j of o.
        float u[kChunk];
        for (uint t = 0u; t < len; ++t) {
            float ks0 = 0.0;
            for (uint i = 0u; i < kDim; ++i) ks0 += ks[t * kDim + i] * col[i];
            float w = v[(t0 + t) * width + c] - ks0;
            for (uint s = 0u; s < t; ++s) w -= m[t * kChunk + s] * u[s];
            u[t] = sigmoid(beta[(t0 + t) * pc.heads + h]) * w;
        }
        for (uint t = 0u; t < len; ++t) {
            float sum = 0.0;
            for (uint i = 0u; i < kDim; ++i) sum += qs[t * kDim + i] * col[i];
            for (uint s = 0u; s <= t; ++s) sum += p[t * kChunk + s] * u[s];
            o[(t0 + t) * width + c] = sum;
        }
        for (uint i = 0u; i < kDim; ++i) {
            float sum = decay_last[i] * col[i];
            for (uint s = 0u; s < len; ++s) sum += gs[s * kDim + i] * u[s];
            col[i] = sum;
        }
        barrier();  // the next chunk overwrites the shared arrays
    }
    for (uint i = 0u; i < kDim; ++i) state[s0 + i * kDim + j] = col[i];
}
