// One timing harness for every backend's `coli test-ops --bench`, so that their figures compare: kBenchWarmup
// untimed calls, then kBenchRepeats runs of back-to-back calls between marks of the backend's clock (the
// device's own where it has one), and the median run. Calls queue as a decode step queues them.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <utility>
#include <vector>

#include "backend/bench_shapes.h"
#include "core/error.h"
#include "core/median.h"

namespace coli {

inline constexpr int kBenchWarmup = 5;        // untimed calls before timing
inline constexpr int kBenchRepeats = 21;      // timed runs; the median is reported
inline constexpr int kBenchCallsPerRun = 20;  // back-to-back calls per timed run

// How a backend times its device's work: marks between runs, read once the runs have completed.
class BenchClock {
public:
    virtual ~BenchClock() = default;
    // Before the first mark of a measurement (e.g. work that brings the device's clocks up).
    virtual void start() {}
    // The time at which the device has finished the commands queued so far.
    virtual void mark() = 0;
    // Waits for the marks since start() and gives them in milliseconds (any origin).
    virtual std::vector<double> marks_ms() = 0;
};

// The host's clock around the device's work: mark() waits for it (`finish`), so the times include the
// host's recording and submission of the calls.
class HostBenchClock final : public BenchClock {
public:
    explicit HostBenchClock(std::function<void()> finish) : finish_(std::move(finish)) {}
    void mark() override {
        finish_();
        marks_.push_back(std::chrono::duration<double, std::milli>(Clock::now().time_since_epoch()).count());
    }
    std::vector<double> marks_ms() override { return std::exchange(marks_, {}); }

private:
    using Clock = std::chrono::steady_clock;
    std::function<void()> finish_;
    std::vector<double> marks_;
};

// Milliseconds per call of f(i), i counting every call from 0: the median of kBenchRepeats runs of `calls`
// back-to-back calls, after kBenchWarmup untimed calls.
template <typename F>
double bench_ms(BenchClock& clock, F&& f, int calls = kBenchCallsPerRun) {
    int i = 0;
    for (int w = 0; w < kBenchWarmup; ++w) f(i++);
    clock.start();
    clock.mark();
    for (int r = 0; r < kBenchRepeats; ++r) {
        for (int c = 0; c < calls; ++c) f(i++);
        clock.mark();
    }
    const std::vector<double> t = clock.marks_ms();
    check(t.size() == kBenchRepeats + 1, "bench: {} clock marks for {} runs", t.size(), kBenchRepeats);
    std::vector<double> per_call(kBenchRepeats);
    for (int r = 0; r < kBenchRepeats; ++r) per_call[r] = (t[r + 1] - t[r]) / calls;
    return median(per_call);
}

// The decode GEMV table every backend prints: weight bytes / time per format and shape, beside the whole
// device-to-device copy and a copy of the same bytes.
inline void bench_gemv_table_begin() {
    fmt::print(
        "decode GEMV, n = 1 (weight bytes / time; bounds: the copy above, and a copy of the same bytes)\n");
    fmt::print("{:<16} {:>14} {:>10} {:>10} {:>9} {:>12} {:>9}\n", "format", "shape", "us", "GB/s", "of copy",
               "same-size", "of it");
}
inline void bench_gemv_table_row(Format f, const BenchShape& sh, double ms, double gbps, double copy_gbps,
                                 double same_gbps) {
    fmt::print("{:<16} {:>6}x{:<7} {:>10.1f} {:>10.0f} {:>8.0f}% {:>12.0f} {:>8.0f}%\n", format_name(f),
               sh.rows, sh.cols, ms * 1e3, gbps, 100.0 * gbps / copy_gbps, same_gbps,
               100.0 * gbps / same_gbps);
}

}  // namespace coli
