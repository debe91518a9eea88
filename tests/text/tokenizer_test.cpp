// Unit tests of the tokenizer pieces on small hand-made inputs (the real tokenizers are compared with
// reference implementations in reference_test.cpp).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/normalize.h"
#include "text/stream_decoder.h"
#include "text/tokenizer.h"
#include "text/unicode.h"
#include "text/utf8.h"

namespace coli::text {
namespace {

using nlohmann::json;

// A tiny byte-level BPE: the 256 byte tokens, then merges "a b" -> "ab", "ab c" -> "abc", "Ġ a" -> "Ġa".
json tiny_tokenizer_json() {
    json vocab = json::object();
    // Byte b's token has id b, written in GPT-2's byte-level alphabet.
    int next = 256;
    for (int b = 0; b < 256; ++b) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        std::string s;
        utf8_append(s, printable ? b : next++);
        vocab[s] = b;
    }
    vocab["ab"] = 256;
    vocab["abc"] = 257;
    vocab["Ġa"] = 258;
    return json{
        {"version", "1.0"},
        {"added_tokens", json::array({json{{"id", 259},
                                           {"content", "<|end|>"},
                                           {"special", true},
                                           {"normalized", false},
                                           {"lstrip", false},
                                           {"rstrip", false},
                                           {"single_word", false}}})},
        {"normalizer", nullptr},
        {"pre_tokenizer", json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
        {"post_processor", nullptr},
        {"decoder", json{{"type", "ByteLevel"}}},
        {"model", json{{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({"a b", "ab c", "Ġ a"})}}}};
}

TEST(Utf8, ReplacesMaximalSubparts) {
    EXPECT_EQ(utf8_sanitize("a\xE2\x82"
                            "b"),
              "a\xEF\xBF\xBD"
              "b");                                                    // truncated: one U+FFFD
    EXPECT_EQ(utf8_sanitize("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong: two
    EXPECT_EQ(utf8_sanitize("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate: three
    EXPECT_EQ(utf8_incomplete_tail("x\xF0\x9F\x98"), 3u);
    EXPECT_EQ(utf8_incomplete_tail("x\xF0\x9F\x98\x80"), 0u);
    EXPECT_EQ(utf8_incomplete_tail("x\xC0"), 0u);  // can never complete
}

TEST(Unicode, Properties) {
    EXPECT_EQ(unicode_properties('a').category(), GeneralCategory::Ll);
    EXPECT_EQ(unicode_properties(0x4E2D).category(), GeneralCategory::Lo);
    EXPECT_TRUE(unicode_properties(0x4E2D).han());
    EXPECT_FALSE(unicode_properties(0x3042).han());  // hiragana
    EXPECT_TRUE(unicode_properties(0x3000).white_space());
    EXPECT_EQ(unicode_properties(0x0301).category(), GeneralCategory::Mn);
    EXPECT_EQ(unicode_properties(0x10FFFF).category(), GeneralCategory::Cn);
}

TEST(Nfc, ComposesReordersAndKeepsExclusions) {
    EXPECT_EQ(nfc_normalize("e\u0301"), "\u00e9");
    EXPECT_EQ(nfc_normalize("\u212b"), "\u00c5");                // singleton decomposition
    EXPECT_EQ(nfc_normalize("q\u0307\u0323"), "q\u0323\u0307");  // canonical reordering
    EXPECT_EQ(nfc_normalize("\u1100\u1161\u11a8"), "\uac01");    // Hangul L V T
    EXPECT_EQ(nfc_normalize("\u0958"), "\u0915\u093c");          // composition exclusion
    EXPECT_EQ(nfc_normalize("plain ascii"), "plain ascii");
}

TEST(Tokenizer, EncodesMergesByRankAndSplitsAddedTokens) {
    auto tok = Tokenizer::from_tokenizer_json(tiny_tokenizer_json(), nullptr, "tiny");
    EXPECT_EQ(tok->encode("abc", false), (std::vector<int32_t>{257}));
    EXPECT_EQ(tok->encode("abc a", false), (std::vector<int32_t>{257, 258}));
    EXPECT_EQ(tok->encode("ab<|end|>c", false), (std::vector<int32_t>{256, 259, 'c'}));
    EXPECT_EQ(tok->decode(std::vector<int32_t>{257, 258, 259}), "abc a<|end|>");
    EXPECT_EQ(tok->decode(std::vector<int32_t>{257, 259}, true), "abc");
    EXPECT_EQ(tok->token_id("<|end|>"), 259);
    EXPECT_EQ(tok->token_id("Ġa"), 258);
    EXPECT_THROW(tok->decode(std::vector<int32_t>{1000}), Error);
}

TEST(Tokenizer, UnsupportedComponentsAreNamedErrors) {
    auto expect_error = [](json j, const std::string& needle) {
        try {
            Tokenizer::from_tokenizer_json(j, nullptr, "t.json");
            ADD_FAILURE() << "no error for " << needle;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    json j = tiny_tokenizer_json();
    j["normalizer"] = {{"type", "NFKC"}};
    expect_error(j, "normalizer NFKC");
    j = tiny_tokenizer_json();
    j["pre_tokenizer"] = {{"type", "Metaspace"}};
    expect_error(j, "pre_tokenizer Metaspace");
    j = tiny_tokenizer_json();
    j["decoder"] = {{"type", "WordPiece"}};
    expect_error(j, "decoder WordPiece");
    j = tiny_tokenizer_json();
    j["post_processor"] = {{"type", "RobertaProcessing"}};
    expect_error(j, "post_processor RobertaProcessing");
    j = tiny_tokenizer_json();
    j["model"]["byte_fallback"] = true;
    expect_error(j, "byte_fallback");
    j = tiny_tokenizer_json();
    j["model"]["type"] = "Unigram";
    expect_error(j, "model Unigram");
    j = tiny_tokenizer_json();
    j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "\\w+"}}}, {"behavior", "Isolated"}};
    expect_error(j, "escape '\\w'");
    j = tiny_tokenizer_json();
    j["truncation"] = {{"max_length", 512}};
    expect_error(j, "truncation");
}

TEST(Tokenizer, TiktokenRankBpe) {
    // Ranks: the 256 bytes, then "ab" (256) and "abc" (257). Base64 of each byte written out.
    std::string ranks;
    static const char* kB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int b = 0; b < 256; ++b)
        ranks += std::string{kB64[b >> 2], kB64[(b & 3) << 4], '=', '='} + " " + std::to_string(b) + "\n";
    ranks += "YWI= 256\nYWJj 257\n";
    auto tok = Tokenizer::from_tiktoken(ranks, R"(\p{L}+|\s+)", {{.content = "<|s|>", .id = 300}}, "tiny");
    EXPECT_EQ(tok->encode("abc ab<|s|>", false), (std::vector<int32_t>{257, ' ', 256, 300}));
    EXPECT_EQ(tok->decode(std::vector<int32_t>{257, 300}), "abc<|s|>");
}

TEST(StreamDecoder, HoldsBackSplitCharactersAndMatchesDecode) {
    auto tok = Tokenizer::from_tokenizer_json(tiny_tokenizer_json(), nullptr, "tiny");
    // "é" = C3 A9 and "😀" = F0 9F 98 80, fed one byte token at a time, with an invalid byte in between.
    std::vector<int32_t> ids = {'a', 0xC3, 0xA9, 0xF0, 0x9F, 0x98, 0x80, 0xFF, 0xE2, 0x82};
    StreamDecoder stream(*tok);
    std::vector<std::string> parts;
    for (int32_t id : ids) parts.push_back(stream.push(id));
    parts.push_back(stream.finish());
    EXPECT_EQ(parts[1], "");
    EXPECT_EQ(parts[2], "\u00e9");
    EXPECT_EQ(parts[5], "");
    EXPECT_EQ(parts[6], "\U0001F600");
    EXPECT_EQ(parts[7], "\xEF\xBF\xBD");   // 0xFF is invalid at once
    EXPECT_EQ(parts[10], "\xEF\xBF\xBD");  // the truncated E2 82 at the end: one U+FFFD
    std::string all;
    for (const auto& p : parts) all += p;
    EXPECT_EQ(all, tok->decode(ids));
}

}  // namespace
}  // namespace coli::text
