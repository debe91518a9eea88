// Which storage-buffer bindings a compute shader may write, read from its SPIR-V: the stream puts a barrier
// only between commands where one writes a buffer that the other reads or writes (stream.h), so it must
// know a dispatch's writes. A binding whose block members or variable are decorated NonWritable (GLSL
// `readonly`) is only read; any other may be written.
#pragma once

#include <cstdint>
#include <span>

namespace coli::vk {

// Bit b set: binding b (< 32) of set 0 may be written. Every bit set where the code is not SPIR-V as
// expected (so that a misread costs barriers, never a missing one).
uint32_t spirv_written_bindings(std::span<const uint32_t> code);

}  // namespace coli::vk
