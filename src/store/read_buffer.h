// The bytes of one ReadRange of an expert, read from disk into an aligned buffer and metered (see
// buffer_meter.h) from just before the allocation until just after it is freed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "io/file.h"
#include "store/expert_index.h"

namespace coli {

class ReadBuffer {
public:
    ReadBuffer() = default;
    // Reads `range` of `file` with ReadFile::read_direct (O_DIRECT when the file was opened with it,
    // buffered otherwise); either way the buffer is range.buffer_bytes long. Throws coli::Error.
    static ReadBuffer read(const ReadFile& file, const ReadRange& range);

    ReadBuffer(ReadBuffer&& o) noexcept { *this = std::move(o); }
    ReadBuffer& operator=(ReadBuffer&& o) noexcept;
    ~ReadBuffer() { release(); }

    const uint8_t* data() const { return bytes_.get() + skew_; }  // the range's first byte

private:
    void release();

    AlignedBytes bytes_;
    size_t skew_ = 0;         // position of the range's first byte in the buffer
    uint64_t allocated_ = 0;  // bytes on the meter
};

}  // namespace coli
