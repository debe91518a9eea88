#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"

namespace coli {

int32_t argmax(std::span<const float> v) {
    return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

Sampler::Sampler(const SamplerOptions& opts) : opts_(opts), rng_(opts.seed) {
    check(opts.temperature >= 0, "--temperature must be >= 0, got {}", opts.temperature);
    check(opts.top_p > 0 && opts.top_p <= 1, "--top-p must be in (0, 1], got {}", opts.top_p);
    check(opts.top_k >= 0, "--top-k must be >= 0, got {}", opts.top_k);
}

Sampler::Candidates Sampler::candidates(std::span<const float> logits) const {
    Candidates c;
    c.ids.resize(logits.size());
    std::iota(c.ids.begin(), c.ids.end(), 0);
    const size_t k = opts_.top_k > 0 ? std::min<size_t>(opts_.top_k, c.ids.size()) : c.ids.size();
    std::partial_sort(c.ids.begin(), c.ids.begin() + k, c.ids.end(), [&](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    c.ids.resize(k);
    // Softmax at the temperature, in double for a stable cumulative sum.
    c.weights.resize(k);
    const double top = logits[c.ids[0]];
    double sum = 0;
    for (size_t i = 0; i < k; ++i)
        sum += c.weights[i] = std::exp((logits[c.ids[i]] - top) / opts_.temperature);
    // Top-p: the shortest prefix whose mass reaches top_p.
    c.keep = k;
    double mass = 0;
    for (size_t i = 0; i < k; ++i) {
        mass += c.weights[i] / sum;
        if (mass >= opts_.top_p) {
            c.keep = i + 1;
            break;
        }
    }
    return c;
}

int32_t Sampler::sample(std::span<const float> logits) {
    if (opts_.temperature == 0) return argmax(logits);
    const Candidates c = candidates(logits);
    std::discrete_distribution<size_t> pick(c.weights.begin(),
                                            c.weights.begin() + static_cast<std::ptrdiff_t>(c.keep));
    return c.ids[pick(rng_)];
}

std::vector<double> Sampler::probabilities(std::span<const float> logits) const {
    std::vector<double> p(logits.size(), 0.0);
    if (opts_.temperature == 0) {
        p[argmax(logits)] = 1;
        return p;
    }
    const Candidates c = candidates(logits);
    double sum = 0;
    for (size_t i = 0; i < c.keep; ++i) sum += c.weights[i];
    for (size_t i = 0; i < c.keep; ++i) p[c.ids[i]] = c.weights[i] / sum;
    return p;
}

int32_t Sampler::draw(std::span<const double> p) {
    std::discrete_distribution<int32_t> pick(p.begin(), p.end());
    return pick(rng_);
}

double Sampler::uniform() {
    return std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
}

}  // namespace coli
