#version 450
// Elementwise ops over `count` floats (grid-stride loop), chosen by the specialization constant kOp:
//   add:    out = a + b
//   clamp:  a = min(max(a, lo), hi), in place
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint kOp = 0u;
const uint kAdd = 0u, kClamp = 1u;

layout(std430, binding = 0) buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Push {
    uint count;  // elements
    float lo;    // clamp bounds
    float hi;
} pc;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += stride) {
        if (kOp == kAdd) o[i] = a[i] + b[i];
        if (kOp == kClamp) a[i] = min(max(a[i], pc.lo), pc.hi);
    }
}
