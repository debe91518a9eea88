#include "store/read_buffer.h"

#include "store/buffer_meter.h"

namespace coli {

ReadBuffer ReadBuffer::read(const ReadFile& file, const ReadRange& range) {
    // On the meter before the allocation, so that the meter never shows less than what is allocated.
    buffer_meter_add(range.buffer_bytes);
    ReadBuffer buf;
    buf.allocated_ = range.buffer_bytes;
    try {
        buf.bytes_ = file.read_direct(range.length, range.offset, &buf.skew_);
    } catch (...) {
        buf.release();
        throw;
    }
    return buf;
}

ReadBuffer& ReadBuffer::operator=(ReadBuffer&& o) noexcept {
    if (this != &o) {
        release();
        bytes_ = std::move(o.bytes_);
        skew_ = o.skew_;
        allocated_ = std::exchange(o.allocated_, 0);
    }
    return *this;
}

void ReadBuffer::release() {
    bytes_.reset();  // freed before it leaves the meter
    if (allocated_ > 0) buffer_meter_sub(allocated_);
    allocated_ = 0;
}

}  // namespace coli
