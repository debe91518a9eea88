// `coli tokenize` against references nobody here wrote: the ids @huggingface/tokenizers and the official
// tiktoken WASM give for tests/text/reference's corpus (make_reference.mjs), through --jsonl with and
// without --special, from directories that hold tokenizer files only; and --chat against @huggingface/jinja's
// render of a real template (tests/text/template_reference). Also its output shapes and its errors. Without
// the npm packages (.ci/run installs them) the reference comparisons skip, loudly.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "coli_exec.h"
#include "text/utf8.h"

namespace coli::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kSource = COLI_SOURCE_DIR;
const fs::path kTokenizerReference = kSource / "tests/text/reference";
const fs::path kTemplateReference = kSource / "tests/text/template_reference";
const fs::path kDemo = kSource / "models/demo";

std::string base64_decode(const std::string& s) {
    constexpr int kBitsPerChar = 6, kBitsPerByte = 8;
    std::string out;
    uint32_t acc = 0;
    int bits = 0;
    for (char c : s) {
        const int v = (c >= 'A' && c <= 'Z')   ? c - 'A'
                      : (c >= 'a' && c <= 'z') ? c - 'a' + 26
                      : (c >= '0' && c <= '9') ? c - '0' + 52
                      : c == '+'               ? 62
                      : c == '/'               ? 63
                                               : -1;
        if (v < 0) break;
        acc = (acc << kBitsPerChar) | static_cast<uint32_t>(v);
        bits += kBitsPerChar;
        if (bits >= kBitsPerByte) {
            bits -= kBitsPerByte;
            out += static_cast<char>((acc >> bits) & 0xFF);
        }
    }
    return out;
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

// "3,17,42\n" -> {3, 17, 42}.
std::vector<int32_t> ids_of(const std::string& text) {
    std::vector<int32_t> ids;
    std::istringstream in(text);
    for (std::string item; std::getline(in, item, ',');)
        if (item != "\n" && !item.empty()) ids.push_back(std::stoi(item));
    return ids;
}

std::string stdout_of(const std::string& cmd) {
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(cmd.c_str(), "r"), ::pclose);
    std::string out;
    if (!pipe) return out;
    char buf[1 << 16];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe.get())) > 0;) out.append(buf, n);
    return out;
}

// Why node and the npm packages under `dir` cannot run here (`package` names one), or "".
std::string reference_missing(const fs::path& dir, const std::string& package) {
    if (!fs::exists(dir / "node_modules" / package))
        return "the npm reference packages are not installed: run `npm ci` in " +
               fs::relative(dir, kSource).string() + " (.ci/run does)";
    if (std::system("node --version > /dev/null 2>&1") != 0) return "node is not on PATH";
    return "";
}

class TokenizeReference : public ::testing::TestWithParam<std::string> {};

// The corpus through --jsonl, one process per run, against the reference's ids; the tokenizer directory
// holds tokenizer files only (the edited tokenizer.json + config, or Kimi's tiktoken layout).
TEST_P(TokenizeReference, JsonlIdsMatchTheReference) {
    if (std::string why = reference_missing(kTokenizerReference, "@huggingface/tokenizers"); !why.empty()) {
        std::cerr << "\n*** SKIPPED: coli tokenize vs the tokenizer references: " << why << " ***\n\n";
        GTEST_SKIP() << why;
    }
    ScratchDir scratch("tokenize-ref");
    const std::string cmd = "cd '" + kTokenizerReference.string() + "' && node make_reference.mjs '" +
                            scratch.path().string() + "' " + GetParam() + " > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const json reference = json::parse(read_bytes(scratch / (GetParam() + ".json")));
    const fs::path dir = reference["dir"].get<std::string>();
    ASSERT_FALSE(fs::exists(dir / "config.json")) << "the directory should hold tokenizer files only";

    // JSON holds only well-formed UTF-8: the corpus's strings with invalid bytes stay with reference_test.
    std::string corpus;
    std::vector<const json*> cases;
    for (const json& c : reference["cases"]) {
        const std::string text = base64_decode(c["text"]);
        if (!text::utf8_is_valid(text)) continue;
        corpus += json(text).dump() + "\n";
        cases.push_back(&c);
    }
    constexpr size_t kMinCases = 900;  // of the 1055, 955 are well-formed UTF-8
    ASSERT_GE(cases.size(), kMinCases);
    write_bytes(scratch / "corpus.jsonl", corpus);
    for (const bool special : {false, true}) {
        std::vector<std::string> args = {"tokenize", "--model", dir.string(), "--jsonl",
                                         (scratch / "corpus.jsonl").string()};
        if (special) args.push_back("--special");
        ScratchDir run_dir("tokenize-run");
        const ExecResult r = coli_exec(args, run_dir.path());
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const std::vector<std::string> lines = lines_of(r.out);
        ASSERT_EQ(lines.size(), cases.size());
        size_t same = 0, shown = 0;
        constexpr size_t kShownFailures = 5;
        for (size_t i = 0; i < cases.size(); ++i) {
            const json want = (*cases[i])[special ? "ids_special" : "ids"];
            const bool ok = json::parse(lines[i]) == want;
            same += ok;
            if (!ok && shown++ < kShownFailures)
                ADD_FAILURE() << GetParam() << (special ? " --special" : "") << ": line " << i + 1
                              << "\n  ours:      " << lines[i] << "\n  reference: " << want.dump();
        }
        std::cout << "[tokenize] " << GetParam() << (special ? " --special" : "") << ": " << same << "/"
                  << cases.size() << " lines identical to the reference\n";
        EXPECT_EQ(same, cases.size());
    }
}

