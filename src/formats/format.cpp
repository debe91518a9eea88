// Format names, shapes and byte sizes.
//
// Where the rules that format.h points to live:
//   scalar.cpp      bf16/f16/fp8/e2m1/e8m0 conversions (round-to-nearest-even, NaN and saturation rules)
//   encode.cpp      weight_encode: scale choices and what NaN/inf inputs become, per format
//   decode.cpp      weight_decode_row: the exact value of every code
//   kernels.h       the canonical summation order of every dot product, shared by
//   matmul_ref.cpp  (scalar definition), matmul_avx2.cpp, matmul_avx512.cpp and matmul.cpp (threads, tiling)
//   simd.cpp        run-time instruction set detection
#include "formats/format.h"
#include "core/error.h"
#include "formats/kernels.h"

#include <array>

namespace coli {

namespace {

struct FormatInfo {
    Format format;
    std::string_view name;   // the user-facing name (CLI, logs)
    std::string_view alias;  // the enum spelling, also accepted by format_parse
    bool quantized;          // a lossy encoding of f32
    int group;               // cols must be a multiple of this (1 = any)
};

constexpr std::array<FormatInfo, 7> kFormats = {{
    {Format::f32, "f32", "f32", false, 1},
    {Format::bf16, "bf16", "bf16", false, 1},
    {Format::f16, "f16", "f16", false, 1},
    {Format::int8_row, "int8", "int8_row", true, 1},
    {Format::int4_g64, "int4-g64", "int4_g64", true, kInt4Group},
    {Format::mxfp4, "mxfp4", "mxfp4", true, kMxBlock},
    // Partial 128-column edge blocks are allowed, so any cols works.
    {Format::fp8_e4m3_block, "fp8-e4m3-block", "fp8_e4m3_block", true, 1},
}};

const FormatInfo& format_info(Format f) {
    for (const auto& info : kFormats)
        if (info.format == f) return info;
    fail("unknown weight format code {}", static_cast<int>(f));
}

}  // namespace

std::string_view format_name(Format f) {
    return format_info(f).name;
}

std::optional<Format> format_parse(std::string_view s) {
    for (const auto& info : kFormats)
        if (s == info.name || s == info.alias) return info.format;
    return std::nullopt;
}

bool format_is_quantized(Format f) {
    return format_info(f).quantized;
}

void format_check_shape(Format f, int64_t rows, int64_t cols) {
    const auto& info = format_info(f);
    check(rows >= 0 && cols >= 0, "weight format {}: shape [{}, {}] has a negative dimension", info.name,
          rows, cols);
    check(cols % info.group == 0,
          "weight format {}: cols = {} is not a multiple of {} (the format's group size along the input "
          "dimension); pick another format for this matrix",
          info.name, cols, info.group);
}

size_t WeightView::data_bytes() const {
    const auto n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
    switch (format) {
        case Format::f32:
            return n * sizeof(float);
        case Format::bf16:
        case Format::f16:
            return n * sizeof(uint16_t);
        case Format::int8_row:
        case Format::fp8_e4m3_block:
            return n;
        case Format::int4_g64:
        case Format::mxfp4:
            return n / 2;  // two 4-bit codes per byte (cols is even: a multiple of 32/64)
    }
    return 0;
}

size_t WeightView::scale_bytes() const {
    const auto r = static_cast<size_t>(rows);
    const auto c = static_cast<size_t>(cols);
    switch (format) {
        case Format::f32:
        case Format::bf16:
        case Format::f16:
            return 0;
        case Format::int8_row:
            return r * sizeof(float);
        case Format::int4_g64:
            return r * (c / kInt4Group) * sizeof(float);
        case Format::mxfp4:
            return r * (c / kMxBlock);  // one e8m0 byte per block
        case Format::fp8_e4m3_block: {
            const auto block_rows = (r + kFp8Block - 1) / kFp8Block;
            return block_rows * static_cast<size_t>(formats_internal::fp8_scale_cols(cols)) * sizeof(float);
        }
    }
    return 0;
}

std::optional<WeightView> weight_rows_view(const WeightView& w, int64_t r0, int64_t count) {
    if (r0 < 0 || count < 0 || r0 + count > w.rows) return std::nullopt;
    if (w.format == Format::fp8_e4m3_block &&
        (r0 % kFp8Block != 0 || (count % kFp8Block != 0 && r0 + count != w.rows)))
        return std::nullopt;
    WeightView v = w;
    v.rows = count;
    // Both byte counts are linear in the rows here: per row, or per whole 128-row block for fp8.
    const WeightView before{w.format, r0, w.cols, nullptr, nullptr};
    v.data = static_cast<const uint8_t*>(w.data) + before.data_bytes();
    if (w.scales != nullptr) v.scales = static_cast<const uint8_t*>(w.scales) + before.scale_bytes();
    return v;
}

namespace formats_internal {

void weight_view_check(const WeightView& w) {
    format_check_shape(w.format, w.rows, w.cols);
    if (w.rows == 0 || w.cols == 0) return;
    check(w.data != nullptr, "weight view ({} [{}, {}]) has no data", format_name(w.format), w.rows, w.cols);
    check(w.scale_bytes() == 0 || w.scales != nullptr, "weight view ({} [{}, {}]) has no scales",
          format_name(w.format), w.rows, w.cols);
}

}  // namespace formats_internal

}  // namespace coli
