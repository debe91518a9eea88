#include "nn/moe.h"

#include <algorithm>
#include <set>
#include <vector>

#include "core/error.h"
#include "core/timer.h"
#include "nn/weights.h"

namespace coli {

std::vector<std::string> swiglu_expert_tensors(const Checkpoint& ckpt, const std::string& prefix,
                                               const SwigluNames& names) {
    std::vector<std::string> tensors;
    for (const std::string* proj : {&names.gate, &names.up, &names.down}) {
        const std::string plain = prefix + *proj + ".weight",
                          packed = prefix + *proj + std::string(kPackedSuffix);
        if (ckpt.find(plain) == nullptr && ckpt.find(packed) != nullptr) {
            tensors.push_back(packed);
            tensors.push_back(packed_scale_name_of(packed));  // required: the index names it when absent
            continue;
        }
        tensors.push_back(plain);
        const TensorInfo* t = ckpt.find(plain);
        if (const TensorInfo* scales = t ? scales_tensor_of(ckpt, *t) : nullptr)
            tensors.push_back(scales->name);
    }
    return tensors;
}

ExpertWeights swiglu_expert_weights(const ExpertHandle& e) {
    std::vector<Weight> weights;
    for (size_t i = 0; i < e.part_count(); ++i) {
        const TensorInfo& t = e.part_info(i);
        const bool scaled = i + 1 < e.part_count() && is_scales_name_of(e.part_info(i + 1).name, t.name);
        weights.push_back(scaled ? weight_view_of(t, e.part(i), &e.part_info(i + 1), e.part(i + 1))
                                 : weight_view_of(t, e.part(i)));
        weights.back().host.nan_free = e.part_nan_free(i);  // fp8: the CPU matmul leaves out its NaN fix
        if (scaled) ++i;
    }
    check(weights.size() == 3,
          "expert {} of layer {}: {} tensors make {} weights, expected gate, up and down", e.expert(),
          e.layer(), e.part_count(), weights.size());
    return {
        .id = e.expert(), .gate = weights[0], .up = weights[1], .down = weights[2], .act = GluActivation{}};
}

Tensor moe_routed(Ops& ops, ExpertStore& store, int layer, const Tensor& x, const Routing& r,
                  const ExpertWeightsOf& weights_of, const std::function<void()>& after_fetch) {
    const Timer timer;
    for (int64_t t = 0; t < r.n_tokens; ++t)
        store.routing_record(layer, std::span<const int32_t>(&r.experts[t * r.k], r.k));

    const std::set<int32_t> used(r.experts.begin(), r.experts.end());  // ascending ids
    const std::vector<int32_t> ids(used.begin(), used.end());

    Tensor y = ops.tensor(x.rows(), x.cols());
    for (size_t begin = 0, end = 0; begin < ids.size(); begin = end) {
        // Asked for each group: a failed allocation lowers the store's budget, and with it the group.
        const auto group = static_cast<size_t>(store.max_resident(layer));
        end = std::min(ids.size(), begin + group);
        std::vector<ExpertHandle> handles;
        try {
            handles = store.fetch(layer, std::span<const int32_t>(ids.data() + begin, end - begin));
        } catch (const OutOfMemory&) {
            if (static_cast<size_t>(store.max_resident(layer)) >= end - begin) throw;
            end = begin;  // the same experts again, fewer at a time
            continue;
        }
        if (end < ids.size())  // the next group's reads run while this group computes
            store.prefetch(
                layer, std::span<const int32_t>(ids.data() + end, std::min(ids.size(), end + group) - end));
        else if (after_fetch)
            after_fetch();
        std::vector<ExpertWeights> experts;
        experts.reserve(handles.size());
        for (const ExpertHandle& h : handles) {
            experts.push_back(weights_of(h));
            experts.back().layer = layer;  // (layer, id): the stable name a device's expert tier keys on
        }
        ops.moe_experts(experts, r, x, y);
    }
    store.moe_time_record(timer.seconds());
    return y;
}

ExpertWeights mlp_load(WeightLoader& load, const std::string& prefix, const MlpWidths& widths, int32_t id,
                       int layer, GluActivation act) {
    const ConfigShape in{{widths.d_ff, widths.d_model}, widths.ff_key + " and hidden_size"};
    const ConfigShape out{{widths.d_model, widths.d_ff}, widths.ff_key + " and hidden_size"};
    return {id,
            load.matrix(prefix + "gate_proj.weight", in),
            load.matrix(prefix + "up_proj.weight", in),
            load.matrix(prefix + "down_proj.weight", out),
            layer,
            act};
}

void mlp_add(Ops& ops, const ExpertWeights& mlp, const Tensor& x, Tensor& y) {
    const int64_t n = x.rows();
    const Routing every_token{n, 1, std::vector<int32_t>(n, mlp.id), std::vector<float>(n, 1.0f)};
    ops.moe_experts({&mlp, 1}, every_token, x, y);
}

void moe_prefetch(ExpertStore& store, int layer, const std::function<Routing()>& route) {
    if (store.layer_held(layer)) return;
    const Routing guess = route();
    const std::set<int32_t> ids(guess.experts.begin(), guess.experts.end());
    store.prefetch(layer, std::vector<int32_t>(ids.begin(), ids.end()));
}

}  // namespace coli
