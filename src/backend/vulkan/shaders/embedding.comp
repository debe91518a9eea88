#version 450
// out[i] = row ids[i] of the table, decoded (grid-stride over n * cols).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint kFormat = 0u;

layout(std430, binding = 0) readonly buffer WData { uint wdata[]; };
layout(std430, binding = 1) readonly buffer WScale { uint wscale[]; };
layout(std430, binding = 2) readonly buffer Ids { int ids[]; };       // [n]
layout(std430, binding = 3) writeonly buffer Out { float o[]; };      // [n, cols]
layout(push_constant) uniform Push {
    uint n;     // tokens
    uint cols;  // table width
} pc;

#include "weight.glsl"

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.n * pc.cols; i += stride)
        o[i] = weight_at(kFormat, pc.cols, uint(ids[i / pc.cols]), i % pc.cols);
}
