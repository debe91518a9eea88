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

// Queries from which mla_attention reconstructs per-head keys and values instead of absorbing each query:
// absorbing costs ~2 kv_lora per key and query, expanding (dn + dv) kv_lora per key once.
constexpr int64_t kMlaExpandMinTokens = 256;

// p[j] = exp(s[j] - max) / sum, in place.
void softmax_in_place(float* s, int64_t n) {
    float max_score = -INFINITY;
    for (int64_t j = 0; j < n; ++j) max_score = std::max(max_score, s[j]);
    float sum = 0;
    for (int64_t j = 0; j < n; ++j) {
        s[j] = std::exp(s[j] - max_score);
        sum += s[j];
    }
    for (int64_t j = 0; j < n; ++j) s[j] /= sum;
}

// The inner loops below in the widest vector set the CPU has, chosen when the program loads (GCC's function
// multiversioning; this file is built for baseline x86-64). Products and sums stay separate instructions,
// never contracted into FMAs, so every version gives the baseline's results bit for bit.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define COLI_SIMD_CLONES \
    __attribute__((target_clones("avx512f", "avx2", "default"), optimize("fp-contract=off")))
#else
#define COLI_SIMD_CLONES
#endif

// Sum of a[d] b[d] over kDotLanes independent partial sums, so that the compiler can keep them in vector
// registers (one running sum would be a serial chain it may not reorder).
constexpr int kDotLanes = 16;
COLI_SIMD_CLONES float dot(const float* a, const float* b, int64_t n) {
    float lanes[kDotLanes] = {};
    int64_t d = 0;
    for (; d + kDotLanes <= n; d += kDotLanes)
        for (int l = 0; l < kDotLanes; ++l) lanes[l] += a[d + l] * b[d + l];
    float sum = 0;
    for (int l = 0; l < kDotLanes; ++l) sum += lanes[l];
    for (; d < n; ++d) sum += a[d] * b[d];
    return sum;
}

// y[d] += a x[d].
COLI_SIMD_CLONES void axpy(float a, const float* x, float* y, int64_t n) {
    for (int64_t d = 0; d < n; ++d) y[d] += a * x[d];
}

}  // namespace

void CpuBackend::rope(Tensor& x, const RopeParams& p, int64_t pos0) {
    rope_args_check(x, p);
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
            float* v = row(x, r) + h * p.head_dim + p.rotary_offset;
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
            for (int64_t j = 0; j < n_keys; ++j)
                scores[j] = dot(qh, row(cache.k, j) + kvh * hd, hd) * s.scale;
            softmax_in_place(scores.data(), n_keys);
            float* o = row(out, i) + h * hd;
            std::fill_n(o, hd, 0.0f);
            for (int64_t j = 0; j < n_keys; ++j) {
                const float* vj = row(cache.v, j) + kvh * hd;
                axpy(scores[j], vj, o, hd);
            }
        }
    });
}

