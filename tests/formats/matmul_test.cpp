// matmul_ref against a double-precision dot and against the documented canonical order; matmul at every
// SIMD level and thread count BIT-identical to matmul_ref; token t of an n-token matmul equal to the
// 1-token matmul of x[t].
#include "core/error.h"
#include "core/thread_pool.h"
#include "formats/format.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>

namespace coli {
namespace {

using test::bits_of;
using test::decode_all;
using test::random_matrix;

// Restores the SIMD level a test changed.
struct SimdGuard {
    Simd saved = simd_active();
    ~SimdGuard() { simd_set(saved); }
};

// Activations: normal values with a few exact zeros and negative zeros mixed in.
std::vector<float> random_activations(int64_t n, int64_t cols, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n * cols));
    for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 11 == 3) ? 0.0f : (i % 13 == 5) ? -0.0f : normal(rng);
    return x;
}

// Column counts per format: tails of every length where the format allows them.
std::vector<int64_t> test_cols(Format f) {
    switch (f) {
        case Format::int4_g64:
            return {64, 192, 320};
        case Format::mxfp4:
            return {32, 96, 160};
        default:
            return {1, 15, 16, 17, 33, 130, 300};
    }
}

// A large shape per format, so that 2 and 3 threads really split the rows (chunks are >= 64 KB).
std::pair<int64_t, int64_t> large_shape(Format f) {
    const bool needs_groups = f == Format::int4_g64 || f == Format::mxfp4;
    return {515, needs_groups ? 1024 : 1027};
}

std::string describe(Format f, int64_t rows, int64_t cols, int64_t n) {
    return std::string(format_name(f)) + " [" + std::to_string(rows) + "x" + std::to_string(cols) +
           "] n=" + std::to_string(n);
}

// Index of the first differing float, or -1.
int64_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
    if (std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0) return -1;
    for (size_t i = 0; i < a.size(); ++i)
        if (bits_of(a[i]) != bits_of(b[i])) return static_cast<int64_t>(i);
    return -1;
}

// ---- the reference ----

TEST(MatmulRef, CloseToADoublePrecisionDot) {
    for (const Format f : test::kAllFormats) {
        for (const int64_t cols : test_cols(f)) {
            const int64_t rows = 9, n = 3;
            const auto wf = random_matrix(rows, cols, 21);
            const EncodedWeight e = weight_encode(f, wf.data(), rows, cols);
            const auto wd = decode_all(e.view());
            const auto x = random_activations(n, cols, 22);
            std::vector<float> y(n * rows);
            matmul_ref(e.view(), x.data(), n, y.data());
            for (int64_t t = 0; t < n; ++t) {
                for (int64_t r = 0; r < rows; ++r) {
                    double exact = 0, magnitude = 0;
                    for (int64_t c = 0; c < cols; ++c) {
                        const double p = static_cast<double>(x[t * cols + c]) * wd[r * cols + c];
                        exact += p;
                        magnitude += std::fabs(p);
                    }
                    // Each lane sums cols/16 terms, then 4 tree levels: a classic recursive-sum bound.
                    const double bound =
                        (static_cast<double>(cols) / 16 + 5) * std::ldexp(1.0, -24) * magnitude;
                    EXPECT_NEAR(y[t * rows + r], exact, bound + 1e-30) << describe(f, rows, cols, n);
                }
            }
        }
    }
}

// The order written in kernels.h / matmul_ref.cpp, spelled out here once more: 16 fma lanes, then the tree.
TEST(MatmulRef, FollowsTheDocumentedCanonicalOrder) {
    const int64_t rows = 5, cols = 77, n = 2;
    const auto wf = random_matrix(rows, cols, 23);
    const EncodedWeight e = weight_encode(Format::bf16, wf.data(), rows, cols);
    const auto wd = decode_all(e.view());
    const auto x = random_activations(n, cols, 24);
    std::vector<float> y(n * rows);
    matmul_ref(e.view(), x.data(), n, y.data());
    for (int64_t t = 0; t < n; ++t) {
        for (int64_t r = 0; r < rows; ++r) {
            float l[16] = {};
            for (int64_t c = 0; c < cols; ++c)
                l[c % 16] = std::fma(x[t * cols + c], wd[r * cols + c], l[c % 16]);
            const float want = (((l[0] + l[8]) + (l[4] + l[12])) + ((l[2] + l[10]) + (l[6] + l[14]))) +
                               (((l[1] + l[9]) + (l[5] + l[13])) + ((l[3] + l[11]) + (l[7] + l[15])));
            EXPECT_EQ(bits_of(y[t * rows + r]), bits_of(want)) << t << "," << r;
        }
    }
}

