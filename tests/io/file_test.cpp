#include "io/file.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "test_util.h"

namespace coli {
namespace {

using test::TempDir;

// Not a multiple of the block size, so that the last aligned block runs past the end of the file.
constexpr size_t kFileSize = 3 * kDirectAlign + 123;

struct Case {
    uint64_t offset;
    size_t n;
};
const Case kCases[] = {
    {0, 0},
    {0, 1},
    {1, 1},
    {4095, 2},
    {4096, 4096},
    {100, 3 * kDirectAlign},
    {5000, 10},
    {kFileSize - 1, 1},
    {kFileSize - 200, 200},
    {kFileSize, 0},
    {0, kFileSize},
    {3 * kDirectAlign + 7, 116},
};

// Checks reads of `path` (holding `bytes`) at unaligned offsets and up to the end of the file.
void check_reads(const std::filesystem::path& path, const std::vector<uint8_t>& bytes, bool use_direct) {
    ReadFile f(path, use_direct);
    ASSERT_EQ(f.size(), bytes.size());
    if (!use_direct) {
        EXPECT_FALSE(f.has_direct());
        EXPECT_LT(f.fd_direct(), 0);
    }
    EXPECT_GE(f.fd(), 0);
    for (const Case& c : kCases) {
        SCOPED_TRACE(testing::Message()
                     << "offset " << c.offset << " n " << c.n << " direct " << f.has_direct());
        std::vector<uint8_t> got(c.n + 1, 0xAA);
        f.read_at(got.data(), c.n, c.offset);
        EXPECT_EQ(std::memcmp(got.data(), bytes.data() + c.offset, c.n), 0);
        EXPECT_EQ(got[c.n], 0xAA);  // nothing written past n

        const uint64_t span = ReadFile::direct_bytes(c.n, c.offset);
        EXPECT_EQ(span % kDirectAlign, 0u);
        EXPECT_GE(span, c.offset % kDirectAlign + c.n);
        AlignedBytes buf = aligned_alloc_bytes(span);
        const size_t skew = f.read_direct(buf.get(), c.n, c.offset);
        EXPECT_EQ(skew, c.offset % kDirectAlign);
        EXPECT_EQ(std::memcmp(buf.get() + skew, bytes.data() + c.offset, c.n), 0);
    }
    EXPECT_COLI_ERROR(f.read_at(nullptr, 1, kFileSize), "is past the end");
    EXPECT_COLI_ERROR(f.read_at(nullptr, 2, kFileSize - 1), "is past the end");
    EXPECT_COLI_ERROR(f.read_direct(nullptr, 1, kFileSize), "is past the end");
    EXPECT_COLI_ERROR(f.read_direct(nullptr, SIZE_MAX, 1), "is past the end");
}

// Both paths: O_DIRECT where this filesystem allows it, and buffered.
TEST(ReadFile, ReadsAtUnalignedOffsetsAndNearEof) {
    TempDir dir;
    auto bytes = test::random_bytes(kFileSize, 42);
    test::write_bytes(dir / "f.bin", std::string_view(reinterpret_cast<char*>(bytes.data()), bytes.size()));
    check_reads(dir / "f.bin", bytes, true);
    check_reads(dir / "f.bin", bytes, false);
}

// tmpfs refused O_DIRECT before Linux 6.6: the file must open either way, and reads must work.
TEST(ReadFile, Tmpfs) {
    const std::filesystem::path shm = "/dev/shm";
    if (!std::filesystem::is_directory(shm)) GTEST_SKIP() << "no /dev/shm";
    const auto path = shm / ("coli-io-test-" + std::to_string(::getpid()) + ".bin");
    auto bytes = test::random_bytes(kFileSize, 7);
    test::write_bytes(path, std::string_view(reinterpret_cast<char*>(bytes.data()), bytes.size()));
    check_reads(path, bytes, true);
    std::filesystem::remove(path);
}

TEST(ReadFile, Errors) {
    TempDir dir;
    EXPECT_COLI_ERROR(ReadFile(dir / "missing"), "missing: cannot open: No such file or directory");
    EXPECT_COLI_ERROR(ReadFile(dir.path()), "not a regular file");
}

// A file written to (its modification time moves), truncated, replaced by another of the same name or
// removed after it was opened: the next read_direct refuses, naming the file.
TEST(ReadFile, AFileChangedSinceItWasOpenedIsRefused) {
    namespace fs = std::filesystem;
    const auto bytes = test::random_bytes(kFileSize, 3);
    const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    const std::vector<std::function<void(const fs::path&)>> changes = {
        [](const fs::path& p) { fs::last_write_time(p, fs::last_write_time(p) + std::chrono::hours(1)); },
        [](const fs::path& p) { fs::resize_file(p, kFileSize - 1); },
        [text](const fs::path& p) {
            test::write_bytes(p.string() + ".new", text);  // the same bytes, another file
            fs::rename(p.string() + ".new", p);
        },
        [](const fs::path& p) { fs::remove(p); },
    };
    for (const auto& change : changes) {
        TempDir dir;
        test::write_bytes(dir / "f.bin", text);
        ReadFile f(dir / "f.bin");
        AlignedBytes buf = aligned_alloc_bytes(ReadFile::direct_bytes(kDirectAlign, 0));
        f.read_direct(buf.get(), kDirectAlign, 0);  // unchanged: read
        change(dir / "f.bin");
        EXPECT_COLI_ERROR(f.read_direct(buf.get(), kDirectAlign, 0), "f.bin: changed since it was opened");
    }
}

TEST(ReadFile, EmptyFile) {
    TempDir dir;
    test::write_bytes(dir / "empty", "");
    ReadFile f(dir / "empty");
    EXPECT_EQ(f.size(), 0u);
    f.read_at(nullptr, 0, 0);
    EXPECT_EQ(ReadFile::direct_bytes(0, 0), kDirectAlign);  // never an empty buffer
    AlignedBytes buf = aligned_alloc_bytes(kDirectAlign);
    EXPECT_EQ(f.read_direct(buf.get(), 0, 0), 0u);
}

TEST(AlignedAlloc, AlignedAndNeverNull) {
    for (size_t n : {size_t(0), size_t(1), kDirectAlign, kDirectAlign + 1}) {
        AlignedBytes b = aligned_alloc_bytes(n);
        ASSERT_NE(b.get(), nullptr);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(b.get()) % kDirectAlign, 0u);
        std::memset(b.get(), 1, n);
    }
}

}  // namespace
}  // namespace coli
