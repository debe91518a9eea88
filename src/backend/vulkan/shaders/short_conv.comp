#version 450
// KDA's short convolution: causal depthwise over time, then SiLU. One invocation per channel walks the
// tokens with its kTaps-wide window in registers, then writes the channel's last kTaps - 1 inputs back as
// the state; no other invocation reads them, so the state is advanced in place.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "activations.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint kTaps = 4u;  // K, the kernel width: 2 .. kMaxTaps
// The register arrays have a fixed size (spec-constant array sizes do not carry over to every driver, e.g.
// MoltenVK); limits.h kVulkanConvMaxTaps.
const uint kMaxTaps = 16u;

layout(std430, binding = 0) readonly buffer X { float x[]; };     // [n, C]
layout(std430, binding = 1) readonly buffer W { float w[]; };     // [C, K]
layout(std430, binding = 2) buffer State { float state[]; };      // [K - 1, C], oldest input first
layout(std430, binding = 3) writeonly buffer Out { float o[]; };  // [n, C]
layout(push_constant) uniform Push {
    uint n;         // tokens
    uint channels;  // C
} pc;

void main() {
    const uint ch = gl_GlobalInvocationID.x;
    if (ch >= pc.channels) return;
    float window[kMaxTaps];  // inputs t - K + 1 .. t of this channel, oldest first
    float taps[kMaxTaps];    // this channel's weights, w[ch]
    for (uint j = 0u; j + 1u < kTaps; ++j) window[j + 1u] = state[j * pc.channels + ch];
    for (uint j = 0u; j < kTaps; ++j) taps[j] = w[ch * kTaps + j];
    for (uint t = 0u; t < pc.n; ++t) {
        for (uint j = 0u; j + 1u < kTaps; ++j) window[j] = window[j + 1u];
        window[kTaps - 1u] = x[t * pc.channels + ch];
        float sum = 0.0;
        for (uint j = 0u; j < kTaps; ++j) sum += taps[j] * window[j];
        o[t * pc.channels + ch] = silu(sum);
    }
    for (uint j = 0u; j + 1u < kTaps; ++j) state[j * pc.channels + ch] = window[j + 1u];
}
