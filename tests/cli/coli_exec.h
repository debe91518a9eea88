// Running the built `coli` binary from tests: fork + exec with stdout and stderr captured to files, and
// wait4 for the exit status and the child's peak resident set (ru_maxrss), which is what the RAM-budget
// test bounds. Also a temporary directory for the checkpoints the tests write.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common/test_util.h"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace coli::test {

// Scratch space for a test: its files, captured output and any model it writes.
using ScratchDir = TempDir;

struct ExecResult {
    int exit_code = -1;    // the exit status, or -1 when killed by a signal
    std::string out, err;  // captured stdout and stderr
    // The child's peak resident set (VmHWM), from wait4's rusage. Linux keeps the high-water mark across
    // exec, so it also counts the forked copy of the test process before exec (a few MB at most).
    uint64_t peak_rss_bytes = 0;
};

inline std::string file_text(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// Runs COLI_BINARY with args; `scratch` holds the captured output files.
inline ExecResult coli_exec(const std::vector<std::string>& args, const std::filesystem::path& scratch) {
    ExecResult r;
    const std::string binary = COLI_BINARY;
    if (!std::filesystem::exists(binary)) {
        ADD_FAILURE() << binary << " does not exist: build the coli target before running these tests";
        return r;
    }
    const std::filesystem::path out_path = scratch / "stdout.txt", err_path = scratch / "stderr.txt";
    std::vector<std::string> argv_text = {binary};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);

    const pid_t pid = ::fork();
    if (pid == 0) {  // child: only async-signal-safe calls until exec
        const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (out < 0 || err < 0 || ::dup2(out, STDOUT_FILENO) < 0 || ::dup2(err, STDERR_FILENO) < 0)
            ::_exit(127);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    EXPECT_GT(pid, 0) << "fork failed";
    if (pid <= 0) return r;
    int status = 0;
    rusage usage{};
    while (::wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
    }
    constexpr uint64_t kMaxRssUnit = 1024;  // Linux reports ru_maxrss in KiB
    r.peak_rss_bytes = static_cast<uint64_t>(usage.ru_maxrss) * kMaxRssUnit;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = file_text(out_path);
    r.err = file_text(err_path);
    return r;
}

// `coli synth --arch olmoe --out dir` plus extra flags; fails the test when it does not succeed.
inline void synth_olmoe(const std::filesystem::path& dir, const std::vector<std::string>& flags,
                        const std::filesystem::path& scratch) {
    std::vector<std::string> args = {"synth", "--arch", "olmoe", "--out", dir.string()};
    args.insert(args.end(), flags.begin(), flags.end());
    const ExecResult r = coli_exec(args, scratch);
    ASSERT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace coli::test
