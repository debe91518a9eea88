// A byte-level tokenizer for a synthetic checkpoint (`coli synth` writes none), so that a server takes
// text: one token per byte (the 256 bytes, then filler tokens "t<N>" up to the vocabulary), no merges.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace coli::test {

// GPT-2's byte-to-character map of byte-level BPE: printable bytes stand for themselves, the others for
// characters from 256 on.
inline std::string byte_char(int b) {
    static const std::vector<std::string> chars = [] {
        std::vector<std::string> c(256);
        int extra = 0;
        const auto utf8 = [](int cp) {
            return cp < 0x80 ? std::string(1, char(cp))
                             : std::string{char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
        };
        for (int v = 0; v < 256; ++v) {
            const bool keep = (v >= '!' && v <= '~') || (v >= 0xA1 && v <= 0xAC) || v >= 0xAE;
            c[v] = utf8(keep ? v : 256 + extra++);
        }
        return c;
    }();
    return chars[b];
}

// Writes tokenizer.json and tokenizer_config.json beside the checkpoint in `model` (its config.json gives
// the vocabulary size).
inline void byte_tokenizer_write(const std::filesystem::path& model) {
    using nlohmann::json;
    const int64_t vocab = json::parse(std::ifstream(model / "config.json"))["vocab_size"];
    json tokens = json::object();
    for (int b = 0; b < 256; ++b) tokens[byte_char(b)] = b;
    for (int64_t i = 256; i < vocab; ++i) tokens["t" + std::to_string(i)] = i;
    const json tokenizer = {
        {"version", "1.0"},
        {"added_tokens", json::array()},
        {"normalizer", nullptr},
        {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
        {"post_processor", nullptr},
        {"decoder", {{"type", "ByteLevel"}}},
        {"model", {{"type", "BPE"}, {"vocab", tokens}, {"merges", json::array()}}}};
    std::ofstream(model / "tokenizer.json") << tokenizer.dump();
    std::ofstream(model / "tokenizer_config.json") << json{{"add_bos_token", false}}.dump();
}

}  // namespace coli::test
