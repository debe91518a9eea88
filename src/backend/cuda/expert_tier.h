// The CUDA backend's VRAM tier of routed experts (backend/device/expert_tier.h) and its uploads.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "backend/cuda/context.h"
#include "backend/cuda/kernels.h"
#include "backend/device/expert_tier.h"
#include "backend/tensor.h"

namespace coli::cuda {

// One expert's three matrices in device memory.
struct DeviceExpert {
    DeviceWeight gate, up, down;   // views into `memory`
    std::shared_ptr<void> memory;  // one allocation for all codes and scales
    cudaEvent_t ready = nullptr;   // recorded on the upload stream after the copies
    uint64_t bytes = 0;            // size of `memory` (set by the tier)
    uint64_t used_in_call = 0;     // the moe_experts call that last used it (set by the tier)
    ~DeviceExpert();
};

// The VRAM tier. Uploads run on the context's upload stream and complete on each expert's `ready` event,
// which the compute stream waits for, so one expert's upload overlaps the previous expert's kernels.
using ExpertTier = DeviceExpertTier<DeviceExpert>;
using DeviceExpertPtr = std::shared_ptr<DeviceExpert>;  // held until the kernels that read it are queued
std::unique_ptr<ExpertTier> expert_tier_new(std::shared_ptr<Context> ctx, uint64_t capacity_bytes);

// Device bytes of one expert's three matrices.
uint64_t expert_bytes(const ExpertWeights& e);
// Bytes of codes plus scales of a host weight, each part rounded up to the device alignment.
uint64_t device_bytes_of(const WeightView& w);
// Copies a host weight into `dst` (device memory of device_bytes_of(w) bytes) on stream s and returns
// the device view.
DeviceWeight weight_copy_async(const WeightView& w, uint8_t* dst, cudaStream_t s);

}  // namespace coli::cuda
