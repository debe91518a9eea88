#include "synth/random_fill.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"
#include "formats/format.h"

namespace coli {
namespace {

// splitmix64: turns consecutive or similar seeds into well-mixed generator states.
uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// xoshiro256+: a few cycles per 64 bits, good in the high bits, which are the ones used below.
class Xoshiro256Plus {
public:
    explicit Xoshiro256Plus(uint64_t seed) {
        for (uint64_t& s : s_) s = splitmix64(seed);
    }
    uint64_t next() {
        const uint64_t result = s_[0] + s_[3];
        const uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = (s_[3] << 45) | (s_[3] >> 19);
        return result;
    }

private:
    uint64_t s_[4];
};

constexpr int kMantissaBits = 24;                               // random bits per value: a float's precision
constexpr float kUnitScale = 1.0f / float(1 << kMantissaBits);  // 24-bit integer -> [0, 1)
const float kUniformHalfWidthPerStd = std::sqrt(3.0f);          // uniform on [-a, a] has std a / sqrt(3)

// Stores the values of elements [begin, end) of one block (offsets within the block, drawn from its own
// stream) through store(offset, value). Starting past 0 draws and drops the values before `begin`, so that
// a value does not depend on where a write chunk cuts the tensor.
template <typename Store>
void fill_block(uint64_t block_seed, int64_t begin, int64_t end, ValueDist dist, Store store) {
    Xoshiro256Plus rng(block_seed);
    const float half_width = dist.std * kUniformHalfWidthPerStd;
    auto value = [&](uint32_t bits24) {
        return dist.center + (float(bits24) * kUnitScale * 2 - 1) * half_width;
    };
    // Two values per 64-bit draw: element 2j from bits 40..63, element 2j+1 from bits 16..39.
    int64_t i = begin & ~int64_t{1};
    for (int64_t skipped = 0; skipped < i; skipped += 2) rng.next();
    for (; i < end; i += 2) {
        const uint64_t r = rng.next();
        if (i >= begin) store(i, value(uint32_t(r >> 40)));
        if (i + 1 < end) store(i + 1, value(uint32_t(r >> 16) & 0xffffff));
    }
}

// Codes of elements [begin, end) of one block into out[0, end - begin): eight per 64-bit draw (byte j of
// draw d, bits 8j..8j+7, is element 8d + j), each mapped onto [lo, lo + span) by a multiply-shift. That is
// four times fewer draws than values and no float arithmetic; the whole byte range is the draw's bytes as
// they are (little-endian, as every machine the engine runs on). The MXFP4 experts are most of a
// checkpoint's bytes. As in fill_block, the draws before `begin` are drawn and dropped.
void fill_codes_block(uint64_t block_seed, int64_t begin, int64_t end, uint32_t lo, uint32_t span,
                      uint8_t* out) {
    constexpr int kCodesPerDraw = 8, kBits = 8;
    constexpr uint32_t kByteRange = 1u << kBits;
    const bool raw = lo == 0 && span == kByteRange;
    auto code = [&](uint64_t r, int64_t j) {
        const auto byte = static_cast<uint32_t>(r >> (kBits * j)) & (kByteRange - 1);
        return static_cast<uint8_t>(lo + ((byte * span) >> kBits));
    };
    Xoshiro256Plus rng(block_seed);
    const int64_t first_draw = begin / kCodesPerDraw;
    for (int64_t d = 0; d < first_draw; ++d) rng.next();
    for (int64_t i = first_draw * kCodesPerDraw; i < end; i += kCodesPerDraw) {
        const uint64_t r = rng.next();
        if (i >= begin && i + kCodesPerDraw <= end) {
            uint8_t* dst = out + (i - begin);  // element i
            if (raw) {
                std::memcpy(dst, &r, sizeof r);
            } else {
                for (int64_t j = 0; j < kCodesPerDraw; ++j) dst[j] = code(r, j);
            }
            continue;
        }
        const int64_t j0 = std::max<int64_t>(0, begin - i), j1 = std::min<int64_t>(kCodesPerDraw, end - i);
        for (int64_t j = j0; j < j1; ++j) out[i + j - begin] = code(r, j);
    }
}

// Fills dst[0, count) with elements [first, first + count) of the tensor seeded by `seed`, one block of
// kRandomBlock elements at a time through fill(block_seed, begin, end, out) (offsets within the block).
template <typename Element, typename BlockFill>
void fill_range(Element* dst, int64_t first, int64_t count, uint64_t seed, BlockFill fill, ThreadPool& pool) {
    const int64_t block_begin = first / kRandomBlock,
                  block_end = (first + count + kRandomBlock - 1) / kRandomBlock;
    pool.parallel_for(block_end - block_begin, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t b = block_begin + b0; b < block_begin + b1; ++b) {
            uint64_t s = seed ^ uint64_t(b);
            const uint64_t block_seed = splitmix64(s);
            const int64_t block_start = b * kRandomBlock;  // element index of the block's first element
            const int64_t begin = std::max(first, block_start) - block_start;
            const int64_t end = std::min(first + count, block_start + kRandomBlock) - block_start;
            fill(block_seed, begin, end, dst + (block_start + begin - first));  // element block_start + begin
        }
    });
}

