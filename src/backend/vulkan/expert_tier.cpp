#include "backend/vulkan/expert_tier.h"

#include "core/error.h"

namespace coli::vk {

namespace {
uint64_t expert_bytes(const ExpertWeights& e) {
    return device_bytes_of(e.gate.host) + device_bytes_of(e.up.host) + device_bytes_of(e.down.host);
}
}  // namespace

bool ExpertTier::make_room(uint64_t bytes) {
    if (bytes > capacity_) return false;
    auto it = lru_.end();
    while (stats_.resident_bytes + bytes > capacity_ && it != lru_.begin()) {
        --it;
        Slot& s = slots_.at(*it);
        if (s.expert->used_in_call == call_) continue;  // needed by the call in flight
        stats_.resident_bytes -= s.expert->bytes;
        ++stats_.evictions;
        slots_.erase(*it);  // the stream keeps the buffers until the commands already queued have run
        it = lru_.erase(it);
    }
    return stats_.resident_bytes + bytes <= capacity_;
}

std::shared_ptr<DeviceExpert> ExpertTier::acquire(const ExpertWeights& e) {
    check(e.layer >= 0, "vulkan: expert {} has no layer: the model must set ExpertWeights::layer", e.id);
    const uint64_t key = key_of(e.layer, e.id);
    if (auto found = slots_.find(key); found != slots_.end()) {
        Slot& s = found->second;
        check(s.expert->gate.rows == e.gate.rows() && s.expert->gate.cols == e.gate.cols() &&
                  s.expert->gate.format == e.gate.format(),
              "vulkan: expert ({}, {}) changed shape in the device tier", e.layer, e.id);
        lru_.splice(lru_.begin(), lru_, s.pos);
        s.expert->used_in_call = call_;
        ++stats_.hits;
        return s.expert;
    }
    const bool fits = make_room(expert_bytes(e));  // before allocating: the tier never exceeds its budget
    auto d = std::make_shared<DeviceExpert>();
    d->gate = weight_to_device(stream_, e.gate.host);
    d->up = weight_to_device(stream_, e.up.host);
    d->down = weight_to_device(stream_, e.down.host);
    d->bytes = expert_bytes(e);
    d->used_in_call = call_;
    ++stats_.uploads;
    stats_.upload_bytes += d->bytes;
    if (fits) {
        lru_.push_front(key);
        slots_.emplace(key, Slot{d, lru_.begin()});
        stats_.resident_bytes += d->bytes;
    } else {
        ++stats_.uncached;  // used for this call only; freed after its commands
    }
    return d;
}

}  // namespace coli::vk
