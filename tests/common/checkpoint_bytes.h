// A checkpoint's bytes by part, from its safetensors headers: the routed experts (tensors named
// "....mlp.experts.N....") and the rest (the dense weights a run keeps resident).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "io/checkpoint.h"

namespace coli::test {

struct CheckpointBytes {
    uint64_t dense = 0;    // every tensor but the routed experts'
    uint64_t experts = 0;  // the routed experts' tensors
};

inline CheckpointBytes checkpoint_bytes(const std::filesystem::path& dir) {
    CheckpointBytes b;
    const auto ckpt = Checkpoint::open(dir);  // held: a temporary would die before the loop body runs
    for (const TensorInfo& t : ckpt->tensors())
        (t.name.find(".mlp.experts.") != std::string::npos ? b.experts : b.dense) += t.nbytes;
    return b;
}

}  // namespace coli::test
