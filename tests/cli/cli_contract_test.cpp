// The CLI contract that outside checks rely on (foundation issue, item 7), exercised on the binary.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "cli/fixture_run.h"
#include "common/fixture.h"
#include "common/process.h"
#include "common/test_util.h"

namespace coli {
namespace {

namespace fs = std::filesystem;

using test::ids_text;

// Reads a float32 .npy written by `coli logits`: checks the header names the shape.
std::vector<float> npy_read_f32(const fs::path& p, const std::string& expect_shape) {
    std::ifstream f(p, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_EQ(bytes.substr(1, 5), "NUMPY");
    const size_t header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
    const std::string header = bytes.substr(10, header_len);
    EXPECT_NE(header.find("'<f4'"), std::string::npos) << header;
    EXPECT_NE(header.find("'shape': " + expect_shape), std::string::npos) << header;
    std::vector<float> v((bytes.size() - 10 - header_len) / sizeof(float));
    std::memcpy(v.data(), bytes.data() + 10 + header_len, v.size() * sizeof(float));
    return v;
}

TEST(CliContract, RunPrintsTheGreedyIdsAsTheLastLine) {
    const test::Fixture fx = test::fixture_load("olmoe_gqa");
    const auto r = test::coli_run(test::fixture_run_args(fx, ""));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(test::last_line(r.out), ids_text(fx.greedy));
    EXPECT_NE(r.err.find("experts:"), std::string::npos) << "statistics go to stderr";
}

// With one expert slot per layer (--expert-cache 1), and the same bits with an unlimited cache.
TEST(CliContract, LogitsWritesTheOracleShapeAndValues) {
    const test::Fixture fx = test::fixture_load("olmoe_sharded");
    test::TempDir tmp("cli");
    std::vector<float> got[2];
    for (int cache : {1, 0}) {
        const fs::path out = tmp.path() / fmt::format("logits{}.npy", cache);
        const auto r =
            test::coli_run(fmt::format("logits --model {} --ids {} --out {} --expert-cache {} --hot-set none",
                                       fx.dir.string(), ids_text(fx.input_ids), out.string(), cache));
        ASSERT_EQ(r.exit_code, 0) << r.err;
        got[cache] = npy_read_f32(out, fmt::format("({}, {})", fx.input_ids.size(), fx.vocab));
    }
    EXPECT_LE(test::max_rel_diff(got[1], fx.logits), test::kCpuLogitTolerance);
    EXPECT_TRUE(got[0].size() == got[1].size() &&
                std::memcmp(got[0].data(), got[1].data(), got[0].size() * sizeof(float)) == 0)
        << "--expert-cache 1 changed the logits";
}

TEST(CliContract, InfoShowsSizesByPart) {
    const auto r = test::coli_run(
        fmt::format("info --model {} --hot-set none", (test::fixtures_dir() / "olmoe_bf16").string()));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* key : {"family:       olmoe", "dense:", "experts:", "kv cache:", "memory plan:", "BF16"})
        EXPECT_NE(r.out.find(key), std::string::npos) << key << " missing in:\n" << r.out;
}

// A failure is one line on stderr, "coli: error: ...", and exit code 1: never a crash.
void expect_one_line_error(const test::ProcessResult& r, const std::string& fragment) {
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.rfind("coli: error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
}

TEST(CliErrors, MissingModelDirectory) {
    expect_one_line_error(test::coli_run("run --model /nonexistent/model --ids 1,2"), "/nonexistent/model");
}

TEST(CliErrors, MalformedModelDirectories) {
    test::TempDir tmp("cli");
    const fs::path src = test::fixtures_dir() / "olmoe_base";
    // No config.json.
    fs::copy_file(src / "model.safetensors", tmp.path() / "model.safetensors");
    expect_one_line_error(test::coli_run(fmt::format("run --model {} --ids 1", tmp.path().string())),
                          "config.json");
    // config.json that is not JSON.
    std::ofstream(tmp.path() / "config.json") << "{\"model_type\": \"olmoe\",";
    expect_one_line_error(test::coli_run(fmt::format("run --model {} --ids 1", tmp.path().string())),
                          "config.json");
    // An unsupported model_type names itself.
    std::ofstream(tmp.path() / "config.json") << "{\"model_type\": \"llama\"}";
    expect_one_line_error(test::coli_run(fmt::format("run --model {} --ids 1", tmp.path().string())),
                          "llama");
    // A truncated weights file.
    fs::copy_file(src / "config.json", tmp.path() / "config.json", fs::copy_options::overwrite_existing);
    fs::resize_file(tmp.path() / "model.safetensors", fs::file_size(src / "model.safetensors") / 2);
    expect_one_line_error(test::coli_run(fmt::format("run --model {} --ids 1", tmp.path().string())),
                          "model.safetensors");
}

TEST(CliErrors, BadIdsAndBadBackend) {
    const std::string model = (test::fixtures_dir() / "olmoe_base").string();
    expect_one_line_error(test::coli_run(fmt::format("run --model {} --ids 1,x", model)), "--ids");
    expect_one_line_error(test::coli_run(fmt::format("run --model {} --ids 1,99999 --hot-set none", model)),
                          "99999");
    expect_one_line_error(test::coli_run(fmt::format("run --model {} --ids 1 --backend tpu", model)),
                          "unknown backend");
    expect_one_line_error(test::coli_run(fmt::format("run --model {} --ids 1 --backend cuda", model)),
                          "backend 'cuda' is unavailable");  // not compiled in, or no device
}

}  // namespace
}  // namespace coli

namespace coli {
namespace {

// The text path end to end on the bundled demo model, against what transformers and the tokenizers
// library produced when the model was made (models/demo/README.md, "Oracle"): the prompt text encodes to
// the oracle's input ids, and the greedy continuation decodes to the oracle's text.
TEST(CliText, RunWithATextPromptStreamsTheOracleContinuation) {
    const auto r = test::coli_run(
        "run \"In the beginning God created the heaven and the earth. And the earth was\" "
        "--max-tokens 8 --temperature 0 --hot-set none");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, " without form, and void;\n");
    EXPECT_NE(r.err.find("decode:"), std::string::npos) << "speed statistics go to stderr";
}

TEST(CliText, ChatKeepsTurnsAndAnswersCommands) {
    test::TempDir tmp("cli");
    const fs::path input = tmp.path() / "turns.txt";
    std::ofstream(input) << "Hello\n/stats\nWho are you?\n/reset\n/exit\nnever read\n";
    const auto r = test::coli_run(
        fmt::format("chat --temperature 0 --max-tokens 24 --hot-set none < {}", input.string()));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("context"), std::string::npos) << "/stats prints the session";
    EXPECT_NE(r.err.find("conversation reset"), std::string::npos);
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2) << "two replies, one line each:\n" << r.out;
}

}  // namespace
}  // namespace coli