// Values of dist, encoded as Element.
template <typename Element, typename Encode>
void fill_values(Element* dst, int64_t first, int64_t count, uint64_t seed, ValueDist dist, Encode encode,
                 ThreadPool& pool) {
    auto fill = [&](uint64_t block_seed, int64_t begin, int64_t end, Element* out) {
        fill_block(block_seed, begin, end, dist,
                   [out, begin, &encode](int64_t i, float v) { out[i - begin] = encode(v); });
    };
    fill_range(dst, first, count, seed, fill, pool);
}

// U8 codes: the integers in [round(center - std sqrt(3)), round(center + std sqrt(3))), clamped to a byte.
void fill_codes(uint8_t* dst, int64_t first, int64_t count, uint64_t seed, ValueDist dist, ThreadPool& pool) {
    constexpr long kCodes = 256;
    const float half_width = dist.std * kUniformHalfWidthPerStd;
    const long lo = std::clamp(std::lround(dist.center - half_width), 0L, kCodes - 1);
    const long hi = std::clamp(std::lround(dist.center + half_width), lo + 1, kCodes);  // exclusive
    auto fill = [&](uint64_t block_seed, int64_t begin, int64_t end, uint8_t* out) {
        fill_codes_block(block_seed, begin, end, uint32_t(lo), uint32_t(hi - lo), out);
    };
    fill_range(dst, first, count, seed, fill, pool);
}

}  // namespace

ValueDist uniform_codes(int lo, int hi) {
    const float width = float(hi + 1 - lo);
    return {float(lo) + width / 2, width / 2 / kUniformHalfWidthPerStd};
}

uint64_t tensor_seed(uint64_t run_seed, std::string_view name) {
    constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL, kFnvPrime = 0x100000001b3ULL;
    uint64_t h = kFnvOffset;
    for (char c : name) h = (h ^ uint8_t(c)) * kFnvPrime;
    uint64_t x = h ^ run_seed;
    return splitmix64(x);
}

void random_fill(void* dst, DType dtype, int64_t first, int64_t count, uint64_t seed, ValueDist dist,
                 ThreadPool& pool) {
    switch (dtype) {
        case DType::f32:
            return fill_values(
                static_cast<float*>(dst), first, count, seed, dist, [](float v) { return v; }, pool);
        case DType::bf16:
            return fill_values(static_cast<uint16_t*>(dst), first, count, seed, dist, f32_to_bf16, pool);
        case DType::f16:
            return fill_values(static_cast<uint16_t*>(dst), first, count, seed, dist, f32_to_f16, pool);
        case DType::f8_e4m3:
            return fill_values(static_cast<uint8_t*>(dst), first, count, seed, dist, f32_to_fp8_e4m3, pool);
        case DType::u8:
        case DType::i8:       // packed 4-bit codes: any byte
        case DType::f8_e8m0:  // scale exponents
            return fill_codes(static_cast<uint8_t*>(dst), first, count, seed, dist, pool);
        case DType::i64:
            return fill_values(
                static_cast<int64_t*>(dst), first, count, seed, dist,
                [](float v) { return static_cast<int64_t>(std::floor(v)); }, pool);
        default:
            fail("random weights can be written as F32, BF16, F16, F8_E4M3, U8, I8, F8_E8M0 or I64, not {}",
                 dtype_name(dtype));
    }
}

void random_fill_bytes(void* dst, size_t n, uint64_t seed, ThreadPool& pool) {
    constexpr size_t kBlockBytes = kRandomBlock * sizeof(uint64_t);
    const auto n_blocks = static_cast<int64_t>((n + kBlockBytes - 1) / kBlockBytes);
    pool.parallel_for(n_blocks, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
            uint64_t s = seed ^ uint64_t(b);
            Xoshiro256Plus rng(splitmix64(s));
            auto* out = static_cast<uint8_t*>(dst) + size_t(b) * kBlockBytes;
            const size_t len = std::min(kBlockBytes, n - size_t(b) * kBlockBytes);
            for (size_t i = 0; i < len; i += sizeof(uint64_t)) {
                const uint64_t r = rng.next();
                std::memcpy(out + i, &r, std::min(sizeof r, len - i));
            }
        }
    });
}

std::vector<int> random_permutation(int n, uint64_t seed) {
    std::vector<int> p(static_cast<size_t>(std::max(0, n)));
    for (int i = 0; i < n; ++i) p[i] = i;
    Xoshiro256Plus rng(seed);
    for (int i = n - 1; i > 0; --i) {
        // The high bits are xoshiro256+'s good ones; the modulo bias over 2^32 is far below what matters
        // here.
        const auto j = static_cast<int>((rng.next() >> 32) % uint64_t(i + 1));
        std::swap(p[i], p[j]);
    }
    return p;
}

}  // namespace coli
