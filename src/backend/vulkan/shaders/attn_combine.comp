#version 450
// Joins the splits of attn_split.comp for each row (query, head), in split order (the same result on every
// run): out = sum_c e^(m_c - M) o_c / sum_c e^(m_c - M) l_c, M = max_c m_c, over the splits that hold keys.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Partial { float partial[]; };  // [rows, splits, head_dim + 2]
layout(std430, binding = 1) writeonly buffer Out { float o[]; };           // [n, heads * head_dim]
layout(push_constant) uniform Push {
    uint i0;          // first query of the chunk
    uint heads;       // query heads
    uint head_dim;
    uint pos0;        // position of query 0
    uint split_keys;  // keys of a split
    uint splits;      // splits per row
} pc;

void main() {
    const uint row = gl_WorkGroupID.x, d = gl_LocalInvocationID.x + gl_WorkGroupID.y * gl_WorkGroupSize.x;
    const uint i = pc.i0 + row / pc.heads, h = row % pc.heads, hd = pc.head_dim, stride = hd + 2u;
    const uint used = (pc.pos0 + i + pc.split_keys) / pc.split_keys;  // splits that hold keys
    const uint base = row * pc.splits * stride;
    float big = kNegInf;
    for (uint c = 0u; c < used; ++c) big = max(big, partial[base + c * stride + hd]);
    float total = 0.0, acc = 0.0;
    for (uint c = 0u; c < used; ++c) {
        const float w = exp(partial[base + c * stride + hd] - big);
        total += w * partial[base + c * stride + hd + 1u];
        if (d < hd) acc += w * partial[base + c * stride + d];
    }
    if (d < hd) o[(i * pc.heads + h) * hd + d] = acc / total;
}
