#version 450
// MLA output: out[i][h dv + v] = W_UV[h][v] . mixed(row), with W_UV[h] the rows [h (nope + v) + nope, + v)
// of w_kvb and row = (i - i0) * heads + h. One thread per (row, v).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint kFormat = 0u;

layout(std430, binding = 0) readonly buffer WData { uint wdata[]; };
layout(std430, binding = 1) readonly buffer WScale { uint wscale[]; };
layout(std430, binding = 2) readonly buffer Mixed { float mixed[]; };  // [rows, lora]
layout(std430, binding = 3) writeonly buffer Out { float o[]; };      // [n, heads dv]
layout(push_constant) uniform Push {
    uint i0;     // first query of the chunk
    uint heads;
    uint nope;   // dn
    uint v_dim;  // dv
    uint lora;   // kv_lora
} pc;

#include "weight.glsl"

void main() {
    const uint v = gl_GlobalInvocationID.x, row = gl_WorkGroupID.y;
    if (v >= pc.v_dim) return;
    const uint i = pc.i0 + row / pc.heads, h = row % pc.heads;
    const uint r = h * (pc.nope + pc.v_dim) + pc.nope + v;
    float acc = 0.0;
    for (uint c = 0u; c < pc.lora; ++c) acc += weight_at(kFormat, pc.lora, r, c) * mixed[row * pc.lora + c];
    o[(i * pc.heads + h) * pc.v_dim + v] = acc;
}
