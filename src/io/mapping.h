// Bringing the pages of a read-only file mapping into memory ahead of use.
#pragma once

#include <cstdint>
#include <span>

namespace coli {

// Reads `bytes` (part of a shared read-only file mapping) into the page cache where they are not there yet
// and maps every page, so that the compute that uses them next does not stop at a fault per page. Blocks
// until done; meant for the expert store's I/O threads. Throws coli::Error when the file cannot be read.
void mapping_populate(std::span<const uint8_t> bytes);

}  // namespace coli
