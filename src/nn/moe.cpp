#include "nn/moe.h"

#include <algorithm>
#include <set>
#include <vector>

#include "core/error.h"
#include "nn/weights.h"

namespace coli {

std::vector<std::string> swiglu_expert_tensors(const Checkpoint& ckpt, const std::string& prefix,
                                               const SwigluNames& projections) {
    std::vector<std::string> names;
    for (const std::string* proj : {&projections.gate, &projections.up, &projections.down}) {
        names.push_back(prefix + *proj + ".weight");
        if (ckpt.find(scale_name_of(names.back())) != nullptr) names.push_back(scale_name_of(names.back()));
    }
    return names;
}

ExpertWeights swiglu_expert_weights(const ExpertHandle& e) {
    const size_t n = e.part_count();
    check(n == 3 || n == 6, "expert {} of layer {}: {} tensors, expected 3 (or 6 with block scales)",
          e.expert(), e.layer(), n);
    const size_t step = n / 3;  // 2: each weight is followed by its scales
    auto view = [&](size_t i) {
        const size_t p = i * step;
        return step == 1 ? weight_view_of(e.part_info(p), e.part(p))
                         : weight_view_of(e.part_info(p), e.part(p), &e.part_info(p + 1), e.part(p + 1));
    };
    return {e.expert(), view(0), view(1), view(2)};
}

Tensor moe_routed(Ops& ops, ExpertStore& store, int layer, const Tensor& x, const Routing& r,
                  const ExpertWeightsOf& weights_of, const std::function<void()>& after_fetch) {
    for (int64_t t = 0; t < r.n_tokens; ++t)
        store.routing_record(layer, std::span<const int32_t>(&r.experts[t * r.k], r.k));

    const std::set<int32_t> used(r.experts.begin(), r.experts.end());  // ascending ids
    const std::vector<int32_t> ids(used.begin(), used.end());
    const auto group = static_cast<size_t>(store.max_resident(layer));

    Tensor y = ops.tensor(x.rows(), x.cols());
    for (size_t begin = 0; begin < ids.size(); begin += group) {
        const size_t end = std::min(ids.size(), begin + group);
        std::vector<ExpertHandle> handles =
            store.fetch(layer, std::span<const int32_t>(ids.data() + begin, end - begin));
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
    return y;
}

void moe_prefetch(Ops& ops, ExpertStore& store, int layer, const Weight& router, const Tensor& x, int top_k) {
    const Routing guess = ops.route_softmax_topk(ops.matmul(router, x), top_k, false);
    const std::set<int32_t> ids(guess.experts.begin(), guess.experts.end());
    store.prefetch(layer, std::vector<int32_t>(ids.begin(), ids.end()));
}

}  // namespace coli
