// Cooperative matrices through VK_KHR_cooperative_matrix with shaders written for GL_NV_cooperative_matrix:
// Debian 12's glslang (11.13) knows only the NV GLSL extension, and NVIDIA's driver ran the NV operations
// 3x slower than the FMA GEMV (docs/benchmarks.md). The two SPIR-V extensions differ in encoding only:
//   - the capability and extension name;
//   - OpTypeCooperativeMatrixKHR names the matrix's use (A, B or accumulator) where NV's type is used in
//     any role; the rewrite takes each type's use from the products it takes part in;
//   - the stores take a memory layout id (row / column major) before the stride, where NV's take a bool id
//     after it. Loads differ the same way; no shader has one, so they are refused rather than rewritten.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace coli::vk {

// Whether `code` declares the CooperativeMatrixNV capability.
bool spirv_uses_coop_matrix_nv(std::span<const uint32_t> code);

// `code` with its SPV_NV_cooperative_matrix instructions rewritten to SPV_KHR_cooperative_matrix (new
// constants for the uses and layouts get ids from the bound up). Throws coli::Error where the module
// cannot be rewritten: a matrix type in no product or in two roles, a layout that is not a constant bool, a
// cooperative-matrix load.
std::vector<uint32_t> spirv_coop_matrix_khr(std::span<const uint32_t> code);

}  // namespace coli::vk
