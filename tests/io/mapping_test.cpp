#include "io/mapping.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "io/file.h"
#include "test_util.h"

namespace coli {
namespace {

using test::TempDir;

// Maps the file `bytes` were written to and checks what the mapping holds and where it starts.
void check_mapping(const std::vector<uint8_t>& bytes, bool expect_huge_aligned) {
    TempDir dir;
    test::write_bytes(dir / "f.bin",
                      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    const int fd = ::open((dir / "f.bin").c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    void* p = mapping_map_readonly(fd, bytes.size());
    ::close(fd);
    ASSERT_NE(p, MAP_FAILED);
    if (expect_huge_aligned) {
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePageBytes, 0u);
    }
    const auto* mapped = static_cast<const uint8_t*>(p);
    mapping_populate({mapped, bytes.size()});
    EXPECT_EQ(std::memcmp(mapped, bytes.data(), bytes.size()), 0);
    EXPECT_EQ(::munmap(p, bytes.size()), 0);
}

TEST(MappingMapReadonly, SmallFileMapsWhole) {
    check_mapping(test::random_bytes(3 * kDirectAlign + 5, 1), false);
}

// Larger than a huge page and not a multiple of the page size: starts at a huge-page boundary, holds the
// file's bytes to its last one, and unmaps with the file's size.
TEST(MappingMapReadonly, LargeFileStartsAtAHugePageBoundary) {
    check_mapping(test::random_bytes(kHugePageBytes + 3 * kDirectAlign + 5, 2), true);
}

}  // namespace
}  // namespace coli
