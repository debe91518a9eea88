// What the tables of `coli bench-attention` share: the backend they time on, random operands, the median of
// timed runs and each figure's bound (the bytes the op must read at the backend's read rate). The tables:
// DeepSeek-V3 MLA, DSA and OLMoE's GQA (cmd_bench_attention.cpp), DeepSeek-V4 (bench_attention_v4.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "core/median.h"
#include "core/random.h"
#include "core/timer.h"
#include "formats/format.h"
#include "runtime/engine.h"  // kBytesPerGB

namespace coli {

constexpr double kMsPerSecond = 1e3;
// Untimed runs before timing, for at least this long: a GPU left idle while the host filled the caches
// (seconds at 32k) runs at a low clock until it has been busy for a while.
constexpr double kWarmupSeconds = 0.25;

struct AttentionBench {
    Backend& b;
    int reps;         // timed runs per figure (the median is reported)
    int64_t queries;  // query tokens at the end of each context: 1 is decode, more a prefill chunk
    double gbps;      // the bounds' read rate
    uint32_t seed;    // advanced by each random operand

    // [rows, cols] of N(0, 1) values on the backend.
    Tensor random(int64_t rows, int64_t cols) {
        Tensor t = b.tensor_new(rows, cols);
        b.tensor_write(t, random_normal(static_cast<size_t>(rows * cols), seed++));
        return t;
    }
    // A weight [rows, cols] of N(0, 1) values encoded as f, uploaded.
    Weight random_weight(Format f, int64_t rows, int64_t cols) {
        const std::vector<float> w = random_normal(static_cast<size_t>(rows * cols), seed++);
        auto encoded = std::make_shared<EncodedWeight>(weight_encode(f, w.data(), rows, cols));
        return b.weight_upload(Weight{encoded->view(), nullptr, encoded});
    }

    // Median seconds of reps runs of f, after kWarmupSeconds of untimed ones; each run ends by reading out
    // back, so device work is finished.
    template <typename F>
    double median_seconds(const Tensor& out, F&& f) {
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

    double bound_ms(double bytes) const { return bytes / (gbps * kBytesPerGB) * kMsPerSecond; }
};

// DeepSeek-V4-Flash's attention per layer kind and per token over its layers (bench_attention_v4.cpp).
void bench_attention_v4(AttentionBench& bench, const std::vector<int64_t>& contexts);

}  // namespace coli
