#include "io/mapping.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "io/file.h"

namespace coli {

namespace {

#ifndef MADV_POPULATE_READ
constexpr int MADV_POPULATE_READ = 22;  // Linux 5.14; older headers lack the name
#endif

}  // namespace

void* mapping_map_readonly(int fd, size_t size) {
    if (size < kHugePageBytes) return ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    // Reserve a huge page more than needed, place the file at the first boundary inside, give the rest back.
    void* reserved = ::mmap(nullptr, size + kHugePageBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (reserved == MAP_FAILED) return MAP_FAILED;
    const auto start = reinterpret_cast<uintptr_t>(reserved);
    const uintptr_t aligned = (start + kHugePageBytes - 1) & ~(uintptr_t{kHugePageBytes} - 1);
    void* p = ::mmap(reinterpret_cast<void*>(aligned), size, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
    if (p == MAP_FAILED) {
        const int err = errno;
        ::munmap(reserved, size + kHugePageBytes);
        errno = err;
        return MAP_FAILED;
    }
    if (aligned > start) ::munmap(reserved, aligned - start);
    static const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t tail = (aligned + size + page - 1) & ~(page - 1),
                    reserved_end = start + size + kHugePageBytes;
    if (tail < reserved_end) ::munmap(reinterpret_cast<void*>(tail), reserved_end - tail);
    ::madvise(p, size, MADV_HUGEPAGE);  // advice: where huge pages are off, nothing changes
    return p;
}

void mapping_populate(std::span<const uint8_t> bytes) {
    if (bytes.empty()) return;
    static const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto first = reinterpret_cast<uintptr_t>(bytes.data()) & ~(page - 1);
    const auto end = reinterpret_cast<uintptr_t>(bytes.data() + bytes.size());
    // One call faults the whole range in, with the kernel's readahead, and reports an I/O error instead of
    // the SIGBUS a plain access would raise.
    if (::madvise(reinterpret_cast<void*>(first), end - first, MADV_POPULATE_READ) == 0) return;
    const int err = errno;
    check(err == EINVAL, "cannot read {} bytes of a mapped checkpoint file: {}", bytes.size(),
          std::strerror(err));
    // A kernel before 5.14: touch one byte per page.
    volatile uint8_t sink = 0;
    for (uintptr_t p = first; p < end; p += page) sink = sink + *reinterpret_cast<const volatile uint8_t*>(p);
}

}  // namespace coli
