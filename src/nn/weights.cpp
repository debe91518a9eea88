#include "nn/weights.h"

#include <cstring>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace coli {

Format format_of_dtype(const TensorInfo& t) {
    switch (t.dtype) {
        case DType::f32:
            return Format::f32;
        case DType::bf16:
            return Format::bf16;
        case DType::f16:
            return Format::f16;
        default:
            fail("tensor {} has dtype {}, which is not a weight format", t.name, dtype_name(t.dtype));
    }
}

namespace {

bool is_e8m0(DType d) {
    return d == DType::f8_e8m0 || d == DType::u8;  // U8: a writer without an E8M0 dtype
}

// MXFP4 (docs/models.md 9.3, 9.6): codes U8 (compressed-tensors) or I8 (DeepSeek-V4) [out, in/2], e8m0
// scales [out, in/32], in place.
Weight mxfp4_view_of(const TensorInfo& t, std::span<const uint8_t> bytes, const TensorInfo* scale,
                     std::span<const uint8_t> scale_bytes) {
    check(scale != nullptr, "tensor {} is {} without its MXFP4 e8m0 scales (<w>{} or <w>.scale)", t.name,
          dtype_name(t.dtype), kPackedScaleSuffix);
    check(t.shape.size() == 2, "{}: packed MXFP4 codes should be {} [out, in/2], not [{}]", t.name,
          dtype_name(t.dtype), fmt::join(t.shape, "x"));
    const int64_t rows = t.shape[0], cols = 2 * t.shape[1];  // two codes per byte
    check(cols % kMxBlock == 0,
          "{}: U8 [{}, {}] holds {} inputs per row, not a multiple of the MXFP4 block {}", t.name, rows,
          t.shape[1], cols, kMxBlock);
    const std::vector<int64_t> want = {rows, cols / kMxBlock};
    check(is_e8m0(scale->dtype) && scale->shape == want,
          "{}: scales {} [{}], expected F8_E8M0 or U8 [{}, {}] (one e8m0 per {} inputs of {}, whose [{}, {}] "
          "codes hold {} inputs per row)",
          scale->name, dtype_name(scale->dtype), fmt::join(scale->shape, "x"), want[0], want[1], kMxBlock,
          t.name, rows, t.shape[1], cols);
    Weight w;
    w.host = WeightView{Format::mxfp4, rows, cols, bytes.data(), scale_bytes.data()};
    return w;
}

}  // namespace

Weight weight_view_of(const TensorInfo& t, std::span<const uint8_t> bytes, const TensorInfo* scale,
                      std::span<const uint8_t> scale_bytes) {
    check(!t.shape.empty(), "tensor {} is a scalar, expected a matrix or vector", t.name);
    if (t.dtype == DType::u8 || t.dtype == DType::i8) return mxfp4_view_of(t, bytes, scale, scale_bytes);
    int64_t cols = 1;
    for (size_t i = 1; i < t.shape.size(); ++i) cols *= t.shape[i];
    Weight w;
    if (t.dtype == DType::f8_e4m3) {
        // Block FP8 (DeepSeek, GLM): e4m3 codes and an f32 scale per 128 x 128 block, used in place.
        check(scale != nullptr, "tensor {} is F8_E4M3 without its {}_scale_inv block scales", t.name, t.name);
        const int64_t rows = t.shape[0];
        const std::vector<int64_t> want = {(rows + kFp8Block - 1) / kFp8Block,
                                           (cols + kFp8Block - 1) / kFp8Block};
        check((scale->dtype == DType::f32 || is_e8m0(scale->dtype)) && scale->shape == want,
              "{}: scales {} {}, expected F32, F8_E8M0 or U8 [{}, {}] (one per {} x {} block)", scale->name,
              dtype_name(scale->dtype), fmt::join(scale->shape, "x"), want[0], want[1], kFp8Block, kFp8Block);
        const void* scales = scale_bytes.data();
        if (scale->dtype != DType::f32) {
            // E8M0 powers of two as the f32 block scales the format keeps: a few bytes per 16 K weights.
            auto decoded = std::make_shared<std::vector<float>>(scale_bytes.size());
            for (size_t i = 0; i < scale_bytes.size(); ++i) (*decoded)[i] = e8m0_to_f32(scale_bytes[i]);
            scales = decoded->data();
            w.owned = decoded;
        }
        w.host = WeightView{Format::fp8_e4m3_block, rows, cols, bytes.data(), scales};
        return w;
    }
    check(scale == nullptr,
          "tensor {} ({}) has scales, which only F8_E4M3 weights take (block FP8) and U8 ones (packed MXFP4)",
          t.name, dtype_name(t.dtype));
    w.host = WeightView{format_of_dtype(t), t.shape[0], cols, bytes.data(), nullptr};
    if (t.shape.size() == 1) w.host.rows = 1, w.host.cols = t.shape[0];
    return w;
}

