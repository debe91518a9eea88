// The pool of read buffers: size classes, reuse, the meter and trimming.
#include "store/buffer_pool.h"

#include <gtest/gtest.h>

#include "store/buffer_meter.h"

namespace coli {
namespace {

TEST(BufferPool, SizeClassesAreCloseAboveAndAligned) {
    for (uint64_t blocks = 1; blocks < 5000; blocks += 7) {
        const uint64_t bytes = blocks * kDirectAlign;
        const uint64_t c = pool_size_class(bytes);
        SCOPED_TRACE(bytes);
        EXPECT_GE(c, bytes);
        EXPECT_LE(c - bytes, bytes >> kSizeClassesLog2);
        EXPECT_EQ(c % kDirectAlign, 0u);
        EXPECT_EQ(pool_size_class(c), c);  // a class is its own class
        if (bytes <= kSizeClassMin) {
            EXPECT_EQ(c, bytes);
        }
    }
    // Two experts whose ranges differ by a block share a class.
    const uint64_t expert = 17551360;
    EXPECT_EQ(pool_size_class(expert), pool_size_class(expert + kDirectAlign));
}

TEST(BufferPool, KeptBuffersAreReusedAndMetered) {
    const BufferMeterReading start = buffer_meter_read();
    const uint64_t a = 8 * kDirectAlign, b = 4 * kDirectAlign;
    {
        BufferPool pool(0);
        AlignedBytes x = pool.take(a);
        uint8_t* const first = x.get();
        EXPECT_EQ(buffer_meter_read().live_bytes, start.live_bytes + a);
        pool.give(std::move(x), a);
        EXPECT_EQ(pool.kept_bytes(), a);
        EXPECT_EQ(buffer_meter_read().live_bytes, start.live_bytes + a);  // kept memory is still held

        AlignedBytes other = pool.take(b);  // another size: a new buffer
        EXPECT_EQ(buffer_meter_read().allocations, start.allocations + 2);
        AlignedBytes again = pool.take(a);  // the kept one
        EXPECT_EQ(again.get(), first);
        EXPECT_EQ(buffer_meter_read().allocations, start.allocations + 2);
        EXPECT_EQ(pool.kept_bytes(), 0u);
        pool.give(std::move(again), a);
        pool.give(std::move(other), b);
    }
    EXPECT_EQ(buffer_meter_read().live_bytes, start.live_bytes);  // the pool freed what it kept
}

// A new buffer frees kept buffers of other sizes when the cap needs it, and only then.
TEST(BufferPool, CapFreesKeptBuffersForANewSize) {
    const BufferMeterReading start = buffer_meter_read();
    const uint64_t a = 8 * kDirectAlign, b = 4 * kDirectAlign, c = 2 * kDirectAlign;
    {
        BufferPool pool(a + b + c);
        AlignedBytes held = pool.take(b);
        pool.give(pool.take(a), a);
        pool.give(pool.take(c), c);  // fits beside: nothing freed
        EXPECT_EQ(pool.kept_bytes(), a + c);
        AlignedBytes big = pool.take(a + c);  // needs both kept buffers freed
        EXPECT_EQ(pool.kept_bytes(), 0u);
        EXPECT_LE(buffer_meter_read().live_bytes - start.live_bytes, a + b + c);
        pool.give(std::move(big), a + c);
        AlignedBytes small = pool.take(c);  // another size, over the cap beside what is kept
        EXPECT_EQ(pool.kept_bytes(), 0u);
        EXPECT_EQ(buffer_meter_read().live_bytes - start.live_bytes, b + c);
        pool.give(std::move(small), c);
        pool.give(std::move(held), b);
    }
    EXPECT_EQ(buffer_meter_read().live_bytes, start.live_bytes);
}

}  // namespace
}  // namespace coli
