// The device tier of routed experts: device copies of the experts the store hands over as host views,
// kept by least-recent use within a byte budget. Keyed by (layer, expert id), never by host address (the
// RAM cache reuses its slots). Uploads are queued on the stream before the commands that use them.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>

#include "backend/tensor.h"
#include "backend/vulkan/stream.h"
#include "backend/vulkan/weights.h"

namespace coli::vk {

// One expert's three matrices in device memory.
struct DeviceExpert {
    DeviceWeight gate, up, down;  // [d_ff, d_model], [d_ff, d_model], [d_model, d_ff]
    uint64_t bytes = 0;           // device bytes of the three
    uint64_t used_in_call = 0;    // the moe_experts call that last used it (not evictable during it)
};

struct TierStats {
    uint64_t hits = 0;            // experts found resident
    uint64_t uploads = 0;         // experts copied host -> device
    uint64_t upload_bytes = 0;    // bytes copied
    uint64_t evictions = 0;       // experts dropped for space
    uint64_t uncached = 0;        // experts used once without a tier slot (tier too small)
    uint64_t resident_bytes = 0;  // bytes held now
};

class ExpertTier {
public:
    ExpertTier(Stream& stream, uint64_t capacity_bytes) : stream_(stream), capacity_(capacity_bytes) {}

    // Starts a moe_experts call: experts acquired within it are not evicted until the next call.
    void call_begin() { ++call_; }
    // The device copy of e, uploading it when missing.
    std::shared_ptr<DeviceExpert> acquire(const ExpertWeights& e);

    const TierStats& stats() const { return stats_; }
    uint64_t capacity() const { return capacity_; }

private:
    static uint64_t key_of(int32_t layer, int32_t id) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(layer)) << 32) | static_cast<uint32_t>(id);
    }
    bool make_room(uint64_t bytes);  // evicts least recently used entries not in the current call

    Stream& stream_;
    uint64_t capacity_;
    uint64_t call_ = 0;
    std::list<uint64_t> lru_;  // keys, most recent first
    struct Slot {
        std::shared_ptr<DeviceExpert> expert;
        std::list<uint64_t>::iterator pos;
    };
    std::unordered_map<uint64_t, Slot> slots_;
    TierStats stats_;
};

}  // namespace coli::vk