std::string scale_name_of(const std::string& weight_name) {
    return weight_name + std::string(kScaleInvSuffix);
}

std::string dot_scale_name_of(const std::string& weight_name) {
    constexpr std::string_view kWeight = ".weight";
    if (!weight_name.ends_with(kWeight)) return {};
    return weight_name.substr(0, weight_name.size() - kWeight.size()) + ".scale";
}

const TensorInfo* scales_tensor_of(const Checkpoint& ckpt, const TensorInfo& weight) {
    if (weight.dtype != DType::f8_e4m3 && weight.dtype != DType::i8) return nullptr;
    if (const TensorInfo* t = ckpt.find(scale_name_of(weight.name))) return t;
    const std::string dot = dot_scale_name_of(weight.name);
    return dot.empty() ? nullptr : ckpt.find(dot);
}

bool is_scales_name_of(const std::string& scale, const std::string& weight) {
    if (weight.ends_with(kPackedSuffix)) return scale == packed_scale_name_of(weight);
    return scale == scale_name_of(weight) || (!scale.empty() && scale == dot_scale_name_of(weight));
}

std::string packed_scale_name_of(const std::string& packed_name) {
    check(packed_name.ends_with(kPackedSuffix), "tensor {} is not a packed weight (<w>{})", packed_name,
          kPackedSuffix);
    return packed_name.substr(0, packed_name.size() - kPackedSuffix.size()) + std::string(kPackedScaleSuffix);
}

WeightLoader::WeightLoader(const Checkpoint& ckpt, Ops& ops, int dense_bits)
    : ckpt_(ckpt), ops_(ops), dense_bits_(dense_bits), progress_("loading weights", 0, "loaded", true) {
    check(dense_bits == 0 || dense_bits == 8 || dense_bits == 4, "--dense-bits must be 8 or 4, got {}",
          dense_bits);
}

namespace {

// Decodes a host weight into f32 rows (exact for every stored float format).
std::vector<float> weight_to_f32(const WeightView& v) {
    std::vector<float> out(static_cast<size_t>(v.rows * v.cols));
    for (int64_t r = 0; r < v.rows; ++r) weight_decode_row(v, r, &out[r * v.cols]);
    return out;
}

// Moves an encoded weight into a Weight that owns its bytes.
Weight weight_owning(EncodedWeight&& e) {
    auto owned = std::make_shared<EncodedWeight>(std::move(e));
    Weight w;
    w.host = owned->view();
    w.owned = owned;
    return w;
}

}  // namespace

std::span<const uint8_t> WeightLoader::stored(const TensorInfo& t) {
    bytes_stored_ += t.nbytes;
    if (ckpt_.shapes_only()) return {};  // views without bytes: the weights are only ever described
    const std::span<const uint8_t> bytes = ckpt_.map(t);
    // Resident weights are read now, not at the first token: one byte per page brings the page in.
    uint8_t sum = 0;
    for (size_t i = 0; i < bytes.size(); i += kPageBytes)
        sum ^= static_cast<const volatile uint8_t&>(bytes[i]);
    page_xor_ ^= sum;
    progress_.advance(t.nbytes);
    return bytes;
}

Weight WeightLoader::matrix(const std::string& name) {
    const TensorInfo& t = ckpt_.get(name);
    const TensorInfo* scale = scales_tensor_of(ckpt_, t);
    const std::span<const uint8_t> codes = stored(t);
    Weight w = weight_view_of(t, codes, scale, scale ? stored(*scale) : std::span<const uint8_t>{});
    // Checked once here, so that the CPU matmul of a resident fp8 weight skips its NaN fix.
    if (w.host.format == Format::fp8_e4m3_block)
        w.host.nan_free = fp8_codes_nan_free(codes.data(), codes.size());
    if (dense_bits_ != 0) {
        const Format target = dense_bits_ == 8 ? Format::int8_row : Format::int4_g64;
        const bool fits = target != Format::int4_g64 || w.cols() % kInt4Group == 0;
        check(fits, "--dense-bits 4 needs a multiple of {} input features; {} has {}", kInt4Group, name,
              w.cols());
        if (ckpt_.shapes_only()) {
            const WeightView shape{target, w.rows(), w.cols(), nullptr, nullptr};
            w = Weight{};
            w.host = shape;
        } else {
            std::vector<float> f = weight_to_f32(w.host);
            w = weight_owning(weight_encode(target, f.data(), w.rows(), w.cols()));
        }
    }
    bytes_held_ += w.host.data_bytes() + w.host.scale_bytes();
    return ops_.weight(w);
}