// ---- the fast paths ----

void expect_bit_identical_at(Simd level) {
    SimdGuard guard;
    simd_set(level);
    ASSERT_EQ(simd_active(), level);
    std::vector<std::unique_ptr<ThreadPool>> pools;
    for (int threads = 1; threads <= 3; ++threads) pools.push_back(std::make_unique<ThreadPool>(threads));

    for (const Format f : test::kAllFormats) {
        std::vector<std::pair<int64_t, int64_t>> shapes;
        for (const int64_t rows : {1, 7, 130})
            for (const int64_t cols : test_cols(f)) shapes.emplace_back(rows, cols);
        shapes.push_back(large_shape(f));
        uint32_t seed = 100;
        for (const auto& [rows, cols] : shapes) {
            const auto wf = random_matrix(rows, cols, ++seed);
            const EncodedWeight e = weight_encode(f, wf.data(), rows, cols);
            for (const int64_t n : {1, 3, 5}) {
                const auto x = random_activations(n, cols, ++seed);
                std::vector<float> ref(n * rows);
                matmul_ref(e.view(), x.data(), n, ref.data());
                for (size_t p = 0; p < pools.size(); ++p) {
                    std::vector<float> y(n * rows, std::numeric_limits<float>::quiet_NaN());
                    matmul(e.view(), x.data(), n, y.data(), *pools[p]);
                    const int64_t diff = first_difference(y, ref);
                    ASSERT_EQ(diff, -1)
                        << simd_name(level) << " threads=" << p + 1 << " " << describe(f, rows, cols, n)
                        << " at " << diff << ": " << y[diff] << " vs ref " << ref[diff];
                }
                // Each token of the batch equals that token alone.
                for (int64_t t = 0; t < n; ++t) {
                    std::vector<float> one(rows),
                        ref_row(ref.begin() + t * rows, ref.begin() + (t + 1) * rows);
                    matmul(e.view(), x.data() + t * cols, 1, one.data(), *pools[t % pools.size()]);
                    ASSERT_EQ(first_difference(one, ref_row), -1)
                        << simd_name(level) << " token " << t << " alone, " << describe(f, rows, cols, n);
                }
            }
        }
    }
}

// Skips loudly: a missing instruction set means those kernels were not tested on this machine.
void skip_unless_available(Simd level) {
    if (static_cast<int>(simd_detected()) >= static_cast<int>(level)) return;
    std::fprintf(stderr,
                 "\n*** SKIPPED: this CPU lacks %s (best: %s); the %s kernels were NOT tested ***\n\n",
                 std::string(simd_name(level)).c_str(), std::string(simd_name(simd_detected())).c_str(),
                 std::string(simd_name(level)).c_str());
}

TEST(MatmulBitIdentical, Scalar) {
    expect_bit_identical_at(Simd::scalar);
}

TEST(MatmulBitIdentical, Avx2) {
    skip_unless_available(Simd::avx2);
    if (simd_detected() < Simd::avx2) GTEST_SKIP() << "CPU lacks AVX2+FMA+F16C: AVX2 kernels NOT tested";
    expect_bit_identical_at(Simd::avx2);
}

TEST(MatmulBitIdentical, Avx512) {
    skip_unless_available(Simd::avx512);
    if (simd_detected() < Simd::avx512)
        GTEST_SKIP() << "CPU lacks AVX-512 (F, BW, VL, DQ): AVX-512 kernels NOT tested";
    expect_bit_identical_at(Simd::avx512);
}

