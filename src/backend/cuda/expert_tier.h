// The VRAM tier of routed experts: device copies of the experts the store hands over as host views,
// kept by least-recent use within a byte budget. Keyed by (layer, expert id), never by host address (the
// RAM cache reuses its slots). Uploads run on the context's upload stream and complete on an event the
// compute stream waits for, so one expert's upload overlaps the previous expert's kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>

#include "backend/cuda/context.h"
#include "backend/cuda/kernels.h"
#include "backend/tensor.h"

namespace coli::cuda {

// One expert's three matrices in device memory.
struct DeviceExpert {
    DeviceWeight gate, up, down;   // views into `memory`
    std::shared_ptr<void> memory;  // one allocation for all codes and scales
    cudaEvent_t ready = nullptr;   // recorded on the upload stream after the copies
    uint64_t bytes = 0;            // size of `memory`
    uint64_t used_in_call = 0;     // the moe_experts call that last used it (not evictable during it)
    ~DeviceExpert();
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
    ExpertTier(std::shared_ptr<Context> ctx, uint64_t capacity_bytes);

    // Starts a moe_experts call: experts acquired within it are not evicted until the next call.
    void call_begin() { ++call_; }
    // The device copy of e, uploading it when missing. The compute stream must wait on ready before use.
    std::shared_ptr<DeviceExpert> acquire(const ExpertWeights& e);

    const TierStats& stats() const { return stats_; }
    uint64_t capacity() const { return capacity_; }

private:
    static uint64_t key_of(int32_t layer, int32_t id) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(layer)) << 32) | static_cast<uint32_t>(id);
    }
    std::shared_ptr<DeviceExpert> upload(const ExpertWeights& e);
    bool make_room(uint64_t bytes);  // evicts least recently used entries not in the current call

    std::shared_ptr<Context> ctx_;
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

// Device bytes of one expert's three matrices.
uint64_t expert_bytes(const ExpertWeights& e);
// Bytes of codes plus scales of a host weight, each part rounded up to the device alignment.
uint64_t device_bytes_of(const WeightView& w);
// Copies a host weight into `dst` (device memory of device_bytes_of(w) bytes) on stream s and returns
// the device view.
DeviceWeight weight_copy_async(const WeightView& w, uint8_t* dst, cudaStream_t s);

}  // namespace coli::cuda
