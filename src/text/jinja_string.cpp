#include "text/jinja_string.h"

#include <locale.h>
#include <wctype.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "text/utf8.h"

namespace coli::text::jinja {

std::u32string utf8_to_code_points(std::string_view s) {
    std::u32string out;
    out.reserve(s.size());
    size_t i = 0;
    while (i < s.size()) {
        Utf8Step step = utf8_decode(s.substr(i));
        out += step.cp;
        i += step.length;
    }
    return out;
}

std::string code_points_to_utf8(std::u32string_view cps) {
    std::string out;
    out.reserve(cps.size());
    for (char32_t cp : cps) utf8_append(out, cp);
    return out;
}

bool is_python_space(char32_t cp) {
    // str.isspace(): bidirectional class WS, B or S, or category Zs (CPython's _PyUnicode_IsWhitespace).
    switch (cp) {
        case 0x09:
        case 0x0A:
        case 0x0B:
        case 0x0C:
        case 0x0D:
        case 0x1C:
        case 0x1D:
        case 0x1E:
        case 0x1F:
        case 0x20:
        case 0x85:
        case 0xA0:
        case 0x1680:
        case 0x2028:
        case 0x2029:
        case 0x202F:
        case 0x205F:
        case 0x3000:
            return true;
        default:
            return cp >= 0x2000 && cp <= 0x200A;
    }
}

std::string python_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
    std::u32string cps = utf8_to_code_points(s);
    std::u32string set = chars ? utf8_to_code_points(*chars) : std::u32string();
    auto strippable = [&](char32_t cp) {
        return chars ? set.find(cp) != std::u32string::npos : is_python_space(cp);
    };
    size_t begin = 0, end = cps.size();
    if (left) {
        while (begin < end && strippable(cps[begin])) ++begin;
    }
    if (right) {
        while (end > begin && strippable(cps[end - 1])) --end;
    }
    return code_points_to_utf8(std::u32string_view(cps).substr(begin, end - begin));
}

std::vector<std::string> python_split(std::string_view s, const std::optional<std::string>& sep,
                                      int64_t maxsplit) {
    std::vector<std::string> parts;
    if (sep) {
        check(!sep->empty(), "chat template: str.split() got an empty separator");
        size_t start = 0;
        while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
            size_t hit = s.find(*sep, start);
            if (hit == std::string_view::npos) break;
            parts.emplace_back(s.substr(start, hit - start));
            start = hit + sep->size();
        }
        parts.emplace_back(s.substr(start));
        return parts;
    }
    // Runs of whitespace separate; no empty strings at either end.
    std::u32string cps = utf8_to_code_points(s);
    size_t i = 0;
    while (true) {
        while (i < cps.size() && is_python_space(cps[i])) ++i;
        if (i == cps.size()) break;
        if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
            // The rest, trailing whitespace included, is the last part.
            parts.push_back(code_points_to_utf8(std::u32string_view(cps).substr(i)));
            break;
        }
        size_t start = i;
        while (i < cps.size() && !is_python_space(cps[i])) ++i;
        parts.push_back(code_points_to_utf8(std::u32string_view(cps).substr(start, i - start)));
    }
    return parts;
}

