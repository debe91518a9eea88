#include "text/normalize.h"

#include <algorithm>
#include <vector>

#include "text/unicode.h"
#include "text/utf8.h"

namespace coli::text {

namespace {

// Hangul syllables decompose and compose arithmetically (Unicode 3.12), not through the tables.
constexpr char32_t kHangulBase = 0xAC00;
constexpr char32_t kLeadBase = 0x1100;
constexpr char32_t kVowelBase = 0x1161;
constexpr char32_t kTrailBase = 0x11A7;
constexpr char32_t kLeadCount = 19;
constexpr char32_t kVowelCount = 21;
constexpr char32_t kTrailCount = 28;
constexpr char32_t kSyllablesPerLead = kVowelCount * kTrailCount;
constexpr char32_t kSyllableCount = kLeadCount * kSyllablesPerLead;

void decompose_into(char32_t cp, std::vector<char32_t>& out) {
    if (cp >= kHangulBase && cp < kHangulBase + kSyllableCount) {
        char32_t index = cp - kHangulBase;
        out.push_back(kLeadBase + index / kSyllablesPerLead);
        out.push_back(kVowelBase + (index % kSyllablesPerLead) / kTrailCount);
        if (index % kTrailCount != 0) out.push_back(kTrailBase + index % kTrailCount);
        return;
    }
    auto d = unicode_canonical_decomposition(cp);
    if (!d) {
        out.push_back(cp);
        return;
    }
    decompose_into(d->first, out);
    if (d->second != 0) decompose_into(d->second, out);
}

std::optional<char32_t> compose_pair(char32_t first, char32_t second) {
    if (first >= kLeadBase && first < kLeadBase + kLeadCount && second >= kVowelBase &&
        second < kVowelBase + kVowelCount)
        return kHangulBase + ((first - kLeadBase) * kVowelCount + (second - kVowelBase)) * kTrailCount;
    bool lv_syllable = first >= kHangulBase && first < kHangulBase + kSyllableCount &&
                       (first - kHangulBase) % kTrailCount == 0;
    if (lv_syllable && second > kTrailBase && second < kTrailBase + kTrailCount)
        return first + (second - kTrailBase);
    return unicode_canonical_composition(first, second);
}

// Canonical ordering: stable sort of each run of non-starters by combining class.
void reorder(std::vector<char32_t>& cps) {
    size_t i = 0;
    while (i < cps.size()) {
        if (unicode_combining_class(cps[i]) == 0) {
            ++i;
            continue;
        }
        size_t end = i;
        while (end < cps.size() && unicode_combining_class(cps[end]) != 0) ++end;
        std::stable_sort(cps.begin() + i, cps.begin() + end, [](char32_t a, char32_t b) {
            return unicode_combining_class(a) < unicode_combining_class(b);
        });
        i = end;
    }
}

// Canonical composition: each character combines with the last starter unless blocked by a character
// in between of class 0 or of a class >= its own.
std::vector<char32_t> compose(const std::vector<char32_t>& cps) {
    std::vector<char32_t> out;
    out.reserve(cps.size());
    std::optional<size_t> starter;
    uint8_t last_class = 0;
    for (char32_t cp : cps) {
        uint8_t cls = unicode_combining_class(cp);
        if (starter) {
            bool adjacent = *starter + 1 == out.size();
            bool unblocked = adjacent || (last_class != 0 && last_class < cls);
            if (unblocked) {
                if (auto composite = compose_pair(out[*starter], cp)) {
                    out[*starter] = *composite;
                    continue;
                }
            }
        }
        if (cls == 0) starter = out.size();
        out.push_back(cp);
        last_class = cls;
    }
    return out;
}

}  // namespace

std::string nfc_normalize(std::string_view text) {
    bool stable = true;
    for (size_t i = 0; i < text.size() && stable;) {
        if (static_cast<uint8_t>(text[i]) < 0x80) {
            ++i;
            continue;
        }
        Utf8Step step = utf8_decode(text.substr(i));
        stable = !unicode_properties(step.cp).nfc_unstable();
        i += step.length;
    }
    if (stable) return std::string(text);

    std::vector<char32_t> decomposed;
    decomposed.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        Utf8Step step = utf8_decode(text.substr(i));
        decompose_into(step.cp, decomposed);
        i += step.length;
    }
    reorder(decomposed);
    std::string out;
    out.reserve(text.size());
    for (char32_t cp : compose(decomposed)) utf8_append(out, cp);
    return out;
}

}  // namespace coli::text
