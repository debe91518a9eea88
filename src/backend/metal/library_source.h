// The generated Metal library's source (msl_gen/ writes it at build time), embedded in the binary by
// cmake/embed_text.cmake, so that a Mac compiles the kernels it was built with.
#pragma once

#include <string_view>

namespace coli::metal {

// The MSL source of every kernel of the table (kernel_table.h).
std::string_view metal_library_source();

}  // namespace coli::metal
