// Attention on Vulkan: GQA over the KV cache, absorbed MLA, the DSA indexer (over every key, or over
// DeepSeek-V4's compressed keys: index_topk), and DeepSeek-V4's compressed attention (a sliding window of
// raw keys plus compressed entries, with a sink: the GQA shaders over a list of selected keys per query).
// Scores go through device memory ([queries x heads, keys] per chunk of queries), one pass each for scores,
// softmax and the weighted sum, so that any context length works on any device. Scores and sums are products
// in shared-memory tiles (tile.glsl) over the (query, head) rows that share a kv head, so that a cached row
// is read once per tile of rows; GQA chunks with too few such rows (a decode step of MHA) split each row's
// keys instead (attn_split.comp, attn_combine.comp).
#include <algorithm>
#include <bit>
#include <vector>

#include "backend/vulkan/limits.h"
#include "backend/vulkan/vulkan_backend_impl.h"
#include "core/error.h"

namespace coli {

namespace {

constexpr uint32_t kColumnThreads = 64;  // local size of the per-column shaders (attn_combine, mla_*)
constexpr int64_t kTile = 64;            // rows, keys and columns of an attn_scores / attn_mix workgroup
constexpr int64_t kMixDepth = 16;  // keys per step of attn_mix (tile.glsl kDepth): a split holds a multiple
constexpr int64_t kMixSplitMin = 256;       // keys of a split at least
constexpr int64_t kMixTargetGroups = 1024;  // attn_mix workgroups that keep a large GPU busy
// GQA rows (query, head) that share a kv head in a chunk, at least, for the tiles: with fewer, most of a
// tile's products would be of padding rows, and attn_split.comp runs instead.
constexpr int64_t kTileMinRows = 8;
constexpr int64_t kSplitMinKeys = 64;         // keys of an attn_split.comp split at least
constexpr int64_t kSplitMaxKeys = 256;        // ... at most (its scores in shared memory: kMaxSplitKeys)
constexpr int64_t kSplitTargetGroups = 1024;  // attn_split workgroups that keep a large GPU busy
constexpr int64_t kSplitExtra = 2;            // floats of a split's result besides its sums: m and l
constexpr uint32_t kSumThreads = 256;         // local size of sum_parts.comp
constexpr int64_t kDsaThreads = 256;          // local size of dsa_scores.comp: a workgroup's keys x heads
constexpr int64_t kDsaMaxGroupKeys = 64;      // and keys per workgroup
constexpr int64_t kPickedWords = 2;           // dsa_topk.comp's picked pairs: key and position
constexpr uint32_t kNoPositionBits = 0xbf800000u;      // -1.0f: a selection's empty slot
constexpr uint32_t kNoSplit = 0xffffffffu;             // common.glsl's: keys of one source
constexpr uint32_t kKeysThreads = 256;                 // local size of compressed_keys.comp
constexpr int64_t kFloatExactInts = int64_t{1} << 24;  // integers a float holds exactly: key ids

uint32_t ceil_div(int64_t a, int64_t b) {
    return static_cast<uint32_t>((a + b - 1) / b);
}

// Workgroups along y of attn_scores and attn_mix: kv heads x row sets x tiles of a set's rows (a set: the
// rows of one query when the keys are selected, else of the whole chunk).
uint32_t row_groups(int64_t queries, int64_t heads, int64_t group, bool selected) {
    const int64_t sets = selected ? queries : 1;
    return static_cast<uint32_t>(heads / group * sets) * ceil_div(queries * group / sets, kTile);
}

// attn_scores.comp's push constants (see there).
struct ScoresPush {
    uint32_t i0, queries, heads, group, keys, pos0, selected;
    float scale;
    uint32_t len1, q1_stride, q1_offset, q1_first, k1_stride, k1_group;
    uint32_t len2, q2_stride, q2_offset, q2_first, k2_stride;
    uint32_t k_split = kNoSplit;
};

// Queries per chunk: the scores of a chunk stay within kVulkanScoreFloats and its rows within one grid
// dimension.
int64_t chunk_queries(int64_t n, int64_t heads, int64_t keys) {
    const int64_t by_memory = kVulkanScoreFloats / std::max<int64_t>(1, heads * keys);
    const int64_t by_grid = vk::kMaxGroups / std::max<int64_t>(1, heads);
    return std::clamp<int64_t>(std::min(by_memory, by_grid), 1, std::max<int64_t>(n, 1));
}

}  // namespace

namespace vk {

// A chunk's attn_mix: out row (dst_first + i - i0) gets the heads of query i.
struct MixShape {
    int64_t i0, queries, heads, group;  // first query, queries, query heads, query heads per kv head
    int64_t width, v_stride, keys;      // values per head, floats per cached row, keys per row of p
    bool selected;                      // keys are positions of sel
    int64_t dst_first;                  // out's row of query i0
    BufferPtr v_tail = nullptr;         // keys from v_split on are its rows key - v_split
    uint32_t v_split = kNoSplit;
};

}  // namespace vk

void VulkanBackend::softmax_rows(const vk::BufferPtr& scores, int64_t rows, int64_t keys,
                                 const vk::BufferPtr& sinks, int64_t heads) {
    const struct { uint32_t keys, heads; } push{static_cast<uint32_t>(keys), static_cast<uint32_t>(heads)};
    const uint32_t gx = static_cast<uint32_t>(std::min<int64_t>(rows, vk::kMaxGroups));
    run("softmax", {sinks ? 1u : 0u}, {scores, sinks ? sinks : placeholder_}, push, gx, ceil_div(rows, gx));
}

// out = p v (attn_mix.comp), over `splits` ranges of the keys when the tiles alone are too few for the
// device, added in order by sum_parts.comp.
void VulkanBackend::attn_mix(const vk::BufferPtr& p, const vk::BufferPtr& v, const vk::BufferPtr& sel,
                             const vk::BufferPtr& out, const vk::MixShape& m) {
    const uint32_t rows_y = row_groups(m.queries, m.heads, m.group, m.selected);
    const int64_t tiles = int64_t{rows_y} * ceil_div(m.width, kTile);
    const int64_t splits_wanted =
        std::clamp<int64_t>(kMixTargetGroups / tiles, 1, std::max<int64_t>(1, m.keys / kMixSplitMin));
    const int64_t split_keys = (ceil_div(m.keys, splits_wanted) + kMixDepth - 1) / kMixDepth * kMixDepth;
    const uint32_t splits = ceil_div(m.keys, split_keys);
    const int64_t part_size = m.queries * m.heads * m.width;
    const vk::BufferPtr dst = splits > 1 ? scratch(splits * part_size) : out;
    const struct {
        uint32_t i0, queries, heads, group, width, v_stride, keys, selected, split_keys, part_size, dst_first,
            v_split;
    } push{uint32_t(m.i0),
           uint32_t(m.queries),
           uint32_t(m.heads),
           uint32_t(m.group),
           uint32_t(m.width),
           uint32_t(m.v_stride),
           uint32_t(m.keys),
           m.selected ? 1u : 0u,
           uint32_t(split_keys),
           uint32_t(part_size),
           splits > 1 ? 0u : uint32_t(m.dst_first),
           m.v_split};
    run("attn_mix", {}, {p, v, sel, dst, m.v_tail ? m.v_tail : placeholder_}, push,
        splits * ceil_div(m.width, kTile), rows_y);
    if (splits == 1) return;
    const struct {
        uint32_t count, n_parts, first;
    } sum{uint32_t(part_size), splits, uint32_t(m.dst_first * m.heads * m.width)};
    run("sum_parts", {}, {dst, out}, sum, groups_for(part_size, kSumThreads));
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
    stream_.copy(buffer_of(v), 0, buffer_of(cache.v), pos0 * row_bytes, n * row_bytes);
    const int64_t keys = pos0 + n, chunk = chunk_queries(n, s.n_heads, keys);
    const auto heads = static_cast<uint32_t>(s.n_heads),
               group = static_cast<uint32_t>(s.n_heads / s.n_kv_heads);
    vk::BufferPtr scores;
    for (int64_t i0 = 0; i0 < n; i0 += chunk) {
        const int64_t queries = std::min(chunk, n - i0), rows = queries * s.n_heads;
        if (queries * group < kTileMinRows) {
            attention_split(q, cache, s, i0, queries, pos0, out);
            continue;
        }
        if (!scores) scores = scratch(chunk * s.n_heads * keys);
        const ScoresPush sp{uint32_t(i0),
                            uint32_t(queries),
                            heads,
                            group,
                            uint32_t(keys),
                            uint32_t(pos0),
                            0,
                            s.scale,
                            uint32_t(s.head_dim),
                            uint32_t(s.head_dim),
                            0,
                            uint32_t(i0),
                            uint32_t(kv_width),
                            uint32_t(s.head_dim),
                            0,
                            0,
                            0,
                            0,
                            0};
        run("attn_scores", {},
            {buffer_of(q), placeholder_, buffer_of(cache.k), placeholder_, placeholder_, scores,
             placeholder_},
            sp, ceil_div(keys, kTile), row_groups(queries, s.n_heads, group, false));
        softmax_rows(scores, rows, keys);
        attn_mix(scores, buffer_of(cache.v), placeholder_, buffer_of(out),
                 {i0, queries, s.n_heads, group, s.head_dim, kv_width, keys, false, i0});
    }
}

// A chunk of GQA attention in key splits (attn_split.comp), joined per row by attn_combine.comp.
void VulkanBackend::attention_split(const Tensor& q, const KvCache& cache, const AttentionShape& s,
                                    int64_t i0, int64_t queries, int64_t pos0, Tensor& out) {
    const int64_t keys = pos0 + q.rows(), rows = queries * s.n_heads;
    const int64_t split_keys = std::clamp<int64_t>(
        (keys * rows + kSplitTargetGroups - 1) / kSplitTargetGroups, kSplitMinKeys, kSplitMaxKeys);
    const int64_t splits = ceil_div(keys, split_keys);
    const vk::BufferPtr partial = scratch(rows * splits * (s.head_dim + kSplitExtra));
    const auto heads = static_cast<uint32_t>(s.n_heads);
    const struct {
        uint32_t i0, heads, group, head_dim, pos0, split_keys, splits;
        float scale;
    } sp{uint32_t(i0),         heads,          uint32_t(s.n_heads / s.n_kv_heads),
         uint32_t(s.head_dim), uint32_t(pos0), uint32_t(split_keys),
         uint32_t(splits),     s.scale};
    run("attn_split", {}, {buffer_of(q), buffer_of(cache.k), buffer_of(cache.v), partial}, sp,
        uint32_t(splits), uint32_t(rows));
    const struct {
        uint32_t i0, heads, head_dim, pos0, split_keys, splits;
    } cp{uint32_t(i0), heads, uint32_t(s.head_dim), uint32_t(pos0), uint32_t(split_keys), uint32_t(splits)};
    run("attn_combine", {}, {partial, buffer_of(out)}, cp, uint32_t(rows),
        ceil_div(s.head_dim, kColumnThreads));
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
            ceil_div(s.kv_lora, kColumnThreads), rows);
        const auto queries = static_cast<int64_t>(std::min(chunk, n - i0));
        const bool selected = selection != nullptr;
        const ScoresPush sp{uint32_t(i0),
                            uint32_t(queries),
                            heads,
                            heads,
                            uint32_t(keys),
                            uint32_t(pos0),
                            selected,
                            s.scale,
                            lora,
                            lora,
                            0,
                            0,
                            lora,
                            0,
                            uint32_t(s.rope_dim),
                            uint32_t(s.nope_dim + s.rope_dim),
                            uint32_t(s.nope_dim),
                            uint32_t(i0),
                            uint32_t(s.rope_dim)};
        run("attn_scores", {},
            {q_abs, buffer_of(q), buffer_of(cache.k), buffer_of(cache.v), sel, scores, placeholder_}, sp,
            ceil_div(keys, kTile), row_groups(queries, s.n_heads, s.n_heads, selected));
        softmax_rows(scores, rows, keys);
        attn_mix(scores, buffer_of(cache.k), sel, mixed,
                 {i0, queries, s.n_heads, s.n_heads, s.kv_lora, s.kv_lora, keys, selected, 0});
        const struct {
            uint32_t i0, heads, nope, v_dim, lora;
        } op{uint32_t(i0), heads, uint32_t(s.nope_dim), uint32_t(s.v_dim), lora};
        run("mla_out", {format}, {w.data, w.scales, mixed, buffer_of(out)}, op,
            ceil_div(s.v_dim, kColumnThreads), rows);
    }
}

