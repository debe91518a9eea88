// `coli bench-attention --tables v4`: DeepSeek-V4-Flash's attention (docs/models.md 8.2, 8.4, 8.5) against
// the context, with the ops the model calls: one layer of each kind, sliding window only
// (compressed_attention, ratio 0), CSA (index_topk over the indexer's compressed keys, then
// compressed_attention over the window and the selected entries) and HCA (compressed_attention over the
// window and every visible entry), beside dense attention of the same heads over every position (the same op
// with a window as long as the context). The output projection is not attention and is left out, as are the
// projections and compressors that feed it: their cost does not grow with the context. Then the sum over
// V4-Flash's layers with its schedule, the attention time of one call of the whole model. Sizes and schedule
// come from V4-Flash's config.json as `coli synth --arch deepseek_v4` writes it, read by DeepseekV4Config.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "cli/bench_attention.h"
#include "core/error.h"
#include "models/deepseek_v4_config.h"
#include "synth/synth_arch.h"

namespace coli {
namespace {

using Attn = DeepseekV4Config::Attn;

constexpr std::string_view kFlashArch = "deepseek_v4";  // the synth architecture with V4-Flash's config

DeepseekV4Config flash_config() {
    SynthOptions o;
    o.arch = kFlashArch;
    return DeepseekV4Config(synth_arch_find(o.arch).config(o));
}

// The compression ratio of the first layer of kind a.
int ratio_of(const DeepseekV4Config& c, Attn a) {
    const auto it = std::find(c.attn.begin(), c.attn.end(), a);
    check(it != c.attn.end(), "bench-attention: V4-Flash's config has no {} layer", attn_name(a));
    return c.ratio[size_t(it - c.attn.begin())];
}

// One figure: the median time and the bound, ms.
struct Figure {
    double ms = 0, bound_ms = 0;
};

}  // namespace

void bench_attention_v4(AttentionBench& bench, const std::vector<int64_t>& contexts) {
    Backend& b = bench.b;
    const DeepseekV4Config cfg = flash_config();
    const int64_t heads = cfg.n_heads, hd = cfg.head_dim, n = bench.queries;
    const int csa_ratio = ratio_of(cfg, Attn::csa), hca_ratio = ratio_of(cfg, Attn::hca);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const DsaShape index{.n_heads = cfg.index_heads,
                         .head_dim = cfg.index_dim,
                         .top_k = cfg.index_topk,
                         .scale = 1.0f / std::sqrt(static_cast<float>(cfg.index_dim)),
                         .weight_scale = 1.0f / std::sqrt(static_cast<float>(cfg.index_heads)),
                         .ratio = csa_ratio};
    const auto count = [&](Attn a) { return std::count(cfg.attn.begin(), cfg.attn.end(), a); };
    const int64_t n_sliding = count(Attn::sliding), n_csa = count(Attn::csa), n_hca = count(Attn::hca);

    fmt::print(
        "\nDeepSeek-V4-Flash: {} heads of {} sharing one key = value head, rope {}, window {} with sinks; "
        "CSA: ratio {}, indexer {} heads of {}, top {}; HCA: ratio {}; dense: the same heads over every "
        "position\n",
        heads, hd, cfg.rope_dim, cfg.window, csa_ratio, cfg.index_heads, cfg.index_dim, cfg.index_topk,
        hca_ratio);
    fmt::print("{:>8} {:>11} {:>9} {:>13} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "context",
               "sliding ms", "bound", "CSA index ms", "CSA attn ms", "CSA ms", "bound", "HCA ms", "bound",
               "dense ms", "bound");

    const Weight sinks = bench.random_weight(Format::f32, 1, heads);
    const int64_t ring_rows = std::max(cfg.window - 1, 1);  // as the model's cache (docs/models.md 8.8)
    struct Row {
        int64_t ctx;
        Figure sliding, csa, hca, dense;
        double v4_cache_mb, dense_cache_mb;  // over the layers
    };
    std::vector<Row> rows;
    for (int64_t ctx : contexts) {
        const int64_t pos0 = ctx - n;
        const int64_t csa_entries = ctx / csa_ratio,
                      hca_entries = ctx / hca_ratio;  // visible to the last query
        const Tensor q = bench.random(n, heads * hd), kv = bench.random(n, hd);
        const Tensor ring = bench.random(ring_rows, hd);
        const Tensor csa_cache = bench.random(std::max<int64_t>(csa_entries, 1), hd);
        const Tensor index_keys = bench.random(std::max<int64_t>(csa_entries, 1), cfg.index_dim);
        const Tensor q_index = bench.random(n, int64_t{cfg.index_heads} * cfg.index_dim);
        const Tensor index_weights = bench.random(n, cfg.index_heads);
        const Tensor hca_cache = bench.random(std::max<int64_t>(hca_entries, 1), hd);
        const Tensor dense_ring = bench.random(std::max<int64_t>(ctx - 1, 1), hd);
        Tensor out = b.tensor_new(n, heads * hd), selection = b.tensor_new(n, cfg.index_topk);

        const auto attend = [&](int window, int ratio, const Tensor& raw, const Tensor& entries,
                                const Tensor* chosen) {
            return bench.median_seconds(out, [&] {
                b.compressed_attention(q, kv, raw, entries, chosen, sinks,
                                       {int(heads), int(hd), window, ratio, scale}, pos0, out);
            });
        };
        const double sliding = attend(cfg.window, 0, ring, Tensor{}, nullptr);
        const double csa_index = bench.median_seconds(
            selection, [&] { b.index_topk(q_index, index_weights, index_keys, index, pos0, selection); });
        const double csa_attn = attend(cfg.window, csa_ratio, ring, csa_cache, &selection);
        const double hca = attend(cfg.window, hca_ratio, ring, hca_cache, nullptr);
        const double dense = attend(int(ctx), 0, dense_ring, Tensor{}, nullptr);

        // Bytes read once: the raw keys of the window (the queries' windows overlap), the entries attended
        // (at least the top-k that one query selects), CSA's indexer keys; dense reads every position.
        const double row_bytes = double(hd) * sizeof(float);
        const double raw = double(std::min(ctx, cfg.window + n - 1)) * row_bytes;
        const double index_bytes = double(csa_entries) * cfg.index_dim * sizeof(float);
        const double csa_bytes =
            raw + double(std::min<int64_t>(csa_entries, cfg.index_topk)) * row_bytes + index_bytes;
        Row r{ctx,
              {sliding * kMsPerSecond, bench.bound_ms(raw)},
              {(csa_index + csa_attn) * kMsPerSecond, bench.bound_ms(csa_bytes)},
              {hca * kMsPerSecond, bench.bound_ms(raw + double(hca_entries) * row_bytes)},
              {dense * kMsPerSecond, bench.bound_ms(double(ctx) * row_bytes)},
              0,
              0};
        // The caches that grow with the context, f32 as the engine keeps them: entries and indexer keys
        // (the rings are fixed); dense keeps every position's key.
        r.v4_cache_mb = (double(n_csa) * (csa_entries * row_bytes + index_bytes) +
                         double(n_hca) * hca_entries * row_bytes) /
                        1e6;
        r.dense_cache_mb = double(cfg.n_layers) * ctx * row_bytes / 1e6;
        rows.push_back(r);
        fmt::print(
            "{:>8} {:>11.3f} {:>9.3f} {:>13.3f} {:>12.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} "
            "{:>9.3f}\n",
            ctx, r.sliding.ms, r.sliding.bound_ms, csa_index * kMsPerSecond, csa_attn * kMsPerSecond,
            r.csa.ms, r.csa.bound_ms, r.hca.ms, r.hca.bound_ms, r.dense.ms, r.dense.bound_ms);
    }

    fmt::print(
        "\nV4-Flash's {} layers ({} sliding, {} CSA, {} HCA), one call of {} query token(s), summed:\n",
        cfg.n_layers, n_sliding, n_csa, n_hca, n);
    fmt::print("{:>8} {:>10} {:>9} {:>12} {:>9} {:>9} {:>13} {:>15}\n", "context", "V4 ms", "bound",
               "dense ms", "bound", "dense/V4", "V4 cache MB", "dense cache MB");
    for (const Row& r : rows) {
        const auto total = [&](double Figure::*f) {
            return double(n_sliding) * r.sliding.*f + double(n_csa) * r.csa.*f + double(n_hca) * r.hca.*f;
        };
        const double v4 = total(&Figure::ms), dense = double(cfg.n_layers) * r.dense.ms;
        fmt::print("{:>8} {:>10.2f} {:>9.2f} {:>12.2f} {:>9.2f} {:>9.1f} {:>13.1f} {:>15.1f}\n", r.ctx, v4,
                   total(&Figure::bound_ms), dense, double(cfg.n_layers) * r.dense.bound_ms, dense / v4,
                   r.v4_cache_mb, r.dense_cache_mb);
    }
}

}  // namespace coli
