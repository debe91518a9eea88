// `coli test-ops` cases of the ops that linear-attention families add (Kimi): the short convolution and the
// delta rule with the state they carry (compared with the state written back), the output gate, attention
// residuals, and experts with the SiTU activation.
#include <fmt/format.h>

#include <cmath>
#include <tuple>

#include "backend/op_grid.h"

namespace coli::op_grid {

namespace {

// An f32 host weight [rows, cols] holding v.
Weight weight_f32(std::vector<float> v, int64_t rows, int64_t cols) {
    auto owned = std::make_shared<std::vector<float>>(std::move(v));
    return Weight{WeightView{Format::f32, rows, cols, owned->data(), nullptr}, nullptr, owned};
}

// out followed by the state the op left behind: a state the backend advanced wrongly fails too.
std::vector<float> with_state(std::vector<float> out, const std::vector<float>& state) {
    out.insert(out.end(), state.begin(), state.end());
    return out;
}
std::vector<float> with_state(Backend& b, const Tensor& out, const Tensor& state) {
    return with_state(tensor_host(b, out), tensor_host(b, state));
}

void short_conv_cases(CheckList& g) {
    uint32_t seed = 1400;
    for (auto [n, c, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 64, 4}, {7, 96, 4}, {3, 40, 2}}) {
        const Weight w = weight_f32(random_normal(c * k, ++seed, 0.5f), c, k);
        const Weight wb = g.backend().weight_upload(w);
        const std::vector<float> x = random_normal(n * c, ++seed), st = random_normal((k - 1) * c, ++seed);
        g.check_same(
            {.op = OpKind::short_conv, .n = n, .weight = &wb, .width = c, .taps = k},
            fmt::format("C={} K={} n={}", c, k, n), kOpTolRowReduce,
            [&](Backend& b) {
                Tensor state = tensor_on(b, k - 1, c, st), out = b.tensor_new_unfilled(n, c);
                b.short_conv(tensor_on(b, n, c, x), &b == &g.backend() ? wb : w, state, out);
                return with_state(b, out, state);
            },
            kRefTolF32,
            [&] {
                std::vector<float> state = st;
                return with_state(op_reference::short_conv(x, c, w.host, state), state);
            });
    }
}

void kda_cases(CheckList& g) {
    uint32_t seed = 1500;
    constexpr float kLowerBound = -5.0f;  // K3's gate
    // Every compiled head size, decode and prefill, both gate forms, a state carried in; prefills longer
    // than transformers' 64-token KDA chunk and not a multiple of it.
    for (auto [heads, dim, n, bound] : {std::tuple<int, int, int64_t, float>{2, 16, 1, 0.0f},
                                        {3, 32, 5, kLowerBound},
                                        {2, 64, 9, 0.0f},
                                        {1, 128, 3, kLowerBound},
                                        {2, 32, 150, kLowerBound},
                                        {1, 64, 130, 0.0f}}) {
        const int64_t width = int64_t{heads} * dim;
        std::vector<float> a_log(heads);
        for (float& a : a_log) a = std::log(1.0f + 15.0f * std::abs(random_normal(1, ++seed)[0]));
        const Weight a_w = weight_f32(a_log, 1, heads),
                     dt_w = weight_f32(random_normal(width, ++seed), 1, width);
        const Weight a_b = g.backend().weight_upload(a_w), dt_b = g.backend().weight_upload(dt_w);
        const std::vector<float> q = random_normal(n * width, ++seed), k = random_normal(n * width, ++seed),
                                 v = random_normal(n * width, ++seed),
                                 gate = random_normal(n * width, ++seed),
                                 beta = random_normal(n * heads, ++seed),
                                 st = random_normal(width * dim, ++seed, 0.1f);
        const KdaShape shape{heads, dim, bound};
        g.check_same(
            {.op = OpKind::kda, .n = n, .heads = heads, .head_dim = dim},
            fmt::format("H={} d={} n={} bound={}", heads, dim, n, bound), kOpTolDot,
            [&](Backend& b) {
                const bool native = &b == &g.backend();
                Tensor state = tensor_on(b, width, dim, st), out = b.tensor_new_unfilled(n, width);
                b.kda(tensor_on(b, n, width, q), tensor_on(b, n, width, k), tensor_on(b, n, width, v),
                      tensor_on(b, n, width, gate), tensor_on(b, n, heads, beta), native ? a_b : a_w,
                      native ? dt_b : dt_w, shape, state, out);
                return with_state(b, out, state);
            },
            kRefTolDot,
            [&] {
                std::vector<float> state = st;
                return with_state(op_reference::kda(q, k, v, gate, beta, a_w.host, dt_w.host, shape, state),
                                  state);
            });
    }
}

void mul_sigmoid_cases(CheckList& g) {
    uint32_t seed = 1600;
    for (auto [n, d] : {std::pair<int64_t, int64_t>{1, 128}, {5, 100}}) {
        const std::vector<float> a = random_normal(n * d, ++seed), x = random_normal(n * d, ++seed, 4.0f);
        g.check_same(
            {.op = OpKind::mul_sigmoid, .n = n, .width = d}, fmt::format("[{}x{}]", n, d), kOpTolRowReduce,
            [&](Backend& b) {
                Tensor out = b.tensor_new_unfilled(n, d);
                b.mul_sigmoid(tensor_on(b, n, d, a), tensor_on(b, n, d, x), out);
                return tensor_host(b, out);
            },
            kRefTolF32, [&] { return op_reference::mul_sigmoid(a, x); });
    }
}

void res_mix_cases(CheckList& g) {
    uint32_t seed = 1700;
    for (auto [m, n, d] : {std::tuple<int, int64_t, int64_t>{1, 2, 64}, {3, 1, 128}, {9, 4, 96}}) {
        const Weight w = weight_f32(random_normal(d, ++seed), 1, d);
        const Weight wb = g.backend().weight_upload(w);
        std::vector<std::vector<float>> entries;
        for (int e = 0; e < m; ++e) entries.push_back(random_normal(n * d, ++seed, 1.0f + e));
        g.check_same(
            {.op = OpKind::res_mix, .n = n, .weight = &wb, .width = d, .entries = m},
            fmt::format("m={} n={} d={}", m, n, d), kOpTolDot,
            [&](Backend& b) {
                std::vector<Tensor> on_b;
                for (const auto& e : entries) on_b.push_back(tensor_on(b, n, d, e));
                Tensor out = b.tensor_new_unfilled(n, d);
                b.res_mix(on_b, &b == &g.backend() ? wb : w, 1e-5f, out);
                return tensor_host(b, out);
            },
            kRefTolDot, [&] { return op_reference::res_mix(entries, d, w.host, 1e-5f); });
    }
}

void situ_expert_cases(CheckList& g) {
    glu_expert_cases(g, {GluKind::situ, 4.0f, 25.0f}, "SiTU", 1800, 100);  // K3's betas
}

}  // namespace

