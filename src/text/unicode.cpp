#include "text/unicode.h"

#include <algorithm>
#include <array>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace coli::text {

namespace {

#include "text/unicode_tables.inc"

constexpr size_t kCodePointCount = size_t{kMaxCodePoint} + 1;
constexpr int kRunShift = 8;
constexpr uint32_t kRunValueMask = 0xFF;

// Expands a run table ((start << 8) | value, ascending starts from 0) into one byte per code point.
template <size_t N>
std::vector<uint8_t> expand_runs(const uint32_t (&runs)[N]) {
    std::vector<uint8_t> flat(kCodePointCount);
    for (size_t i = 0; i < N; ++i) {
        size_t start = runs[i] >> kRunShift;
        size_t end = i + 1 < N ? runs[i + 1] >> kRunShift : kCodePointCount;
        std::fill(flat.begin() + start, flat.begin() + end, static_cast<uint8_t>(runs[i] & kRunValueMask));
    }
    return flat;
}

// Binary search in a run table, for the rarely used tables that are not worth 1 MiB flat.
template <size_t N>
uint8_t run_lookup(const uint32_t (&runs)[N], char32_t cp) {
    auto it = std::upper_bound(std::begin(runs), std::end(runs), cp,
                               [](char32_t c, uint32_t run) { return c < (run >> kRunShift); });
    return static_cast<uint8_t>(*(it - 1) & kRunValueMask);
}

const std::vector<uint8_t>& property_table() {
    static const std::vector<uint8_t> table = expand_runs(kPropertyRuns);
    return table;
}

uint64_t pair_key(char32_t a, char32_t b) {
    return (uint64_t{a} << 32) | b;
}

struct NormalizationMaps {
    std::unordered_map<char32_t, std::pair<char32_t, char32_t>> decompose;
    std::unordered_map<uint64_t, char32_t> compose;
    std::unordered_map<char32_t, char32_t> fold;
};

const NormalizationMaps& normalization_maps() {
    static const NormalizationMaps maps = [] {
        NormalizationMaps m;
        for (const auto& d : kCanonicalDecompositions) m.decompose[d[0]] = {d[1], d[2]};
        for (const auto& d : kCanonicalDecompositions) {
            bool excluded = std::binary_search(std::begin(kCompositionExclusions),
                                               std::end(kCompositionExclusions), d[0]);
            if (d[2] != 0 && !excluded) m.compose[pair_key(d[1], d[2])] = d[0];
        }
        for (const auto& f : kCaseFolding) m.fold[f[0]] = f[1];
        return m;
    }();
    return maps;
}

}  // namespace

std::optional<CategoryMask> category_mask_from_name(std::string_view name) {
    static constexpr std::array<std::string_view, kCategoryCount> kNames = {
        "Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps",
        "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"};
    CategoryMask mask = 0;
    for (int i = 0; i < kCategoryCount; ++i) {
        bool whole = kNames[i] == name;
        bool major = name.size() == 1 && kNames[i][0] == name[0];
        if (whole || major) mask |= CategoryMask{1} << i;
    }
    if (mask == 0) return std::nullopt;
    return mask;
}

CodePointProperties unicode_properties(char32_t cp) {
    if (cp > kMaxCodePoint) return {0};
    return {property_table()[cp]};
}

char32_t unicode_simple_fold(char32_t cp) {
    const auto& fold = normalization_maps().fold;
    auto it = fold.find(cp);
    return it == fold.end() ? cp : it->second;
}

uint8_t unicode_combining_class(char32_t cp) {
    if (cp < 0x300) return 0;  // nothing below U+0300 combines
    return run_lookup(kCombiningClassRuns, cp);
}

std::optional<std::pair<char32_t, char32_t>> unicode_canonical_decomposition(char32_t cp) {
    const auto& d = normalization_maps().decompose;
    auto it = d.find(cp);
    if (it == d.end()) return std::nullopt;
    return it->second;
}

std::optional<char32_t> unicode_canonical_composition(char32_t first, char32_t second) {
    const auto& c = normalization_maps().compose;
    auto it = c.find(pair_key(first, second));
    if (it == c.end()) return std::nullopt;
    return it->second;
}

}  // namespace coli::text
