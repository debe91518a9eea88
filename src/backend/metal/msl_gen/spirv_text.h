// Reading the SPIR-V that the Vulkan build embeds: glslc writes each shader with -mfmt=c, a C initializer
// list of 32-bit words ("{0x07230203,0x00010500,...}"), which the generator reads back rather than compiling
// the shaders a second time, so that Metal gets exactly the code the Vulkan backend runs.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace coli::metal::gen {

// The words of a glslc -mfmt=c file. Throws when the text is not such a list or not SPIR-V (magic number).
std::vector<uint32_t> spirv_from_c_text(std::string_view text);

}  // namespace coli::metal::gen
