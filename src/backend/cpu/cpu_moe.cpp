// Routers and routed experts on the CPU.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/activations.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_tensor.h"
#include "backend/moe_plan.h"
#include "core/thread_pool.h"

namespace coli {

using cpu::check_shape;
using cpu::data;
using cpu::row;

namespace {

// Rows (or tokens) per task of the copy and combine loops at least: a decode step's few rows are faster on
// one thread than handed out.
constexpr int64_t kMoeMinRowsPerTask = 16;

}  // namespace

Routing CpuBackend::route_softmax_topk(const Tensor& logits, int k, bool renormalize) {
    const int64_t n = logits.rows(), n_experts = logits.cols();
    check(k > 0 && k <= n_experts, "route_softmax_topk: k = {} of {} experts", k, n_experts);
    Routing r{n, k, std::vector<int32_t>(n * k), std::vector<float>(n * k)};
    std::vector<float> p(n_experts);
    std::vector<int32_t> order(n_experts);
    for (int64_t t = 0; t < n; ++t) {
        const float* l = row(logits, t);
        const float max_l = *std::max_element(l, l + n_experts);
        float sum = 0;
        for (int64_t e = 0; e < n_experts; ++e) sum += p[e] = std::exp(l[e] - max_l);
        for (auto& v : p) v /= sum;
        std::iota(order.begin(), order.end(), 0);
        // Highest probability first; ties go to the lower expert id so the choice is deterministic.
        std::partial_sort(order.begin(), order.begin() + k, order.end(),
                          [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
        float kept = 0;
        for (int j = 0; j < k; ++j) kept += p[order[j]];
        for (int j = 0; j < k; ++j) {
            r.experts[t * k + j] = order[j];
            r.weights[t * k + j] = renormalize ? p[order[j]] / kept : p[order[j]];
        }
    }
    return r;
}

Routing CpuBackend::route_sigmoid_topk(const Tensor& logits, const Weight& bias, const SigmoidRouting& p,
                                       std::span<const int32_t> fixed) {
    return route_sigmoid_host(logits.rows(), logits.cols(),
                              std::span<const float>(data(logits), logits.numel()), bias, p, fixed);
}

void CpuBackend::moe_experts(std::span<const ExpertWeights> experts, const Routing& r, const Tensor& x,
                             Tensor& y) {
    const int64_t d_model = x.cols();
    check_shape(y, x.rows(), d_model, "moe_experts y");
    check(r.n_tokens == x.rows(), "moe_experts: routing for {} tokens, x has {}", r.n_tokens, x.rows());
    const MoePlan p = moe_plan(experts, r, d_model);
    // Expert i's routed rows are rows [offset[i], offset[i + 1]) of xs and out; its hidden values are
    // [hidden[i], hidden[i + 1]) of gate and up (experts may differ in d_ff).
    std::vector<int64_t> hidden(experts.size() + 1, 0);
    for (size_t i = 0; i < experts.size(); ++i)
        hidden[i + 1] = hidden[i] + p.rows_of(i) * (p.rows_of(i) ? experts[i].gate.rows() : 0);
    float* xs =
        scratch(moe_scratch_.xs, p.total() * d_model);        // [total, d_model]  routed rows of x, by expert
    float* gate = scratch(moe_scratch_.gate, hidden.back());  // [sum m d_ff]      then the activation
    float* up = scratch(moe_scratch_.up, hidden.back());      // [sum m d_ff]
    float* out = scratch(moe_scratch_.out, p.total() * d_model);  // [total, d_model]
    // The loops between the matmuls run on the pool too: at prefill they move tens of megabytes per layer.
    pool_.parallel_for(p.total(), kMoeMinRowsPerTask, [&](int64_t j0, int64_t j1) {
        for (int64_t j = j0; j < j1; ++j) std::copy_n(row(x, p.rows[j]), d_model, &xs[j * d_model]);
    });

    // Every used expert's gate and up in one loop over the pool, then the downs in another.
    std::vector<MatmulTask> tasks;
    for (size_t i : p.used) {
        const float* xi = &xs[p.offset[i] * d_model];
        tasks.push_back({experts[i].gate.host, xi, p.rows_of(i), &gate[hidden[i]]});  // [m, d_ff]
        tasks.push_back({experts[i].up.host, xi, p.rows_of(i), &up[hidden[i]]});      // [m, d_ff]
    }
    matmul_batch(tasks.data(), tasks.size(), pool_);
    tasks.clear();
    // In tasks of kMoeMinRowsPerTask routed rows at least, on average.
    const auto used = static_cast<int64_t>(p.used.size());
    const int64_t experts_per_task =
        std::max<int64_t>(1, kMoeMinRowsPerTask * used / std::max<int64_t>(1, p.total()));
    pool_.parallel_for(used, experts_per_task, [&](int64_t u0, int64_t u1) {
        for (int64_t u = u0; u < u1; ++u) {
            const size_t i = p.used[u];
            const GluActivation& act = experts[i].act;
            for (int64_t j = hidden[i]; j < hidden[i + 1]; ++j)
                gate[j] = glu(act.kind, act.beta, act.linear_beta, gate[j], up[j]);
        }
    });
    for (size_t i : p.used)
        tasks.push_back({experts[i].down.host, &gate[hidden[i]], p.rows_of(i), &out[p.offset[i] * d_model]});
    matmul_batch(tasks.data(), tasks.size(), pool_);  // [m, d_model] each

    // Each token's rows added in span order, as every backend's combine does; tokens split over the pool.
    const MoeSlots slots = moe_slots(p, r);
    pool_.parallel_for(r.n_tokens, kMoeMinRowsPerTask, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            float* yt = row(y, t);
            for (int k = 0; k < r.k; ++k) {
                const int32_t j = slots.rows[t * r.k + k];
                if (j < 0) continue;
                const float gain = slots.gains[t * r.k + k];
                for (int64_t c = 0; c < d_model; ++c) yt[c] += out[j * d_model + c] * gain;
            }
        }
    });
}

}  // namespace coli
