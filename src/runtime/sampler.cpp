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

int32_t Sampler::sample(std::span<const float> logits) {
    if (opts_.temperature == 0) return argmax(logits);
    // Candidates by descending logit (ties: lower id first), cut to top-k.
    std::vector<int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    const size_t k = opts_.top_k > 0 ? std::min<size_t>(opts_.top_k, ids.size()) : ids.size();
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    ids.resize(k);
    // Softmax at the temperature, in double for a stable cumulative sum.
    std::vector<double> p(k);
    const double top = logits[ids[0]];
    double sum = 0;
    for (size_t i = 0; i < k; ++i) sum += p[i] = std::exp((logits[ids[i]] - top) / opts_.temperature);
    // Top-p: the shortest prefix whose mass reaches top_p.
    size_t keep = k;
    double mass = 0;
    for (size_t i = 0; i < k; ++i) {
        mass += p[i] / sum;
        if (mass >= opts_.top_p) {
            keep = i + 1;
            break;
        }
    }
    std::discrete_distribution<size_t> pick(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(keep));
    return ids[pick(rng_)];
}

}  // namespace coli
