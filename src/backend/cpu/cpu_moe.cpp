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
    for (size_t i : p.used) {
        const ExpertWeights& e = experts[i];
        // The expert's routed rows of x: xs [m, d_model].
        const int64_t m = p.rows_of(i), d_ff = e.gate.rows();
        const int32_t* tokens = &p.rows[p.offset[i]];
        const float* gains = &p.gains[p.offset[i]];
        std::vector<float> xs(m * d_model), gate(m * d_ff), up(m * d_ff), out(m * d_model);
        for (int64_t j = 0; j < m; ++j) std::copy_n(row(x, tokens[j]), d_model, &xs[j * d_model]);
        coli::matmul(e.gate.host, xs.data(), m, gate.data(), pool_);  // [m, d_ff]
        coli::matmul(e.up.host, xs.data(), m, up.data(), pool_);      // [m, d_ff]
        for (int64_t j = 0; j < m * d_ff; ++j)
            gate[j] = glu(e.act.kind, e.act.beta, e.act.linear_beta, gate[j], up[j]);
        coli::matmul(e.down.host, gate.data(), m, out.data(), pool_);  // [m, d_model]
        for (int64_t j = 0; j < m; ++j) {
            float* yt = row(y, tokens[j]);
            for (int64_t c = 0; c < d_model; ++c) yt[c] += out[j * d_model + c] * gains[j];
        }
    }
}

}  // namespace coli
