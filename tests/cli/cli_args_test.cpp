// The command line itself: every argument error is one `coli: error:` line with exit code 1 that names the
// word at fault, flags that a run would ignore are refused, and a run stops at the context's end with a
// note rather than an error. Runs the built binary on the bundled demo model (its context: 512 tokens).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>

#include "common/process.h"
#include "common/test_util.h"

namespace coli {
namespace {

namespace fs = std::filesystem;

constexpr int kDemoContext = 512;  // models/demo/config.json max_position_embeddings

void expect_one_line_error(const test::ProcessResult& r, const std::string& fragment) {
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.rfind("coli: error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << "'" << fragment << "' not named in: " << r.err;
    EXPECT_EQ(r.out, "") << "nothing on stdout";
}

TEST(CliArgs, UnknownCommandsAndFlagsAreOneLineErrors) {
    expect_one_line_error(test::coli_run(""), "no command given");
    expect_one_line_error(test::coli_run("frobnicate"), "unknown command 'frobnicate'");
    expect_one_line_error(test::coli_run("--frobnicate"), "--frobnicate");
    expect_one_line_error(test::coli_run("run --bogus-flag hi"), "--bogus-flag");
    expect_one_line_error(test::coli_run("info --bogus-flag"), "--bogus-flag");
    expect_one_line_error(test::coli_run("serve --port"), "--port");  // missing value
    expect_one_line_error(test::coli_run("run -n many hi"), "many");  // malformed value
    expect_one_line_error(test::coli_run("run --temperature warm hi"), "--temperature");
    expect_one_line_error(test::coli_run("run hi --max-tokens"), "coli run --help");  // where help is
}

TEST(CliArgs, HelpAndVersionSucceed) {
    const auto version = test::coli_run("--version");
    EXPECT_EQ(version.exit_code, 0) << version.err;
    EXPECT_EQ(version.out.rfind("coli ", 0), 0u) << version.out;
    const auto help = test::coli_run("run --help");
    EXPECT_EQ(help.exit_code, 0) << help.err;
    EXPECT_NE(help.out.find("--max-tokens"), std::string::npos) << help.out;
}

TEST(CliArgs, InfoDefaultsToTheDemoModel) {
    const auto r = test::coli_run("info --hot-set none");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("models/demo"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("family:       olmoe"), std::string::npos) << r.out;
}

TEST(CliArgs, FlagsARunWouldIgnoreAreRefused) {
    expect_one_line_error(test::coli_run("run --print-ids hi --hot-set none"), "--print-ids");
    expect_one_line_error(test::coli_run("run --system 'be brief' hi --hot-set none"), "--system");
    expect_one_line_error(test::coli_run("run --ids 1,2 --chat --hot-set none"), "--chat");
    expect_one_line_error(test::coli_run("run -n 0 hi --hot-set none"), "--max-tokens");
    expect_one_line_error(test::coli_run("run -n -3 hi --hot-set none"), "--max-tokens");
    expect_one_line_error(test::coli_run("chat -n 0 --hot-set none"), "--max-tokens");
    expect_one_line_error(test::coli_run("run --ctx 100000 hi --hot-set none"), "--ctx 100000");
    // A backend that is not here says what is (Metal, until its backend is written, on every machine).
    expect_one_line_error(test::coli_run("run --backend metal hi --hot-set none"), "available here: ");
}

// --ignore-eos does what it says with a text prompt too: the run goes on to the context's end.
TEST(CliArgs, ARunStopsAtTheContextsEndWithANote) {
    const auto text =
        test::coli_run("run -n 1000 --ignore-eos --temperature 0 'In the beginning' --hot-set none");
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_EQ(text.err.find("error"), std::string::npos) << text.err;
    EXPECT_NE(text.err.find(std::to_string(kDemoContext)), std::string::npos) << text.err;
    EXPECT_NE(text.err.find("stopped at the context's end"), std::string::npos) << text.err;

    const auto ids =
        test::coli_run("run -n 1000 --ignore-eos --temperature 0 --ids 1,2,3 --print-ids --hot-set none");
    ASSERT_EQ(ids.exit_code, 0) << ids.err;
    const std::string last = test::last_line(ids.out);
    EXPECT_EQ(std::count(last.begin(), last.end(), ',') + 1, kDemoContext - 3) << "every position filled";
    EXPECT_NE(ids.err.find("3 prompt + 509 generated tokens fill the context of 512"), std::string::npos)
        << ids.err;

    const auto prompt_too_long = test::coli_run("run --ctx 2 --ids 1,2,3 --hot-set none");
    expect_one_line_error(prompt_too_long, "the prompt is 3 tokens, the context is 2");
}

// Without --backend, the best backend there is (auto) runs, and stderr says which and what it passed over.
TEST(CliArgs, TheDefaultBackendIsAutoAndSaysWhatItChose) {
    const auto r = test::coli_run("run -n 2 'In the beginning' --hot-set none");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("backend auto: chose "), std::string::npos) << r.err;
    const auto cpu = test::coli_run("run -n 2 'In the beginning' --hot-set none --backend cpu");
    ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
    EXPECT_EQ(cpu.err.find("backend auto"), std::string::npos) << cpu.err;
}

// `coli bench --model`: progress on stderr, a one-line summary ahead of the table, no matmul table unless
// asked, and no warning that an unlimited cache is not full (the note says it holds every expert).
TEST(CliArgs, BenchOfAModelLeadsWithASummary) {
    const auto r =
        test::coli_run("bench --model " + (fs::path(COLI_SOURCE_DIR) / "models" / "demo").string() +
                       " --tokens 4 --warmup-tokens 2 --decode-reps 1 --reps 1 --backend cpu");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("bench: decode run 1 of 1"), std::string::npos) << r.err;
    const size_t summary = r.out.find("\nsummary: ");
    ASSERT_NE(summary, std::string::npos) << r.out;
    EXPECT_LT(summary, r.out.find("\nfigure ")) << r.out;
    EXPECT_EQ(r.out.find("matmul, decode"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("holds every expert"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("cache was not full"), std::string::npos) << r.out;
}

// `coli bench-attention` runs both tables at a short context (the times are not checked), with DeepSeek-V4-
// Flash's sizes and layer schedule as its hub config.json gives them (docs/models.md 8.1: 43 layers, the
// compress ratios 0, 0, then 4 and 128 alternating; 64 heads of 512, window 128, indexer top 512); an
// unknown table is an argument error.
TEST(CliArgs, BenchAttentionRunsEveryTable) {
    const auto r = test::coli_run("bench-attention --backend cpu --contexts 256 --reps 1 --threads 2");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("MLA: 128 heads"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("DeepSeek-V4-Flash: 64 heads of 512"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("window 128"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("CSA: ratio 4, indexer 64 heads of 128, top 512; HCA: ratio 128"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("43 layers (2 sliding, 21 CSA, 20 HCA)"), std::string::npos) << r.out;
    // One row per table for the one context: MLA's, V4's per layer, V4's over the layers.
    size_t rows = 0;
    for (size_t at = r.out.find("\n     256 "); at != std::string::npos;
         at = r.out.find("\n     256 ", at + 1))
        ++rows;
    EXPECT_EQ(rows, 3u) << r.out;
    expect_one_line_error(test::coli_run("bench-attention --tables v5"), "unknown table 'v5'");
}

// Statistics before anything ran say so, rather than rates of 0.0%.
TEST(CliArgs, StatsBeforeAnyTurnSayNothingRan) {
    test::TempDir tmp("cli");
    test::write_bytes(tmp / "turns.txt", "/stats\n");
    const auto r = test::coli_run("chat --hot-set none < " + (tmp / "turns.txt").string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("no turn yet"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("none ran yet"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("0.0%"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("0.00 tok/s"), std::string::npos) << r.err;
}

// `coli backends` lines the backend column up whatever the family names' lengths.
TEST(CliArgs, BackendsAlignsTheFamilyColumn) {
    const auto r = test::coli_run("backends");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const size_t matrix = r.out.find("family x backend");
    ASSERT_NE(matrix, std::string::npos) << r.out;
    std::set<size_t> columns;  // where the backend column starts on each family's cpu line
    std::istringstream lines(r.out.substr(matrix));
    for (std::string line; std::getline(lines, line);) {
        std::istringstream words(line);
        std::string family, backend;
        if (line.rfind("  ", 0) == 0 && (words >> family >> backend) && backend == "cpu")
            columns.insert(line.find(" cpu ", 2 + family.size()));
    }
    EXPECT_EQ(columns.size(), 1u) << r.out;
}

// `--model org/name` runs the model from a Hugging Face cache laid out as the hf CLI leaves it (here: the
// demo model's files as blobs, linked from snapshots/<commit>, refs/main naming the commit); a repo that is
// not downloaded and a GGUF file are one-line errors that say what to do.
TEST(CliArgs, ARepoIdRunsFromTheHuggingFaceCache) {
    test::TempDir home("hf");
    const char* kCommit = "89abcdef0123456789abcdef0123456789abcdef";
    const fs::path repo = home.path() / "hub" / "models--colibri--demo";
    fs::create_directories(repo / "blobs");
    fs::create_directories(repo / "refs");
    fs::create_directories(repo / "snapshots" / kCommit);
    test::write_bytes(repo / "refs" / "main", kCommit);
    int blob = 0;
    for (const fs::directory_entry& e :
         fs::directory_iterator(fs::path(COLI_SOURCE_DIR) / "models" / "demo")) {
        const std::string name = "blob" + std::to_string(blob++);
        fs::copy_file(e.path(), repo / "blobs" / name);
        fs::create_symlink(fs::path("../..") / "blobs" / name,
                           repo / "snapshots" / kCommit / e.path().filename());
    }
    ::setenv("HF_HOME", home.path().c_str(), 1);
    const auto r =
        test::coli_run("run --model colibri/demo -n 4 --temperature 0 'In the beginning' --hot-set none");
    const auto missing = test::coli_run("run --model colibri/absent hi --hot-set none");
    ::unsetenv("HF_HOME");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.size(), 0u);
    expect_one_line_error(missing, "hf download colibri/absent");

    test::write_bytes(home / "model-Q4_K_M.gguf", "GGUF");
    expect_one_line_error(test::coli_run("run hi --model " + (home / "model-Q4_K_M.gguf").string()),
                          "original safetensors checkpoint");
}

}  // namespace
}  // namespace coli
