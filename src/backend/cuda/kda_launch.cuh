// What the two KDA kernels share (recurrent.cu: token by token; kda_chunk.cu: by chunks): the block size,
// and the launch of the instance compiled for the call's head size (limits.h kCudaKdaHeadDims).
#pragma once

#include <type_traits>

#include "backend/cuda/decode.cuh"
#include "core/error.h"

namespace coli::cuda {

// Threads of a kda block: one per value column, at least a warp (the block sums work on whole warps).
template <int D>
inline constexpr int kKdaThreads = D < kWarp ? kWarp : D;

// Calls launch(std::integral_constant<int, D>{}) with D == head_dim, one of the compiled head sizes; `what`
// names the kernel in the error when head_dim is none of them.
template <class Launch>
void kda_launch_for(int head_dim, const char* what, Launch&& launch) {
    switch (head_dim) {
        case 16:
            return launch(std::integral_constant<int, 16>{});
        case 32:
            return launch(std::integral_constant<int, 32>{});
        case 64:
            return launch(std::integral_constant<int, 64>{});
        case 128:
            return launch(std::integral_constant<int, 128>{});
        default:
            fail("{}: head_dim {} is not one of the compiled sizes", what, head_dim);
    }
}

}  // namespace coli::cuda