void glu_expert_cases(CheckList& g, const GluActivation& act, std::string_view label, uint32_t seed,
                      int32_t layer_base) {
    const int64_t d_model = 64, d_ff = 32;
    const int n_experts = 4, k = 2;
    for (Format f : {Format::f32, Format::mxfp4}) {
        const int32_t layer =
            layer_base + static_cast<int32_t>(f);  // (layer, id) names the expert for device tiers
        std::vector<ExpertWeights> experts;
        for (int e = 0; e < n_experts; ++e)
            experts.push_back({e, weight_random(f, d_ff, d_model, ++seed),
                               weight_random(f, d_ff, d_model, ++seed),
                               weight_random(f, d_model, d_ff, ++seed), layer, act});
        for (int64_t n : {1, 6}) {
            const std::vector<float> x = random_normal(n * d_model, ++seed, 3.0f);
            const Routing r = g.reference().route_softmax_topk(
                tensor_on(g.reference(), n, n_experts, random_normal(n * n_experts, ++seed)), k, true);
            const Weight& gate = experts.front().gate;
            const OpDesc d{.op = OpKind::moe_experts,
                           .n = n,
                           .format = f,
                           .rows = gate.rows(),
                           .cols = gate.cols(),
                           .weight = &gate,
                           .glu = act.kind};
            g.check_same(
                d, fmt::format("{} E={} k={} n={}", label, n_experts, k, n), kOpTolDot,
                [&](Backend& b) {
                    Tensor y = b.tensor_new(n, d_model);
                    b.moe_experts(experts, r, tensor_on(b, n, d_model, x), y);
                    return tensor_host(b, y);
                },
                kRefTolDot,
                [&] { return op_reference::moe_experts(experts, r, x, std::vector<float>(n * d_model)); });
        }
    }
}

void recurrent_cases(CheckList& g) {
    short_conv_cases(g);
    kda_cases(g);
    mul_sigmoid_cases(g);
    res_mix_cases(g);
    situ_expert_cases(g);
}

}  // namespace coli::op_grid
