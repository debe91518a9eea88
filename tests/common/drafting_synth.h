// Checkpoints of the families that draft (`coli synth` with their MTP layer; random weights, real per-head
// widths), for the speculative-decoding tests that need no transformers oracle: widths divided by 16, three
// dense layers, a MoE layer and the MTP layer, 16 experts; vocabularies of 8080 ids and more.
#pragma once

#include <cstdint>
#include <filesystem>

#include "core/thread_pool.h"
#include "synth/synth.h"
#include "synth/synth_arch.h"

namespace coli::test {

inline constexpr const char* kDraftingArchs[] = {"deepseek_v3", "deepseek_v32", "glm_moe_dsa"};
inline constexpr int kDraftingScale = 16, kDraftingLayers = 4, kDraftingExperts = 16;

// Writes arch's checkpoint into dir / arch; returns the options it was written with (out: its directory).
inline SynthOptions drafting_synth(const std::filesystem::path& dir, const char* arch) {
    const SynthOptions o{.arch = arch,
                         .out = dir / arch,
                         .scale = kDraftingScale,
                         .layers = kDraftingLayers,
                         .experts = kDraftingExperts};
    ThreadPool pool(1);
    synth_write(o, pool);
    return o;
}

}  // namespace coli::test
