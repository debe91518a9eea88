// Recurrent-state ops on the CPU: KDA's short convolution and the Kimi delta rule (spec 5.1). Both run token
// by token from the state they carry, so prefill and decode are the same code.
#include <cmath>
#include <vector>

#include "backend/activations.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_tensor.h"
#include "core/thread_pool.h"

namespace coli {

using cpu::data;
using cpu::row;

namespace {
// Added to the squared norm before the square root (transformers' l2norm, after the FLA kernels).
constexpr float kL2NormEps = 1e-6f;

// v / sqrt(sum v^2 + eps), times scale.                                                          v: [d]
void l2_normalize(float* v, int d, float scale) {
    float sum_sq = 0;
    for (int i = 0; i < d; ++i) sum_sq += v[i] * v[i];
    const float f = scale / std::sqrt(sum_sq + kL2NormEps);
    for (int i = 0; i < d; ++i) v[i] *= f;
}
}  // namespace

void CpuBackend::short_conv(const Tensor& x, const Weight& w, Tensor& state, Tensor& out) {
    short_conv_args_check(x, w, state, out);
    const int64_t n = x.rows(), c = x.cols(), k = w.cols(), hist = k - 1;
    const auto* wt = static_cast<const float*>(w.host.data);  // [C, K]
    // Input row s of the window: s < hist from the state, else from x.
    const auto input = [&](int64_t s) { return s < hist ? row(state, s) : row(x, s - hist); };
    for (int64_t t = 0; t < n; ++t) {
        float* o = row(out, t);
        for (int64_t ch = 0; ch < c; ++ch) {
            float sum = 0;
            for (int64_t j = 0; j < k; ++j) sum += wt[ch * k + j] * input(t + j)[ch];
            o[ch] = silu(sum);
        }
    }
    // The last hist inputs of [state; x] become the state.
    std::vector<float> next(static_cast<size_t>(hist * c));
    for (int64_t s = 0; s < hist; ++s) std::copy_n(input(n + s), c, &next[s * c]);
    std::copy(next.begin(), next.end(), data(state));
}

void CpuBackend::kda(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                     const Weight& a_log, const Weight& dt_bias, const KdaShape& s, Tensor& state,
                     Tensor& out) {
    kda_args_check(q, k, v, g, beta, a_log, dt_bias, s, state, out);
    const int d = s.head_dim;
    const auto* a = static_cast<const float*>(a_log.host.data);     // [H]
    const auto* dt = static_cast<const float*>(dt_bias.host.data);  // [H d]
    const float q_scale = 1.0f / std::sqrt(static_cast<float>(d));
    pool_.parallel_for(s.n_heads, 1, [&](int64_t h0, int64_t h1) {
        std::vector<float> qh(d), kh(d), alpha(d), u(d);
        for (int64_t h = h0; h < h1; ++h) {
            float* st = row(state, h * d);  // S [dk, dv] of head h
            for (int64_t t = 0; t < q.rows(); ++t) {
                const int64_t c0 = h * d;
                std::copy_n(row(q, t) + c0, d, qh.data());
                std::copy_n(row(k, t) + c0, d, kh.data());
                l2_normalize(qh.data(), d, q_scale);
                l2_normalize(kh.data(), d, 1.0f);
                for (int i = 0; i < d; ++i)
                    alpha[i] =
                        std::exp(kda_log_decay(row(g, t)[c0 + i] + dt[c0 + i], a[h], s.gate_lower_bound));
                const float b = sigmoid(row(beta, t)[h]);
                const float* vh = row(v, t) + c0;
                // S = Diag(alpha) S; u = S^T k.
                std::fill(u.begin(), u.end(), 0.0f);
                for (int i = 0; i < d; ++i) {
                    float* si = st + i * d;
                    for (int j = 0; j < d; ++j) {
                        si[j] *= alpha[i];
                        u[j] += kh[i] * si[j];
                    }
                }
                // S += k (b (v - u))^T; out = S^T q.
                for (int j = 0; j < d; ++j) u[j] = b * (vh[j] - u[j]);
                float* o = row(out, t) + c0;
                std::fill(o, o + d, 0.0f);
                for (int i = 0; i < d; ++i) {
                    float* si = st + i * d;
                    for (int j = 0; j < d; ++j) {
                        si[j] += kh[i] * u[j];
                        o[j] += qh[i] * si[j];
                    }
                }
            }
        }
    });
}

}  // namespace coli
