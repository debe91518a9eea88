// `coli bench-attention`: decode attention time per token against the context length, for DeepSeek's
// absorbed MLA (one layer, 128 heads, kv_lora 512, rope 64, nope 128, v 128, bf16 kv_b) dense and with DSA
// (the lightning indexer, 64 heads of 128, choosing 2048 keys, then MLA over those), and for OLMoE's
// attention (16 heads of 128, as many kv heads), on one backend. Median
// of repetitions; each figure is one query token (or --queries, a prefill chunk) at the end of a context of
// the given length, beside its bound: the bytes it must read (the caches, the selected rows, kv_b) at the
// rate of the backend's device copy (host memory's read rate on the CPU). Reported, never asserted.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>

#include "backend/registry.h"
#include "cli/commands.h"
#include "cli/memory_probe.h"
#include "core/error.h"
#include "core/median.h"
#include "core/random.h"
#include "core/thread_pool.h"
#include "core/timer.h"

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
constexpr double kBytesPerGB = 1e9, kMsPerSecond = 1e3;
// Untimed runs before timing, for at least this long: a GPU left idle while the host filled the caches
// (seconds at 32k) runs at a low clock until it has been busy for a while.
constexpr double kWarmupSeconds = 0.25;

struct BenchAttentionArgs {
    std::string backend = "cpu";
    std::string contexts = "1024,8192,32768";
    int reps = 3;
    int64_t queries = 1;  // query tokens at the end of each context: 1 is decode, more a prefill chunk
    int threads = 0;
};

Tensor tensor_random(Backend& b, int64_t rows, int64_t cols, uint32_t& seed) {
    Tensor t = b.tensor_new(rows, cols);
    b.tensor_write(t, random_normal(static_cast<size_t>(rows * cols), seed++));
    return t;
}

