#include "text/token_table.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace coli::text {

namespace {
constexpr size_t kInitialSlots = 1024;
// Grow when more than 1/2 full: probes stay short.
bool too_full(size_t count, size_t slots) {
    return (count + 1) * 2 > slots;
}
}  // namespace

uint64_t hash_bytes(std::string_view s) {
    // 8 bytes at a time with a multiply-xorshift mix (in the spirit of wyhash / FxHash).
    constexpr uint64_t kMul = 0x9E3779B97F4A7C15ULL;
    uint64_t h = s.size() * kMul;
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
        uint64_t w;
        std::memcpy(&w, s.data() + i, 8);
        h = (h ^ w) * kMul;
        h ^= h >> 29;
    }
    uint64_t tail = 0;
    if (i < s.size()) std::memcpy(&tail, s.data() + i, s.size() - i);
    h = (h ^ tail) * kMul;
    h ^= h >> 32;
    return h;
}

bool TokenTable::insert(std::string_view key, int32_t id) {
    check(id >= 0, "token table: negative id {}", id);
    if (too_full(count_, slots_.size())) grow();
    uint64_t h = hash_bytes(key);
    size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        Slot& s = slots_[i];
        if (s.id < 0) {
            s = {h, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()), id};
            arena_.append(key);
            ++count_;
            return true;
        }
        if (s.hash == h && std::string_view(arena_).substr(s.offset, s.length) == key) return false;
    }
}

std::optional<int32_t> TokenTable::find(std::string_view key) const {
    if (slots_.empty()) return std::nullopt;
    uint64_t h = hash_bytes(key);
    size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        const Slot& s = slots_[i];
        if (s.id < 0) return std::nullopt;
        if (s.hash == h && s.length == key.size() &&
            std::memcmp(arena_.data() + s.offset, key.data(), key.size()) == 0)
            return s.id;
    }
}

void TokenTable::clear() {
    count_ = 0;
    arena_.clear();
    std::fill(slots_.begin(), slots_.end(), Slot{});
}

void TokenTable::grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? kInitialSlots : old.size() * 2, Slot{});
    size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
        if (s.id < 0) continue;
        size_t i = s.hash & mask;
        while (slots_[i].id >= 0) i = (i + 1) & mask;
        slots_[i] = s;
    }
}

bool PairTable::insert(int32_t left, int32_t right, Merge merge) {
    check(merge.rank >= 0, "pair table: negative rank");
    if (too_full(count_, slots_.size())) grow();
    uint64_t key = pack(left, right);
    size_t mask = slots_.size() - 1;
    for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
        Slot& s = slots_[i];
        if (s.merge.rank < 0) {
            s = {key, merge};
            ++count_;
            return true;
        }
        if (s.key == key) return false;
    }
}

void PairTable::grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? kInitialSlots : old.size() * 2, Slot{});
    size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
        if (s.merge.rank < 0) continue;
        size_t i = mix(s.key) & mask;
        while (slots_[i].merge.rank >= 0) i = (i + 1) & mask;
        slots_[i] = s;
    }
}

}  // namespace coli::text
