// A backend that takes every op and computes nothing: its tensors are shapes without storage, its reads
// give zeros and its routers choose experts 0 .. k-1. With Ops::record_to it turns a forward into the list
// of op calls (OpDesc) the forward makes, at any size and in no time: `coli backends` records each model
// family at its real size on a checkpoint of shapes only (Checkpoint::shapes) to compute the family x
// backend matrix. Never registered as a backend a user can pick.
#pragma once

#include "backend/backend.h"

namespace coli {

class RecordBackend final : public Backend {
public:
    std::string_view name() const override { return "record"; }
    std::string description() const override { return "records op calls; computes nothing"; }
    bool supports(const OpDesc&) const override { return true; }

    Tensor tensor_new(int64_t rows, int64_t cols) override;
    void tensor_write(Tensor&, std::span<const float>) override {}
    void tensor_read(const Tensor& t, std::span<float> dst) override;  // zeros
    Weight weight_upload(const Weight& w) override { return w; }

    void embedding(const Weight&, std::span<const int32_t>, Tensor&) override {}
    void rms_norm(const Tensor&, const Weight&, float, Tensor&) override {}
    void matmul(const Weight&, const Tensor&, Tensor&) override {}
    void add(const Tensor&, const Tensor&, Tensor&) override {}
    void clamp(Tensor&, float, float) override {}
    void rope(Tensor&, const RopeParams&, int64_t) override {}
    void attention(const Tensor&, const Tensor&, const Tensor&, KvCache&, const AttentionShape&, int64_t,
                   Tensor&) override {}
    Routing route_softmax_topk(const Tensor& logits, int k, bool renormalize) override;
    void moe_experts(std::span<const ExpertWeights>, const Routing&, const Tensor&, Tensor&) override {}
    void slice_cols(const Tensor&, int64_t, Tensor&) override {}
    void mla_attention(const Tensor&, const Tensor&, const Tensor&, const Weight&, KvCache&, const MlaShape&,
                       int64_t, const Tensor*, Tensor&) override {}
    Routing route_sigmoid_topk(const Tensor& logits, const Weight& bias, const SigmoidRouting& p,
                               std::span<const int32_t> fixed) override;
    void layer_norm(const Tensor&, const Weight&, const Weight&, float, Tensor&) override {}
    void dsa_select(const Tensor&, const Tensor&, const Tensor&, Tensor&, const DsaShape&, int64_t,
                    Tensor&) override {}
    void short_conv(const Tensor&, const Weight&, Tensor&, Tensor&) override {}
    void kda(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Weight&,
             const Weight&, const KdaShape&, Tensor&, Tensor&) override {}
    void mul_sigmoid(const Tensor&, const Tensor&, Tensor&) override {}
    void res_mix(std::span<const Tensor>, const Weight&, float, Tensor&) override {}
    void copy_rows(Tensor&, const Tensor&, int64_t) override {}
    void compress_kv(const Tensor&, const Tensor&, const Weight&, const Tensor&, const Tensor&,
                     const CompressShape&, int64_t, Tensor&) override {}
    void compressed_attention(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor*,
                              const Weight&, const CompressedAttentionShape&, int64_t, Tensor&) override {}
    void index_topk(const Tensor&, const Tensor&, const Tensor&, const DsaShape&, int64_t, Tensor&) override {
    }
    void hc_weights(const Tensor&, const Weight&, const Weight&, const HcShape&, Tensor&) override {}
    void hc_collapse(const Tensor&, const Tensor&, int, Tensor&) override {}
    void hc_expand(const Tensor&, const Tensor&, const Tensor&, int, Tensor&) override {}
    void repeat_cols(const Tensor&, int, Tensor&) override {}
};

}  // namespace coli
