#include "store/expert_cache.h"

namespace coli {

ExpertCache::ExpertCache(int n_layers, int n_experts, uint64_t budget_bytes, int slots_per_layer)
    : n_experts_(n_experts),
      budget_(budget_bytes),
      slots_per_layer_(slots_per_layer),
      slots_(size_t(n_layers) * size_t(n_experts)),
      layer_count_(n_layers, 0) {}

bool ExpertCache::evictable(const std::shared_ptr<Entry>& e) const {
    return e->state == Entry::State::ready && !e->pinned && e.use_count() == 1;
}

void ExpertCache::touch(Entry* e) {
    lru_.splice(lru_.end(), lru_, e->lru);
}

bool ExpertCache::make_room(int layer, uint64_t bytes) {
    if (budget_ > 0 && bytes > budget_) return false;
    // Choose the victims first and evict only if they are enough: a prefetch that does not fit must not
    // cost the cache anything. The layer's own oldest entries go first when a slot is needed, since
    // evicting them frees bytes too.
    std::vector<Entry*> victims;
    uint64_t freed = 0;
    int slots_needed = slots_per_layer_ > 0 ? layer_count_[layer] + 1 - slots_per_layer_ : 0;
    for (auto it = lru_.begin(); it != lru_.end() && slots_needed > 0; ++it) {
        Entry* e = *it;
        if (e->layer != layer || !evictable(slots_[key(e->layer, e->expert)])) continue;
        victims.push_back(e);
        freed += cost(*e);
        --slots_needed;
    }
    if (slots_needed > 0) return false;

    auto bytes_fit = [&] { return budget_ == 0 || charged_ - freed + bytes <= budget_; };
    // The slot victims are the first evictable entries of `layer` in this same order: skip that many.
    size_t already_chosen = victims.size();
    for (auto it = lru_.begin(); it != lru_.end() && !bytes_fit(); ++it) {
        Entry* e = *it;
        if (!evictable(slots_[key(e->layer, e->expert)])) continue;
        if (e->layer == layer && already_chosen > 0) {
            --already_chosen;
            continue;
        }
        victims.push_back(e);
        freed += cost(*e);
    }
    if (!bytes_fit()) return false;

    for (Entry* e : victims) evict(e);
    return true;
}

void ExpertCache::budget_lower(uint64_t bytes) {
    budget_ = bytes;
    for (auto it = lru_.begin(); it != lru_.end() && charged_ > budget_;) {
        Entry* e = *it++;  // evicting erases e's list node
        if (evictable(slots_[key(e->layer, e->expert)])) evict(e);
    }
}

void ExpertCache::evict(Entry* e) {
    ++evictions_;
    remove(e);
}

void ExpertCache::insert(std::shared_ptr<Entry> e) {
    Entry* raw = e.get();
    charged_ += cost(*raw);
    ++layer_count_[raw->layer];
    raw->lru = lru_.insert(lru_.end(), raw);
    slots_[key(raw->layer, raw->expert)] = std::move(e);
}

void ExpertCache::remove(Entry* e) {
    charged_ -= cost(*e);
    --layer_count_[e->layer];
    lru_.erase(e->lru);
    slots_[key(e->layer, e->expert)].reset();  // frees the buffers unless a handle still holds them
}

void ExpertCache::set_pins(const std::vector<char>& hot) {
    for (Entry* e : lru_) e->pinned = hot[key(e->layer, e->expert)] != 0;
}

bool ExpertCache::has_unclaimed_reads() const {
    for (Entry* e : lru_)
        if (e->state == Entry::State::loading && slots_[key(e->layer, e->expert)].use_count() == 1)
            return true;
    return false;
}

uint64_t ExpertCache::held_bytes() const {
    uint64_t held = 0;
    for (Entry* e : lru_)
        if (!evictable(slots_[key(e->layer, e->expert)])) held += cost(*e);
    return held;
}

}  // namespace coli
