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

// Tokens [t, t + m) of p through cpu.kda.
void kda_tokens(CpuBackend& cpu, const KdaPrompt& p, int64_t t, int64_t m, Tensor& state) {
    const Weight a_w{WeightView{Format::f32, 1, kHeads, p.a_log.data(), nullptr}, nullptr, nullptr},
        dt_w{WeightView{Format::f32, 1, kWidth, p.dt.data(), nullptr}, nullptr, nullptr};
    auto tensor = [&](const std::vector<float>& x, int64_t cols) {
        Tensor r = cpu.tensor_new(m, cols);
        cpu.tensor_write(r, std::span<const float>(&x[t * cols], m * cols));
        return r;
    };
    Tensor out = cpu.tensor_new(m, kWidth);
    cpu.kda(tensor(p.q, kWidth), tensor(p.k, kWidth), tensor(p.v, kWidth), tensor(p.g, kWidth),
            tensor(p.beta, kHeads), a_w, dt_w, KdaShape{kHeads, kDim, kGateLowerBound}, state, out);
}

void BM_KdaPrefill(benchmark::State& bs, bool chunked) {
    ThreadPool pool;
    CpuBackend cpu(pool);
    const KdaPrompt p(bs.range(0));
    const std::vector<float> zeros(kWidth * kDim);
    for (auto _ : bs) {
        bs.PauseTiming();
        Tensor state = cpu.tensor_new(kWidth, kDim);
        cpu.tensor_write(state, zeros);
        bs.ResumeTiming();
        if (chunked)
            kda_tokens(cpu, p, 0, p.n, state);
        else
            for (int64_t t = 0; t < p.n; ++t) kda_tokens(cpu, p, t, 1, state);
    }
    bs.counters["tok/s"] =
        benchmark::Counter(static_cast<double>(p.n), benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK_CAPTURE(BM_KdaPrefill, chunked, true)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_KdaPrefill, token, false)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace coli
