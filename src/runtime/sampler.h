// Choosing the next token from logits: greedy, or temperature with top-k / top-p, seeded.
#pragma once

#include <cstdint>
#include <random>
#include <span>

namespace coli {

struct SamplerOptions {
    float temperature = 0;  // 0: greedy (argmax)
    int top_k = 0;          // keep the k most likely tokens; 0 = all
    float top_p = 1;        // keep the smallest set whose probability reaches top_p; 1 = all
    uint64_t seed = 0;      // same seed, same logits -> same tokens
};

class Sampler {
public:
    explicit Sampler(const SamplerOptions& opts);
    int32_t sample(std::span<const float> logits);  // logits: [vocab]

private:
    SamplerOptions opts_;
    std::mt19937_64 rng_;
};

// Index of the largest value; the lowest index among equals.
int32_t argmax(std::span<const float> v);

}  // namespace coli