std::vector<std::string> python_splitlines(std::string_view s) {
    std::u32string cps = utf8_to_code_points(s);
    std::vector<std::string> lines;
    size_t start = 0, i = 0;
    while (i < cps.size()) {
        char32_t cp = cps[i];
        bool boundary = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C || cp == 0x1D ||
                        cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
        if (!boundary) {
            ++i;
            continue;
        }
        lines.push_back(code_points_to_utf8(std::u32string_view(cps).substr(start, i - start)));
        i += (cp == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ? 2 : 1;
        start = i;
    }
    if (start < cps.size()) lines.push_back(code_points_to_utf8(std::u32string_view(cps).substr(start)));
    return lines;
}

std::string python_replace(std::string_view s, std::string_view old_text, std::string_view new_text,
                           int64_t count) {
    std::string out;
    if (old_text.empty()) {
        // Python inserts `new` before every code point and at the end.
        std::u32string cps = utf8_to_code_points(s);
        int64_t done = 0;
        for (char32_t cp : cps) {
            if (count < 0 || done < count) {
                out += new_text;
                ++done;
            }
            utf8_append(out, cp);
        }
        if (count < 0 || done < count) out += new_text;
        return out;
    }
    size_t start = 0;
    int64_t done = 0;
    while (count < 0 || done < count) {
        size_t hit = s.find(old_text, start);
        if (hit == std::string_view::npos) break;
        out += s.substr(start, hit - start);
        out += new_text;
        start = hit + old_text.size();
        ++done;
    }
    out += s.substr(start);
    return out;
}

namespace {

enum class CaseMap { upper, lower };

// Code points whose full Unicode case mapping (what Python applies) is not one code point, or depends on
// context: mapping them one to one would silently differ from Python, so they are an error.
bool needs_full_case_mapping(char32_t cp, CaseMap map) {
    if (map == CaseMap::lower) return cp == 0x130 || cp == 0x3A3;  // İ -> i̇, Σ -> σ or final ς
    static constexpr std::array<std::pair<char32_t, char32_t>, 20> kRanges = {{
        {0xDF, 0xDF},     {0x149, 0x149},   {0x1F0, 0x1F0},   {0x390, 0x390},   {0x3B0, 0x3B0},
        {0x587, 0x587},   {0x1E96, 0x1E9A}, {0x1F50, 0x1F56}, {0x1F80, 0x1FAF}, {0x1FB2, 0x1FB7},
        {0x1FBC, 0x1FBC}, {0x1FC2, 0x1FC7}, {0x1FCC, 0x1FCC}, {0x1FD2, 0x1FD7}, {0x1FE2, 0x1FE7},
        {0x1FF2, 0x1FF7}, {0x1FFC, 0x1FFC}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0x1C4, 0x1CC},
    }};
    for (auto [lo, hi] : kRanges) {
        if (cp >= lo && cp <= hi) return true;
    }
    return cp == 0x1F1 || cp == 0x1F2 || cp == 0x1F3;  // DŽ-style digraphs: title case differs from upper
}

locale_t unicode_locale() {
    // glibc's built-in C.UTF-8 carries the Unicode simple case mappings.
    static locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
    return loc;
}

char32_t map_case(char32_t cp, CaseMap map) {
    if (cp < 0x80) {
        if (map == CaseMap::upper && cp >= 'a' && cp <= 'z') return cp - ('a' - 'A');
        if (map == CaseMap::lower && cp >= 'A' && cp <= 'Z') return cp + ('a' - 'A');
        return cp;
    }
    if (needs_full_case_mapping(cp, map)) {
        std::string text;
        utf8_append(text, cp);
        fail(
            "chat template: changing the case of {} (U+{:04X}) needs Unicode's full case mapping, which is "
            "not supported",
            text, static_cast<uint32_t>(cp));
    }
    locale_t loc = unicode_locale();
    check(loc != static_cast<locale_t>(nullptr),
          "chat template: changing the case of non-ASCII text needs the C.UTF-8 locale, which is missing");
    auto wc = static_cast<wint_t>(cp);
    return static_cast<char32_t>(map == CaseMap::upper ? towupper_l(wc, loc) : towlower_l(wc, loc));
}

bool is_cased_letter(char32_t cp) {
    return map_case(cp, CaseMap::upper) != cp || map_case(cp, CaseMap::lower) != cp;
}

std::string map_all(std::string_view s, CaseMap map) {
    std::u32string cps = utf8_to_code_points(s);
    for (char32_t& cp : cps) cp = map_case(cp, map);
    return code_points_to_utf8(cps);
}

}  // namespace

std::string python_upper(std::string_view s) {
    return map_all(s, CaseMap::upper);
}
std::string python_lower(std::string_view s) {
    return map_all(s, CaseMap::lower);
}

std::string python_capitalize(std::string_view s) {
    std::u32string cps = utf8_to_code_points(s);
    for (size_t i = 0; i < cps.size(); ++i)
        cps[i] = map_case(cps[i], i == 0 ? CaseMap::upper : CaseMap::lower);
    return code_points_to_utf8(cps);
}

