// `coli bench-attention`: attention time per layer against the context length, on one backend, median of
// repetitions; each figure is one query token (or --queries, a prefill chunk) at the end of a context of the
// given length, beside its bound: the bytes it must read (the caches, the selected rows, the weights it
// reads) at the rate of the backend's device copy (host memory's read rate on the CPU). Two tables
// (--tables):
//   mla  DeepSeek's absorbed MLA (one layer, 128 heads, kv_lora 512, rope 64, nope 128, v 128, bf16 kv_b)
//        dense and with DSA (the lightning indexer, 64 heads of 128, choosing 2048 keys, then MLA over
//        those), and OLMoE's attention (16 heads of 128, as many kv heads);
//   v4   DeepSeek-V4-Flash's layer kinds (sliding window, CSA, HCA) beside dense attention of the same heads,
//        and per token over its 43 layers (bench_attention_v4.cpp).
// The caches are filled with random values, never by a prefill, so that long contexts take seconds.
// Reported, never asserted.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>

#include "backend/registry.h"
#include "cli/bench_attention.h"
#include "cli/commands.h"
#include "cli/memory_probe.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace coli {
namespace {

// DeepSeek-V3 / V3.2 sizes.
constexpr int kHeads = 128, kNope = 128, kRope = 64, kV = 128;
constexpr int64_t kKvLora = 512;
constexpr int kIndexHeads = 64, kIndexDim = 128, kIndexTopK = 2048;
// OLMoE sizes.
constexpr int kGqaHeads = 16, kGqaKvHeads = 16, kGqaHeadDim = 128;
constexpr uint32_t kSeed = 0x5eed;
constexpr int kMemoryReps = 5;  // reads of host memory for the CPU's bound (median)

struct BenchAttentionArgs {
    std::string backend = "cpu";
    std::string contexts = "1024,8192,32768";
    int reps = 3;
    int64_t queries = 1;  // query tokens at the end of each context: 1 is decode, more a prefill chunk
    int threads = 0;
    std::string tables = "mla,v4";
};

// DeepSeek-V3's MLA dense and with DSA, and OLMoE's attention, one layer.
void bench_mla(AttentionBench& bench, const std::vector<int64_t>& contexts) {
    Backend& b = bench.b;
    const Weight w_kvb = bench.random_weight(Format::bf16, int64_t{kHeads} * (kNope + kV), kKvLora);
    const MlaShape mla{kHeads, kNope, kRope, kV, kKvLora, 1.0f / std::sqrt(float(kNope + kRope))};
    const DsaShape dsa{kIndexHeads, kIndexDim, kIndexTopK, 1.0f / std::sqrt(float(kIndexDim)),
                       1.0f / std::sqrt(float(kIndexHeads))};
    fmt::print(
        "MLA: {} heads, kv_lora {}, rope {}, nope {}, v {}, kv_b bf16; DSA: {} indexer heads of {}, top {}; "
        "GQA: {} heads of {}, {} kv heads\n",
        kHeads, kKvLora, kRope, kNope, kV, kIndexHeads, kIndexDim, kIndexTopK, kGqaHeads, kGqaHeadDim,
        kGqaKvHeads);
    const AttentionShape gqa{kGqaHeads, kGqaKvHeads, kGqaHeadDim, 1.0f / std::sqrt(float(kGqaHeadDim))};
    const int64_t gqa_width = int64_t{kGqaKvHeads} * kGqaHeadDim;
    fmt::print("{:>8} {:>10} {:>13} {:>9} {:>13} {:>14} {:>13} {:>9} {:>9} {:>9}\n", "context", "cache MB",
               "dense MLA ms", "bound", "DSA index ms", "sparse MLA ms", "DSA total ms", "bound", "GQA ms",
               "bound");
    const double kvb_bytes = double(w_kvb.host.data_bytes() + w_kvb.host.scale_bytes());
    for (int64_t ctx : contexts) {
        const int64_t n = bench.queries, pos0 = ctx - n;
        KvCache cache{bench.random(ctx, kKvLora), bench.random(ctx, kRope)};
        Tensor index_keys = bench.random(ctx, kIndexDim);
        const Tensor q = bench.random(n, int64_t{kHeads} * (kNope + kRope));
        const Tensor latent = bench.random(n, kKvLora), k_pe = bench.random(n, kRope);
        const Tensor q_index = bench.random(n, int64_t{kIndexHeads} * kIndexDim);
        const Tensor weights = bench.random(n, kIndexHeads), k_index = bench.random(n, kIndexDim);
        Tensor out = b.tensor_new(n, int64_t{kHeads} * kV), selection = b.tensor_new(n, kIndexTopK);

        KvCache gqa_cache{bench.random(ctx, gqa_width), bench.random(ctx, gqa_width)};
        const Tensor gqa_q = bench.random(n, int64_t{kGqaHeads} * kGqaHeadDim),
                     gqa_k = bench.random(n, gqa_width), gqa_v = bench.random(n, gqa_width);
        Tensor gqa_out = b.tensor_new(n, int64_t{kGqaHeads} * kGqaHeadDim);

        const double dense = bench.median_seconds(
            out, [&] { b.mla_attention(q, latent, k_pe, w_kvb, cache, mla, pos0, nullptr, out); });
        const double index = bench.median_seconds(
            selection, [&] { b.dsa_select(q_index, weights, k_index, index_keys, dsa, pos0, selection); });
        const double sparse = bench.median_seconds(
            out, [&] { b.mla_attention(q, latent, k_pe, w_kvb, cache, mla, pos0, &selection, out); });
        const double gqa_s = bench.median_seconds(
            gqa_out, [&] { b.attention(gqa_q, gqa_k, gqa_v, gqa_cache, gqa, pos0, gqa_out); });
        const double cache_mb = ctx * (kKvLora + kRope + kIndexDim) * sizeof(float) / 1e6;
        // Dense: every latent and rope row and kv_b; DSA: every index key, the selected rows and kv_b.
        const double dense_bytes = ctx * (kKvLora + kRope) * sizeof(float) + kvb_bytes;
        const double dsa_bytes =
            ctx * kIndexDim * sizeof(float) +
            double(std::min<int64_t>(ctx, kIndexTopK)) * (kKvLora + kRope) * sizeof(float) + kvb_bytes;
        const double gqa_bytes = 2.0 * ctx * gqa_width * sizeof(float);  // the key and the value cache
        fmt::print(
            "{:>8} {:>10.1f} {:>13.3f} {:>9.3f} {:>13.3f} {:>14.3f} {:>13.3f} {:>9.3f} {:>9.3f} {:>9.3f}\n",
            ctx, cache_mb, dense * kMsPerSecond, bench.bound_ms(dense_bytes), index * kMsPerSecond,
            sparse * kMsPerSecond, (index + sparse) * kMsPerSecond, bench.bound_ms(dsa_bytes),
            gqa_s * kMsPerSecond, bench.bound_ms(gqa_bytes));
    }
}

void bench_attention(const BenchAttentionArgs& a) {
    std::unique_ptr<ThreadPool> own;
    if (a.threads > 0) own = std::make_unique<ThreadPool>(a.threads);
    ThreadPool& pool = own ? *own : default_pool();
    std::unique_ptr<Backend> b = backend_create(a.backend, pool);
    check(a.reps > 0, "--reps must be positive");
    check(a.queries > 0, "--queries must be positive");
    std::vector<int64_t> contexts;
    std::stringstream ss(a.contexts);
    for (std::string item; std::getline(ss, item, ',');) {
        const int64_t c = std::stoll(item);
        check(c >= a.queries, "--contexts: {} is shorter than --queries {}", c, a.queries);
        contexts.push_back(c);
    }
    bool mla = false, v4 = false;
    std::stringstream ts(a.tables);
    for (std::string item; std::getline(ts, item, ',');) {
        check(item == "mla" || item == "v4", "--tables: unknown table '{}' (mla, v4)", item);
        (item == "mla" ? mla : v4) = true;
    }

    const double device_copy = b->copy_gbps_measure();
    const double gbps = device_copy > 0 ? device_copy : memory_read_gbps_measure(pool, kMemoryReps);
    fmt::print("attention, one layer, {} query token(s) at the end of the context: {} ({}), median of {}\n",
               a.queries, b->name(), b->description(), a.reps);
    fmt::print("bounds: the bytes read once at {:.0f} GB/s ({})\n", gbps,
               device_copy > 0 ? "the device's copy, bytes read + written" : "host memory read");
    AttentionBench bench{*b, a.reps, a.queries, gbps, kSeed};
    if (mla) bench_mla(bench, contexts);
    if (v4) bench_attention_v4(bench, contexts);
}

}  // namespace

void cmd_bench_attention_add(CLI::App& app) {
    auto a = std::make_shared<BenchAttentionArgs>();
    CLI::App* cmd = app.add_subcommand(
        "bench-attention",
        "Attention time per layer against the context: DeepSeek-V3 MLA (dense, DSA), OLMoE's GQA, "
        "DeepSeek-V4-Flash (sliding, CSA, HCA, dense; per token over its layers)");
    cmd->add_option("--backend,-b", a->backend, "Backend: cpu, cuda, ...")->capture_default_str();
    cmd->add_option("--contexts", a->contexts, "Context lengths, comma-separated")->capture_default_str();
    cmd->add_option("--reps", a->reps, "Repetitions (median reported)")->capture_default_str();
    cmd->add_option("--queries", a->queries, "Query tokens at the end of each context (1: decode)")
        ->capture_default_str();
    cmd->add_option("--threads,-t", a->threads, "CPU threads (0 = all cores)")->capture_default_str();
    cmd->add_option("--tables", a->tables,
                    "Tables, comma-separated: mla (DeepSeek-V3 MLA, DSA and OLMoE's GQA), v4 (DeepSeek-V4)")
        ->capture_default_str();
    cmd->callback([a] { bench_attention(*a); });
}

}  // namespace coli
