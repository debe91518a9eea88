// UTF-8 decoding and encoding, with the replacement rules every reference (WHATWG TextDecoder, Rust's
// from_utf8_lossy) shares: each maximal invalid subpart becomes one U+FFFD.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace coli::text {

constexpr char32_t kReplacementChar = 0xFFFD;

// One decoded step: the code point (U+FFFD for an invalid subpart) and how many bytes it used.
struct Utf8Step {
    char32_t cp;
    uint32_t length;
    bool valid;
};

// Decodes the code point at the start of `s` (not empty). An invalid or truncated sequence yields
// {U+FFFD, length of its maximal subpart (>= 1), false}.
Utf8Step utf8_decode(std::string_view s);

// Appends `cp` as UTF-8.
void utf8_append(std::string& out, char32_t cp);

// True when `s` is entirely well-formed UTF-8.
bool utf8_is_valid(std::string_view s);

// `s` with every maximal invalid subpart replaced by U+FFFD (a copy even when already valid).
std::string utf8_sanitize(std::string_view s);

// How many bytes at the end of `s` are the start of a sequence that is still valid but incomplete
// (0..3): bytes a streaming decoder must hold back until more arrive.
size_t utf8_incomplete_tail(std::string_view s);

}  // namespace coli::text
