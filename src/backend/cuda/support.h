// What the CUDA backend's kernels can take, decided from the op alone (no device needed), so that
// `coli backends` and the docs show the CUDA column on any machine. Compiled into every build.
#pragma once

#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "backend/cuda/limits.h"

namespace coli {

// The capability of the CUDA kernels for an op and its parameters; ignores residency and device limits.
bool cuda_supports(const OpDesc& d);
// Whether the CUDA backend runs the op as a host step (Backend::host_step).
bool cuda_host_step(const OpDesc& d);

// Whether a CUDA device is usable here, and which (or why not: cudaGetDeviceCount's error string).
struct CudaProbe {
    bool ok = false;     // a device answered
    std::string detail;  // "NVIDIA H200, 132 SMs, 143.8 GB, sm_90" or the reason and the fix
};
CudaProbe cuda_probe();  // defined only in builds with -DCOLI_CUDA=ON

}  // namespace coli