// Median seconds of reps runs of f, after kWarmupSeconds of untimed ones; each run ends by reading out
// back, so device work is finished.
template <typename F>
double median_seconds(Backend& b, int reps, const Tensor& out, F&& f) {
    std::vector<double> s;
    std::vector<float> sink(out.numel());
    for (Timer warm; warm.seconds() < kWarmupSeconds;) {
        f();
        b.tensor_read(out, sink);
    }
    for (int r = 0; r < reps; ++r) {
        Timer t;
        f();
        b.tensor_read(out, sink);
        s.push_back(t.seconds());
    }
    return median(s);
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
    uint32_t seed = kSeed;
    const std::vector<float> wv = random_normal(int64_t{kHeads} * (kNope + kV) * kKvLora, seed++);
    auto encoded = std::make_shared<EncodedWeight>(
        weight_encode(Format::bf16, wv.data(), int64_t{kHeads} * (kNope + kV), kKvLora));
    const Weight w_kvb = b->weight_upload(Weight{encoded->view(), nullptr, encoded});
    const MlaShape mla{kHeads, kNope, kRope, kV, kKvLora, 1.0f / std::sqrt(float(kNope + kRope))};
    const DsaShape dsa{kIndexHeads, kIndexDim, kIndexTopK, 1.0f / std::sqrt(float(kIndexDim)),
                       1.0f / std::sqrt(float(kIndexHeads))};

    const double device_copy = b->copy_gbps_measure();
    const double gbps = device_copy > 0 ? device_copy : memory_read_gbps_measure(pool, kMemoryReps);
    fmt::print("attention, one layer, {} query token(s) at the end of the context: {} ({}), median of {}\n",
               a.queries, b->name(), b->description(), a.reps);
    fmt::print(
        "MLA: {} heads, kv_lora {}, rope {}, nope {}, v {}, kv_b bf16; DSA: {} indexer heads of {}, top {}; "
        "GQA: {} heads of {}, {} kv heads\n",
        kHeads, kKvLora, kRope, kNope, kV, kIndexHeads, kIndexDim, kIndexTopK, kGqaHeads, kGqaHeadDim,
        kGqaKvHeads);
    const AttentionShape gqa{kGqaHeads, kGqaKvHeads, kGqaHeadDim, 1.0f / std::sqrt(float(kGqaHeadDim))};
    const int64_t gqa_width = int64_t{kGqaKvHeads} * kGqaHeadDim;
    fmt::print("bounds: the bytes read once at {:.0f} GB/s ({})\n", gbps,
               device_copy > 0 ? "the device's copy, bytes read + written" : "host memory read");
    fmt::print("{:>8} {:>10} {:>13} {:>9} {:>13} {:>14} {:>13} {:>9} {:>9} {:>9}\n", "context", "cache MB",
               "dense MLA ms", "bound", "DSA index ms", "sparse MLA ms", "DSA total ms", "bound", "GQA ms",
               "bound");
    const auto bound_ms = [&](double bytes) { return bytes / (gbps * kBytesPerGB) * kMsPerSecond; };
    const double kvb_bytes = double(w_kvb.host.data_bytes() + w_kvb.host.scale_bytes());
    for (int64_t ctx : contexts) {
        const int64_t n = a.queries, pos0 = ctx - n;
        KvCache cache{tensor_random(*b, ctx, kKvLora, seed), tensor_random(*b, ctx, kRope, seed)};
        Tensor index_keys = tensor_random(*b, ctx, kIndexDim, seed);
        const Tensor q = tensor_random(*b, n, int64_t{kHeads} * (kNope + kRope), seed);
        const Tensor latent = tensor_random(*b, n, kKvLora, seed), k_pe = tensor_random(*b, n, kRope, seed);
        const Tensor q_index = tensor_random(*b, n, int64_t{kIndexHeads} * kIndexDim, seed);
        const Tensor weights = tensor_random(*b, n, kIndexHeads, seed),
                     k_index = tensor_random(*b, n, kIndexDim, seed);
        Tensor out = b->tensor_new(n, int64_t{kHeads} * kV), selection = b->tensor_new(n, kIndexTopK);

        KvCache gqa_cache{tensor_random(*b, ctx, gqa_width, seed), tensor_random(*b, ctx, gqa_width, seed)};
        const Tensor gqa_q = tensor_random(*b, n, int64_t{kGqaHeads} * kGqaHeadDim, seed),
                     gqa_k = tensor_random(*b, n, gqa_width, seed),
                     gqa_v = tensor_random(*b, n, gqa_width, seed);
        Tensor gqa_out = b->tensor_new(n, int64_t{kGqaHeads} * kGqaHeadDim);

        const double dense = median_seconds(*b, a.reps, out, [&] {
            b->mla_attention(q, latent, k_pe, w_kvb, cache, mla, pos0, nullptr, out);
        });
        const double index = median_seconds(*b, a.reps, selection, [&] {
            b->dsa_select(q_index, weights, k_index, index_keys, dsa, pos0, selection);
        });
        const double sparse = median_seconds(*b, a.reps, out, [&] {
            b->mla_attention(q, latent, k_pe, w_kvb, cache, mla, pos0, &selection, out);
        });
        const double gqa_s = median_seconds(
            *b, a.reps, gqa_out, [&] { b->attention(gqa_q, gqa_k, gqa_v, gqa_cache, gqa, pos0, gqa_out); });
        const double cache_mb = ctx * (kKvLora + kRope + kIndexDim) * sizeof(float) / 1e6;
        // Dense: every latent and rope row and kv_b; DSA: every index key, the selected rows and kv_b.
        const double dense_bytes = ctx * (kKvLora + kRope) * sizeof(float) + kvb_bytes;
        const double dsa_bytes =
            ctx * kIndexDim * sizeof(float) +
            double(std::min<int64_t>(ctx, kIndexTopK)) * (kKvLora + kRope) * sizeof(float) + kvb_bytes;
        const double gqa_bytes = 2.0 * ctx * gqa_width * sizeof(float);  // the key and the value cache
        fmt::print(
            "{:>8} {:>10.1f} {:>13.3f} {:>9.3f} {:>13.3f} {:>14.3f} {:>13.3f} {:>9.3f} {:>9.3f} {:>9.3f}\n",
            ctx, cache_mb, dense * kMsPerSecond, bound_ms(dense_bytes), index * kMsPerSecond,
            sparse * kMsPerSecond, (index + sparse) * kMsPerSecond, bound_ms(dsa_bytes), gqa_s * kMsPerSecond,
            bound_ms(gqa_bytes));
    }
}

}  // namespace

void cmd_bench_attention_add(CLI::App& app) {
    auto a = std::make_shared<BenchAttentionArgs>();
    CLI::App* cmd = app.add_subcommand(
        "bench-attention",
        "Decode attention time against the context: MLA dense and with DSA (DeepSeek sizes)");
    cmd->add_option("--backend,-b", a->backend, "Backend: cpu, cuda, ...")->capture_default_str();
    cmd->add_option("--contexts", a->contexts, "Context lengths, comma-separated")->capture_default_str();
    cmd->add_option("--reps", a->reps, "Repetitions (median reported)")->capture_default_str();
    cmd->add_option("--queries", a->queries, "Query tokens at the end of each context (1: decode)")
        ->capture_default_str();
    cmd->add_option("--threads,-t", a->threads, "CPU threads (0 = all cores)")->capture_default_str();
    cmd->callback([a] { bench_attention(*a); });
}

}  // namespace coli
