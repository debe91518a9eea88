#include "synth/shard_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"

namespace coli {
namespace {

constexpr size_t kLengthBytes = 8;  // little-endian u64 header length
constexpr size_t kDataAlign = 8;    // data starts 8-aligned, as the official writer pads it
constexpr mode_t kFileMode = 0644;
// Staging buffer: large O_DIRECT writes reach the disk's bandwidth; a multiple of kDirectAlign.
constexpr size_t kStageBytes = size_t{8} << 20;

// Writes exactly n bytes at offset; retries short writes and EINTR.
void pwrite_full(int fd, const uint8_t* p, size_t n, uint64_t offset, const std::filesystem::path& path) {
    while (n > 0) {
        const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(offset));
        if (w < 0 && errno == EINTR) continue;
        check(w > 0, "{}: write failed: {}", path.string(), w < 0 ? std::strerror(errno) : "no progress");
        p += w;
        n -= static_cast<size_t>(w);
        offset += static_cast<uint64_t>(w);
    }
}

// The header JSON: "__metadata__" first, then the tensors with consecutive data offsets.
std::string header_json(const std::vector<ShardTensor>& tensors,
                        const std::map<std::string, std::string>& metadata,
                        const std::filesystem::path& path) {
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    std::set<std::string> names;
    uint64_t offset = 0;
    for (const ShardTensor& t : tensors) {
        check(names.insert(t.name).second, "{}: tensor {} is given twice", path.string(), t.name);
        const uint64_t n = t.nbytes();
        header[t.name] = {
            {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
        offset += n;
    }
    std::string text = header.dump();
    text.resize((text.size() + kDataAlign - 1) / kDataAlign * kDataAlign, ' ');
    return text;
}

}  // namespace

uint64_t ShardTensor::nbytes() const {
    auto n = shape_nbytes(shape, dtype);
    check(n.has_value(), "tensor {} has an invalid shape", name);
    return *n;
}

ShardWriter::ShardWriter(std::filesystem::path path, const std::vector<ShardTensor>& tensors,
                         const std::map<std::string, std::string>& metadata)
    : path_(std::move(path)) {
    for (const ShardTensor& t : tensors) data_total_ += t.nbytes();
    const std::string header = header_json(tensors, metadata, path_);
    partial_ = path_;
    partial_ += ".partial";
    fd_ = ::open(partial_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, kFileMode);
    check(fd_ >= 0, "{}: cannot create: {}", partial_.string(), std::strerror(errno));
    fd_direct_ = ::open(partial_.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);  // -1 on tmpfs and the like
    staging_ = aligned_alloc_bytes(kStageBytes);
    uint8_t length[kLengthBytes];
    for (size_t i = 0; i < kLengthBytes; ++i)
        length[i] = static_cast<uint8_t>(uint64_t(header.size()) >> (8 * i));
    write_all(length, sizeof length);
    write_all(header.data(), header.size());
}

ShardWriter::~ShardWriter() {
    if (fd_direct_ >= 0) ::close(fd_direct_);
    if (fd_ >= 0) ::close(fd_);
    if (!done_) ::unlink(partial_.c_str());
}

void ShardWriter::append(const void* data, size_t n) {
    check(data_written_ + n <= data_total_, "{}: more tensor data than the header promises ({} bytes)",
          path_.string(), data_total_);
    data_written_ += n;
    write_all(data, n);
}

void ShardWriter::write_all(const void* data, size_t n) {
    auto* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
        const size_t take = std::min(n, kStageBytes - staged_);
        std::memcpy(staging_.get() + staged_, p, take);
        staged_ += take;
        p += take;
        n -= take;
        if (staged_ == kStageBytes) stage_flush(kStageBytes);
    }
}

void ShardWriter::stage_flush(size_t n) {
    // O_DIRECT needs whole aligned blocks at aligned offsets: file_pos_ stays aligned because only the
    // final flush, through the buffered descriptor, may write a partial block.
    const bool direct = fd_direct_ >= 0 && n % kDirectAlign == 0;
    pwrite_full(direct ? fd_direct_ : fd_, staging_.get(), n, file_pos_, partial_);
    file_pos_ += n;
    staged_ -= n;
    std::memmove(staging_.get(), staging_.get() + n, staged_);
}

void ShardWriter::finish() {
    check(data_written_ == data_total_, "{}: {} bytes of tensor data written, the header promises {}",
          path_.string(), data_written_, data_total_);
    const size_t aligned = staged_ / kDirectAlign * kDirectAlign;
    if (aligned > 0) stage_flush(aligned);
    if (staged_ > 0) stage_flush(staged_);  // the tail: buffered
    for (int* fd : {&fd_direct_, &fd_}) {
        const int f = *fd;
        *fd = -1;
        if (f >= 0)
            check(::close(f) == 0, "{}: write failed on close: {}", partial_.string(), std::strerror(errno));
    }
    std::error_code ec;
    std::filesystem::rename(partial_, path_, ec);
    check(!ec, "{}: cannot rename {} into place: {}", path_.string(), partial_.filename().string(),
          ec.message());
    done_ = true;
    safetensors_read_header(path_);  // throws if the engine would reject the file
}

}  // namespace coli
