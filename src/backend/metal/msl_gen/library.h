// The generator's two outputs from all kernels: one MSL source for one Metal library (each kernel's code,
// with the helpers SPIRV-Cross writes into every kernel kept once), and the C++ table of kernel_table.h.
#pragma once

#include <span>
#include <string>

#include "backend/metal/kernel_table.h"
#include "backend/metal/msl_gen/translate.h"

namespace coli::metal::gen {

// A shader left out, and why.
struct Skipped {
    std::string shader, reason;
};

// The .metal source of every kernel. Throws KernelError when two kernels' helpers of one name differ.
std::string msl_library(std::span<const Kernel> kernels);
// The C++ source that defines metal_kernels() and metal_skipped_shaders().
std::string kernel_table_source(std::span<const Kernel> kernels, std::span<const Skipped> skipped);

}  // namespace coli::metal::gen
