// The Vulkan backend's device tier of routed experts (backend/device/expert_tier.h) and its uploads.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/device/expert_tier.h"
#include "backend/tensor.h"
#include "backend/vulkan/stream.h"
#include "backend/vulkan/weights.h"

namespace coli::vk {

// One expert's three matrices in device memory.
struct DeviceExpert {
    DeviceWeight gate, up, down;  // [d_ff, d_model], [d_ff, d_model], [d_model, d_ff]
    uint64_t bytes = 0;           // device bytes of the three (set by the tier)
    uint64_t used_in_call = 0;    // the moe_experts call that last used it (set by the tier)
};

// The device tier. Uploads are queued on the stream before the commands that use them.
using ExpertTier = DeviceExpertTier<DeviceExpert>;
using DeviceExpertPtr = std::shared_ptr<DeviceExpert>;  // held until the commands that read it have run
std::unique_ptr<ExpertTier> expert_tier_new(Stream& stream, uint64_t capacity_bytes);

}  // namespace coli::vk
