#include "cli/memory_probe.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/median.h"
#include "core/timer.h"

namespace coli {

namespace {
constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kCopyGrainBytes = 4 * kMiB;      // per-thread piece of the copy / read
constexpr size_t kMemoryProbeBytes = 256 * kMiB;  // larger than the caches, quick to read
constexpr double kBytesPerGB = 1e9;
}  // namespace

void parallel_copy(uint8_t* dst, const uint8_t* src, size_t n, ThreadPool& pool) {
    const auto pieces = static_cast<int64_t>((n + kCopyGrainBytes - 1) / kCopyGrainBytes);
    pool.parallel_for(pieces, 1, [&](int64_t p0, int64_t p1) {
        const size_t begin = size_t(p0) * kCopyGrainBytes, end = std::min(n, size_t(p1) * kCopyGrainBytes);
        std::memcpy(dst + begin, src + begin, end - begin);
    });
}

uint64_t parallel_read(const uint8_t* src, size_t n, ThreadPool& pool) {
    const auto pieces = static_cast<int64_t>((n + kCopyGrainBytes - 1) / kCopyGrainBytes);
    std::atomic<uint64_t> total{0};
    pool.parallel_for(pieces, 1, [&](int64_t p0, int64_t p1) {
        const size_t begin = size_t(p0) * kCopyGrainBytes, end = std::min(n, size_t(p1) * kCopyGrainBytes);
        uint64_t s[4] = {0, 0, 0, 0}, w;
        size_t i = begin;
        for (; i + 4 * sizeof w <= end; i += 4 * sizeof w) {
            for (int j = 0; j < 4; ++j) {
                std::memcpy(&w, src + i + j * sizeof w, sizeof w);
                s[j] += w;
            }
        }
        for (; i < end; ++i) s[0] += src[i];
        total += s[0] + s[1] + s[2] + s[3];
    });
    return total.load();
}

MemoryProbe::MemoryProbe(const uint8_t* src, size_t bytes, ThreadPool& pool)
    : src_(src), dst_(bytes), pool_(pool) {
    parallel_copy(dst_.data(), src_, bytes, pool_);  // first touch of dst outside the timing
}

double MemoryProbe::copy_gbps() {
    Timer t;
    parallel_copy(dst_.data(), src_, dst_.size(), pool_);
    return dst_.size() / t.seconds() / kBytesPerGB;
}

double MemoryProbe::read_gbps() {
    Timer t;
    sink_ = sink_ + parallel_read(src_, dst_.size(), pool_);
    return dst_.size() / t.seconds() / kBytesPerGB;
}

double memory_read_gbps_measure(ThreadPool& pool, int reps) {
    std::vector<uint8_t> buffer(kMemoryProbeBytes, 1);
    MemoryProbe probe(buffer.data(), buffer.size(), pool);
    std::vector<double> gbps;
    for (int r = 0; r < std::max(reps, 1); ++r) gbps.push_back(probe.read_gbps());
    return median(gbps);
}

}  // namespace coli
