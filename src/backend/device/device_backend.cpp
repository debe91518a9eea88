#include "backend/device/device_backend.h"

#include <fmt/format.h>

#include <vector>

#include "backend/residency.h"
#include "core/error.h"

namespace coli {

namespace {
constexpr double kBytesPerGB = 1e9;
constexpr double kBytesPerMB = 1e6;
}  // namespace

DeviceBackend::DeviceBackend(std::string_view name, bool (*capability)(const OpDesc&),
                             bool (*host_steps)(const OpDesc&), std::string tier_name)
    : name_(name),
      capability_(capability),
      host_steps_(host_steps),
      tier_name_(std::move(tier_name)),
      fail_(fault_ops(name)),
      poison_(poison_outputs(name)) {}

void DeviceBackend::budget_set(uint64_t vram_bytes, const DeviceMemory& m) {
    check(vram_bytes <= m.bytes, "--vram-gb {:.2f} exceeds the device's {} ({:.2f} GB)",
          vram_bytes / kBytesPerGB, m.what, m.bytes / kBytesPerGB);
    budget_ = vram_bytes > 0 ? vram_bytes : (m.bytes > m.reserve ? m.bytes - m.reserve : 0);
}

std::string DeviceBackend::description() const {
    std::string s = fmt::format("{} ({}; budget {:.2f} GB: dense weights {:.1f} MB resident", name_,
                                device_description(), budget_ / kBytesPerGB, dense_bytes_ / kBytesPerMB);
    if (dense_on_host_ > 0)
        s += fmt::format(", {:.1f} MB left on the host (their ops fall back)", dense_on_host_ / kBytesPerMB);
    return s + ")";
}

bool DeviceBackend::supports(const OpDesc& d) const {
    return capability_(d) && device_supports(d) && !weight_left_on_host(d);
}

std::string DeviceBackend::stats() const {
    return tier_ ? tier_->summary() : tier_name_ + ": unused";
}

Weight DeviceBackend::weight_upload(const Weight& w) {
    if (w.device != nullptr) return w;
    const uint64_t bytes = weight_device_bytes(w.host);
    if (!weight_placeable(w) || dense_bytes_ + bytes > budget_) {
        dense_on_host_ += bytes;
        return w;  // stays on the host; supports() declines its ops, Ops names it now and counts later
    }
    Weight out = w;
    out.device = weight_to_device(w.host);
    dense_bytes_ += bytes;
    return out;
}

Routing DeviceBackend::route_sigmoid_topk(const Tensor& logits, const Weight& bias, const SigmoidRouting& p,
                                          std::span<const int32_t> fixed) {
    fault_check(OpKind::route_sigmoid_topk);
    std::vector<float> host(logits.numel());
    tensor_read(logits, host);
    return route_sigmoid_host(logits.rows(), logits.cols(), host, bias, p, fixed);
}

void DeviceBackend::fault_check(OpKind op) const {
    if (fail_[static_cast<size_t>(op)]) fail("{}: {} failed: injected by {}", name_, op_name(op), kFailOpEnv);
}

void DeviceBackend::check_owner(const Tensor& t, const char* what) const {
    check(t.backend() == this, "{} {}: the tensor is held by another backend", name_, what);
}

void DeviceBackend::resident_check(const Weight& w, const char* op) const {
    check(w.device != nullptr, "{} {}: the weight is not in device memory (over the --vram-gb budget)", name_,
          op);
}

MoePlan DeviceBackend::moe_begin(std::span<const ExpertWeights> experts, const Routing& r, const Tensor& x,
                                 const Tensor& y) const {
    fault_check(OpKind::moe_experts);
    check_shape(y, x.rows(), x.cols(), "moe_experts y");
    check(r.n_tokens == x.rows(), "moe_experts: routing for {} tokens, x has {}", r.n_tokens, x.rows());
    check_owner(x, "moe_experts x");
    check_owner(y, "moe_experts y");
    return moe_plan(experts, r, x.cols());
}

void DeviceBackend::tier_begin() {
    if (!tier_) tier_ = tier_create(budget_ > dense_bytes_ ? budget_ - dense_bytes_ : 0);
    tier_->call_begin();
}

}  // namespace coli