// fp8 with hand-made codes (all 256, NaN included) and scales: small ones, ones large enough that the
// kernels cannot fold 2^120 into them (>= 2^8), zero and inf; every path agrees, NaN where the ref has NaN;
// without NaN codes also with the NaN fix left out (WeightView::nan_free).
TEST(Matmul, Fp8AllCodesAndExtremeScales) {
    SimdGuard guard;
    ThreadPool pool(2);
    const int64_t rows = 260, cols = 300;  // 3 x 3 scale blocks, partial at both edges
    std::vector<uint8_t> codes(rows * cols);
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>((i * 37) % 256);
    for (const bool with_nan : {true, false}) {  // NaN codes first, then replaced
        if (!with_nan)
            for (auto& c : codes)
                if ((c & 0x7f) == 0x7f) c = 0x7e;
        // Without NaN codes the check lets the kernels skip their NaN fix: the same bits either way.
        const bool nan_free = fp8_codes_nan_free(codes.data(), codes.size());
        ASSERT_EQ(nan_free, !with_nan);
        for (const float big : {0.5f, 300.0f, 1e30f})
            for (const bool skip_fix : {false, true}) {
                if (skip_fix && !nan_free) continue;
                std::vector<float> scales = {0.001f, big, 2.5f, 0.0f, 1.0f, std::ldexp(1.0f, -140),
                                             7.0f,   big, 0.25f};
                WeightView v{Format::fp8_e4m3_block, rows, cols, codes.data(), scales.data()};
                v.nan_free = skip_fix;
                const auto x = random_activations(3, cols, 41);
                std::vector<float> ref(3 * rows);
                matmul_ref(v, x.data(), 3, ref.data());
                for (const Simd level : {Simd::scalar, Simd::avx2, Simd::avx512}) {
                    if (level > simd_detected()) continue;
                    simd_set(level);
                    std::vector<float> y(3 * rows);
                    matmul(v, x.data(), 3, y.data(), pool);
                    for (size_t i = 0; i < y.size(); ++i) {
                        ASSERT_EQ(std::isnan(y[i]), std::isnan(ref[i]))
                            << simd_name(level) << " big=" << big << " " << i;
                        if (!std::isnan(ref[i])) {
                            ASSERT_EQ(bits_of(y[i]), bits_of(ref[i]))
                                << simd_name(level) << " big=" << big << " " << i;
                        }
                    }
                }
            }
    }
}

// fp8_codes_nan_free against the scalar conversion: each byte value alone at every position of buffers of
// several lengths (the vector loop's body and tail), among codes that are not NaN.
TEST(Fp8NanFree, FindsEveryNanCodeAndOnlyThose) {
    for (const size_t n : {1, 15, 16, 17, 64, 100}) {
        std::vector<uint8_t> codes(n);
        for (size_t i = 0; i < n; ++i) codes[i] = static_cast<uint8_t>((i * 37) % 127);  // 0x00 .. 0x7e
        ASSERT_TRUE(fp8_codes_nan_free(codes.data(), n));
        for (int b = 0; b < 256; ++b)
            for (size_t at = 0; at < n; ++at) {
                std::vector<uint8_t> c = codes;
                c[at] = static_cast<uint8_t>(b);
                const bool nan = std::isnan(fp8_e4m3_to_f32(static_cast<uint8_t>(b)));
                ASSERT_EQ(fp8_codes_nan_free(c.data(), n), !nan)
                    << "byte " << b << " at " << at << " of " << n;
            }
    }
}

// Views straight into a mapped checkpoint may be unaligned: data, scales and activations at odd addresses
// give the same bits.
TEST(Matmul, UnalignedViewsAndActivations) {
    SimdGuard guard;
    ThreadPool pool(2);
    const int64_t rows = 37, cols = 192;
    const auto wf = random_matrix(rows, cols, 51);
    const auto x = random_activations(3, cols, 52);
    std::vector<uint8_t> x_bytes(x.size() * sizeof(float) + 1);
    std::memcpy(x_bytes.data() + 1, x.data(), x.size() * sizeof(float));
    const auto* x_odd = reinterpret_cast<const float*>(x_bytes.data() + 1);
    for (const Format f : test::kAllFormats) {
        const EncodedWeight e = weight_encode(f, wf.data(), rows, cols);
        std::vector<uint8_t> data(e.data.size() + 1), scales(e.scales.size() + 3);
        std::memcpy(data.data() + 1, e.data.data(), e.data.size());
        std::memcpy(scales.data() + 3, e.scales.data(), e.scales.size());
        const WeightView odd{f, rows, cols, data.data() + 1, e.scales.empty() ? nullptr : scales.data() + 3};
        std::vector<float> ref(3 * rows);
        matmul_ref(e.view(), x.data(), 3, ref.data());
        for (const Simd level : {Simd::scalar, Simd::avx2, Simd::avx512}) {
            if (level > simd_detected()) continue;
            simd_set(level);
            std::vector<float> y(3 * rows);
            matmul(odd, x_odd, 3, y.data(), pool);
            EXPECT_EQ(first_difference(y, ref), -1) << format_name(f) << " " << simd_name(level);
        }
    }
}

