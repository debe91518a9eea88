// KDA on the CPU prefills by chunks of 64 tokens and decodes with the token recurrence (docs/models.md 5.1).
// Feeding a prompt in one call must give the outputs and the state that feeding it token by token gives.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/random.h"
#include "core/thread_pool.h"

namespace coli {
namespace {

struct KdaCase {
    int heads, dim;
    int64_t tokens;
    float gate_lower_bound;  // 0: Kimi Linear's softplus gate; < 0: K3's bounded one
    float a_log;             // larger: stronger decay (the softplus gate's decays then underflow to 0)
};

class KdaChunk : public testing::TestWithParam<KdaCase> {};

// sqrt(sum (got - want)^2 / sum want^2)
double normalized_error(const std::vector<float>& got, const std::vector<float>& want) {
    double diff = 0, norm = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        diff += std::pow(double{got[i]} - want[i], 2.0);
        norm += std::pow(double{want[i]}, 2.0);
    }
    return std::sqrt(diff / norm);
}

TEST_P(KdaChunk, PrefillEqualsTokenRecurrence) {
    const KdaCase c = GetParam();
    ThreadPool pool(2);
    CpuBackend cpu(pool);
    const int64_t n = c.tokens, width = int64_t{c.heads} * c.dim;
    const std::vector<float> a_log(c.heads, c.a_log), dt = random_normal(width, 1);
    const Weight a_w{WeightView{Format::f32, 1, c.heads, a_log.data(), nullptr}, nullptr, nullptr},
        dt_w{WeightView{Format::f32, 1, width, dt.data(), nullptr}, nullptr, nullptr};
    const std::vector<float> q = random_normal(n * width, 2), k = random_normal(n * width, 3),
                             v = random_normal(n * width, 4), g = random_normal(n * width, 5),
                             beta = random_normal(n * c.heads, 6), st = random_normal(width * c.dim, 7, 0.1f);
    const KdaShape shape{c.heads, c.dim, c.gate_lower_bound};
    auto tensor = [&](int64_t rows, int64_t cols, const float* x) {
        Tensor t = cpu.tensor_new(rows, cols);
        cpu.tensor_write(t, std::span<const float>(x, rows * cols));
        return t;
    };
    // Tokens [t, t + m) from state, their outputs appended to outs.
    auto run = [&](Tensor& state, int64_t t, int64_t m, std::vector<float>& outs) {
        Tensor out = cpu.tensor_new(m, width);
        cpu.kda(tensor(m, width, &q[t * width]), tensor(m, width, &k[t * width]),
                tensor(m, width, &v[t * width]), tensor(m, width, &g[t * width]),
                tensor(m, c.heads, &beta[t * c.heads]), a_w, dt_w, shape, state, out);
        std::vector<float> o(m * width);
        cpu.tensor_read(out, o);
        outs.insert(outs.end(), o.begin(), o.end());
    };
    auto with_state = [&](std::vector<float> outs, const Tensor& state) {
        std::vector<float> s(width * c.dim);
        cpu.tensor_read(state, s);
        outs.insert(outs.end(), s.begin(), s.end());
        return outs;
    };

    Tensor chunked_state = tensor(width, c.dim, st.data());
    std::vector<float> chunked;
    run(chunked_state, 0, n, chunked);
    Tensor step_state = tensor(width, c.dim, st.data());
    std::vector<float> stepwise;
    for (int64_t t = 0; t < n; ++t) run(step_state, t, 1, stepwise);
    // The same products summed in another order, the decays as products of alphas instead of one by one.
    EXPECT_LE(normalized_error(with_state(chunked, chunked_state), with_state(stepwise, step_state)), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, KdaChunk,
    testing::Values(KdaCase{2, 128, 150, -5.0f, 1.0f},  // K3's head size and gate, two chunks and a short one
                    KdaCase{3, 64, 130, 0.0f, 0.5f},    // Kimi Linear's gate
                    KdaCase{1, 40, 70, 0.0f, 4.0f},     // a head dim off the vector width; decays to 0
                    KdaCase{2, 32, 64, -5.0f, 3.0f},    // exactly one chunk
                    KdaCase{1, 16, 2, 0.0f, 0.0f}));    // the shortest prefill

}  // namespace
}  // namespace coli
