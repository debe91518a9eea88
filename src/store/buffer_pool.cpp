#include "store/buffer_pool.h"

#include <algorithm>
#include <bit>

#include "core/env.h"
#include "core/error.h"
#include "store/buffer_meter.h"

namespace coli {

namespace {

// The test hook of docs/reliability.md for memory pressure: COLI_STORE_MEMORY_LIMIT=BYTES makes a new
// buffer fail as out of memory when the pool's buffers (handed out and kept) would exceed BYTES, as a
// machine whose other processes took the rest of its memory would.
uint64_t memory_limit() {
    static const uint64_t limit = env_number("COLI_STORE_MEMORY_LIMIT");
    return limit;
}

}  // namespace

uint64_t pool_size_class(uint64_t bytes) {
    if (bytes <= kSizeClassMin) return bytes;
    const uint64_t step = std::bit_floor(bytes) >> kSizeClassesLog2;
    return (bytes + step - 1) / step * step;
}

BufferPool::~BufferPool() {
    std::lock_guard lock(mu_);
    free_kept(0);
}

AlignedBytes BufferPool::take(uint64_t bytes) {
    std::lock_guard lock(mu_);
    auto it = kept_.find(bytes);
    if (it != kept_.end() && !it->second.empty()) {
        AlignedBytes buf = std::move(it->second.back());
        it->second.pop_back();
        kept_bytes_ -= bytes;
        return buf;
    }
    if (cap_ > 0) free_kept(cap_ - std::min(cap_, allocated_bytes_ - kept_bytes_ + bytes));
    if (const uint64_t limit = memory_limit(); limit > 0 && allocated_bytes_ + bytes > limit)
        throw OutOfMemory(
            fmt::format("out of memory: cannot allocate {} aligned bytes (COLI_STORE_MEMORY_LIMIT)", bytes));
    // On the meter before the allocation, so that the meter never shows less than what is allocated.
    buffer_meter_add(bytes);
    try {
        AlignedBytes buf = aligned_alloc_bytes(bytes);
        allocated_bytes_ += bytes;
        return buf;
    } catch (...) {
        buffer_meter_sub(bytes);
        throw;
    }
}

void BufferPool::give(AlignedBytes buf, uint64_t bytes) {
    std::lock_guard lock(mu_);
    kept_[bytes].push_back(std::move(buf));
    kept_bytes_ += bytes;
}

void BufferPool::free_kept(uint64_t keep) {
    for (auto it = kept_.begin(); it != kept_.end() && kept_bytes_ > keep;) {
        std::vector<AlignedBytes>& bufs = it->second;
        while (!bufs.empty() && kept_bytes_ > keep) {
            bufs.pop_back();  // freed before it leaves the meter
            buffer_meter_sub(it->first);
            kept_bytes_ -= it->first;
            allocated_bytes_ -= it->first;
        }
        it = bufs.empty() ? kept_.erase(it) : std::next(it);
    }
}

uint64_t BufferPool::allocated_bytes() const {
    std::lock_guard lock(mu_);
    return allocated_bytes_;
}

void BufferPool::cap_lower(uint64_t cap) {
    std::lock_guard lock(mu_);
    cap_ = cap;
    free_kept(cap_ - std::min(cap_, allocated_bytes_ - kept_bytes_));
}

uint64_t BufferPool::kept_bytes() const {
    std::lock_guard lock(mu_);
    return kept_bytes_;
}

}  // namespace coli
