#include "io/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"

namespace coli {

namespace {

uint64_t align_down(uint64_t x) {
    return x / kDirectAlign * kDirectAlign;
}
uint64_t align_up(uint64_t x) {
    return (x + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
}

// How many faults a test hook injects: the number in the environment variable `name`.
int64_t fault_count(const char* name) {
    return static_cast<int64_t>(env_number(name));
}

// Takes one fault of the budget; false once it is spent.
bool fault_take(std::atomic<int64_t>& left) {
    return left.load(std::memory_order_relaxed) > 0 && left.fetch_sub(1) > 0;
}

// What an injected short read leaves in the bytes it did not return.
constexpr uint8_t kShortReadFill = 0xFF;

// The test hooks of docs/reliability.md on the reads by read_direct (the expert store's reads), beside
// read_fault_injected: COLI_SHORT_READS=N makes the first N return half the bytes they read (at least one),
// as a network filesystem or an interrupted read may.
bool short_read_injected() {
    static std::atomic<int64_t> left{fault_count("COLI_SHORT_READS")};
    return fault_take(left);
}

// COLI_SLOW_READS=N:MS makes the first N reads wait MS milliseconds first, as a stalling disk would.
void slow_read_inject() {
    static const char* const env = std::getenv("COLI_SLOW_READS");
    static const char* const colon = env != nullptr ? std::strchr(env, ':') : nullptr;
    static std::atomic<int64_t> left{colon != nullptr ? std::atoll(env) : int64_t{0}};
    static const std::chrono::milliseconds delay{colon != nullptr ? std::atoll(colon + 1) : 0};
    if (fault_take(left)) std::this_thread::sleep_for(delay);
}

// One pread, tried again after EINTR, and after EIO up to kReadAttempts times in all (said on stderr).
// injectable: the test hooks above may fail it or cut it short.
ssize_t pread_retrying(int fd, uint8_t* dst, size_t n, uint64_t offset, const std::filesystem::path& path,
                       bool injectable) {
    for (int attempt = 1;; ++attempt) {
        ssize_t r = -1;
        if (injectable) slow_read_inject();
        if (injectable && read_fault_injected())
            errno = EIO;
        else
            r = ::pread(fd, dst, n, static_cast<off_t>(offset));
        if (r < 0 && errno == EINTR) {
            --attempt;  // an interruption is not a failure
            continue;
        }
        if (r < 0 && errno == EIO && attempt < kReadAttempts) {
            log_warn("{}: read of {} bytes at offset {} failed ({}), trying again", path.string(), n, offset,
                     std::strerror(EIO));
            continue;
        }
        if (r > 1 && injectable && short_read_injected()) {
            // The bytes past the count are not the file's: code that took them as read would show it.
            std::memset(dst + r / 2, kShortReadFill, static_cast<size_t>(r - r / 2));
            r /= 2;
        }
        return r;
    }
}

// Buffered pread until `n` bytes arrived or the file ended; retries interrupted and partial reads.
// Returns the number of bytes read (less than n only at end of file).
size_t pread_full(int fd, uint8_t* dst, size_t n, uint64_t offset, const std::filesystem::path& path,
                  bool injectable) {
    size_t got = 0;
    while (got < n) {
        const ssize_t r = pread_retrying(fd, dst + got, n - got, offset + got, path, injectable);
        check(r >= 0, "{}: read of {} bytes at offset {} failed: {}", path.string(), n - got, offset + got,
              std::strerror(errno));
        if (r == 0) break;
        got += static_cast<size_t>(r);
    }
    return got;
}

}  // namespace

bool read_fault_injected() {
    static std::atomic<int64_t> left{fault_count("COLI_FAIL_READS")};
    return fault_take(left);
}

int write_file_synced(const std::filesystem::path& path, std::string_view bytes) {
    static std::atomic<int64_t> failures_left{fault_count("COLI_FAIL_WRITES")};
    const bool disk_full = fault_take(failures_left);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return errno;
    const size_t to_write = disk_full ? bytes.size() / 2 : bytes.size();
    int err = 0;
    for (size_t done = 0; done < to_write && err == 0;) {
        const ssize_t w = ::write(fd, bytes.data() + done, to_write - done);
        if (w >= 0)
            done += static_cast<size_t>(w);
        else if (errno != EINTR)
            err = errno;
    }
    if (err == 0 && disk_full) err = ENOSPC;
    if (err == 0 && ::fsync(fd) != 0) err = errno;
    if (::close(fd) != 0 && err == 0) err = errno;
    return err;
}

FileIdentity FileIdentity::of(const struct stat& st) {
    return {st.st_dev, st.st_ino, static_cast<uint64_t>(st.st_size), st.st_mtim};
}

void FileIdentity::check_unchanged(const std::filesystem::path& path, int fd) const {
    const auto same = [&](const struct stat& st) {
        return st.st_dev == device && st.st_ino == inode && static_cast<uint64_t>(st.st_size) == size &&
               st.st_mtim.tv_sec == modified.tv_sec && st.st_mtim.tv_nsec == modified.tv_nsec;
    };
    struct stat named {};
    struct stat open {};
    check(::stat(path.c_str(), &named) == 0 && same(named) &&
              (fd < 0 || (::fstat(fd, &open) == 0 && same(open))),
          "{}: changed since it was opened (replaced, removed or written to); its bytes are no longer those "
          "the model was loaded with: restart coli",
          path.string());
}

void AlignedFree::operator()(void* p) const {
    if (mapped_bytes > 0)
        PagesUnmap{mapped_bytes}(p);
    else
        std::free(p);
}

AlignedBytes aligned_alloc_bytes(size_t n) {
    // Test hook (docs/reliability.md): COLI_FAIL_ALLOCS=N makes the process's first N calls fail as if the
    // memory were exhausted.
    static std::atomic<int64_t> failures_left{fault_count("COLI_FAIL_ALLOCS")};
    // Never zero bytes: a zero-byte allocation may return nullptr, which callers would have to
    // special-case.
    const size_t bytes = align_up(n == 0 ? 1 : n);
    const auto out_of_memory = [bytes] {
        return OutOfMemory(fmt::format("out of memory: cannot allocate {} aligned bytes", bytes));
    };
    if (fault_take(failures_left)) throw out_of_memory();
    // A buffer of a huge page or more in huge pages (core/pages.h): filling it faults once per 2 MB instead
    // of once per 4 KB page, which on a virtual machine is most of the cost of reading an expert into fresh
    // memory, and reading it misses the TLB that much less.
    if (bytes >= kHugePageBytes) {
        void* p = pages_map(bytes);
        if (p == MAP_FAILED) throw out_of_memory();
        return AlignedBytes(static_cast<uint8_t*>(p), AlignedFree{bytes});
    }
    void* p = nullptr;
    const int err = ::posix_memalign(&p, kDirectAlign, bytes);
    if (err != 0 || p == nullptr) throw out_of_memory();
    return AlignedBytes(static_cast<uint8_t*>(p));
}

ReadFile::ReadFile(const std::filesystem::path& path, bool use_direct) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    check(fd_ >= 0, "{}: cannot open: {}", path.string(), std::strerror(errno));
    struct stat st {};
    const char* problem = nullptr;
    if (::fstat(fd_, &st) != 0)
        problem = std::strerror(errno);
    else if (!S_ISREG(st.st_mode))
        problem = "not a regular file";
    if (problem) {
        ::close(fd_);  // the destructor does not run when the constructor throws
        fd_ = -1;
        fail("{}: cannot read: {}", path.string(), problem);
    }
    size_ = static_cast<uint64_t>(st.st_size);
    opened_ = FileIdentity::of(st);
    // Filesystems without O_DIRECT (tmpfs, some FUSE and network mounts) refuse it with EINVAL: then
    // every read is buffered, which is correct, only less predictable for large expert reads.
    if (use_direct) fd_direct_ = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
}

ReadFile::~ReadFile() {
    if (fd_direct_ >= 0) ::close(fd_direct_);
    if (fd_ >= 0) ::close(fd_);
}

void ReadFile::read_at(void* dst, size_t n, uint64_t offset) const {
    read_buffered(dst, n, offset, false);
}

void ReadFile::read_buffered(void* dst, size_t n, uint64_t offset, bool injectable) const {
    check(offset <= size_ && n <= size_ - offset,
          "{}: read of {} bytes at offset {} is past the end ({} bytes)", path_.string(), n, offset, size_);
    size_t got = pread_full(fd_, static_cast<uint8_t*>(dst), n, offset, path_, injectable);
    check(got == n, "{}: short read: {} of {} bytes at offset {} (file truncated?)", path_.string(), got, n,
          offset);
}

uint64_t ReadFile::direct_bytes(size_t n, uint64_t offset) {
    return std::max<uint64_t>(kDirectAlign, align_up(offset + n) - align_down(offset));
}

void ReadFile::check_unchanged() const {
    opened_.check_unchanged(path_, fd_);
}

size_t ReadFile::read_direct(uint8_t* buf, size_t n, uint64_t offset) const {
    size_t skew = 0;
    try {
        skew = read_direct_unchecked(buf, n, offset);
    } catch (const Error&) {
        check_unchanged();  // a truncated or replaced file is better named as such
        throw;
    }
    check_unchanged();  // after the read: a change before or during it shows
    return skew;
}

size_t ReadFile::read_direct_unchecked(uint8_t* buf, size_t n, uint64_t offset) const {
    check(offset <= size_ && n <= size_ - offset,
          "{}: read of {} bytes at offset {} is past the end ({} bytes)", path_.string(), n, offset, size_);
    const uint64_t begin = align_down(offset);
    const uint64_t end = align_up(offset + n);
    const size_t skew = static_cast<size_t>(offset - begin);
    if (!has_direct()) {
        read_buffered(buf + skew, n, offset, true);
        return skew;
    }
    // The aligned range may run past the end of the file; O_DIRECT then returns a short read, which is
    // fine as long as every byte up to offset + n arrived.
    const size_t needed = skew + n, len = static_cast<size_t>(end - begin);
    size_t got = 0;
    while (got < needed) {
        const ssize_t r = pread_retrying(fd_direct_, buf + got, len - got, begin + got, path_, true);
        check(r >= 0, "{}: direct read of {} bytes at offset {} failed: {}", path_.string(), len - got,
              begin + got, std::strerror(errno));
        got += static_cast<size_t>(r);
        if (r == 0) break;
        // A count that is not a whole number of blocks: the end of the file, or a short read (a network
        // filesystem may return fewer bytes than asked). O_DIRECT cannot go on from an unaligned position,
        // so the bytes still needed, if any, are read buffered.
        if (got % kDirectAlign != 0) {
            if (got < needed) got += pread_full(fd_, buf + got, needed - got, begin + got, path_, true);
            break;
        }
    }
    check(got >= needed, "{}: short read: {} of {} bytes at offset {} (file truncated?)", path_.string(),
          got < skew ? 0 : got - skew, n, offset);
    return skew;
}

}  // namespace coli
