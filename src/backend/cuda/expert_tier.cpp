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

uint64_t expert_bytes(const ExpertWeights& e) {
    return device_bytes_of(e.gate.host) + device_bytes_of(e.up.host) + device_bytes_of(e.down.host);
}

std::unique_ptr<ExpertTier> expert_tier_new(std::shared_ptr<Context> ctx, uint64_t capacity_bytes) {
    auto upload = [ctx](const ExpertWeights& e) {
        auto d = std::make_shared<DeviceExpert>();
        const uint64_t g = device_bytes_of(e.gate.host), u = device_bytes_of(e.up.host);
        d->memory = buffer_new(ctx, expert_bytes(e), ctx->upload);
        auto* base = static_cast<uint8_t*>(d->memory.get());
        d->gate = weight_copy_async(e.gate.host, base, ctx->upload);
        d->up = weight_copy_async(e.up.host, base + g, ctx->upload);
        d->down = weight_copy_async(e.down.host, base + g + u, ctx->upload);
        cuda_check(cudaEventCreateWithFlags(&d->ready, cudaEventDisableTiming), "expert event");
        cuda_check(cudaEventRecord(d->ready, ctx->upload), "expert event record");
        return d;
    };
    // An evicted expert's memory is released in stream order, after the kernels already queued.
    return std::make_unique<ExpertTier>("vram expert tier", capacity_bytes, expert_bytes, upload);
}

}  // namespace coli::cuda
