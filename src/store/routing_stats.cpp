#include "store/routing_stats.h"

#include <algorithm>
#include <iterator>

namespace coli {

RoutingStats::RoutingStats(int n_layers, int n_experts)
    : used_(n_layers, std::vector<char>(n_experts, 0)),
      distinct_(n_layers, 0),
      last_(n_layers),
      routed_(n_layers, 0) {}

void RoutingStats::record(int layer, std::span<const int> experts) {
    std::vector<int> now(experts.begin(), experts.end());
    std::sort(now.begin(), now.end());
    now.erase(std::unique(now.begin(), now.end()), now.end());

    for (int e : now)
        if (!used_[layer][e]) {
            used_[layer][e] = 1;
            ++distinct_[layer];
        }
    if (routed_[layer]) {
        std::vector<int> both;
        std::set_intersection(last_[layer].begin(), last_[layer].end(), now.begin(), now.end(),
                              std::back_inserter(both));
        shared_sum_ += both.size();
        ++pairs_;
    }
    routed_[layer] = 1;
    last_[layer] = std::move(now);
    ++records_;
}

double RoutingStats::distinct_per_layer() const {
    uint64_t sum = 0, layers = 0;
    for (size_t l = 0; l < distinct_.size(); ++l)
        if (routed_[l]) {
            sum += uint64_t(distinct_[l]);
            ++layers;
        }
    return layers ? double(sum) / double(layers) : 0;
}

double RoutingStats::consecutive_shared() const {
    return pairs_ ? double(shared_sum_) / double(pairs_) : 0;
}

}  // namespace coli
