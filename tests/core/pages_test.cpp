#include "core/pages.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>

#include "common/test_util.h"

namespace coli {
namespace {

constexpr size_t kPage = 4096;

// Sizes below, at and past a huge page, none of them a multiple of the page size but the first.
const size_t kSizes[] = {kPage, 3 * kPage + 5, kHugePageBytes, kHugePageBytes + 3 * kPage + 5};

bool huge_aligned(const void* p) {
    return reinterpret_cast<uintptr_t>(p) % kHugePageBytes == 0;
}

TEST(PagesMap, MemoryIsZeroedWritableAndHugeAlignedFromAHugePage) {
    for (size_t n : kSizes) {
        SCOPED_TRACE(n);
        std::unique_ptr<void, PagesUnmap> p(pages_map(n), PagesUnmap{n});
        ASSERT_NE(p.get(), MAP_FAILED);
        auto* bytes = static_cast<uint8_t*>(p.get());
        EXPECT_EQ(bytes[0], 0);
        EXPECT_EQ(bytes[n - 1], 0);
        std::memset(bytes, 0x5A, n);  // every byte writable, to the last
        EXPECT_EQ(bytes[n - 1], 0x5A);
        if (n >= kHugePageBytes) {
            EXPECT_TRUE(huge_aligned(bytes));
        }
    }
}

TEST(PagesMap, FileHoldsItsBytesToTheLast) {
    for (size_t n : kSizes) {
        SCOPED_TRACE(n);
        test::TempDir dir;
        std::string bytes(n, '\0');
        for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>(i * 131 + i / 4096);
        test::write_bytes(dir.path() / "f.bin", bytes);
        const int fd = ::open((dir.path() / "f.bin").c_str(), O_RDONLY | O_CLOEXEC);
        ASSERT_GE(fd, 0);
        std::unique_ptr<void, PagesUnmap> p(pages_map(n, fd), PagesUnmap{n});
        ::close(fd);  // the mapping keeps the file
        ASSERT_NE(p.get(), MAP_FAILED);
        EXPECT_EQ(std::memcmp(p.get(), bytes.data(), n), 0);
        if (n >= kHugePageBytes) {
            EXPECT_TRUE(huge_aligned(p.get()));
        }
    }
}

TEST(PagesMap, FailureSetsErrno) {
    errno = 0;
    EXPECT_EQ(pages_map(kHugePageBytes, 12345), MAP_FAILED);  // not an open file
    EXPECT_EQ(errno, EBADF);
}

}  // namespace
}  // namespace coli
