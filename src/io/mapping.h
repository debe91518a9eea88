// Read-only file mappings: made so that the kernel can use huge pages for them, and their pages brought
// into memory ahead of use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace coli {

// Maps `size` bytes of the open file `fd` read-only and shared, starting at a huge-page boundary and advised
// huge: where the page cache holds the file in 2 MB folios (ext4 and xfs on recent kernels, when the file is
// read through such a mapping), one page-table entry then covers 2 MB instead of 4 KB, and touching a
// model's weights for the first time in a process costs 512x fewer page-table fills (a microsecond each in
// some VMs). Returns MAP_FAILED with errno set on failure; unmap with munmap(p, size).
void* mapping_map_readonly(int fd, size_t size);

// Reads `bytes` (part of a shared read-only file mapping) into the page cache where they are not there yet
// and maps every page, so that the compute that uses them next does not stop at a fault per page. Blocks
// until done; meant for the expert store's I/O threads. Throws coli::Error when the file cannot be read.
void mapping_populate(std::span<const uint8_t> bytes);

}  // namespace coli
