// MLA on the CPU takes two routes to the same attention (docs/models.md 2.1, 2.2): a long prefill
// reconstructs each head's keys and values from the latents, a short call absorbs W_UK into each query.
// Feeding a prompt in one call must give what feeding it token by token gives.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/random.h"
#include "core/thread_pool.h"

namespace coli {
namespace {

TEST(MlaPrefill, ReconstructedKeysAndValuesEqualAbsorbedQueries) {
    ThreadPool pool(2);
    CpuBackend cpu(pool);
    constexpr int64_t kTokens = 300;  // past the expansion threshold
    const MlaShape s{2, 32, 16, 24, 64, 0.15f};
    const int64_t qw = int64_t{s.n_heads} * (s.nope_dim + s.rope_dim), ow = int64_t{s.n_heads} * s.v_dim;
    const std::vector<float> wv = random_normal(int64_t{s.n_heads} * (s.nope_dim + s.v_dim) * s.kv_lora, 1);
    const Weight w{
        WeightView{Format::f32, int64_t{s.n_heads} * (s.nope_dim + s.v_dim), s.kv_lora, wv.data(), nullptr},
        nullptr, nullptr};
    const std::vector<float> q = random_normal(kTokens * qw, 2),
                             latent = random_normal(kTokens * s.kv_lora, 3),
                             k_pe = random_normal(kTokens * s.rope_dim, 4);
    auto tensor = [&](int64_t rows, int64_t cols, const float* v) {
        Tensor t = cpu.tensor_new(rows, cols);
        cpu.tensor_write(t, std::span<const float>(v, rows * cols));
        return t;
    };
    auto cache = [&] {
        return KvCache{cpu.tensor_new(kTokens, s.kv_lora), cpu.tensor_new(kTokens, s.rope_dim)};
    };

    KvCache whole = cache();
    Tensor out = cpu.tensor_new(kTokens, ow);
    cpu.mla_attention(tensor(kTokens, qw, q.data()), tensor(kTokens, s.kv_lora, latent.data()),
                      tensor(kTokens, s.rope_dim, k_pe.data()), w, whole, s, 0, nullptr, out);
    std::vector<float> prefill(kTokens * ow);
    cpu.tensor_read(out, prefill);

    KvCache stepwise = cache();
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < kTokens; ++i) {
        Tensor o = cpu.tensor_new(1, ow);
        cpu.mla_attention(tensor(1, qw, &q[i * qw]), tensor(1, s.kv_lora, &latent[i * s.kv_lora]),
                          tensor(1, s.rope_dim, &k_pe[i * s.rope_dim]), w, stepwise, s, i, nullptr, o);
        std::vector<float> step(ow);
        cpu.tensor_read(o, step);
        for (int64_t j = 0; j < ow; ++j) {
            diff += std::pow(step[j] - prefill[i * ow + j], 2.0);
            norm += std::pow(step[j], 2.0);
        }
    }
    EXPECT_LE(std::sqrt(diff / norm), 2e-6);  // the same sums in another order
}

}  // namespace
}  // namespace coli
