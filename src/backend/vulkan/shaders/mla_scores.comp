#version 450
// MLA scores: scores[row][j] = scale (q_abs(row) . latent(key) + q_pe_h(i) . k_pe(key)), key = j over the
// causal keys (-inf after them) or the selected position sel[i][j] (-inf for -1). One thread per (row, j).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer QAbs { float q_abs[]; };   // [rows, lora]
layout(std430, binding = 1) readonly buffer Q { float q[]; };          // [n, heads (nope + rope)]
layout(std430, binding = 2) readonly buffer Latent { float latent[]; };  // [ctx, lora]
layout(std430, binding = 3) readonly buffer KPe { float k_pe[]; };     // [ctx, rope]
layout(std430, binding = 4) readonly buffer Sel { float sel[]; };      // [n, keys] when selected
layout(std430, binding = 5) writeonly buffer Scores { float scores[]; };  // [rows, keys]
layout(push_constant) uniform Push {
    uint i0;        // first query of the chunk
    uint heads;
    uint nope;      // dn
    uint rope;      // dr
    uint lora;      // kv_lora
    uint keys;      // scores per row
    uint pos0;      // position of query 0
    uint selected;  // 1: keys are sel's positions
    float scale;    // softmax scale
} pc;

void main() {
    const uint j = gl_GlobalInvocationID.x, row = gl_WorkGroupID.y;
    if (j >= pc.keys) return;
    const uint i = pc.i0 + row / pc.heads, h = row % pc.heads;
    const float pick = pc.selected != 0u ? sel[i * pc.keys + j] : float(j);
    const bool visible = pc.selected != 0u ? pick >= 0.0 : j <= pc.pos0 + i;
    if (!visible) {
        scores[row * pc.keys + j] = kNegInf;
        return;
    }
    const uint key = uint(pick);
    float s = 0.0;
    for (uint c = 0u; c < pc.lora; ++c) s += q_abs[row * pc.lora + c] * latent[key * pc.lora + c];
    const uint pe = (i * pc.heads + h) * (pc.nope + pc.rope) + pc.nope;
    float r = 0.0;
    for (uint d = 0u; d < pc.rope; ++d) r += q[pe + d] * k_pe[key * pc.rope + d];
    scores[row * pc.keys + j] = (s + r) * pc.scale;
}
