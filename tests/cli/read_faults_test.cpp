// Expert reads that fail with EIO, injected with COLI_FAIL_READS (the process's first N reads fail;
// docs/reliability.md): a transient failure is tried again and changes no token, a lasting one is a
// one-line error naming the file and the offset. Reads that return fewer bytes than asked
// (COLI_SHORT_READS) are continued and change no token; a stalling read (COLI_SLOW_READS) is warned about
// once and counted in the summary. --no-mmap makes the demo model's experts go through reads.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "common/process.h"

namespace coli {
namespace {

constexpr const char* kRun =
    "run --no-mmap --hot-set none -n 8 --temperature 0 --print-ids --ids 5,17,99,200,33";
// The same with the experts used in place from the file mappings.
constexpr const char* kRunMapped = "run --hot-set none -n 8 --temperature 0 --print-ids --ids 5,17,99,200,33";

// Runs `coli <run> <flags>` with the environment variable `hook` set to `value` (unset when empty).
test::ProcessResult run_with_hook(const char* hook, const std::string& value, const std::string& flags = "",
                                  const char* run = kRun) {
    if (!value.empty()) ::setenv(hook, value.c_str(), 1);
    test::ProcessResult r = test::coli_run(std::string(run) + " " + flags);
    ::unsetenv(hook);
    return r;
}

test::ProcessResult run_with_failing_reads(const std::string& fail_reads) {
    return run_with_hook("COLI_FAIL_READS", fail_reads);
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

// The experts used in place from the file mappings (no --no-mmap, no budget): a failed MADV_POPULATE_READ
// is tried again as a read is, and one that fails on every attempt is a one-line error naming the file.
TEST(ReadFaults, MappedEioIsTriedAgainAndALastingOneIsAOneLineError) {
    const auto clean = run_with_hook("COLI_FAIL_READS", "", "", kRunMapped);
    ASSERT_EQ(clean.exit_code, 0) << clean.err;
    ASSERT_NE(clean.err.find("used in place from the file mappings"), std::string::npos) << clean.err;
    const auto transient = run_with_hook("COLI_FAIL_READS", "2", "", kRunMapped);
    ASSERT_EQ(transient.exit_code, 0) << transient.err;
    EXPECT_EQ(test::last_line(transient.out), test::last_line(clean.out));
    EXPECT_NE(transient.err.find("mapped checkpoint file failed (Input/output error), trying again"),
              std::string::npos)
        << transient.err;
    const auto lasting = run_with_hook("COLI_FAIL_READS", "1000000", "", kRunMapped);
    EXPECT_EQ(lasting.exit_code, 1);
    const std::string last = test::last_line(lasting.err);
    EXPECT_EQ(last.rfind("coli: error: ", 0), 0u) << lasting.err;
    EXPECT_NE(last.find("model.safetensors: cannot read"), std::string::npos) << last;
    EXPECT_NE(last.find("Input/output error"), std::string::npos) << last;
}

// Every expert read returns half of what it read (the rest of its buffer overwritten), on the O_DIRECT
// path (where the rest of a block-unaligned count is read buffered) and on the buffered one.
TEST(ReadFaults, ShortReadsAreContinuedAndChangeNoToken) {
    constexpr const char* kEveryRead = "1000000";
    for (const char* flags : {"", "--no-direct-io"}) {
        const auto clean = run_with_hook("COLI_SHORT_READS", "", flags);
        ASSERT_EQ(clean.exit_code, 0) << clean.err;
        const auto cut = run_with_hook("COLI_SHORT_READS", kEveryRead, flags);
        ASSERT_EQ(cut.exit_code, 0) << cut.err;
        EXPECT_EQ(test::last_line(cut.out), test::last_line(clean.out)) << flags;
    }
}

// Two reads stall for longer than the store's slow-read threshold (kSlowReadSeconds, 1 s): one warning,
// both counted in the summary, the tokens those of a clean run.
TEST(ReadFaults, StallingReadsAreWarnedAboutOnceAndCounted) {
    const auto clean = run_with_hook("COLI_SLOW_READS", "");
    ASSERT_EQ(clean.exit_code, 0) << clean.err;
    EXPECT_EQ(clean.err.find("slow expert reads"), std::string::npos) << clean.err;
    const auto slow = run_with_hook("COLI_SLOW_READS", "2:1200");
    ASSERT_EQ(slow.exit_code, 0) << slow.err;
    EXPECT_EQ(test::last_line(slow.out), test::last_line(clean.out));
    const size_t warning = slow.err.find("the disk is stalling");
    EXPECT_NE(warning, std::string::npos) << slow.err;
    EXPECT_EQ(slow.err.find("the disk is stalling", warning + 1), std::string::npos) << "one warning";
    EXPECT_NE(slow.err.find("slow expert reads: 2 took longer than 1 s"), std::string::npos) << slow.err;
}

}  // namespace
}  // namespace coli
