// Scalar activations that several ops and backends share, written once for host and device code so that
// the CPU reference and the GPU kernels compute the same expressions.
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define COLI_HOST_DEVICE __host__ __device__
#else
#define COLI_HOST_DEVICE
#endif

namespace coli {

// The activation of a gated-linear-unit expert: act(gate x, up x).
enum class GluKind : uint8_t {
    silu,        // SwiGLU: silu(g) u
    situ,        // SiTU (Kimi K3): b tanh(g / b) sigmoid(g) * lb tanh(u / lb)
    silu_clamp,  // clamped SwiGLU (DeepSeek-V4): silu(min(g, L)) clamp(u, -L, L), L = beta (swiglu_limit)
};

// The activation's name, for messages and listings.
inline const char* glu_name(GluKind kind) {
    if (kind == GluKind::situ) return "SiTU";
    if (kind == GluKind::silu_clamp) return "clamped SwiGLU";
    return "SwiGLU";
}

// Above this, softplus(x) is x in f32 (transformers' KDA gate switches at the same point).
inline constexpr float kSoftplusLinearFrom = 20.0f;

COLI_HOST_DEVICE inline float sigmoid(float x) {
    return 1.0f / (1.0f + expf(-x));
}

COLI_HOST_DEVICE inline float silu(float x) {
    return x / (1.0f + expf(-x));
}

COLI_HOST_DEVICE inline float softplus(float x) {
    return x > kSoftplusLinearFrom ? x : logf(1.0f + expf(x));
}

// SiTU's gate half and linear half (Kimi K3): b tanh(g / b) sigmoid(g) and lb tanh(u / lb).
COLI_HOST_DEVICE inline float situ(float g, float u, float beta, float linear_beta) {
    return beta * tanhf(g / beta) * sigmoid(g) * (linear_beta * tanhf(u / linear_beta));
}

// The clamped SwiGLU: silu(min(g, limit)) clamp(u, -limit, limit).
COLI_HOST_DEVICE inline float silu_clamp(float g, float u, float limit) {
    return silu(fminf(g, limit)) * fminf(fmaxf(u, -limit), limit);
}

// A gated-linear-unit expert's activation of its gate and up projections (tensor.h GluActivation).
COLI_HOST_DEVICE inline float glu(GluKind kind, float beta, float linear_beta, float g, float u) {
    if (kind == GluKind::situ) return situ(g, u, beta, linear_beta);
    if (kind == GluKind::silu_clamp) return silu_clamp(g, u, beta);
    return silu(g) * u;
}

// Added to the squared norm of KDA's q and k before the square root (transformers' l2norm, after the FLA
// kernels).
inline constexpr float kKdaL2NormEps = 1e-6f;

// KDA's per-channel log-decay from z = W_fb W_fa x + dt_bias and the head's A_log (docs/models.md 5.1):
// -exp(A) softplus(z) (Kimi Linear), or bound sigmoid(exp(A) z) when a lower bound < 0 is set (K3).
COLI_HOST_DEVICE inline float kda_log_decay(float z, float a_log, float lower_bound) {
    const float a = expf(a_log);
    return lower_bound < 0.0f ? lower_bound * sigmoid(a * z) : -a * softplus(z);
}

}  // namespace coli
