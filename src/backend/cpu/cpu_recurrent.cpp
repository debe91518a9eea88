// Recurrent-state ops on the CPU: KDA's short convolution and the Kimi delta rule (docs/models.md 5.1), from
// the state they carry. The delta rule decodes token by token and prefills by chunks (cpu_kda_chunk.cpp).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/activations.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_kda_chunk.h"
#include "backend/cpu/cpu_tensor.h"
#include "core/thread_pool.h"

namespace coli {

using cpu::data;
using cpu::kKdaChunk;
using cpu::row;

namespace {

// v / sqrt(sum v^2 + eps), times scale.                                                          v: [d]
void l2_normalize(float* v, int d, float scale) {
    float sum_sq = 0;
    for (int i = 0; i < d; ++i) sum_sq += v[i] * v[i];
    const float f = scale / std::sqrt(sum_sq + kKdaL2NormEps);
    for (int i = 0; i < d; ++i) v[i] *= f;
}

// One token of the recurrence on head state st [d, d]:  S = Diag(alpha) S;  S += k (b (v - S^T k))^T;
// out = S^T q.                                                             q, k, alpha, v, out: [d]
void kda_step(const float* qh, const float* kh, const float* alpha, float b, const float* vh, int d,
              float* st, float* o) {
    std::vector<float> u(d, 0.0f);
    for (int i = 0; i < d; ++i) {
        float* si = st + i * d;
        for (int j = 0; j < d; ++j) {
            si[j] *= alpha[i];
            u[j] += kh[i] * si[j];
        }
    }
    for (int j = 0; j < d; ++j) u[j] = b * (vh[j] - u[j]);
    std::fill(o, o + d, 0.0f);
    for (int i = 0; i < d; ++i) {
        float* si = st + i * d;
        for (int j = 0; j < d; ++j) {
            si[j] += kh[i] * u[j];
            o[j] += qh[i] * si[j];
        }
    }
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
    const int64_t n = q.rows();
    const auto* a = static_cast<const float*>(a_log.host.data);     // [H]
    const auto* dt = static_cast<const float*>(dt_bias.host.data);  // [H d]
    const float q_scale = 1.0f / std::sqrt(static_cast<float>(d));
    pool_.parallel_for(s.n_heads, 1, [&](int64_t h0, int64_t h1) {
        // One chunk of head h, prepared: q, k normalized, per-channel decays, sigmoid(beta).
        std::vector<float> qh(size_t{kKdaChunk} * d), kh(size_t{kKdaChunk} * d), alpha(size_t{kKdaChunk} * d),
            bh(kKdaChunk);
        cpu::KdaChunkScratch scratch(d);
        for (int64_t h = h0; h < h1; ++h) {
            float* st = row(state, h * d);  // S [dk, dv] of head h
            const int64_t c0 = h * d;
            for (int64_t t0 = 0; t0 < n; t0 += kKdaChunk) {
                const int c = static_cast<int>(std::min<int64_t>(kKdaChunk, n - t0));
                for (int64_t r = 0; r < c; ++r) {
                    const int64_t t = t0 + r;
                    float *qr = &qh[r * d], *kr = &kh[r * d];
                    std::copy_n(row(q, t) + c0, d, qr);
                    std::copy_n(row(k, t) + c0, d, kr);
                    l2_normalize(qr, d, q_scale);
                    l2_normalize(kr, d, 1.0f);
                    for (int i = 0; i < d; ++i)
                        alpha[r * d + i] =
                            std::exp(kda_log_decay(row(g, t)[c0 + i] + dt[c0 + i], a[h], s.gate_lower_bound));
                    bh[r] = sigmoid(row(beta, t)[h]);
                }
                // Decode keeps the token recurrence; a prefill goes by chunks (the last one may be short).
                if (n == 1)
                    kda_step(qh.data(), kh.data(), alpha.data(), bh[0], row(v, 0) + c0, d, st,
                             row(out, 0) + c0);
                else
                    cpu::kda_chunk({c, d, qh.data(), kh.data(), alpha.data(), bh.data(), row(v, t0) + c0,
                                    v.cols(), row(out, t0) + c0, out.cols()},
                                   st, scratch);
            }
        }
    });
}

}  // namespace coli
