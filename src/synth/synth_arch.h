// The architectures `coli synth` can write: for each, the real model's config.json (with the dimensions
// the user asked for) and the list of its checkpoint tensors, named exactly as the real checkpoint names
// them, each with the distribution its random values are drawn from. Adding an architecture is one file
// (arch_<name>.cpp) plus one line in arch_registry.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
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
    std::string name;
    std::vector<int64_t> shape;
    ValueDist dist;
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

}  // namespace coli
