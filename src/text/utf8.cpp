#include "text/utf8.h"

namespace coli::text {

namespace {

// The valid range of the second byte depends on the first (Unicode Table 3-7): this excludes overlong
// forms, surrogates and code points above U+10FFFF, so that a "maximal subpart" ends where a conforming
// decoder's would.
struct LeadInfo {
    uint32_t length;  // total sequence length, 0 for a byte that cannot start a sequence
    uint8_t second_lo;
    uint8_t second_hi;
};

LeadInfo lead_info(uint8_t b) {
    if (b < 0x80) return {1, 0, 0};
    if (b < 0xC2) return {0, 0, 0};
    if (b < 0xE0) return {2, 0x80, 0xBF};
    if (b == 0xE0) return {3, 0xA0, 0xBF};
    if (b == 0xED) return {3, 0x80, 0x9F};
    if (b < 0xF0) return {3, 0x80, 0xBF};
    if (b == 0xF0) return {4, 0x90, 0xBF};
    if (b < 0xF4) return {4, 0x80, 0xBF};
    if (b == 0xF4) return {4, 0x80, 0x8F};
    return {0, 0, 0};
}

bool is_continuation(uint8_t b) {
    return (b & 0xC0) == 0x80;
}

}  // namespace

Utf8Step utf8_decode(std::string_view s) {
    auto b0 = static_cast<uint8_t>(s[0]);
    if (b0 < 0x80) return {b0, 1, true};
    LeadInfo info = lead_info(b0);
    if (info.length == 0) return {kReplacementChar, 1, false};
    char32_t cp = b0 & (0x7F >> info.length);
    for (uint32_t i = 1; i < info.length; ++i) {
        if (i >= s.size()) return {kReplacementChar, i, false};
        auto b = static_cast<uint8_t>(s[i]);
        bool ok = i == 1 ? (b >= info.second_lo && b <= info.second_hi) : is_continuation(b);
        if (!ok) return {kReplacementChar, i, false};
        cp = (cp << 6) | (b & 0x3F);
    }
    return {cp, info.length, true};
}

void utf8_append(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

bool utf8_is_valid(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        if (static_cast<uint8_t>(s[i]) < 0x80) {  // ASCII runs dominate real text
            ++i;
            continue;
        }
        Utf8Step step = utf8_decode(s.substr(i));
        if (!step.valid) return false;
        i += step.length;
    }
    return true;
}

std::string utf8_sanitize(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    size_t i = 0;
    while (i < s.size()) {
        Utf8Step step = utf8_decode(s.substr(i));
        if (step.valid)
            out.append(s.substr(i, step.length));
        else
            utf8_append(out, kReplacementChar);
        i += step.length;
    }
    return out;
}

size_t utf8_incomplete_tail(std::string_view s) {
    // A sequence is at most 4 bytes, so an incomplete one starts within the last 3.
    constexpr size_t kMaxTail = 3;
    for (size_t back = 1; back <= kMaxTail && back <= s.size(); ++back) {
        size_t start = s.size() - back;
        auto b = static_cast<uint8_t>(s[start]);
        if (is_continuation(b)) continue;
        LeadInfo info = lead_info(b);
        if (info.length <= back) return 0;  // complete (or an invalid lead): nothing to hold back
        Utf8Step step = utf8_decode(s.substr(start));
        // Truncated but every byte so far fits: it may still complete.
        return (!step.valid && step.length == back) ? back : 0;
    }
    return 0;
}

}  // namespace coli::text
