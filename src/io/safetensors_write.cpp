// Writing safetensors files the way the official writer does: header JSON padded with spaces so that the
// data starts at a multiple of 8, tensors packed in order without gaps.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <unordered_set>

#include "core/error.h"
#include "io/json.h"
#include "io/safetensors.h"

namespace coli {

namespace {

constexpr size_t kLengthBytes = 8;  // little-endian u64 header length
constexpr size_t kDataAlign = 8;    // data starts 8-aligned, so that 8-byte dtypes can be mapped in place
constexpr mode_t kFileMode = 0644;

// Closes the file and removes it unless the write completed.
class PartialFile {
public:
    explicit PartialFile(std::filesystem::path path) : path_(std::move(path)) {
        fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, kFileMode);
        check(fd_ >= 0, "{}: cannot create: {}", path_.string(), std::strerror(errno));
    }
    ~PartialFile() {
        if (fd_ >= 0) ::close(fd_);
        if (!done_) ::unlink(path_.c_str());
    }
    PartialFile(const PartialFile&) = delete;
    PartialFile& operator=(const PartialFile&) = delete;

    // Writes straight from the caller's memory (tensors can be many GB: no staging copy).
    void write(const void* data, size_t n) {
        auto* p = static_cast<const uint8_t*>(data);
        while (n > 0) {
            ssize_t w = ::write(fd_, p, n);
            if (w < 0 && errno == EINTR) continue;
            check(w > 0, "{}: write failed: {}", path_.string(),
                  w < 0 ? std::strerror(errno) : "no progress");
            p += w;
            n -= static_cast<size_t>(w);
        }
    }
    void close() {
        int fd = fd_;
        fd_ = -1;
        check(::close(fd) == 0, "{}: write failed on close: {}", path_.string(), std::strerror(errno));
    }
    void keep() { done_ = true; }

private:
    std::filesystem::path path_;
    int fd_ = -1;
    bool done_ = false;
};

void put_le64(uint8_t* dst, uint64_t v) {
    for (size_t i = 0; i < kLengthBytes; ++i) dst[i] = static_cast<uint8_t>(v >> (8 * i));
}

// JSON text of one value; a string that is not UTF-8 (a tensor name, a metadata value) is an error.
std::string dump(const nlohmann::json& j, const std::filesystem::path& path) {
    try {
        return j.dump();
    } catch (const nlohmann::json::exception& e) {
        fail("{}: cannot write the header: {}", path.string(), e.what());
    }
}

// The header JSON, with "__metadata__" first (keys sorted, so that equal inputs give equal files) and the
// tensors in the given order; checks what the reader would reject. Written entry by entry: a JSON object
// type that keeps insertion order (ordered_json) finds keys by linear search, quadratic in the number of
// tensors, and a shard can hold tens of thousands of them.
std::string header_json(const std::vector<TensorWrite>& tensors,
                        const std::unordered_map<std::string, std::string>& metadata,
                        const std::filesystem::path& path, std::vector<uint64_t>* nbytes) {
    std::string header = "{";
    if (!metadata.empty()) {
        nlohmann::json m(std::map<std::string, std::string>(metadata.begin(), metadata.end()));
        header += "\"__metadata__\":" + dump(m, path);
    }
    std::unordered_set<std::string_view> names;
    uint64_t offset = 0;
    for (const TensorWrite& t : tensors) {
        const std::string where = fmt::format("{}: tensor {}", path.string(), quote(t.name));
        check(!t.name.empty() && t.name != "__metadata__", "{}: reserved or empty name", where);
        check(names.insert(t.name).second, "{} is given twice", where);
        auto n = shape_nbytes(t.shape, t.dtype);
        check(n.has_value(), "{} has an invalid shape", where);
        check(*n == 0 || t.data != nullptr, "{} has no data", where);
        nlohmann::json entry = {
            {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + *n}}};
        if (header.size() > 1) header += ',';
        header += dump(t.name, path) + ":" + entry.dump();
        offset += *n;
        nbytes->push_back(*n);
    }
    return header + "}";
}

}  // namespace

void safetensors_write(const std::filesystem::path& path, const std::vector<TensorWrite>& tensors,
                       const std::unordered_map<std::string, std::string>& metadata) {
    std::vector<uint64_t> nbytes;
    std::string header = header_json(tensors, metadata, path, &nbytes);
    header.resize((header.size() + kDataAlign - 1) / kDataAlign * kDataAlign, ' ');
    uint8_t length[kLengthBytes];
    put_le64(length, header.size());

    // Write beside the target and rename, so that a failed or interrupted write never leaves a
    // truncated file under the real name.
    std::filesystem::path partial = path;
    partial += ".partial";
    PartialFile out(partial);
    out.write(length, sizeof length);
    out.write(header.data(), header.size());
    for (size_t i = 0; i < tensors.size(); ++i) out.write(tensors[i].data, nbytes[i]);
    out.close();
    std::error_code ec;
    std::filesystem::rename(partial, path, ec);
    check(!ec, "{}: cannot rename {} into place: {}", path.string(), partial.filename().string(),
          ec.message());
    out.keep();
}

}  // namespace coli
