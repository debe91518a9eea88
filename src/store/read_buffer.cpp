#include "store/read_buffer.h"

#include "core/error.h"
#include "io/checkpoint.h"
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

ReadBuffer ReadBuffer::map(const Checkpoint& ckpt, const ReadRange& range) {
    const std::span<const uint8_t> file_map = ckpt.map_file(range.file);
    const std::string path = ckpt.file_path(range.file).string();
    check(range.offset <= file_map.size() && range.length <= file_map.size() - range.offset,
          "{}: expert store: range [{}, +{}) is past the end of its file ({} bytes)", path, range.offset,
          range.length, file_map.size());
    const std::span<const uint8_t> bytes = file_map.subspan(range.offset, range.length);
    try {
        mapping_populate(bytes);
    } catch (const Error& e) {
        ckpt.check_unchanged(range.file);  // a truncated or replaced file is better named as such
        fail("{}: {}", path, e.what());
    }
    // After the bytes came in: a write to the file before or during it shows (bytes already used, by an
    // earlier token or a dense weight, are not checked).
    ckpt.check_unchanged(range.file);
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
