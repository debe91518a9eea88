// The device tier of routed experts, one for every GPU backend: device copies of the experts the store
// hands over as host views, kept by least-recent use within a byte budget. Keyed by (layer, expert id),
// never by host address (the RAM cache reuses its slots). A backend supplies how many device bytes an
// expert takes and how to upload it; the upload is queued so that the backend's commands see it in order.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backend/tensor.h"
#include "core/bytes.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"

namespace coli {

struct TierStats {
    uint64_t hits = 0;            // experts found resident
    uint64_t uploads = 0;         // experts copied host -> device
    uint64_t upload_bytes = 0;    // bytes copied
    uint64_t evictions = 0;       // experts dropped for space
    uint64_t uncached = 0;        // experts used once without a tier slot (tier too small)
    uint64_t resident_bytes = 0;  // bytes held now
    uint64_t lowered = 0;         // times a device allocation failed and the capacity was lowered
};

// What a device backend's base knows of its tier, whatever the expert type: the budget and the counts.
class ExpertTier {
public:
    virtual ~ExpertTier() = default;

    // Starts a moe_experts call: experts acquired within it are not evicted until the next call.
    void call_begin() { ++call_; }

    const TierStats& stats() const { return stats_; }
    uint64_t capacity() const { return capacity_; }

    // One line for `coli run`'s end-of-run report.
    std::string summary() const {
        std::string line =
            fmt::format("{}: {} hits, {} uploads ({}), {} evictions, {} uncached, {} resident of {}", name_,
                        stats_.hits, stats_.uploads, bytes_human(stats_.upload_bytes), stats_.evictions,
                        stats_.uncached, bytes_human(stats_.resident_bytes), bytes_human(capacity_));
        if (stats_.lowered > 0)
            line += fmt::format(" (lowered; failed device allocations: {})", stats_.lowered);
        return line;
    }

protected:
    // name: the tier as messages call it ("vram expert tier").
    ExpertTier(std::string name, uint64_t capacity_bytes)
        : name_(std::move(name)), capacity_(capacity_bytes) {}

    std::string name_;
    uint64_t capacity_;
    uint64_t call_ = 0;
    TierStats stats_;
};

// Expert: a backend's device copy of one expert, with `gate` (rows, cols, format), `bytes` (its device
// bytes) and `used_in_call` (the moe_experts call that last used it: not evictable during it).
template <class Expert>
class DeviceExpertTier final : public ExpertTier {
public:
    using BytesOf = std::function<uint64_t(const ExpertWeights&)>;                // device bytes of an expert
    using Upload = std::function<std::shared_ptr<Expert>(const ExpertWeights&)>;  // queues the copy

    DeviceExpertTier(std::string name, uint64_t capacity_bytes, BytesOf bytes_of, Upload upload)
        : ExpertTier(std::move(name), capacity_bytes),
          bytes_of_(std::move(bytes_of)),
          upload_(std::move(upload)) {}

    // The device copies of experts[i] for i in `used`, in that order, every upload queued before the caller
    // queues a kernel: when one fails (device memory) the op has not touched its output yet, so the
    // dispatcher can run it on the CPU from the same inputs.
    std::vector<std::shared_ptr<Expert>> acquire_all(std::span<const ExpertWeights> experts,
                                                     std::span<const size_t> used) {
        std::vector<std::shared_ptr<Expert>> dev;
        dev.reserve(used.size());
        for (size_t i : used) dev.push_back(acquire(experts[i]));
        return dev;
    }

    // The device copy of e, uploading it when missing. Memory of evicted experts is released by the
    // backend after the commands already queued have run (their shared_ptr is held there).
    std::shared_ptr<Expert> acquire(const ExpertWeights& e) {
        check(e.layer >= 0, "{}: expert {} has no layer: the model must set ExpertWeights::layer", name_,
              e.id);
        const uint64_t key = key_of(e.layer, e.id);
        if (auto found = slots_.find(key); found != slots_.end()) {
            Slot& s = found->second;
            check(s.expert->gate.rows == e.gate.rows() && s.expert->gate.cols == e.gate.cols() &&
                      s.expert->gate.format == e.gate.format(),
                  "{}: expert ({}, {}) changed shape", name_, e.layer, e.id);
            lru_.splice(lru_.begin(), lru_, s.pos);
            s.expert->used_in_call = call_;
            ++stats_.hits;
            return s.expert;
        }
        const uint64_t bytes = bytes_of_(e);
        bool fits = false;
        std::shared_ptr<Expert> d;
        for (;;) {
            fits = make_room(bytes);  // before allocating: the tier never exceeds its budget
            try {
                d = upload(e, bytes);
                break;
            } catch (const OutOfMemory& ex) {
                if (!capacity_lower(e, ex.what())) throw;  // the op then runs on the CPU, counted
            }
        }
        d->bytes = bytes;
        d->used_in_call = call_;
        ++stats_.uploads;
        stats_.upload_bytes += bytes;
        if (fits) {
            lru_.push_front(key);
            slots_.emplace(key, Slot{d, lru_.begin()});
            stats_.resident_bytes += bytes;
        } else {
            ++stats_.uncached;  // used for this call only; freed after its commands
        }
        return d;
    }

private:
    static uint64_t key_of(int32_t layer, int32_t id) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(layer)) << 32) | static_cast<uint32_t>(id);
    }

    // upload_, or the test hook of docs/reliability.md for a device short of memory:
    // COLI_TIER_MEMORY_LIMIT=BYTES makes an upload fail as the device's allocation would when the tier's
    // resident experts and this one would exceed BYTES.
    std::shared_ptr<Expert> upload(const ExpertWeights& e, uint64_t bytes) {
        static const uint64_t limit = env_number("COLI_TIER_MEMORY_LIMIT");
        if (limit > 0 && stats_.resident_bytes + bytes > limit)
            throw OutOfMemory(
                fmt::format("out of device memory for {} bytes (COLI_TIER_MEMORY_LIMIT)", bytes));
        return upload_(e);
    }

    // After an upload of e failed for memory (`why`): the capacity becomes what the tier held then, so that
    // the next make_room evicts what the upload needs, and a warning says so. False when it cannot go lower.
    bool capacity_lower(const ExpertWeights& e, const std::string& why) {
        if (stats_.resident_bytes >= capacity_) return false;
        log_warn(
            "{}: uploading expert {} of layer {}: {}; its capacity is lowered from {} to {} (what it held) "
            "and the upload is tried again: fewer experts stay on the device, tokens are the same",
            name_, e.id, e.layer, why, bytes_human(capacity_), bytes_human(stats_.resident_bytes));
        capacity_ = stats_.resident_bytes;
        ++stats_.lowered;
        return true;
    }

    // Evicts least recently used entries not in the current call until `bytes` more fit.
    bool make_room(uint64_t bytes) {
        if (bytes > capacity_) return false;
        auto it = lru_.end();
        while (stats_.resident_bytes + bytes > capacity_ && it != lru_.begin()) {
            --it;
            Slot& s = slots_.at(*it);
            if (s.expert->used_in_call == call_) continue;  // needed by the call in flight
            stats_.resident_bytes -= s.expert->bytes;
            ++stats_.evictions;
            slots_.erase(*it);
            it = lru_.erase(it);
        }
        return stats_.resident_bytes + bytes <= capacity_;
    }

    struct Slot {
        std::shared_ptr<Expert> expert;
        std::list<uint64_t>::iterator pos;
    };

    BytesOf bytes_of_;
    Upload upload_;
    std::list<uint64_t> lru_;  // keys, most recent first
    std::unordered_map<uint64_t, Slot> slots_;
};

}  // namespace coli
