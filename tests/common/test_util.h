// Helpers every test suite shares: a scratch directory, whole-file reads and writes, and matching the
// one-line coli::Error a call throws.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

#include "core/error.h"

namespace coli::test {

// A fresh directory under the system temp dir, removed with everything in it at scope exit.
class TempDir {
public:
    explicit TempDir(std::string_view tag = "test") {
        static std::atomic<int> counter{0};
        path_ =
            std::filesystem::temp_directory_path() /
            ("coli-" + std::string(tag) + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
        std::filesystem::remove_all(path_);
        std::filesystem::create_directories(path_);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

private:
    std::filesystem::path path_;
};

inline void write_bytes(const std::filesystem::path& path, std::string_view bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good()) << path;
}

inline std::string read_bytes(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// The coli::Error message thrown by `f`, or "" (and a test failure) when it throws none.
template <typename F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    ADD_FAILURE() << "expected a coli::Error";
    return "";
}

}  // namespace coli::test

// Expects `expr` to throw coli::Error whose one-line message contains `fragment`.
#define EXPECT_COLI_ERROR(expr, fragment)                                          \
    do {                                                                           \
        std::string msg_ = ::coli::test::error_of([&] { (void)(expr); });          \
        EXPECT_NE(msg_.find(fragment), std::string::npos) << "message: " << msg_;  \
        EXPECT_EQ(msg_.find('\n'), std::string::npos) << "not one line: " << msg_; \
    } while (0)