// llama3_template: a tokenizer.json whose post-processor adds <|begin_of_text|> (--special matters);
// kimi_o200k: tiktoken.model + tokenization_kimi.py + tokenizer_config.json.
INSTANTIATE_TEST_SUITE_P(Tokenizers, TokenizeReference, ::testing::Values("llama3_template", "kimi_o200k"),
                         [](const auto& info) { return info.param; });

// --chat renders a conversation (system, user, assistant, user) as @huggingface/jinja renders Qwen3's real
// template (tokenizer files only, from
// npm); --chat --ids are the ids of that text as --jsonl gives them (checked against the reference above).
TEST(TokenizeCli, ChatMatchesHuggingFaceJinja) {
    if (std::string why = reference_missing(kTemplateReference, "@huggingface/jinja"); !why.empty()) {
        std::cerr << "\n*** SKIPPED: coli tokenize --chat vs @huggingface/jinja: " << why << " ***\n\n";
        GTEST_SKIP() << why;
    }
    const json renders =
        json::parse(stdout_of("node '" + (kTemplateReference / "render_reference.mjs").string() + "' qwen3"));
    ASSERT_EQ(renders["results"].size(), 1u);
    const json& result = renders["results"][0];
    const std::string dir = result["model_dir"];
    ScratchDir scratch("tokenize-chat");
    int compared = 0;
    for (const json& render : result["renders"]) {
        const std::string name = render["case"];
        if (!render["add_generation_prompt"].get<bool>() || name != "multi_turn") continue;
        ++compared;
        const std::string expected = render["output"];
        // The file may be the bare list or a request body with "messages".
        write_bytes(scratch / "list.json", render["messages"].dump());
        write_bytes(scratch / "body.json", json{{"messages", render["messages"]}, {"model", "x"}}.dump());
        for (const char* file : {"list.json", "body.json"}) {
            const ExecResult r =
                coli_exec({"tokenize", "--model", dir, "--chat", (scratch / file).string()}, scratch.path());
            ASSERT_EQ(r.exit_code, 0) << r.err;
            EXPECT_EQ(r.out, expected) << name << " (" << file << ")";
        }
        write_bytes(scratch / "prompt.jsonl", json(expected).dump() + "\n");
        const ExecResult plain = coli_exec(
            {"tokenize", "--model", dir, "--jsonl", (scratch / "prompt.jsonl").string()}, scratch.path());
        ASSERT_EQ(plain.exit_code, 0) << plain.err;
        const ExecResult ids =
            coli_exec({"tokenize", "--model", dir, "--chat", (scratch / "list.json").string(), "--ids"},
                      scratch.path());
        ASSERT_EQ(ids.exit_code, 0) << ids.err;
        EXPECT_EQ(json(ids_of(ids.out)), json::parse(plain.out)) << name;
    }
    EXPECT_EQ(compared, 1);
}

