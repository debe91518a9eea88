// `coli bench`: speeds beside their bounds, measured in the same run on the same machine (docs/design.md,
// "Performance is measured, as ratios in one run").
//   matmul:  decode matmul (one token) per weight format, weight GB/s beside memcpy GB/s of a buffer of
//            the same size (and beside a plain read of it, the tighter bound for a kernel that only reads).
//   --model: expert streaming under a RAM budget: the store's read GB/s beside raw O_DIRECT reads of
//            randomly chosen experts' byte ranges, and decode tok/s beside the disk bound and the memory
//            bound (RAM on the CPU, a device copy on a GPU), with the hit rate and the routing statistics
//            that say whether the run exercised the cache honestly.
// Every figure is the median of repetitions. Timings are reported, never asserted.
#include <fmt/format.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend/registry.h"
#include "cli/commands.h"
#include "cli/memory_probe.h"
#include "core/error.h"
#include "core/median.h"
#include "core/thread_pool.h"
#include "core/timer.h"
#include "formats/format.h"
#include "io/file.h"
#include "runtime/session.h"
#include "store/expert_index.h"
#include "store/expert_store.h"
#include "synth/random_weight.h"

namespace coli {
namespace {

constexpr double kMB = 1e6;
constexpr double kMsPerSecond = 1e3;
constexpr size_t kOpTimesShown = 5;          // ops named in the host time line
constexpr int64_t kMatmulCols = 4096;        // a typical d_model; a multiple of every format's group
constexpr int64_t kMatmulRowMultiple = 128;  // whole fp8 scale blocks
constexpr uint64_t kBenchSeed = 0x5eed;

struct BenchArgs {
    int threads = 0;
    std::string simd;
    int reps = 5;
    double matmul_mb = 256;
    std::string formats = "f32,bf16,f16,int8,int4-g64,mxfp4,fp8-e4m3-block";
    bool no_matmul = false;
    bool matmul = false;  // with --model: also the matmul table
    // --model
    EngineOptions engine;
    int tokens = 32;
    int warmup_tokens = 64;
    int prompt_tokens = 8;
    int decode_reps = 3;
    double disk_gb = 2;
    uint64_t seed = 0;
};

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
            return line.substr(line.find(':') + 2);
    }
    utsname u{};
    return ::uname(&u) == 0 ? u.machine : "unknown cpu";
}

// ---- matmul --------------------------------------------------------------------------------------------

