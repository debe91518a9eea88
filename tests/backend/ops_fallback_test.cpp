// Rule 1 and 3 of docs/design.md: an op a backend declines runs on the CPU, gives the same result, and is
// counted. A stand-in backend that declines some ops plays the GPU here.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/support.h"
#include "backend/ops.h"
#include "backend/registry.h"
#include "backend/vulkan/limits.h"
#include "core/error.h"
#include "core/random.h"
#include "core/thread_pool.h"

namespace coli {
namespace {

// A stand-in device backend: forwards every op to an inner CPU backend, but owns its tensors (the same
// storage, rehomed) so that Ops sees a backend other than the CPU. Subclasses change one behaviour each.
class ForwardingBackend : public Backend {
public:
    explicit ForwardingBackend(ThreadPool& pool) : inner_(pool) {}
    std::string description() const override { return "test backend"; }
    bool supports(const OpDesc&) const override { return true; }
    Tensor tensor_new(int64_t r, int64_t c) override {
        const Tensor t = inner_.tensor_new(r, c);
        return Tensor(this, t.rows(), t.cols(), t.storage_shared());
    }
    void tensor_write(Tensor& t, std::span<const float> s) override { inner_.tensor_write(t, s); }
    void tensor_read(const Tensor& t, std::span<float> d) override { inner_.tensor_read(t, d); }
    Weight weight_upload(const Weight& w) override { return w; }
    void embedding(const Weight& t, std::span<const int32_t> ids, Tensor& o) override {
        inner_.embedding(t, ids, o);
    }
    void rms_norm(const Tensor& x, const Weight& w, float e, Tensor& o) override {
        inner_.rms_norm(x, w, e, o);
    }
    void matmul(const Weight& w, const Tensor& x, Tensor& y) override { inner_.matmul(w, x, y); }
    void add(const Tensor& a, const Tensor& b, Tensor& o) override { inner_.add(a, b, o); }
    void clamp(Tensor& x, float lo, float hi) override { inner_.clamp(x, lo, hi); }
    void rope(Tensor& x, const RopeParams& p, int64_t pos0) override { inner_.rope(x, p, pos0); }
    void attention(const Tensor& q, const Tensor& k, const Tensor& v, KvCache& c, const AttentionShape& s,
                   int64_t pos0, Tensor& o) override {
        inner_.attention(q, k, v, c, s, pos0, o);
    }
    Routing route_softmax_topk(const Tensor& l, int k, bool r) override {
        return inner_.route_softmax_topk(l, k, r);
    }
    void moe_experts(std::span<const ExpertWeights> e, const Routing& r, const Tensor& x,
                     Tensor& y) override {
        inner_.moe_experts(e, r, x, y);
    }
    void slice_cols(const Tensor& x, int64_t c0, Tensor& o) override { inner_.slice_cols(x, c0, o); }
    void mla_attention(const Tensor& q, const Tensor& l, const Tensor& k, const Weight& w, KvCache& c,
                       const MlaShape& s, int64_t pos0, const Tensor* sel, Tensor& o) override {
        inner_.mla_attention(q, l, k, w, c, s, pos0, sel, o);
    }
    void layer_norm(const Tensor& x, const Weight& w, const Weight& b, float e, Tensor& o) override {
        inner_.layer_norm(x, w, b, e, o);
    }
    void dsa_select(const Tensor& q, const Tensor& w, const Tensor& k, Tensor& c, const DsaShape& s,
                    int64_t pos0, Tensor& o) override {
        inner_.dsa_select(q, w, k, c, s, pos0, o);
    }
    Routing route_sigmoid_topk(const Tensor& l, const Weight& b, const SigmoidRouting& p,
                               std::span<const int32_t> f) override {
        return inner_.route_sigmoid_topk(l, b, p, f);
    }
    void short_conv(const Tensor& x, const Weight& w, Tensor& st, Tensor& o) override {
        inner_.short_conv(x, w, st, o);
    }
    void kda(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& b,
             const Weight& a, const Weight& dt, const KdaShape& s, Tensor& st, Tensor& o) override {
        inner_.kda(q, k, v, g, b, a, dt, s, st, o);
    }
    void mul_sigmoid(const Tensor& a, const Tensor& b, Tensor& o) override { inner_.mul_sigmoid(a, b, o); }
    void res_mix(std::span<const Tensor> e, const Weight& w, float eps, Tensor& o) override {
        inner_.res_mix(e, w, eps, o);
    }

private:
    CpuBackend inner_;
};

// The forwarding backend as it is: supports() says yes to every op, including those it has no kernel for.
class ForwardingBackendForTest final : public ForwardingBackend {
public:
    using ForwardingBackend::ForwardingBackend;
    std::string_view name() const override { return "forwarding"; }
};

// Answers "unsupported" for matmul on int8 weights and for rms_norm, as a GPU backend without those
// kernels would.
class DecliningBackend final : public ForwardingBackend {
public:
    using ForwardingBackend::ForwardingBackend;
    std::string_view name() const override { return "declining"; }
    bool supports(const OpDesc& d) const override {
        return d.op != OpKind::rms_norm && !(d.op == OpKind::matmul && d.format == Format::int8_row);
    }
    void rms_norm(const Tensor&, const Weight&, float, Tensor&) override {
        FAIL() << "declined op was called";
    }
};

TEST(OpsFallback, DeclinedOpsRunOnTheCpuAndAreCounted) {
    ThreadPool pool(2);
    CpuBackend cpu(pool);
    DecliningBackend gpu(pool);
    Ops on_cpu(cpu, cpu), on_gpu(gpu, cpu);

    const int64_t rows = 48, cols = 64, n = 3;
    const std::vector<float> wf = random_normal(rows * cols, 1), xf = random_normal(n * cols, 2);
    auto encoded = std::make_shared<EncodedWeight>(weight_encode(Format::int8_row, wf.data(), rows, cols));
    Weight w{encoded->view(), nullptr, encoded};
    std::vector<float> gain(rows, 1.5f);
    Weight g{WeightView{Format::f32, 1, rows, gain.data(), nullptr}, nullptr, nullptr};

    for (Ops* ops : {&on_cpu, &on_gpu}) {
        Tensor x = ops->tensor_from(n, cols, xf);
        Tensor y = ops->rms_norm(ops->matmul(ops->weight(w), x), g, 1e-5f);
        EXPECT_EQ(y.backend(), &ops->backend()) << "results come back to the chosen backend";
    }
    const auto y_cpu =
        on_cpu.read(on_cpu.rms_norm(on_cpu.matmul(w, on_cpu.tensor_from(n, cols, xf)), g, 1e-5f));
    const auto y_gpu =
        on_gpu.read(on_gpu.rms_norm(on_gpu.matmul(w, on_gpu.tensor_from(n, cols, xf)), g, 1e-5f));
    EXPECT_EQ(y_cpu, y_gpu) << "a fallback must not change results";

    const OpCounters& c = on_gpu.counters();
    EXPECT_EQ(c.fallback[static_cast<size_t>(OpKind::matmul)], 2u);
    EXPECT_EQ(c.fallback[static_cast<size_t>(OpKind::rms_norm)], 2u);
    EXPECT_EQ(c.fallback_by_format.at("matmul/int8"), 2u);
    EXPECT_GT(c.transfer_bytes, 0u);
    EXPECT_EQ(on_cpu.counters().total_fallbacks(), 0u);
    // Host time is counted for the ops that ran natively and for reads, never for fallbacks.
    EXPECT_GT(on_cpu.counters().native_seconds[static_cast<size_t>(OpKind::matmul)], 0.0);
    EXPECT_GT(on_cpu.counters().native_seconds[static_cast<size_t>(OpKind::rms_norm)], 0.0);
    EXPECT_GT(on_cpu.counters().read_seconds, 0.0);
    EXPECT_EQ(c.native_seconds[static_cast<size_t>(OpKind::matmul)], 0.0);
    EXPECT_EQ(c.native_seconds[static_cast<size_t>(OpKind::rms_norm)], 0.0);
}

// record_to sees every op call, in order, whether it runs natively or falls back, and stops on nullptr.
TEST(OpsRecord, RecordsEveryOpCall) {
    ThreadPool pool(1);
    CpuBackend cpu(pool);
    DecliningBackend gpu(pool);
    Ops ops(gpu, cpu);
    const int64_t rows = 8, cols = 16, n = 2;
    const std::vector<float> wf = random_normal(rows * cols, 5), xf = random_normal(n * cols, 6);
    Weight w{WeightView{Format::f32, rows, cols, wf.data(), nullptr}, nullptr, nullptr};
    std::vector<float> gain(rows, 1.0f);
    Weight g{WeightView{Format::f32, 1, rows, gain.data(), nullptr}, nullptr, nullptr};

    std::vector<OpDesc> seen;
    ops.record_to(&seen);
    Tensor y = ops.rms_norm(ops.matmul(w, ops.tensor_from(n, cols, xf)), g, 1e-5f);
    ops.record_to(nullptr);
    ops.add(y, y);
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen[0].op, OpKind::matmul);
    EXPECT_EQ(seen[0].n, n);
    EXPECT_EQ(seen[0].weight, nullptr) << "a recorded weight could dangle";
    EXPECT_EQ(seen[1].op, OpKind::rms_norm) << "declined ops are recorded too";
}

// A backend's size limits are declined in supports(), from the parameters Ops puts in the OpDesc: such an
// op runs on the CPU as a counted fallback, never as a device fault. The CUDA capability table (plain C++)
// answers here for a stand-in backend; the ops run on the CPU behind it.
class CudaLimitsBackend final : public ForwardingBackend {
public:
    using ForwardingBackend::ForwardingBackend;
    std::string_view name() const override { return "cuda-limits"; }
    bool supports(const OpDesc& d) const override { return cuda_supports(d); }
};

Weight weight_of(const std::vector<float>& v, int64_t rows, int64_t cols) {
    return Weight{WeightView{Format::f32, rows, cols, v.data(), nullptr}, nullptr, nullptr};
}

// One dsa_select call of one token over a 4-key cache: `heads` indexer heads of 4 dims, top_k keys.
void dsa_call(Ops& ops, int heads, int top_k) {
    constexpr int kDim = 4, kCtx = 4;
    Tensor cache = ops.tensor(kCtx, kDim);
    ops.dsa_select(ops.tensor_from(1, heads * kDim, random_normal(heads * kDim, 7)),
                   ops.tensor_from(1, heads, random_normal(heads, 8)),
                   ops.tensor_from(1, kDim, random_normal(kDim, 9)), cache,
                   DsaShape{heads, kDim, top_k, 0.5f, 1.0f}, 0);
}

// One mla_attention call of one token (one head of 8 + 8 dims, values of 8) with a latent of kv_lora.
void mla_call(Ops& ops, int64_t kv_lora) {
    constexpr int kDim = 8, kCtx = 4;
    const std::vector<float> w = random_normal(2 * kDim * kv_lora, 10);
    KvCache cache{ops.tensor(kCtx, kv_lora), ops.tensor(kCtx, kDim)};
    ops.mla_attention(ops.tensor_from(1, 2 * kDim, random_normal(2 * kDim, 11)),
                      ops.tensor_from(1, kv_lora, random_normal(kv_lora, 12)),
                      ops.tensor_from(1, kDim, random_normal(kDim, 13)), weight_of(w, 2 * kDim, kv_lora),
                      cache, MlaShape{1, kDim, kDim, kDim, kv_lora, 0.25f}, 0);
}

// One kda call of one token: one head of head_dim.
void kda_call(Ops& ops, int head_dim) {
    const std::vector<float> a_log = {0.5f}, dt_bias(head_dim, 0.0f), beta = {0.3f};
    Tensor state = ops.tensor(head_dim, head_dim);
    const auto row = [&](uint32_t seed) {
        return ops.tensor_from(1, head_dim, random_normal(head_dim, seed));
    };
    ops.kda(row(14), row(15), row(16), row(17), ops.tensor_from(1, 1, beta), weight_of(a_log, 1, 1),
            weight_of(dt_bias, 1, head_dim), KdaShape{1, head_dim, 0.0f}, state);
}

TEST(OpsFallback, DeclinedLimitsAreFallbacksNotFaults) {
    ThreadPool pool(1);
    CpuBackend cpu(pool);
    CudaLimitsBackend gpu(pool);
    Ops ops(gpu, cpu);
    const auto counted = [&](OpKind op, uint64_t native, uint64_t fallback) {
        const auto i = static_cast<size_t>(op);
        EXPECT_EQ(ops.counters().native[i], native) << op_name(op);
        EXPECT_EQ(ops.counters().fallback[i], fallback) << op_name(op);
    };
    mla_call(ops, kCudaMlaMaxLatent);
    mla_call(ops, kCudaMlaMaxLatent + 1);
    counted(OpKind::mla_attention, 1, 1);
    dsa_call(ops, 2, kCudaDsaMaxTopK);
    dsa_call(ops, 2, kCudaDsaMaxTopK + 1);
    counted(OpKind::dsa_select, 1, 1);
    kda_call(ops, 128);
    kda_call(ops, 256);
    counted(OpKind::kda, 1, 1);
    EXPECT_EQ(ops.counters().total_faults(), 0u);
}

// One index_topk call of one token over 4 compressed keys (ratio 1): 2 heads of head_dim, top_k.
void index_call(Ops& ops, int head_dim, int top_k) {
    constexpr int kHeads = 2, kKeys = 4;
    ops.index_topk(ops.tensor_from(1, kHeads * head_dim, random_normal(kHeads * head_dim, 22)),
                   ops.tensor_from(1, kHeads, random_normal(kHeads, 23)),
                   ops.tensor_from(kKeys, head_dim, random_normal(kKeys * head_dim, 24)),
                   DsaShape{kHeads, head_dim, top_k, 0.5f, 1.0f, 1}, 0);
}

// DeepSeek-V4's ops have CUDA kernels: the CUDA table takes them at any size, grouped matmul too, except
// index_topk past its kernels' limits (the top-k sort's size, the key width its scoring block holds), which
// it declines, so such a call runs on the CPU, counted, never as a fault (the stand-in has no index_topk
// kernel: a call that reached it would throw).
TEST(OpsFallback, CompressedAttentionLimitsAreDeclinedByCuda) {
    for (OpKind op : {OpKind::copy_rows, OpKind::repeat_cols, OpKind::hc_weights, OpKind::hc_collapse,
                      OpKind::hc_expand, OpKind::compress_kv, OpKind::compressed_attention})
        EXPECT_TRUE(cuda_supports({.op = op})) << op_name(op);
    EXPECT_TRUE(cuda_supports({.op = OpKind::matmul, .groups = 8}));
    EXPECT_TRUE(cuda_supports({.op = OpKind::index_topk, .head_dim = kCudaIndexMaxHeadDim, .top_k = 512}));
    ThreadPool pool(1);
    CpuBackend cpu(pool);
    CudaLimitsBackend gpu(pool);
    Ops ops(gpu, cpu);
    index_call(ops, kCudaIndexMaxHeadDim + 4, 2);
    index_call(ops, 8, kCudaDsaMaxTopK + 1);
    const auto i = static_cast<size_t>(OpKind::index_topk);
    EXPECT_EQ(ops.counters().native[i], 0u);
    EXPECT_EQ(ops.counters().fallback[i], 2u);
    EXPECT_EQ(ops.counters().total_faults(), 0u);
}

// An op that a backend neither implements nor declines fails loudly, naming the op, and Ops counts a fault.
TEST(OpsFallback, AnOpWithoutAKernelThatIsNotDeclinedIsAFault) {
    ThreadPool pool(1);
    CpuBackend cpu(pool);
    ForwardingBackendForTest gpu(pool);
    Tensor out = gpu.tensor_new(1, 8);
    try {
        gpu.repeat_cols(gpu.tensor_new(1, 4), 2, out);
        FAIL() << "the base class has no kernel";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("no kernel for repeat_cols"), std::string::npos) << e.what();
    }
    Ops ops(gpu, cpu);
    const std::vector<float> x = {1, 2, 3, 4};
    EXPECT_EQ(ops.read(ops.repeat_cols(ops.tensor_from(1, 4, x), 2)),
              (std::vector<float>{1, 2, 3, 4, 1, 2, 3, 4}));
    EXPECT_EQ(ops.counters().faults[static_cast<size_t>(OpKind::repeat_cols)], 1u);
}

