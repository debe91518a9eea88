#version 450
// out[i] = x[rows[i]]: the tokens routed to one expert, gathered (grid-stride over m * d).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };     // [n, d]
layout(std430, binding = 1) readonly buffer Rows { int rows[]; };  // [first + m]
layout(std430, binding = 2) writeonly buffer Out { float o[]; };  // [m, d]
layout(push_constant) uniform Push {
    uint m;      // rows gathered
    uint d;      // row width
    uint first;  // the first of them in rows
} pc;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.m * pc.d; i += stride)
        o[i] = x[uint(rows[pc.first + i / pc.d]) * pc.d + i % pc.d];
}
