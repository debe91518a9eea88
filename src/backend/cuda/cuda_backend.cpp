// The CUDA backend: the device, memory, weights and the ops other than matmul and moe_experts.
#include "backend/cuda/cuda_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/gqa_attend.h"
#include "backend/cuda/limits.h"
#include "backend/cuda/mla_attend.h"
#include "backend/cuda/support.h"
#include "backend/residency.h"
#include "core/error.h"

namespace coli {

using cuda::cuda_check;
using cuda::dev;

namespace {

constexpr int kPoisonByte = 0xff;  // all bytes 0xff: each float a NaN (COLI_POISON_OUTPUTS)

}  // namespace

CudaProbe cuda_probe() {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess)
        return {false,
                fmt::format("no usable CUDA device: {} ({}); check the NVIDIA driver and that a GPU is "
                            "visible (nvidia-smi), or use --backend cpu",
                            cudaGetErrorString(err), cudaGetErrorName(err))};
    if (count == 0) return {false, "no CUDA device found; use --backend cpu"};
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return {false, "cudaGetDeviceProperties failed"};
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    return {true, cuda::device_summary(p, runtime)};
}

std::unique_ptr<Backend> cuda_backend_create(uint64_t vram_bytes) {
    const CudaProbe p = cuda_probe();
    check(p.ok, "backend 'cuda' is unavailable: {}", p.detail);
    return std::make_unique<CudaBackend>(std::make_shared<cuda::Context>(0), vram_bytes);
}

CudaBackend::CudaBackend(std::shared_ptr<cuda::Context> ctx, uint64_t vram_bytes)
    : DeviceBackend("cuda", cuda_supports, cuda_host_step, "vram expert tier"), ctx_(std::move(ctx)) {
    size_t free_bytes = 0, total_bytes = 0;
    cuda_check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    budget_set(vram_bytes, {free_bytes, kCudaVramReserve, "free memory"});
}

bool CudaBackend::device_supports(const OpDesc& d) const {
    // The DSA scoring kernel holds a token's queries in shared memory: as much as this device offers.
    return d.op != OpKind::dsa_select ||
           cuda::dsa_scores_smem_bytes({static_cast<int>(d.heads), static_cast<int>(d.head_dim), 0, 0}) <=
               ctx_->props.sharedMemPerBlockOptin;
}

std::string CudaBackend::device_description() const {
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    return cuda::device_summary(ctx_->props, runtime);
}

uint64_t CudaBackend::weight_device_bytes(const WeightView& w) const {
    return cuda::device_bytes_of(w);
}

std::shared_ptr<void> CudaBackend::weight_to_device(const WeightView& w) {
    auto res = std::make_shared<CudaResidentWeight>();
    res->memory = cuda::buffer_new(ctx_, cuda::device_bytes_of(w), ctx_->compute);
    res->view = cuda::weight_copy_async(w, static_cast<uint8_t*>(res->memory.get()), ctx_->compute);
    return res;
}

std::unique_ptr<ExpertTier> CudaBackend::tier_create(uint64_t capacity) {
    return cuda::expert_tier_new(ctx_, capacity);
}

Tensor CudaBackend::tensor_new(int64_t rows, int64_t cols) {
    Tensor t = tensor_new_unfilled(rows, cols);
    if (t.numel() > 0)
        cuda_check(cudaMemsetAsync(dev(t), 0, t.numel() * sizeof(float), ctx_->compute), "tensor zero-fill");
    return t;
}

Tensor CudaBackend::tensor_new_unfilled(int64_t rows, int64_t cols) {
    check(rows >= 0 && cols >= 0, "tensor_new: negative shape [{}, {}]", rows, cols);
    const size_t bytes = static_cast<size_t>(rows * cols) * sizeof(float);
    std::shared_ptr<void> mem = cuda::buffer_new(ctx_, bytes, ctx_->compute);
    if (bytes > 0 && outputs_poisoned())
        cuda_check(cudaMemsetAsync(mem.get(), kPoisonByte, bytes, ctx_->compute), "tensor poison fill");
    return Tensor(this, rows, cols, std::move(mem));
}

