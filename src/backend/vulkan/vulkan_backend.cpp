// The Vulkan backend: device selection, memory, weights and the row-wise ops.
#include "backend/vulkan/vulkan_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/residency.h"
#include "backend/vulkan/limits.h"
#include "backend/vulkan/support.h"
#include "backend/vulkan/vulkan_backend_impl.h"
#include "core/error.h"
#include "core/log.h"

namespace coli {

namespace {

constexpr double kBytesPerMB = 1e6;
constexpr uint32_t kThreads = 256;             // local size of the grid-stride shaders
constexpr uint32_t kPushUploadWords = 30;      // write_words.comp's kMaxWords: words per dispatch
constexpr uint64_t kPushUploadMaxBytes = 480;  // uploads up to this size go through write_words dispatches
constexpr uint32_t kPoisonWord = 0x7fc00000u;  // a quiet NaN: ops' outputs under COLI_POISON_OUTPUTS

// write_words.comp's push constants.
struct WriteWordsPush {
    uint32_t count;                    // words written, at most kPushUploadWords
    uint32_t first;                    // first word of the buffer written
    uint32_t words[kPushUploadWords];  // the words, from that one on
};
static_assert(sizeof(WriteWordsPush) <= vk::kPushBytes, "write_words.comp's push constants");

// Specialization of elementwise.comp.
constexpr uint32_t kOpAdd = 0, kOpClamp = 1;
// Specialization of norm.comp.
constexpr uint32_t kNormRms = 0, kNormLayer = 1;

struct ElementwisePush {
    uint32_t count;
    float lo, hi;
};
struct NormPush {
    uint32_t d;
    float eps;
};

}  // namespace

vk::BufferPtr buffer_of(const Tensor& t) {
    return std::static_pointer_cast<vk::Buffer>(t.storage_shared());
}

uint32_t groups_for(int64_t count, uint32_t threads) {
    const int64_t groups = (count + threads - 1) / threads;
    return static_cast<uint32_t>(std::clamp<int64_t>(groups, 1, vk::kMaxGroups));
}

VulkanProbe vulkan_probe(int device) {
    std::string why;
    const vk::DeviceList& list = vk::device_list();
    const int picked = vk::device_pick(list, device, &why);
    if (picked < 0) return {false, false, why};
    const vk::DeviceInfo& d = list.devices[picked];
    std::string detail = vk::device_summary(d);
    if (list.devices.size() > 1)
        detail += fmt::format("; device {} of {} (--vk-device picks another)", picked, list.devices.size());
    return {true, d.type == VK_PHYSICAL_DEVICE_TYPE_CPU, detail};
}

std::unique_ptr<Backend> vulkan_backend_create(uint64_t vram_bytes, int device, ThreadPool& pool) {
    std::string why;
    const int picked = vk::device_pick(vk::device_list(), device, &why);
    check(picked >= 0, "backend 'vulkan' is unavailable: {}", why);
    return std::make_unique<VulkanBackend>(std::make_shared<vk::Context>(picked), vram_bytes, pool);
}

VulkanBackend::VulkanBackend(std::shared_ptr<vk::Context> ctx, uint64_t vram_bytes, ThreadPool& pool)
    : DeviceBackend("vulkan", vulkan_supports, vulkan_host_step, "device expert tier"),
      ctx_(std::move(ctx)),
      pipelines_(ctx_),
      stream_(ctx_),
      host_(pool) {
    placeholder_ = vk::buffer_new(ctx_, sizeof(float), vk::Memory::device);
    const uint64_t heap = ctx_->info.local_bytes;
    budget_set(vram_bytes, {heap, std::min(kVulkanVramReserve, heap / kVulkanReserveShare), "memory"});
}

std::string VulkanBackend::device_description() const {
    return fmt::format("{}; subgroups of {}{}; GEMV batches of {} weights; int4 GEMV on {}; {} uploads",
                       vk::device_summary(ctx_->info), ctx_->subgroup_size,
                       ctx_->subgroup_arithmetic ? " with add" : "", ctx_->weight_slots,
                       ctx_->int_dot ? "integer dot products" : "f32 FMAs",
                       ctx_->unified() ? "in-place" : "staged");
}

uint64_t VulkanBackend::weight_device_bytes(const WeightView& w) const {
    return vk::device_bytes_of(w);
}

std::shared_ptr<void> VulkanBackend::weight_to_device(const WeightView& w) {
    return std::make_shared<vk::DeviceWeight>(vk::weight_to_device(stream_, w));
}

bool VulkanBackend::weight_placeable(const Weight& w) const {
    const bool too_large = w.host.data_bytes() > ctx_->props.limits.maxStorageBufferRange ||
                           w.rows() * w.cols() >= kVulkanMaxElements;
    if (too_large)
        log_warn(
            "vulkan: a [{}, {}] {} weight exceeds the device's largest storage buffer ({:.1f} MB): its ops "
            "run "
            "on the CPU",
            w.rows(), w.cols(), format_name(w.format()),
            ctx_->props.limits.maxStorageBufferRange / kBytesPerMB);
    return !too_large;
}

std::unique_ptr<ExpertTier> VulkanBackend::tier_create(uint64_t capacity) {
    return vk::expert_tier_new(stream_, capacity);
}

vk::BufferPtr VulkanBackend::scratch(int64_t count) {
    return vk::buffer_new(ctx_, static_cast<uint64_t>(count) * sizeof(float), vk::Memory::device);
}

vk::BufferPtr VulkanBackend::upload(const void* src, uint64_t bytes) {
    vk::BufferPtr b = vk::buffer_new(ctx_, bytes, vk::Memory::device);
    buffer_write(b, src, bytes);
    return b;
}

void VulkanBackend::buffer_write(const vk::BufferPtr& b, const void* src, uint64_t bytes) {
    if (bytes > kPushUploadMaxBytes || bytes % sizeof(uint32_t) != 0) return stream_.upload(b, 0, src, bytes);
    // Small tables (a MoE layer's routing, every decode step) go in push constants: a transfer command in
    // front of a MoE layer's GEMVs (vkCmdUpdateBuffer) slows them far more than it takes itself, most in the
    // 4-bit formats (docs/benchmarks.md).
    const auto count = static_cast<uint32_t>(bytes / sizeof(uint32_t));
    for (uint32_t first = 0; first < count; first += kPushUploadWords) {
        WriteWordsPush push{std::min(kPushUploadWords, count - first), first, {}};
        std::memcpy(push.words, static_cast<const uint8_t*>(src) + first * sizeof(uint32_t),
                    push.count * sizeof(uint32_t));
        if (first > 0) stream_.concurrent_next();  // each dispatch writes words of its own
        run("write_words", {}, {b}, push, 1);
    }
}

Tensor VulkanBackend::tensor_new(int64_t rows, int64_t cols) {
    Tensor t = tensor_new_unfilled(rows, cols);
    stream_.fill(buffer_of(t), 0);
    return t;
}

Tensor VulkanBackend::tensor_new_unfilled(int64_t rows, int64_t cols) {
    check(rows >= 0 && cols >= 0, "tensor_new: negative shape [{}, {}]", rows, cols);
    check(rows * cols < kVulkanMaxElements, "vulkan tensor_new: [{}, {}] exceeds 2^32 elements", rows, cols);
    vk::BufferPtr b = scratch(rows * cols);
    if (outputs_poisoned()) stream_.fill(b, kPoisonWord);
    return Tensor(this, rows, cols, std::move(b));
}

void VulkanBackend::tensor_write(Tensor& t, std::span<const float> src) {
    check(static_cast<int64_t>(src.size()) == t.numel(), "tensor_write: {} floats into {}", src.size(),
          t.numel());
    check_owner(t, "tensor_write");
    buffer_write(buffer_of(t), src.data(), src.size_bytes());
}

void VulkanBackend::tensor_read(const Tensor& t, std::span<float> dst) {
    check(static_cast<int64_t>(dst.size()) == t.numel(), "tensor_read: {} floats from {}", dst.size(),
          t.numel());
    check_owner(t, "tensor_read");
    stream_.download(buffer_of(t), 0, dst.data(), dst.size_bytes());
}

void VulkanBackend::embedding(const Weight& table, std::span<const int32_t> ids, Tensor& out) {
    fault_check(OpKind::embedding);
    const auto n = static_cast<int64_t>(ids.size());
    check_shape(out, n, table.cols(), "embedding out");
    for (int32_t id : ids)
        check(id >= 0 && id < table.rows(), "token id {} is outside the vocabulary [0, {})", id,
              table.rows());
    if (n == 0) return;
    const vk::DeviceWeight& t = resident(table, "embedding");
    const struct { uint32_t n, cols; } push{static_cast<uint32_t>(n), static_cast<uint32_t>(table.cols())};
    run("embedding", {static_cast<uint32_t>(t.format)},
        {t.data, t.scales, upload(ids.data(), ids.size_bytes()), buffer_of(out)}, push,
        groups_for(n * table.cols(), kThreads));
}

void VulkanBackend::rms_norm(const Tensor& x, const Weight& w, float eps, Tensor& out) {
    fault_check(OpKind::rms_norm);
    check(w.format() == Format::f32 && w.rows() * w.cols() == x.cols(), "rms_norm: weight must be f32 [{}]",
          x.cols());
    check_owner(x, "rms_norm x");
    check_shape(out, x.rows(), x.cols(), "rms_norm out");
    const vk::BufferPtr& g = resident(w, "rms_norm").data;
    const NormPush push{static_cast<uint32_t>(x.cols()), eps};
    run("norm", {kNormRms}, {buffer_of(x), g, g, buffer_of(out)}, push, static_cast<uint32_t>(x.rows()));
}

void VulkanBackend::layer_norm(const Tensor& x, const Weight& w, const Weight& b, float eps, Tensor& out) {
    fault_check(OpKind::layer_norm);
    check(w.format() == Format::f32 && b.format() == Format::f32 && w.rows() * w.cols() == x.cols() &&
              b.rows() * b.cols() == x.cols(),
          "layer_norm: weight and bias must be f32 [{}]", x.cols());
    check_owner(x, "layer_norm x");
    check_shape(out, x.rows(), x.cols(), "layer_norm out");
    const NormPush push{static_cast<uint32_t>(x.cols()), eps};
    run("norm", {kNormLayer},
        {buffer_of(x), resident(w, "layer_norm").data, resident(b, "layer_norm").data, buffer_of(out)}, push,
        static_cast<uint32_t>(x.rows()));
}

void VulkanBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
    fault_check(OpKind::add);
    check_owner(a, "add a");
    check_owner(b, "add b");
    check_shape(b, a.rows(), a.cols(), "add b");
    check_shape(out, a.rows(), a.cols(), "add out");
    const ElementwisePush push{static_cast<uint32_t>(a.numel()), 0, 0};
    run("elementwise", {kOpAdd}, {buffer_of(a), buffer_of(b), buffer_of(out)}, push,
        groups_for(a.numel(), kThreads));
}

