// The attention half of absorbed MLA (backend.h mla_attention) on the device: for every query and head, the
// scores over the latent and rope-key cache, their softmax and the probability-weighted mix of latents.
// Both halves are f32 cuBLAS products (no TF32), so that all heads share each key read and the context is
// spread over the whole device; the softmax and the split-K sum are kernels of mla.cu.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/cuda/context.h"
#include "backend/cuda/kernels.h"

namespace coli::cuda {

// What mla_attend reads and writes, all device memory.
struct MlaAttendIo {
    const float* q = nullptr;          // [n, H (dn + dr)]: the rope half of each head is read
    const float* q_abs = nullptr;      // [n, H, kv_lora]: absorbed queries (mla_absorb)
    const float* latents = nullptr;    // [>= pos0 + n, kv_lora]: latent cache, the new rows written
    const float* rope_keys = nullptr;  // [>= pos0 + n, rope_dim]: rope-key cache, the new rows written
    const float* selection = nullptr;  // null (every causal key) or [n, sel_cols] key positions, -1 for none
    int64_t sel_cols = 0;              // keys per selection row
    float* mixed = nullptr;            // [n, H, kv_lora]: sum_s p(s) latent(s) per query and head
};

// Query i attends to cache rows [0, pos0 + i], or to row i of the selection.
void mla_attend(const std::shared_ptr<Context>& ctx, const MlaAttendIo& io, int64_t n, int64_t pos0,
                const MlaArgs& a);

}  // namespace coli::cuda
