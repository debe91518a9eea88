#include "synth/random_weight.h"

#include "core/thread_pool.h"
#include "synth/random_fill.h"

namespace coli {
namespace {

constexpr ValueDist kValueDist{0.0f, 1.0f};     // unscaled formats: values of order 1
constexpr ValueDist kScaleDist{0.01f, 0.002f};  // float scales: positive, like absmax / 127
constexpr uint8_t kFp8NanMask = 0x7f;           // e4m3fn: 0x7f and 0xff are NaN
constexpr uint8_t kE8m0Base = 124;              // e8m0 scales 2^-3 .. 2^4: no NaN (0xff), no extremes
constexpr uint8_t kE8m0Span = 8;

uint64_t seed_of(uint64_t seed, const char* part) {
    return tensor_seed(seed, part);
}

}  // namespace

EncodedWeight random_weight(Format f, int64_t rows, int64_t cols, uint64_t seed, ThreadPool& pool) {
    format_check_shape(f, rows, cols);
    EncodedWeight w{f, rows, cols, {}, {}};
    const WeightView shape{f, rows, cols, nullptr, nullptr};
    w.data.resize(shape.data_bytes());
    w.scales.resize(shape.scale_bytes());
    const int64_t n = rows * cols;
    switch (f) {
        case Format::f32:
            random_fill(w.data.data(), DType::f32, 0, n, seed_of(seed, "data"), kValueDist, pool);
            break;
        case Format::bf16:
            random_fill(w.data.data(), DType::bf16, 0, n, seed_of(seed, "data"), kValueDist, pool);
            break;
        case Format::f16:
            random_fill(w.data.data(), DType::f16, 0, n, seed_of(seed, "data"), kValueDist, pool);
            break;
        default:
            random_fill_bytes(w.data.data(), w.data.size(), seed_of(seed, "data"), pool);
            break;
    }
    if (f == Format::fp8_e4m3_block) {
        for (uint8_t& b : w.data)
            if ((b & kFp8NanMask) == kFp8NanMask) b ^= 1;  // 0x7f -> 0x7e (448), the largest finite code
    }
    if (f == Format::mxfp4) {
        random_fill_bytes(w.scales.data(), w.scales.size(), seed_of(seed, "scales"), pool);
        for (uint8_t& e : w.scales) e = kE8m0Base + e % kE8m0Span;
    } else if (!w.scales.empty()) {
        random_fill(w.scales.data(), DType::f32, 0, static_cast<int64_t>(w.scales.size() / sizeof(float)),
                    seed_of(seed, "scales"), kScaleDist, pool);
    }
    return w;
}

}  // namespace coli
