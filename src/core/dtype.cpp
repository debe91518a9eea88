#include "core/dtype.h"

#include <array>
#include <utility>

namespace coli {

namespace {
struct DTypeInfo {
    DType type;
    std::string_view name;
    size_t size;
};
constexpr std::array kDTypes = {
    DTypeInfo{DType::f64, "F64", 8},         DTypeInfo{DType::f32, "F32", 4},
    DTypeInfo{DType::f16, "F16", 2},         DTypeInfo{DType::bf16, "BF16", 2},
    DTypeInfo{DType::f8_e4m3, "F8_E4M3", 1}, DTypeInfo{DType::f8_e5m2, "F8_E5M2", 1},
    DTypeInfo{DType::i64, "I64", 8},         DTypeInfo{DType::i32, "I32", 4},
    DTypeInfo{DType::i16, "I16", 2},         DTypeInfo{DType::i8, "I8", 1},
    DTypeInfo{DType::u8, "U8", 1},           DTypeInfo{DType::u16, "U16", 2},
    DTypeInfo{DType::u32, "U32", 4},         DTypeInfo{DType::u64, "U64", 8},
    DTypeInfo{DType::boolean, "BOOL", 1},    DTypeInfo{DType::f8_e8m0, "F8_E8M0", 1},
};
const DTypeInfo& info(DType t) {
    return kDTypes[static_cast<size_t>(t)];
}
}  // namespace

size_t dtype_size(DType t) {
    return info(t).size;
}
std::string_view dtype_name(DType t) {
    return info(t).name;
}

std::optional<DType> dtype_parse(std::string_view s) {
    for (const auto& d : kDTypes)
        if (d.name == s) return d.type;
    return std::nullopt;
}

}  // namespace coli
