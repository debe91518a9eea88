// Read buffers that no expert holds any more, kept for the next read of the same size. New memory can
// cost more than the read that fills it: on this project's VM (a host that backs guest memory on demand),
// four O_DIRECT readers into new buffers fell from ~2 to 0.5-0.65 GB/s once the guest had used up its
// already-backed free memory, while readers that reuse their buffers kept ~2 GB/s. Once the cache is full
// it evicts about one expert for every expert it reads, so keeping the evicted buffers makes the steady
// state allocate nothing.
// Every buffer the pool hands out or keeps is on the buffer meter (buffer_meter.h): kept memory is held.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "io/file.h"

namespace coli {

// Buffer sizes come in classes so that two experts of nearly the same size (their ranges rarely start at
// the same offset within a block) share kept buffers: up to kSizeClassMin bytes every multiple of
// kDirectAlign is a class, above it 16 classes per power of two (at most 1/16 more than asked).
inline constexpr uint64_t kSizeClassMin = 16 * kDirectAlign;
inline constexpr int kSizeClassesLog2 = 4;
uint64_t pool_size_class(uint64_t bytes);  // bytes: a multiple of kDirectAlign

class BufferPool {
public:
    // cap: the most bytes this pool's buffers (handed out and kept) may take together; 0 = no cap.
    explicit BufferPool(uint64_t cap) : cap_(cap) {}
    ~BufferPool();
    BufferPool(const BufferPool&) = delete;
    BufferPool& operator=(const BufferPool&) = delete;

    // A kept buffer of exactly `bytes` (a size class), or a newly allocated one, for which kept buffers of
    // other sizes are freed as far as the cap needs. The caller keeps the buffers handed out within the
    // cap (the store charges an expert to its budget before reading it). Throws coli::OutOfMemory.
    AlignedBytes take(uint64_t bytes);
    // Keeps `buf` (taken with `bytes`) for a later take().
    void give(AlignedBytes buf, uint64_t bytes);
    uint64_t kept_bytes() const;
    uint64_t allocated_bytes() const;  // handed out and kept
    // Lowers the cap (the store's budget, lowered after an allocation failed); kept buffers beyond it go.
    void cap_lower(uint64_t cap);

private:
    void free_kept(uint64_t keep);  // lock held: frees kept buffers until at most `keep` bytes are kept

    uint64_t cap_;
    mutable std::mutex mu_;
    std::unordered_map<uint64_t, std::vector<AlignedBytes>> kept_;  // by buffer size
    uint64_t kept_bytes_ = 0;
    uint64_t allocated_bytes_ = 0;  // handed out and kept
};

}  // namespace coli
