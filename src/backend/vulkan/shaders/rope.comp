#version 450
// Rotary embedding in place. The cos and sin of each (row, pair) come from the host, computed as the CPU
// computes them: GLSL's sin and cos have implementation-defined precision at the angles long contexts reach.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(std430, binding = 0) buffer X { float x[]; };                 // [n, cols]
layout(std430, binding = 1) readonly buffer Table { float table[]; };  // [n, half] cos, then [n, half] sin
layout(push_constant) uniform Push {
    uint n;              // rows
    uint cols;           // heads * head_dim
    uint head_dim;       // stride between heads
    uint half_dim;       // rotary_dim / 2
    uint rotary_offset;  // first rotated dim of each head
    uint neox;           // 1: pairs (i, i + half); 0: pairs (2i, 2i + 1)
} pc;

void main() {
    const uint heads = pc.cols / pc.head_dim, count = pc.n * heads * pc.half_dim;
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint g = gl_GlobalInvocationID.x; g < count; g += stride) {
        const uint i = g % pc.half_dim, h = (g / pc.half_dim) % heads, r = g / (pc.half_dim * heads);
        const uint base = r * pc.cols + h * pc.head_dim + pc.rotary_offset;
        const uint a = base + (pc.neox != 0u ? i : 2u * i), b = base + (pc.neox != 0u ? i + pc.half_dim : 2u * i + 1u);
        const float c = table[r * pc.half_dim + i], s = table[(pc.n + r) * pc.half_dim + i];
        const float x1 = x[a], x2 = x[b];
        x[a] = x1 * c - x2 * s;
        x[b] = x2 * c + x1 * s;
    }
}
