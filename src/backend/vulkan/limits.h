// The Vulkan kernels' size limits and path thresholds, shared by the capability table and the backend.
#pragma once

#include <bit>
#include <cstdint>

namespace coli {

// Decode GEMV handles up to this many tokens per pass over the weights (gemv.comp's kMaxTokens); more
// tokens take the tiled GEMM.
inline constexpr int64_t kVulkanGemvMaxTokens = 8;
// Shaders index elements with 32-bit unsigned integers (MoltenVK and some devices lack 64-bit integers).
inline constexpr int64_t kVulkanMaxElements = int64_t{1} << 32;
// Attention scores of one pass (queries x heads x keys), in floats; longer prefills run in query chunks.
inline constexpr int64_t kVulkanScoreFloats = int64_t{16} << 20;

// Workgroups per dispatch dimension every device offers (the Vulkan minimum of maxComputeWorkGroupCount).
inline constexpr int64_t kVulkanMaxGroups = 65535;
// Indexer heads dsa_scores.comp takes at most (its kMaxHeads).
inline constexpr int64_t kVulkanDsaMaxHeads = 128;

// short_conv keeps each channel's window of K inputs in registers: kernels up to this width (Kimi's is 4).
inline constexpr int64_t kVulkanConvMaxTaps = 16;
// kda runs one invocation per value column of a head; every device offers workgroups of this many
// (maxComputeWorkGroupSize minimum), and the column of the state each keeps in registers stays this short.
inline constexpr int64_t kVulkanKdaMaxHeadDim = 128;

// kda.comp sums the norms over the head in a tree: head sizes that are powers of two, up to the maximum.
inline bool vulkan_kda_head_dim_ok(int64_t head_dim) {
    return head_dim > 0 && head_dim <= kVulkanKdaMaxHeadDim &&
           std::has_single_bit(static_cast<uint64_t>(head_dim));
}

}  // namespace coli
