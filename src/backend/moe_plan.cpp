#include "backend/moe_plan.h"

#include <algorithm>

#include "core/error.h"

namespace coli {

namespace {

bool same_act(const GluActivation& a, const GluActivation& b) {
    return a.kind == b.kind && a.beta == b.beta && a.linear_beta == b.linear_beta;
}

}  // namespace

MoePlan moe_plan(std::span<const ExpertWeights> experts, const Routing& r, int64_t d_model) {
    MoePlan p;
    p.offset.assign(experts.size() + 1, 0);
    for (size_t i = 0; i < experts.size(); ++i) {
        const ExpertWeights& e = experts[i];
        check(e.gate.cols() == d_model && e.up.cols() == d_model && e.down.rows() == d_model &&
                  e.down.cols() == e.gate.rows() && e.up.rows() == e.gate.rows(),
              "moe_experts: expert {} has shapes that do not fit d_model {}", e.id, d_model);
        for (int64_t t = 0; t < r.n_tokens; ++t)
            for (int j = 0; j < r.k; ++j)
                if (r.experts[t * r.k + j] == e.id) {
                    p.rows.push_back(static_cast<int32_t>(t));
                    p.gains.push_back(r.weights[t * r.k + j]);
                }
        p.offset[i + 1] = p.total();
        if (p.rows_of(i) == 0) continue;
        p.used.push_back(i);
        p.max_rows = std::max(p.max_rows, p.rows_of(i));
        p.max_ff = std::max(p.max_ff, e.gate.rows());
    }
    return p;
}

MoeSlots moe_slots(const MoePlan& p, const Routing& r) {
    MoeSlots s{std::vector<int32_t>(r.n_tokens * r.k, -1), std::vector<float>(r.n_tokens * r.k, 0.0f)};
    std::vector<int> filled(r.n_tokens, 0);
    for (size_t i : p.used)
        for (int64_t j = p.offset[i]; j < p.offset[i + 1]; ++j) {
            const int32_t t = p.rows[j];
            const int64_t slot = t * r.k + filled[t]++;
            s.rows[slot] = static_cast<int32_t>(j);
            s.gains[slot] = p.gains[j];
        }
    return s;
}

bool moe_batchable(const MoePlan& p, std::span<const ExpertWeights> experts, const Routing& r,
                   const MoeBatchLimits& limits) {
    if (p.used.empty() || p.max_rows > limits.max_rows || r.k > limits.max_k) return false;
    const ExpertWeights& e0 = experts[p.used.front()];
    for (size_t i : p.used) {
        const ExpertWeights& e = experts[i];
        const bool fits = e.gate.rows() == e0.gate.rows() && same_act(e.act, e0.act) &&
                          e.gate.format() == e0.gate.format() && e.up.format() == e0.gate.format() &&
                          e.down.format() == e0.down.format() && limits.weight_fits(e.gate) &&
                          limits.weight_fits(e.up) && limits.weight_fits(e.down);
        if (!fits) return false;
    }
    return true;
}

}  // namespace coli