Weight WeightLoader::table(const std::string& name) {
    const TensorInfo& t = ckpt_.get(name);
    Weight w = weight_view_of(t, stored(t));
    bytes_held_ += t.nbytes;
    return ops_.weight(w);
}

void config_shape_check(const TensorInfo& t, const ConfigShape& expect) {
    // The shape of the values the tensor holds: as stored for float and FP8 dtypes; MXFP4 codes (U8 or I8,
    // two per byte) store [out, in / 2]; any other dtype is left to its reader.
    std::vector<int64_t> shape = t.shape;
    const bool float_dtype =
        t.dtype == DType::f32 || t.dtype == DType::f16 || t.dtype == DType::bf16 || t.dtype == DType::f8_e4m3;
    const bool mxfp4_codes = (t.dtype == DType::u8 || t.dtype == DType::i8) && shape.size() == 2;
    if (!float_dtype && !mxfp4_codes) return;
    if (mxfp4_codes) shape[1] *= 2;
    check(shape == expect.dims, "config.json: {} give {} a shape of [{}], but the checkpoint's is [{}]{}",
          expect.keys, t.name, fmt::join(expect.dims, ", "), fmt::join(shape, ", "),
          mxfp4_codes ? " (MXFP4 codes, two per byte)" : "");
}

Weight WeightLoader::matrix(const std::string& name, const ConfigShape& expect) {
    config_shape_check(ckpt_.get(name), expect);
    return matrix(name);
}

Weight WeightLoader::vector(const std::string& name, const ConfigShape& expect) {
    config_shape_check(ckpt_.get(name), expect);
    return vector(name);
}

std::vector<float> WeightLoader::floats(const std::string& name, const ConfigShape& expect) {
    config_shape_check(ckpt_.get(name), expect);
    return floats(name);
}

Weight WeightLoader::vector(const std::string& name) {
    const TensorInfo& t = ckpt_.get(name);
    check(t.shape.size() == 1, "tensor {} should be a vector, has {} dimensions", name, t.shape.size());
    return f32(floats(name), 1, t.shape[0]);
}

std::vector<float> WeightLoader::floats(const std::string& name) {
    const TensorInfo& t = ckpt_.get(name);
    const Weight w = weight_view_of(t, stored(t));
    if (ckpt_.shapes_only()) return std::vector<float>(static_cast<size_t>(w.rows() * w.cols()));  // zeros
    return weight_to_f32(w.host);
}

std::vector<int64_t> WeightLoader::integers(const std::string& name) {
    const TensorInfo& t = ckpt_.get(name);
    check(t.dtype == DType::i64 || t.dtype == DType::i32, "tensor {} has dtype {}, expected I64 or I32", name,
          dtype_name(t.dtype));
    const std::span<const uint8_t> bytes = stored(t);
    std::vector<int64_t> out(static_cast<size_t>(t.numel()));
    bytes_held_ += t.nbytes;
    if (ckpt_.shapes_only()) return out;  // zeros
    for (size_t i = 0; i < out.size(); ++i) {
        if (t.dtype == DType::i64) {
            std::memcpy(&out[i], bytes.data() + i * sizeof(int64_t), sizeof(int64_t));
        } else {
            int32_t v;
            std::memcpy(&v, bytes.data() + i * sizeof(int32_t), sizeof(int32_t));
            out[i] = v;
        }
    }
    return out;
}

Weight WeightLoader::f32(std::vector<float> values, int64_t rows, int64_t cols) {
    check(static_cast<int64_t>(values.size()) == rows * cols, "{} values for an f32 weight [{}, {}]",
          values.size(), rows, cols);
    EncodedWeight e{Format::f32, rows, cols, {}, {}};
    e.data.resize(values.size() * sizeof(float));
    std::copy_n(reinterpret_cast<const uint8_t*>(values.data()), e.data.size(), e.data.data());
    bytes_held_ += e.data.size();
    return ops_.weight(weight_owning(std::move(e)));
}

std::string weight_formats_summary(const WeightLoader& load, DType dense, std::string_view experts) {
    return fmt::format("dense {}{}, experts {}", dtype_name(dense),
                       load.dense_bits() ? fmt::format(" -> int{} at load", load.dense_bits()) : "", experts);
}

}  // namespace coli
