// Rotary embeddings and causal softmax attention over a KV cache, in f32.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_tensor.h"
#include "core/simd_clones.h"
#include "core/thread_pool.h"

namespace coli {

using cpu::check_shape;
using cpu::row;

namespace {

// Queries from which mla_attention reconstructs per-head keys and values instead of absorbing each query:
// absorbing costs ~2 kv_lora per key and query, expanding (dn + dv) kv_lora per key once.
constexpr int64_t kMlaExpandMinTokens = 256;

// Keys per task of the DSA index at least: fewer cost more in dispatch than in arithmetic.
constexpr int64_t kDsaMinKeysPerTask = 64;

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

// Heads that the attention loops take together (MLA's absorbed path, the heads of one GQA kv head, DSA's
// indexer heads): each cached row is loaded once for all of them and meets them in registers, instead of
// streaming the cache from outer caches once per head.
constexpr int kHeadBlock = 4;

// Pointers to the `count` (1..kHeadBlock) heads from `first`, `stride` floats apart; the slots past them
// repeat the last one, whose results the caller drops.
std::array<const float*, kHeadBlock> head_block(const float* first, int64_t stride, int count) {
    std::array<const float*, kHeadBlock> heads;
    for (int m = 0; m < kHeadBlock; ++m) heads[m] = first + std::min(m, count - 1) * stride;
    return heads;
}

// kDotLanes floats as one value (GCC's vector extension), so that the head blocks' partial sums stay in
// vector registers; its arithmetic is element by element, as the loops of dot() and axpy().
using Lanes = float __attribute__((vector_size(kDotLanes * sizeof(float))));

// out[m] = dot(a[m], b, n) for every m, each summed in dot()'s order (the same bits), b loaded once.
COLI_SIMD_CLONES void dot_block(const float* const* a, const float* b, int64_t n, float* out) {
    Lanes lanes[kHeadBlock] = {};
    int64_t d = 0;
    for (; d + kDotLanes <= n; d += kDotLanes) {
        Lanes bv, av;
        std::memcpy(&bv, b + d, sizeof(bv));
        for (int m = 0; m < kHeadBlock; ++m) {
            std::memcpy(&av, a[m] + d, sizeof(av));
            lanes[m] += av * bv;
        }
    }
    for (int m = 0; m < kHeadBlock; ++m) {
        float sum = 0;
        for (int l = 0; l < kDotLanes; ++l) sum += lanes[m][l];
        for (int64_t t = d; t < n; ++t) sum += a[m][t] * b[t];
        out[m] = sum;
    }
}

// y[m][d] += a[m] x[d] for every m (axpy's results), x loaded once.
COLI_SIMD_CLONES void axpy_block(const float* a, const float* x, float* const* y, int64_t n) {
    int64_t d = 0;
    for (; d + kDotLanes <= n; d += kDotLanes) {
        Lanes xv, yv;
        std::memcpy(&xv, x + d, sizeof(xv));
        for (int m = 0; m < kHeadBlock; ++m) {
            std::memcpy(&yv, y[m] + d, sizeof(yv));
            yv += a[m] * xv;
            std::memcpy(y[m] + d, &yv, sizeof(yv));
        }
    }
    for (; d < n; ++d)
        for (int m = 0; m < kHeadBlock; ++m) y[m][d] += a[m] * x[d];
}

}  // namespace

void CpuBackend::rope(Tensor& x, const RopeParams& p, int64_t pos0) {
    rope_args_check(x, p);
    const std::vector<float> inv_freq = rope_inv_freq(p);
    const int half = p.rotary_dim / 2;
    const int64_t n_heads = x.cols() / p.head_dim;
    std::vector<float> cos_t(half), sin_t(half);
    for (int64_t r = 0; r < x.rows(); ++r) {
        const float pos = static_cast<float>((pos0 + r) * p.position_stride);
        for (int i = 0; i < half; ++i) {
            const float angle = pos * inv_freq[i];
            cos_t[i] = std::cos(angle) * p.attention_scaling;
            sin_t[i] = std::sin(angle) * p.attention_scaling;
            if (p.inverse) sin_t[i] = -sin_t[i];  // rotation by -angle
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
    // A task takes up to kHeadBlock (query, head) vectors that share one kv head: a block of that kv head's
    // heads times a block of consecutive queries (all heads of a group first, then as many queries as fill
    // the block), and they meet each cached row once. Tasks run the query blocks of one head block one after
    // another, so that a thread's range reuses that kv head's cached rows from its own cache (taken query by
    // query, every query would stream the whole cache again). Each task owns its outputs and buffers.
    const int heads_per_block = std::min(group, kHeadBlock);
    const int queries_per_block = kHeadBlock / heads_per_block;
    const int blocks_per_kv = (group + heads_per_block - 1) / heads_per_block;
    const int64_t query_blocks = (n + queries_per_block - 1) / queries_per_block;
    const int64_t tasks = int64_t{s.n_kv_heads} * blocks_per_kv * query_blocks;
    pool_.parallel_for(tasks, 1, [&](int64_t begin, int64_t end) {
        std::vector<float> scores(kHeadBlock * (pos0 + n));  // [vector, key]
        std::vector<float> dropped(kHeadBlock * hd);         // outputs of the vectors past the block's
        for (int64_t task = begin; task < end; ++task) {
            const int64_t block = task / query_blocks, kvh = block / blocks_per_kv;
            const int64_t i0 = task % query_blocks * queries_per_block;  // the block's first query
            // The block's first head within the kv head's group, its heads and its queries.
            const int first = static_cast<int>(block % blocks_per_kv) * heads_per_block;
            const int heads = std::min(heads_per_block, group - first);
            const int queries = static_cast<int>(std::min<int64_t>(queries_per_block, n - i0));
            const int count = heads * queries;  // vectors; the slots past them repeat the last one
            const int64_t h0 = kvh * group + first;
            std::array<const float*, kHeadBlock> qv;  // [hd] each
            int64_t n_keys[kHeadBlock];               // causal: keys 0 .. pos0 + the vector's query
            float* sc[kHeadBlock];                    // [n_keys] each
            float* o[kHeadBlock];                     // [hd] each
            for (int m = 0; m < kHeadBlock; ++m) {
                const int v = std::min(m, count - 1);
                const int64_t i = i0 + v / heads, h = h0 + v % heads;
                qv[m] = row(q, i) + h * hd;
                n_keys[m] = pos0 + i + 1;
                sc[m] = &scores[m * (pos0 + n)];
                o[m] = m < count ? row(out, i) + h * hd : &dropped[m * hd];
            }
            // A lone vector (one query of multi-head attention) takes the one-vector loops, not a block of
            // copies of itself. Keys past a vector's own are scored with the rest and never used.
            const int computed = count == 1 ? 1 : kHeadBlock;
            const int64_t keys_all = n_keys[0],
                          keys_any = n_keys[count - 1];  // every vector's, some vector's
            for (int64_t j = 0; j < keys_any; ++j) {
                float dots[kHeadBlock];
                if (count == 1)
                    dots[0] = dot(qv[0], row(cache.k, j) + kvh * hd, hd);
                else
                    dot_block(qv.data(), row(cache.k, j) + kvh * hd, hd, dots);
                for (int m = 0; m < computed; ++m) sc[m][j] = dots[m] * s.scale;
            }
            for (int m = 0; m < computed; ++m) {
                softmax_in_place(sc[m], n_keys[m]);
                std::fill_n(o[m], hd, 0.0f);
            }
            for (int64_t j = 0; j < keys_any; ++j) {
                const float* vj = row(cache.v, j) + kvh * hd;
                if (count == 1) {
                    axpy(sc[0][j], vj, o[0], hd);
                } else if (j < keys_all) {
                    float p[kHeadBlock];
                    for (int m = 0; m < kHeadBlock; ++m) p[m] = sc[m][j];
                    axpy_block(p, vj, o, hd);
                } else {
                    for (int m = 0; m < count; ++m)
                        if (j < n_keys[m]) axpy(sc[m][j], vj, o[m], hd);
                }
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
    // Each query's keys: every cached position up to its own (causal), or the ones DSA selected.
    std::vector<std::vector<int64_t>> keys(n);
    for (int64_t i = 0; i < n; ++i) {
        if (selection) {
            for (int64_t j = 0; j < selection->cols(); ++j)
                if (const float p = row(*selection, i)[j]; p >= 0) keys[i].push_back(static_cast<int64_t>(p));
        } else {
            for (int64_t t = 0; t <= pos0 + i; ++t) keys[i].push_back(t);
        }
    }
    const int64_t n_cached = pos0 + n;
    // Rows [r0, r0 + count) of w_kvb (one head's W_UK or W_UV), decoded.   rows: [count, kv_lora]
    const auto kvb_rows = [&](int64_t r0, int64_t count, float* rows) {
        for (int64_t j = 0; j < count; ++j) weight_decode_row(w_kvb.host, r0 + j, &rows[j * lora]);
    };

    // Prefill of many tokens reconstructs each head's keys and values from the latents once (docs/models.md
    // 2.1): cheaper than absorbing every query when the queries outnumber the ratio of the two costs. One
    // task per head: its rows of w_kvb are decoded once for all queries.
    if (n >= kMlaExpandMinTokens) {
        pool_.parallel_for(s.n_heads, 1, [&](int64_t begin, int64_t end) {
            std::vector<float> w_uk(dn * lora), w_uv(dv * lora);              // [dn | dv, kv_lora]
            std::vector<float> k_nope(n_cached * dn), values(n_cached * dv);  // [n_cached, dn | dv]
            std::vector<float> scores(n_cached);
            for (int64_t h = begin; h < end; ++h) {
                kvb_rows(h * (dn + dv), dn, w_uk.data());
                kvb_rows(h * (dn + dv) + dn, dv, w_uv.data());
                for (int64_t t = 0; t < n_cached; ++t) {  // W_UK[h] latent(t), W_UV[h] latent(t)
                    for (int64_t j = 0; j < dn; ++j)
                        k_nope[t * dn + j] = dot(&w_uk[j * lora], row(cache.k, t), lora);
                    for (int64_t j = 0; j < dv; ++j)
                        values[t * dv + j] = dot(&w_uv[j * lora], row(cache.k, t), lora);
                }
                for (int64_t i = 0; i < n; ++i) {
                    const float* q_nope = row(q, i) + h * (dn + dr);  // [dn]
                    const float* q_pe = q_nope + dn;                  // [dr]
                    const std::vector<int64_t>& ks = keys[i];
                    const auto n_keys = static_cast<int64_t>(ks.size());
                    for (int64_t j = 0; j < n_keys; ++j)
                        scores[j] =
                            (dot(q_nope, &k_nope[ks[j] * dn], dn) + dot(q_pe, row(cache.v, ks[j]), dr)) *
                            s.scale;
                    softmax_in_place(scores.data(), n_keys);
                    float* o = row(out, i) + h * dv;  // [dv]
                    std::fill_n(o, dv, 0.0f);
                    for (int64_t j = 0; j < n_keys; ++j) axpy(scores[j], &values[ks[j] * dv], o, dv);
                }
            }
        });
        return;
    }

    // Absorbed (docs/models.md 2.2): per head q_abs = W_UK^T q_nope, scores against the latents, mixed =
    // sum_t p(t) latent(t), out = W_UV mixed. One task per block of kHeadBlock heads, which meet each latent
    // row once.
    const int64_t blocks = (s.n_heads + kHeadBlock - 1) / kHeadBlock;
    pool_.parallel_for(blocks, 1, [&](int64_t begin, int64_t end) {
        // Kept by each pool thread across calls: fresh buffers of this size cost a decode step more in page
        // faults and zero-fills than its arithmetic (each is written before it is read).
        thread_local std::vector<float> w_row, q_abs, mixed, scores;
        w_row.resize(lora);                    // one row of W_UK or W_UV, used while it is in L1
        q_abs.resize(kHeadBlock * n * lora);   // [head, query, kv_lora]
        mixed.resize(kHeadBlock * n * lora);   // [head, query, kv_lora]
        scores.resize(kHeadBlock * n_cached);  // [head, key]
        for (int64_t b = begin; b < end; ++b) {
            const int64_t h0 = b * kHeadBlock;
            const int heads = static_cast<int>(std::min<int64_t>(kHeadBlock, s.n_heads - h0));
            for (int m = 0; m < heads; ++m) {  // W_UK[h]^T q_nope of every query, a row of W_UK at a time
                std::fill_n(&q_abs[m * n * lora], n * lora, 0.0f);
                for (int64_t j = 0; j < dn; ++j) {
                    kvb_rows((h0 + m) * (dn + dv) + j, 1, w_row.data());
                    for (int64_t i = 0; i < n; ++i) {
                        const float* q_nope = row(q, i) + (h0 + m) * (dn + dr);  // [dn]
                        axpy(q_nope[j], w_row.data(), &q_abs[(m * n + i) * lora], lora);
                    }
                }
            }
            for (int64_t i = 0; i < n; ++i) {
                // The block's operands; a block past the last head repeats it there and drops the results.
                const auto qa = head_block(&q_abs[i * lora], n * lora, heads);  // [kv_lora] each
                const auto qp = head_block(row(q, i) + h0 * (dn + dr) + dn, dn + dr, heads);  // [dr] each
                float* sc[kHeadBlock];                                                        // [n_keys] each
                float* mx[kHeadBlock];  // [kv_lora] each
                for (int m = 0; m < kHeadBlock; ++m) {
                    sc[m] = &scores[m * n_cached];
                    mx[m] = &mixed[(m * n + i) * lora];
                }
                const std::vector<int64_t>& ks = keys[i];
                const auto n_keys = static_cast<int64_t>(ks.size());
                for (int64_t j = 0; j < n_keys; ++j) {
                    float nope[kHeadBlock], pe[kHeadBlock];
                    dot_block(qa.data(), row(cache.k, ks[j]), lora, nope);
                    dot_block(qp.data(), row(cache.v, ks[j]), dr, pe);
                    for (int m = 0; m < kHeadBlock; ++m) sc[m][j] = (nope[m] + pe[m]) * s.scale;
                }
                for (int m = 0; m < kHeadBlock; ++m) {
                    softmax_in_place(sc[m], n_keys);
                    std::fill_n(mx[m], lora, 0.0f);
                }
                for (int64_t j = 0; j < n_keys; ++j) {
                    float p[kHeadBlock];
                    for (int m = 0; m < kHeadBlock; ++m) p[m] = sc[m][j];
                    axpy_block(p, row(cache.k, ks[j]), mx, lora);
                }
            }
            for (int m = 0; m < heads; ++m) {  // W_UV[h] mixed, a row of W_UV at a time
                for (int64_t j = 0; j < dv; ++j) {
                    kvb_rows((h0 + m) * (dn + dv) + dn + j, 1, w_row.data());
                    for (int64_t i = 0; i < n; ++i)
                        row(out, i)[(h0 + m) * dv + j] = dot(w_row.data(), &mixed[(m * n + i) * lora], lora);
                }
            }
        }
    });
}

void CpuBackend::dsa_select(const Tensor& q, const Tensor& weights, const Tensor& k, Tensor& cache,
                            const DsaShape& s, int64_t pos0, Tensor& out) {
    dsa_args_check(q, weights, k, cache, s, pos0, out);
    const int64_t n = q.rows(), d = s.head_dim;
    for (int64_t i = 0; i < n; ++i) std::copy_n(row(k, i), d, row(cache, pos0 + i));
    std::vector<float> index(pos0 + n);
    for (int64_t i = 0; i < n; ++i) {
        const int64_t visible = pos0 + i + 1;  // causal
        const float* w = row(weights, i);      // [n_heads]
        // Each key's score is a sum of its own over the heads, so the keys split across threads (a decode
        // step has one query) with the same results; the heads in blocks that meet the key once.
        std::vector<std::array<const float*, kHeadBlock>> blocks;  // the query's heads: [head_dim] each
        for (int h0 = 0; h0 < s.n_heads; h0 += kHeadBlock)
            blocks.push_back(head_block(row(q, i) + h0 * d, d, std::min(kHeadBlock, s.n_heads - h0)));
        pool_.parallel_for(visible, kDsaMinKeysPerTask, [&](int64_t begin, int64_t end) {
            for (int64_t t = begin; t < end; ++t) {
                float sum = 0;
                for (int h0 = 0; h0 < s.n_heads; h0 += kHeadBlock) {
                    float dots[kHeadBlock];
                    dot_block(blocks[h0 / kHeadBlock].data(), row(cache, t), d, dots);
                    for (int m = 0; m < kHeadBlock && h0 + m < s.n_heads; ++m) {
                        const float qk = dots[m] * s.scale;
                        sum += w[h0 + m] * s.weight_scale * std::max(qk, 0.0f);
                    }
                }
                index[t] = sum;
            }
        });
        dsa_topk_row(index.data(), visible, s.top_k, row(out, i));
    }
}

}  // namespace coli
