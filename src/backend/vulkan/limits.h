// The Vulkan kernels' size limits and path thresholds, shared by the capability table and the backend.
#pragma once

#include <cstdint>

namespace coli {

// Decode GEMV handles up to this many tokens per pass over the weights (gemv.comp's kMaxTokens); more
// tokens take the tiled GEMM.
inline constexpr int64_t kVulkanGemvMaxTokens = 8;
// Shaders index elements with 32-bit unsigned integers (MoltenVK and some devices lack 64-bit integers).
inline constexpr int64_t kVulkanMaxElements = int64_t{1} << 32;
// Attention scores of one pass (queries x heads x keys), in floats; longer prefills run in query chunks.
inline constexpr int64_t kVulkanScoreFloats = int64_t{16} << 20;

}  // namespace coli
