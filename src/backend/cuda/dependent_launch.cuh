// Programmatic dependent launch (sm_90): a kernel launched with launch_dependent may start while the kernel
// before it on the stream is still running. Its blocks become resident as the earlier kernel's blocks leave
// the SMs, do the work that does not read the earlier kernel's output (issuing loads of weights), and call
// grid_dependency_wait() before reading anything the earlier kernel writes: that waits for the whole earlier
// grid to complete and its writes to be visible. A kernel lets its dependents start once every one of its
// blocks has called grid_dependents_launch() (or exited). Without the launch attribute (or before sm_90)
// both calls do nothing and the launch is an ordinary one.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace coli::cuda {

__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void grid_dependents_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, s>>>(args...), allowed to overlap the kernel before it on s.
template <typename... Params, typename... Args>
cudaError_t launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                             Args&&... args) {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = s;
    config.attrs = attr;
    config.numAttrs = 1;
    return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace coli::cuda