// The same on the Vulkan backend itself (lavapipe in CI): more indexer heads than its scoring shader takes.
TEST(OpsFallback, VulkanDeclinesTooManyIndexerHeads) {
    ThreadPool pool(1);
    bool vulkan = false;
    for (const BackendInfo& b : backend_list()) vulkan |= b.name == "vulkan" && b.available;
    if (!vulkan) GTEST_SKIP() << "SKIPPED: no Vulkan backend or device here";
    std::unique_ptr<Backend> gpu = backend_create("vulkan", pool);
    CpuBackend cpu(pool);
    Ops ops(*gpu, cpu);
    dsa_call(ops, kVulkanDsaMaxHeads, 2);
    dsa_call(ops, kVulkanDsaMaxHeads + 1, 2);
    const auto i = static_cast<size_t>(OpKind::dsa_select);
    EXPECT_EQ(ops.counters().native[i], 1u);
    EXPECT_EQ(ops.counters().fallback[i], 1u);
    EXPECT_EQ(ops.counters().total_faults(), 0u);
}

// A host step (Backend::host_step) is counted apart from native ops and fallbacks.
class HostRoutingBackend final : public ForwardingBackend {
public:
    using ForwardingBackend::ForwardingBackend;
    std::string_view name() const override { return "host-routing"; }
    bool host_step(const OpDesc& d) const override { return d.op == OpKind::route_softmax_topk; }
};

