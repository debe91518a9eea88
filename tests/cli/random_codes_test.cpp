// U8 codes for synthetic quantized tensors (random_fill with DType::u8): every code lies in the asked-for
// range, every code of it is drawn about equally often, and a value does not depend on how the tensor is
// cut into write chunks or on the number of threads.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

#include "core/thread_pool.h"
#include "synth/random_fill.h"

namespace coli {
namespace {

constexpr int64_t kCount = 3 * kRandomBlock + 12345;  // several blocks and a partial one
constexpr uint64_t kSeed = 42;

std::vector<uint8_t> codes(ValueDist dist, ThreadPool& pool) {
    std::vector<uint8_t> out(kCount);
    random_fill(out.data(), DType::u8, 0, kCount, kSeed, dist, pool);
    return out;
}

TEST(RandomCodes, StayInTheirRangeAndCoverItEvenly) {
    ThreadPool pool(2);
    for (const auto& [lo, hi] : {std::pair{119, 121}, std::pair{0, 255}, std::pair{7, 7}}) {
        std::map<int, int64_t> seen;
        for (uint8_t c : codes(uniform_codes(lo, hi), pool)) ++seen[c];
        EXPECT_EQ(seen.begin()->first, lo);
        EXPECT_EQ(seen.rbegin()->first, hi);
        EXPECT_EQ(seen.size(), size_t(hi - lo + 1)) << "every code of [" << lo << ", " << hi << "] drawn";
        const double expected = double(kCount) / double(hi - lo + 1);
        for (const auto& [code, n] : seen) {
            EXPECT_GT(n, expected * 0.8) << code;
            EXPECT_LT(n, expected * 1.2) << code;
        }
    }
}

TEST(RandomCodes, IndependentOfChunksAndThreads) {
    ThreadPool one(1), two(2);
    const ValueDist dist = uniform_codes(0, 255);
    const std::vector<uint8_t> whole = codes(dist, two);
    EXPECT_EQ(codes(dist, one), whole);
    std::vector<uint8_t> pieces(kCount);
    const int64_t cuts[] = {0, 3, 1001, kRandomBlock - 5, kRandomBlock + 9, 2 * kRandomBlock, kCount};
    for (size_t i = 0; i + 1 < std::size(cuts); ++i)
        random_fill(pieces.data() + cuts[i], DType::u8, cuts[i], cuts[i + 1] - cuts[i], kSeed, dist, two);
    EXPECT_EQ(pieces, whole);
}

}  // namespace
}  // namespace coli
