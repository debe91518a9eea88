// The bytes of one ReadRange of an expert, read from disk into an aligned buffer taken from the store's
// BufferPool and given back to it when the expert is dropped (the pool keeps it on the buffer meter).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "io/file.h"
#include "store/buffer_pool.h"
#include "store/expert_index.h"

namespace coli {

class ReadBuffer {
public:
    ReadBuffer() = default;
    // Reads `range` of `file` with ReadFile::read_direct (O_DIRECT when the file was opened with it,
    // buffered otherwise) into a buffer of range.buffer_bytes from `pool`. Throws coli::Error.
    static ReadBuffer read(const ReadFile& file, const ReadRange& range, std::shared_ptr<BufferPool> pool);

    ReadBuffer(ReadBuffer&& o) noexcept { *this = std::move(o); }
    ReadBuffer& operator=(ReadBuffer&& o) noexcept;
    ~ReadBuffer() { release(); }

    const uint8_t* data() const { return bytes_.get() + skew_; }  // the range's first byte

private:
    void release();

    AlignedBytes bytes_;
    size_t skew_ = 0;                   // position of the range's first byte in the buffer
    uint64_t size_ = 0;                 // bytes of the buffer
    std::shared_ptr<BufferPool> pool_;  // where the buffer came from and goes back to
};

}  // namespace coli