// Non-finite activations: every path gives NaN / inf in the same places (NaN payloads may differ).
TEST(Matmul, NonFiniteActivationsAgreeAcrossPaths) {
    SimdGuard guard;
    ThreadPool pool(2);
    const int64_t rows = 6, cols = 64;
    const auto wf = random_matrix(rows, cols, 31);
    auto x = random_activations(2, cols, 32);
    x[5] = std::numeric_limits<float>::infinity();
    x[cols + 40] = std::numeric_limits<float>::quiet_NaN();
    for (const Format f : test::kAllFormats) {
        const EncodedWeight e = weight_encode(f, wf.data(), rows, cols);
        std::vector<float> ref(2 * rows);
        matmul_ref(e.view(), x.data(), 2, ref.data());
        for (const Simd level : {Simd::scalar, Simd::avx2, Simd::avx512}) {
            if (level > simd_detected()) continue;
            simd_set(level);
            std::vector<float> y(2 * rows);
            matmul(e.view(), x.data(), 2, y.data(), pool);
            for (size_t i = 0; i < y.size(); ++i) {
                EXPECT_EQ(std::isnan(y[i]), std::isnan(ref[i]))
                    << format_name(f) << " " << simd_name(level) << " " << i;
                if (!std::isnan(ref[i])) {
                    EXPECT_EQ(bits_of(y[i]), bits_of(ref[i]));
                }
            }
        }
    }
}

TEST(Matmul, EmptyShapes) {
    ThreadPool pool(2);
    const std::vector<float> x(8, 1.0f);
    std::vector<float> y(8, 5.0f);
    const EncodedWeight no_cols = weight_encode(Format::bf16, nullptr, 3, 0);
    matmul(no_cols.view(), x.data(), 2, y.data(), pool);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(bits_of(y[i]), 0u) << "an empty dot product is +0";
    const EncodedWeight no_rows = weight_encode(Format::int8_row, nullptr, 0, 4);
    matmul(no_rows.view(), x.data(), 2, y.data(), pool);  // writes nothing, must not crash
    matmul_ref(no_rows.view(), x.data(), 2, y.data());
    const auto wf = random_matrix(2, 64, 33);
    const EncodedWeight e = weight_encode(Format::mxfp4, wf.data(), 2, 64);
    y.assign(8, 5.0f);
    matmul(e.view(), x.data(), 0, y.data(), pool);
    EXPECT_EQ(y[0], 5.0f) << "n = 0 writes nothing";
}

TEST(Matmul, RejectsBadViews) {
    ThreadPool pool(1);
    const std::vector<float> x(64, 1.0f);
    std::vector<float> y(4);
    const WeightView no_data{Format::f32, 2, 64, nullptr, nullptr};
    EXPECT_THROW(matmul(no_data, x.data(), 1, y.data(), pool), Error);
    const WeightView bad_cols{Format::mxfp4, 2, 40, x.data(), x.data()};
    EXPECT_THROW(matmul(bad_cols, x.data(), 1, y.data(), pool), Error);
    EXPECT_THROW(matmul_ref(bad_cols, x.data(), 1, y.data()), Error);
}

TEST(Simd, SetClampsToTheDetectedLevel) {
    SimdGuard guard;
    simd_set(Simd::avx512);
    EXPECT_EQ(simd_active(), simd_detected());
    simd_set(Simd::scalar);
    EXPECT_EQ(simd_active(), Simd::scalar);
    EXPECT_EQ(simd_name(Simd::scalar), "scalar");
    EXPECT_EQ(simd_name(Simd::avx2), "avx2");
    EXPECT_EQ(simd_name(Simd::avx512), "avx512");
    std::printf("SIMD detected on this CPU: %s\n", std::string(simd_name(simd_detected())).c_str());
}

}  // namespace
}  // namespace coli