// A directory with the demo model's tokenizer files and nothing else tokenizes as the model does; ids are
// printed as `coli run --ids` takes them, pieces one per line.
TEST(TokenizeCli, TokenizerFilesAloneAndOutputShapes) {
    ScratchDir scratch("tokenize-shapes");
    const fs::path only = scratch / "tokenizer-only";
    fs::create_directories(only);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) fs::copy_file(kDemo / f, only / f);
    const std::string text = "In the beginning God created the heaven";
    const ExecResult model = coli_exec({"tokenize", "--model", kDemo.string(), text}, scratch.path());
    const ExecResult files = coli_exec({"tokenize", "--model", only.string(), text}, scratch.path());
    ASSERT_EQ(model.exit_code, 0) << model.err;
    ASSERT_EQ(files.exit_code, 0) << files.err;
    EXPECT_EQ(model.out, files.out);
    const std::vector<int32_t> ids = ids_of(files.out);
    ASSERT_GT(ids.size(), 3u);
    EXPECT_EQ(files.out.back(), '\n');

    const ExecResult pieces =
        coli_exec({"tokenize", "--model", only.string(), "--pieces", text}, scratch.path());
    ASSERT_EQ(pieces.exit_code, 0) << pieces.err;
    const std::vector<std::string> lines = lines_of(pieces.out);
    ASSERT_EQ(lines.size(), ids.size());
    std::string joined;
    for (size_t i = 0; i < lines.size(); ++i) {
        const size_t tab = lines[i].find('\t');
        ASSERT_NE(tab, std::string::npos) << lines[i];
        EXPECT_EQ(std::stoi(lines[i].substr(0, tab)), ids[i]);
        joined += json::parse(lines[i].substr(tab + 1)).get<std::string>();
    }
    EXPECT_EQ(joined, text);

    // The demo template: <|user|>\n...<|end|>\n then the generation prompt.
    write_bytes(scratch / "chat.json", R"([{"role": "user", "content": "Hi"}])");
    const ExecResult chat = coli_exec(
        {"tokenize", "--model", only.string(), "--chat", (scratch / "chat.json").string()}, scratch.path());
    ASSERT_EQ(chat.exit_code, 0) << chat.err;
    EXPECT_EQ(chat.out, "<|user|>\nHi<|end|>\n<|assistant|>\n");
}

TEST(TokenizeCli, ErrorsAreOneLineAndNameTheCause) {
    ScratchDir scratch("tokenize-errors");
    const auto fails = [&](const std::vector<std::string>& args, const std::string& fragment) {
        const ExecResult r = coli_exec(args, scratch.path());
        EXPECT_NE(r.exit_code, 0) << "should fail: " << r.out;
        EXPECT_NE(r.err.find(fragment), std::string::npos) << "stderr: " << r.err;
    };
    const std::string demo = kDemo.string();
    write_bytes(scratch / "bad.jsonl", "\"fine\"\n\"also fine\"\n[\"not a string\"]\n\"never read\"\n");
    fails({"tokenize", "--model", demo, "--jsonl", (scratch / "bad.jsonl").string()}, "bad.jsonl:3:");
    write_bytes(scratch / "broken.jsonl", "\"fine\"\n\"unterminated\n");
    fails({"tokenize", "--model", demo, "--jsonl", (scratch / "broken.jsonl").string()}, "broken.jsonl:2:");
    fails({"tokenize", "--model", demo}, "exactly one of");
    fails({"tokenize", "--model", demo, "text", "--jsonl", (scratch / "bad.jsonl").string()},
          "exactly one of");
    fails({"tokenize", "--model", demo, "--ids", "text"}, "--ids");
    fails({"tokenize", "--model", (scratch / "nothing").string(), "text"}, "tokenizer");
    write_bytes(scratch / "chat.json", R"([{"content": "no role"}])");
    fails({"tokenize", "--model", demo, "--chat", (scratch / "chat.json").string()}, "role");
    fails({"tokenize", "--model", demo, "--chat", (scratch / "chat.json").string(), "--special"},
          "--special");
    fails({"tokenize", "--model", demo, "--jsonl", (scratch / "missing.jsonl").string()}, "missing.jsonl");
}

}  // namespace
}  // namespace coli::test
