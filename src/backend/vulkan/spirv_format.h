// The layout of a SPIR-V module's words, for the readers and the rewriter of the shaders' SPIR-V.
#pragma once

#include <cstddef>
#include <cstdint>

namespace coli::vk {

inline constexpr uint32_t kSpirvMagic = 0x07230203;  // first word of a SPIR-V module
inline constexpr size_t kSpirvHeaderWords = 5;       // magic, version, generator, id bound, schema
inline constexpr size_t kSpirvBoundWord = 3;         // the header's id bound: every id is below it
inline constexpr uint32_t kSpirvOpcodeMask =
    0xffff;  // an instruction's first word: word count << 16 | opcode
inline constexpr uint32_t kSpirvWordCountShift = 16;

// An instruction's first word.
constexpr uint32_t spirv_first_word(uint32_t words, uint32_t opcode) {
    return words << kSpirvWordCountShift | opcode;
}

}  // namespace coli::vk
