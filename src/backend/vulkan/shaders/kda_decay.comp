#version 450
// KDA's per-channel log decay of every token, ahead of the recurrence or the chunks (which are sequential
// in the tokens): log_decay[t][c] = kda_log_decay(g[t][c] + dt_bias[c], A_log[c / head_dim], bound),
// grid-stride over n * H d. The log, not the decay: the chunks take differences of its cumulative sums.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "activations.glsl"

layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer G { float g[]; };            // [n, H d]
layout(std430, binding = 1) readonly buffer DtBias { float dt_bias[]; };  // [H d]
layout(std430, binding = 2) readonly buffer ALog { float a_log[]; };      // [H]
layout(std430, binding = 3) writeonly buffer LogDecay { float log_decay[]; };  // [n, H d]
layout(push_constant) uniform Push {
    uint count;         // n H d
    uint width;         // H d
    uint head_dim;      // d
    float lower_bound;  // 0: -exp(A) softplus(z); < 0 (K3): bound sigmoid(exp(A) z)
} pc;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += stride) {
        const uint c = i % pc.width;
        log_decay[i] = kda_log_decay(g[i] + dt_bias[c], a_log[c / pc.head_dim], pc.lower_bound);
    }
}
