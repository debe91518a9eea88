#include "backend/vulkan/expert_tier.h"

namespace coli::vk {

namespace {
uint64_t expert_bytes(const ExpertWeights& e) {
    return device_bytes_of(e.gate.host) + device_bytes_of(e.up.host) + device_bytes_of(e.down.host);
}
}  // namespace

std::unique_ptr<ExpertTier> expert_tier_new(Stream& stream, uint64_t capacity_bytes) {
    auto upload = [&stream](const ExpertWeights& e) {
        auto d = std::make_shared<DeviceExpert>();
        d->gate = weight_to_device(stream, e.gate.host);
        d->up = weight_to_device(stream, e.up.host);
        d->down = weight_to_device(stream, e.down.host);
        return d;
    };
    // An evicted expert's buffers are kept by the stream until the commands already queued have run.
    return std::make_unique<ExpertTier>("device expert tier", capacity_bytes, expert_bytes, upload);
}

}  // namespace coli::vk
