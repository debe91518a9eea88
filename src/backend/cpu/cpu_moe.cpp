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
    // Reused across calls: at prefill they are megabytes, and fresh ones would be zeroed and faulted in.
    std::vector<float>& xs = moe_scratch_.xs;      // [total, d_model]  routed rows of x, by expert
    std::vector<float>& gate = moe_scratch_.gate;  // [sum m d_ff]      then the activation
    std::vector<float>& up = moe_scratch_.up;      // [sum m d_ff]
    std::vector<float>& out = moe_scratch_.out;    // [total, d_model]
    for (auto* v : {&xs, &out})
        if (v->size() < size_t(p.total() * d_model)) v->resize(p.total() * d_model);
    for (auto* v : {&gate, &up})
        if (v->size() < size_t(hidden.back())) v->resize(hidden.back());
    for (int64_t j = 0; j < p.total(); ++j) std::copy_n(row(x, p.rows[j]), d_model, &xs[j * d_model]);

    // Every used expert's gate and up in one loop over the pool, then the downs in another.
    std::vector<MatmulTask> tasks;
    for (size_t i : p.used) {
        const float* xi = &xs[p.offset[i] * d_model];
        tasks.push_back({experts[i].gate.host, xi, p.rows_of(i), &gate[hidden[i]]});  // [m, d_ff]
        tasks.push_back({experts[i].up.host, xi, p.rows_of(i), &up[hidden[i]]});      // [m, d_ff]
    }
    matmul_batch(tasks.data(), tasks.size(), pool_);
    tasks.clear();
    for (size_t i : p.used) {
        const GluActivation& act = experts[i].act;
        for (int64_t j = hidden[i]; j < hidden[i + 1]; ++j)
            gate[j] = glu(act.kind, act.beta, act.linear_beta, gate[j], up[j]);
        tasks.push_back({experts[i].down.host, &gate[hidden[i]], p.rows_of(i), &out[p.offset[i] * d_model]});
    }
    matmul_batch(tasks.data(), tasks.size(), pool_);  // [m, d_model] each

    // Added in span order, as every backend's combine does.
    for (size_t i : p.used)
        for (int64_t j = p.offset[i]; j < p.offset[i + 1]; ++j) {
            float* yt = row(y, p.rows[j]);
            for (int64_t c = 0; c < d_model; ++c) yt[c] += out[j * d_model + c] * p.gains[j];
        }
}

}  // namespace coli
