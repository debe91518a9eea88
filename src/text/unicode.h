// Unicode character properties the tokenizers need: general category, White_Space, the Han script,
// simple case folding, and the data of canonical normalization. Tables are generated from Debian's
// unicode-data by tools/gen_unicode_tables.py (see unicode_tables.inc for the Unicode version).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

namespace coli::text {

// General categories, in the order of the generated table (Cn = unassigned comes first).
enum class GeneralCategory : uint8_t {
    Cn,
    Lu,
    Ll,
    Lt,
    Lm,
    Lo,
    Mn,
    Mc,
    Me,
    Nd,
    Nl,
    No,
    Pc,
    Pd,
    Ps,
    Pe,
    Pi,
    Pf,
    Po,
    Sm,
    Sc,
    Sk,
    So,
    Zs,
    Zl,
    Zp,
    Cc,
    Cf,
    Cs,
    Co,
};
constexpr int kCategoryCount = 30;

// One bit per general category, so that \p{L} etc. are masks.
using CategoryMask = uint32_t;
constexpr CategoryMask category_bit(GeneralCategory c) {
    return CategoryMask{1} << static_cast<int>(c);
}

// The mask of a one- or two-letter category name ("L", "Lu", "N", ...), or nullopt when unknown.
std::optional<CategoryMask> category_mask_from_name(std::string_view name);

constexpr char32_t kMaxCodePoint = 0x10FFFF;

// Properties of one code point, packed as the generated table packs them.
struct CodePointProperties {
    static constexpr uint8_t kCategoryMask = 0x1F;
    static constexpr uint8_t kWhiteSpaceBit = 0x20;
    static constexpr uint8_t kHanBit = 0x40;
    static constexpr uint8_t kNfcUnstableBit = 0x80;

    uint8_t bits;
    GeneralCategory category() const { return static_cast<GeneralCategory>(bits & kCategoryMask); }
    bool white_space() const { return bits & kWhiteSpaceBit; }
    bool han() const { return bits & kHanBit; }
    // NFC_Quick_Check is No or Maybe, or the combining class is non-zero: NFC may change text around it.
    bool nfc_unstable() const { return bits & kNfcUnstableBit; }
};

// O(1): a flat table of all code points, built on first use.
CodePointProperties unicode_properties(char32_t cp);

// Simple case folding (CaseFolding.txt C + S); cp itself when it has no folding.
char32_t unicode_simple_fold(char32_t cp);

// Canonical combining class (0 for starters).
uint8_t unicode_combining_class(char32_t cp);

// One level of canonical decomposition: {first, second} (second 0 for a singleton), or nullopt.
// Hangul syllables are handled algorithmically by the normalizer, not here.
std::optional<std::pair<char32_t, char32_t>> unicode_canonical_decomposition(char32_t cp);

// The primary composite of (first, second), or nullopt (exclusions and Hangul are not included here).
std::optional<char32_t> unicode_canonical_composition(char32_t first, char32_t second);

}  // namespace coli::text
