// `coli test-ops --bench` on Vulkan: decode GEMV speed per format beside its bound, measured in the same
// run: weight bytes / time against a device-to-device copy (bytes read + written / time) of the whole
// buffer and of the same bytes. Weights rotate over copies spanning kSpanBytes so that calls read device
// memory, not a cache. Times come from the harness every backend's bench uses (backend/device/bench.h):
// the device's (GPU timestamps between runs of back-to-back calls, as CUDA's events time its kernels); the
// commands' recording on the host, which precedes the submission, is not in them (the MoE layer also shows
// the wall time).
// moe_experts submits its own commands (the host records what follows while they run), so its device time
// includes a submission per call.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <iterator>
#include <vector>

#include "backend/bench_shapes.h"
#include "backend/device/bench.h"
#include "backend/vulkan/vulkan_backend.h"
#include "backend/vulkan/vulkan_backend_impl.h"
#include "core/error.h"
#include "core/random.h"
#include "core/thread_pool.h"

namespace coli {

namespace {

constexpr uint64_t kCopyBytes = 1ull << 30;    // the clock warm-up's copy size (at most)
constexpr uint64_t kSpanBytes = 256ull << 20;  // weight copies rotated over: several times any L2 cache
constexpr int kMaxCopies = 64;                 // at most this many copies of one weight
constexpr double kGiga = 1e9;
constexpr int kMaxMoeLayers = 8;  // layers of experts rotated over at most

// The device's clocks: an idle GPU lowers them, and between the bench's submissions it idles while the host
// encodes weights and records commands (docs/benchmarks.md). So
// before timing, `load` (one large copy) keeps the device busy for kClockWarmupMs in submissions of
// kLoadsPerBatch, and the timed calls follow kLoadsPerBatch more loads in the same submission.
constexpr double kClockWarmupMs = 250.0;  // wall time of busy device before a measurement
constexpr int kLoadsPerBatch = 20;        // loads per warm-up submission

// The device's time between marks: timestamps on the stream (the host's clock, waiting for the stream at each
// mark, where the queue has none), after kClockWarmupMs of `load` that brings the device's clocks up and
// kLoadsPerBatch more in the submission of the timed calls.
class StreamClock final : public BenchClock {
public:
    StreamClock(vk::Stream& s, const std::function<void()>& load)
        : s_(s), load_(load), host_([&s] { s.finish(); }) {}
    void start() override {
        using Clock = std::chrono::steady_clock;
        s_.finish();
        for (const auto t0 = Clock::now();
             std::chrono::duration<double, std::milli>(Clock::now() - t0).count() < kClockWarmupMs;
             s_.finish())
            for (int l = 0; l < kLoadsPerBatch; ++l) load_();
        for (int l = 0; l < kLoadsPerBatch; ++l) load_();
    }
    void mark() override {
        if (s_.timestamps_supported())
            s_.timestamp();
        else
            host_.mark();
    }
    std::vector<double> marks_ms() override {
        if (!s_.timestamps_supported()) return host_.marks_ms();
        s_.finish();
        return s_.timestamps_ms();
    }

private:
    vk::Stream& s_;
    const std::function<void()>& load_;
    HostBenchClock host_;
};

// Milliseconds per call of f on the device (bench_ms).
template <typename F>
double device_ms(vk::Stream& s, const std::function<void()>& load, F&& f) {
    StreamClock clock(s, load);
    return bench_ms(clock, f);
}

// Milliseconds per call of f on the host's clock, recording and submission included.
template <typename F>
double wall_ms(vk::Stream& s, F&& f) {
    HostBenchClock clock([&s] { s.finish(); });
    return bench_ms(clock, f);
}

uint64_t weight_bytes(const WeightView& v) {
    return v.data_bytes() + v.scale_bytes();
}

// A MoE layer's routed experts in decode (one token, kBenchExperts experts), three ways, each as the
// experts' bytes / time beside the copy: through moe_experts once they are in the device tier (what a model
// runs: the routing upload, the tier, two batched GEMV dispatches and the combine), the two batched GEMV
// dispatches alone, and one plain GEMV dispatch per matrix. Layers rotate so that calls read device memory.
void moe_decode_bench(VulkanBackend& b, size_t shape_index, const std::function<void()>& load,
                      uint64_t tier_bytes, double copy_gbps) {
    const BenchMoeShape& m = kBenchMoeShapes[shape_index];
    fmt::print(
        "\ndecode MoE layer of {}, n = 1: {} experts of {}x{} (gate, up) and {}x{} (down): through "
        "moe_experts (device time; wall time with the host's recording); its two batched GEMV dispatches "
        "alone; one GEMV dispatch per matrix\n",
        m.model, kBenchExperts, m.d_ff, m.d_model, m.d_model, m.d_ff);
    fmt::print("{:<16} {:>7} {:>10} {:>9} {:>12} {:>10} {:>9} {:>11} {:>9} {:>9} {:>9} {:>10} {:>9}\n",
               "format", "layers", "moe us", "of copy", "moe wall us", "batch us", "of copy", "gate/up us",
               "of copy", "down us", "of copy", "single us", "of copy");
    Tensor x = b.tensor_new(1, m.d_model), y = b.tensor_new(1, m.d_model);
    b.tensor_write(x, random_normal(m.d_model, 5));
    const Routing r = bench_moe_routing();
    const std::vector<float> gw = random_normal(m.d_ff * m.d_model, 13),
                             dw = random_normal(m.d_model * m.d_ff, 17);
    // The batched dispatches' operands: job e reads x row e and writes row e of its output.
    const std::vector<float> xs = random_normal(kBenchExperts * m.d_model, 5);
    const vk::BufferPtr xb = b.upload(xs.data(), xs.size() * sizeof(float)),
                        act = b.scratch(kBenchExperts * m.d_ff), out = b.scratch(kBenchExperts * m.d_model);
    std::vector<uint32_t> first;
    for (uint32_t e = 0; e <= kBenchExperts; ++e) first.push_back(e);
    for (size_t fi = 0; fi < std::size(kBenchFormats); ++fi) {
        const Format f = kBenchFormats[fi];
        // The tier names an expert by (layer, id): each shape, format and layer has layers of its own.
        const auto layer0 =
            static_cast<int32_t>((shape_index * std::size(kBenchFormats) + fi) * kMaxMoeLayers);
        const EncodedWeight gu = weight_encode(f, gw.data(), m.d_ff, m.d_model),
                            dn = weight_encode(f, dw.data(), m.d_model, m.d_ff);
        const uint64_t layer_bytes = kBenchExperts * (2 * weight_bytes(gu.view()) + weight_bytes(dn.view()));
        const int layers = static_cast<int>(std::clamp<uint64_t>(
            std::min(kSpanBytes / layer_bytes + 1, tier_bytes / (4 * layer_bytes)), 1, kMaxMoeLayers));
        const std::vector<std::vector<ExpertWeights>> experts =
            bench_moe_layers(gu.view(), dn.view(), layers, layer0);
        for (int l = 0; l < layers; ++l) b.moe_experts(experts[l], r, x, y);  // uploads into the tier
        const auto moe_call = [&](int i) { b.moe_experts(experts[i % layers], r, x, y); };
        const double moe_ms = device_ms(b.stream(), load, moe_call),
                     moe_wall_ms = wall_ms(b.stream(), moe_call);

        // The same layers' matrices as device weights of their own, for the GEMV dispatches.
        std::vector<std::vector<vk::DeviceWeight>> mats(layers);  // [layer][gate, up, down of each expert]
        std::vector<vk::GemvJobs> gate_up(layers), down(layers);
        for (int l = 0; l < layers; ++l) {
            for (int e = 0; e < kBenchExperts; ++e)
                for (const WeightView& v : {gu.view(), gu.view(), dn.view()})
                    mats[l].push_back(vk::weight_to_device(b.stream(), v));
            gate_up[l] = {{}, 2, first, xb, nullptr, act, GluActivation{}};
            down[l] = {{}, 1, first, act, nullptr, out, {}};
            for (int e = 0; e < kBenchExperts; ++e) {
                gate_up[l].weights.insert(gate_up[l].weights.end(), {&mats[l][3 * e], &mats[l][3 * e + 1]});
                down[l].weights.push_back(&mats[l][3 * e + 2]);
            }
        }
        const double batch_ms = device_ms(b.stream(), load, [&](int i) {
            b.gemv(gate_up[i % layers]);
            b.gemv(down[i % layers]);
        });
        const double gate_up_ms = device_ms(b.stream(), load, [&](int i) { b.gemv(gate_up[i % layers]); });
        const double down_ms = device_ms(b.stream(), load, [&](int i) { b.gemv(down[i % layers]); });
        const double single_ms = device_ms(b.stream(), load, [&](int i) {
            for (const vk::DeviceWeight& w : mats[i % layers]) b.matmul_device(w, xb, 1, act);
        });
        const auto share_of = [&](double bytes, double ms) {
            return 100.0 * bytes / (ms * 1e-3) / kGiga / copy_gbps;
        };
        const auto share = [&](double ms) { return share_of(static_cast<double>(layer_bytes), ms); };
        const double gate_up_bytes = 2.0 * kBenchExperts * weight_bytes(gu.view()),
                     down_bytes = 1.0 * kBenchExperts * weight_bytes(dn.view());
        fmt::print(
            "{:<16} {:>7} {:>10.1f} {:>8.0f}% {:>12.1f} {:>10.1f} {:>8.0f}% "
            "{:>11.1f} {:>8.0f}% {:>9.1f} {:>8.0f}% {:>10.1f} {:>8.0f}%\n",
            format_name(f), layers, moe_ms * 1e3, share(moe_ms), moe_wall_ms * 1e3, batch_ms * 1e3,
            share(batch_ms), gate_up_ms * 1e3, share_of(gate_up_bytes, gate_up_ms), down_ms * 1e3,
            share_of(down_bytes, down_ms), single_ms * 1e3, share(single_ms));
    }
}

}  // namespace

void vulkan_bench_print(int device) {
    std::string why;
    const int picked = vk::device_pick(vk::device_list(), device, &why);
    check(picked >= 0, "vulkan bench: {}", why);
    auto ctx = std::make_shared<vk::Context>(picked);
    VulkanBackend backend(ctx, 0, default_pool());
    vk::Stream& s = backend.stream();

    const uint64_t copy_bytes = std::min<uint64_t>(kCopyBytes, ctx->info.local_bytes / 8);
    const vk::BufferPtr src = vk::buffer_new(ctx, copy_bytes, vk::Memory::device),
                        dst = vk::buffer_new(ctx, copy_bytes, vk::Memory::device);
    s.fill(src, 0);
    const auto copy = [&](uint64_t offset, uint64_t bytes) {
        backend.words_copy(src, offset, dst, offset, bytes);
    };
    const std::function<void()> load = [&] { copy(0, copy_bytes); };
    // The bound: a compute-shader copy (copy_rate.cpp).
    const double copy_gbps = backend.copy_gbps_measure();
    fmt::print("device: {}\n", backend.description());
    fmt::print("times: {}, after {:.0f} ms of copies that bring the device's clocks up\n",
               s.timestamps_supported() ? "the device's (GPU timestamps)"
                                        : "the host's clock (the queue has no timestamps)",
               kClockWarmupMs);
    fmt::print("device-to-device copy (compute shader): {:.0f} GB/s (bytes read + written)\n\n", copy_gbps);

    bench_gemv_table_begin();
    const int64_t max_cols = 8192;
    const std::vector<float> xh = random_normal(max_cols, 7);
    const vk::BufferPtr x = backend.upload(xh.data(), xh.size() * sizeof(float));
    const vk::BufferPtr y = backend.scratch(max_cols);
    for (const BenchShape& sh : kBenchGemvShapes) {
        const std::vector<float> wf = random_normal(static_cast<size_t>(sh.rows * sh.cols), 11);
        for (Format f : kBenchFormats) {
            const EncodedWeight e = weight_encode(f, wf.data(), sh.rows, sh.cols);
            const WeightView v = e.view();
            const uint64_t bytes = weight_bytes(v);
            if (v.data_bytes() > ctx->props.limits.maxStorageBufferRange) {
                fmt::print("{:<16} {:>6}x{:<7} skipped: larger than the device's largest storage buffer\n",
                           format_name(f), sh.rows, sh.cols);
                continue;
            }
            const int copies = static_cast<int>(std::clamp<uint64_t>(kSpanBytes / bytes + 1, 1, kMaxCopies));
            std::vector<vk::DeviceWeight> w;
            for (int c = 0; c < copies; ++c) w.push_back(vk::weight_to_device(s, v));
            const double ms =
                device_ms(s, load, [&](int i) { backend.matmul_device(w[i % copies], x, 1, y); });
            const double gbps = bytes / (ms * 1e-3) / kGiga;
            const uint64_t slots = std::max<uint64_t>(1, copy_bytes / bytes);
            const double same_ms = device_ms(s, load, [&](int i) {
                const uint64_t off = (static_cast<uint64_t>(i) % slots) * bytes;
                copy(off, std::min(bytes, copy_bytes));
            });
            const double same_gbps = 2.0 * std::min(bytes, copy_bytes) / (same_ms * 1e-3) / kGiga;
            bench_gemv_table_row(f, sh, ms, gbps, copy_gbps, same_gbps);
        }
    }
    for (size_t i = 0; i < std::size(kBenchMoeShapes); ++i)
        moe_decode_bench(backend, i, load, ctx->info.local_bytes / 2, copy_gbps);
}

}  // namespace coli