TEST(OpsFallback, HostStepsAreCountedApart) {
    ThreadPool pool(1);
    CpuBackend cpu(pool);
    HostRoutingBackend gpu(pool);
    Ops ops(gpu, cpu);
    const Tensor logits = ops.tensor_from(2, 4, random_normal(8, 18));
    ops.route_softmax_topk(logits, 2, true);
    ops.add(logits, logits);
    const OpCounters& c = ops.counters();
    const auto i = static_cast<size_t>(OpKind::route_softmax_topk);
    EXPECT_EQ(c.host_steps[i], 1u);
    EXPECT_EQ(c.native[i], 0u);
    EXPECT_EQ(c.total_host_steps(), 1u);
    EXPECT_EQ(c.total_fallbacks(), 0u);
    EXPECT_EQ(c.native[static_cast<size_t>(OpKind::add)], 1u);
    EXPECT_NE(c.summary().find("route_softmax_topk 0/1/0"), std::string::npos) << c.summary();
}

TEST(BackendRegistry, UnknownAndUnavailableBackendsSayWhy) {
    ThreadPool pool(1);
    std::string first_available;
    for (const BackendInfo& b : backend_list())
        if (b.available && b.auto_skip.empty() && first_available.empty()) first_available = b.name;
    EXPECT_EQ(backend_create("auto", pool)->name(), first_available)
        << "auto takes the best available backend";
    try {
        backend_create("tpu", pool);
        FAIL() << "an unknown backend must be an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("known: auto"), std::string::npos) << e.what();
    }
    bool cuda_available = false;
    for (const BackendInfo& b : backend_list()) cuda_available |= b.name == "cuda" && b.available;
    if (cuda_available) return;  // the error paths below need a machine without it
    try {
        backend_create("cuda", pool);
        FAIL() << "a backend that is not compiled in, or has no device, must be an error";
    } catch (const Error& e) {
        const std::string why = COLI_HAVE_CUDA ? "no usable CUDA device" : "-DCOLI_CUDA=ON";
        EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
}

// Rule 3 under faults: an op that throws on the chosen backend runs on the CPU, with a warning and a
// counter, and the result is the CPU's.
class FaultingBackend final : public ForwardingBackend {
public:
    using ForwardingBackend::ForwardingBackend;
    std::string_view name() const override { return "faulting"; }
    std::string description() const override { return "test backend whose matmul fails"; }
    void matmul(const Weight&, const Tensor&, Tensor&) override {
        fail("faulting: matmul failed (injected)");
    }
    void clamp(Tensor&, float, float) override { fail("faulting: clamp failed (injected)"); }
};

TEST(OpsFallback, FaultsFallBackToTheCpuAndAreCounted) {
    ThreadPool pool(2);
    CpuBackend cpu(pool);
    FaultingBackend gpu(pool);
    Ops on_cpu(cpu, cpu), on_gpu(gpu, cpu);
    const int64_t rows = 24, cols = 64, n = 2;
    const std::vector<float> wf = random_normal(rows * cols, 3), xf = random_normal(n * cols, 4);
    auto encoded = std::make_shared<EncodedWeight>(weight_encode(Format::bf16, wf.data(), rows, cols));
    Weight w{encoded->view(), nullptr, encoded};
    std::vector<float> results[2];
    int i = 0;
    for (Ops* ops : {&on_cpu, &on_gpu}) {
        Tensor y = ops->matmul(w, ops->tensor_from(n, cols, xf));
        ops->clamp(y, -0.1f, 0.1f);
        EXPECT_EQ(y.backend(), &ops->backend());
        results[i++] = ops->read(y);
    }
    EXPECT_EQ(results[0], results[1]) << "a fault must not change results";
    const OpCounters& c = on_gpu.counters();
    EXPECT_EQ(c.fallback[static_cast<size_t>(OpKind::matmul)], 1u);
    EXPECT_EQ(c.faults[static_cast<size_t>(OpKind::matmul)], 1u);
    EXPECT_EQ(c.native[static_cast<size_t>(OpKind::matmul)], 0u);
    EXPECT_EQ(c.faults[static_cast<size_t>(OpKind::clamp)], 1u);
    EXPECT_EQ(c.total_faults(), 2u);
    EXPECT_EQ(c.fallback_by_format.at("matmul/bf16/fault"), 1u);
}

}  // namespace
}  // namespace coli
