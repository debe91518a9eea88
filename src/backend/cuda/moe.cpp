// moe_experts on CUDA. The experts' weights come from the VRAM tier (uploads on the upload stream).
//   decode (every expert has at most kCudaGemvMaxTokens tokens, one d_ff, top-k up to kCudaCombineMaxSlots):
//     one batched GEMV for every expert's gate and up, one activation (SwiGLU or SiTU), one batched GEMV for
//     the downs and one combine that adds each token's expert outputs in the CPU's order: four launches per
//     layer (the 4-bit GEMVs add an x layout), however many experts, all dependent launches (each one's
//     blocks start as the one before leaves the SMs). No copy of the routing goes between them, which would
//     keep them from overlapping: the GEMVs read x in place (every expert of a one-token step reads the
//     same row; rows of tokens that are not consecutive are gathered first) and the combine's slots travel
//     in its launch parameters.
//   prefill: per expert (ascending id, as the CPU adds them) gather its tokens, gate and up matmuls,
//     activation, down matmul, add back weighted. Every expert's upload is issued before the first kernel
//     (each completes on its own event), so copies overlap compute, and an upload that fails leaves y as it
//     was for the CPU fallback.
#include <algorithm>
#include <optional>
#include <vector>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/limits.h"
#include "backend/moe_plan.h"
#include "core/error.h"

