#version 450
// GQA attention of one split of a row's keys (as flash decoding), for chunks whose heads share their kv
// heads with too few rows for the tiles (a decode step of MHA): a decode step has one query, and one
// workgroup per (query, head) would walk the whole cache alone. Row = (i - i0) * heads + h; split c takes
// keys [c split_keys, ...) of the causal keys j <= pos0 + i and writes their largest score m, l = sum of
// exp(s - m) and o = sum of exp(s - m) v_kvh(j), at partial[(row splits + c) (head_dim + 2)]: o, m, l.
// Splits past the row's causal end write nothing; attn_combine.comp joins a row's splits.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

const uint kThreads = 64u;  // one key of a tile per thread
const uint kSlice = 32u;    // columns of a tile of keys staged at once
// A thread's loads of one staged slice, issued together (unrolled, into registers) so that their latencies
// overlap: a loop of load-then-store pays each one in turn.
const uint kLoadsPerThread = kSlice;
const uint kMaxSplitKeys = 256u;  // keys of a split at most (attention.cpp kSplitMaxKeys)
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Q { float q[]; };                // [n, heads * head_dim]
layout(std430, binding = 1) readonly buffer K { float k[]; };                // [ctx, kv_heads * head_dim]
layout(std430, binding = 2) readonly buffer V { float v[]; };                // [ctx, kv_heads * head_dim]
layout(std430, binding = 3) writeonly buffer Partial { float partial[]; };  // [rows, splits, head_dim + 2]
layout(push_constant) uniform Push {
    uint i0;          // first query of the chunk
    uint heads;       // query heads
    uint group;       // query heads per kv head
    uint head_dim;
    uint pos0;        // position of query 0
    uint split_keys;  // keys of a split
    uint splits;      // splits per row
    float scale;      // softmax scale
} pc;

shared float k_tile[kThreads][kSlice + 1];  // padded: a thread reads its own key's row
shared float q_slice[kSlice];
shared float p[kMaxSplitKeys];  // scores, then exp(s - m)
shared float partial_red[kThreads];

float workgroup_reduce(float x, bool take_max) {
    const uint t = gl_LocalInvocationID.x;
    partial_red[t] = x;
    barrier();
    for (uint s = kThreads / 2u; s > 0u; s >>= 1u) {
        if (t < s)
            partial_red[t] = take_max ? max(partial_red[t], partial_red[t + s]) : partial_red[t] + partial_red[t + s];
        barrier();
    }
    const float r = partial_red[0];
    barrier();
    return r;
}

void main() {
    const uint c = gl_WorkGroupID.x, row = gl_WorkGroupID.y, t = gl_LocalInvocationID.x;
    const uint i = pc.i0 + row / pc.heads, h = row % pc.heads;
    const uint n_keys = pc.pos0 + i + 1u, j0 = c * pc.split_keys;
    if (j0 >= n_keys) return;  // the whole workgroup
    const uint count = min(pc.split_keys, n_keys - j0), hd = pc.head_dim;
    const uint kv_width = pc.heads / pc.group * hd, col0 = h / pc.group * hd;
    const uint qb = (i * pc.heads + h) * hd;

    float local_max = kNegInf;
    for (uint t0 = 0u; t0 < count; t0 += kThreads) {
        float s = 0.0;
        for (uint d0 = 0u; d0 < hd; d0 += kSlice) {
            float staged[kLoadsPerThread];
            [[unroll]] for (uint r = 0u; r < kLoadsPerThread; ++r) {
                const uint e = r * kThreads + t, key = t0 + e / kSlice, d = d0 + e % kSlice;
                staged[r] = key < count && d < hd ? k[(j0 + key) * kv_width + col0 + d] : 0.0;
            }
            [[unroll]] for (uint r = 0u; r < kLoadsPerThread; ++r) {
                const uint e = r * kThreads + t;
                k_tile[e / kSlice][e % kSlice] = staged[r];
            }
            if (t < kSlice) q_slice[t] = d0 + t < hd ? q[qb + d0 + t] : 0.0;
            barrier();
            [[unroll]] for (uint dd = 0u; dd < kSlice; ++dd) s += q_slice[dd] * k_tile[t][dd];
            barrier();
        }
        if (t0 + t < count) {
            p[t0 + t] = s * pc.scale;
            local_max = max(local_max, s * pc.scale);
        }
    }
    const float m = workgroup_reduce(local_max, true);  // its barriers order p's writes
    float local_sum = 0.0;
    for (uint j = t; j < count; j += kThreads) {
        const float e = exp(p[j] - m);
        p[j] = e;
        local_sum += e;
    }
    const float l = workgroup_reduce(local_sum, false);

    const uint dst = (row * pc.splits + c) * (hd + 2u);
    for (uint d = t; d < hd; d += kThreads) {
        vec4 o = vec4(0.0);  // independent sums, so that loads of several rows are in flight
        uint j = 0u;
        for (; j + 4u <= count; j += 4u) {
            const uint vb = (j0 + j) * kv_width + col0 + d;
            o += vec4(p[j], p[j + 1u], p[j + 2u], p[j + 3u]) *
                 vec4(v[vb], v[vb + kv_width], v[vb + 2u * kv_width], v[vb + 3u * kv_width]);
        }
        for (; j < count; ++j) o.x += p[j] * v[(j0 + j) * kv_width + col0 + d];
        partial[dst + d] = (o.x + o.y) + (o.z + o.w);
    }
    if (t == 0u) {
        partial[dst + hd] = m;
        partial[dst + hd + 1u] = l;
    }
}