void matmul_bench(const BenchArgs& a, ThreadPool& pool) {
    std::vector<Format> formats;
    for (const std::string& name : CLI::detail::split(a.formats, ',')) {
        auto f = format_parse(name);
        check(f.has_value(), "--formats: unknown weight format '{}'", name);
        formats.push_back(*f);
    }
    check(a.matmul_mb > 0, "--matmul-mb must be > 0");
    fmt::print("\nmatmul, decode (1 token x [rows, {}] weight), {} threads, {}, median of {}\n", kMatmulCols,
               pool.size(), simd_name(simd_active()), a.reps);
    fmt::print("{:<15} {:>7} {:>9} {:>10} | {:>11} {:>6} | {:>9} {:>6}\n", "format", "rows", "weight MB",
               "weight GB/s", "memcpy GB/s", "ratio", "read GB/s", "ratio");
    const auto target = static_cast<size_t>(a.matmul_mb * kMB);
    std::vector<float> x(kMatmulCols);
    for (int64_t i = 0; i < kMatmulCols; ++i) x[i] = std::sin(0.1f * float(i));  // any finite activation
    for (Format f : formats) {
        const size_t row_bytes =
            WeightView{f, kMatmulRowMultiple, kMatmulCols, nullptr, nullptr}.data_bytes() /
            kMatmulRowMultiple;
        const int64_t rows =
            int64_t((target / row_bytes + kMatmulRowMultiple - 1) / kMatmulRowMultiple) * kMatmulRowMultiple;
        const EncodedWeight w = random_weight(f, rows, kMatmulCols, kBenchSeed, pool);
        // fp8: as the loader and the expert store mark a weight without NaN codes (the kernel leaves out its
        // NaN fix), then unmarked, as a weight that holds some runs.
        std::vector<std::pair<std::string, WeightView>> views = {{std::string(format_name(f)), w.view()}};
        if (f == Format::fp8_e4m3_block) {
            views.front().second.nan_free = fp8_codes_nan_free(w.data.data(), w.data.size());
            views.emplace_back("fp8, NaN fix", w.view());
        }
        MemoryProbe probe(w.data.data(), w.data.size(), pool);  // the bound on the weight's own bytes
        for (const auto& [label, v] : views) {
            const size_t bytes = v.data_bytes() + v.scale_bytes();
            std::vector<float> y(static_cast<size_t>(rows));
            matmul(v, x.data(), 1, y.data(), pool);  // warm-up: page faults, pool wake-up
            // Interleaved, so that the speed and its bounds see the same machine state (other load, clocks).
            std::vector<double> weight_gbps, copy_gbps, read_gbps;
            for (int r = 0; r < a.reps; ++r) {
                Timer t;
                matmul(v, x.data(), 1, y.data(), pool);
                weight_gbps.push_back(bytes / t.seconds() / kBytesPerGB);
                copy_gbps.push_back(probe.copy_gbps());
                read_gbps.push_back(probe.read_gbps());
            }
            const double gbps = median(weight_gbps), copy = median(copy_gbps), read = median(read_gbps);
            fmt::print("{:<15} {:>7} {:>9.0f} {:>10.2f} | {:>11.2f} {:>6.2f} | {:>9.2f} {:>6.2f}\n", label,
                       rows, bytes / kMB, gbps, copy, gbps / copy, read, gbps / read);
        }
    }
    fmt::print(
        "weight GB/s: encoded bytes (codes + scales) / time of one matmul. memcpy moves each byte twice\n"
        "(read + write), so a kernel that only reads can pass ratio 1 against it; read GB/s is the bound\n"
        "for reading alone.\n");
}

// ---- disk ----------------------------------------------------------------------------------------------

struct DiskProbe {
    double gbps = 0;
    bool direct = true;  // every file opened with O_DIRECT
    uint64_t bytes = 0;
};

// One raw read of the disk probe: a range of a model file.
struct RawRead {
    int file = 0;         // index into the checkpoint's files
    uint64_t offset = 0;  // first byte
    uint64_t length = 0;  // bytes
};

// The byte ranges of randomly chosen experts, up to `cap` bytes: the reads the store makes (same files, sizes
// and scatter), on experts a decode run mostly did not touch. Reading the files front to back instead would
// measure the dense weights the load has just read, which a virtual disk may still hold in its host's cache.
std::vector<RawRead> expert_reads_sample(const ExpertIndex& index, uint64_t cap, uint64_t seed) {
    std::vector<std::pair<int, int>> experts;
    for (int l = 0; l < index.n_layers(); ++l)
        if (index.has_experts(l))
            for (int e = 0; e < index.n_experts(); ++e) experts.emplace_back(l, e);
    std::shuffle(experts.begin(), experts.end(), std::mt19937_64(seed));
    std::vector<RawRead> reads;
    uint64_t bytes = 0;
    for (const auto& [l, e] : experts) {
        for (const ReadRange& r : index.at(l, e).reads) {
            reads.push_back({r.file, r.offset, r.length});
            bytes += r.length;
        }
        if (bytes >= cap) break;
    }
    return reads;
}

