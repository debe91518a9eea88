// The RAM cache's bookkeeping: which experts are held, in what recency order, what they cost, and which
// can go. Not thread-safe: the store calls it under its mutex. No I/O happens here.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "store/expert_entry.h"

namespace coli {

class ExpertCache {
public:
    using Entry = ExpertHandle::Entry;

    // budget_bytes: hard limit on the buffer bytes of all entries, reads in flight included (0 = none).
    // slots_per_layer: at most this many entries per layer (0 = no limit).
    ExpertCache(int n_layers, int n_experts, uint64_t budget_bytes, int slots_per_layer);

    // The entry of (layer, expert) in any state, or nullptr.
    const std::shared_ptr<Entry>& find(int layer, int expert) const { return slots_[key(layer, expert)]; }

    // Marks the entry as the most recently used.
    void touch(Entry* e);

    // Evicts least-recently-used evictable entries until an entry of `layer` costing `bytes` fits within
    // the budget and the layer's slots. Evicts nothing and returns false when even evicting every
    // evictable entry would not be enough.
    bool make_room(int layer, uint64_t bytes);

    // Adds an entry (most recently used) and charges its buffers; make_room must have said it fits.
    void insert(std::shared_ptr<Entry> e);

    // Lowers the budget (an allocation failed) and evicts least-recently-used evictable entries until the
    // charged bytes are within it, as far as evicting can go (entries in use stay: they were charged before).
    void budget_lower(uint64_t bytes);

    // Drops an entry regardless of its state (a failed read); handles keep it alive, uncharged.
    void remove(Entry* e);

    // Sets each entry's pinned flag from the hot set (indexed like key()).
    void set_pins(const std::vector<char>& hot);

    // True when some read in flight was started by prefetch and nobody waits for it: once it lands it
    // becomes evictable, so a fetch that lacks room should wait for it rather than fail.
    bool has_unclaimed_reads() const;

    // Bytes of the entries that cannot be evicted now (pinned and loaded, referenced, or being read).
    uint64_t held_bytes() const;

    // Entries of `layer`, reads in flight included.
    int layer_count(int layer) const { return layer_count_[layer]; }
    uint64_t charged_bytes() const { return charged_; }
    uint64_t evictions() const { return evictions_; }
    uint64_t budget() const { return budget_; }
    int slots_per_layer() const { return slots_per_layer_; }

private:
    size_t key(int layer, int expert) const { return size_t(layer) * size_t(n_experts_) + size_t(expert); }
    static uint64_t cost(const Entry& e) { return e.loc->buffer_bytes; }
    // Ready, not pinned, and referenced by nobody but the cache. use_count() is exact enough here: new
    // references are made only under the store's mutex, so a count of 1 cannot grow behind our back.
    bool evictable(const std::shared_ptr<Entry>& e) const;
    void evict(Entry* e);

    int n_experts_;
    uint64_t budget_;
    int slots_per_layer_;
    std::vector<std::shared_ptr<Entry>> slots_;  // key(layer, expert) -> entry or nullptr
    std::list<Entry*> lru_;                      // least recently used first
    std::vector<int> layer_count_;               // entries held per layer
    uint64_t charged_ = 0;
    uint64_t evictions_ = 0;
};

}  // namespace coli
