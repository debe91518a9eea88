#include "text/byte_level.h"

#include <array>

#include "text/utf8.h"

namespace coli::text {

namespace {

struct Alphabet {
    std::array<char32_t, 256> to_char{};
    // The alphabet's code points are all below this.
    static constexpr char32_t kLimit = 0x200;
    std::array<int16_t, kLimit> to_byte{};
};

// Printable bytes stand for themselves; the others (controls, space, DEL, NBSP, soft hyphen) take the code
// points from U+0100 on, in byte order.
const Alphabet& alphabet() {
    static const Alphabet a = [] {
        Alphabet al;
        al.to_byte.fill(-1);
        char32_t next_extra = 0x100;
        for (int b = 0; b < 256; ++b) {
            bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            char32_t c = printable ? static_cast<char32_t>(b) : next_extra++;
            al.to_char[b] = c;
            al.to_byte[c] = static_cast<int16_t>(b);
        }
        return al;
    }();
    return a;
}

}  // namespace

char32_t byte_level_char(uint8_t byte) {
    return alphabet().to_char[byte];
}

std::optional<uint8_t> byte_level_byte(char32_t cp) {
    if (cp >= Alphabet::kLimit || alphabet().to_byte[cp] < 0) return std::nullopt;
    return static_cast<uint8_t>(alphabet().to_byte[cp]);
}

std::optional<std::string> byte_level_decode(std::string_view token) {
    std::string out;
    out.reserve(token.size());
    for (size_t i = 0; i < token.size();) {
        Utf8Step step = utf8_decode(token.substr(i));
        auto b = step.valid ? byte_level_byte(step.cp) : std::nullopt;
        if (!b) return std::nullopt;
        out += static_cast<char>(*b);
        i += step.length;
    }
    return out;
}

std::string byte_level_encode(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (char c : bytes) utf8_append(out, byte_level_char(static_cast<uint8_t>(c)));
    return out;
}

}  // namespace coli::text
