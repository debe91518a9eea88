// Writing NumPy .npy files (format version 1.0), for `coli logits`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace coli {

// Writes a little-endian float32 C-order array of the given shape; throws coli::Error on I/O failure.
void npy_write_f32(const std::filesystem::path& path, std::span<const int64_t> shape,
                   std::span<const float> data);

}  // namespace coli
