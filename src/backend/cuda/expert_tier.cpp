#include "backend/cuda/expert_tier.h"

#include "core/error.h"

namespace coli::cuda {

namespace {
constexpr uint64_t kDeviceAlign =
    256;  // start every codes / scales array on a 256-byte boundary (16-byte loads)

uint64_t align_up(uint64_t v) {
    return (v + kDeviceAlign - 1) / kDeviceAlign * kDeviceAlign;
}
}  // namespace

uint64_t device_bytes_of(const WeightView& w) {
    return align_up(w.data_bytes()) + align_up(w.scale_bytes());
}

DeviceWeight weight_copy_async(const WeightView& w, uint8_t* dst, cudaStream_t s) {
    DeviceWeight d{w.format, w.rows, w.cols, dst, nullptr};
    cuda_check(cudaMemcpyAsync(dst, w.data, w.data_bytes(), cudaMemcpyHostToDevice, s), "weight upload");
    if (w.scale_bytes() > 0) {
        uint8_t* sc = dst + align_up(w.data_bytes());
        cuda_check(cudaMemcpyAsync(sc, w.scales, w.scale_bytes(), cudaMemcpyHostToDevice, s), "scale upload");
        d.scales = sc;
    }
    return d;
}

DeviceExpert::~DeviceExpert() {
    if (ready) cudaEventDestroy(ready);
}

ExpertTier::ExpertTier(std::shared_ptr<Context> ctx, uint64_t capacity_bytes)
    : ctx_(std::move(ctx)), capacity_(capacity_bytes) {}

uint64_t expert_bytes(const ExpertWeights& e) {
    return device_bytes_of(e.gate.host) + device_bytes_of(e.up.host) + device_bytes_of(e.down.host);
}

std::shared_ptr<DeviceExpert> ExpertTier::upload(const ExpertWeights& e) {
    auto d = std::make_shared<DeviceExpert>();
    const uint64_t g = device_bytes_of(e.gate.host), u = device_bytes_of(e.up.host);
    d->bytes = expert_bytes(e);
    d->memory = buffer_new(ctx_, d->bytes, ctx_->upload);
    auto* base = static_cast<uint8_t*>(d->memory.get());
    d->gate = weight_copy_async(e.gate.host, base, ctx_->upload);
    d->up = weight_copy_async(e.up.host, base + g, ctx_->upload);
    d->down = weight_copy_async(e.down.host, base + g + u, ctx_->upload);
    cuda_check(cudaEventCreateWithFlags(&d->ready, cudaEventDisableTiming), "expert event");
    cuda_check(cudaEventRecord(d->ready, ctx_->upload), "expert event record");
    ++stats_.uploads;
    stats_.upload_bytes += d->bytes;
    return d;
}

bool ExpertTier::make_room(uint64_t bytes) {
    if (bytes > capacity_) return false;
    auto it = lru_.end();
    while (stats_.resident_bytes + bytes > capacity_ && it != lru_.begin()) {
        --it;
        Slot& s = slots_.at(*it);
        if (s.expert->used_in_call == call_) continue;  // needed by the call in flight
        stats_.resident_bytes -= s.expert->bytes;
        ++stats_.evictions;
        slots_.erase(*it);  // memory is released in stream order after the kernels already queued
        it = lru_.erase(it);
    }
    return stats_.resident_bytes + bytes <= capacity_;
}

std::shared_ptr<DeviceExpert> ExpertTier::acquire(const ExpertWeights& e) {
    check(e.layer >= 0, "cuda: expert {} has no layer: the model must set ExpertWeights::layer", e.id);
    const uint64_t key = key_of(e.layer, e.id);
    if (auto found = slots_.find(key); found != slots_.end()) {
        Slot& s = found->second;
        check(s.expert->gate.rows == e.gate.rows() && s.expert->gate.cols == e.gate.cols() &&
                  s.expert->gate.format == e.gate.format(),
              "cuda: expert ({}, {}) changed shape in the VRAM tier", e.layer, e.id);
        lru_.splice(lru_.begin(), lru_, s.pos);
        s.expert->used_in_call = call_;
        ++stats_.hits;
        return s.expert;
    }
    const bool fits = make_room(expert_bytes(e));  // before allocating: the tier never exceeds its budget
    std::shared_ptr<DeviceExpert> d = upload(e);
    d->used_in_call = call_;
    if (fits) {
        lru_.push_front(key);
        slots_.emplace(key, Slot{d, lru_.begin()});
        stats_.resident_bytes += d->bytes;
    } else {
        ++stats_.uncached;  // used for this call only; freed after its kernels
    }
    return d;
}

}  // namespace coli::cuda
