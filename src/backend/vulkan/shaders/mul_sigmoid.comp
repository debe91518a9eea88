#version 450
// out = a * sigmoid(b) over `count` floats (grid-stride loop): the output gates.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "activations.glsl"

layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer A { float a[]; };     // [n, d]
layout(std430, binding = 1) readonly buffer B { float b[]; };     // [n, d]
layout(std430, binding = 2) writeonly buffer Out { float o[]; };  // [n, d]
layout(push_constant) uniform Push {
    uint count;  // elements
} pc;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += stride) o[i] = a[i] * sigmoid(b[i]);
}
