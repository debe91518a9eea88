#include "store/read_buffer.h"

#include "core/error.h"
#include "io/mapping.h"

namespace coli {

ReadBuffer ReadBuffer::read(const ReadFile& file, const ReadRange& range, std::shared_ptr<BufferPool> pool) {
    ReadBuffer buf;
    buf.bytes_ = pool->take(range.buffer_bytes);
    buf.size_ = range.buffer_bytes;
    buf.pool_ = std::move(pool);
    // On error buf gives its buffer back.
    const size_t skew = file.read_direct(buf.bytes_.get(), range.length, range.offset);
    buf.data_ = buf.bytes_.get() + skew;
    return buf;
}

ReadBuffer ReadBuffer::map(std::span<const uint8_t> file_map, const ReadRange& range) {
    check(range.offset <= file_map.size() && range.length <= file_map.size() - range.offset,
          "expert store: range [{}, +{}) is past the end of its file ({} bytes)", range.offset, range.length,
          file_map.size());
    const std::span<const uint8_t> bytes = file_map.subspan(range.offset, range.length);
    mapping_populate(bytes);
    ReadBuffer buf;
    buf.data_ = bytes.data();
    return buf;
}

ReadBuffer& ReadBuffer::operator=(ReadBuffer&& o) noexcept {
    if (this != &o) {
        release();
        data_ = std::exchange(o.data_, nullptr);
        bytes_ = std::move(o.bytes_);
        size_ = std::exchange(o.size_, 0);
        pool_ = std::move(o.pool_);
    }
    return *this;
}

void ReadBuffer::release() {
    if (bytes_) pool_->give(std::move(bytes_), size_);
    data_ = nullptr;
    size_ = 0;
    pool_.reset();
}

}  // namespace coli