// Runs the reads, `readers` at a time, with O_DIRECT where the filesystem allows it (offsets and sizes
// widened to its alignment): the raw bandwidth the store's reads compete with.
DiskProbe disk_probe(const std::vector<std::filesystem::path>& paths, const std::vector<RawRead>& reads,
                     int readers) {
    std::vector<std::unique_ptr<ReadFile>> files;
    DiskProbe p;
    for (const auto& path : paths) {
        files.push_back(std::make_unique<ReadFile>(path));
        p.direct = p.direct && files.back()->has_direct();
    }
    uint64_t longest = 0;
    for (const RawRead& r : reads) {
        p.bytes += r.length;
        longest = std::max(longest, r.length + 2 * kDirectAlign);
    }
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    Timer timer;
    std::vector<std::thread> threads;
    for (int r = 0; r < readers; ++r) {
        threads.emplace_back([&] {
            AlignedBytes buf = aligned_alloc_bytes(longest);
            for (size_t i; (i = next++) < reads.size();) {
                const RawRead& r = reads[i];
                const ReadFile& f = *files[r.file];
                const uint64_t begin = r.offset / kDirectAlign * kDirectAlign;
                const uint64_t end = (r.offset + r.length + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
                const int fd = f.has_direct() ? f.fd_direct() : f.fd();
                // A short count at the end of a file is expected (O_DIRECT reads whole blocks).
                if (::pread(fd, buf.get(), end - begin, static_cast<off_t>(begin)) < 0) failed = true;
            }
        });
    }
    for (auto& t : threads) t.join();
    check(!failed, "coli bench: a raw read of the model files failed");
    p.gbps = p.bytes / timer.seconds() / kBytesPerGB;
    return p;
}

// ---- expert streaming ----------------------------------------------------------------------------------

// One decode run on a fresh engine (cold expert cache): the prompt, then decode steps until the cache is
// full (its first eviction, or --warmup-tokens steps), then --tokens measured steps, with store statistics
// taken at both ends. Full, the cache evicts about one expert per expert it reads and the reads reuse the
// evicted memory: the steady state of a long run (before, reads also pay for the first touch of the cache's
// memory). Each step feeds a random id rather than the sampled one: a synthetic model's greedy output
// repeats itself and would route every step to the same experts.
struct DecodeRun {
    double tok_per_s = 0;
    double store_read_gbps = 0;
    double missed_bytes_per_token = 0;
    double hit_rate = 0;
    double stall_share = 0;        // share of decode time spent waiting for reads
    double moe_layer_seconds = 0;  // wall time of one routed-expert layer for one token
    int warmup_tokens = 0;         // decode steps before the measurement
    bool cache_full = false;       // the measurement began with a full cache
    StoreStats end;                // counters over the whole run (routing statistics include the prompt)
    std::array<double, static_cast<size_t>(OpKind::count_)> op_seconds{};  // host time in each op, per token
    double read_seconds = 0;  // host time in reads of results (logits), per token
};

DecodeRun decode_run(const BenchArgs& a, const std::vector<int32_t>& prompt, int64_t vocab) {
    Engine engine(a.engine);
    Session session(engine.model());
    ExpertStore& store = engine.model().store();
    std::mt19937_64 rng(a.seed + 1);
    const auto step = [&] {
        const auto id = static_cast<int32_t>(rng() % uint64_t(vocab));
        session.forward(std::span<const int32_t>(&id, 1), false);
    };
    session.forward(prompt, false);
    DecodeRun r;
    for (; r.warmup_tokens < a.warmup_tokens && store.stats().evictions == 0; ++r.warmup_tokens) step();
    const StoreStats first = store.stats();
    const OpCounters ops_first = engine.model().ops().counters();
    r.cache_full = first.evictions > 0;
    const Timer timer;
    for (int t = 0; t < a.tokens; ++t) step();
    const double seconds = timer.seconds();
    const OpCounters& ops_end = engine.model().ops().counters();
    for (size_t i = 0; i < r.op_seconds.size(); ++i)
        r.op_seconds[i] = (ops_end.native_seconds[i] - ops_first.native_seconds[i]) / a.tokens;
    r.read_seconds = (ops_end.read_seconds - ops_first.read_seconds) / a.tokens;
    const StoreStats end = store.stats();
    r.end = end;
    r.tok_per_s = a.tokens / std::max(seconds, 1e-9);
    const uint64_t bytes = end.bytes_read - first.bytes_read;
    const double read_s = end.read_seconds - first.read_seconds;
    r.store_read_gbps = read_s > 0 ? bytes / read_s / kBytesPerGB : 0;
    r.missed_bytes_per_token = double(bytes) / a.tokens;
    const uint64_t hits = end.hits - first.hits, misses = end.misses - first.misses;
    r.hit_rate = hits + misses ? double(hits) / double(hits + misses) : 0;
    r.stall_share = (end.stall_seconds - first.stall_seconds) / std::max(seconds, 1e-9);
    const uint64_t calls = end.moe_calls - first.moe_calls;
    r.moe_layer_seconds = calls ? (end.moe_seconds - first.moe_seconds) / double(calls) : 0;
    return r;
}

// Bytes a decode step must touch in RAM: the dense matrices (the embedding table, read one row per
// token, left out) and top_k experts in every MoE layer.
double touched_bytes_per_token(Engine& engine) {
    const ModelSummary& m = engine.model().summary();
    uint64_t embedding = 0;
    for (const TensorInfo& t : engine.checkpoint().tensors())
        if (t.name.find("embed") != std::string::npos) embedding += t.nbytes;
    const ExpertLayout& l = engine.model().store().layout();
    const double expert = m.expert_count ? double(m.expert_bytes) / double(m.expert_count) : 0;
    const double moe_layers = l.n_experts ? double(m.expert_count) / l.n_experts : 0;
    return double(m.dense_held_bytes - std::min(embedding, m.dense_held_bytes)) +
           moe_layers * l.top_k * expert;
}

// Where a decode step's host time goes: the ops that took most of it (medians over the runs), the reads of
// results (the logits), and what is left (the model's own code, the store, sampling). On a GPU an op's time
// is its recording and launches, and its wait where it returns results to the host (routing).
void op_time_print(double tok_per_s,
                   const std::array<std::vector<double>, static_cast<size_t>(OpKind::count_)>& op_seconds,
                   double read_seconds) {
    std::vector<std::pair<double, size_t>> by_time;
    double in_ops = 0;
    for (size_t i = 0; i < op_seconds.size(); ++i) {
        const double s = median(op_seconds[i]);
        in_ops += s;
        if (s > 0) by_time.emplace_back(s, i);
    }
    std::sort(by_time.rbegin(), by_time.rend());
    std::string top;
    for (size_t j = 0; j < std::min(by_time.size(), kOpTimesShown); ++j)
        top += fmt::format("{}{} {:.3f}", j ? ", " : "", op_name(static_cast<OpKind>(by_time[j].second)),
                           by_time[j].first * kMsPerSecond);
    const double step = tok_per_s > 0 ? 1 / tok_per_s : 0;
    fmt::print("{:<28} {:>12.3f}   ops {:.3f} ({}); reads of results {:.3f}; the rest {:.3f}\n",
               "host ms per token", step * kMsPerSecond, in_ops * kMsPerSecond, top,
               read_seconds * kMsPerSecond, std::max(0.0, step - in_ops - read_seconds) * kMsPerSecond);
}

// ---- speculative decoding -----------------------------------------------------------------------------

// Greedy generation of --tokens tokens from the prompt on one engine, without and with the model's drafts
// (Session::speculate) in alternating order, after one unmeasured run of each: decode tok/s of each (median
// of --decode-reps), the drafts' acceptance rate, and whether the tokens are the same (they must be).
void speculation_bench(const BenchArgs& a, const std::vector<int32_t>& prompt) {
    EngineOptions o = a.engine;
    o.speculate = true;
    Engine engine(o);
    Session session(engine.model());
    Sampler greedy(SamplerOptions{});
    std::vector<double> plain_tps, drafted_tps, acceptance;
    std::vector<int32_t> first;  // the tokens of the first run; every other run's must match
    bool same = true;
    for (int rep = -1; rep < a.decode_reps; ++rep) {
        for (const bool drafts : {rep % 2 != 0, rep % 2 == 0}) {
            fmt::print(stderr, "bench: speculative decoding, {} run {} of {}, drafts {}...\n",
                       rep < 0 ? "warm-up" : "measured", rep + 1, a.decode_reps, drafts ? "on" : "off");
            session.reset();
            session.speculate(drafts);
            const std::vector<int32_t> ids = session.generate(prompt, a.tokens, greedy, {});
            const GenerationStats& st = session.last_stats();
            if (first.empty())
                first = ids;
            else
                same = same && ids == first;
            if (rep < 0) continue;
            const double tps = st.decode_tokens / std::max(st.decode_seconds, 1e-9);
            (drafts ? drafted_tps : plain_tps).push_back(tps);
            if (drafts) acceptance.push_back(st.drafts.acceptance());
        }
    }
    const double plain = median(plain_tps), drafted = median(drafted_tps);
    fmt::print(
        "\nspeculative decoding (the model's MTP layer drafts one token; greedy, {} tokens from the {}-token "
        "prompt, warm cache; median of {})\n",
        a.tokens, prompt.size(), a.decode_reps);
    fmt::print("{:<28} {:>12.2f}\n", "decode tok/s, plain", plain);
    fmt::print("{:<28} {:>12.2f}   x{:.2f}\n", "decode tok/s, drafted", drafted,
               plain > 0 ? drafted / plain : 0);
    const double kept = median(acceptance);
    fmt::print("{:<28} {:>11.1f}%   of the drafts kept\n", "acceptance", 100 * kept);
    // A drafted step costs (1 + kept) / drafted seconds per token it yields, a plain one 1 / plain: drafting
    // pays from the acceptance where the two meet.
    if (drafted > 0)
        fmt::print("{:<28} {:>11.1f}%   the acceptance at which drafting would match plain decoding here\n",
                   "break-even acceptance", 100 * ((1 + kept) * plain / drafted - 1));
    fmt::print("{:<28} {:>12}\n", "same tokens", same ? "yes" : "NO");
    check(same, "coli bench: speculative decoding changed the greedy tokens");
}

void model_bench(BenchArgs& a, ThreadPool& pool) {
    check(a.tokens > 0 && a.prompt_tokens > 0 && a.decode_reps > 0 && a.warmup_tokens >= 0,
          "--tokens, --prompt-tokens and --decode-reps must be > 0, --warmup-tokens >= 0");
    // The streaming runs below feed random ids and draft nothing: only speculation_bench loads the draft
    // layer.
    const bool speculate = std::exchange(a.engine.speculate, false);
    // Facts about the model and the budget, from one engine that is then dropped.
    std::vector<std::filesystem::path> files;
    std::vector<std::vector<RawRead>> probe_reads;  // the raw disk bound's reads, fresh experts per run
    double touched = 0;
    ModelSummary summary;
    std::string backend;     // where the decode runs' ops go
    bool on_cpu = true;      // the dense weights are read from RAM (the memory bound applies)
    double device_copy = 0;  // a GPU backend's device-to-device copy, GB/s read + written (0: on the CPU)
    ExpertLayout layout;
    int64_t vocab = 0;
    {
        Engine engine(a.engine);
        summary = engine.model().summary();
        backend = engine.model().ops().backend().description();
        on_cpu = engine.model().ops().backend().name() == "cpu";
        device_copy = engine.model().ops().backend().copy_gbps_measure();
        layout = engine.model().store().layout();
        vocab = summary.vocab;
        touched = touched_bytes_per_token(engine);
        for (int i = 0; i < engine.checkpoint().file_count(); ++i)
            files.push_back(engine.checkpoint().file_path(i));
        const ExpertIndex index(engine.checkpoint(), layout);
        for (int rep = 0; rep < a.decode_reps; ++rep)
            probe_reads.push_back(
                expert_reads_sample(index, static_cast<uint64_t>(a.disk_gb * kBytesPerGB), a.seed + 1 + rep));
    }
    // The KV cache only needs the run's tokens; the model's maximum context would cost RAM and zeroing time.
    if (a.engine.max_ctx == 0) a.engine.max_ctx = a.prompt_tokens + a.warmup_tokens + a.tokens;
    const auto budget = static_cast<uint64_t>(a.engine.ram_gb * kBytesPerGB);
    std::mt19937_64 rng(a.seed);
    std::vector<int32_t> prompt(size_t(a.prompt_tokens));
    for (int32_t& id : prompt) id = static_cast<int32_t>(rng() % uint64_t(vocab));

    fmt::print("\nexpert streaming: {}\n  {}\n  backend: {}\n", a.engine.model_dir.string(),
               summary.architecture, backend);
    fmt::print(
        "  experts {} on disk, RAM budget {}{}; {} io threads, {}; {} prompt tokens, decode steps until the "
        "cache is full (at most {}), then {} measured steps (random ids, seed {}); median of {} runs, each "
        "on "
        "a cold cache\n",
        bytes_human(summary.expert_bytes), budget ? bytes_human(budget) : "unlimited",
        budget ? fmt::format(" ({:.0f}% of the experts)", 100.0 * budget / summary.expert_bytes) : "",
        a.engine.io_threads, a.engine.direct_io ? "O_DIRECT" : "buffered", a.prompt_tokens, a.warmup_tokens,
        a.tokens, a.seed, a.decode_reps);
    if (!budget || budget >= summary.expert_bytes)
        fmt::print(
            "  note: the budget holds every expert, so this measures the cache, not streaming; "
            "give --ram-gb below {}\n",
            bytes_human(summary.expert_bytes));

    std::vector<double> tok_s, store_gbps, disk_gbps, missed, hit, stall, moe_layer, warmup;
    std::array<std::vector<double>, static_cast<size_t>(OpKind::count_)> op_seconds;
    std::vector<double> read_seconds;
    DiskProbe probe;
    StoreStats routing;
    bool cache_full = true;
    for (int rep = 0; rep < a.decode_reps; ++rep) {
        std::fflush(stdout);  // the header first, then the progress on stderr, also through a pipe
        fmt::print(stderr, "bench: decode run {} of {} (cold cache)...\n", rep + 1, a.decode_reps);
        const DecodeRun r = decode_run(a, prompt, vocab);
        fmt::print(stderr, "bench: decode run {} of {}: {:.2f} tok/s after {} warm-up steps\n", rep + 1,
                   a.decode_reps, r.tok_per_s, r.warmup_tokens);
        cache_full = cache_full && r.cache_full;
        warmup.push_back(r.warmup_tokens);
        moe_layer.push_back(r.moe_layer_seconds);
        tok_s.push_back(r.tok_per_s);
        for (size_t i = 0; i < op_seconds.size(); ++i) op_seconds[i].push_back(r.op_seconds[i]);
        read_seconds.push_back(r.read_seconds);
        store_gbps.push_back(r.store_read_gbps);
        missed.push_back(r.missed_bytes_per_token);
        hit.push_back(r.hit_rate);
        stall.push_back(r.stall_share);
        routing = r.end;
        // The bounds, measured between the runs so that they see the same machine state.
        probe = disk_probe(files, probe_reads[rep], a.engine.io_threads);
        disk_gbps.push_back(probe.gbps);
    }
    const double mem = on_cpu ? memory_read_gbps_measure(pool, a.reps) : 0;
    const double tps = median(tok_s), disk = median(disk_gbps), miss = median(missed);
    const double disk_bound = miss > 0 ? disk * kBytesPerGB / miss : 0;
    const double mem_bound = touched > 0 ? mem * kBytesPerGB / touched : 0;
    const double uniform_shared = double(layout.top_k) * layout.top_k / layout.n_experts;

    // The one line to read first: the speed, against the tighter of its bounds, and what limits it.
    const double tight =
        std::min(disk_bound > 0 ? disk_bound : INFINITY, mem_bound > 0 ? mem_bound : INFINITY);
    fmt::print(
        "summary: {:.2f} tok/s decode{}, {} read per token, hit rate {:.1f}%, {:.1f}% of the time stalled "
        "on I/O\n",
        tps,
        std::isfinite(tight) ? fmt::format(" ({:.0f}% of the bound {:.2f})", 100 * tps / tight, tight) : "",
        bytes_human(uint64_t(miss)), 100 * median(hit), 100 * median(stall));
    fmt::print("{:<28} {:>12} | {:>12}  {:<52} {:>6}\n", "figure", "measured", "bound", "(bound from)",
               "ratio");
    fmt::print("{:<28} {:>12.2f} | {:>12.2f}  {:<52} {:>6.2f}\n", "expert read GB/s (store)",
               median(store_gbps), disk,
               fmt::format("raw {} reads of random experts, {} at a time",
                           probe.direct ? "O_DIRECT" : "BUFFERED (no O_DIRECT)", a.engine.io_threads),
               median(store_gbps) / disk);
    if (miss > 0)
        fmt::print("{:<28} {:>12.2f} | {:>12.2f}  {:<52} {:>6.2f}\n", "decode tok/s", tps, disk_bound,
                   fmt::format("disk: {:.2f} GB/s / {} read per token", disk, bytes_human(uint64_t(miss))),
                   tps / disk_bound);
    else
        fmt::print("{:<28} {:>12.2f} | {:>12}  {}\n", "decode tok/s", tps, "none",
                   "disk: no expert was read in the measured steps");
    if (on_cpu)
        fmt::print("{:<28} {:>12.2f} | {:>12.2f}  {:<52} {:>6.2f}\n", "decode tok/s", tps, mem_bound,
                   fmt::format("memory: {:.1f} GB/s read / {} touched per token", mem,
                               bytes_human(uint64_t(touched))),
                   mem_bound > 0 ? tps / mem_bound : 0);
    // On a GPU the weights a step touches are read from device memory (the routed experts once they are in
    // its tier), at best at the pace of a device copy, as `coli test-ops --bench` judges its kernels.
    const double device_bound = touched > 0 ? device_copy * kBytesPerGB / touched : 0;
    if (device_bound > 0)
        fmt::print("{:<28} {:>12.2f} | {:>12.2f}  {:<52} {:>6.2f}\n", "decode tok/s", tps, device_bound,
                   fmt::format("device: {:.0f} GB/s copy / {} touched per token", device_copy,
                               bytes_human(uint64_t(touched))),
                   tps / device_bound);
    fmt::print("{:<28} {:>12}\n", "bytes read per token", bytes_human(uint64_t(miss)));
    fmt::print("{:<28} {:>12.3f}   fetches, waits and compute of the routed experts (as queued on a GPU)\n",
               "ms per MoE layer per token", median(moe_layer) * kMsPerSecond);
    op_time_print(tps, op_seconds, median(read_seconds));
    fmt::print("{:<28} {:>12.0f}   decode steps before the measurement, until the cache was full\n",
               "warm-up", median(warmup));
    fmt::print("{:<28} {:>11.1f}%\n", "hit rate (decode)", 100 * median(hit));
    fmt::print("{:<28} {:>11.1f}%\n", "decode time stalled on I/O", 100 * median(stall));
    fmt::print("{:<28} {:>12.1f}   of {} experts per layer, over the run\n", "routing: distinct experts",
               routing.distinct_per_layer, layout.n_experts);
    fmt::print("{:<28} {:>12.2f}   of top_k {}; uniform routing: k*k/E = {:.2f}\n",
               "routing: consecutive shared", routing.consecutive_shared, layout.top_k, uniform_shared);
    // (A budget that holds every expert never fills: the note above says so already.)
    const bool streaming = budget > 0 && budget < summary.expert_bytes;
    if (!cache_full && streaming)
        fmt::print(
            "warning: the cache was not full after --warmup-tokens {}: the reads measured include the first "
            "touch of the cache's memory; raise --warmup-tokens or lower --ram-gb\n",
            a.warmup_tokens);
    if (!probe.direct)
        fmt::print(
            "warning: the filesystem refused O_DIRECT: raw reads may come from the page cache, so the disk "
            "bound is not a disk bound\n");
    if (speculate) speculation_bench(a, prompt);
}

void bench(BenchArgs& a) {
    check(a.reps > 0, "--reps must be > 0");
    if (a.threads > 0) set_default_threads(a.threads);
    // The engines below use the pool sized here; an engine given a thread count would replace the pool
    // that `pool` refers to.
    a.engine.threads = 0;
    if (!a.simd.empty()) {
        const std::map<std::string, Simd> levels = {
            {"scalar", Simd::scalar}, {"avx2", Simd::avx2}, {"avx512", Simd::avx512}};
        auto it = levels.find(a.simd);
        check(it != levels.end(), "--simd must be scalar, avx2 or avx512, got '{}'", a.simd);
        simd_set(it->second);
    }
    ThreadPool& pool = default_pool();
    fmt::print("coli bench on {} ({} hardware threads); {} threads used; SIMD {} (detected {})\n",
               cpu_model(), std::thread::hardware_concurrency(), pool.size(), simd_name(simd_active()),
               simd_name(simd_detected()));
    // With a model, its figures are what was asked for; the matmul table only when asked too.
    if (!a.no_matmul && (a.engine.model_dir.empty() || a.matmul)) matmul_bench(a, pool);
    if (!a.engine.model_dir.empty()) model_bench(a, pool);
}

}  // namespace

