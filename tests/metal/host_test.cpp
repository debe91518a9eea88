// The Metal host's portable part (src/backend/metal/host.h). Its binding checks against the kernel table,
// on a device that records what it is asked (every build); the kernels run through their Metal bindings
// (buffer slots, the push slot, function constants) on the Metal-shaped Vulkan device with the CPU's results
// (lavapipe in CI; skipped loudly without a Vulkan device); and the library source embedded for Macs is the
// generated one.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backend/metal/host.h"
#include "backend/metal/library_source.h"
#include "backend/metal/self_test.h"
#include "core/error.h"

namespace coli::metal {
namespace {

// A device that runs nothing: it keeps the dispatches the portable part let through.
class RecordingDevice final : public Device {
public:
    std::string name() const override { return "recording"; }
    uint64_t recommended_working_set() const override { return 1ull << 30; }
    uint64_t threadgroup_memory() const override { return kMetalMaxThreadgroupBytes; }
    uint32_t thread_execution_width() const override { return kMetalSimdWidth; }
    bool unified_memory() const override { return true; }
    BufferPtr buffer_new(uint64_t bytes, Storage) override { return std::make_shared<HostBuffer>(bytes); }
    void copy(const BufferPtr&, uint64_t, const BufferPtr&, uint64_t, uint64_t) override {}
    void fill(const BufferPtr&, uint8_t) override {}
    void commit_and_wait() override {}

    std::vector<DispatchArgs> dispatched;

protected:
    std::shared_ptr<void> pipeline_make(const MetalKernel&, std::span<const ConstantValue>,
                                        const std::array<uint32_t, 3>&) override {
        return std::make_shared<int>(0);
    }
    void dispatch_encode(const Pipeline&, const DispatchArgs& args) override { dispatched.push_back(args); }

private:
    class HostBuffer final : public Buffer {
    public:
        explicit HostBuffer(uint64_t bytes) : bytes_(bytes) {}
        uint64_t length() const override { return bytes_.size(); }
        void* contents() const override { return const_cast<uint8_t*>(bytes_.data()); }

