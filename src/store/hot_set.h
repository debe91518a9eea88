// The routing history: how often each (layer, expert) was used, kept across runs in a small JSON file
// (in the user's cache by default, named by the model's fingerprint), and the hot set chosen from it (the
// experts the cache pins in RAM).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace coli {

// Version of the file format below; a file with another version is ignored (with a warning).
inline constexpr int kHotSetFormatVersion = 1;

// Routing records (one token in one layer each) between two choices of the pinned hot set (besides the
// one at open): about 70 tokens of a 60-layer model. Choosing sorts the used (layer, expert) counts, well
// under a millisecond even at Kimi K3's 61 x 896, so the cost is negligible at this rate, while the set
// still follows a change of topic within a few dozen tokens.
inline constexpr uint64_t kHotSetRefreshRecords = 4096;

// File layout:
//   {"format": "colibri-hot-set", "version": 1, "fingerprint": "<16 hex digits>",
//    "n_layers": L, "n_experts": E, "counts": [[c(0,0), ..., c(0,E-1)], ..., [c(L-1,0), ...]]}
class RoutingHistory {
public:
    // fingerprint: identifies the model (see ExpertIndex::fingerprint).
    RoutingHistory(int n_layers, int n_experts, std::string fingerprint);

    void record(int layer, std::span<const int> experts);
    uint64_t count(int layer, int expert) const { return counts_[key(layer, expert)]; }
    // Routings recorded since the last load or save.
    uint64_t unsaved() const { return unsaved_; }

    // Replaces the counts with those of the file at `path` when it exists and belongs to this model. A
    // file of another model, of another version, or one that does not parse is left alone (not deleted)
    // with a warning. Returns whether counts were loaded.
    bool load(const std::filesystem::path& path);

    // Writes the counts to `path` atomically (a temporary file, then rename), creating its directory. A
    // failure, a read-only directory for example, is a warning, the first time only: the history is a
    // speed hint, never worth failing a run for (or repeating). Returns whether the file was written.
    bool save(const std::filesystem::path& path);

    // The hot set, indexed by layer * n_experts + expert: the most used experts first (ties: lower layer,
    // then lower expert), each taken if its cost fits in what is left of `byte_cap` and its layer has
    // fewer than `per_layer_cap` experts taken. Experts never used are never taken.
    std::vector<char> select(const std::function<uint64_t(int layer, int expert)>& cost, uint64_t byte_cap,
                             int per_layer_cap) const;

private:
    size_t key(int layer, int expert) const { return size_t(layer) * size_t(n_experts_) + size_t(expert); }

    int n_layers_, n_experts_;
    std::string fingerprint_;
    std::vector<uint64_t> counts_;
    uint64_t unsaved_ = 0;
    bool save_warned_ = false;
    void save_failed(const std::string& why);  // why: "<path>: <reason>"
};

}  // namespace coli