void cmd_bench_add(CLI::App& app) {
    auto a = std::make_shared<BenchArgs>();
    a->engine.hot_set = "none";  // every run starts cold and leaves no routing history behind
    CLI::App* cmd =
        app.add_subcommand("bench", "Measure speeds beside their bounds (matmul; expert streaming)");
    cmd->add_option("--threads,-t", a->threads, "CPU threads (0 = all cores)")->capture_default_str();
    cmd->add_option("--simd", a->simd, "Force the SIMD level: scalar, avx2, avx512 (default: best detected)");
    cmd->add_option("--reps", a->reps, "Repetitions of each matmul and bound (median reported)")
        ->capture_default_str();
    cmd->add_option("--matmul-mb", a->matmul_mb, "Weight size per format, MB (larger than the caches)")
        ->capture_default_str();
    cmd->add_option("--formats", a->formats, "Weight formats to measure, comma-separated")
        ->capture_default_str();
    cmd->add_flag("--no-matmul", a->no_matmul, "Skip the matmul table");
    cmd->add_flag("--matmul", a->matmul, "With --model: also the matmul table (skipped by default then)");
    cmd->add_option("--model,-m", a->engine.model_dir, "Model directory: also measure expert streaming");
    cmd->add_option("--backend,-b", a->engine.backend, "Backend of the decode runs: " + backend_names())
        ->capture_default_str();
    cmd->add_option(
           "--vram-gb", a->engine.vram_gb,
           "Device memory for dense weights and the expert tier, GB (0 = free memory less a reserve)")
        ->capture_default_str();
    cmd->add_option("--ram-gb", a->engine.ram_gb,
                    "RAM budget for cached experts, GB (below the expert bytes)")
        ->capture_default_str();
    cmd->add_option("--io-threads", a->engine.io_threads, "Concurrent expert reads (and raw disk readers)")
        ->capture_default_str();
    cmd->add_flag("!--no-direct-io", a->engine.direct_io, "Read experts through the page cache");
    cmd->add_flag("!--no-mmap", a->engine.mmap,
                  "Without --ram-gb: copy experts into a RAM cache instead of using the file mappings");
    cmd->add_option("--hot-set", a->engine.hot_set, "Routing-history file: none, auto or a path")
        ->capture_default_str();
    cmd->add_option("--tokens", a->tokens, "Decode steps measured per run")->capture_default_str();
    cmd->add_option("--warmup-tokens", a->warmup_tokens,
                    "Most decode steps per run before the measurement (it starts once the cache is full)")
        ->capture_default_str();
    cmd->add_option("--prompt-tokens", a->prompt_tokens, "Random prompt ids per run")->capture_default_str();
    cmd->add_option("--decode-reps", a->decode_reps, "Decode runs, each on a fresh engine (median reported)")
        ->capture_default_str();
    cmd->add_option("--disk-gb", a->disk_gb,
                    "Bytes of randomly chosen experts read raw per disk measurement, GB")
        ->capture_default_str();
    cmd->add_option("--seed", a->seed, "Seed of the random prompt")->capture_default_str();
    cmd->add_flag("--speculate", a->engine.speculate,
                  "Also decode greedily with and without the model's own multi-token-prediction drafts: "
                  "speed of each and the acceptance rate");
    cmd->add_option("--ctx", a->engine.max_ctx, "Context length (0 = the prompt and decode tokens of a run)")
        ->capture_default_str();
    cmd->callback([a] { bench(*a); });
}

}  // namespace coli
