// Wall-clock timing for statistics and benchmarks (never for test assertions).
#pragma once

#include <chrono>

namespace coli {

class Timer {
public:
    Timer() : start_(clock::now()) {}
    double seconds() const { return std::chrono::duration<double>(clock::now() - start_).count(); }
    void reset() { start_ = clock::now(); }

private:
    using clock = std::chrono::steady_clock;
    clock::time_point start_;
};

}  // namespace coli
