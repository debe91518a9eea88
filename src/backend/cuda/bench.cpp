// `coli test-ops --bench` on CUDA: each kernel's speed beside its bound, measured in the same run.
//   GEMV (decode, n = 1): weight bytes / time, beside a device-to-device copy (bytes read + written / time),
//     one matrix per launch and, as moe_experts runs decode, a MoE layer's experts in two batched launches.
//   GEMM (prefill): TFLOP/s of matmul_device per format beside plain cuBLAS bf16 (bf16 x, one pass).
// Weights rotate over enough copies to exceed the L2 cache, so every call reads HBM. Calls are timed in
// back-to-back runs on the stream, as a decode step queues them, by the harness every backend's bench uses
// (backend/device/bench.h), between events of the compute stream.
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <vector>

#include "backend/bench_shapes.h"
#include "backend/cuda/blas.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/device/bench.h"
#include "core/error.h"
#include "core/random.h"

namespace coli {

using cuda::cuda_check;

namespace {

constexpr uint64_t kCopyBytes = 2ull << 30;  // span of the same-size copies
constexpr int kL2Multiple = 4;               // rotate weight copies until they span this many L2 sizes
constexpr int kMaxCopies = 64;               // at most this many copies of one weight
constexpr int64_t kPrefillTokens = 2048;     // tokens of the prefill GEMM
constexpr double kGiga = 1e9, kTera = 1e12;

// The device's time between marks: events recorded on the stream.
class EventClock final : public BenchClock {
public:
    explicit EventClock(cudaStream_t s) : s_(s) {}
    ~EventClock() override {
        for (cudaEvent_t e : events_) cudaEventDestroy(e);
    }
    void mark() override {
        cudaEvent_t e = nullptr;
        cuda_check(cudaEventCreate(&e), "bench event");
        events_.push_back(e);
        cuda_check(cudaEventRecord(e, s_), "bench event record");
    }
    std::vector<double> marks_ms() override {
        cuda_check(cudaEventSynchronize(events_.back()), "bench timing");
        std::vector<double> ms;
        for (cudaEvent_t e : events_) {
            float t = 0;
            cuda_check(cudaEventElapsedTime(&t, events_.front(), e), "bench event time");
            ms.push_back(t);
        }
        for (cudaEvent_t e : events_) cudaEventDestroy(e);
        events_.clear();
        return ms;
    }

private:
    cudaStream_t s_;
    std::vector<cudaEvent_t> events_;
};

// Milliseconds per call of f on the stream (bench_ms).
template <typename F>
double time_ms(cudaStream_t s, F&& f) {
    EventClock clock(s);
    return bench_ms(clock, f);
}

// Device-to-device copies of `bytes` (bytes read + written / time, as the large copy), each from a
// different offset of the large buffers so that they read HBM: what a kernel reading that much can expect.
double same_size_copy_gbps(cudaStream_t s, uint8_t* src, uint8_t* dst, uint64_t bytes) {
    const uint64_t slots = std::max<uint64_t>(1, kCopyBytes / bytes);
    const double ms = time_ms(s, [&](int i) {
        const uint64_t off = (static_cast<uint64_t>(i) % slots) * bytes;
        cudaMemcpyAsync(dst + off, src + off, bytes, cudaMemcpyDeviceToDevice, s);
    });
    return 2.0 * bytes / (ms * 1e-3) / kGiga;
}

// Enough device copies of one weight to span kL2Multiple L2 sizes (at least `min_copies`), so that rotating
// over them reads HBM.
struct Copies {
    std::vector<std::shared_ptr<void>> memory;
    std::vector<cuda::DeviceWeight> views;
};
Copies copies_make(const std::shared_ptr<cuda::Context>& ctx, const WeightView& v, uint64_t span_bytes,
                   int min_copies) {
    const uint64_t bytes = cuda::device_bytes_of(v), l2 = static_cast<uint64_t>(ctx->props.l2CacheSize);
    const int n = std::max(
        min_copies, static_cast<int>(std::clamp<uint64_t>(kL2Multiple * l2 / span_bytes + 1, 1, kMaxCopies)));
    Copies c;
    for (int i = 0; i < n; ++i) {
        c.memory.push_back(cuda::buffer_new(ctx, bytes, ctx->compute));
        c.views.push_back(
            cuda::weight_copy_async(v, static_cast<uint8_t*>(c.memory.back().get()), ctx->compute));
    }
    return c;
}

uint64_t weight_bytes(const WeightView& v) {
    return v.data_bytes() + v.scale_bytes();
}

// A MoE layer's routed experts in decode (one token, kBenchExperts experts), as experts' bytes / time beside
// the copy: through moe_experts once they are in the VRAM tier (what a model runs: the tier, the routing,
// two batched GEMV launches, the activation and the combine), and its two batched GEMV launches alone,
// together and each on its own (as a share of the copy for its own bytes). x and y hold at least
// kBenchExperts * max(d_model, d_ff) floats.
void moe_decode_bench(CudaBackend& backend, const std::shared_ptr<cuda::Context>& ctx, size_t shape_index,
                      const float* x, float* y, double copy_gbps) {
    const BenchMoeShape& m = kBenchMoeShapes[shape_index];
    cudaStream_t s = ctx->compute;
    fmt::print(
        "\ndecode MoE layer of {}, n = 1: {} experts of [{} x {}] gate, up and down, through moe_experts; "
        "its 2 batched GEMV launches, together and each alone\n",
        m.model, kBenchExperts, m.d_ff, m.d_model);
    fmt::print("{:<16} {:>10} {:>9} {:>10} {:>10} {:>9} {:>12} {:>9} {:>10} {:>9}\n", "format", "moe us",
               "of copy", "batch us", "GB/s", "of copy", "gate/up us", "of copy", "down us", "of copy");
    Tensor xt = backend.tensor_new(1, m.d_model), yt = backend.tensor_new(1, m.d_model);
    backend.tensor_write(xt, random_normal(m.d_model, 5));
    const Routing r = bench_moe_routing();
    const std::vector<float> wf = random_normal(static_cast<size_t>(m.d_ff * m.d_model), 13);
    for (size_t fi = 0; fi < std::size(kBenchFormats); ++fi) {
        const Format f = kBenchFormats[fi];
        const EncodedWeight gu = weight_encode(f, wf.data(), m.d_ff, m.d_model);
        const EncodedWeight dn = weight_encode(f, wf.data(), m.d_model, m.d_ff);
        const uint64_t layer_bytes = kBenchExperts * (2 * weight_bytes(gu.view()) + weight_bytes(dn.view()));
        // One copy per matrix of the layer, times enough layers to exceed the L2.
        const Copies gate_up =
            copies_make(ctx, gu.view(), layer_bytes / (3 * kBenchExperts), 2 * kBenchExperts);
        const Copies down = copies_make(ctx, dn.view(), layer_bytes / (3 * kBenchExperts), kBenchExperts);
        const int layers = static_cast<int>(down.views.size()) / kBenchExperts;
        std::vector<std::vector<cuda::GemvJob>> first(layers), second(layers);
        for (int l = 0; l < layers; ++l)
            for (int e = 0; e < kBenchExperts; ++e) {
                const int g = (l * kBenchExperts + e) % static_cast<int>(gate_up.views.size() / 2);
                first[l].push_back({gate_up.views[2 * g], x, y + (2 * e) * m.d_ff, 1});
                first[l].push_back({gate_up.views[2 * g + 1], x, y + (2 * e + 1) * m.d_ff, 1});
                second[l].push_back({down.views[l * kBenchExperts + e], x, y + e * m.d_model, 1});
            }
        // As many layers through moe_experts, from the tier. The tier names an expert by (layer, id): each
        // shape and format has layer ids of its own (at most kMaxCopies layers).
        const auto layer0 = static_cast<int32_t>((shape_index * std::size(kBenchFormats) + fi) * kMaxCopies);
        const std::vector<std::vector<ExpertWeights>> experts =
            bench_moe_layers(gu.view(), dn.view(), layers, layer0);
        for (int l = 0; l < layers; ++l) backend.moe_experts(experts[l], r, xt, yt);  // uploads into the tier
        const double moe_ms = time_ms(s, [&](int i) { backend.moe_experts(experts[i % layers], r, xt, yt); });
        const double ms = time_ms(s, [&](int i) {
            const int l = i % layers;
            cuda::gemv_batch(first[l].data(), static_cast<int>(first[l].size()), s);
            cuda::gemv_batch(second[l].data(), static_cast<int>(second[l].size()), s);
        });
        const double gu_ms = time_ms(s, [&](int i) {
            const int l = i % layers;
            cuda::gemv_batch(first[l].data(), static_cast<int>(first[l].size()), s);
        });
        const double dn_ms = time_ms(s, [&](int i) {
            const int l = i % layers;
            cuda::gemv_batch(second[l].data(), static_cast<int>(second[l].size()), s);
        });
        const auto share = [&](double bytes, double t_ms) {
            return 100.0 * bytes / (t_ms * 1e-3) / kGiga / copy_gbps;
        };
        const auto layer = static_cast<double>(layer_bytes);
        fmt::print(
            "{:<16} {:>10.1f} {:>8.0f}% {:>10.1f} {:>10.0f} {:>8.0f}% {:>12.1f} {:>8.0f}% {:>10.1f} "
            "{:>8.0f}%\n",
            format_name(f), moe_ms * 1e3, share(layer, moe_ms), ms * 1e3, layer / (ms * 1e-3) / kGiga,
            share(layer, ms), gu_ms * 1e3, share(2.0 * kBenchExperts * weight_bytes(gu.view()), gu_ms),
            dn_ms * 1e3, share(1.0 * kBenchExperts * weight_bytes(dn.view()), dn_ms));
    }
}

}  // namespace

void cuda_bench_print() {
    auto ctx = std::make_shared<cuda::Context>(0);
    CudaBackend backend(ctx, 0);
    cudaStream_t s = ctx->compute;
    const uint64_t l2 = static_cast<uint64_t>(ctx->props.l2CacheSize);

    // The bound: device-to-device copy (copy_rate.cpp); the same-size copies run over these buffers.
    cuda::Scratch<uint8_t> src(ctx, kCopyBytes), dst(ctx, kCopyBytes);
    cuda_check(cudaMemsetAsync(src.get(), 1, kCopyBytes, s), "bench fill");
    const double copy_gbps = backend.copy_gbps_measure();
    fmt::print("device: {}; L2 {:.0f} MB\n", ctx->props.name, l2 / 1e6);
    fmt::print("device-to-device copy: {:.0f} GB/s (bytes read + written)\n\n", copy_gbps);

    bench_gemv_table_begin();
    const int64_t max_cols = 8192;
    const std::vector<float> xh = random_normal(kPrefillTokens * max_cols, 7);
    cuda::Scratch<float> x(ctx, xh.size()), y(ctx, kPrefillTokens * max_cols);
    cuda_check(cudaMemcpyAsync(x.get(), xh.data(), xh.size() * sizeof(float), cudaMemcpyHostToDevice, s),
               "bench x");

    struct Gemm {
        Format f;
        BenchShape sh;
        double ms;
    };
    std::vector<Gemm> gemms;
    for (const BenchShape& sh : kBenchGemvShapes) {
        const std::vector<float> wf = random_normal(static_cast<size_t>(sh.rows * sh.cols), 11);
        for (Format f : kBenchFormats) {
            const EncodedWeight e = weight_encode(f, wf.data(), sh.rows, sh.cols);
            const WeightView v = e.view();
            const Copies c = copies_make(ctx, v, cuda::device_bytes_of(v), 1);
            const auto copies = static_cast<int>(c.views.size());
            const std::vector<cuda::DeviceWeight>& dw = c.views;
            const double ms = time_ms(s, [&](int i) { cuda::gemv(dw[i % copies], x.get(), 1, y.get(), s); });
            const double gbps = weight_bytes(v) / (ms * 1e-3) / kGiga;
            const double same_gbps = same_size_copy_gbps(s, src.get(), dst.get(), weight_bytes(v));
            bench_gemv_table_row(f, sh, ms, gbps, copy_gbps, same_gbps);
            if (sh.rows == kBenchGemvShapes[0].rows && sh.cols == kBenchGemvShapes[0].cols) {
                const double gms = time_ms(s, [&](int i) {
                    backend.matmul_device(dw[i % copies], x.get(), kPrefillTokens, y.get());
                });
                gemms.push_back({f, sh, gms});
            }
        }
    }

    for (size_t i = 0; i < std::size(kBenchMoeShapes); ++i)
        moe_decode_bench(backend, ctx, i, x.get(), y.get(), copy_gbps);

    // cuBLAS bf16 on the same shape: the tensor-core bound for prefill.
    const BenchShape sh = kBenchGemvShapes[0];
    cuda::Scratch<uint16_t> wb(ctx, sh.rows * sh.cols), xb(ctx, kPrefillTokens * sh.cols),
        scratch(ctx, std::max(sh.rows, kPrefillTokens) * sh.cols);
    cuda::split_bf16(x.get(), kPrefillTokens * sh.cols, xb.get(), scratch.get(), s);
    cuda::split_bf16(x.get(), sh.rows * sh.cols, wb.get(), scratch.get(), s);
    const float one = 1.0f, zero = 0.0f;
    const double blas_ms = time_ms(s, [&](int) {
        cuda::blas_api().gemm_ex(ctx->blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(sh.rows),
                                 static_cast<int>(kPrefillTokens), static_cast<int>(sh.cols), &one, wb.get(),
                                 CUDA_R_16BF, static_cast<int>(sh.cols), xb.get(), CUDA_R_16BF,
                                 static_cast<int>(sh.cols), &zero, y.get(), CUDA_R_32F,
                                 static_cast<int>(sh.rows), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    });
    const double flops = 2.0 * kPrefillTokens * sh.rows * sh.cols;
    const double blas_tflops = flops / (blas_ms * 1e-3) / kTera;
    fmt::print("\nprefill GEMM, n = {} tokens, {}x{} (bound: plain cuBLAS bf16, one pass, {:.1f} TFLOP/s)\n",
               kPrefillTokens, sh.rows, sh.cols, blas_tflops);
    fmt::print("{:<16} {:>10} {:>10} {:>9}\n", "format", "ms", "TFLOP/s", "of bf16");
    for (const Gemm& g : gemms) {
        const double tf = flops / (g.ms * 1e-3) / kTera;
        fmt::print("{:<16} {:>10.3f} {:>10.1f} {:>8.0f}%\n", format_name(g.f), g.ms, tf,
                   100.0 * tf / blas_tflops);
    }
    cuda_check(cudaStreamSynchronize(s), "bench");
}

}  // namespace coli
