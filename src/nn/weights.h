// Dense weights from a checkpoint: kept as stored (the default) or re-quantized at load when the user
// asked for it (--dense-bits 8|4: lossy, explicit, reported).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/ops.h"
#include "core/progress.h"
#include "io/checkpoint.h"

namespace coli {

// The weight format a stored dtype is read as, without conversion; throws coli::Error naming the
// tensor when the dtype is not a weight format (e.g. I64).
Format format_of_dtype(const TensorInfo& t);

// A host view of a stored tensor's bytes, in place, as [rows, cols] = shape[0], product(rest). Quantized
// weights come with their scales tensor (docs/models.md 9.4, 9.3, 9.6):
//   F8_E4M3 [out, in] + F32 `<name>_scale_inv` or `<w>.scale` [ceil(out/128), ceil(in/128)]
//       -> fp8_e4m3_block; E8M0 block scales (F8_E8M0 or U8, DeepSeek-V4) are decoded to f32 into memory
//       the weight owns (exact: powers of two), the codes stay in place
//   U8 `<w>.weight_packed` [out, in/2] + U8 `<w>.weight_scale` [out, in/32]  -> mxfp4 (compressed-tensors
//   mxfp4-pack-quantized: element 2j in the low nibble, e8m0 scale per 32 inputs)
//   I8 `<w>.weight` [out, in/2] + F8_E8M0 or U8 `<w>.scale` [out, in/32]  -> mxfp4 (DeepSeek-V4's routed
//   experts: the same codes and scales)
// A scales tensor of the wrong dtype or shape is a coli::Error naming it.
Weight weight_view_of(const TensorInfo& t, std::span<const uint8_t> bytes, const TensorInfo* scale = nullptr,
                      std::span<const uint8_t> scale_bytes = {});
// "...weight" -> "...weight_scale_inv": where block-FP8 checkpoints keep a weight's scales.
inline constexpr std::string_view kScaleInvSuffix = "_scale_inv";
std::string scale_name_of(const std::string& weight_name);
// "<w>.weight" -> "<w>.scale": where DeepSeek-V4 keeps a weight's scales (FP8 blocks, MXFP4); "" for a
// name that does not end in ".weight".
std::string dot_scale_name_of(const std::string& weight_name);
// The scales tensor of a stored F8_E4M3 or I8 weight (`_scale_inv` first, then `.scale`); nullptr for
// other dtypes or when the checkpoint has none.
const TensorInfo* scales_tensor_of(const Checkpoint& ckpt, const TensorInfo& weight);
// Whether `scale` names the scales of `weight` in one of the spellings above.
bool is_scales_name_of(const std::string& scale, const std::string& weight);

// compressed-tensors names of an MXFP4 weight: "<w>.weight_packed" holds the codes, "<w>.weight_scale"
// the scales.
inline constexpr std::string_view kPackedSuffix = ".weight_packed";
inline constexpr std::string_view kPackedScaleSuffix = ".weight_scale";
// "<w>.weight_packed" -> "<w>.weight_scale"; throws coli::Error when the name is not a packed weight's.
std::string packed_scale_name_of(const std::string& packed_name);

// The shape config.json gives a tensor, and the keys it comes from: a checkpoint tensor of another shape is
// an error naming both (config_shape_check). Float and FP8 tensors are checked as stored, MXFP4 codes (two
// per byte) as the values they hold.
struct ConfigShape {
    std::vector<int64_t> dims;  // [rows, cols] of a matrix, [n] of a vector
    std::string keys;           // "num_attention_heads, head_dim and hidden_size"
};

// Throws coli::Error when the shape of t's values is not expect's (float, FP8 or MXFP4 codes; others pass).
void config_shape_check(const TensorInfo& t, const ConfigShape& expect);

class WeightLoader {
public:
    // dense_bits: 0 keeps matrices as stored; 8 or 4 quantizes them to int8 (per row) / int4-g64.
    WeightLoader(const Checkpoint& ckpt, Ops& ops, int dense_bits);

    // A matrix [out, in] for matmul, uploaded to the backend. Quantized when dense_bits is set.
    Weight matrix(const std::string& name);
    // A table [rows, d] read by row (embeddings): always as stored.
    Weight table(const std::string& name);
    // A vector (norm gains) as f32 [1, n]; exact for every float dtype.
    Weight vector(const std::string& name);
    // The same, with the shape the config gives the tensor checked first (config_shape_check).
    Weight matrix(const std::string& name, const ConfigShape& expect);
    Weight vector(const std::string& name, const ConfigShape& expect);
    std::vector<float> floats(const std::string& name, const ConfigShape& expect);
    // A tensor's values decoded to f32 (any float dtype, any shape), for weights computed at load.
    std::vector<float> floats(const std::string& name);
    // An f32 weight [rows, cols] holding values (rows * cols of them), uploaded to the backend.
    Weight f32(std::vector<float> values, int64_t rows, int64_t cols);
    // An integer tensor's values (I64 or I32, any shape): tables such as DeepSeek-V4's tid2eid.
    std::vector<int64_t> integers(const std::string& name);
    // A tensor's dtype and shape (throws coli::Error naming a missing one).
    const TensorInfo& info(const std::string& name) const { return ckpt_.get(name); }

    uint64_t bytes_stored() const { return bytes_stored_; }  // checkpoint bytes of what was loaded
    uint64_t bytes_held() const { return bytes_held_; }      // bytes as held (after quantization)
    int dense_bits() const { return dense_bits_; }
    void finish() { progress_.finish(); }  // ends the progress line (terminals only)

private:
    static constexpr size_t kPageBytes = 4096;
    // The tensor's stored bytes, read into memory now (with progress on a terminal) and counted.
    std::span<const uint8_t> stored(const TensorInfo& t);

    const Checkpoint& ckpt_;
    Ops& ops_;
    int dense_bits_;
    uint64_t bytes_stored_ = 0, bytes_held_ = 0;
    uint8_t page_xor_ = 0;  // keeps the page reads from being optimized away
    ProgressMeter progress_;
};

// "dense BF16 -> int8 at load, experts F8_E4M3": the stored dtypes `coli info` shows.
std::string weight_formats_summary(const WeightLoader& load, DType dense, std::string_view experts);

}  // namespace coli
