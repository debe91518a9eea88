#version 450
// Hyper-connections' collapse (DeepSeek-V4): out[t][c] = sum_j pre[t][j] x[t][j d + c], the S streams of a
// token weighted by the first S columns of its weights, summed in stream order as the CPU does (grid-stride
// over n * d).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };        // [n, streams d]
layout(std430, binding = 1) readonly buffer W { float weights[]; };  // [n, w_cols]: pre = the first streams
layout(std430, binding = 2) writeonly buffer Out { float o[]; };     // [n, d]
layout(push_constant) uniform Push {
    uint n;        // tokens
    uint d;        // a stream's width
    uint streams;  // S
    uint w_cols;   // weights' width (>= S)
} pc;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.n * pc.d; i += stride) {
        const uint t = i / pc.d, c = i % pc.d;
        float sum = 0.0;
        for (uint j = 0u; j < pc.streams; ++j)
            sum += weights[t * pc.w_cols + j] * x[(t * pc.streams + j) * pc.d + c];
        o[i] = sum;
    }
}
