// Reading files at offsets: pread, O_DIRECT where the filesystem allows it, aligned buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string_view>

#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "core/pages.h"

namespace coli {

inline constexpr size_t kDirectAlign = 4096;  // O_DIRECT offset/size/address alignment

// Memory aligned for O_DIRECT, freed by the deleter.
struct AlignedFree {
    size_t mapped_bytes = 0;  // > 0: mapped by pages_map with this size; 0: from posix_memalign
    void operator()(void* p) const;
};
using AlignedBytes = std::unique_ptr<uint8_t[], AlignedFree>;
// n rounded up to kDirectAlign; huge pages from kHugePageBytes. Throws coli::OutOfMemory when out of memory.
AlignedBytes aligned_alloc_bytes(size_t n);

// Attempts of a read that fails with EIO (a transient disk or network-filesystem error) before it fails.
inline constexpr int kReadAttempts = 3;

// The test hook of docs/reliability.md for failing reads: COLI_FAIL_READS=N makes this true for the
// process's first N calls, each standing for an expert read (read_direct, mapping_populate) that fails
// with EIO, as a failing disk would.
bool read_fault_injected();

// Writes `bytes` to `path` (created or truncated) and flushes them to the disk (fsync), so that a rename
// over an older file after it never leaves an empty one behind a crash. Returns 0, or the errno of the
// first failing call (ENOSPC on a full disk): the file may then hold part of the bytes. Test hook
// (docs/reliability.md): COLI_FAIL_WRITES=N makes the process's first N calls fail with ENOSPC after
// writing half of the bytes, as a disk that fills up does.
int write_file_synced(const std::filesystem::path& path, std::string_view bytes);

// What tells a file's bytes from those it had when it was opened: a write moves its modification time, a
// file renamed over its path has another inode.
struct FileIdentity {
    dev_t device = 0;     // the filesystem
    ino_t inode = 0;      // the file on it
    uint64_t size = 0;    // its bytes
    timespec modified{};  // its last modification
    static FileIdentity of(const struct stat& st);
    // Throws coli::Error ("<path>: changed since it was opened") when the file at `path`, or the open file
    // `fd` (when >= 0), is no longer this one: written to, truncated, replaced or removed. One stat call,
    // two with fd.
    void check_unchanged(const std::filesystem::path& path, int fd = -1) const;
};

// A read-only file opened twice: buffered and, when the filesystem supports it, with O_DIRECT.
class ReadFile {
public:
    // Throws coli::Error. use_direct = false never opens with O_DIRECT (all reads buffered).
    explicit ReadFile(const std::filesystem::path& path, bool use_direct = true);
    ~ReadFile();
    ReadFile(const ReadFile&) = delete;
    ReadFile& operator=(const ReadFile&) = delete;

    uint64_t size() const { return size_; }
    bool has_direct() const { return fd_direct_ >= 0; }
    int fd() const { return fd_; }
    int fd_direct() const { return fd_direct_; }

    // Reads exactly n bytes at offset into dst (buffered). Throws on error or short read. Every read of
    // this class is tried again after EIO a few times (kReadAttempts), saying so on stderr.
    void read_at(void* dst, size_t n, uint64_t offset) const;
    // Bytes of the aligned buffer read_direct needs for [offset, offset + n): the range widened to
    // kDirectAlign boundaries, never less than one block.
    static uint64_t direct_bytes(size_t n, uint64_t offset);
    // Reads [offset, offset + n) into `buf` (kDirectAlign-aligned, direct_bytes(n, offset) long) with
    // O_DIRECT when available (buffered otherwise); returns the position of byte `offset` within buf.
    // After the read (and when it fails) it checks that the file is the one opened (check_unchanged).
    size_t read_direct(uint8_t* buf, size_t n, uint64_t offset) const;
    // FileIdentity::check_unchanged of the file as opened, for its path and its descriptor. Bytes read from
    // a changed file could be another checkpoint's.
    void check_unchanged() const;

private:
    // read_at, with the test hook's injected faults when injectable (read_direct's reads).
    void read_buffered(void* dst, size_t n, uint64_t offset, bool injectable) const;
    // read_direct without check_unchanged.
    size_t read_direct_unchecked(uint8_t* buf, size_t n, uint64_t offset) const;

    std::filesystem::path path_;
    int fd_ = -1, fd_direct_ = -1;
    uint64_t size_ = 0;
    FileIdentity opened_;  // the file as opened (check_unchanged)
};

}  // namespace coli
