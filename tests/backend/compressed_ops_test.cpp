// The compressed-attention ops over a sequence, as a model calls them (DeepSeek-V4): token by token or in
// chunks, with copy_rows carrying the state and the ring between calls, they must give what one call over
// the whole sequence gives (test-ops checks single calls against the definitions; this checks that the
// state contract composes). And Sinkhorn's comb is doubly stochastic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/ops.h"
#include "core/random.h"
#include "core/thread_pool.h"

namespace coli {
namespace {

Weight weight_of(const std::vector<float>& v, int64_t rows, int64_t cols) {
    return Weight{WeightView{Format::f32, rows, cols, v.data(), nullptr}, nullptr, nullptr};
}

// Rows [r0, r0 + count) of a host matrix of `cols` columns, as a tensor.
Tensor rows_of(Ops& ops, const std::vector<float>& m, int64_t cols, int64_t r0, int64_t count) {
    return ops.tensor_from(count, cols, std::span<const float>(m).subspan(r0 * cols, count * cols));
}

// compress_kv over a sequence in chunks of `chunk` positions (the state appended after each call), the
// entries of every closed window in order.
std::vector<float> compress_in_chunks(Ops& ops, const std::vector<float>& kv, const std::vector<float>& gate,
                                      const Weight& ape, const CompressShape& s, int64_t length,
                                      int64_t chunk) {
    const int64_t width = int64_t{s.series} * s.head_dim, slots = int64_t{s.series} * s.ratio;
    Tensor state_kv = ops.tensor(slots, width), state_gate = ops.tensor(slots, width);
    std::vector<float> entries;
    for (int64_t pos0 = 0; pos0 < length; pos0 += chunk) {
        const int64_t n = std::min(chunk, length - pos0);
        const Tensor k = rows_of(ops, kv, width, pos0, n), g = rows_of(ops, gate, width, pos0, n);
        if (windows_closing(pos0, n, s.ratio) >= 1) {
            const std::vector<float> out =
                ops.read(ops.compress_kv(k, g, ape, state_kv, state_gate, s, pos0));
            entries.insert(entries.end(), out.begin(), out.end());
        }
        ops.copy_rows(state_kv, k, pos0);  // row = position mod (series ratio)
        ops.copy_rows(state_gate, g, pos0);
    }
    return entries;
}

TEST(CompressKv, TokenByTokenAndChunksEqualOneCall) {
    ThreadPool pool(2);
    CpuBackend cpu(pool);
    Ops ops(cpu, cpu);
    const int64_t length = 37, hd = 16;
    for (int series : {1, 2}) {
        const CompressShape s{4, static_cast<int>(hd), series};
        const int64_t width = series * hd;
        const std::vector<float> kv = random_normal(length * width, 1),
                                 gate = random_normal(length * width, 2),
                                 ape_v = random_normal(s.ratio * width, 3);
        const Weight ape = weight_of(ape_v, s.ratio, width);
        const std::vector<float> whole = compress_in_chunks(ops, kv, gate, ape, s, length, length);
        ASSERT_EQ(whole.size(), static_cast<size_t>(length / s.ratio * hd));
        for (int64_t chunk : {1, 3, 5, 8})  // chunks that start and end mid-window
            EXPECT_EQ(compress_in_chunks(ops, kv, gate, ape, s, length, chunk), whole)
                << "series " << series << ", chunks of " << chunk;
    }
}

// compressed_attention over a sequence in chunks, the ring (window rows, shorter than the sequence) appended
// after each call; entries are given (written ahead for the whole sequence: each query reads only those
// whose window has closed).
std::vector<float> attend_in_chunks(Ops& ops, const std::vector<float>& q, const std::vector<float>& kv,
                                    const Tensor& entries, const Weight& sinks,
                                    const CompressedAttentionShape& s, int64_t length, int64_t chunk) {
    const int64_t hd = s.head_dim, qw = int64_t{s.n_heads} * hd;
    Tensor ring = ops.tensor(s.window, hd);
    std::vector<float> out;
    for (int64_t pos0 = 0; pos0 < length; pos0 += chunk) {
        const int64_t n = std::min(chunk, length - pos0);
        const Tensor k = rows_of(ops, kv, hd, pos0, n);
        const std::vector<float> o = ops.read(ops.compressed_attention(rows_of(ops, q, qw, pos0, n), k, ring,
                                                                       entries, nullptr, sinks, s, pos0));
        out.insert(out.end(), o.begin(), o.end());
        ops.copy_rows(ring, k, pos0);
    }
    return out;
}

TEST(CompressedAttention, SplitPrefillAndDecodeEqualOneCall) {
    ThreadPool pool(2);
    CpuBackend cpu(pool);
    Ops ops(cpu, cpu);
    const int64_t length = 30, hd = 16;
    const int heads = 2;
    for (int ratio : {0, 4}) {
        const CompressedAttentionShape s{heads, static_cast<int>(hd), 8, ratio, 0.25f};
        const std::vector<float> q = random_normal(length * heads * hd, 4),
                                 kv = random_normal(length * hd, 5), sink_v = random_normal(heads, 6);
        const Weight sinks = weight_of(sink_v, 1, heads);
        const Tensor entries =
            ratio > 0 ? ops.tensor_from(length / ratio, hd, random_normal(length / ratio * hd, 7)) : Tensor{};
        const std::vector<float> whole = attend_in_chunks(ops, q, kv, entries, sinks, s, length, length);
        for (int64_t chunk : {1, 7, 13}) {
            const std::vector<float> split = attend_in_chunks(ops, q, kv, entries, sinks, s, length, chunk);
            ASSERT_EQ(split.size(), whole.size());
            for (size_t i = 0; i < whole.size(); ++i)
                ASSERT_NEAR(split[i], whole[i], 1e-6)
                    << "ratio " << ratio << ", chunks of " << chunk << ", at " << i;
        }
    }
}

TEST(HcWeights, SinkhornMakesCombDoublyStochastic) {
    ThreadPool pool(1);
    CpuBackend cpu(pool);
    Ops ops(cpu, cpu);
    // Each round brings the row sums closer to 1; the columns are normalized last, so they are 1 to rounding.
    constexpr int kIters = 50;
    const int streams = 4, n = 3;
    const int64_t cols = int64_t{2 + streams} * streams;
    const std::vector<float> base_v = random_normal(cols, 8), scale_v = {1.0f, 1.0f, 1.0f};
    const std::vector<float> w = ops.read(ops.hc_weights(ops.tensor_from(n, cols, random_normal(n * cols, 9)),
                                                         weight_of(base_v, 1, cols), weight_of(scale_v, 1, 3),
                                                         HcShape{streams, kIters, 1e-6f}));
    for (int t = 0; t < n; ++t) {
        const float* comb = &w[t * cols + 2 * streams];  // [j][k]
        for (int a = 0; a < streams; ++a) {
            float row = 0, col = 0;
            for (int b = 0; b < streams; ++b) {
                EXPECT_GT(comb[a * streams + b], 0.0f);
                row += comb[a * streams + b];
                col += comb[b * streams + a];
            }
            EXPECT_NEAR(row, 1.0f, 1e-4) << "token " << t << ", row " << a;
            EXPECT_NEAR(col, 1.0f, 1e-5) << "token " << t << ", column " << a;  // normalized last
        }
        for (int k = 0; k < streams; ++k) {
            EXPECT_GT(w[t * cols + k], 0.0f) << "pre is sigmoid + eps";
            EXPECT_GT(w[t * cols + streams + k], 0.0f) << "post is 2 sigmoid";
            EXPECT_LT(w[t * cols + streams + k], 2.0f);
        }
    }
}

TEST(GroupedMatmul, EqualsOneMatmulPerGroup) {
    ThreadPool pool(2);
    CpuBackend cpu(pool);
    Ops ops(cpu, cpu);
    const int groups = 4;
    const int64_t r = 128, cols = 64, n = 3;
    for (Format f : {Format::f32, Format::fp8_e4m3_block}) {
        const std::vector<float> wf = random_normal(groups * r * cols, 10),
                                 xf = random_normal(n * groups * cols, 11);
        const EncodedWeight e = weight_encode(f, wf.data(), groups * r, cols);
        const Weight w{e.view(), nullptr, nullptr};
        const std::vector<float> y = ops.read(ops.matmul(w, ops.tensor_from(n, groups * cols, xf), groups));
        for (int g = 0; g < groups; ++g) {
            // Group g alone: its rows of the weight (encoded alone, the same codes: whole scale blocks).
            const EncodedWeight eg = weight_encode(f, &wf[g * r * cols], r, cols);
            std::vector<float> xg;
            for (int64_t t = 0; t < n; ++t)
                xg.insert(xg.end(), xf.begin() + (t * groups + g) * cols,
                          xf.begin() + (t * groups + g + 1) * cols);
            const std::vector<float> yg =
                ops.read(ops.matmul(Weight{eg.view(), nullptr, nullptr}, ops.tensor_from(n, cols, xg)));
            for (int64_t t = 0; t < n; ++t)
                for (int64_t j = 0; j < r; ++j)
                    ASSERT_EQ(y[t * groups * r + g * r + j], yg[t * r + j])
                        << format_name(f) << " group " << g;
        }
    }
}

}  // namespace
}  // namespace coli
