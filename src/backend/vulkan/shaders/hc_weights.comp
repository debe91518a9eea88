#version 450
// Hyper-connection weights (DeepSeek-V4) from the mixing logits, one invocation per token (grid-stride over
// n), written and Sinkhorn-normalized in place in out, in the CPU's order:
//   pre_j  = sigmoid(mix_j scale0 + base_j) + eps                          j < S
//   post_k = 2 sigmoid(mix_{S+k} scale1 + base_{S+k})                      k < S
//   comb   = softmax over k of (mix_{2S+jS+k} scale2 + base_{2S+jS+k}) + eps, then columns / (sum + eps),
//            then (iters - 1) times rows / (sum + eps) and columns / (sum + eps)
// A head's weights (cols == S) are pre only.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "activations.glsl"

layout(local_size_x = 256) in;
const float kPostGain = 2.0;  // post's sigmoid spans (0, 2)

layout(std430, binding = 0) readonly buffer Mix { float mix_in[]; };  // [n, cols]
layout(std430, binding = 1) readonly buffer Base { float base[]; };   // [cols]
layout(std430, binding = 2) readonly buffer Scale { float scale[]; }; // [3], or [1] for a head
layout(std430, binding = 3) buffer Out { float o[]; };                // [n, cols]: [pre | post | comb]
layout(push_constant) uniform Push {
    uint n;        // tokens
    uint streams;  // S
    uint cols;     // (2 + S) S, or S (a head)
    uint iters;    // Sinkhorn iterations
    float eps;
} pc;

// comb's columns (k), each divided by its sum over j + eps.
void columns_normalize(uint comb) {
    const uint S = pc.streams;
    for (uint k = 0u; k < S; ++k) {
        float sum = 0.0;
        for (uint j = 0u; j < S; ++j) sum += o[comb + j * S + k];
        for (uint j = 0u; j < S; ++j) o[comb + j * S + k] /= sum + pc.eps;
    }
}

// comb's rows (j), each divided by its sum over k + eps.
void rows_normalize(uint comb) {
    const uint S = pc.streams;
    for (uint j = 0u; j < S; ++j) {
        float sum = 0.0;
        for (uint k = 0u; k < S; ++k) sum += o[comb + j * S + k];
        for (uint k = 0u; k < S; ++k) o[comb + j * S + k] /= sum + pc.eps;
    }
}

void weights_of(uint t) {
    const uint S = pc.streams, row = t * pc.cols;
    for (uint j = 0u; j < S; ++j) o[row + j] = sigmoid(mix_in[row + j] * scale[0] + base[j]) + pc.eps;
    if (pc.cols == S) return;
    for (uint k = S; k < 2u * S; ++k) o[row + k] = kPostGain * sigmoid(mix_in[row + k] * scale[1] + base[k]);
    const uint comb = row + 2u * S;
    for (uint j = 0u; j < S; ++j) {  // softmax over k of row j, + eps
        const uint r = comb + j * S, c0 = 2u * S + j * S;
        float top = kNegInf;
        for (uint k = 0u; k < S; ++k) {
            o[r + k] = mix_in[row + c0 + k] * scale[2] + base[c0 + k];
            top = max(top, o[r + k]);
        }
        float total = 0.0;
        for (uint k = 0u; k < S; ++k) {
            o[r + k] = exp(o[r + k] - top);
            total += o[r + k];
        }
        for (uint k = 0u; k < S; ++k) o[r + k] = o[r + k] / total + pc.eps;
    }
    columns_normalize(comb);
    for (uint it = 1u; it < pc.iters; ++it) {
        rows_normalize(comb);
        columns_normalize(comb);
    }
}

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint t = gl_GlobalInvocationID.x; t < pc.n; t += stride) weights_of(t);
}
