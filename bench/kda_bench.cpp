// KDA prefill on the CPU backend at Kimi K3's sizes (96 heads of 128, the bounded gate): one call of n tokens
// (by chunks of 64) against n calls of one token (the token recurrence that decode runs). Reported, never
// asserted.
//
//   coli_microbench --benchmark_filter=Kda --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include "backend/cpu/cpu_backend.h"
#include "core/random.h"
#include "core/thread_pool.h"

#include <benchmark/benchmark.h>

#include <span>
#include <vector>

namespace coli {
namespace {

constexpr int kHeads = 96, kDim = 128;  // Kimi K3
constexpr int64_t kWidth = int64_t{kHeads} * kDim;
constexpr float kGateLowerBound = -5.0f;

// A prompt of n tokens for one KDA layer, its weights, and a fresh state per run.
struct KdaPrompt {
    explicit KdaPrompt(int64_t n)
        : n(n),
          q(random_normal(n * kWidth, 1)),
          k(random_normal(n * kWidth, 2)),
          v(random_normal(n * kWidth, 3)),
          g(random_normal(n * kWidth, 4)),
          beta(random_normal(n * kHeads, 5)),
          a_log(kHeads, 0.5f),
          dt(random_normal(kWidth, 6)) {}
    int64_t n;
    std::vector<float> q, k, v, g, beta, a_log, dt;
};

// The inputs of tokens [t, t + m) of p as tensors, made ahead of the timed calls.
struct KdaCall {
    Tensor q, k, v, g, beta, out;
};

KdaCall kda_call(CpuBackend& cpu, const KdaPrompt& p, int64_t t, int64_t m) {
    auto tensor = [&](const std::vector<float>& x, int64_t cols) {
        Tensor r = cpu.tensor_new(m, cols);
        cpu.tensor_write(r, std::span<const float>(&x[t * cols], m * cols));
        return r;
    };
    return {tensor(p.q, kWidth), tensor(p.k, kWidth),    tensor(p.v, kWidth),
            tensor(p.g, kWidth), tensor(p.beta, kHeads), cpu.tensor_new(m, kWidth)};
}

// The prompt in one call (chunked) or in one call per token (the recurrence).
void BM_KdaPrefill(benchmark::State& bs, bool chunked) {
    ThreadPool pool;
    CpuBackend cpu(pool);
    const KdaPrompt p(bs.range(0));
    const Weight a_w{WeightView{Format::f32, 1, kHeads, p.a_log.data(), nullptr}, nullptr, nullptr},
        dt_w{WeightView{Format::f32, 1, kWidth, p.dt.data(), nullptr}, nullptr, nullptr};
    std::vector<KdaCall> calls;
    if (chunked)
        calls.push_back(kda_call(cpu, p, 0, p.n));
    else
        for (int64_t t = 0; t < p.n; ++t) calls.push_back(kda_call(cpu, p, t, 1));
    const std::vector<float> zeros(kWidth * kDim);
    Tensor state = cpu.tensor_new(kWidth, kDim);
    for (auto _ : bs) {
        bs.PauseTiming();
        cpu.tensor_write(state, zeros);
        bs.ResumeTiming();
        for (KdaCall& c : calls)
            cpu.kda(c.q, c.k, c.v, c.g, c.beta, a_w, dt_w, KdaShape{kHeads, kDim, kGateLowerBound}, state,
                    c.out);
    }
    bs.counters["tok/s"] =
        benchmark::Counter(static_cast<double>(p.n), benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK_CAPTURE(BM_KdaPrefill, chunked, true)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_KdaPrefill, token, false)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace coli
