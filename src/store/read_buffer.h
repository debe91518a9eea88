// The bytes of one ReadRange of an expert: read from disk into an aligned buffer taken from the store's
// BufferPool and given back to it when the expert is dropped (the pool keeps it on the buffer meter), or a
// view of the checkpoint's file mapping (ExpertSource::mapped), which owns nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
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
    // The range inside the mapping of its file in `ckpt` (Checkpoint::map_file), its pages brought in
    // (mapping_populate), after which the file is checked to be the one opened (Checkpoint::check_unchanged).
    // Throws coli::Error naming the file.
    static ReadBuffer map(const Checkpoint& ckpt, const ReadRange& range);

    ReadBuffer(ReadBuffer&& o) noexcept { *this = std::move(o); }
    ReadBuffer& operator=(ReadBuffer&& o) noexcept;
    ~ReadBuffer() { release(); }

    const uint8_t* data() const { return data_; }  // the range's first byte

private:
    void release();

    const uint8_t* data_ = nullptr;     // the range's first byte: in bytes_, or in a file mapping
    AlignedBytes bytes_;                // the buffer a read filled; empty for a mapped range
    uint64_t size_ = 0;                 // bytes of the buffer
    std::shared_ptr<BufferPool> pool_;  // where the buffer came from and goes back to
};

}  // namespace coli