std::string python_title(std::string_view s) {
    // A cased letter that follows an uncased character starts a word.
    std::u32string cps = utf8_to_code_points(s);
    bool previous_cased = false;
    for (char32_t& cp : cps) {
        bool cased = is_cased_letter(cp);
        cp = map_case(cp, previous_cased ? CaseMap::lower : CaseMap::upper);
        previous_cased = cased;
    }
    return code_points_to_utf8(cps);
}

std::string jinja_title(std::string_view s) {
    // jinja2: words are split by runs of [-\s({\[<]; each word gets item[0].upper() + item[1:].lower().
    std::u32string cps = utf8_to_code_points(s);
    auto separator = [](char32_t cp) {
        return cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || is_python_space(cp);
    };
    bool word_start = true;
    for (char32_t& cp : cps) {
        if (separator(cp)) {
            word_start = true;
            continue;
        }
        cp = map_case(cp, word_start ? CaseMap::upper : CaseMap::lower);
        word_start = false;
    }
    return code_points_to_utf8(cps);
}

std::string python_repr_string(std::string_view s) {
    bool has_single = s.find('\'') != std::string_view::npos;
    bool has_double = s.find('"') != std::string_view::npos;
    char quote = (has_single && !has_double) ? '"' : '\'';
    std::string out(1, quote);
    for (char32_t cp : utf8_to_code_points(s)) {
        if (cp == static_cast<char32_t>(quote) || cp == '\\') {
            out += '\\';
            out += static_cast<char>(cp);
        } else if (cp == '\n') {
            out += "\\n";
        } else if (cp == '\r') {
            out += "\\r";
        } else if (cp == '\t') {
            out += "\\t";
        } else if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) {
            out += fmt::format("\\x{:02x}", static_cast<uint32_t>(cp));
        } else {
            // Python also escapes other non-printable code points (unassigned, format characters); chat
            // content rarely holds them, and repr() of content is never part of a real template's prompt.
            utf8_append(out, cp);
        }
    }
    out += quote;
    return out;
}

std::string python_repr_float(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    // Shortest round-trip digits, then Python's layout: scientific when the exponent is < -4 or >= 16.
    constexpr int kMaxFixedExponent = 16;
    constexpr int kMinFixedExponent = -4;
    std::array<char, 64> buf{};
    auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), d, std::chars_format::scientific);
    std::string sci(buf.data(), end);  // like -1.2345e+02
    bool negative = sci[0] == '-';
    if (negative) sci.erase(0, 1);
    size_t e_pos = sci.find('e');
    int exponent = std::stoi(sci.substr(e_pos + 1));
    std::string digits = sci.substr(0, e_pos);
    digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
    std::string out = negative ? "-" : "";
    if (exponent < kMinFixedExponent || exponent >= kMaxFixedExponent) {
        out += digits.substr(0, 1);
        if (digits.size() > 1) out.append(".").append(digits, 1);
        out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
        return out;
    }
    if (exponent < 0) {
        out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
        out += digits + std::string(static_cast<size_t>(exponent) + 1 - digits.size(), '0') + ".0";
    } else {
        out += digits.substr(0, static_cast<size_t>(exponent) + 1) + "." +
               digits.substr(static_cast<size_t>(exponent) + 1);
    }
    return out;
}

void json_quote(std::string& out, std::string_view s, bool ensure_ascii) {
    out += '"';
    for (char32_t cp : utf8_to_code_points(s)) {
        switch (cp) {
            case '"':
                out += "\\\"";
                continue;
            case '\\':
                out += "\\\\";
                continue;
            case '\n':
                out += "\\n";
                continue;
            case '\r':
                out += "\\r";
                continue;
            case '\t':
                out += "\\t";
                continue;
            case '\b':
                out += "\\b";
                continue;
            case '\f':
                out += "\\f";
                continue;
            default:
                break;
        }
        if (cp < 0x20) {
            out += fmt::format("\\u{:04x}", static_cast<uint32_t>(cp));
        } else if (ensure_ascii && cp > 0x7E) {
            if (cp >= 0x10000) {  // a UTF-16 surrogate pair, as json.dumps writes it
                char32_t v = cp - 0x10000;
                out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
            } else {
                out += fmt::format("\\u{:04x}", static_cast<uint32_t>(cp));
            }
        } else {
            utf8_append(out, cp);
        }
    }
    out += '"';
}

}  // namespace coli::text::jinja
