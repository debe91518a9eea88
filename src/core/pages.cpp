#include "core/pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace coli {

namespace {

void* map_at(void* where, size_t bytes, int fd) {
    const int fixed = where != nullptr ? MAP_FIXED : 0;
    if (fd < 0)
        return ::mmap(where, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | fixed, -1, 0);
    return ::mmap(where, bytes, PROT_READ, MAP_SHARED | fixed, fd, 0);
}

}  // namespace

void* pages_map(size_t bytes, int fd) {
    if (bytes < kHugePageBytes) return map_at(nullptr, bytes, fd);
    // Reserve a huge page more than needed, map at the first boundary inside, give the rest back.
    const size_t reserved_bytes = bytes + kHugePageBytes;
    void* reserved = ::mmap(nullptr, reserved_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (reserved == MAP_FAILED) return MAP_FAILED;
    const auto start = reinterpret_cast<uintptr_t>(reserved);
    const uintptr_t aligned = (start + kHugePageBytes - 1) & ~(uintptr_t{kHugePageBytes} - 1);
    void* p = map_at(reinterpret_cast<void*>(aligned), bytes, fd);
    if (p == MAP_FAILED) {
        const int err = errno;
        ::munmap(reserved, reserved_bytes);
        errno = err;
        return MAP_FAILED;
    }
    static const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t tail = (aligned + bytes + page - 1) & ~(page - 1), end = start + reserved_bytes;
    if (aligned > start) ::munmap(reserved, aligned - start);
    if (tail < end) ::munmap(reinterpret_cast<void*>(tail), end - tail);
    ::madvise(p, bytes, MADV_HUGEPAGE);  // advice: where huge pages are off, nothing changes
    return p;
}

void PagesUnmap::operator()(void* p) const {
    if (p != nullptr && p != MAP_FAILED) ::munmap(p, bytes);
}

}  // namespace coli
