// Element types of tensors as stored in checkpoints (safetensors dtype strings).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace coli {

enum class DType : uint8_t {
    f64,
    f32,
    f16,
    bf16,
    f8_e4m3,
    f8_e5m2,
    i64,
    i32,
    i16,
    i8,
    u8,
    u16,
    u32,
    u64,
    boolean,
    f8_e8m0  // a power of two 2^(b - 127) per byte (OCP E8M0): the scales of MX and DeepSeek-V4 weights
};

// Bytes per element.
size_t dtype_size(DType t);
// The safetensors spelling ("F32", "BF16", "F8_E4M3", ...).
std::string_view dtype_name(DType t);
// Parses a safetensors dtype string; nullopt when unknown.
std::optional<DType> dtype_parse(std::string_view s);

}  // namespace coli
