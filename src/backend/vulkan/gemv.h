// Decode GEMV on Vulkan (shaders/gemv.comp): y = W x for up to kVulkanGemvMaxTokens tokens per pass over W,
// for one matrix or a batch of jobs in few dispatches (the experts of a MoE layer).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/tensor.h"
#include "backend/vulkan/buffer.h"
#include "backend/vulkan/weights.h"

namespace coli::vk {

// Jobs per dispatch at most: their token ranges travel as push constants (gemv.comp's kMaxJobs).
inline constexpr size_t kGemvMaxJobs = 16;
// Rows of a matrix that a GEMV team takes at most (gemv.comp's kRows): a grouped matmul's groups hold a
// multiple of them, so that a team's rows read one block of x.
inline constexpr int64_t kGemvMaxTeamRows = 8;

// GEMV jobs of one weight format and shape. Job j multiplies its matrices with tokens first[j] ..
// first[j + 1] (at most kVulkanGemvMaxTokens): x rows first[j] + i, or xrows[first[j] + i] when xrows is set
// (the routed tokens), into y rows first[j] + i.
struct GemvJobs {
    std::vector<const DeviceWeight*> weights;  // job j's matrices at j * mats + m
    uint32_t mats = 1;                         // matrices per job: 1, or 2 (gate and up: y = glu(gate, up))
    std::vector<uint32_t> first;               // jobs + 1 token offsets
    BufferPtr x;                               // [*, cols]
    BufferPtr xrows;                           // int32 x row of each job token, or null
    BufferPtr y;                               // [first.back(), rows]
    GluActivation act;                         // mats = 2
    uint32_t groups = 1;  // one job of one matrix: block-diagonal, x rows of groups blocks of cols (matmul)
};

// Whether the GEMV takes w: rows of whole 16-byte chunks of codes, and (grouped) groups of whole teams.
bool gemv_fits(const DeviceWeight& w, int64_t groups = 1);

}  // namespace coli::vk
