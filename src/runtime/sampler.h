// Choosing the next token from logits: greedy, or temperature with top-k / top-p, seeded.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

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

    // The distribution sample() draws from: the temperature, top-k and top-p applied, one-hot at the argmax
    // when greedy.                                                      logits: [vocab]; returns [vocab]
    std::vector<double> probabilities(std::span<const float> logits) const;
    int32_t draw(std::span<const double> p);  // an id drawn from p (weights of any scale, not all 0)
    double uniform();                         // in [0, 1)

private:
    // The candidates by descending logit (ties: lower id first) and their unnormalized weights, cut to
    // top-k, of which the first `keep` reach top-p.
    struct Candidates {
        std::vector<int32_t> ids;
        std::vector<double> weights;
        size_t keep = 0;
    };
    Candidates candidates(std::span<const float> logits) const;

    SamplerOptions opts_;
    std::mt19937_64 rng_;
};

// Index of the largest value; the lowest index among equals.
int32_t argmax(std::span<const float> v);

}  // namespace coli
