#include "runtime/speculative.h"

#include <algorithm>
#include <vector>

#include "core/error.h"

namespace coli {

DraftVerdict draft_verdict(std::span<const double> p, std::span<const double> q, int32_t d,
                           Sampler& sampler) {
    check(p.size() == q.size() && d >= 0 && static_cast<size_t>(d) < p.size(),
          "draft_verdict: draft {} over distributions of {} and {}", d, p.size(), q.size());
    // q(d) > 0: d was drawn from q. A ratio of 1 or more keeps d without a draw (always, when greedy).
    if (p[d] >= q[d] || sampler.uniform() * q[d] < p[d]) return {true, d};
    std::vector<double> residual(p.size());
    for (size_t i = 0; i < p.size(); ++i) residual[i] = std::max(p[i] - q[i], 0.0);
    // p(d) < q(d) and both sum to 1, so the residual has mass somewhere.
    return {false, sampler.draw(residual)};
}

DraftCheck draft_check(std::span<const float> after_x, std::span<const float> after_d,
                       std::span<const double> q, int32_t d, Sampler& sampler) {
    const DraftVerdict v = draft_verdict(sampler.probabilities(after_x), q, d, sampler);
    if (!v.accepted) return {false, {v.token}};
    return {true, {d, sampler.sample(after_d)}};
}

bool draft_check_take(const DraftCheck& c, ModelState& state, const std::function<bool(int32_t)>& take) {
    int64_t taken = 0;
    bool go_on = true;
    for (const int32_t t : c.tokens) {
        ++taken;
        if (!(go_on = take(t))) break;
    }
    state.n_past -= 2 - taken;
    return go_on;
}

}  // namespace coli
