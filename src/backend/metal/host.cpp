// The Metal host's portable part: kernels and their constants found in the table, every dispatch's
// bindings checked against it (host.h).
#include "backend/metal/host.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace coli::metal {

namespace {

const MetalKernel& kernel_find(std::string_view name) {
    for (const MetalKernel& k : metal_kernels())
        if (k.name == name) return k;
    for (const MetalSkipped& s : metal_skipped_shaders())
        if (s.shader == name) fail("metal: the library has no kernel '{}': {}", name, s.reason);
    fail("metal: the library has no kernel '{}'", name);
}

const MetalConstant* constant_of(const MetalKernel& k, uint32_t index) {
    for (const MetalConstant& c : k.constants)
        if (c.index == index) return &c;
    return nullptr;
}

}  // namespace

const Pipeline& Device::pipeline(std::string_view name, std::span<const ConstantValue> constants) {
    const MetalKernel& k = kernel_find(name);
    std::vector<ConstantValue> set(constants.begin(), constants.end());
    std::sort(set.begin(), set.end(),
              [](const ConstantValue& a, const ConstantValue& b) { return a.index < b.index; });
    for (size_t i = 0; i < set.size(); ++i) {
        check(constant_of(k, set[i].index) != nullptr, "metal: kernel '{}' has no function constant {}", name,
              set[i].index);
        check(i == 0 || set[i].index != set[i - 1].index,
              "metal: kernel '{}': function constant {} set twice", name, set[i].index);
    }
    std::pair<const MetalKernel*, std::vector<uint64_t>> key{&k, {}};
    for (const ConstantValue& v : set) key.second.push_back(uint64_t{v.index} << 32 | v.bits);
    if (auto found = pipelines_.find(key); found != pipelines_.end()) return *found->second;

    auto p = std::make_unique<Pipeline>();
    p->kernel = &k;
    p->constants = std::move(set);
    p->threads = k.threads;
    for (const MetalConstant& c : k.constants)  // a workgroup width set by a constant: its value
        if (k.threads_x_spec >= 0 && c.spec_id == static_cast<uint32_t>(k.threads_x_spec))
            p->threads[0] = constant_bits(c, p->constants);
    const uint64_t threads = uint64_t(p->threads[0]) * p->threads[1] * p->threads[2];
    check(threads >= 1 && threads <= kMetalMaxThreads,
          "metal: kernel '{}' would run {} threads per threadgroup", name, threads);
    check(k.threadgroup_bytes <= threadgroup_memory(),
          "metal: kernel '{}' needs {} bytes of threadgroup memory, the device has {}", name,
          k.threadgroup_bytes, threadgroup_memory());
    check(!k.simdgroup || thread_execution_width() == kMetalSimdWidth,
          "metal: kernel '{}' uses SIMD-groups of {} lanes, the device's are {}", name, kMetalSimdWidth,
          thread_execution_width());
    p->native = pipeline_make(k, p->constants, p->threads);
    return *pipelines_.emplace(std::move(key), std::move(p)).first->second;
}

void Device::dispatch(const Pipeline& p, const DispatchArgs& args) {
    const MetalKernel& k = *p.kernel;
    std::array<bool, kMetalMaxBuffers> has{};
    for (const MetalBuffer& b : k.buffers) {
        for (uint32_t e = 0; e < b.count; ++e) has[b.first + e] = true;
        // A plain buffer must be bound; of a slot array (the batched GEMV's weights) the elements used come
        // first, at least one.
        check(args.buffers[b.first] != nullptr, "metal: kernel '{}' dispatched without buffer({})", k.name,
              b.first);
        for (uint32_t e = 1; e < b.count; ++e)
            check(args.buffers[b.first + e] == nullptr || args.buffers[b.first + e - 1] != nullptr,
                  "metal: kernel '{}': buffer({}) is bound after an unbound element of its array", k.name,
                  b.first + e);
    }
    for (uint32_t s = 0; s < kMetalMaxBuffers; ++s)
        check(args.buffers[s] == nullptr || has[s], "metal: kernel '{}' has no buffer({})", k.name, s);
    check(args.push.size() >= k.push_bytes,
          "metal: kernel '{}' reads {} bytes of constants at buffer({}), {} set", k.name, k.push_bytes,
          kMetalPushSlot, args.push.size());
    check(k.push_bytes > 0 || args.push.empty(), "metal: kernel '{}' has no constants at buffer({})", k.name,
          kMetalPushSlot);
    if (args.groups[0] == 0 || args.groups[1] == 0 || args.groups[2] == 0) return;  // an empty grid
    dispatch_encode(p, args);
}

void ComputeEncoder::set_buffer(const BufferPtr& b, uint32_t index) {
    check(index < kMetalMaxBuffers && index != kMetalPushSlot,
          "metal: setBuffer at index {}: buffers take 0 .. {}", index, kMetalPushSlot - 1);
    args_.buffers[index] = b;
}

void ComputeEncoder::set_bytes(const void* bytes, uint32_t length, uint32_t index) {
    check(index == kMetalPushSlot, "metal: setBytes at index {}: the kernels read constants at buffer({})",
          index, kMetalPushSlot);
    args_.push.resize(length);
    if (length > 0) std::memcpy(args_.push.data(), bytes, length);
}

void ComputeEncoder::dispatch_threadgroups(uint32_t x, uint32_t y, uint32_t z) {
    check(pipeline_ != nullptr, "metal: dispatch before a pipeline was set");
    args_.groups = {x, y, z};
    device_.dispatch(*pipeline_, args_);
}

}  // namespace coli::metal
