#include "backend/metal/msl_gen/spirv_text.h"

#include <cctype>
#include <stdexcept>
#include <string>

namespace coli::metal::gen {

namespace {
constexpr uint32_t kSpirvMagic = 0x07230203;
}  // namespace

std::vector<uint32_t> spirv_from_c_text(std::string_view text) {
    const size_t open = text.find('{'), close = text.rfind('}');
    if (open == std::string_view::npos || close == std::string_view::npos || close < open)
        throw std::runtime_error("not a glslc -mfmt=c word list (no braces)");
    std::vector<uint32_t> words;
    size_t i = open + 1;
    while (i < close) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        if (std::isspace(c) || c == ',') {
            ++i;
            continue;
        }
        size_t used = 0;
        const std::string token(text.substr(i, std::min<size_t>(close - i, 16)));
        const unsigned long value = std::stoul(token, &used, 0);  // 0x... hexadecimal, as glslc writes
        if (used == 0 || value > UINT32_MAX) throw std::runtime_error("bad word in a glslc -mfmt=c list");
        words.push_back(static_cast<uint32_t>(value));
        i += used;
    }
    if (words.empty() || words[0] != kSpirvMagic) throw std::runtime_error("the word list is not SPIR-V");
    return words;
}

}  // namespace coli::metal::gen