    private:
        std::vector<uint8_t> bytes_;
    };
};

// elementwise.comp's push block and its operations (function constant of spec id 0).
struct ElementwisePush {
    uint32_t count;
    float lo, hi;
};
constexpr uint32_t kOpAdd = 0, kOpClamp = 1;

const MetalKernel& kernel_named(std::string_view name) {
    for (const MetalKernel& k : metal_kernels())
        if (k.name == name) return k;
    ADD_FAILURE() << "no kernel " << name;
    return metal_kernels().front();
}

// The function-constant index of the kernel's specialization constant `spec_id`.
uint32_t constant_index(std::string_view kernel, uint32_t spec_id) {
    for (const MetalConstant& c : kernel_named(kernel).constants)
        if (c.spec_id == spec_id) return c.index;
    ADD_FAILURE() << kernel << " has no constant of spec id " << spec_id;
    return 0;
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(MetalHost, BindingsAreCheckedAgainstTheKernelTable) {
    RecordingDevice dev;
    const ConstantValue add{constant_index("elementwise", 0), kOpAdd};
    const Pipeline& p = dev.pipeline("elementwise", {&add, 1});
    EXPECT_EQ(&p, &dev.pipeline("elementwise", {&add, 1})) << "made once per set of constants";
    const BufferPtr a = dev.buffer_new(16, Storage::shared), b = dev.buffer_new(16, Storage::shared);
    const ElementwisePush push{4, 0, 0};

    ComputeEncoder enc(dev);
    enc.set_pipeline(p);
    enc.set_buffer(a, 0);
    enc.set_buffer(b, 1);
    enc.set_bytes(&push, sizeof(push), kMetalPushSlot);
    EXPECT_NE(error_of([&] { enc.dispatch_threadgroups(1); }).find("dispatched without buffer(2)"),
              std::string::npos);
    enc.set_buffer(b, 2);
    enc.set_buffer(b, 5);
    EXPECT_NE(error_of([&] { enc.dispatch_threadgroups(1); }).find("'elementwise' has no buffer(5)"),
              std::string::npos);
    enc.set_buffer(nullptr, 5);
    enc.set_bytes(&push, 8, kMetalPushSlot);
    EXPECT_NE(error_of([&] { enc.dispatch_threadgroups(1); }).find("reads 12 bytes of constants"),
              std::string::npos);
    enc.set_bytes(&push, sizeof(push), kMetalPushSlot);
    EXPECT_EQ(error_of([&] { enc.dispatch_threadgroups(3); }), "");
    ASSERT_EQ(dev.dispatched.size(), 1u);
    EXPECT_EQ(dev.dispatched[0].groups[0], 3u);
    EXPECT_EQ(dev.dispatched[0].buffers[2], b);

    EXPECT_NE(error_of([&] { enc.set_buffer(a, kMetalPushSlot); }).find("setBuffer at index 30"),
              std::string::npos);
    EXPECT_NE(error_of([&] { dev.pipeline("no_such_kernel"); }).find("has no kernel 'no_such_kernel'"),
              std::string::npos);
    ASSERT_FALSE(metal_skipped_shaders().empty());
    const MetalSkipped& skipped = metal_skipped_shaders().front();
    EXPECT_NE(error_of([&] { dev.pipeline(skipped.shader); }).find(std::string(skipped.reason)),
              std::string::npos);
    const ConstantValue foreign{constant_index("elementwise", 0) + 1000, 0};
    EXPECT_NE(error_of([&] {
                  dev.pipeline("elementwise", {&foreign, 1});
              }).find("has no function constant"),
              std::string::npos);
}

std::unique_ptr<Device> vulkan_device_or_skip() {
    try {
        return metal_device_on_vulkan();
    } catch (const Error& e) {
        return nullptr;
    }
}

TEST(MetalHost, KernelsRunThroughTheirMetalBindingsOnVulkan) {
    const std::unique_ptr<Device> dev = vulkan_device_or_skip();
    if (!dev) GTEST_SKIP() << "SKIPPED: no Vulkan device here (install mesa-vulkan-drivers)";
    constexpr uint32_t n = 1000, kThreads = 256;
    const BufferPtr a = dev->buffer_new(n * sizeof(float), Storage::shared),
                    b = dev->buffer_new(n * sizeof(float), Storage::shared),
                    out = dev->buffer_new(n * sizeof(float), Storage::shared);
    ASSERT_NE(a->contents(), nullptr);
    auto* av = static_cast<float*>(a->contents());
    auto* bv = static_cast<float*>(b->contents());
    for (uint32_t i = 0; i < n; ++i) av[i] = 0.25f * float(i) - 100, bv[i] = 1.5f * float(i % 17);

    ComputeEncoder enc(*dev);
    const ConstantValue add{constant_index("elementwise", 0), kOpAdd};
    enc.set_pipeline(dev->pipeline("elementwise", {&add, 1}));
    enc.set_buffer(a, 0);
    enc.set_buffer(b, 1);
    enc.set_buffer(out, 2);
    const ElementwisePush sum{n, 0, 0};
    enc.set_bytes(&sum, sizeof(sum), kMetalPushSlot);
    enc.dispatch_threadgroups((n + kThreads - 1) / kThreads);
    // Then clamp a in place (buffer(1) and (2) still bound: the kernel declares them).
    const ConstantValue clamp{constant_index("elementwise", 0), kOpClamp};
    enc.set_pipeline(dev->pipeline("elementwise", {&clamp, 1}));
    const ElementwisePush bounds{n, -10, 20};
    enc.set_bytes(&bounds, sizeof(bounds), kMetalPushSlot);
    enc.dispatch_threadgroups(2);
    // A blit after the kernels: the sums copied, shifted by 4 floats, into a buffer filled with 0x7f bytes.
    const BufferPtr shifted = dev->buffer_new((n + 4) * sizeof(float), Storage::shared);
    dev->fill(shifted, 0x7f);
    dev->copy(out, 0, shifted, 4 * sizeof(float), n * sizeof(float));
    dev->commit_and_wait();

    const auto* sums = static_cast<const float*>(out->contents());
    const auto* moved = static_cast<const float*>(shifted->contents());
    for (uint32_t i = 0; i < n; ++i) {
        const float x = 0.25f * float(i) - 100, y = 1.5f * float(i % 17);
        ASSERT_EQ(sums[i], x + y) << i;
        ASSERT_EQ(av[i], std::min(std::max(x, -10.0f), 20.0f)) << i;
        ASSERT_EQ(moved[i + 4], x + y) << i;
    }
    uint32_t filled = 0;
    std::memcpy(&filled, moved, sizeof(filled));
    EXPECT_EQ(filled, 0x7f7f7f7fu);
}

// The self-test's first part on the Metal-shaped Vulkan device: every kernel of the table becomes a
// pipeline from the SPIR-V it was generated from, with its frozen values and its constants' defaults, but
// for the kernels written for SIMD-groups of 32 on a device whose subgroups are narrower (lavapipe's are 8),
// which are refused saying so.
TEST(MetalHost, EveryKernelOfTheTableMakesAPipelineOnVulkan) {
    const std::unique_ptr<Device> dev = vulkan_device_or_skip();
    if (!dev) GTEST_SKIP() << "SKIPPED: no Vulkan device here (install mesa-vulkan-drivers)";
    const SelfTestReport r = metal_self_test(*dev);
    std::printf("%s\n%d pipelines\n", r.device.c_str(), r.pipelines);
    size_t refused = 0;
    for (const MetalKernel& k : metal_kernels())
        refused += k.simdgroup && dev->thread_execution_width() != kMetalSimdWidth;
    EXPECT_EQ(r.pipelines + refused, metal_kernels().size());
    ASSERT_EQ(r.failures.size(), refused);
    for (const std::string& f : r.failures)
        EXPECT_NE(f.find("uses SIMD-groups of 32 lanes"), std::string::npos) << f;
}

TEST(MetalHost, TheEmbeddedLibraryIsTheGeneratedOne) {
    std::ifstream in(std::string(COLI_METAL_LIBRARY));  // made in the build tree by coli_metal_msl
    std::ostringstream s;
    s << in.rdbuf();
    ASSERT_FALSE(s.str().empty());
    EXPECT_TRUE(metal_library_source() == s.str())
        << "the embedded source differs from " << COLI_METAL_LIBRARY;
}

}  // namespace
}  // namespace coli::metal
