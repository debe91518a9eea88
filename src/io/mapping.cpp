#include "io/mapping.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "io/file.h"

namespace coli {

namespace {

#ifndef MADV_POPULATE_READ
constexpr int MADV_POPULATE_READ = 22;  // Linux 5.14; older headers lack the name
#endif

}  // namespace

void mapping_populate(std::span<const uint8_t> bytes) {
    if (bytes.empty()) return;
    static const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto first = reinterpret_cast<uintptr_t>(bytes.data()) & ~(page - 1);
    const auto end = reinterpret_cast<uintptr_t>(bytes.data() + bytes.size());
    // One call faults the whole range in, with the kernel's readahead, and reports an I/O error instead of
    // the SIGBUS a plain access would raise. EIO is tried again, as the expert store's reads are
    // (kReadAttempts in all, said on stderr); the test hook read_fault_injected stands for it.
    int err = 0;
    for (int attempt = 1;; ++attempt) {
        if (read_fault_injected())
            err = EIO;
        else if (::madvise(reinterpret_cast<void*>(first), end - first, MADV_POPULATE_READ) == 0)
            return;
        else
            err = errno;
        if (err == EINTR) {
            --attempt;  // an interruption is not a failure
            continue;
        }
        if (err != EIO || attempt == kReadAttempts) break;
        log_warn("reading {} bytes of a mapped checkpoint file failed ({}), trying again", bytes.size(),
                 std::strerror(err));
    }
    check(err == EINVAL, "cannot read {} bytes of a mapped checkpoint file: {}", bytes.size(),
          std::strerror(err));
    // A kernel before 5.14: touch one byte per page.
    volatile uint8_t sink = 0;
    for (uintptr_t p = first; p < end; p += page) sink = sink + *reinterpret_cast<const volatile uint8_t*>(p);
}

}  // namespace coli
