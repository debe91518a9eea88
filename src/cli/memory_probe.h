// Host memory bounds for the benchmarks (`coli bench`, `coli bench-attention`): the rates at which the
// machine's cores copy and read a buffer larger than the caches, measured in the same run as the figure
// they bound.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"

namespace coli {

// Copies src to dst on the pool, each thread a contiguous share.
void parallel_copy(uint8_t* dst, const uint8_t* src, size_t n, ThreadPool& pool);

// Reads every byte of src on the pool (a sum the compiler cannot drop): what a kernel that only reads
// its weights could reach at best.
uint64_t parallel_read(const uint8_t* src, size_t n, ThreadPool& pool);

// A buffer and a copy target of the same size, for the two memory bounds.
class MemoryProbe {
public:
    MemoryProbe(const uint8_t* src, size_t bytes, ThreadPool& pool);
    // Bytes copied per second, GB/s (each byte is read once and written once).
    double copy_gbps();
    // Bytes read per second, GB/s: what a kernel that only reads could reach at best.
    double read_gbps();

private:
    const uint8_t* src_;
    std::vector<uint8_t> dst_;
    ThreadPool& pool_;
    volatile uint64_t sink_ = 0;  // keeps the read's sum alive
};

// The median of `reps` reads of a buffer larger than the caches, GB/s.
double memory_read_gbps_measure(ThreadPool& pool, int reps);

}  // namespace coli
