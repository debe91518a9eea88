#version 450
// Hyper-connections' expand (DeepSeek-V4): out[t][k d + c] = post[t][k] y[t][c] + sum_j comb[t][j][k]
// x[t][j d + c], the sublayer's output spread back over the S streams, in the CPU's order (grid-stride over
// n * S * d). A token's weights are [pre (S) | post (S) | comb (S x S, [j][k])].
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };        // [n, streams d]
layout(std430, binding = 1) readonly buffer Y { float y[]; };        // [n, d]
layout(std430, binding = 2) readonly buffer W { float weights[]; };  // [n, (2 + streams) streams]
layout(std430, binding = 3) writeonly buffer Out { float o[]; };     // [n, streams d]
layout(push_constant) uniform Push {
    uint n;        // tokens
    uint d;        // a stream's width
    uint streams;  // S
} pc;

void main() {
    const uint S = pc.streams, width = S * pc.d, stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.n * width; i += stride) {
        const uint t = i / width, k = i % width / pc.d, c = i % pc.d;
        const uint post = t * (2u + S) * S + S, comb = post + S;
        float sum = weights[post + k] * y[t * pc.d + c];
        for (uint j = 0u; j < S; ++j) sum += weights[comb + j * S + k] * x[t * width + j * pc.d + c];
        o[i] = sum;
    }
}
