// Sets of code points as regex character classes describe them: ranges, general categories, White_Space,
// the Han script, negation, union and intersection (`[\p{L}&&[^\p{Han}]]`).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "text/unicode.h"

namespace coli::text {

// A class expression as parsed. Leaves test one property; inner nodes combine their children.
struct CharSetExpr {
    enum class Kind { kRange, kCategory, kWhiteSpace, kHan, kAny, kUnion, kIntersection };
    Kind kind = Kind::kUnion;
    bool negated = false;
    char32_t lo = 0, hi = 0;      // kRange
    CategoryMask categories = 0;  // kCategory
    std::vector<CharSetExpr> children;

    bool contains(char32_t cp) const;
};

// A compiled class: a bitmap over the Basic Multilingual Plane (where nearly all text lives) and the
// expression for the rest. Case-insensitive sets also match the simple case-fold equivalents of a code point.
class CharSet {
public:
    CharSet(CharSetExpr expr, bool case_insensitive);

    bool contains(char32_t cp) const {
        if (cp < kBmpSize) return (bmp_[cp >> 6] >> (cp & 63)) & 1;
        return slow_contains(cp);
    }

private:
    static constexpr char32_t kBmpSize = 0x10000;
    bool slow_contains(char32_t cp) const;

    CharSetExpr expr_;
    bool case_insensitive_;
    std::vector<uint64_t> bmp_;
};

// The code points whose simple case folding equals that of `cp` (cp included).
std::vector<char32_t> case_fold_equivalents(char32_t cp);

}  // namespace coli::text
