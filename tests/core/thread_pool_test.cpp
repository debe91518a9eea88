#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace coli {
namespace {

// Every index is visited exactly once, for sizes below, at and above the thread count.
TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
    ThreadPool pool(3);
    for (int64_t n : {1, 2, 3, 7, 100, 1001}) {
        std::vector<std::atomic<int>> seen(n);
        pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) seen[i]++;
        });
        for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen[i].load(), 1) << "n=" << n << " i=" << i;
    }
}

// A grain larger than n runs the whole range on the caller.
TEST(ThreadPool, GrainLimitsChunks) {
    ThreadPool pool(4);
    int calls = 0;
    pool.parallel_for(10, 100, [&](int64_t b, int64_t e) {
        ++calls;
        EXPECT_EQ(b, 0);
        EXPECT_EQ(e, 10);
    });
    EXPECT_EQ(calls, 1);
}

// Many short loops back to back (the spinning handover) and loops after pauses longer than the spin (the
// workers asleep, and a caller that sleeps while a chunk runs long): each loop sees every index once and
// sees the loop before it finished.
TEST(ThreadPool, ShortLoopsAndPausesHandOverEveryChunk) {
    ThreadPool pool(4);
    constexpr int kLoops = 3000;
    constexpr int kPauseEvery = 500;
    std::vector<std::atomic<int>> seen(64);
    for (int loop = 0; loop < kLoops; ++loop) {
        const int64_t n = 1 + loop % 64;
        const bool pause = loop % kPauseEvery == 0;
        if (pause) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
            if (pause && b > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
            for (int64_t i = b; i < e; ++i) seen[i].fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[i].exchange(0), 1) << "loop " << loop << " i " << i;
    }
}

}  // namespace
}  // namespace coli
