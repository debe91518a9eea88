// Weight-streaming speed of matmul per format, beside memcpy of the same byte count on the same threads
// (docs/design.md: a speed is reported beside its bound, measured in the same run).
//
//   coli_microbench --benchmark_filter='Decode|Memcpy|Read' --benchmark_repetitions=5
//                   --benchmark_report_aggregates_only=true
//
// Counter GBps = (weight data + scale bytes) / time, in 1e9 bytes per second; for Memcpy and Read it is the
// bytes copied / read. Each matrix is ~64 MiB (COLI_BENCH_MIB overrides it, for CPUs whose last-level cache
// is larger than that), so decode (n = 1) streams from DRAM; prefill (n > 1) reuses each weight tile for
// groups of 4 tokens. DecodeCached runs on ~512 KiB matrices that stay in L2: the kernels' compute ceiling.
#include "core/thread_pool.h"
#include "formats/format.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

namespace coli {
namespace {

constexpr int64_t kCols = 8192;                       // DRAM-sized matrices: [~64 MiB / row bytes, 8192]
constexpr int64_t kCachedCols = 1024;                 // L2-sized matrices: [~512 KiB / row bytes, 1024]
constexpr int64_t kDefaultMib = 64;                   // ~64 MiB of weights per matrix: streams from DRAM
constexpr int64_t kCachedBytes = int64_t{512} << 10;  // ~512 KiB: stays in L2, measures decode compute
constexpr int64_t kBaseRows = 128;                    // encoded once, then tiled (one fp8 scale block row)

constexpr Format kFormats[] = {Format::f32,      Format::bf16,  Format::f16,           Format::int8_row,
                               Format::int4_g64, Format::mxfp4, Format::fp8_e4m3_block};

// Bytes of the DRAM-sized matrices and of the memcpy / read buffers.
int64_t stream_bytes() {
    static const int64_t bytes = [] {
        const char* env = std::getenv("COLI_BENCH_MIB");
        const int64_t mib = env ? std::max<int64_t>(1, std::atoll(env)) : kDefaultMib;
        return mib << 20;
    }();
    return bytes;
}

// A weight of about `bytes` in format f: kBaseRows random rows encoded once and repeated (data and scales
// alike; kBaseRows is a whole fp8 128-row scale block), which is far quicker than encoding it all.
const EncodedWeight& weight_of(Format f, int64_t bytes, int64_t cols) {
    static std::vector<EncodedWeight> cache(2 * std::size(kFormats));
    const size_t slot =
        static_cast<size_t>(std::find(std::begin(kFormats), std::end(kFormats), f) - kFormats) +
        (bytes == kCachedBytes ? std::size(kFormats) : 0);
    EncodedWeight& e = cache[slot];
    if (!e.data.empty()) return e;

    std::mt19937 rng(42);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::vector<float> base_f32(kBaseRows * cols);
    for (auto& v : base_f32) v = normal(rng);
    const EncodedWeight base = weight_encode(f, base_f32.data(), kBaseRows, cols);

    const int64_t base_bytes = static_cast<int64_t>(base.data.size());
    const int64_t copies = std::max<int64_t>(1, bytes / base_bytes);
    e.format = f;
    e.rows = kBaseRows * copies;
    e.cols = cols;
    e.data.resize(base.data.size() * copies);
    e.scales.resize(base.scales.size() * copies);
    for (int64_t i = 0; i < copies; ++i) {
        std::memcpy(e.data.data() + i * base.data.size(), base.data.data(), base.data.size());
        if (!base.scales.empty())
            std::memcpy(e.scales.data() + i * base.scales.size(), base.scales.data(), base.scales.size());
    }
    return e;
}

double weight_bytes(const EncodedWeight& e) {
    return static_cast<double>(e.data.size() + e.scales.size());
}

// Args: format index, threads, tokens, simd level.
void matmul_run(benchmark::State& state, int64_t bytes, int64_t cols) {
    const Format f = kFormats[state.range(0)];
    const int threads = static_cast<int>(state.range(1));
    const int64_t n = state.range(2);
    const auto level = static_cast<Simd>(state.range(3));
    if (level > simd_detected()) {
        state.SkipWithError("this CPU lacks the instruction set");
        return;
    }
    const Simd saved = simd_active();
    simd_set(level);
    const EncodedWeight& e = weight_of(f, bytes, cols);
    ThreadPool pool(threads);
    std::vector<float> x(n * e.cols, 0.5f), y(n * e.rows);
    for (auto _ : state) {
        matmul(e.view(), x.data(), n, y.data(), pool);
        benchmark::DoNotOptimize(y.data());
        benchmark::ClobberMemory();
    }
    simd_set(saved);
    state.counters["GBps"] =
        benchmark::Counter(weight_bytes(e) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
    state.SetLabel(std::string(format_name(f)) + " " + std::string(simd_name(level)));
}

// Weights from DRAM: the number that matters for decode.
void BM_Decode(benchmark::State& state) {
    matmul_run(state, stream_bytes(), kCols);
}

// Weights from L2: how fast the kernel decodes when memory is not the limit (its compute ceiling).
void BM_DecodeCached(benchmark::State& state) {
    matmul_run(state, kCachedBytes, kCachedCols);
}

// memcpy of stream_bytes() split over the same number of threads.
void BM_Memcpy(benchmark::State& state) {
    const int threads = static_cast<int>(state.range(0));
    const auto bytes = static_cast<size_t>(stream_bytes());
    std::vector<uint8_t> src(bytes, 1), dst(bytes, 0);
    ThreadPool pool(threads);
    for (auto _ : state) {
        pool.parallel_for(threads, 1, [&](int64_t b, int64_t e) {
            for (int64_t t = b; t < e; ++t) {
                const size_t begin = bytes * t / threads, end = bytes * (t + 1) / threads;
                std::memcpy(dst.data() + begin, src.data() + begin, end - begin);
            }
        });
        benchmark::ClobberMemory();
    }
    state.counters["GBps"] =
        benchmark::Counter(static_cast<double>(bytes) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// A plain read of stream_bytes() (sum of 64-bit words) on the same threads: the read-only bound, for context.
void BM_Read(benchmark::State& state) {
    const int threads = static_cast<int>(state.range(0));
    const auto words = static_cast<size_t>(stream_bytes()) / sizeof(uint64_t);
    std::vector<uint64_t> src(words, 1);
    std::vector<uint64_t> sums(threads);
    ThreadPool pool(threads);
    for (auto _ : state) {
        pool.parallel_for(threads, 1, [&](int64_t b, int64_t e) {
            for (int64_t t = b; t < e; ++t) {
                const size_t begin = words * t / threads, end = words * (t + 1) / threads;
                sums[t] = std::accumulate(src.begin() + begin, src.begin() + end, uint64_t{0});
            }
        });
        benchmark::DoNotOptimize(sums.data());
    }
    state.counters["GBps"] = benchmark::Counter(static_cast<double>(words * sizeof(uint64_t)) / 1e9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

void decode_args(benchmark::internal::Benchmark* b) {
    for (int64_t fi = 0; fi < static_cast<int64_t>(std::size(kFormats)); ++fi) {
        for (const int64_t level : {static_cast<int64_t>(Simd::avx2), static_cast<int64_t>(Simd::avx512)})
            for (const int64_t threads : {1, 2}) b->Args({fi, threads, 1, level});
        b->Args({fi, 2, 16, static_cast<int64_t>(Simd::avx512)});  // prefill: 16 tokens
    }
    b->ArgNames({"format", "threads", "n", "simd"});
}

void cached_args(benchmark::internal::Benchmark* b) {
    for (int64_t fi = 0; fi < static_cast<int64_t>(std::size(kFormats)); ++fi)
        for (const int64_t level : {static_cast<int64_t>(Simd::avx2), static_cast<int64_t>(Simd::avx512)})
            b->Args({fi, 1, 1, level});
    b->ArgNames({"format", "threads", "n", "simd"});
}

BENCHMARK(BM_Memcpy)->Arg(1)->Arg(2)->ArgName("threads")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Read)->Arg(1)->Arg(2)->ArgName("threads")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Decode)->Apply(decode_args)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DecodeCached)->Apply(cached_args)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace coli