namespace coli {

using cuda::cuda_check;

namespace {

bool batch_fits(const Weight& w) {
    return cuda::gemv_batch_fits({w.format(), w.rows(), w.cols(), nullptr, nullptr});
}

// The batched GEMVs take kCudaGemvMaxTokens rows of an expert; the combine carries one token's k slots in
// its launch parameters at least.
constexpr MoeBatchLimits kBatchLimits{kCudaGemvMaxTokens, kCudaCombineMaxSlots, batch_fits};

cuda::GluArgs glu_args(const GluActivation& a) {
    return {a.kind, a.beta, a.linear_beta};
}

template <typename T>
cuda::Scratch<T> device_copy(const std::shared_ptr<cuda::Context>& ctx, const std::vector<T>& v) {
    cuda::Scratch<T> d(ctx, v.size());
    cuda_check(cudaMemcpyAsync(d.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice, ctx->compute),
               "moe_experts routing upload");
    return d;
}

// y[t] += each of token t's routed rows of out, in the order the experts are used (as the CPU adds them), by
// moe_combine launches whose slots travel in their parameters, as many tokens per launch as fit.
void moe_combine_launch(const MoePlan& p, const Routing& r, const float* out, int64_t d_model, float* y,
                        cudaStream_t s) {
    const MoeSlots slots = moe_slots(p, r);
    const int64_t per_launch = kCudaCombineMaxSlots / r.k;
    for (int64_t t0 = 0; t0 < r.n_tokens; t0 += per_launch) {
        const int64_t n = std::min(per_launch, r.n_tokens - t0);
        cuda::CombineSlots c;
        std::copy_n(slots.rows.begin() + t0 * r.k, n * r.k, c.slots);
        std::copy_n(slots.gains.begin() + t0 * r.k, n * r.k, c.gains);
        cuda::moe_combine(out, d_model, c, n, r.k, y + t0 * d_model, s);
    }
}

}  // namespace

void CudaBackend::moe_experts(std::span<const ExpertWeights> experts, const Routing& r, const Tensor& x,
                              Tensor& y) {
    const MoePlan plan = moe_begin(experts, r, x, y);
    cuda::ExpertTier& tier = tier_for_call<cuda::ExpertTier>();
    if (plan.used.empty()) return;
    // All uploads queued first, each on its own event: the kernels of one expert still overlap the uploads
    // of the next.
    const std::vector<cuda::DeviceExpertPtr> dev = tier.acquire_all(experts, plan.used);
    if (moe_batchable(plan, experts, r, kBatchLimits))
        moe_batched(dev, plan, experts, r, x, y);
    else
        moe_per_expert(dev, plan, experts, x, y);
}

void CudaBackend::moe_batched(std::span<const cuda::DeviceExpertPtr> dev, const MoePlan& p,
                              std::span<const ExpertWeights> experts, const Routing& r, const Tensor& x,
                              Tensor& y) {
    cudaStream_t s = ctx_->compute;
    const int64_t d_model = x.cols(), d_ff = p.max_ff, total = p.total();
    const cuda::GluArgs act = glu_args(experts[p.used.front()].act);
    for (const auto& d : dev)  // a wait for an upload long done would only keep the GEMV from starting early
        if (cudaEventQuery(d->ready) != cudaSuccess)
            cuda_check(cudaStreamWaitEvent(s, d->ready, 0), "wait for expert upload");

    // An expert's x rows are read in place where its tokens are consecutive (decode: every expert reads
    // token 0, so the GEMV lays x out once for all of them); otherwise they are gathered.
    bool in_place = true;
    for (size_t i : p.used)
        for (int64_t j = p.offset[i]; j < p.offset[i + 1]; ++j)
            in_place = in_place && p.rows[j] == p.rows[p.offset[i]] + (j - p.offset[i]);
    const auto* xp = static_cast<const float*>(x.storage());
    std::optional<cuda::Scratch<float>> xs;
    if (!in_place) {
        xs.emplace(ctx_, total * d_model);
        const cuda::Scratch<int32_t> d_rows = device_copy(ctx_, p.rows);
        cuda::gather_rows(xp, d_model, d_rows.get(), total, xs->get(), s);
    }
    const auto x_of = [&](size_t i) {  // [m, d_model]
        const int64_t o = p.offset[i];
        return in_place ? xp + p.rows[o] * d_model : xs->get() + o * d_model;
    };

    cuda::Scratch<float> gate(ctx_, total * d_ff), up(ctx_, total * d_ff), out(ctx_, total * d_model);
    std::vector<cuda::GemvJob> jobs;
    for (size_t u = 0; u < p.used.size(); ++u) {
        const int64_t o = p.offset[p.used[u]];
        const int m = static_cast<int>(p.offset[p.used[u] + 1] - o);
        jobs.push_back({dev[u]->gate, x_of(p.used[u]), gate.get() + o * d_ff, m});  // [m, d_ff]
        jobs.push_back({dev[u]->up, x_of(p.used[u]), up.get() + o * d_ff, m});      // [m, d_ff]
    }
    cuda::gemv_batch(jobs.data(), static_cast<int>(jobs.size()), s);
    cuda::glu(gate.get(), up.get(), total * d_ff, act, gate.get(), s);
    jobs.clear();
    for (size_t u = 0; u < p.used.size(); ++u) {
        const int64_t o = p.offset[p.used[u]];
        const int m = static_cast<int>(p.offset[p.used[u] + 1] - o);
        jobs.push_back({dev[u]->down, gate.get() + o * d_ff, out.get() + o * d_model, m});  // [m, d_model]
    }
    cuda::gemv_batch(jobs.data(), static_cast<int>(jobs.size()), s);
    moe_combine_launch(p, r, out.get(), d_model, static_cast<float*>(y.storage()), s);
}

void CudaBackend::moe_per_expert(std::span<const cuda::DeviceExpertPtr> dev, const MoePlan& p,
                                 std::span<const ExpertWeights> experts, const Tensor& x, Tensor& y) {
    cudaStream_t s = ctx_->compute;
    const int64_t d_model = x.cols();
    const cuda::Scratch<int32_t> d_rows = device_copy(ctx_, p.rows);
    const cuda::Scratch<float> d_gains = device_copy(ctx_, p.gains);
    cuda::Scratch<float> xs(ctx_, p.max_rows * d_model), gate(ctx_, p.max_rows * p.max_ff),
        up(ctx_, p.max_rows * p.max_ff), out(ctx_, p.max_rows * d_model);

    for (size_t u = 0; u < p.used.size(); ++u) {
        const size_t i = p.used[u];
        const cuda::DeviceExpert& e = *dev[u];
        const int64_t m = p.rows_of(i), d_ff = e.gate.rows;
        cuda_check(cudaStreamWaitEvent(s, e.ready, 0), "wait for expert upload");
        cuda::gather_rows(static_cast<const float*>(x.storage()), d_model, d_rows.get() + p.offset[i], m,
                          xs.get(), s);
        matmul_device(e.gate, xs.get(), m, gate.get());  // [m, d_ff]
        matmul_device(e.up, xs.get(), m, up.get());      // [m, d_ff]
        cuda::glu(gate.get(), up.get(), m * d_ff, glu_args(experts[i].act), gate.get(), s);
        matmul_device(e.down, gate.get(), m, out.get());  // [m, d_model]
        cuda::scatter_add(out.get(), d_model, d_rows.get() + p.offset[i], d_gains.get() + p.offset[i], m,
                          static_cast<float*>(y.storage()), s);
    }
}

}  // namespace coli
