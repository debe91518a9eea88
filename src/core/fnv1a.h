// 64-bit FNV-1a: a stable, dependency-free hash for fingerprints and file checksums (not for security).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace coli {

class Fnv1a {
public:
    void bytes(const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        for (size_t i = 0; i < n; ++i) h_ = (h_ ^ b[i]) * kPrime;
    }
    void u64(uint64_t v) {
        uint8_t le[8];
        for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(v >> (8 * i));  // endian-independent
        bytes(le, sizeof le);
    }
    void str(const std::string& s) {
        u64(s.size());  // length first, so that ("ab", "c") and ("a", "bc") differ
        bytes(s.data(), s.size());
    }
    uint64_t value() const { return h_; }

private:
    static constexpr uint64_t kOffsetBasis = 0xcbf29ce484222325ull;
    static constexpr uint64_t kPrime = 0x100000001b3ull;
    uint64_t h_ = kOffsetBasis;
};

}  // namespace coli