void CudaBackend::tensor_write(Tensor& t, std::span<const float> src) {
    check(static_cast<int64_t>(src.size()) == t.numel(), "tensor_write: {} floats into {}", src.size(),
          t.numel());
    if (src.empty()) return;
    // Pageable source: the call returns once the bytes are staged, so src may go away after it.
    cuda_check(cudaMemcpyAsync(dev(t), src.data(), src.size_bytes(), cudaMemcpyHostToDevice, ctx_->compute),
               "tensor_write");
}

void CudaBackend::tensor_read(const Tensor& t, std::span<float> dst) {
    check(static_cast<int64_t>(dst.size()) == t.numel(), "tensor_read: {} floats from {}", dst.size(),
          t.numel());
    cuda::device_read(*ctx_, dev(t), dst.data(), dst.size_bytes());
}

void CudaBackend::embedding(const Weight& table, std::span<const int32_t> ids, Tensor& out) {
    fault_check(OpKind::embedding);
    const auto n = static_cast<int64_t>(ids.size());
    check_shape(out, n, table.cols(), "embedding out");
    for (int32_t id : ids)
        check(id >= 0 && id < table.rows(), "token id {} is outside the vocabulary [0, {})", id,
              table.rows());
    const cuda::DeviceWeight& t = resident(table, "embedding");
    cuda::Scratch<int32_t> dids(ctx_, ids.size());
    cuda_check(
        cudaMemcpyAsync(dids.get(), ids.data(), ids.size_bytes(), cudaMemcpyHostToDevice, ctx_->compute),
        "embedding ids");
    cuda::embedding(t, dids.get(), n, dev(out), ctx_->compute);
}

void CudaBackend::rms_norm(const Tensor& x, const Weight& w, float eps, Tensor& out) {
    fault_check(OpKind::rms_norm);
    check(w.format() == Format::f32 && w.rows() * w.cols() == x.cols(), "rms_norm: weight must be f32 [{}]",
          x.cols());
    check_owner(x, "rms_norm x");
    check_shape(out, x.rows(), x.cols(), "rms_norm out");
    const cuda::DeviceWeight& g = resident(w, "rms_norm");
    cuda::rms_norm(dev(x), static_cast<const float*>(g.data), eps, x.rows(), x.cols(), dev(out),
                   ctx_->compute);
}

void CudaBackend::matmul(const Weight& w, const Tensor& x, Tensor& y) {
    fault_check(OpKind::matmul);
    check_owner(x, "matmul x");
    const int64_t groups = w.cols() > 0 ? x.cols() / w.cols() : 1;
    check(groups >= 1 && x.cols() == groups * w.cols() && w.rows() % groups == 0,
          "matmul: x [{}, {}] for a [{}, {}] weight", x.rows(), x.cols(), w.rows(), w.cols());
    check_shape(y, x.rows(), w.rows(), "matmul y");
    if (groups == 1) return matmul_device(resident(w, "matmul"), dev(x), x.rows(), dev(y));
    matmul_grouped(resident(w, "matmul"), groups, dev(x), x.rows(), dev(y));
}

void CudaBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
    fault_check(OpKind::add);
    check_owner(a, "add a");
    check_owner(b, "add b");
    check_shape(b, a.rows(), a.cols(), "add b");
    check_shape(out, a.rows(), a.cols(), "add out");
    cuda::add(dev(a), dev(b), dev(out), a.numel(), ctx_->compute);
}

void CudaBackend::clamp(Tensor& x, float lo, float hi) {
    fault_check(OpKind::clamp);
    cuda::clamp(dev(x), x.numel(), lo, hi, ctx_->compute);
}

const float* CudaBackend::inv_freq(const RopeParams& p) {
    // Keyed by what the table depends on, so that a rope call only computes it the first time.
    auto& slot = inv_freq_[{p.theta, p.rotary_dim, p.yarn.factor, p.yarn.original_ctx, p.yarn.beta_fast,
                            p.yarn.beta_slow}];
    if (!slot) {
        const std::vector<float> inv = rope_inv_freq(p);  // as the CPU computes it, in f32
        slot = cuda::buffer_new(ctx_, inv.size() * sizeof(float), ctx_->compute);
        // Synchronous: the host table goes out of scope here.
        cuda_check(cudaMemcpy(slot.get(), inv.data(), inv.size() * sizeof(float), cudaMemcpyHostToDevice),
                   "rope table");
    }
    return static_cast<const float*>(slot.get());
}

