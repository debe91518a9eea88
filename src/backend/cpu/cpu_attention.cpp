// Rotary embeddings and causal softmax attention over a KV cache, in f32.
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_tensor.h"
#include "core/thread_pool.h"

namespace coli {

using cpu::check_shape;
using cpu::row;

namespace {

// inv_freq[i] = theta^(-2i/rotary_dim), computed in f32 as the reference does.
std::vector<float> rope_inv_freq(const RopeParams& p) {
    std::vector<float> inv(p.rotary_dim / 2);
    for (size_t i = 0; i < inv.size(); ++i)
        inv[i] = 1.0f / std::pow(p.theta, static_cast<float>(2 * i) / static_cast<float>(p.rotary_dim));
    return inv;
}

}  // namespace

void CpuBackend::rope(Tensor& x, const RopeParams& p, int64_t pos0) {
    check(p.head_dim > 0 && x.cols() % p.head_dim == 0, "rope: {} columns are not whole heads of {}",
          x.cols(), p.head_dim);
    check(p.rotary_dim > 0 && p.rotary_dim <= p.head_dim && p.rotary_dim % 2 == 0, "rope: bad rotary_dim {}",
          p.rotary_dim);
    const std::vector<float> inv_freq = rope_inv_freq(p);
    const int half = p.rotary_dim / 2;
    const int64_t n_heads = x.cols() / p.head_dim;
    std::vector<float> cos_t(half), sin_t(half);
    for (int64_t r = 0; r < x.rows(); ++r) {
        const float pos = static_cast<float>(pos0 + r);
        for (int i = 0; i < half; ++i) {
            const float angle = pos * inv_freq[i];
            cos_t[i] = std::cos(angle) * p.attention_scaling;
            sin_t[i] = std::sin(angle) * p.attention_scaling;
        }
        for (int64_t h = 0; h < n_heads; ++h) {
            float* v = row(x, r) + h * p.head_dim;
            for (int i = 0; i < half; ++i) {
                // neox pairs (i, i + half); interleaved pairs (2i, 2i + 1).
                float* a = p.style == RopeStyle::neox ? &v[i] : &v[2 * i];
                float* b = p.style == RopeStyle::neox ? &v[i + half] : &v[2 * i + 1];
                const float x1 = *a, x2 = *b;
                *a = x1 * cos_t[i] - x2 * sin_t[i];
                *b = x2 * cos_t[i] + x1 * sin_t[i];
            }
        }
    }
}

void CpuBackend::attention(const Tensor& q, const Tensor& k, const Tensor& v, KvCache& cache,
                           const AttentionShape& s, int64_t pos0, Tensor& out) {
    const int64_t n = q.rows(), hd = s.head_dim;
    const int64_t kv_width = static_cast<int64_t>(s.n_kv_heads) * hd;
    attention_args_check(q, k, v, cache, s, pos0, out);

    for (int64_t i = 0; i < n; ++i) {
        std::copy_n(row(k, i), kv_width, row(cache.k, pos0 + i));
        std::copy_n(row(v, i), kv_width, row(cache.v, pos0 + i));
    }
    const int group = s.n_heads / s.n_kv_heads;
    // One task per (query, head); each owns its output slice and its score buffer.
    pool_.parallel_for(n * s.n_heads, 1, [&](int64_t begin, int64_t end) {
        std::vector<float> scores(pos0 + n);
        for (int64_t task = begin; task < end; ++task) {
            const int64_t i = task / s.n_heads, h = task % s.n_heads, kvh = h / group;
            const int64_t n_keys = pos0 + i + 1;  // causal: keys 0 .. pos0 + i
            const float* qh = row(q, i) + h * hd;
            float max_score = -INFINITY;
            for (int64_t j = 0; j < n_keys; ++j) {
                const float* kj = row(cache.k, j) + kvh * hd;
                float dot = 0;
                for (int64_t d = 0; d < hd; ++d) dot += qh[d] * kj[d];
                scores[j] = dot * s.scale;
                max_score = std::max(max_score, scores[j]);
            }
            float sum = 0;
            for (int64_t j = 0; j < n_keys; ++j) {
                scores[j] = std::exp(scores[j] - max_score);
                sum += scores[j];
            }
            float* o = row(out, i) + h * hd;
            std::fill_n(o, hd, 0.0f);
            for (int64_t j = 0; j < n_keys; ++j) {
                const float p = scores[j] / sum;
                const float* vj = row(cache.v, j) + kvh * hd;
                for (int64_t d = 0; d < hd; ++d) o[d] += p * vj[d];
            }
        }
    });
}

}  // namespace coli
