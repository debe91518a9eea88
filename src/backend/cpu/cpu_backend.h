// The CPU backend: the reference every other backend is tested against, and the fallback for any op
// another backend declines. Implements every op of the contract for every weight format.
#pragma once

#include <vector>

#include "backend/backend.h"

namespace coli {

class ThreadPool;

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(ThreadPool& pool);

    std::string_view name() const override { return "cpu"; }
    std::string description() const override;
    bool supports(const OpDesc&) const override { return true; }

    Tensor tensor_new(int64_t rows, int64_t cols) override;
    void tensor_write(Tensor& t, std::span<const float> src) override;
    void tensor_read(const Tensor& t, std::span<float> dst) override;
    Weight weight_upload(const Weight& w) override { return w; }

    void embedding(const Weight& table, std::span<const int32_t> ids, Tensor& out) override;
    void rms_norm(const Tensor& x, const Weight& w, float eps, Tensor& out) override;
    void matmul(const Weight& w, const Tensor& x, Tensor& y) override;
    void add(const Tensor& a, const Tensor& b, Tensor& out) override;
    void clamp(Tensor& x, float lo, float hi) override;
    void rope(Tensor& x, const RopeParams& p, int64_t pos0) override;
    void attention(const Tensor& q, const Tensor& k, const Tensor& v, KvCache& cache, const AttentionShape& s,
                   int64_t pos0, Tensor& out) override;
    Routing route_softmax_topk(const Tensor& logits, int k, bool renormalize) override;
    void moe_experts(std::span<const ExpertWeights> experts, const Routing& r, const Tensor& x,
                     Tensor& y) override;
    void slice_cols(const Tensor& x, int64_t c0, Tensor& out) override;
    void mla_attention(const Tensor& q, const Tensor& latent, const Tensor& k_pe, const Weight& w_kvb,
                       KvCache& cache, const MlaShape& s, int64_t pos0, const Tensor* selection,
                       Tensor& out) override;
    Routing route_sigmoid_topk(const Tensor& logits, const Weight& bias, const SigmoidRouting& p,
                               std::span<const int32_t> fixed) override;
    void layer_norm(const Tensor& x, const Weight& w, const Weight& b, float eps, Tensor& out) override;
    void dsa_select(const Tensor& q, const Tensor& weights, const Tensor& k, Tensor& cache, const DsaShape& s,
                    int64_t pos0, Tensor& out) override;
    void short_conv(const Tensor& x, const Weight& w, Tensor& state, Tensor& out) override;
    void kda(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
             const Weight& a_log, const Weight& dt_bias, const KdaShape& s, Tensor& state,
             Tensor& out) override;
    void mul_sigmoid(const Tensor& a, const Tensor& b, Tensor& out) override;
    void res_mix(std::span<const Tensor> entries, const Weight& w, float eps, Tensor& out) override;
    void copy_rows(Tensor& dst, const Tensor& src, int64_t row0) override;
    void compress_kv(const Tensor& kv, const Tensor& gate, const Weight& ape, const Tensor& state_kv,
                     const Tensor& state_gate, const CompressShape& s, int64_t pos0, Tensor& out) override;
    void compressed_attention(const Tensor& q, const Tensor& kv, const Tensor& ring, const Tensor& entries,
                              const Tensor* selection, const Weight& sinks, const CompressedAttentionShape& s,
                              int64_t pos0, Tensor& out) override;
    void index_topk(const Tensor& q, const Tensor& weights, const Tensor& keys, const DsaShape& s,
                    int64_t pos0, Tensor& out) override;
    void hc_weights(const Tensor& mix, const Weight& base, const Weight& scale, const HcShape& s,
                    Tensor& out) override;
    void hc_collapse(const Tensor& x, const Tensor& weights, int streams, Tensor& out) override;
    void hc_expand(const Tensor& x, const Tensor& y, const Tensor& weights, int streams,
                   Tensor& out) override;
    void repeat_cols(const Tensor& x, int times, Tensor& out) override;

private:
    ThreadPool& pool_;
    // moe_experts' work arrays, kept between calls (one op runs at a time on a backend): at prefill they are
    // tens of megabytes, which fresh allocations would fault in again at every call.
    struct MoeScratch {
        Tensor xs, gate, up, out;  // routed rows of x, hidden, hidden, outputs; [1, capacity] each
    };
    MoeScratch moe_scratch_;
    // t's floats, reallocated (zero-filled) when it holds fewer than n.
    float* scratch(Tensor& t, int64_t n);
};

}  // namespace coli
