#version 450
// Adds each token's expert outputs into y in the order the experts come, as the CPU adds them:
//   y[t] += gain[t][j] * out[slot[t][j]] for j = 0 .. k - 1 (slot -1: no expert).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer Out { float out_rows[]; };  // [routed rows, d]
layout(std430, binding = 1) readonly buffer Table { int table[]; };     // slots at slot_first, gains after
layout(std430, binding = 2) buffer Y { float y[]; };                    // [n, d]
layout(push_constant) uniform Push {
    uint n;           // tokens
    uint k;           // slots per token
    uint d;           // row width
    uint slot_first;  // table[slot_first + t * k + j]: the routed row of token t's j-th expert
    uint gain_first;  // table[gain_first + t * k + j]: its gain, as f32 bits
} pc;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.n * pc.d; i += stride) {
        const uint t = i / pc.d, c = i % pc.d;
        float sum = y[i];
        for (uint j = 0u; j < pc.k; ++j) {
            const int slot = table[pc.slot_first + t * pc.k + j];
            if (slot >= 0) sum += out_rows[uint(slot) * pc.d + c] * intBitsToFloat(table[pc.gain_first + t * pc.k + j]);
        }
        y[i] = sum;
    }
}
