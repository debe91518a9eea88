#version 450
// GQA attention scores of a chunk of queries: scores[row][j] = scale * q_h(i) . k_kvh(j) for the causal
// keys j <= pos0 + i, -inf after them; row = (i - i0) * heads + h. One thread per (row, key): for chunks
// whose heads share their kv heads with too few rows for attn_scores.comp's tiles (a decode step of MHA).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Q { float q[]; };          // [n, heads * head_dim]
layout(std430, binding = 1) readonly buffer K { float k[]; };          // [ctx, kv_heads * head_dim]
layout(std430, binding = 2) writeonly buffer Scores { float scores[]; };  // [rows, keys]
layout(push_constant) uniform Push {
    uint i0;        // first query of the chunk
    uint heads;     // query heads
    uint group;     // query heads per kv head
    uint head_dim;
    uint keys;      // scores per row: pos0 + n
    uint pos0;      // position of query 0
    float scale;    // softmax scale
} pc;

void main() {
    const uint j = gl_GlobalInvocationID.x, row = gl_WorkGroupID.y;
    if (j >= pc.keys) return;
    const uint i = pc.i0 + row / pc.heads, h = row % pc.heads;
    if (j > pc.pos0 + i) {
        scores[row * pc.keys + j] = kNegInf;
        return;
    }
    const uint qb = (i * pc.heads + h) * pc.head_dim;
    const uint kb = (j * (pc.heads / pc.group) + h / pc.group) * pc.head_dim;
    float s = 0.0;
    for (uint d = 0u; d < pc.head_dim; ++d) s += q[qb + d] * k[kb + d];
    scores[row * pc.keys + j] = s * pc.scale;
}