void VulkanBackend::clamp(Tensor& x, float lo, float hi) {
    fault_check(OpKind::clamp);
    check_owner(x, "clamp");
    const ElementwisePush push{static_cast<uint32_t>(x.numel()), lo, hi};
    run("elementwise", {kOpClamp}, {buffer_of(x), placeholder_, placeholder_}, push,
        groups_for(x.numel(), kThreads));
}

void VulkanBackend::mul_sigmoid(const Tensor& a, const Tensor& b, Tensor& out) {
    fault_check(OpKind::mul_sigmoid);
    check_owner(a, "mul_sigmoid a");
    check_owner(b, "mul_sigmoid b");
    check_shape(b, a.rows(), a.cols(), "mul_sigmoid b");
    check_shape(out, a.rows(), a.cols(), "mul_sigmoid out");
    const struct { uint32_t count; } push{static_cast<uint32_t>(a.numel())};
    run("mul_sigmoid", {}, {buffer_of(a), buffer_of(b), buffer_of(out)}, push,
        groups_for(a.numel(), kThreads));
}

void VulkanBackend::rope(Tensor& x, const RopeParams& p, int64_t pos0) {
    fault_check(OpKind::rope);
    rope_args_check(x, p);
    check_owner(x, "rope");
    const std::vector<float> inv_freq = rope_inv_freq(p);
    const int half = p.rotary_dim / 2;
    const int64_t n = x.rows();
    std::vector<float> table(2 * n * half);  // [n, half] cos, then [n, half] sin, as the CPU computes them
    for (int64_t r = 0; r < n; ++r) {
        const float pos = static_cast<float>((pos0 + r) * p.position_stride);
        for (int i = 0; i < half; ++i) {
            const float angle = pos * inv_freq[i];
            const float sin_a = std::sin(angle) * p.attention_scaling;
            table[r * half + i] = std::cos(angle) * p.attention_scaling;
            table[(n + r) * half + i] = p.inverse ? -sin_a : sin_a;  // inverse: rotation by -angle
        }
    }
    const struct {
        uint32_t n, cols, head_dim, half_dim, rotary_offset, neox;
    } push{static_cast<uint32_t>(n),
           static_cast<uint32_t>(x.cols()),
           static_cast<uint32_t>(p.head_dim),
           static_cast<uint32_t>(half),
           static_cast<uint32_t>(p.rotary_offset),
           p.style == RopeStyle::neox ? 1u : 0u};
    run("rope", {}, {buffer_of(x), upload(table.data(), table.size() * sizeof(float))}, push,
        groups_for(n * (x.cols() / p.head_dim) * half, kThreads));
}

void VulkanBackend::slice_cols(const Tensor& x, int64_t c0, Tensor& out) {
    fault_check(OpKind::slice_cols);
    check(out.rows() == x.rows() && c0 >= 0 && c0 + out.cols() <= x.cols(),
          "slice_cols: columns [{}, {}) of {}", c0, c0 + out.cols(), x.cols());
    check_owner(x, "slice_cols x");
    const CopyColsPush push{static_cast<uint32_t>(x.rows()), static_cast<uint32_t>(x.cols()),
                            static_cast<uint32_t>(c0), static_cast<uint32_t>(out.cols()),
                            static_cast<uint32_t>(out.cols())};
    run("copy_cols", {}, {buffer_of(x), buffer_of(out)}, push, groups_for(out.numel(), kThreads));
}

Routing VulkanBackend::route_softmax_topk(const Tensor& logits, int k, bool renormalize) {
    fault_check(OpKind::route_softmax_topk);
    std::vector<float> host(logits.numel());
    tensor_read(logits, host);
    Tensor t = host_.tensor_new(logits.rows(), logits.cols());
    host_.tensor_write(t, host);
    return host_.route_softmax_topk(t, k, renormalize);
}

}  // namespace coli
