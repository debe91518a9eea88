#include "backend/vulkan/weights.h"

#include <cstring>

namespace coli::vk {

namespace {

constexpr uint64_t kWordBytes = 4;

uint64_t words_of(uint64_t bytes) {
    return (bytes + kWordBytes - 1) / kWordBytes * kWordBytes;
}

BufferPtr bytes_to_device(Stream& s, const void* src, uint64_t bytes) {
    const std::shared_ptr<Context>& ctx = s.context();
    if (ctx->unified()) {
        BufferPtr b = buffer_new(ctx, bytes, Memory::unified, Sizing::exact);
        if (bytes > 0) std::memcpy(b->mapped, src, bytes);
        return b;
    }
    BufferPtr b = buffer_new(ctx, bytes, Memory::device, Sizing::exact);
    s.upload(b, 0, src, bytes);
    return b;
}

}  // namespace

uint64_t device_bytes_of(const WeightView& w) {
    return words_of(w.data_bytes()) + words_of(w.scale_bytes());
}

DeviceWeight weight_to_device(Stream& s, const WeightView& w) {
    DeviceWeight d{w.format, w.rows, w.cols, nullptr, nullptr, device_bytes_of(w)};
    d.data = bytes_to_device(s, w.data, w.data_bytes());
    d.scales = bytes_to_device(s, w.scales, w.scale_bytes());  // an empty placeholder when unscaled
    return d;
}

}  // namespace coli::vk
