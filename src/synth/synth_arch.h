// The architectures `coli synth` can write: for each, the real model's config.json (with the dimensions
// the user asked for) and the list of its checkpoint tensors, named exactly as the real checkpoint names
// them, each with the distribution its random values are drawn from. Adding an architecture is one file
// (arch_<name>.cpp) plus one line in arch_registry.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "synth/random_fill.h"

namespace coli {

// What the user asked `coli synth` for.
struct SynthOptions {
    std::string arch = "olmoe";
    std::filesystem::path out;
    int scale = 1;              // divides the widths (hidden, intermediate, vocabulary, heads)
    int layers = 0;             // 0 = the real model's number of layers
    int experts = 0;            // routed experts per layer; 0 = the real model's
    DType dtype = DType::bf16;  // stored dtype of every tensor
    uint64_t seed = 0;
    double shard_gb = 5;  // largest shard, GB (transformers' default max_shard_size is 5GB)
};

// One tensor of the checkpoint and how its random values are drawn.
struct SynthTensor {
    SynthTensor(std::string name_, std::vector<int64_t> shape_, ValueDist dist_,
                std::optional<DType> dtype_ = std::nullopt, int64_t zero_from_ = -1)
        : name(std::move(name_)),
          shape(std::move(shape_)),
          dist(dist_),
          dtype(dtype_),
          zero_from(zero_from_) {}

    std::string name;            // the checkpoint's name for it
    std::vector<int64_t> shape;  // stored shape
    ValueDist dist;              // distribution of its values (codes, for U8)
    std::optional<DType> dtype;  // stored dtype; unset = the --dtype of the float weights
    int64_t zero_from = -1;      // elements from this index on are 0 (padding); -1 = none
    std::string file_key;        // orders it within its shard; empty = its name (the safetensors order)
    bool with_previous = false;  // kept in the shard of the tensor before it (the parts of one expert)
};

struct SynthArch {
    std::string_view name;    // the --arch value
    std::string_view models;  // the real checkpoints whose layout and default dimensions it follows
    // config.json as transformers writes it for this model_type, with the asked-for dimensions.
    nlohmann::json (*config)(const SynthOptions& opts);
    // generation_config.json that goes with `config`.
    nlohmann::json (*generation_config)(const nlohmann::json& config);
    // Every tensor of a checkpoint with this config.json, in the order transformers' state_dict lists
    // them (which decides what goes into which shard).
    std::vector<SynthTensor> (*tensors)(const nlohmann::json& config);
};

// The architecture named `name`; throws coli::Error listing the known ones.
const SynthArch& synth_arch_find(std::string_view name);
std::vector<std::string_view> synth_arch_names();

// Shared by the architectures: `value / scale`, which must divide exactly (names `what` otherwise).
int64_t synth_scaled(int64_t value, int scale, std::string_view what);
// Weights of a matrix with `fan_in` inputs: output rms ~ gain x input rms.
ValueDist synth_matrix_dist(float gain, int64_t fan_in);
// config.json's torch_dtype for a stored float dtype ("bfloat16").
std::string synth_torch_dtype(DType t);

}  // namespace coli
