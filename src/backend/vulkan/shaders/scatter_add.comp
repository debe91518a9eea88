#version 450
// y[rows[i]] += src[i] * gains[i], as the CPU adds one expert's outputs (rows are distinct tokens).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer Src { float src[]; };    // [m, d]
layout(std430, binding = 1) readonly buffer Rows { int rows[]; };    // [first + m]
layout(std430, binding = 2) readonly buffer Gains { float gains[]; };  // [first + m]
layout(std430, binding = 3) buffer Y { float y[]; };                 // [n, d]
layout(push_constant) uniform Push {
    uint m;      // rows added
    uint d;      // row width
    uint first;  // the first of them in rows and gains
} pc;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.m * pc.d; i += stride) {
        const uint r = pc.first + i / pc.d;
        y[uint(rows[r]) * pc.d + i % pc.d] += src[i] * gains[r];
    }
}
