#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
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

}  // namespace
}  // namespace coli
