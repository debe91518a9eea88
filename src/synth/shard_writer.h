// Writing one safetensors file whose tensor data arrives in pieces, so that a multi-GB shard of random
// weights is written without ever being held in memory. The file is laid out the way safetensors_write
// (and the official writer) lays it out: header padded with spaces to 8 bytes, tensors packed in the
// given order; it is written beside the target and renamed into place once complete.
//
// Data goes out with O_DIRECT in large aligned blocks where the filesystem allows it: buffered writes of
// many GB are throttled by page-cache writeback (docs/benchmarks.md, `coli synth`) and would leave the
// whole checkpoint in the page cache, where it distorts the first benchmark that reads it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/file.h"

namespace coli {

// A tensor of the file: its name, dtype and shape; the data comes later through ShardWriter::append.
struct ShardTensor {
    std::string name;
    DType dtype = DType::f32;
    std::vector<int64_t> shape;
    uint64_t nbytes() const;  // product(shape) * dtype_size(dtype)
};

class ShardWriter {
public:
    // Writes the header at once. Throws coli::Error when a name repeats or the file cannot be created.
    ShardWriter(std::filesystem::path path, const std::vector<ShardTensor>& tensors,
                const std::map<std::string, std::string>& metadata);
    ~ShardWriter();  // removes the partial file unless finish() succeeded
    ShardWriter(const ShardWriter&) = delete;
    ShardWriter& operator=(const ShardWriter&) = delete;

    // Appends the next n bytes of tensor data (tensors in the constructor's order, back to back).
    void append(const void* data, size_t n);

    // Checks that every tensor's bytes arrived, closes, renames into place, and re-reads the header with
    // the engine's own parser, so that a file this writer makes is one the engine accepts.
    void finish();

    uint64_t data_bytes() const { return data_total_; }  // sum of the tensors' bytes

private:
    void write_all(const void* data, size_t n);  // through the staging buffer
    void stage_flush(size_t n);                  // writes staging_[0, n) at file_pos_

    std::filesystem::path path_, partial_;
    int fd_ = -1;         // buffered: the header-and-tail writes, and everything where O_DIRECT is refused
    int fd_direct_ = -1;  // O_DIRECT, or -1
    AlignedBytes staging_;
    size_t staged_ = 0;      // bytes in staging_
    uint64_t file_pos_ = 0;  // bytes already in the file
    uint64_t data_total_ = 0, data_written_ = 0;
    bool done_ = false;
};

}  // namespace coli