void CudaBackend::rope(Tensor& x, const RopeParams& p, int64_t pos0) {
    fault_check(OpKind::rope);
    rope_args_check(x, p);
    const cuda::RopeArgs a{
        p.head_dim,          p.rotary_dim,      p.rotary_offset, p.style == RopeStyle::neox,
        p.attention_scaling, p.position_stride, p.inverse};
    cuda::rope(dev(x), x.rows(), x.cols(), inv_freq(p), a, pos0, ctx_->compute);
}

void CudaBackend::attention(const Tensor& q, const Tensor& k, const Tensor& v, KvCache& cache,
                            const AttentionShape& s, int64_t pos0, Tensor& out) {
    fault_check(OpKind::attention);
    const int64_t n = q.rows(), hd = s.head_dim;
    const int64_t kv_width = static_cast<int64_t>(s.n_kv_heads) * hd;
    attention_args_check(q, k, v, cache, s, pos0, out);
    for (const Tensor* t :
         {&q, &k, &v, static_cast<const Tensor*>(&cache.k), static_cast<const Tensor*>(&cache.v)})
        check_owner(*t, "attention");
    const size_t bytes = static_cast<size_t>(n * kv_width) * sizeof(float);
    cuda_check(cudaMemcpyAsync(dev(cache.k) + pos0 * kv_width, dev(k), bytes, cudaMemcpyDeviceToDevice,
                               ctx_->compute),
               "k cache write");
    cuda_check(cudaMemcpyAsync(dev(cache.v) + pos0 * kv_width, dev(v), bytes, cudaMemcpyDeviceToDevice,
                               ctx_->compute),
               "v cache write");
    if (n == 0) return;
    const cuda::AttentionArgs a{s.n_heads, s.n_kv_heads, s.head_dim, s.scale};
    if (n >= kCudaAttentionBlasMinQueries)
        return cuda::gqa_attend(ctx_, dev(q), dev(cache.k), dev(cache.v), n, pos0, a, dev(out));
    const cuda::AttentionSplit split = cuda::attention_split(n, pos0, a);
    const cuda::Scratch<float> partial(ctx_, static_cast<size_t>(cuda::attention_scratch_floats(split, a)));
    cuda::attention(dev(q), dev(cache.k), dev(cache.v), n, pos0, a, split, partial.get(), dev(out),
                    ctx_->compute);
}

Routing CudaBackend::route_softmax_topk(const Tensor& logits, int k, bool renormalize) {
    fault_check(OpKind::route_softmax_topk);
    const int64_t n = logits.rows(), n_experts = logits.cols();
    check(k > 0 && k <= n_experts, "route_softmax_topk: k = {} of {} experts", k, n_experts);
    Routing r{n, k, std::vector<int32_t>(n * k), std::vector<float>(n * k)};
    if (n == 0) return r;
    // The ids, then the weights' bits: one read for both.
    cuda::Scratch<int32_t> both(ctx_, 2 * n * k);
    cuda::route_softmax_topk(dev(logits), n, n_experts, k, renormalize, both.get(),
                             reinterpret_cast<float*>(both.get() + n * k), ctx_->compute);
    std::vector<int32_t> host(2 * n * k);
    cuda::device_read(*ctx_, both.get(), host.data(), host.size() * sizeof(int32_t));
    std::copy(host.begin(), host.begin() + n * k, r.experts.begin());
    std::memcpy(r.weights.data(), host.data() + n * k, n * k * sizeof(float));
    return r;
}

void CudaBackend::slice_cols(const Tensor& x, int64_t c0, Tensor& out) {
    fault_check(OpKind::slice_cols);
    check(out.rows() == x.rows() && c0 >= 0 && c0 + out.cols() <= x.cols(),
          "slice_cols: columns [{}, {}) of {}", c0, c0 + out.cols(), x.cols());
    if (out.numel() == 0) return;
    cuda_check(
        cudaMemcpy2DAsync(dev(out), out.cols() * sizeof(float), dev(x) + c0, x.cols() * sizeof(float),
                          out.cols() * sizeof(float), x.rows(), cudaMemcpyDeviceToDevice, ctx_->compute),
        "slice_cols");
}

