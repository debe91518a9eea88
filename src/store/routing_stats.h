// Routing statistics of a run, printed beside every cache or streaming number because synthetic models
// lie about caching (see docs/design.md): distinct experts used per layer, and experts shared by consecutive
// tokens in a layer (about k*k/E when routing is uniform, close to k when it is degenerate).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace coli {

class RoutingStats {
public:
    RoutingStats(int n_layers, int n_experts);

    // One token's experts in `layer`; calls for a layer come in token order. Duplicates count once.
    void record(int layer, std::span<const int> experts);

    // Mean over the layers that were routed at least once of the number of distinct experts they used.
    double distinct_per_layer() const;
    // Mean over all pairs of consecutive tokens in the same layer of the experts both used.
    double consecutive_shared() const;
    uint64_t records() const { return records_; }

private:
    std::vector<std::vector<char>> used_;  // [layer][expert]: used during the run
    std::vector<int> distinct_;            // [layer]: experts used during the run
    std::vector<std::vector<int>> last_;   // [layer]: the previous token's experts, sorted, unique
    std::vector<char> routed_;             // [layer]: recorded at least once
    uint64_t shared_sum_ = 0, pairs_ = 0, records_ = 0;
};

}  // namespace coli
