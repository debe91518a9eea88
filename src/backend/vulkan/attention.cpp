// Attention on Vulkan: GQA over the KV cache, absorbed MLA, and the DSA indexer. Scores go through device
// memory ([queries x heads, keys] per chunk of queries), one pass each for scores, softmax and the
// weighted sum, so that any context length works on any device.
#include <algorithm>
#include <bit>
#include <vector>

#include "backend/vulkan/limits.h"
#include "backend/vulkan/vulkan_backend_impl.h"
#include "core/error.h"

namespace coli {

namespace {

constexpr uint32_t kKeyThreads = 64;  // local size of the per-key and per-column shaders
constexpr int64_t kPickedWords = 2;   // dsa_topk.comp's picked pairs: key and position

uint32_t ceil_div(int64_t a, int64_t b) {
    return static_cast<uint32_t>((a + b - 1) / b);
}

// Queries per chunk: the scores of a chunk stay within kVulkanScoreFloats and its rows within one grid
// dimension.
int64_t chunk_queries(int64_t n, int64_t heads, int64_t keys) {
    const int64_t by_memory = kVulkanScoreFloats / std::max<int64_t>(1, heads * keys);
    const int64_t by_grid = vk::kMaxGroups / std::max<int64_t>(1, heads);
    return std::clamp<int64_t>(std::min(by_memory, by_grid), 1, std::max<int64_t>(n, 1));
}

struct MixPush {
    uint32_t i0, heads, group, width, v_cols, keys, selected, out_row0;
};

}  // namespace

void VulkanBackend::softmax_rows(const vk::BufferPtr& scores, int64_t rows, int64_t keys) {
    const struct { uint32_t keys; } push{static_cast<uint32_t>(keys)};
    const uint32_t gx = static_cast<uint32_t>(std::min<int64_t>(rows, vk::kMaxGroups));
    run("softmax", {}, {scores}, push, gx, ceil_div(rows, gx));
}

void VulkanBackend::attention(const Tensor& q, const Tensor& k, const Tensor& v, KvCache& cache,
                              const AttentionShape& s, int64_t pos0, Tensor& out) {
    fault_check(OpKind::attention);
    attention_args_check(q, k, v, cache, s, pos0, out);
    for (const Tensor* t :
         {&q, &k, &v, static_cast<const Tensor*>(&cache.k), static_cast<const Tensor*>(&cache.v)})
        check_owner(*t, "attention");
    const int64_t n = q.rows(), kv_width = int64_t{s.n_kv_heads} * s.head_dim;
    const uint64_t row_bytes = kv_width * sizeof(float);
    stream_.copy(buffer_of(k), 0, buffer_of(cache.k), pos0 * row_bytes, n * row_bytes);
    stream_.concurrent_next();
    stream_.copy(buffer_of(v), 0, buffer_of(cache.v), pos0 * row_bytes, n * row_bytes);
    const int64_t keys = pos0 + n, chunk = chunk_queries(n, s.n_heads, keys);
    const vk::BufferPtr scores = scratch(chunk * s.n_heads * keys);
    const auto heads = static_cast<uint32_t>(s.n_heads),
               group = static_cast<uint32_t>(s.n_heads / s.n_kv_heads);
    for (int64_t i0 = 0; i0 < n; i0 += chunk) {
        const int64_t rows = std::min(chunk, n - i0) * s.n_heads;
        const struct {
            uint32_t i0, heads, group, head_dim, keys, pos0;
            float scale;
        } sp{uint32_t(i0), heads, group, uint32_t(s.head_dim), uint32_t(keys), uint32_t(pos0), s.scale};
        run("attn_scores", {}, {buffer_of(q), buffer_of(cache.k), scores}, sp, ceil_div(keys, kKeyThreads),
            uint32_t(rows));
        softmax_rows(scores, rows, keys);
        const MixPush mp{uint32_t(i0),       heads,          group, uint32_t(s.head_dim),
                         uint32_t(kv_width), uint32_t(keys), 0,     uint32_t(i0)};
        run("mix", {}, {scores, buffer_of(cache.v), placeholder_, buffer_of(out)}, mp,
            ceil_div(s.head_dim, kKeyThreads), uint32_t(rows));
    }
}

void VulkanBackend::mla_attention(const Tensor& q, const Tensor& latent, const Tensor& k_pe,
                                  const Weight& w_kvb, KvCache& cache, const MlaShape& s, int64_t pos0,
                                  const Tensor* selection, Tensor& out) {
    fault_check(OpKind::mla_attention);
    mla_args_check(q, latent, k_pe, w_kvb, cache, s, pos0, selection, out);
    if (selection) check_owner(*selection, "mla_attention selection");
    for (const Tensor* t :
         {&q, &latent, &k_pe, static_cast<const Tensor*>(&cache.k), static_cast<const Tensor*>(&cache.v)})
        check_owner(*t, "mla_attention");
    const vk::DeviceWeight& w = resident(w_kvb, "mla_attention");
    const int64_t n = q.rows();
    stream_.copy(buffer_of(latent), 0, buffer_of(cache.k), pos0 * s.kv_lora * sizeof(float),
                 latent.numel() * sizeof(float));
    stream_.copy(buffer_of(k_pe), 0, buffer_of(cache.v), pos0 * s.rope_dim * sizeof(float),
                 k_pe.numel() * sizeof(float));
    const int64_t keys = selection ? selection->cols() : pos0 + n;
    const int64_t chunk = chunk_queries(n, s.n_heads, std::max(keys, s.kv_lora));
    const vk::BufferPtr q_abs = scratch(chunk * s.n_heads * s.kv_lora),
                        mixed = scratch(chunk * s.n_heads * s.kv_lora),
                        scores = scratch(chunk * s.n_heads * keys);
    const vk::BufferPtr sel = selection ? buffer_of(*selection) : placeholder_;
    const auto format = static_cast<uint32_t>(w.format), heads = static_cast<uint32_t>(s.n_heads),
               lora = static_cast<uint32_t>(s.kv_lora);
    for (int64_t i0 = 0; i0 < n; i0 += chunk) {
        const auto rows = static_cast<uint32_t>(std::min(chunk, n - i0) * s.n_heads);
        const struct {
            uint32_t i0, heads, nope, rope, v_dim, lora;
        } ap{uint32_t(i0), heads, uint32_t(s.nope_dim), uint32_t(s.rope_dim), uint32_t(s.v_dim), lora};
        run("mla_absorb", {format}, {w.data, w.scales, buffer_of(q), q_abs}, ap,
            ceil_div(s.kv_lora, kKeyThreads), rows);
        const struct {
            uint32_t i0, heads, nope, rope, lora, keys, pos0, selected;
            float scale;
        } sp{uint32_t(i0), heads,          uint32_t(s.nope_dim), uint32_t(s.rope_dim),
             lora,         uint32_t(keys), uint32_t(pos0),       selection ? 1u : 0u,
             s.scale};
        run("mla_scores", {}, {q_abs, buffer_of(q), buffer_of(cache.k), buffer_of(cache.v), sel, scores}, sp,
            ceil_div(keys, kKeyThreads), rows);
        softmax_rows(scores, rows, keys);
        const MixPush mp{uint32_t(i0), heads, heads, lora, lora, uint32_t(keys), selection ? 1u : 0u, 0};
        run("mix", {}, {scores, buffer_of(cache.k), sel, mixed}, mp, ceil_div(s.kv_lora, kKeyThreads), rows);
        const struct {
            uint32_t i0, heads, nope, v_dim, lora;
        } op{uint32_t(i0), heads, uint32_t(s.nope_dim), uint32_t(s.v_dim), lora};
        run("mla_out", {format}, {w.data, w.scales, mixed, buffer_of(out)}, op,
            ceil_div(s.v_dim, kKeyThreads), rows);
    }
}

void VulkanBackend::dsa_select(const Tensor& q, const Tensor& weights, const Tensor& k, Tensor& cache,
                               const DsaShape& s, int64_t pos0, Tensor& out) {
    fault_check(OpKind::dsa_select);
    dsa_args_check(q, weights, k, cache, s, pos0, out);
    for (const Tensor* t : {&q, &weights, &k, static_cast<const Tensor*>(&cache)})
        check_owner(*t, "dsa_select");
    const int64_t n = q.rows(), total = pos0 + n;
    stream_.copy(buffer_of(k), 0, buffer_of(cache), pos0 * s.head_dim * sizeof(float),
                 k.numel() * sizeof(float));
    // Scores and their top-k on the device (dsa_topk.comp: the rule every backend shares).
    const vk::BufferPtr scores = scratch(n * total);
    const struct {
        uint32_t total, pos0, heads, dim;
        float scale, weight_scale;
    } push{uint32_t(total),      uint32_t(pos0), uint32_t(s.n_heads),
           uint32_t(s.head_dim), s.scale,        s.weight_scale};
    run("dsa_scores", {}, {buffer_of(q), buffer_of(weights), buffer_of(cache), scores}, push,
        ceil_div(total, kKeyThreads), uint32_t(n));
    const uint32_t stride = std::bit_ceil(static_cast<uint32_t>(s.top_k));
    const vk::BufferPtr picked = scratch(n * stride * kPickedWords);
    const struct {
        uint32_t n, total, pos0, top_k, stride;
    } tp{uint32_t(n), uint32_t(total), uint32_t(pos0), uint32_t(s.top_k), stride};
    const auto gx = static_cast<uint32_t>(std::min<int64_t>(n, vk::kMaxGroups));
    run("dsa_topk", {}, {scores, buffer_of(out), picked}, tp, gx, ceil_div(n, gx));
}

}  // namespace coli
