#include "text/char_set.h"

#include <algorithm>
#include <unordered_map>

namespace coli::text {

namespace {

bool expr_contains(const CharSetExpr& e, char32_t cp) {
    using Kind = CharSetExpr::Kind;
    bool in = false;
    switch (e.kind) {
        case Kind::kRange:
            in = cp >= e.lo && cp <= e.hi;
            break;
        case Kind::kCategory:
            in = (e.categories & category_bit(unicode_properties(cp).category())) != 0;
            break;
        case Kind::kWhiteSpace:
            in = unicode_properties(cp).white_space();
            break;
        case Kind::kHan:
            in = unicode_properties(cp).han();
            break;
        case Kind::kAny:
            in = true;
            break;
        case Kind::kUnion:
            in = std::any_of(e.children.begin(), e.children.end(),
                             [cp](const CharSetExpr& c) { return expr_contains(c, cp); });
            break;
        case Kind::kIntersection:
            in = !e.children.empty() &&
                 std::all_of(e.children.begin(), e.children.end(),
                             [cp](const CharSetExpr& c) { return expr_contains(c, cp); });
            break;
    }
    return in != e.negated;
}

// Folded code point -> every code point that folds to it (including itself).
const std::unordered_map<char32_t, std::vector<char32_t>>& fold_classes() {
    static const auto classes = [] {
        std::unordered_map<char32_t, std::vector<char32_t>> m;
        for (char32_t cp = 0; cp <= kMaxCodePoint; ++cp) {
            char32_t f = unicode_simple_fold(cp);
            if (f != cp) m[f].push_back(cp);
        }
        for (auto& [folded, members] : m) members.push_back(folded);
        return m;
    }();
    return classes;
}

}  // namespace

bool CharSetExpr::contains(char32_t cp) const {
    return expr_contains(*this, cp);
}

std::vector<char32_t> case_fold_equivalents(char32_t cp) {
    const auto& classes = fold_classes();
    auto it = classes.find(unicode_simple_fold(cp));
    if (it == classes.end()) return {cp};
    std::vector<char32_t> members = it->second;
    std::sort(members.begin(), members.end());
    return members;
}

CharSet::CharSet(CharSetExpr expr, bool case_insensitive)
    : expr_(std::move(expr)), case_insensitive_(case_insensitive), bmp_(kBmpSize / 64) {
    for (char32_t cp = 0; cp < kBmpSize; ++cp)
        if (slow_contains(cp)) bmp_[cp >> 6] |= uint64_t{1} << (cp & 63);
}

bool CharSet::slow_contains(char32_t cp) const {
    if (expr_contains(expr_, cp)) return true;
    if (!case_insensitive_) return false;
    for (char32_t other : case_fold_equivalents(cp))
        if (expr_contains(expr_, other)) return true;
    return false;
}

}  // namespace coli::text
