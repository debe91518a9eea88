#version 450
// Attention's probability-weighted sums of the cached values: out[i][h * width + d] = sum_j p[row][j]
// v[j][(h / group) * width + d], with row = (i - i0) * heads + h. One thread per (row, d); keys whose
// probability is 0 (masked) are skipped by the whole workgroup. For chunks whose heads share their kv heads
// with too few rows for attn_mix.comp's tiles (a decode step of MHA).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer P { float p[]; };     // [rows, keys]
layout(std430, binding = 1) readonly buffer V { float v[]; };     // [ctx, v_cols]
layout(std430, binding = 2) writeonly buffer Out { float o[]; };  // [n, heads * width]
layout(push_constant) uniform Push {
    uint i0;      // first query of the chunk
    uint heads;   // query heads
    uint group;   // query heads per value head
    uint width;   // values per head
    uint v_cols;  // width of a cached row
    uint keys;    // probabilities per row
} pc;

void main() {
    const uint d = gl_GlobalInvocationID.x, row = gl_WorkGroupID.y;
    const uint i = pc.i0 + row / pc.heads, h = row % pc.heads;
    const uint vb = (h / pc.group) * pc.width + d;
    float acc = 0.0;
    for (uint j = 0u; j < pc.keys; ++j) {
        const float w = p[row * pc.keys + j];
        if (w == 0.0) continue;
        if (d < pc.width) acc += w * v[j * pc.v_cols + vb];
    }
    if (d < pc.width) o[(i * pc.heads + h) * pc.width + d] = acc;
}
