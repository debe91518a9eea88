// Memory and file mappings in whole pages from the kernel, placed so that the kernel can use huge pages.
#pragma once

#include <cstddef>

namespace coli {

inline constexpr size_t kHugePageBytes = 2u << 20;  // a transparent huge page (x86-64, arm64 with 4 KB pages)

// Maps `bytes` (> 0): zero-filled read-write memory when fd < 0, else the open file fd read-only and shared
// from offset 0. From kHugePageBytes up the mapping starts at a huge-page boundary and is advised huge: one
// page-table entry then covers 2 MB instead of 4 KB, so a first touch costs one fault or page-table fill per
// 2 MB (a few microseconds each in some VMs). For a file this needs the page cache to hold it in 2 MB folios,
// which ext4 and xfs do on recent kernels when the file is read through such a mapping. Returns MAP_FAILED
// with errno set on failure; free with munmap(p, bytes) (PagesUnmap).
void* pages_map(size_t bytes, int fd = -1);

// Unmaps what pages_map returned: the deleter of a smart pointer to it.
struct PagesUnmap {
    size_t bytes;  // the size given to pages_map
    void operator()(void* p) const;
};

}  // namespace coli