void CpuBackend::mla_attention(const Tensor& q, const Tensor& latent, const Tensor& k_pe, const Weight& w_kvb,
                               KvCache& cache, const MlaShape& s, int64_t pos0, const Tensor* selection,
                               Tensor& out) {
    mla_args_check(q, latent, k_pe, w_kvb, cache, s, pos0, selection, out);
    const int64_t n = q.rows(), dn = s.nope_dim, dr = s.rope_dim, dv = s.v_dim, lora = s.kv_lora;
    for (int64_t i = 0; i < n; ++i) {
        std::copy_n(row(latent, i), lora, row(cache.k, pos0 + i));
        std::copy_n(row(k_pe, i), dr, row(cache.v, pos0 + i));
    }
    // Prefill of many tokens reconstructs each head's keys and values from the latents once (spec 2.1):
    // cheaper than absorbing every query when the queries outnumber the ratio of the two costs.
    const int64_t n_cached = pos0 + n;
    const bool expand = n >= kMlaExpandMinTokens;
    // One task per head: its rows of w_kvb are decoded once for all queries.
    pool_.parallel_for(s.n_heads, 1, [&](int64_t begin, int64_t end) {
        // Kept by each pool thread across calls: fresh buffers of this size cost a decode step more in page
        // faults and zero-fills than its arithmetic (each is written before it is read).
        thread_local std::vector<float> w_uk, w_uv, q_abs, mixed, scores;
        w_uk.resize(dn * lora);  // [dn, kv_lora]
        w_uv.resize(dv * lora);  // [dv, kv_lora]
        q_abs.resize(lora);
        mixed.resize(lora);
        scores.resize(n_cached);
        std::vector<float> k_nope(expand ? n_cached * dn : 0), values(expand ? n_cached * dv : 0);
        std::vector<int64_t> keys;
        for (int64_t h = begin; h < end; ++h) {
            const int64_t r0 = h * (dn + dv);
            for (int64_t j = 0; j < dn; ++j) weight_decode_row(w_kvb.host, r0 + j, &w_uk[j * lora]);
            for (int64_t j = 0; j < dv; ++j) weight_decode_row(w_kvb.host, r0 + dn + j, &w_uv[j * lora]);
            for (int64_t t = 0; expand && t < n_cached; ++t) {  // W_UK[h] latent(t), W_UV[h] latent(t)
                for (int64_t j = 0; j < dn; ++j)
                    k_nope[t * dn + j] = dot(&w_uk[j * lora], row(cache.k, t), lora);
                for (int64_t j = 0; j < dv; ++j)
                    values[t * dv + j] = dot(&w_uv[j * lora], row(cache.k, t), lora);
            }
            for (int64_t i = 0; i < n; ++i) {
                const float* q_nope = row(q, i) + h * (dn + dr);  // [dn]
                const float* q_pe = q_nope + dn;                  // [dr]
                // Keys: every cached position up to this query's (causal), or the ones DSA selected.
                keys.clear();
                if (selection) {
                    for (int64_t j = 0; j < selection->cols(); ++j)
                        if (const float p = row(*selection, i)[j]; p >= 0)
                            keys.push_back(static_cast<int64_t>(p));
                } else {
                    for (int64_t t = 0; t <= pos0 + i; ++t) keys.push_back(t);
                }
                const auto n_keys = static_cast<int64_t>(keys.size());
                float* o = row(out, i) + h * dv;  // [dv]
                if (expand) {
                    for (int64_t j = 0; j < n_keys; ++j)
                        scores[j] =
                            (dot(q_nope, &k_nope[keys[j] * dn], dn) + dot(q_pe, row(cache.v, keys[j]), dr)) *
                            s.scale;
                    softmax_in_place(scores.data(), n_keys);
                    std::fill_n(o, dv, 0.0f);
                    for (int64_t j = 0; j < n_keys; ++j) axpy(scores[j], &values[keys[j] * dv], o, dv);
                    continue;
                }
                std::fill(q_abs.begin(), q_abs.end(), 0.0f);  // W_UK[h]^T q_nope: [kv_lora]
                for (int64_t j = 0; j < dn; ++j) axpy(q_nope[j], &w_uk[j * lora], q_abs.data(), lora);
                for (int64_t j = 0; j < n_keys; ++j)
                    scores[j] = (dot(q_abs.data(), row(cache.k, keys[j]), lora) +
                                 dot(q_pe, row(cache.v, keys[j]), dr)) *
                                s.scale;
                softmax_in_place(scores.data(), n_keys);
                std::fill(mixed.begin(), mixed.end(), 0.0f);  // sum_t p(t) latent(t): [kv_lora]
                for (int64_t j = 0; j < n_keys; ++j) {
                    const float* lt = row(cache.k, keys[j]);
                    axpy(scores[j], lt, mixed.data(), lora);
                }
                for (int64_t j = 0; j < dv; ++j)
                    o[j] = dot(&w_uv[j * lora], mixed.data(), lora);  // W_UV[h] mixed
            }
        }
    });
}

void CpuBackend::dsa_select(const Tensor& q, const Tensor& weights, const Tensor& k, Tensor& cache,
                            const DsaShape& s, int64_t pos0, Tensor& out) {
    dsa_args_check(q, weights, k, cache, s, pos0, out);
    const int64_t n = q.rows(), d = s.head_dim;
    for (int64_t i = 0; i < n; ++i) std::copy_n(row(k, i), d, row(cache, pos0 + i));
    pool_.parallel_for(n, 1, [&](int64_t begin, int64_t end) {
        std::vector<float> index(pos0 + n);
        for (int64_t i = begin; i < end; ++i) {
            const int64_t visible = pos0 + i + 1;  // causal
            for (int64_t t = 0; t < visible; ++t) {
                float sum = 0;
                for (int h = 0; h < s.n_heads; ++h) {
                    const float qk = dot(row(q, i) + h * d, row(cache, t), d) * s.scale;
                    sum += row(weights, i)[h] * s.weight_scale * std::max(qk, 0.0f);
                }
                index[t] = sum;
            }
            dsa_topk_row(index.data(), visible, s.top_k, row(out, i));
        }
    });
}

}  // namespace coli
