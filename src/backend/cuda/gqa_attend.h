// GQA attention of many queries (a prefill) on the device as f32 cuBLAS products, head by head over passes
// of queries: scores = scale q_h K_kvh^T, their causal softmax (mla_softmax, normalized as on the CPU),
// out_h = p V_kvh. Each cached row is then read once per tile of queries, where the key-split kernel
// (attention.cu, for few queries) reads it once per query.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/cuda/context.h"
#include "backend/cuda/kernels.h"

namespace coli::cuda {

// Query i attends to cache rows [0, pos0 + i] (the new rows already written).
//   q: [n, H hd]; k_cache, v_cache: [>= pos0 + n, Hkv hd]; out: [n, H hd]
void gqa_attend(const std::shared_ptr<Context>& ctx, const float* q, const float* k_cache,
                const float* v_cache, int64_t n, int64_t pos0, const AttentionArgs& a, float* out);

}  // namespace coli::cuda
