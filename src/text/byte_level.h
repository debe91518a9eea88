// GPT-2's byte-level alphabet: every byte is shown as a printable code point so that byte strings can be
// stored as text in vocab files ("Ġ" is the space byte). Byte-level tokenizers keep their vocab and merges
// in this form; colibri maps them back to raw bytes at load and tokenizes bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace coli::text {

// The code point that stands for `byte`.
char32_t byte_level_char(uint8_t byte);

// The byte that `cp` stands for, or nullopt when cp is not in the alphabet.
std::optional<uint8_t> byte_level_byte(char32_t cp);

// Raw bytes of a token written in the alphabet, or nullopt when some code point is not in it.
std::optional<std::string> byte_level_decode(std::string_view token);

// `bytes` written in the alphabet (UTF-8).
std::string byte_level_encode(std::string_view bytes);

}  // namespace coli::text
