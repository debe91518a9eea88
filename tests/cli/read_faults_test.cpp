// Expert reads that fail with EIO, injected with COLI_FAIL_READS (the process's first N reads fail;
// docs/reliability.md): a transient failure is tried again and changes no token, a lasting one is a
// one-line error naming the file and the offset. --no-mmap makes the demo model's experts go through reads.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "common/process.h"

namespace coli {
namespace {

constexpr const char* kRun =
    "run --no-mmap --hot-set none -n 8 --temperature 0 --print-ids --ids 5,17,99,200,33";

// Runs `coli kRun` with COLI_FAIL_READS=fail_reads (none when empty).
test::ProcessResult run_with_failing_reads(const std::string& fail_reads) {
    if (!fail_reads.empty()) ::setenv("COLI_FAIL_READS", fail_reads.c_str(), 1);
    test::ProcessResult r = test::coli_run(kRun);
    ::unsetenv("COLI_FAIL_READS");
    return r;
}

TEST(ReadFaults, ATransientEioIsTriedAgainAndChangesNoToken) {
    const auto clean = run_with_failing_reads("");
    ASSERT_EQ(clean.exit_code, 0) << clean.err;
    const auto faulty = run_with_failing_reads("2");  // the first read fails twice, its third attempt works
    ASSERT_EQ(faulty.exit_code, 0) << faulty.err;
    EXPECT_EQ(test::last_line(faulty.out), test::last_line(clean.out));
    EXPECT_NE(faulty.err.find("trying again"), std::string::npos) << faulty.err;
}

TEST(ReadFaults, ALastingEioIsAOneLineErrorNamingTheFileAndTheOffset) {
    const auto r = run_with_failing_reads("1000000");
    EXPECT_EQ(r.exit_code, 1);
    const std::string last = test::last_line(r.err);
    EXPECT_EQ(last.rfind("coli: error: ", 0), 0u) << r.err;
    EXPECT_NE(last.find("model.safetensors"), std::string::npos) << last;
    EXPECT_NE(last.find("at offset"), std::string::npos) << last;
    EXPECT_NE(last.find("Input/output error"), std::string::npos) << last;
}

}  // namespace
}  // namespace coli