void VulkanBackend::compressed_attention(const Tensor& q, const Tensor& kv, const Tensor& ring,
                                         const Tensor& entries, const Tensor* selection, const Weight& sinks,
                                         const CompressedAttentionShape& s, int64_t pos0, Tensor& out) {
    fault_check(OpKind::compressed_attention);
    compressed_attention_args_check(q, kv, ring, entries, selection, sinks, s, pos0, out);
    for (const Tensor* t : {&q, &kv, &ring}) check_owner(*t, "compressed_attention");
    if (s.ratio > 0) check_owner(entries, "compressed_attention entries");
    if (selection) check_owner(*selection, "compressed_attention selection");
    const int64_t n = q.rows(), hd = s.head_dim, heads = s.n_heads;
    if (n == 0) return;
    const uint64_t row_bytes = hd * sizeof(float);
    // The raw keys the queries see, positions [first_raw, pos0 + n) in one buffer: the ring's rows before
    // pos0 (at most two runs of it), then kv.
    const int64_t first_raw = std::max<int64_t>(0, pos0 - (s.window - 1)), raw_rows = pos0 + n - first_raw;
    const vk::BufferPtr raw = scratch(raw_rows * hd);
    for (int64_t p = first_raw; p < pos0;) {
        const int64_t at = p % ring.rows(), count = std::min(pos0 - p, ring.rows() - at);
        if (p > first_raw) stream_.concurrent_next();  // each copy writes rows of its own
        stream_.copy(buffer_of(ring), at * row_bytes, raw, (p - first_raw) * row_bytes, count * row_bytes);
        p += count;
    }
    if (pos0 > first_raw) stream_.concurrent_next();
    stream_.copy(buffer_of(kv), 0, raw, (pos0 - first_raw) * row_bytes, n * row_bytes);
    // Each query's keys (compressed_keys.comp): window raw slots, then the entries' slots.
    const int64_t entry_slots = s.ratio == 0 ? 0 : selection ? selection->cols() : (pos0 + n) / s.ratio;
    const int64_t keys = s.window + entry_slots;
    const int64_t entry_rows = s.ratio == 0 ? 0 : entries.rows();
    check(raw_rows + entry_rows < kFloatExactInts,
          "vulkan compressed_attention: {} raw keys and {} entries exceed the key ids a float holds",
          raw_rows, entry_rows);
    const vk::BufferPtr key_ids = scratch(n * keys);
    const struct {
        uint32_t n, pos0, window, ratio, first_raw, raw_rows, entry_slots, selected;
    } kp{uint32_t(n),         uint32_t(pos0),     uint32_t(s.window),    uint32_t(s.ratio),
         uint32_t(first_raw), uint32_t(raw_rows), uint32_t(entry_slots), selection ? 1u : 0u};
    run("compressed_keys", {}, {selection ? buffer_of(*selection) : placeholder_, key_ids}, kp,
        groups_for(n * keys, kKeysThreads));
    // Scores over those keys (the entries from key raw_rows on), their softmax with the sinks, and the
    // probability-weighted keys: one kv head that every query head shares (group = heads).
    const vk::BufferPtr tail = s.ratio > 0 ? buffer_of(entries) : placeholder_;
    const vk::BufferPtr& sink = resident(sinks, "compressed_attention").data;
    const int64_t chunk = chunk_queries(n, heads, keys);
    const vk::BufferPtr scores = scratch(chunk * heads * keys);
    for (int64_t i0 = 0; i0 < n; i0 += chunk) {
        const int64_t queries = std::min(chunk, n - i0);
        ScoresPush sp{uint32_t(i0),
                      uint32_t(queries),
                      uint32_t(heads),
                      uint32_t(heads),
                      uint32_t(keys),
                      uint32_t(pos0),
                      1,
                      s.scale,
                      uint32_t(hd),
                      uint32_t(hd),
                      0,
                      uint32_t(i0),
                      uint32_t(hd),
                      0,
                      0,
                      0,
                      0,
                      0,
                      0};
        sp.k_split = uint32_t(raw_rows);
        run("attn_scores", {}, {buffer_of(q), placeholder_, raw, placeholder_, key_ids, scores, tail}, sp,
            ceil_div(keys, kTile), row_groups(queries, heads, heads, true));
        softmax_rows(scores, queries * heads, keys, sink, heads);
        attn_mix(scores, raw, key_ids, buffer_of(out),
                 {i0, queries, heads, heads, hd, hd, keys, true, i0, tail, uint32_t(raw_rows)});
    }
}

