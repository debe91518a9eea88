// The scalar activations of src/backend/activations.h, in GLSL: the same expressions as the CPU reference,
// so that the shaders round like it does.

// Above this, softplus(x) is x in f32 (activations.h kSoftplusLinearFrom).
const float kSoftplusLinearFrom = 20.0;
// tanh is 1 in f32 beyond this; arguments are clamped to it because some drivers compute tanh from exp,
// which overflows to inf / inf (NaN) for large arguments.
const float kTanhSaturate = 10.0;
// GluKind of activations.h, the value of the glu shader's specialization constant.
const uint kGluSilu = 0u, kGluSitu = 1u, kGluSiluClamp = 2u;

float sigmoid(float x) {
    return 1.0 / (1.0 + exp(-x));
}

float silu(float x) {
    return x / (1.0 + exp(-x));
}

float softplus(float x) {
    return x > kSoftplusLinearFrom ? x : log(1.0 + exp(x));
}

float tanh_stable(float x) {
    return tanh(clamp(x, -kTanhSaturate, kTanhSaturate));
}

// SiTU (Kimi K3): b tanh(g / b) sigmoid(g) * lb tanh(u / lb).
float situ(float g, float u, float beta, float linear_beta) {
    return beta * tanh_stable(g / beta) * sigmoid(g) * (linear_beta * tanh_stable(u / linear_beta));
}

// The clamped SwiGLU (DeepSeek-V4): silu(min(g, limit)) clamp(u, -limit, limit).
float silu_clamp(float g, float u, float limit) {
    return silu(min(g, limit)) * clamp(u, -limit, limit);
}

// A gated-linear-unit expert's activation of its gate g and up u projections.
float glu(uint kind, float beta, float linear_beta, float g, float u) {
    if (kind == kGluSitu) return situ(g, u, beta, linear_beta);
    if (kind == kGluSiluClamp) return silu_clamp(g, u, beta);
    return silu(g) * u;
}

// Added to the squared norm of KDA's q and k before the square root (activations.h kKdaL2NormEps).
const float kKdaL2NormEps = 1e-6;

// KDA's per-channel log-decay (activations.h kda_log_decay): -exp(A) softplus(z), or bound sigmoid(exp(A) z)
// when a lower bound < 0 is set (K3).
float kda_log_decay(float z, float a_log, float lower_bound) {
    const float a = exp(a_log);
    return lower_bound < 0.0 ? lower_bound * sigmoid(a * z) : -a * softplus(z);
}
