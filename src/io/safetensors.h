// safetensors files: an 8-byte little-endian header length, a JSON header, then the data.
// The header is validated completely before anything in it is used (see safetensors.cpp for the rules).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"

namespace coli {

// One tensor of a checkpoint, located in one file.
struct TensorInfo {
    std::string name;            // full checkpoint name, e.g. "model.layers.0.mlp.gate.weight"
    DType dtype = DType::f32;    // stored element type
    std::vector<int64_t> shape;  // stored shape
    int file = 0;                // index of the file in its Checkpoint (0 for a single file)
    uint64_t offset = 0;         // absolute byte offset of the first element in the file
    uint64_t nbytes = 0;         // = product(shape) * dtype_size(dtype), checked

    int64_t numel() const;
};

// The parsed, validated header of one safetensors file.
struct SafetensorsHeader {
    std::vector<TensorInfo> tensors;                        // in data-offset order
    std::unordered_map<std::string, std::string> metadata;  // "__metadata__", if present
    uint64_t data_start = 0;                                // 8 + header length
};

// Parses and validates a header given the file's first bytes (at least 8 + header length of them) and
// total size. Throws coli::Error naming `what` (usually the path) and the problem: short file, header
// length past the end, bad JSON, unknown dtype, shape/size mismatch, offsets past the end or reversed,
// overlapping ranges, duplicate names. Gaps between ranges are accepted. Exposed separately from the
// file so that the fuzzer can drive it.
SafetensorsHeader safetensors_parse_header(std::string_view bytes, uint64_t file_size, std::string_view what,
                                           int file_index = 0);

// Bytes of a tensor of this shape and dtype; nullopt when a dim is negative or the element count or the
// byte count overflows int64 (zero dims excluded, so that numel() cannot overflow in any order).
std::optional<uint64_t> shape_nbytes(std::span<const int64_t> shape, DType dtype);

// Reads and validates the header of the file at `path`.
SafetensorsHeader safetensors_read_header(const std::filesystem::path& path, int file_index = 0);

// Writes tensors to a safetensors file (for `coli synth`, tests and fixtures). Each entry names its
// dtype/shape and points to nbytes of data; offsets are assigned in the given order.
struct TensorWrite {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    const void* data;
};
void safetensors_write(const std::filesystem::path& path, const std::vector<TensorWrite>& tensors,
                       const std::unordered_map<std::string, std::string>& metadata = {});

}  // namespace coli
