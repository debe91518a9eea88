// What every device backend (CUDA, Vulkan, the next one) shares, written once: the memory budget and the
// dense weights' placement within it, the routed experts' tier made with what the dense weights left,
// description(), stats() and supports(), fault injection and output poisoning (faults.h), and the ops it
// runs on the host after reading their input back. A backend supplies its device through the small
// virtuals below and writes its kernels and op bodies.
//
// Placement: dense weights are copied to device memory by weight_upload within the budget (--vram-gb); a
// weight beyond it (or one the device cannot hold) stays on the host and its ops are declined, so the
// dispatcher runs them on the CPU, counted. Routed experts arrive as host views and go through the tier.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "backend/backend.h"
#include "backend/device/expert_tier.h"
#include "backend/device/faults.h"
#include "backend/moe_plan.h"

namespace coli {

// The memory a backend's budget comes from when --vram-gb is not given.
struct DeviceMemory {
    uint64_t bytes;    // what the device has for us
    uint64_t reserve;  // kept free for activations, caches and scratch: the budget is bytes - reserve
    const char* what;  // what `bytes` is, for the message when --vram-gb asks for more ("free memory")
};

class DeviceBackend : public Backend {
public:
    // name: the backend ("cuda"); capability: its kernels' answer by op and parameters; host_steps: which of
    // those it runs as host steps; tier_name: what stats() calls the expert tier.
    DeviceBackend(std::string_view name, bool (*capability)(const OpDesc&), bool (*host_steps)(const OpDesc&),
                  std::string tier_name);

    std::string_view name() const final { return name_; }
    std::string description() const final;
    bool supports(const OpDesc& d) const final;
    bool host_step(const OpDesc& d) const final { return host_steps_(d); }
    std::string stats() const final;
    Weight weight_upload(const Weight& w) final;
    // The routing on the host, from the logits read back (route_sigmoid_host).
    Routing route_sigmoid_topk(const Tensor& logits, const Weight& bias, const SigmoidRouting& p,
                               std::span<const int32_t> fixed) override;

protected:
    // The budget: vram_bytes, or when 0 the device's memory less its reserve. Called by the constructor.
    void budget_set(uint64_t vram_bytes, const DeviceMemory& m);

    // What this device's limits allow beyond the kernels' capability (shared memory per block, ...).
    virtual bool device_supports(const OpDesc&) const { return true; }
    // The device, in description() before the budget: "NVIDIA H200, 132 SMs, ...".
    virtual std::string device_description() const = 0;
    // The device bytes of a dense weight, and its device copy (what Weight::device holds).
    virtual uint64_t weight_device_bytes(const WeightView& w) const = 0;
    virtual std::shared_ptr<void> weight_to_device(const WeightView& w) = 0;
    // Whether the device can hold w at all (within any budget); says why on stderr when not.
    virtual bool weight_placeable(const Weight& w) const { return true; }
    // A tier of `capacity` bytes for the routed experts.
    virtual std::unique_ptr<ExpertTier> tier_create(uint64_t capacity) = 0;

    // Throws coli::Error when COLI_FAIL_OP names op on this backend.
    void fault_check(OpKind op) const;
    // Throws unless t is held by this backend (a tensor of another backend is not its device memory).
    void check_owner(const Tensor& t, const char* what) const;
    // Whether ops' outputs start as NaN (COLI_POISON_OUTPUTS).
    bool outputs_poisoned() const { return poison_; }
    // The device copy of a dense weight (what weight_to_device made); throws when it stayed on the host.
    template <class Resident>
    const Resident& resident(const Weight& w, const char* op) const {
        resident_check(w, op);
        return *static_cast<const Resident*>(w.device.get());
    }
    // moe_experts' start: the fault check, x's and y's shapes and owner, and the plan (moe_plan.h).
    MoePlan moe_begin(std::span<const ExpertWeights> experts, const Routing& r, const Tensor& x,
                      const Tensor& y) const;
    // The expert tier, made at the first call with the budget the dense weights left; starts a moe_experts
    // call (ExpertTier::call_begin).
    template <class Tier>
    Tier& tier_for_call() {
        tier_begin();
        return static_cast<Tier&>(*tier_);
    }

private:
    void resident_check(const Weight& w, const char* op) const;
    void tier_begin();

    std::string name_;
    bool (*capability_)(const OpDesc&);
    bool (*host_steps_)(const OpDesc&);
    std::string tier_name_;
    uint64_t budget_ = 0;               // bytes for dense weights + expert tier
    uint64_t dense_bytes_ = 0;          // dense weights resident
    uint64_t dense_on_host_ = 0;        // dense weights left on the host (over budget or not placeable)
    std::unique_ptr<ExpertTier> tier_;  // made at the first moe_experts, with what dense left
    OpSet fail_{};                      // ops with an injected fault
    bool poison_ = false;               // ops' outputs start as NaN
};

}  // namespace coli
