// Hash tables for the hot lookups of BPE: byte strings -> id, and (left id, right id) -> merge. Open
// addressing over flat arrays, because std::unordered_map's node chasing dominated encode time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace coli::text {

// Byte strings -> int32 ids. Keys live in one arena string.
class TokenTable {
public:
    // Inserts key -> id; returns false (and keeps the old id) when the key is already present.
    bool insert(std::string_view key, int32_t id);
    std::optional<int32_t> find(std::string_view key) const;
    size_t size() const { return count_; }
    void clear();

private:
    struct Slot {
        uint64_t hash = 0;
        uint32_t offset = 0;
        uint32_t length = 0;
        int32_t id = -1;  // -1 = empty
    };
    void grow();
    size_t count_ = 0;
    std::string arena_;
    std::vector<Slot> slots_;
};

// One BPE merge: merging the pair gives `merged`; lower rank merges first.
struct Merge {
    int32_t rank;
    int32_t merged;
};

// (left id, right id) -> Merge.
class PairTable {
public:
    bool insert(int32_t left, int32_t right, Merge merge);
    const Merge* find(int32_t left, int32_t right) const {
        if (slots_.empty()) return nullptr;
        uint64_t key = pack(left, right);
        size_t mask = slots_.size() - 1;
        for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
            const Slot& s = slots_[i];
            if (s.merge.rank < 0) return nullptr;
            if (s.key == key) return &s.merge;
        }
    }
    size_t size() const { return count_; }

private:
    struct Slot {
        uint64_t key = 0;
        Merge merge{-1, -1};  // rank -1 = empty
    };
    static uint64_t pack(int32_t a, int32_t b) {
        return (uint64_t{static_cast<uint32_t>(a)} << 32) | static_cast<uint32_t>(b);
    }
    static uint64_t mix(uint64_t k) {
        k ^= k >> 33;
        k *= 0xff51afd7ed558ccdULL;
        k ^= k >> 33;
        return k;
    }
    void grow();
    size_t count_ = 0;
    std::vector<Slot> slots_;
};

// A fast non-cryptographic hash of bytes.
uint64_t hash_bytes(std::string_view s);

}  // namespace coli::text