void VulkanBackend::dsa_select(const Tensor& q, const Tensor& weights, const Tensor& k, Tensor& cache,
                               const DsaShape& s, int64_t pos0, Tensor& out) {
    fault_check(OpKind::dsa_select);
    dsa_args_check(q, weights, k, cache, s, pos0, out);
    for (const Tensor* t : {&q, &weights, &k, static_cast<const Tensor*>(&cache)})
        check_owner(*t, "dsa_select");
    stream_.copy(buffer_of(k), 0, buffer_of(cache), pos0 * s.head_dim * sizeof(float),
                 k.numel() * sizeof(float));
    index_select(q, weights, buffer_of(cache), s, pos0, 1, false, out);
}

void VulkanBackend::index_topk(const Tensor& q, const Tensor& weights, const Tensor& keys, const DsaShape& s,
                               int64_t pos0, Tensor& out) {
    fault_check(OpKind::index_topk);
    index_topk_args_check(q, weights, keys, s, pos0, out);
    for (const Tensor* t : {&q, &weights, &keys}) check_owner(*t, "index_topk");
    index_select(q, weights, buffer_of(keys), s, pos0, s.ratio, true, out);
}

void VulkanBackend::index_select(const Tensor& q, const Tensor& weights, const vk::BufferPtr& keys,
                                 const DsaShape& s, int64_t pos0, int64_t ratio, bool sequential,
                                 Tensor& out) {
    const int64_t n = q.rows(), total = (pos0 + n) / ratio;  // the most keys a query sees
    if (n == 0) return;
    if (total == 0) {  // no query sees a key yet
        stream_.fill(buffer_of(out), kNoPositionBits);
        return;
    }
    // Scores and their top-k on the device (dsa_topk.comp: the rule every backend shares).
    const vk::BufferPtr scores = scratch(n * total);
    const int64_t group_keys = std::min(kDsaThreads / s.n_heads, kDsaMaxGroupKeys);
    const struct {
        uint32_t total, pos0, heads, dim;
        float scale, weight_scale;
        uint32_t group_keys, ratio;
    } push{uint32_t(total), uint32_t(pos0), uint32_t(s.n_heads),  uint32_t(s.head_dim),
           s.scale,         s.weight_scale, uint32_t(group_keys), uint32_t(ratio)};
    run("dsa_scores", {sequential ? 1u : 0u}, {buffer_of(q), buffer_of(weights), keys, scores}, push,
        ceil_div(total, group_keys), uint32_t(n));
    const uint32_t stride = std::bit_ceil(static_cast<uint32_t>(s.top_k));
    const vk::BufferPtr picked = scratch(n * stride * kPickedWords);
    const struct {
        uint32_t n, total, pos0, top_k, stride, ratio;
    } tp{uint32_t(n), uint32_t(total), uint32_t(pos0), uint32_t(s.top_k), stride, uint32_t(ratio)};
    const auto gx = static_cast<uint32_t>(std::min<int64_t>(n, vk::kMaxGroups));
    run("dsa_topk", {}, {scores, buffer_of(out), picked}, tp, gx, ceil_div(n, gx));
}

}  // namespace coli