void CudaBackend::mla_attention(const Tensor& q, const Tensor& latent, const Tensor& k_pe,
                                const Weight& w_kvb, KvCache& cache, const MlaShape& s, int64_t pos0,
                                const Tensor* selection, Tensor& out) {
    fault_check(OpKind::mla_attention);
    mla_args_check(q, latent, k_pe, w_kvb, cache, s, pos0, selection, out);
    if (selection) check_owner(*selection, "mla_attention selection");
    for (const Tensor* t :
         {&q, &latent, &k_pe, static_cast<const Tensor*>(&cache.k), static_cast<const Tensor*>(&cache.v)})
        check_owner(*t, "mla_attention");
    const int64_t n = q.rows();
    cuda_check(cudaMemcpyAsync(dev(cache.k) + pos0 * s.kv_lora, dev(latent), latent.numel() * sizeof(float),
                               cudaMemcpyDeviceToDevice, ctx_->compute),
               "latent cache write");
    cuda_check(cudaMemcpyAsync(dev(cache.v) + pos0 * s.rope_dim, dev(k_pe), k_pe.numel() * sizeof(float),
                               cudaMemcpyDeviceToDevice, ctx_->compute),
               "rope-key cache write");
    cuda::Scratch<float> q_abs(ctx_, n * s.n_heads * s.kv_lora), mixed(ctx_, n * s.n_heads * s.kv_lora);
    const cuda::MlaArgs a{s.n_heads, s.nope_dim, s.rope_dim, s.v_dim, s.kv_lora, s.scale};
    const cuda::DeviceWeight& w = resident(w_kvb, "mla_attention");
    cuda::mla_absorb(dev(q), w, n, a, q_abs.get(), ctx_->compute);
    const cuda::MlaAttendIo io{dev(q),
                               q_abs.get(),
                               dev(cache.k),
                               dev(cache.v),
                               selection ? dev(*selection) : nullptr,
                               selection ? selection->cols() : 0,
                               mixed.get()};
    cuda::mla_attend(ctx_, io, n, pos0, a);
    cuda::mla_output(mixed.get(), w, n, a, dev(out), ctx_->compute);
}

void CudaBackend::layer_norm(const Tensor& x, const Weight& w, const Weight& b, float eps, Tensor& out) {
    fault_check(OpKind::layer_norm);
    check(w.format() == Format::f32 && b.format() == Format::f32 && w.rows() * w.cols() == x.cols() &&
              b.rows() * b.cols() == x.cols(),
          "layer_norm: weight and bias must be f32 [{}]", x.cols());
    check_owner(x, "layer_norm x");
    check_shape(out, x.rows(), x.cols(), "layer_norm out");
    cuda::layer_norm(dev(x), static_cast<const float*>(resident(w, "layer_norm").data),
                     static_cast<const float*>(resident(b, "layer_norm").data), eps, x.rows(), x.cols(),
                     dev(out), ctx_->compute);
}

void CudaBackend::dsa_select(const Tensor& q, const Tensor& weights, const Tensor& k, Tensor& cache,
                             const DsaShape& s, int64_t pos0, Tensor& out) {
    fault_check(OpKind::dsa_select);
    dsa_args_check(q, weights, k, cache, s, pos0, out);
    for (const Tensor* t : {&q, &weights, &k, static_cast<const Tensor*>(&cache)})
        check_owner(*t, "dsa_select");
    check_owner(out, "dsa_select out");
    const int64_t n = q.rows(), total = pos0 + n;
    cuda_check(cudaMemcpyAsync(dev(cache) + pos0 * s.head_dim, dev(k), k.numel() * sizeof(float),
                               cudaMemcpyDeviceToDevice, ctx_->compute),
               "indexer key cache write");
    const cuda::DsaArgs a{s.n_heads, s.head_dim, s.scale, s.weight_scale};
    // Scores and their top-k on the device: only the selection leaves the kernels.
    cuda::Scratch<float> scores(ctx_, n * total);
    cuda::dsa_scores(dev(q), dev(weights), dev(cache), n, pos0, a, scores.get(), ctx_->compute);
    cuda::dsa_topk(scores.get(), n, total, pos0, 1, s.top_k, dev(out), ctx_->compute);
}

}  // namespace coli
