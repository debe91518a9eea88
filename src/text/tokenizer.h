// Text <-> token ids for the model families colibri runs: HF `tokenizer.json` byte-level BPE (OLMoE /
// GPT-NeoX, DeepSeek V3/V4, GLM-5, Llama 3, Qwen3) and tiktoken rank BPE (`tiktoken.model`, Kimi).
//
// Encoding: invalid UTF-8 is first replaced (each maximal invalid subpart by U+FFFD, as a WHATWG
// TextDecoder does), added/special tokens are cut out of the raw text, the rest is normalized,
// pre-tokenized and BPE-encoded; `add_special` applies the tokenizer.json post-processor.
// Decoding concatenates the tokens' bytes and replaces invalid UTF-8 the same way.
// Any component or option of the files that is not implemented is a coli::Error naming it at load.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "text/added_tokens.h"
#include "text/bpe.h"
#include "text/pre_tokenizer.h"

namespace coli::text {

// A normalizer step of tokenizer.json.
struct NormalizerStep {
    enum class Kind { kNfc, kPrepend, kReplace };
    Kind kind = Kind::kNfc;
    std::string text;                    // kPrepend: prefix; kReplace: the replacement
    std::string literal;                 // kReplace of a String pattern
    std::shared_ptr<const Regex> regex;  // kReplace of a Regex pattern
};

class Tokenizer {
public:
    // Loads the tokenizer of a model directory: tokenizer.json (+ tokenizer_config.json), or
    // tiktoken.model (+ tokenizer_config.json and the pattern from tokenization_kimi.py).
    static std::unique_ptr<Tokenizer> load(const std::filesystem::path& model_dir);

    // From parsed tokenizer.json and (optional, may be null) tokenizer_config.json. `what` names the
    // source in errors.
    static std::unique_ptr<Tokenizer> from_tokenizer_json(const nlohmann::json& tokenizer,
                                                          const nlohmann::json* config,
                                                          std::string_view what);

    // From the text of a tiktoken ranks file ("base64 rank" lines, rank = id), the split pattern, and the
    // special tokens (matched in the raw text, ids above the ranks).
    static std::unique_ptr<Tokenizer> from_tiktoken(std::string_view ranks_text, std::string_view pattern,
                                                    std::vector<AddedToken> specials, std::string_view what);

    std::vector<int32_t> encode(std::string_view text, bool add_special = true) const;

    // Throws coli::Error for an id outside the vocabulary.
    std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

    // The raw bytes of one token (what decode concatenates before UTF-8 replacement).
    const std::string& token_bytes(int32_t id) const;

    // The id of a token given as it appears in the files: an added token's content, or a vocab entry
    // (tokenizer.json writes byte-level tokens in the GPT-2 alphabet, e.g. "Ġthe").
    std::optional<int32_t> token_id(std::string_view token) const;

    bool is_special(int32_t id) const;
    // One more than the largest id.
    int32_t vocab_size() const { return static_cast<int32_t>(id_bytes_.size()); }

    // From tokenizer_config.json when present: bos/eos tokens and whether the model's HF tokenizer class
    // adds BOS (`add_bos_token`). encode() follows tokenizer.json's post-processor, as the tokenizers
    // library does; a caller that wants transformers' behaviour adds bos_id() when add_bos() is true.
    std::optional<int32_t> bos_id() const { return bos_id_; }
    std::optional<int32_t> eos_id() const { return eos_id_; }
    bool add_bos() const { return add_bos_; }

    // Pieces up to this many bytes have their ids remembered (per thread), since words repeat.
    static constexpr size_t kCachedPieceBytes = 24;

private:
    Tokenizer();
    friend struct TokenizerLoader;  // tokenizer_json.cpp, tiktoken.cpp

    void encode_plain(std::string_view text, std::vector<int32_t>& out) const;
    std::string normalize(std::string_view text) const;

    AddedTokenMatcher raw_added_;         // matched before normalization
    AddedTokenMatcher normalized_added_;  // matched in the normalized text
    std::vector<NormalizerStep> normalizer_;
    std::vector<SplitStep> pre_tokenizer_;
    BpeModel bpe_;
    std::vector<int32_t> prefix_ids_, suffix_ids_;  // added by the post-processor when add_special

    std::vector<std::string> id_bytes_;
    std::vector<uint8_t> special_;
    std::unordered_map<std::string, int32_t> token_ids_;
    std::optional<int32_t> bos_id_, eos_id_;
    bool add_bos_ = false;
    uint64_t serial_;  // tells this tokenizer's cached pieces from another's (addresses can be reused)
};

}  // namespace coli::text
