#version 450
// MLA query absorption: q_abs[row][c] = sum_{d < nope} q_nope_h(i)[d] W_UK[h][d][c], with W_UK[h] the rows
// [h (nope + v), + nope) of w_kvb and row = (i - i0) * heads + h. One thread per (row, c).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint kFormat = 0u;

layout(std430, binding = 0) readonly buffer WData { uint wdata[]; };
layout(std430, binding = 1) readonly buffer WScale { uint wscale[]; };
layout(std430, binding = 2) readonly buffer Q { float q[]; };         // [n, heads (nope + rope)]
layout(std430, binding = 3) writeonly buffer QAbs { float q_abs[]; };  // [rows, lora]
layout(push_constant) uniform Push {
    uint i0;     // first query of the chunk
    uint heads;
    uint nope;   // dn
    uint rope;   // dr
    uint v_dim;  // dv
    uint lora;   // kv_lora: w_kvb's columns
} pc;

#include "weight.glsl"

void main() {
    const uint c = gl_GlobalInvocationID.x, row = gl_WorkGroupID.y;
    if (c >= pc.lora) return;
    const uint i = pc.i0 + row / pc.heads, h = row % pc.heads;
    const uint qb = (i * pc.heads + h) * (pc.nope + pc.rope), r0 = h * (pc.nope + pc.v_dim);
    float acc = 0.0;
    for (uint d = 0u; d < pc.nope; ++d) acc += q[qb + d] * weight_at(kFormat, pc.lora, r0 + d, c);
    q_abs[row * pc.lora + c] = acc;
}
