#include "store/read_buffer.h"

namespace coli {

ReadBuffer ReadBuffer::read(const ReadFile& file, const ReadRange& range, std::shared_ptr<BufferPool> pool) {
    ReadBuffer buf;
    buf.bytes_ = pool->take(range.buffer_bytes);
    buf.size_ = range.buffer_bytes;
    buf.pool_ = std::move(pool);
    buf.skew_ = file.read_direct(buf.bytes_.get(), range.length, range.offset);  // on error buf gives it back
    return buf;
}

ReadBuffer& ReadBuffer::operator=(ReadBuffer&& o) noexcept {
    if (this != &o) {
        release();
        bytes_ = std::move(o.bytes_);
        skew_ = o.skew_;
        size_ = std::exchange(o.size_, 0);
        pool_ = std::move(o.pool_);
    }
    return *this;
}

void ReadBuffer::release() {
    if (bytes_) pool_->give(std::move(bytes_), size_);
    size_ = 0;
    pool_.reset();
}

}  // namespace coli
